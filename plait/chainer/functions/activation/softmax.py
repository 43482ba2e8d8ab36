"""softmax over the second axis (the channel axis)."""
from typing import Any

from ... import cuda, function
from ...utils import type_check


class Softmax(function.Function):
    """Softmax along axis 1. (nB, nC, ...) -> (nB, nC, ...)"""

    def __init__(self, use_cudnn: bool = True) -> None:
        self.use_cudnn = use_cudnn

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_type, = in_types
        type_check.expect(x_type.dtype.kind == "f", x_type.ndim > 1)

    def forward(self, inputs: tuple) -> tuple:
        self.y = cuda._ops_for(inputs[0]).softmax(inputs[0], axis=1)
        return self.y,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        return cuda._ops_for(self.y).backprop_softmax(self.y, grad_outputs[0], axis=1),


def softmax(x: Any, use_cudnn: bool = True) -> Any:
    """Softmax along the second axis: exp(x) / sum(exp(x), axis=1)."""
    return Softmax(use_cudnn)(x)
