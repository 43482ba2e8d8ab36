"""resizable: a container whose one layer can be swapped for a copy with a different nO."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, TypeVar

from ..config import registry
from ..model import Model
from ..types import Floats2d

InT = TypeVar("InT")
OutT = TypeVar("OutT")


@registry.layers("resizable.v1")
def resizable(layer: Model, resize_layer: Callable) -> Model[InT, OutT]:
    """Hold `layer` so that resize_model(model, nO) can replace it by resize_layer(layer, nO).

    The container copies the layer's dims at creation and otherwise just runs it.
    """
    if not isinstance(layer, Model):
        raise TypeError(f"Cannot create resizable: 'layer' must be a Model, got {type(layer).__name__}.")
    if not callable(resize_layer):
        raise TypeError(
            f"Cannot create resizable({layer.name}): 'resize_layer' must be callable "
            f"(e.g. resize_linear_weighted), got {type(resize_layer).__name__}."
        )
    return Model(
        f"resizable({layer.name})",
        forward,
        init=init,
        layers=[layer],
        attrs={"resize_layer": resize_layer},
        dims={name: layer.maybe_get_dim(name) for name in layer.dim_names},
    )


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Any:
    Y, backprop_layer = model.layers[0](X, is_train=is_train)

    def backprop(dY: OutT) -> InT:
        return backprop_layer(dY)

    return Y, backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    model.layers[0].initialize(X, Y)


def resize_model(model: Model[InT, OutT], new_nO: int) -> Model[InT, OutT]:
    """Replace the layer of a resizable model by a copy with nO=new_nO; returns the model."""
    if "resize_layer" not in model.attrs or len(model.layers) != 1:
        raise ValueError(
            f"Cannot resize model '{model.name}': only models made by resizable(layer, resize_layer) "
            f"can be resized."
        )
    model.layers[0] = model.attrs["resize_layer"](model.layers[0], new_nO)
    return model


def resize_linear_weighted(
    layer: Model[Floats2d, Floats2d], new_nO: int, *, fill_defaults: Optional[Dict[str, float]] = None
) -> Model[Floats2d, Floats2d]:
    """A copy of a W/b layer (dims nO, nI) with nO=new_nO that keeps the old output rows.

    The old rows of every param are copied; new rows hold fill_defaults[name] (default 0).
    An uninitialized layer, or one with an unchanged nO, is updated or returned in place.
    """
    if layer.layers or layer.ref_names or layer.shims:
        raise ValueError(
            f"Cannot resize model '{layer.name}': resize_linear_weighted handles single layers "
            f"with params W and b, not combinators, layers with refs or wrapped frameworks."
        )
    if layer.has_dim("nO") is None:
        layer.set_dim("nO", new_nO)
        return layer
    if new_nO == layer.get_dim("nO"):
        return layer
    if layer.has_dim("nI") is None:
        layer.set_dim("nO", new_nO, force=True)
        return layer
    dims = {name: layer.maybe_get_dim(name) for name in layer.dim_names}
    dims["nO"] = new_nO
    new_layer: Model[Floats2d, Floats2d] = Model(
        layer.name,
        layer._func,
        dims=dims,
        params={name: None for name in layer.param_names},
        init=layer.init,
        attrs=layer.attrs,
        refs={},
        ops=layer.ops,
    )
    new_layer.initialize()
    for name in layer.param_names:
        if layer.has_param(name):
            filler = (fill_defaults or {}).get(name, 0)
            _resize_parameter(name, layer, new_layer, filler=filler)
    return new_layer


def _resize_parameter(name: str, layer: Model, new_layer: Model, filler: float = 0) -> None:
    larger = new_layer.get_param(name)
    smaller = layer.get_param(name)
    n_keep = min(len(smaller), len(larger))
    larger[:n_keep] = smaller[:n_keep]
    larger[n_keep:] = filler
    new_layer.set_param(name, larger)
