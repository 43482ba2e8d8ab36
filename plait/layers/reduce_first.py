"""reduce_first: pool each sequence to its first row."""
from __future__ import annotations

from typing import Callable, Tuple, cast

from ..config import registry
from ..model import Model
from ..types import Floats2d, Ragged
from ..util import ArrayInfo

InT = Ragged
OutT = Floats2d


@registry.layers("reduce_first.v1")
def reduce_first() -> Model[InT, OutT]:
    """Select the first row of each sequence.  Ragged (n, nO) -> (len(lengths), nO)

    Every sequence must have at least one row.
    """
    return Model("reduce_first", forward)


def forward(model: Model[InT, OutT], Xr: InT, is_train: bool) -> Tuple[OutT, Callable]:
    lengths = Xr.lengths
    Y, starts_ends = model.ops.reduce_first(cast(Floats2d, Xr.data), lengths)
    array_info = ArrayInfo.from_array(Y)

    def backprop(dY: OutT) -> InT:
        array_info.check_consistency(dY)
        return Ragged(model.ops.backprop_reduce_first(dY, starts_ends), lengths)

    return Y, backprop
