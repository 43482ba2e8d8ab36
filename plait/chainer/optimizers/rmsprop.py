"""RMSprop: ms = alpha * ms + (1 - alpha) * grad**2; param -= lr * grad / (sqrt(ms) + eps)."""
from typing import Any

from .. import cuda, optimizer


class RMSprop(optimizer.GradientMethod):
    """Hinton's RMSprop (state 'ms', the running mean of squared gradients)."""

    def __init__(self, lr: float = 0.01, alpha: float = 0.99, eps: float = 1e-8) -> None:
        self.lr = lr
        self.alpha = alpha
        self.eps = eps

    def init_state_cpu(self, param: Any, state: dict) -> None:
        state["ms"] = cuda.get_array_module(param.data).zeros_like(param.data)

    init_state_gpu = init_state_cpu

    def update_one_cpu(self, param: Any, state: dict) -> None:
        xp = cuda.get_array_module(param.data)
        ms, grad = state["ms"], param.grad
        t = param.data.dtype.type
        ms *= t(self.alpha)
        ms += t(1 - self.alpha) * grad * grad
        param.data -= t(self.lr) * grad / (xp.sqrt(ms) + t(self.eps))

    update_one_gpu = update_one_cpu
