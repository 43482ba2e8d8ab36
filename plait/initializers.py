"""Weight initializers: `init(ops, shape) -> float32 array`, plus registered factories for configs.

Random values are always drawn on the CPU from numpy's global generator and then moved with
`ops.asarray_f`, so the backend never changes the numbers and `plait.util.fix_random_seed`
(which seeds numpy) makes them reproducible. The draws match Thinc 8.3's for the same seed.

Fan-based initializers read the shape as (nO, nI, ...): fan_in = shape[1], fan_out = shape[0].
NOTE: for shapes with more than two dims only the first two enter the formulas, as in Thinc.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Tuple

import numpy

from .backends import Ops
from .config import registry
from .types import FloatsXd, Shape
from .util import partial


def _check_ops(fn: str, ops: Any) -> None:
    if not isinstance(ops, Ops):
        raise TypeError(
            f"{fn}: the first argument must be an Ops (e.g. model.ops or NumpyOps()), got "
            f"{type(ops).__name__}. Call it as {fn}(ops, shape)."
        )


def _check_shape(fn: str, shape: Any, *, min_ndim: int = 0) -> Tuple[int, ...]:
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"{fn}: shape must be a tuple of ints, got {shape!r} ({type(shape).__name__}).")
    for i, dim in enumerate(shape):
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
            raise TypeError(
                f"{fn}: shape[{i}] must be an int, got {dim!r} ({type(dim).__name__}) in shape {tuple(shape)!r}."
            )
        if dim < 0:
            raise ValueError(f"{fn}: shape[{i}] must be >= 0, got {int(dim)} in shape {tuple(shape)!r}.")
    if len(shape) < min_ndim:
        raise ValueError(
            f"{fn}: shape {tuple(shape)!r} has {len(shape)} dimension(s), but the fan-in/fan-out formula "
            f"needs at least {min_ndim}: (nO, nI, ...). Use zero_init or uniform_init for vectors."
        )
    return tuple(int(dim) for dim in shape)


def _check_real(fn: str, arg: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {arg} must be a number, got {value!r} ({type(value).__name__}).")
    if not math.isfinite(value):
        raise ValueError(f"{fn}: {arg} must be finite, got {value!r}.")
    return value


def _fan_scaled(fn: str, ops: Ops, shape: Shape, *, dist: str, gain: float, fan: str) -> FloatsXd:
    """Draw from `dist` with variance-defining scale sqrt(gain / fan)."""
    _check_ops(fn, ops)
    dims = _check_shape(fn, shape, min_ndim=2)
    if 0 in dims:
        # Nothing to draw, and a zero fan would divide by zero.
        return ops.alloc_f(dims)
    nO, nI = dims[0], dims[1]
    denom = {"in": nI, "sum": nI + nO}[fan]
    scale = math.sqrt(gain / denom)
    if dist == "normal":
        values = numpy.random.normal(0, scale, dims)
    else:
        values = numpy.random.uniform(-scale, scale, dims)
    return ops.asarray_f(values)


def lecun_normal_init(ops: Ops, shape: Shape) -> FloatsXd:
    """Normal(0, std=sqrt(1 / nI)): (nO, nI, ...) -> float32 array of that shape."""
    return _fan_scaled("lecun_normal_init", ops, shape, dist="normal", gain=1.0, fan="in")


def he_normal_init(ops: Ops, shape: Shape) -> FloatsXd:
    """Normal(0, std=sqrt(2 / nI)), for ReLU-like layers: (nO, nI, ...) -> float32 array."""
    return _fan_scaled("he_normal_init", ops, shape, dist="normal", gain=2.0, fan="in")


def glorot_normal_init(ops: Ops, shape: Shape) -> FloatsXd:
    """Normal(0, std=sqrt(2 / (nI + nO))): (nO, nI, ...) -> float32 array."""
    return _fan_scaled("glorot_normal_init", ops, shape, dist="normal", gain=2.0, fan="sum")


def lecun_uniform_init(ops: Ops, shape: Shape) -> FloatsXd:
    """Uniform(-s, s) with s = sqrt(3 / nI), i.e. variance 1 / nI: (nO, nI, ...) -> float32 array."""
    return _fan_scaled("lecun_uniform_init", ops, shape, dist="uniform", gain=3.0, fan="in")


def he_uniform_init(ops: Ops, shape: Shape) -> FloatsXd:
    """Uniform(-s, s) with s = sqrt(6 / nI), i.e. variance 2 / nI: (nO, nI, ...) -> float32 array."""
    return _fan_scaled("he_uniform_init", ops, shape, dist="uniform", gain=6.0, fan="in")


def glorot_uniform_init(ops: Ops, shape: Shape) -> FloatsXd:
    """Uniform(-s, s) with s = sqrt(6 / (nI + nO)): (nO, nI, ...) -> float32 array."""
    return _fan_scaled("glorot_uniform_init", ops, shape, dist="uniform", gain=6.0, fan="sum")


def zero_init(ops: Ops, shape: Shape) -> FloatsXd:
    """All zeros: shape -> float32 array (biases, output layers)."""
    _check_ops("zero_init", ops)
    return ops.alloc_f(_check_shape("zero_init", shape))


def uniform_init(ops: Ops, shape: Shape, *, lo: float = -0.1, hi: float = 0.1) -> FloatsXd:
    """Uniform(lo, hi): shape -> float32 array (embedding tables)."""
    _check_ops("uniform_init", ops)
    dims = _check_shape("uniform_init", shape)
    _check_uniform_bounds("uniform_init", lo, hi)
    values = numpy.random.uniform(lo, hi, dims).astype("float32")
    return ops.asarray_f(values)


def normal_init(ops: Ops, shape: Shape, *, mean: float = 0) -> FloatsXd:
    """Normal draws: shape -> float32 array.

    NOTE: for compatibility with Thinc 8.3, `mean` sets the standard deviation and the
    distribution is centred on 0, so the default mean=0 gives all zeros.
    """
    _check_ops("normal_init", ops)
    dims = _check_shape("normal_init", shape)
    _check_normal_mean("normal_init", mean)
    # One flat draw of prod(shape) values, reshaped: the same stream Thinc consumes.
    size = int(numpy.prod(dims, dtype=numpy.int64))
    values = numpy.random.normal(0.0, mean, size).astype("float32").reshape(dims)
    return ops.asarray_f(values)


def _check_uniform_bounds(fn: str, lo: Any, hi: Any) -> None:
    _check_real(fn, "lo", lo)
    _check_real(fn, "hi", hi)
    if lo > hi:
        raise ValueError(f"{fn}: lo must be <= hi, got lo={lo!r}, hi={hi!r}.")


def _check_normal_mean(fn: str, mean: Any) -> None:
    _check_real(fn, "mean", mean)
    if mean < 0:
        raise ValueError(
            f"{fn}: mean must be >= 0, got {mean!r}; as in Thinc 8.3 it is used as the standard deviation."
        )


@registry.initializers("lecun_normal_init.v1")
def configure_lecun_normal_init() -> Callable[[Ops, Shape], FloatsXd]:
    """The registered form of lecun_normal_init (a config resolves to the function)."""
    return partial(lecun_normal_init)


@registry.initializers("he_normal_init.v1")
def configure_he_normal_init() -> Callable[[Ops, Shape], FloatsXd]:
    """The registered form of he_normal_init."""
    return partial(he_normal_init)


@registry.initializers("glorot_normal_init.v1")
def configure_glorot_normal_init() -> Callable[[Ops, Shape], FloatsXd]:
    """The registered form of glorot_normal_init."""
    return partial(glorot_normal_init)


@registry.initializers("lecun_uniform_init.v1")
def configure_lecun_uniform_init() -> Callable[[Ops, Shape], FloatsXd]:
    """The registered form of lecun_uniform_init."""
    return partial(lecun_uniform_init)


@registry.initializers("he_uniform_init.v1")
def configure_he_uniform_init() -> Callable[[Ops, Shape], FloatsXd]:
    """The registered form of he_uniform_init."""
    return partial(he_uniform_init)


@registry.initializers("glorot_uniform_init.v1")
def configure_glorot_uniform_init() -> Callable[[Ops, Shape], FloatsXd]:
    """The registered form of glorot_uniform_init."""
    return partial(glorot_uniform_init)


@registry.initializers("zero_init.v1")
def configure_zero_init() -> Callable[[Ops, Shape], FloatsXd]:
    """The registered form of zero_init."""
    return partial(zero_init)


@registry.initializers("uniform_init.v1")
def configure_uniform_init(*, lo: float = -0.1, hi: float = 0.1) -> Callable[[Ops, Shape], FloatsXd]:
    """uniform_init with `lo` and `hi` bound (checked now, so a bad config fails at resolve time)."""
    _check_uniform_bounds("uniform_init.v1", lo, hi)
    return partial(uniform_init, lo=lo, hi=hi)


@registry.initializers("normal_init.v1")
def configure_normal_init(*, mean: float = 0) -> Callable[[Ops, Shape], FloatsXd]:
    """normal_init with `mean` bound (see normal_init for what `mean` means)."""
    _check_normal_mean("normal_init.v1", mean)
    return partial(normal_init, mean=mean)


__all__ = [
    "lecun_normal_init",
    "he_normal_init",
    "glorot_normal_init",
    "lecun_uniform_init",
    "he_uniform_init",
    "glorot_uniform_init",
    "zero_init",
    "uniform_init",
    "normal_init",
    "configure_lecun_normal_init",
    "configure_he_normal_init",
    "configure_glorot_normal_init",
    "configure_lecun_uniform_init",
    "configure_he_uniform_init",
    "configure_glorot_uniform_init",
    "configure_zero_init",
    "configure_uniform_init",
    "configure_normal_init",
]
