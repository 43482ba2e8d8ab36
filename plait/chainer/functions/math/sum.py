"""sum: the sum of elements over some axes (all by default)."""
from typing import Any, Optional, Union

from ... import cuda, function, utils
from ...utils import type_check


class Sum(function.Function):
    """(any shape) -> the shape without the summed axes"""

    keepdims = False

    def __init__(self, axis: Optional[Union[int, tuple]] = None) -> None:
        if axis is None:
            self.axis = None
        elif isinstance(axis, int):
            self.axis = (axis,)
        elif isinstance(axis, tuple) and all(isinstance(a, int) for a in axis):
            if len(set(axis)) != len(axis):
                raise ValueError(f"sum: duplicate value in axis: {axis}.")
            self.axis = axis
        else:
            raise TypeError(f"sum: axis must be None, an int or a tuple of ints, got {axis!r}.")

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")
        if self.axis is not None:
            for axis in self.axis:
                if axis >= 0:
                    type_check.expect(axis < in_types[0].ndim)
                else:
                    type_check.expect(-axis - 1 < in_types[0].ndim)

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        return utils.force_array(x.sum(axis=self.axis), dtype=x.dtype),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, gy = inputs[0], grad_outputs[0]
        xp = cuda.get_array_module(x)
        if self.axis is not None:
            axes = sorted(a % x.ndim for a in self.axis)
            for a in axes:
                gy = xp.expand_dims(gy, a)
        return xp.ascontiguousarray(xp.broadcast_to(gy, x.shape)),


def sum(x: Any, axis: Optional[Union[int, tuple]] = None) -> Any:  # noqa: A001 - chainer's name
    """Sum of x's elements over `axis` (an int, a tuple of ints, or None for all)."""
    return Sum(axis)(x)
