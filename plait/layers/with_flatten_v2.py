"""with_flatten (v2): run a list -> list layer over the items of every sequence at once."""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple, TypeVar

from ..config import registry
from ..model import Model
from .with_array import _check_layer
from .with_flatten import _check_rows, _flatten, _split

InItemT = TypeVar("InItemT")
OutItemT = TypeVar("OutItemT")
ItemT = TypeVar("ItemT")

NestedT = List[List[ItemT]]
FlatT = List[ItemT]


@registry.layers("with_flatten.v2")
def with_flatten_v2(
    layer: Model[FlatT[InItemT], FlatT[OutItemT]],
) -> Model[NestedT[InItemT], NestedT[OutItemT]]:
    """Concatenate the item lists for `layer`; regroup its output list the same way.

    [[a, b], [c]] -> [a, b, c] -> layer -> [A, B, C] -> [[A, B], [C]]
    """
    _check_layer("with_flatten_v2", layer)
    return Model(f"with_flatten({layer.name})", forward, layers=[layer], init=init)


def forward(
    model: Model[NestedT[InItemT], NestedT[OutItemT]], Xnest: NestedT[InItemT], is_train: bool
) -> Tuple[NestedT[OutItemT], Callable]:
    layer = model.layers[0]
    Xflat, lengths = _flatten(model, Xnest)
    Yflat, backprop_layer = layer(Xflat, is_train)
    _check_rows(model, Yflat, lengths)

    def backprop(dYnest: NestedT[OutItemT]) -> NestedT[InItemT]:
        return _split(backprop_layer(_flatten(model, dYnest)[0]), lengths)

    return _split(Yflat, lengths), backprop


def init(
    model: Model[NestedT[InItemT], NestedT[OutItemT]],
    X: Optional[NestedT[InItemT]] = None,
    Y: Optional[NestedT[OutItemT]] = None,
) -> None:
    # NOTE: Y is flattened exactly like X, so the layer sees one output item per input item.
    model.layers[0].initialize(
        X=_flatten(model, X)[0] if X is not None else None,
        Y=_flatten(model, Y)[0] if Y is not None else None,
    )
