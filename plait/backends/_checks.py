"""Argument validation shared by every backend, so that all of them fail with the same messages.

What an op accepts follows Thinc 8.3, whose ops are numpy formulas: any real dtype (integers
promote to float64 where the formula makes floats, as numpy promotes them against a Python
float), operands that broadcast, and array-likes (lists, tuples, scalars), which numpy
converts. Checks refuse what would fail anyway, with a message that names the argument, and
what Thinc would get silently wrong (an in-place write that truncates floats to integers).
"""
import functools
from typing import Any, List, Optional, Sequence, Tuple, Type

import numpy

_REAL_KINDS = "biuf"


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
    """Raise if X is not an array, has the wrong ndim, or the wrong kind ("f" floats, "i" integers,
    "r" real numbers: booleans, integers or floats)."""
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
    if kind == "r" and X.dtype.kind not in _REAL_KINDS:
        raise TypeError(
            f"Ops.{fn}: argument '{name}' must hold real numbers, got {describe(X)}. "
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
        if n_rows is None and sum(values) > _MAX_ROWS:
            # NOTE: numpy.repeat (the backprops) sums the lengths in int64 unchecked: a sum that
            # wraps around makes it write past its output (a segfault, not an error).
            raise ValueError(
                f"Ops.{fn}: lengths sum to {sum(values)} rows, more than an array can hold "
                f"({_MAX_ROWS}); pass one length per sequence, each the number of its rows."
            )
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


_MAX_ROWS = 2**63 - 1


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


# --- elementwise operands ---------------------------------------------------------------------

_FLOAT64 = numpy.dtype("float64")


def is_array(X: Any) -> bool:
    return hasattr(X, "ndim") and hasattr(X, "dtype") and hasattr(X, "shape")


def operand(fn: str, name: str, X: Any, xp: Any) -> Any:
    """X as an array of any real dtype: arrays pass as they are, array-likes (lists, tuples,
    Python and numpy scalars) are converted by xp.asarray; anything else raises TypeError."""
    if not is_array(X):
        if X is None or isinstance(X, (str, bytes, dict, set)):
            raise TypeError(
                f"Ops.{fn}: argument '{name}' must be an array, got {describe(X)}. "
                f"Convert it first with ops.asarray(...)."
            )
        try:
            X = xp.asarray(X)
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"Ops.{fn}: argument '{name}' must be an array, got {describe(X)}, which does not "
                f"convert to one ({err}). Convert it first with ops.asarray(...)."
            ) from None
    if X.dtype.kind not in _REAL_KINDS:
        raise TypeError(
            f"Ops.{fn}: argument '{name}' must hold real numbers, got {describe(X)}. "
            f"Cast it with ops.asarray_f(...) or X.astype('float32')."
        )
    return X


def float_dtype(*dtypes: Any) -> numpy.dtype:
    """The dtype of a formula that makes floats of these operands: integers and booleans count
    as float64 (numpy's promotion against a Python float), floats as themselves. Python ints
    and floats among them are weak, as in numpy: they do not widen an array's dtype."""
    floats = [dt if isinstance(dt, (int, float)) or dt.kind == "f" else _FLOAT64 for dt in dtypes]
    dtype = numpy.result_type(*floats)
    return dtype if dtype.kind == "f" else _FLOAT64


def _weak(X: Any, array: Any) -> Any:
    """A Python int or float as itself (numpy's weak scalars), anything else as its array's dtype."""
    return X if type(X) in (int, float) else array.dtype


def broadcast_shape(fn: str, named: Sequence[Tuple[str, Any]]) -> Tuple[int, ...]:
    """The shape the arrays broadcast to; ValueError naming them where they do not."""
    shapes = [tuple(X.shape) for _, X in named]
    if all(s == shapes[0] for s in shapes):
        return shapes[0]
    try:
        return tuple(numpy.broadcast_shapes(*shapes))
    except ValueError:
        listed = ", ".join(f"'{n}' {s}" for (n, _), s in zip(named, shapes))
        raise ValueError(
            f"Ops.{fn}: the arguments must have the same shape or broadcast to one, got {listed}."
        ) from None


def inplace_target(
    fn: str, name: str, target: Any, xp: Any, shape: Tuple[int, ...], dtype: numpy.dtype, *, required: bool = True
) -> Any:
    """The array an in-place op writes its result (of `shape` and `dtype`) into, or None.

    None where `target` is not an array (a list or scalar: the result is a new array, as
    numpy gives Thinc's `X *= ...`). Otherwise the result must fit: the same shape
    (ValueError), a dtype the result casts to without changing kind (TypeError: floats
    written into integers would be truncated), and writeable memory (ValueError).

    required=False is for the ops whose inplace Thinc ignores: the target is used only where
    that changes nothing but the write (same shape, the result's very dtype), else None.
    """
    if not isinstance(target, xp.ndarray):
        return None
    # NOTE: older cupy arrays have no writeable flag (they always are).
    writeable = bool(getattr(target.flags, "writeable", True))
    if writeable and target.dtype == dtype and target.shape == shape:
        return target
    fits_shape = tuple(target.shape) == tuple(shape)
    if not required:
        return target if fits_shape and writeable and target.dtype == dtype else None
    fits_dtype = numpy.can_cast(dtype, target.dtype, "same_kind")
    if fits_shape and fits_dtype and writeable:
        return target
    if not fits_shape:
        raise ValueError(
            f"Ops.{fn}: cannot write the result (shape {tuple(shape)}) into '{name}' in place: "
            f"'{name}' is an {describe(target)}. Pass inplace=False, or operands of "
            f"'{name}''s shape."
        )
    if not fits_dtype:
        raise TypeError(
            f"Ops.{fn}: cannot write {dtype} results into '{name}' ({describe(target)}) in place "
            f"without truncating them. Pass inplace=False, or a float array: "
            f"{name}.astype('float32')."
        )
    raise ValueError(f"Ops.{fn}: cannot write into '{name}' in place: it is read-only ({describe(target)}).")


def elementwise(
    fn: str,
    xp: Any,
    named: Sequence[Tuple[str, Any]],
    *,
    floats: bool = True,
    broadcast: bool = True,
) -> Tuple[List[Any], Tuple[int, ...], numpy.dtype]:
    """The operands of an elementwise op as arrays, the shape of its result and the dtype it
    computes in: integers become float64 for ops that make floats (floats=True), and keep their
    dtype for ops that are exact on them (relu, its backprop, dtanh). Python scalars are weak. Operands broadcast
    (broadcast=False: they must have one shape, as Thinc's backprop_mish insists). The arrays
    are cast to the dtype, not broadcast."""
    X0 = named[0][1]
    if isinstance(X0, xp.ndarray) and X0.dtype.kind == "f":
        # The common call: float arrays of one dtype and shape, nothing to do.
        dtype, shape = X0.dtype, X0.shape
        for _, X in named[1:]:
            if not (isinstance(X, xp.ndarray) and X.dtype == dtype and X.shape == shape):
                break
        else:
            return [X for _, X in named], shape, dtype
    arrays = [operand(fn, n, X, xp) for n, X in named]
    first = arrays[0].dtype
    if all(a.dtype == first for a in arrays) and (first.kind == "f" or not floats):
        dtype = first
    else:
        kinds = [_weak(X, a) for (_, X), a in zip(named, arrays)]
        dtype = float_dtype(*kinds) if floats else numpy.result_type(*kinds)
    pairs = [(n, a) for (n, _), a in zip(named, arrays)]
    if broadcast:
        shape = broadcast_shape(fn, pairs)
    else:
        for n, a in pairs[1:]:
            check_same_shape(fn, pairs[0][0], pairs[0][1], n, a)
        shape = tuple(arrays[0].shape)
    return [a if a.dtype == dtype else a.astype(dtype) for a in arrays], shape, dtype


def refuse_int_truncation(fn: str, name: str, X: Any, why: str) -> None:
    """TypeError for an integer array where Thinc returns its float results truncated to it."""
    if is_array(X) and X.dtype.kind in "biu":
        raise TypeError(
            f"Ops.{fn}: argument '{name}' holds integers ({describe(X)}); Thinc would {why}, "
            f"truncating the results. Cast it to floats first: {name}.astype('float32')."
        )


@functools.lru_cache(maxsize=None)
def cumsum_dtype(dtype: numpy.dtype) -> numpy.dtype:
    """The dtype numpy's cumsum gives for an array of `dtype` (int32 counts sum as int64)."""
    return numpy.cumsum(numpy.zeros(1, dtype=dtype)).dtype


# --- convolution and pooling (the front of _conv_ops.ConvOps, whose code stays as it is) ------


def check_conv_arrays(fn: str, named: Sequence[Tuple[str, Any]], optional: Sequence[str] = ()) -> None:
    """TypeError naming the argument for anything but an array of real numbers (None where optional)."""
    for name, X in named:
        if X is None and name in optional:
            continue
        check_array(fn, name, X, kind="r")


def check_conv_stride(fn: str, stride: Any) -> None:
    """A convolution's stride must be given: None is Chainer's and plait's "stride = window" only
    for poolings; for a convolution it would silently skip all but every k-th position."""
    if stride is None:
        raise TypeError(
            f"Ops.{fn}: stride must be an int or a tuple of ints, got None. Convolutions have no "
            f"default window stride (only poolings read None as stride = ksize); pass stride=1 "
            f"for every position, or the window size explicitly."
        )


def check_pool_which(fn: str, which: Any, K: int) -> None:
    """max_pool_nd's `which` must hold integers in 0..K-1 (the flat position in a window of K)."""
    check_array(fn, "which", which, kind="i")
    if which.size:
        host = _host(which)
        lo, hi = int(host.min()), int(host.max())
        if lo < 0 or hi >= K:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"Ops.{fn}: 'which' must hold positions in the pooling window, 0..{K - 1} for a "
                f"window of {K}, got {bad}. Pass the 'which' that max_pool_nd returned with the "
                f"same ksize."
            )


def check_writeable(fn: str, name: str, X: Any, why: str = "it is updated in place") -> None:
    """ValueError naming the argument where an op must write into a read-only array."""
    # NOTE: older cupy arrays have no writeable flag (they always are).
    if not bool(getattr(getattr(X, "flags", None), "writeable", True)):
        raise ValueError(
            f"Ops.{fn}: argument '{name}' is read-only ({describe(X)}), but {why}. Pass a "
            f"writeable array: {name}.copy()."
        )
