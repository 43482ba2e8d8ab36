"""list2array: concatenate a list of 2d arrays into one array."""
from __future__ import annotations

from typing import Callable, List, Tuple, TypeVar

from ..config import registry
from ..model import Model
from ..types import Array2d

OutT = TypeVar("OutT", bound=Array2d)
InT = List[OutT]


@registry.layers("list2array.v1")
def list2array() -> Model[InT, OutT]:
    """Stack the sequences' rows.  [(n1, nO), (n2, nO), ...] -> (n1 + n2 + ..., nO)"""
    return Model("list2array", forward)


def forward(model: Model[InT, OutT], Xs: InT, is_train: bool) -> Tuple[OutT, Callable]:
    lengths = [len(X) for X in Xs]

    def backprop(dY: OutT) -> InT:
        return model.ops.unflatten(dY, model.ops.asarray1i(lengths))

    return model.ops.flatten(Xs), backprop
