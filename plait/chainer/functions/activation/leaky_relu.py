"""leaky_relu: x where x >= 0, slope * x elsewhere."""
from typing import Any

from ... import cuda, function, utils
from ...utils import type_check


class LeakyReLU(function.Function):
    """Leaky rectifier with a fixed slope. (any shape) -> (same shape)"""

    def __init__(self, slope: float = 0.2) -> None:
        self.slope = slope

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        xp = cuda.get_array_module(x)
        return utils.force_array(xp.where(x >= 0, x, x * x.dtype.type(self.slope))),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, gy = inputs[0], grad_outputs[0]
        xp = cuda.get_array_module(x)
        return utils.force_array(xp.where(x >= 0, gy, gy * gy.dtype.type(self.slope))),


def leaky_relu(x: Any, slope: float = 0.2) -> Any:
    """Leaky rectified linear unit f(x) = max(x, slope * x)."""
    return LeakyReLU(slope)(x)
