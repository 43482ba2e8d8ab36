"""elu: x where x >= 0, alpha * (exp(x) - 1) elsewhere."""
from typing import Any

from ... import cuda, function, utils
from ...utils import type_check


class ELU(function.Function):
    """Exponential linear unit. (any shape) -> (same shape)"""

    def __init__(self, alpha: float = 1.0) -> None:
        self.alpha = float(alpha)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        xp = cuda.get_array_module(x)
        # expm1 keeps the relative precision of exp(x) - 1 for x close to 0.
        neg = xp.expm1(xp.minimum(x, 0)) * x.dtype.type(self.alpha)
        return utils.force_array(xp.where(x >= 0, x, neg)),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, gy = inputs[0], grad_outputs[0]
        xp = cuda.get_array_module(x)
        slope = xp.exp(xp.minimum(x, 0)) * x.dtype.type(self.alpha)
        return utils.force_array(xp.where(x >= 0, gy, gy * slope)),


def elu(x: Any, alpha: float = 1.0) -> Any:
    """Exponential linear unit: x for x >= 0, alpha * (exp(x) - 1) for x < 0."""
    return ELU(alpha)(x)
