"""padded2list: unpack a Padded batch into a list of 2d arrays in their original order."""
from __future__ import annotations

from typing import Callable, Tuple, TypeVar, cast

from ..config import registry
from ..model import Model
from ..types import List2d, Padded

InT = Padded
OutT = TypeVar("OutT", bound=List2d)


@registry.layers("padded2list.v1")
def padded2list() -> Model[InT, OutT]:
    """Padded(data (nL, nB, nO), ...) -> [(n1, nO), (n2, nO), ...]"""
    return Model("padded2list", forward)


def forward(model: Model[InT, OutT], Xp: InT, is_train: bool) -> Tuple[OutT, Callable[[OutT], InT]]:
    if not isinstance(Xp, Padded):
        raise TypeError(f"Cannot apply model '{model.name}': expected a Padded, got {type(Xp).__name__}.")
    Ys = cast(OutT, model.ops.padded2list(Xp))
    indices = [int(i) for i in model.ops.to_numpy(Xp.indices)]
    lengths = [int(n) for n in model.ops.to_numpy(Xp.lengths)]

    def backprop(dYs: OutT) -> InT:
        if len(dYs) != len(indices):
            raise ValueError(
                f"Cannot backprop through model '{model.name}': got {len(dYs)} gradients for "
                f"{len(indices)} sequences."
            )
        # Scatter into the input's own layout (rather than re-sorting the list), so the
        # gradient lines up with Xp even when Xp ordered equal lengths differently.
        trailing = tuple(dYs[0].shape[1:]) if dYs else tuple(Xp.data.shape[2:])
        dtype = dYs[0].dtype if dYs else Xp.data.dtype
        dX = model.ops.alloc(tuple(Xp.data.shape[:2]) + trailing, dtype=dtype)
        for column, (index, length) in enumerate(zip(indices, lengths)):
            dY = dYs[index]
            if dY.shape[0] != length:
                raise ValueError(
                    f"Cannot backprop through model '{model.name}': gradient {index} has "
                    f"{dY.shape[0]} rows but its sequence has {length}."
                )
            dX[:length, column] = dY
        return Padded(dX, Xp.size_at_t, Xp.lengths, Xp.indices)

    return Ys, backprop
