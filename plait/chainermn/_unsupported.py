"""Names of ChainerMN 1.3 that plait.chainermn has but does not support: using one raises
NotImplementedError saying why (importing it does not, so scripts that only import them run)."""
from __future__ import annotations

from typing import Any, Callable


def unsupported_function(name: str, why: str) -> Callable[..., Any]:
    def function(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"chainermn.{name} is not supported by plait.chainermn: {why}")

    function.__name__ = function.__qualname__ = name.rsplit(".", 1)[-1]
    function.__doc__ = f"Not supported by plait.chainermn (raises NotImplementedError): {why}"
    return function


def unsupported_class(name: str, why: str) -> type:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"chainermn.{name} is not supported by plait.chainermn: {why}")

    short = name.rsplit(".", 1)[-1]
    return type(short, (), {
        "__init__": __init__,
        "__doc__": f"Not supported by plait.chainermn (raises NotImplementedError): {why}",
        "__module__": f"plait.chainermn.{name.rsplit('.', 1)[0]}" if "." in name else "plait.chainermn",
    })
