"""ragged2list: split a Ragged into a list of arrays, one per sequence."""
from __future__ import annotations

from typing import Callable, Tuple, TypeVar, cast

from ..config import registry
from ..model import Model
from ..types import ListXd, Ragged

InT = Ragged
OutT = TypeVar("OutT", bound=ListXd)


@registry.layers("ragged2list.v1")
def ragged2list() -> Model[InT, OutT]:
    """Ragged(data, lengths [n1, n2, ...]) -> [(n1, ...), (n2, ...), ...]"""
    return Model("ragged2list", forward)


def forward(model: Model[InT, OutT], Xr: InT, is_train: bool) -> Tuple[OutT, Callable]:
    if not isinstance(Xr, Ragged):
        raise TypeError(f"Cannot apply model '{model.name}': expected a Ragged, got {type(Xr).__name__}.")
    lengths = Xr.lengths
    shape = Xr.dataXd.shape

    def backprop(dXs: OutT) -> InT:
        if all(len(dX) == 0 for dX in dXs):
            # flatten cannot recover the trailing dims from no rows: keep the input's.
            dtype = dXs[0].dtype if len(dXs) else "float32"
            return Ragged(model.ops.alloc((0,) + tuple(shape[1:]), dtype=dtype), lengths)
        return Ragged(model.ops.flatten(dXs, pad=0), lengths)

    return cast(OutT, model.ops.unflatten(Xr.dataXd, Xr.lengths)), backprop
