"""with_signpost_interval: mark a layer's init, forward and backprop as macOS signpost intervals."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple, TypeVar

from .. import compat
from ..model import Model
from .with_array import _check_layer

if TYPE_CHECKING:
    import os_signpost

_ModelT = TypeVar("_ModelT", bound=Model)


def with_signpost_interval(
    layer: _ModelT,
    signposter: "os_signpost.Signposter",
    name: Optional[str] = None,
) -> _ModelT:
    """Wrap `layer`'s init, forward and backprop in `signposter` intervals for Instruments.

    The intervals are named "<name> init" / "forward" / "backprop"; `name` defaults to the
    layer's name. Returns the same (edited) layer. Needs the `os_signpost` package (macOS).
    """
    if not compat.has_os_signpost:
        raise ValueError(
            "with_signpost_interval requires the 'os_signpost' package (macOS only): "
            "pip install os-signpost, or use with_nvtx_range / with_debug instead."
        )
    _check_layer("with_signpost_interval", layer)
    name = layer.name if name is None else name
    orig_forward = layer._func
    orig_init = layer.init

    @functools.wraps(orig_forward)
    def forward(model: Model, X: Any, is_train: bool) -> Tuple[Any, Callable]:
        with signposter.use_interval(f"{name} forward"):
            Y, backprop_layer = orig_forward(model, X, is_train=is_train)

        def backprop(dY: Any) -> Any:
            with signposter.use_interval(f"{name} backprop"):
                return backprop_layer(dY)

        return Y, backprop

    def init(model: Model, X: Any = None, Y: Any = None) -> Any:
        with signposter.use_interval(f"{name} init"):
            return orig_init(model, X=X, Y=Y)

    layer.replace_callbacks(forward, init=init)
    return layer
