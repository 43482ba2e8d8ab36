"""tanh: hyperbolic tangent elementwise."""
from typing import Any

from ... import cuda, function, utils
from ...utils import type_check


class Tanh(function.Function):
    """Hyperbolic tangent. (any shape) -> (same shape)"""

    def __init__(self, use_cudnn: bool = True) -> None:
        self.use_cudnn = use_cudnn

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        self.y = utils.force_array(cuda.get_array_module(x).tanh(x))
        return self.y,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        ops = cuda._ops_for(self.y)
        return utils.force_array(grad_outputs[0] * ops.dtanh(self.y)),


def tanh(x: Any, use_cudnn: bool = True) -> Any:
    """Elementwise hyperbolic tangent."""
    return Tanh(use_cudnn)(x)
