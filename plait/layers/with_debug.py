"""with_debug: call user hooks on a layer's init, forward and backprop (for debugging)."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Tuple, TypeVar

from ..model import Model
from .with_array import _check_layer

_ModelT = TypeVar("_ModelT", bound=Model)


def do_nothing(*args: Any, **kwargs: Any) -> None:
    """The default hook: ignores its arguments."""


def with_debug(
    layer: _ModelT,
    name: Optional[str] = None,
    *,
    on_init: Callable[[Model, Any, Any], None] = do_nothing,
    on_forward: Callable[[Model, Any, bool], None] = do_nothing,
    on_backprop: Callable[[Any], None] = do_nothing,
) -> _ModelT:
    """Make `layer` call on_init(model, X, Y), on_forward(model, X, is_train) and on_backprop(dY)
    before its own init, forward and backprop; returns the same (edited) layer.

    The layer is renamed "debug:<name>", `name` defaulting to the layer's own name, as the
    layers page documents. (Thinc 8.3 computes that name and then drops it.)
    """
    _check_layer("with_debug", layer)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"with_debug: name must be a str or None, got {type(name).__name__} ({name!r}).")
    layer.name = f"debug:{layer.name if name is None else name}"
    orig_forward = layer._func
    orig_init = layer.init

    # NOTE: the hooks call the original callbacks with the `model` they are given, not the
    # captured `layer`, so a copy of the model runs on its own params.
    @functools.wraps(orig_forward)
    def forward(model: Model, X: Any, is_train: bool) -> Tuple[Any, Callable]:
        on_forward(model, X, is_train)
        Y, backprop_layer = orig_forward(model, X, is_train=is_train)

        def backprop(dY: Any) -> Any:
            on_backprop(dY)
            return backprop_layer(dY)

        return Y, backprop

    def init(model: Model, X: Any = None, Y: Any = None) -> Any:
        on_init(model, X, Y)
        return orig_init(model, X=X, Y=Y)

    layer.replace_callbacks(forward, init=init)
    return layer
