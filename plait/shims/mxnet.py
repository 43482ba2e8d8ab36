"""MXNetShim: hold an MXNet Gluon block inside a Model (not implemented yet in plait)."""
from __future__ import annotations

from typing import Any

from .shim import Shim


def _unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what}: wrapping MXNet models is not implemented yet in plait. Build the model from "
        f"plait layers instead, or run MXNet-wrapping code with thinc."
    )


class MXNetShim(Shim):
    """Adapter between plait arrays and an MXNet Gluon block (ArgsKwargs in, NDArrays out).

    Not implemented yet: creating one raises NotImplementedError.
    """

    def __init__(self, model: Any, config: Any = None, optimizer: Any = None) -> None:
        raise _unsupported(type(self).__name__)


__all__ = ["MXNetShim"]
