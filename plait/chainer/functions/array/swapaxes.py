"""swapaxes: exchange two axes (a view)."""
import numbers
from typing import Any

from ... import function
from ...utils import type_check


class Swapaxes(function.Function):
    """(.., d1, .., d2, ..) -> (.., d2, .., d1, ..)"""

    def __init__(self, axis1: int, axis2: int) -> None:
        for name, a in (("axis1", axis1), ("axis2", axis2)):
            if isinstance(a, bool) or not isinstance(a, numbers.Integral):
                raise TypeError(f"swapaxes: '{name}' must be an int, got {type(a).__name__}: {a!r}.")
        self.axis1 = int(axis1)
        self.axis2 = int(axis2)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_type = in_types[0]
        for name, a in (("axis1", self.axis1), ("axis2", self.axis2)):
            if a >= 0:
                type_check.expect(x_type.ndim > type_check.Variable(a, name))
            else:
                type_check.expect(x_type.ndim >= type_check.Variable(-a, f"-{name}"))

    def forward(self, inputs: tuple) -> tuple:
        return inputs[0].swapaxes(self.axis1, self.axis2),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        return grad_outputs[0].swapaxes(self.axis1, self.axis2),


def swapaxes(x: Any, axis1: int, axis2: int) -> Any:
    """x with axes axis1 and axis2 exchanged."""
    return Swapaxes(axis1, axis2)(x)
