"""expand_window: concatenate each row with its neighbours (one step of a convolution)."""
from __future__ import annotations

import numbers
from typing import Any, Callable, Tuple, TypeVar, cast

from ..config import registry
from ..model import Model
from ..types import Floats2d, Ragged

InT = TypeVar("InT", Floats2d, Ragged)


@registry.layers("expand_window.v1")
def expand_window(window_size: int = 1) -> Model[InT, InT]:
    """Row i becomes [X[i - w], ..., X[i], ..., X[i + w]], zeros beyond the edges.

    (n, nI) -> (n, nI * (2 * window_size + 1)). Ragged input is windowed within each
    sequence; a plain array is one sequence.
    """
    if isinstance(window_size, bool) or not isinstance(window_size, numbers.Integral) or window_size < 0:
        raise ValueError(f"Cannot create expand_window: window_size must be an int >= 0, got {window_size!r}.")
    return Model("expand_window", forward, attrs={"window_size": int(window_size)})


def forward(model: Model[InT, InT], X: InT, is_train: bool) -> Tuple[InT, Callable]:
    if isinstance(X, Ragged):
        return _expand_window_ragged(model, X)
    return _expand_window_floats(model, X)


def _expand_window_floats(model: Model, X: Floats2d) -> Tuple[Floats2d, Callable]:
    nW = model.attrs["window_size"]
    _check_2d(model, X)
    if len(X) > 0:
        Y = model.ops.seq2col(X, nW)
    else:
        Y = model.ops.alloc2f(0, X.shape[1] * (2 * nW + 1), dtype=X.dtype)

    def backprop(dY: Floats2d) -> Floats2d:
        return model.ops.backprop_seq2col(dY, nW)

    return Y, backprop


def _expand_window_ragged(model: Model, Xr: Ragged) -> Tuple[Ragged, Callable]:
    nW = model.attrs["window_size"]
    X = cast(Floats2d, Xr.data)
    _check_2d(model, X)
    Y = Ragged(model.ops.seq2col(X, nW, lengths=Xr.lengths), Xr.lengths)

    def backprop(dYr: Ragged) -> Ragged:
        dX = model.ops.backprop_seq2col(cast(Floats2d, dYr.data), nW, lengths=Xr.lengths)
        return Ragged(dX, Xr.lengths)

    return Y, backprop


def _check_2d(model: Model, X: Any) -> None:
    if getattr(X, "ndim", None) != 2:
        raise ValueError(
            f"Model '{model.name}' expects a 2d array (n, nI) or Ragged, got "
            f"{type(X).__name__} of shape {getattr(X, 'shape', None)}."
        )
