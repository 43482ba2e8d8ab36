"""log_softmax over the second axis, computed without forming softmax first."""
from typing import Any

from ... import cuda, function, utils
from ...utils import type_check


def _log_softmax(x: Any) -> Any:
    """log(softmax(x, axis=1)) through the backend (no underflow for very negative scores)."""
    return utils.force_array(cuda._ops_for(x).log_softmax(x, axis=1))


def logsumexp(x: Any) -> Any:
    """log(sum(exp(x), axis=1)) of an array, keeping axis 1 (nB, nC, ...) -> (nB, 1, ...)."""
    xp = cuda.get_array_module(x)
    m = x.max(axis=1, keepdims=True)
    return xp.log(xp.exp(x - m).sum(axis=1, keepdims=True)) + m


class LogSoftmax(function.Function):
    """Log-softmax along axis 1. (nB, nC, ...) -> (nB, nC, ...)"""

    def __init__(self, use_cudnn: bool = True) -> None:
        self.use_cudnn = use_cudnn

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_type, = in_types
        type_check.expect(x_type.dtype.kind == "f", x_type.ndim > 1)

    def forward(self, inputs: tuple) -> tuple:
        self.y = _log_softmax(inputs[0])
        return self.y,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        return cuda._ops_for(self.y).backprop_log_softmax(self.y, grad_outputs[0], axis=1),


def log_softmax(x: Any, use_cudnn: bool = True) -> Any:
    """log(softmax(x)) along the second axis, computed stably."""
    return LogSoftmax(use_cudnn)(x)
