"""Small helpers of the Chainer face (chainer.utils): array coercion, type checks, convolution
windows and Walker's alias sampler."""
from typing import Any

import numpy

from . import array, conv, type_check, walker_alias  # noqa: F401
from .walker_alias import WalkerAlias

__all__ = [
    "force_array", "force_type", "WalkerAlias", "array", "conv", "type_check", "walker_alias",
]


def force_array(x: Any, dtype: Any = None) -> Any:
    """x as an array: numpy scalars (which some reductions return) become 0-d arrays."""
    if numpy.isscalar(x):
        return numpy.asarray(x, dtype=dtype)
    if dtype is not None and x.dtype != dtype:
        return x.astype(dtype)
    return x


def force_type(dtype: Any, value: Any) -> Any:
    """value cast to dtype (scalars and arrays alike), unchanged when it already has it."""
    if numpy.isscalar(value):
        return numpy.dtype(dtype).type(value)
    if value.dtype != dtype:
        return value.astype(dtype, copy=False)
    return value
