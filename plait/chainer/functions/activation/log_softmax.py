"""log_softmax over the second axis, computed without forming softmax first."""
from typing import Any

from ... import cuda, function, utils
from ...utils import type_check


def _log_softmax(x: Any) -> Any:
    """log(softmax(x, axis=1)) as x - logsumexp(x): no underflow for very negative scores."""
    xp = cuda.get_array_module(x)
    y = x - x.max(axis=1, keepdims=True)
    lse = xp.log(xp.exp(y).sum(axis=1, keepdims=True))
    y -= lse
    return utils.force_array(y)


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
        xp = cuda.get_array_module(self.y)
        gy = grad_outputs[0]
        gx = xp.exp(self.y)
        gx *= -gy.sum(axis=1, keepdims=True)
        gx += gy
        return gx,


def log_softmax(x: Any, use_cudnn: bool = True) -> Any:
    """log(softmax(x)) along the second axis, computed stably."""
    return LogSoftmax(use_cudnn)(x)
