"""concat: join variables along an existing axis."""
import numbers
from typing import Any, Sequence

from ... import cuda, function
from ...utils import type_check


class Concat(function.Function):
    """n arrays (..., d_k, ...) -> (..., sum_k d_k, ...), joined along `axis`."""

    def __init__(self, axis: int = 1) -> None:
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
            raise TypeError(f"concat: 'axis' must be an int, got {type(axis).__name__}: {axis!r}.")
        self.axis = int(axis)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() > 0)
        first = in_types[0]
        if self.axis >= 0:
            type_check.expect(first.ndim > type_check.Variable(self.axis, "axis"))
        else:
            type_check.expect(first.ndim >= type_check.Variable(-self.axis, "-axis"))
        ndim = first.ndim.eval()
        axis = self.axis % ndim
        for t in in_types[1:]:
            type_check.expect(t.dtype == first.dtype, t.ndim == first.ndim)
            for d in range(ndim):
                if d != axis:
                    type_check.expect(t.shape[d] == first.shape[d])

    def forward(self, inputs: tuple) -> tuple:
        xp = cuda.get_array_module(*inputs)
        return xp.concatenate(inputs, axis=self.axis),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        gy = grad_outputs[0]
        xp = cuda.get_array_module(gy)
        axis = self.axis % gy.ndim
        ends = []
        total = 0
        for x in inputs[:-1]:
            total += x.shape[axis]
            ends.append(total)
        return tuple(xp.split(gy, ends, axis=axis))


def concat(xs: Sequence[Any], axis: int = 1) -> Any:
    """The variables xs joined along `axis`; all other axes must agree."""
    return Concat(axis)(*xs)
