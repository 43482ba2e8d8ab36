"""Maxout: a fully-connected maxout layer, a Linear to out_size * pool_size units then maxout."""
import numbers
from typing import Any

import numpy

from ... import link
from ...functions.activation import maxout as _maxout
from ..connection import linear as _linear


class Maxout(link.Chain):
    """Y[:, i] = max_j (W[i, j] . x + b[i, j]). (nB, in_size) -> (nB, out_size)

    W has shape (out_size, pool_size, in_size) and b (out_size, pool_size); the child link
    `linear` stores them flattened as (out_size * pool_size, in_size) and
    (out_size * pool_size,), so that unit i's pieces are the consecutive rows
    i * pool_size .. (i + 1) * pool_size - 1. initial_bias may be a scalar fill value, a
    (out_size, pool_size) array, or None for no bias.
    """

    def __init__(
        self,
        in_size: int,
        out_size: int,
        pool_size: int,
        wscale: float = 1,
        initialW: Any = None,
        initial_bias: Any = 0,
    ) -> None:
        for name, value in (("out_size", out_size), ("pool_size", pool_size)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
                raise ValueError(f"Maxout: {name} must be a positive int, got {value!r}.")
        n_lin = int(out_size) * int(pool_size)
        if initialW is not None:
            initialW = _reshaped("initialW", initialW, (out_size, pool_size, in_size), (n_lin, in_size))
        if initial_bias is not None:
            if numpy.isscalar(initial_bias):
                initial_bias = numpy.full((n_lin,), initial_bias, dtype=numpy.float32)
            else:
                initial_bias = _reshaped("initial_bias", initial_bias, (out_size, pool_size), (n_lin,))
        lin = _linear.Linear(
            in_size, n_lin, wscale, nobias=initial_bias is None, initialW=initialW, initial_bias=initial_bias
        )
        super().__init__(linear=lin)
        self.out_size = int(out_size)
        self.pool_size = int(pool_size)

    def __call__(self, x: Any) -> Any:
        """The maxout units for a batch x (nB, in_size)."""
        return _maxout.maxout(self.linear(x), self.pool_size)


def _reshaped(name: str, value: Any, expected: tuple, flat: tuple) -> Any:
    if not hasattr(value, "reshape"):
        raise TypeError(f"Maxout: {name} must be an array of shape {expected}, got {type(value).__name__}.")
    if int(numpy.prod(value.shape)) != int(numpy.prod(flat)):
        raise ValueError(f"Maxout: {name} has shape {tuple(value.shape)}, expected {expected}.")
    return value.reshape(flat)
