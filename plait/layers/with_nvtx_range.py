"""with_nvtx_range: mark a layer's forward and backprop as NVTX ranges for CUDA profilers."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Tuple, TypeVar

from ..model import Model
from ..util import use_nvtx_range
from .with_array import _check_layer

_ModelT = TypeVar("_ModelT", bound=Model)


def with_nvtx_range(
    layer: _ModelT,
    name: Optional[str] = None,
    *,
    forward_color: int = -1,
    backprop_color: int = -1,
) -> _ModelT:
    """Wrap `layer`'s forward and backprop in NVTX ranges "<name> forward" / "<name> backprop".

    `name` defaults to the layer's name. Returns the same (edited) layer; without CuPy the
    ranges are no-ops.
    """
    _check_layer("with_nvtx_range", layer)
    name = layer.name if name is None else name
    orig_forward = layer._func
    orig_init = layer.init

    @functools.wraps(orig_forward)
    def forward(model: Model, X: Any, is_train: bool) -> Tuple[Any, Callable]:
        with use_nvtx_range(f"{name} forward", forward_color):
            Y, backprop_layer = orig_forward(model, X, is_train=is_train)

        def backprop(dY: Any) -> Any:
            with use_nvtx_range(f"{name} backprop", backprop_color):
                return backprop_layer(dY)

        return Y, backprop

    def init(model: Model, X: Any = None, Y: Any = None) -> Any:
        return orig_init(model, X=X, Y=Y)

    layer.replace_callbacks(forward, init=init)
    return layer
