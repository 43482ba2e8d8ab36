"""reduce_last: pool each sequence to its last row."""
from __future__ import annotations

from typing import Callable, Tuple, cast

from ..config import registry
from ..model import Model
from ..types import Floats2d, Ragged
from ..util import ArrayInfo

InT = Ragged
OutT = Floats2d


@registry.layers("reduce_last.v1")
def reduce_last() -> Model[InT, OutT]:
    """Select the last row of each sequence.  Ragged (n, nO) -> (len(lengths), nO)

    Every sequence must have at least one row.
    """
    return Model("reduce_last", forward)


def forward(model: Model[InT, OutT], Xr: InT, is_train: bool) -> Tuple[OutT, Callable]:
    lengths = Xr.lengths
    Y, lasts = model.ops.reduce_last(cast(Floats2d, Xr.data), lengths)
    array_info = ArrayInfo.from_array(Y)

    def backprop(dY: OutT) -> InT:
        array_info.check_consistency(dY)
        return Ragged(model.ops.backprop_reduce_last(dY, lasts), lengths)

    return Y, backprop
