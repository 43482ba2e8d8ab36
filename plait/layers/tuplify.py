"""tuplify: give each layer its own copy of the input and return their outputs as a tuple."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple, TypeVar

from ..config import registry
from ..model import Model
from .add import _sum_values

InT = TypeVar("InT")
OutT = Tuple


@registry.layers("tuplify.v1")
def tuplify(layer1: Model[InT, Any], layer2: Model[InT, Any], *layers: Model) -> Model[InT, Tuple]:
    """(f(X), g(X), ...): e.g. to pass both transformed data and the raw input downstream."""
    all_layers: List[Model] = [layer1, layer2, *layers]
    for i, layer in enumerate(all_layers):
        if not isinstance(layer, Model):
            raise TypeError(f"Cannot tuplify: argument {i} is a {type(layer).__name__}, not a Model.")
    return Model(
        "tuple(" + ", ".join(layer.name for layer in all_layers) + ")",
        forward,
        init=init,
        layers=all_layers,
        dims={"nI": None},
    )


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    Ys = []
    callbacks = []
    for layer in model.layers:
        Y, backprop_layer = layer(X, is_train)
        Ys.append(Y)
        callbacks.append(backprop_layer)

    def backprop(dYs: OutT) -> InT:
        if len(dYs) != len(callbacks):
            raise ValueError(
                f"Cannot backprop through model '{model.name}': expected {len(callbacks)} gradients "
                f"(one per layer), got {len(dYs)}."
            )
        dX = None
        for backprop_layer, dY in zip(callbacks, dYs):
            dX = _sum_values(dX, backprop_layer(dY), model.name)
        return dX

    return tuple(Ys), backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    if Y is not None and len(Y) != len(model.layers):
        raise ValueError(
            f"Cannot initialize model '{model.name}': Y must hold one output per layer "
            f"({len(model.layers)}), got {len(Y)}."
        )
    # Y[i] describes layer i's output; it is only used while that layer's nO is open.
    for i, layer in enumerate(model.layers):
        if Y is not None and layer.has_dim("nO") is None:
            layer.initialize(X=X, Y=Y[i])
        else:
            layer.initialize(X=X)
    if model.layers[0].has_dim("nI"):
        model.set_dim("nI", model.layers[0].get_dim("nI"))


# Thinc's module-level name for tuplify's forward function.
tuplify_forward = forward
