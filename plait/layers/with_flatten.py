"""with_flatten: run a layer over the items of every sequence at once, then regroup its output."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple, TypeVar

from ..config import registry
from ..model import Model
from ..types import ArrayXd, ListXd
from .with_array import _check_layer

ItemT = TypeVar("ItemT")
InT = Sequence[Sequence[ItemT]]
OutT = ListXd
InnerInT = Sequence[ItemT]
InnerOutT = ArrayXd


@registry.layers("with_flatten.v1")
def with_flatten(layer: Model[InnerInT[ItemT], InnerOutT]) -> Model[InT[ItemT], OutT]:
    """Concatenate the item sequences for `layer`; split its output array back per sequence.

    [[x, x], [x]] -> [x, x, x] -> layer -> (3, ...) -> [(2, ...), (1, ...)]
    """
    _check_layer("with_flatten", layer)
    return Model(f"with_flatten({layer.name})", forward, layers=[layer], init=init)


def forward(model: Model[InT, OutT], Xnest: InT, is_train: bool) -> Tuple[OutT, Callable]:
    layer = model.layers[0]
    Xflat, lengths = _flatten(model, Xnest)
    Yflat, backprop_layer = layer(Xflat, is_train)
    _check_rows(model, Yflat, lengths)
    Ynest = _split(Yflat, lengths)

    def backprop(dYnest: OutT) -> InT:
        dXflat = backprop_layer(model.ops.flatten(dYnest))
        return _split(dXflat, lengths)

    return Ynest, backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    # NOTE: Y is joined along the rows (axis 0), the axis the output is split on.
    model.layers[0].initialize(
        X=_flatten(model, X)[0] if X is not None else None,
        Y=model.ops.flatten(Y) if Y is not None and len(Y) else None,
    )


def _flatten(model: Model, nested: Any) -> Tuple[List[Any], List[int]]:
    if isinstance(nested, (str, bytes)) or not isinstance(nested, Sequence):
        raise TypeError(
            f"Model '{model.name}' expects a sequence of sequences, got {type(nested).__name__}."
        )
    flat: List[Any] = []
    lengths: List[int] = []
    for item in nested:
        flat.extend(item)
        lengths.append(len(item))
    return flat, lengths


def _split(flat: Any, lengths: List[int]) -> List[Any]:
    """Cut `flat` (an array or list) into consecutive pieces of the given lengths along axis 0."""
    out = []
    start = 0
    for length in lengths:
        out.append(flat[start : start + length])
        start += length
    return out


def _check_rows(model: Model, Yflat: Any, lengths: List[int]) -> None:
    if len(Yflat) != sum(lengths):
        raise ValueError(
            f"Model '{model.name}': the wrapped layer returned {len(Yflat)} rows for {sum(lengths)} "
            f"input items; with_flatten needs one output row per item."
        )
