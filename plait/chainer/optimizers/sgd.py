"""SGD: param -= lr * grad."""
from typing import Any

from .. import optimizer


class SGD(optimizer.GradientMethod):
    """Vanilla stochastic gradient descent."""

    def __init__(self, lr: float = 0.01) -> None:
        self.lr = lr

    def update_one_cpu(self, param: Any, state: dict) -> None:
        param.data -= param.grad * param.data.dtype.type(self.lr)

    update_one_gpu = update_one_cpu
