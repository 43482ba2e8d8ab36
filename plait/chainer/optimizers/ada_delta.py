"""AdaDelta: Zeiler's update from running averages of squared gradients and squared steps."""
from typing import Any

from .. import cuda, optimizer


class AdaDelta(optimizer.GradientMethod):
    """AdaDelta (states 'msg', mean squared gradient, and 'msdx', mean squared step)."""

    def __init__(self, rho: float = 0.95, eps: float = 1e-6) -> None:
        self.rho = rho
        self.eps = eps

    def init_state_cpu(self, param: Any, state: dict) -> None:
        xp = cuda.get_array_module(param.data)
        state["msg"] = xp.zeros_like(param.data)
        state["msdx"] = xp.zeros_like(param.data)

    init_state_gpu = init_state_cpu

    def update_one_cpu(self, param: Any, state: dict) -> None:
        xp = cuda.get_array_module(param.data)
        msg, msdx, grad = state["msg"], state["msdx"], param.grad
        t = param.data.dtype.type
        rho, eps = t(self.rho), t(self.eps)
        msg *= rho
        msg += (t(1) - rho) * grad * grad
        dx = xp.sqrt((msdx + eps) / (msg + eps)) * grad
        msdx *= rho
        msdx += (t(1) - rho) * dx * dx
        param.data -= dx

    update_one_gpu = update_one_cpu
