"""mean_squared_error: mean of (x0 - x1)**2 over all elements."""
from typing import Any

from ... import cuda, function
from ...utils import type_check


class MeanSquaredError(function.Function):
    """x0, x1 (same shape) -> () mean squared difference (not halved)."""

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        x0_type, x1_type = in_types
        type_check.expect(
            x0_type.dtype.kind == "f",
            x0_type.dtype == x1_type.dtype,
            x0_type.shape == x1_type.shape,
        )

    def forward(self, inputs: tuple) -> tuple:
        x0, x1 = inputs
        xp = cuda.get_array_module(x0)
        self.diff = x0 - x1
        flat = self.diff.ravel()
        return xp.asarray(flat.dot(flat) / max(flat.size, 1), dtype=x0.dtype).reshape(()),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        gy = grad_outputs[0]
        coeff = gy * gy.dtype.type(2.0 / max(self.diff.size, 1))
        gx0 = coeff * self.diff
        return gx0, -gx0


def mean_squared_error(x0: Any, x1: Any) -> Any:
    """Mean over all elements of (x0 - x1)**2 (the error is not scaled by 1/2)."""
    return MeanSquaredError()(x0, x1)
