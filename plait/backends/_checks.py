"""Argument validation shared by every backend, so that all of them fail with the same messages."""
from typing import Any, Optional, Tuple, Type


def describe(X: Any) -> str:
    """A short description of an argument for error messages: shape and dtype, or its type."""
    shape = getattr(X, "shape", None)
    dtype = getattr(X, "dtype", None)
    if shape is not None and dtype is not None:
        return f"array of shape {tuple(shape)} and dtype {dtype}"
    return f"{type(X).__name__} {X!r}"[:200]


def check_array(
    fn: str,
    name: str,
    X: Any,
    *,
    ndim: Optional[int] = None,
    kind: Optional[str] = None,
    min_ndim: Optional[int] = None,
) -> None:
    """Raise if X is not an array, has the wrong ndim, or the wrong kind ("f" floats, "i" integers)."""
    if not (hasattr(X, "ndim") and hasattr(X, "dtype") and hasattr(X, "shape")):
        raise TypeError(
            f"Ops.{fn}: argument '{name}' must be an array, got {describe(X)}. "
            f"Convert it first with ops.asarray(...)."
        )
    if ndim is not None and X.ndim != ndim:
        raise ValueError(
            f"Ops.{fn}: argument '{name}' must be {ndim}-dimensional, got {describe(X)}."
        )
    if min_ndim is not None and X.ndim < min_ndim:
        raise ValueError(
            f"Ops.{fn}: argument '{name}' needs at least {min_ndim} dimensions, got {describe(X)}."
        )
    if kind == "f" and X.dtype.kind != "f":
        raise TypeError(
            f"Ops.{fn}: argument '{name}' must hold floats, got {describe(X)}. "
            f"Cast it with ops.asarray_f(...) or X.astype('float32')."
        )
    if kind == "i" and X.dtype.kind not in "iu":
        raise TypeError(
            f"Ops.{fn}: argument '{name}' must hold integers, got {describe(X)}. "
            f"Cast it with ops.asarray_i(...) or X.astype('int32')."
        )


def check_same_shape(fn: str, name1: str, X1: Any, name2: str, X2: Any) -> None:
    if tuple(X1.shape) != tuple(X2.shape):
        raise ValueError(
            f"Ops.{fn}: arguments '{name1}' and '{name2}' must have the same shape, "
            f"got {tuple(X1.shape)} and {tuple(X2.shape)}."
        )


def check_lengths(
    fn: str,
    lengths: Any,
    n_rows: Optional[int],
    *,
    allow_zero: bool,
    X_name: str = "X",
    exact: bool = True,
    mismatch: Type[Exception] = ValueError,
) -> Tuple[int, ...]:
    """Validate sequence lengths against the number of rows they describe; returns them as Python ints.

    exact=True: the lengths must sum to n_rows; every length is checked before the sum, and a
    wrong sum raises `mismatch`. exact=False (Thinc's ragged reductions): the sequences cover the
    first rows of X and the rows past them are ignored; the lengths are read in order and the
    first one that is negative (ValueError) or runs past n_rows (`mismatch`) raises, as in Thinc.
    n_rows=None checks the values only.
    """
    check_array(fn, "lengths", lengths, ndim=1, kind="i")
    values = tuple(int(v) for v in _host(lengths))
    if exact or n_rows is None:
        for i, v in enumerate(values):
            _check_length(fn, i, v, allow_zero)
        if n_rows is not None and sum(values) != n_rows:
            raise mismatch(
                f"Ops.{fn}: lengths must sum up to the number of rows of '{X_name}' ({n_rows}), "
                f"got sum {sum(values)} from {len(values)} lengths. Pass one length per sequence "
                f"of '{X_name}'."
            )
        return values
    total = 0
    for i, v in enumerate(values):
        _check_length(fn, i, v, allow_zero)
        total += v
        if total > n_rows:
            raise mismatch(
                f"Ops.{fn}: lengths must sum up to the number of rows of '{X_name}' ({n_rows}) or "
                f"fewer, but lengths[:{i + 1}] already sum to {total} (of {sum(values)} in "
                f"{len(values)} lengths). Pass one length per sequence of '{X_name}'."
            )
    return values


def _check_length(fn: str, i: int, v: int, allow_zero: bool) -> None:
    if v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        hint = (
            "" if allow_zero else ": this reduction is undefined for empty sequences. Drop the "
            "empty sequences or use reduce_sum/reduce_mean, which map them to zeros"
        )
        raise ValueError(
            f"Ops.{fn}: all sequence lengths must be {bound}, got {v} at index {i} of 'lengths'{hint}."
        )


def _host(X: Any) -> Any:
    """The array's values on the host (a numpy array), for small index arrays only."""
    if hasattr(X, "get") and not hasattr(X, "__array_interface__"):
        return X.get()
    return X
