"""MomentumSGD: v = momentum * v - lr * grad; param += v."""
from typing import Any

from .. import cuda, optimizer


class MomentumSGD(optimizer.GradientMethod):
    """Classical momentum SGD (state 'v', the velocity)."""

    def __init__(self, lr: float = 0.01, momentum: float = 0.9) -> None:
        self.lr = lr
        self.momentum = momentum

    def init_state_cpu(self, param: Any, state: dict) -> None:
        state["v"] = cuda.get_array_module(param.data).zeros_like(param.data)

    init_state_gpu = init_state_cpu

    def update_one_cpu(self, param: Any, state: dict) -> None:
        v = state["v"]
        t = param.data.dtype.type
        v *= t(self.momentum)
        v -= param.grad * t(self.lr)
        param.data += v

    update_one_gpu = update_one_cpu
