"""where: pick x where the condition holds, else y, elementwise."""
from typing import Any

import numpy

from ... import cuda, function, utils
from ...utils import type_check


class Where(function.Function):
    """condition (bool), x, y (all one shape) -> (that shape)"""

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 3)
        c_type, x_type, y_type = in_types
        type_check.expect(
            c_type.dtype == numpy.bool_,
            x_type.dtype == y_type.dtype,
            x_type.shape == c_type.shape,
            y_type.shape == c_type.shape,
        )

    def forward(self, inputs: tuple) -> tuple:
        condition, x, y = inputs
        return utils.force_array(cuda.get_array_module(x).where(condition, x, y)),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        condition, x, _ = inputs
        gy = grad_outputs[0]
        xp = cuda.get_array_module(x)
        zeros = xp.zeros((), dtype=gy.dtype)
        return None, xp.where(condition, gy, zeros), xp.where(condition, zeros, gy)


def where(condition: Any, x: Any, y: Any) -> Any:
    """x where condition is True, y elsewhere; condition is a bool array of x's and y's shape."""
    return Where()(condition, x, y)
