"""softplus: log(1 + exp(beta * x)) / beta elementwise."""
from typing import Any

from ... import cuda, function, utils
from ...utils import type_check


class Softplus(function.Function):
    """Smooth rectifier with sharpness beta. (any shape) -> (same shape)"""

    def __init__(self, beta: float = 1.0) -> None:
        if not float(beta) != 0:
            raise ValueError(f"softplus: 'beta' must be non-zero (the output is divided by it), got {beta!r}.")
        self.beta = float(beta)
        self.beta_inv = 1.0 / self.beta

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        xp = cuda.get_array_module(x)
        bx = x * x.dtype.type(self.beta)
        # log(1 + e^z) = max(z, 0) + log(1 + e^-|z|): no overflow for large z, no loss for small.
        y = xp.maximum(bx, 0)
        y += xp.log1p(xp.exp(-xp.abs(bx)))
        y *= x.dtype.type(self.beta_inv)
        return utils.force_array(y),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x = inputs[0]
        ops = cuda._ops_for(x)
        return utils.force_array(grad_outputs[0] * ops.sigmoid(x * x.dtype.type(self.beta))),


def softplus(x: Any, beta: float = 1.0) -> Any:
    """Softplus f(x) = log(1 + exp(beta * x)) / beta, a smooth approximation of relu."""
    return Softplus(beta)(x)
