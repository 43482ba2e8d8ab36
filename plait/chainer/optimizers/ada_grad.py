"""AdaGrad: h += grad**2; param -= lr * grad / (sqrt(h) + eps)."""
from typing import Any

from .. import cuda, optimizer


class AdaGrad(optimizer.GradientMethod):
    """AdaGrad (state 'h', the running sum of squared gradients)."""

    def __init__(self, lr: float = 0.001, eps: float = 1e-8) -> None:
        self.lr = lr
        self.eps = eps

    def init_state_cpu(self, param: Any, state: dict) -> None:
        state["h"] = cuda.get_array_module(param.data).zeros_like(param.data)

    init_state_gpu = init_state_cpu

    def update_one_cpu(self, param: Any, state: dict) -> None:
        xp = cuda.get_array_module(param.data)
        h, grad = state["h"], param.grad
        t = param.data.dtype.type
        h += grad * grad
        param.data -= t(self.lr) * grad / (xp.sqrt(h) + t(self.eps))

    update_one_gpu = update_one_cpu
