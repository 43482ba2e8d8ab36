"""relu: max(0, x) elementwise."""
from typing import Any

from ... import cuda, function
from ...utils import type_check


class ReLU(function.Function):
    """Rectified linear unit. (any shape) -> (same shape)"""

    def __init__(self, use_cudnn: bool = True) -> None:
        self.use_cudnn = use_cudnn

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def _types_ok(self, in_data: tuple) -> bool:
        return len(in_data) == 1 and in_data[0].dtype.kind == "f"

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        return cuda._ops_for(x).relu(x),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x = inputs[0]
        # relu(x) > 0 exactly where x > 0, so the input stands in for the output.
        return cuda._ops_for(x).backprop_relu(grad_outputs[0], x),


def relu(x: Any, use_cudnn: bool = True) -> Any:
    """Rectified linear unit f(x) = max(0, x), elementwise."""
    return ReLU(use_cudnn)(x)
