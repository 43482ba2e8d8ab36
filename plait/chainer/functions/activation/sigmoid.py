"""sigmoid: 1 / (1 + exp(-x)) elementwise."""
from typing import Any

from ... import cuda, function
from ...utils import type_check


class Sigmoid(function.Function):
    """Logistic sigmoid. (any shape) -> (same shape)"""

    def __init__(self, use_cudnn: bool = True) -> None:
        self.use_cudnn = use_cudnn

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, inputs: tuple) -> tuple:
        self.y = cuda._ops_for(inputs[0]).sigmoid(inputs[0])
        return self.y,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        return cuda._ops_for(self.y).backprop_sigmoid(grad_outputs[0], self.y),


def sigmoid(x: Any, use_cudnn: bool = True) -> Any:
    """Elementwise logistic sigmoid f(x) = 1 / (1 + exp(-x))."""
    return Sigmoid(use_cudnn)(x)
