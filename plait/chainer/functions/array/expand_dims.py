"""expand_dims: insert an axis of size 1 (a view, no copy)."""
import numbers
from typing import Any

from ... import function
from ...utils import type_check


class ExpandDims(function.Function):
    """(d0, ..., dn) -> the same with a 1 inserted at `axis`."""

    def __init__(self, axis: int) -> None:
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
            raise TypeError(f"expand_dims: 'axis' must be an int, got {type(axis).__name__}: {axis!r}.")
        self.axis = int(axis)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_type = in_types[0]
        # The output has ndim + 1 axes, so axis may range over -(ndim + 1) .. ndim.
        if self.axis >= 0:
            type_check.expect(x_type.ndim >= type_check.Variable(self.axis, "axis"))
        else:
            type_check.expect(x_type.ndim >= type_check.Variable(-self.axis - 1, "-axis - 1"))

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        axis = self.axis % (x.ndim + 1)
        return x.reshape(x.shape[:axis] + (1,) + x.shape[axis:]),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        return grad_outputs[0].reshape(inputs[0].shape),


def expand_dims(x: Any, axis: int) -> Any:
    """x with a new axis of size 1 at position `axis` (negative counts from the end of the output)."""
    return ExpandDims(axis)(x)
