"""RMSpropGraves: Graves's (2013) RMSprop with a centred second moment and momentum."""
from typing import Any

from .. import cuda, optimizer


class RMSpropGraves(optimizer.GradientMethod):
    """Alex Graves's RMSprop (states 'n', 'g' and 'delta').

    n = alpha n + (1 - alpha) grad**2; g = alpha g + (1 - alpha) grad;
    delta = momentum delta - lr grad / sqrt(n - g**2 + eps); param += delta.
    """

    def __init__(self, lr: float = 1e-4, alpha: float = 0.95, momentum: float = 0.9, eps: float = 1e-4) -> None:
        self.lr = lr
        self.alpha = alpha
        self.momentum = momentum
        self.eps = eps

    def init_state_cpu(self, param: Any, state: dict) -> None:
        xp = cuda.get_array_module(param.data)
        state["n"] = xp.zeros_like(param.data)
        state["g"] = xp.zeros_like(param.data)
        state["delta"] = xp.zeros_like(param.data)

    init_state_gpu = init_state_cpu

    def update_one_cpu(self, param: Any, state: dict) -> None:
        xp = cuda.get_array_module(param.data)
        n, g, delta, grad = state["n"], state["g"], state["delta"], param.grad
        t = param.data.dtype.type
        n *= t(self.alpha)
        n += t(1 - self.alpha) * grad * grad
        g *= t(self.alpha)
        g += t(1 - self.alpha) * grad
        delta *= t(self.momentum)
        delta -= t(self.lr) * grad / xp.sqrt(n - g * g + t(self.eps))
        param.data += delta

    update_one_gpu = update_one_cpu
