"""with_getitem: apply a layer to one item of a tuple, passing the other items through."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from ..config import registry
from ..model import Model
from .with_array import _check_layer

InT = Tuple[Any, ...]
OutT = Tuple[Any, ...]


@registry.layers("with_getitem.v1")
def with_getitem(idx: int, layer: Model) -> Model[InT, OutT]:
    """Replace item `idx` of the input tuple by `layer`'s output on it; the gradient likewise."""
    _check_layer("with_getitem", layer)
    if not isinstance(idx, int) or isinstance(idx, bool):
        raise TypeError(f"with_getitem: idx must be an int, got {type(idx).__name__} ({idx!r}).")
    return Model(f"with_getitem({layer.name})", forward, init=init, layers=[layer], attrs={"idx": idx})


def forward(model: Model[InT, OutT], items: InT, is_train: bool) -> Tuple[OutT, Callable]:
    i = _position(model, items)
    Y_i, backprop_item = model.layers[0](items[i], is_train)

    def backprop(d_items: OutT) -> InT:
        j = _position(model, d_items)
        return _replace(d_items, j, backprop_item(d_items[j]))

    return _replace(items, i, Y_i), backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    X_i = X[_position(model, X)] if X is not None else None
    Y_i = Y[_position(model, Y)] if Y is not None else None
    model.layers[0].initialize(X=X_i, Y=Y_i)


def _position(model: Model, items: Any) -> int:
    """The non-negative index of attrs["idx"] in `items` (negative idx counts from the end)."""
    if not isinstance(items, (tuple, list)):
        raise TypeError(f"Model '{model.name}' expects a tuple, got {type(items).__name__}.")
    idx = model.attrs["idx"]
    n = len(items)
    if not -n <= idx < n:
        raise IndexError(
            f"Model '{model.name}': idx {idx} is out of range for a tuple of {n} items."
        )
    return idx % n


def _replace(items: Any, i: int, value: Any) -> Any:
    out = list(items)
    out[i] = value
    return tuple(out) if isinstance(items, tuple) else out
