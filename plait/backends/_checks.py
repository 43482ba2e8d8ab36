"""Argument validation shared by every backend, so that all of them fail with the same messages."""
from typing import Any, Optional, Tuple


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
    fn: str, lengths: Any, n_rows: Optional[int], *, allow_zero: bool, X_name: str = "X"
) -> Tuple[int, ...]:
    """Validate sequence lengths against the number of rows they describe; returns them as Python ints."""
    check_array(fn, "lengths", lengths, ndim=1, kind="i")
    values = tuple(int(v) for v in _host(lengths))
    negative = [v for v in values if v < 0]
    if negative:
        raise ValueError(
            f"Ops.{fn}: all sequence lengths must be >= 0, got {negative[0]} in 'lengths'."
        )
    if not allow_zero and 0 in values:
        raise ValueError(
            f"Ops.{fn}: all sequence lengths must be > 0, but 'lengths' has a zero at index "
            f"{values.index(0)}: this reduction is undefined for empty sequences. "
            f"Drop the empty sequences or use reduce_sum/reduce_mean, which map them to zeros."
        )
    if n_rows is not None and sum(values) != n_rows:
        raise ValueError(
            f"Ops.{fn}: 'lengths' must sum to the number of rows of '{X_name}' ({n_rows}), "
            f"got sum {sum(values)} from {len(values)} lengths."
        )
    return values


def _host(X: Any) -> Any:
    """The array's values on the host (a numpy array), for small index arrays only."""
    if hasattr(X, "get") and not hasattr(X, "__array_interface__"):
        return X.get()
    return X
