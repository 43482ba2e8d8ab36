"""NesterovAG: Nesterov's accelerated gradient in the velocity form of Bengio et al. (2012)."""
from typing import Any

from .. import cuda, optimizer


class NesterovAG(optimizer.GradientMethod):
    """Nesterov's accelerated gradient (state 'v').

    v = momentum * v - lr * grad; param += momentum**2 * v - (1 + momentum) * lr * grad.
    """

    def __init__(self, lr: float = 0.01, momentum: float = 0.9) -> None:
        self.lr = lr
        self.momentum = momentum

    def init_state_cpu(self, param: Any, state: dict) -> None:
        state["v"] = cuda.get_array_module(param.data).zeros_like(param.data)

    init_state_gpu = init_state_cpu

    def update_one_cpu(self, param: Any, state: dict) -> None:
        v, grad = state["v"], param.grad
        t = param.data.dtype.type
        v *= t(self.momentum)
        v -= grad * t(self.lr)
        param.data += v * t(self.momentum * self.momentum)
        param.data -= grad * t((1 + self.momentum) * self.lr)

    update_one_gpu = update_one_cpu
