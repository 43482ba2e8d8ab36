"""array_getitem, floats_getitem, ints_getitem: select part of an array with a numpy-style index."""
from __future__ import annotations

from typing import Any, Callable, Sequence, Tuple, TypeVar, Union

import numpy

from ..model import Model
from ..types import ArrayXd, FloatsXd, IntsXd

AxisIndex = Union[int, slice, Sequence[int]]
Index = Union[AxisIndex, Tuple[AxisIndex, ...]]
ArrayTXd = TypeVar("ArrayTXd", bound=ArrayXd)


def array_getitem(index: Index) -> Model[ArrayTXd, ArrayTXd]:
    """X[index], for any numpy-style index: X[:, :-1] is index=(slice(None), slice(None, -1))."""
    return Model("array-getitem", forward, attrs={"index": index})


def floats_getitem(index: Index) -> Model[FloatsXd, FloatsXd]:
    """array_getitem, typed for float arrays."""
    return Model("floats-getitem", forward, attrs={"index": index})


def ints_getitem(index: Index) -> Model[IntsXd, IntsXd]:
    """array_getitem, typed for int arrays."""
    return Model("ints-getitem", forward, attrs={"index": index})


def forward(model: Model[ArrayTXd, ArrayTXd], X: ArrayTXd, is_train: bool) -> Tuple[ArrayTXd, Callable]:
    index = model.attrs["index"]
    if not hasattr(X, "shape"):
        raise TypeError(f"Cannot apply model '{model.name}': expected an array, got {type(X).__name__}.")
    shape = X.shape
    dtype = X.dtype

    def backprop(dY: ArrayTXd) -> ArrayTXd:
        dX = model.ops.alloc(shape, dtype=dtype)
        _scatter(model.ops.xp, dX, index, dY)
        return dX

    if len(X) == 0:
        return X, backprop
    try:
        Y = X[index]
    except (IndexError, TypeError) as err:
        raise IndexError(
            f"Cannot apply model '{model.name}': index {index!r} does not fit an array of shape {tuple(shape)} ({err})."
        ) from err
    return Y, backprop


def _scatter(xp: Any, dX: Any, index: Any, dY: Any) -> None:
    if not _selects_by_array(index):
        # Ints, slices, None and Ellipsis never pick an element twice: plain assignment is exact.
        dX[index] = dY
    elif xp is numpy:
        # An index array may repeat an element; its gradient is then the sum of the picks.
        numpy.add.at(dX, index, dY)
    else:  # pragma: no cover - needs a GPU
        import cupyx

        cupyx.scatter_add(dX, index, dY)


def _selects_by_array(index: Any) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(not (part is None or part is Ellipsis or isinstance(part, (int, slice))) for part in parts)
