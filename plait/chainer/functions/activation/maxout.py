"""maxout: the maximum over groups of pool_size consecutive channels."""
import numbers
from typing import Any

from ... import cuda, function
from ...utils import type_check


class Maxout(function.Function):
    """(..., nO * nP, ...) -> (..., nO, ...), the pooled axis being `axis`."""

    def __init__(self, pool_size: int, axis: int = 1) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, numbers.Integral):
            raise TypeError(f"maxout: 'pool_size' must be an int, got {type(pool_size).__name__}: {pool_size!r}.")
        if pool_size <= 0:
            raise ValueError(f"maxout: 'pool_size' must be a positive integer, got {pool_size}.")
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
            raise TypeError(f"maxout: 'axis' must be an int, got {type(axis).__name__}: {axis!r}.")
        self.pool_size = int(pool_size)
        self.axis = int(axis)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_type = in_types[0]
        type_check.expect(x_type.dtype.kind == "f")
        if self.axis >= 0:
            type_check.expect(x_type.ndim > type_check.Variable(self.axis, "axis"))
        else:
            type_check.expect(x_type.ndim >= type_check.Variable(-self.axis, "-axis"))
        axis = self.axis % x_type.ndim.eval()
        type_check.expect(x_type.shape[axis] % type_check.Variable(self.pool_size, "pool_size") == 0)

    def _pieces_last(self, x: Any) -> Any:
        """x viewed as (..., nO, ..., nP): the pieces of each group on the last axis."""
        xp = cuda.get_array_module(x)
        axis = self.axis % x.ndim
        P = self.pool_size
        grouped = x.reshape(x.shape[:axis] + (x.shape[axis] // P, P) + x.shape[axis + 1:])
        return xp.moveaxis(grouped, axis + 1, -1)

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        xp = cuda.get_array_module(x)
        pieces = self._pieces_last(x)  # (..., nO, ..., nP)
        X3 = xp.ascontiguousarray(pieces).reshape((-1, pieces.shape[-2], self.pool_size))
        Y, self._which = cuda._ops_for(x).maxout(X3)
        return Y.reshape(pieces.shape[:-1]),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, gy = inputs[0], grad_outputs[0]
        xp = cuda.get_array_module(x)
        axis = self.axis % x.ndim
        P = self.pool_size
        dY = xp.ascontiguousarray(gy).reshape(self._which.shape)
        dX = cuda._ops_for(x).backprop_maxout(dY, self._which, P)  # (nR, nK, nP)
        dX = dX.reshape(gy.shape + (P,))
        dX = xp.moveaxis(dX, -1, axis + 1)
        return xp.ascontiguousarray(dX).reshape(x.shape),


def maxout(x: Any, pool_size: int, axis: int = 1) -> Any:
    """Maxout: split `axis` (of size nO * pool_size) into nO groups of pool_size and keep each group's max.

    The groups are consecutive: output channel j is the max of input channels
    j * pool_size .. (j + 1) * pool_size - 1. Only the winning piece gets the gradient.
    """
    return Maxout(pool_size, axis)(x)
