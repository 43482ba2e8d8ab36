"""clipped_relu: min(max(0, x), z) elementwise."""
import numbers
from typing import Any

from ... import cuda, function
from ...utils import type_check


class ClippedReLU(function.Function):
    """Rectifier capped at z. (any shape) -> (same shape)"""

    def __init__(self, z: float = 20.0) -> None:
        if isinstance(z, bool) or not isinstance(z, numbers.Real):
            raise TypeError(f"clipped_relu: the cap 'z' must be a real number, got {type(z).__name__}: {z!r}.")
        if not float(z) > 0:
            raise ValueError(f"clipped_relu: the cap 'z' must be > 0, got {z!r}.")
        self.cap = float(z)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        return cuda._ops_for(x).clipped_linear(x, min_val=0.0, max_val=self.cap),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x = inputs[0]
        # The gradient is 1 strictly inside (0, z) and 0 at and beyond both ends.
        return cuda._ops_for(x).backprop_clipped_linear(grad_outputs[0], x, min_val=0.0, max_val=self.cap),


def clipped_relu(x: Any, z: float = 20.0) -> Any:
    """Clipped rectifier f(x) = min(max(0, x), z) with a cap z > 0."""
    return ClippedReLU(z)(x)
