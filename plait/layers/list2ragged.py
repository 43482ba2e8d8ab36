"""list2ragged: pack a list of arrays into a Ragged."""
from __future__ import annotations

from typing import Callable, Tuple, TypeVar, cast

from ..config import registry
from ..model import Model
from ..types import ListXd, Ragged

InT = TypeVar("InT", bound=ListXd)
OutT = Ragged


@registry.layers("list2ragged.v1")
def list2ragged() -> Model[InT, OutT]:
    """[(n1, ...), (n2, ...), ...] -> Ragged(data (n1 + n2 + ..., ...), lengths [n1, n2, ...])"""
    return Model("list2ragged", forward)


def forward(model: Model[InT, OutT], Xs: InT, is_train: bool) -> Tuple[OutT, Callable]:
    def backprop(dYr: OutT) -> InT:
        return cast(InT, model.ops.unflatten(dYr.dataXd, dYr.lengths))

    lengths = model.ops.asarray1i([len(X) for X in Xs])
    return Ragged(model.ops.flatten(Xs), lengths), backprop
