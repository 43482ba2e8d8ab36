"""map_list: apply a layer to each item of a list separately."""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple, TypeVar

from ..model import Model

InT = TypeVar("InT")
OutT = TypeVar("OutT")


def map_list(layer: Model[InT, OutT]) -> Model[List[InT], List[OutT]]:
    """[layer(X) for X in Xs], with the gradients mapped back the same way."""
    if not isinstance(layer, Model):
        raise TypeError(f"Cannot create map_list: expected a Model, got {type(layer).__name__}.")
    return Model("map_list", forward, init=init, layers=[layer])


def forward(
    model: Model[List[InT], List[OutT]], Xs: List[InT], is_train: bool
) -> Tuple[List[OutT], Callable[[List[OutT]], List[InT]]]:
    layer = model.layers[0]
    Ys = []
    callbacks = []
    for X in Xs:
        Y, backprop_layer = layer(X, is_train)
        Ys.append(Y)
        callbacks.append(backprop_layer)

    def backprop(dYs: List[OutT]) -> List[InT]:
        if len(dYs) != len(callbacks):
            raise ValueError(
                f"Cannot backprop through model '{model.name}': got {len(dYs)} gradients for "
                f"{len(callbacks)} items."
            )
        return [backprop_layer(dY) for backprop_layer, dY in zip(callbacks, dYs)]

    return Ys, backprop


def init(
    model: Model[List[InT], List[OutT]], X: Optional[List[InT]] = None, Y: Optional[List[OutT]] = None
) -> None:
    # The first item is a representative sample of every item.
    model.layers[0].initialize(X=X[0] if X else None, Y=Y[0] if Y else None)
