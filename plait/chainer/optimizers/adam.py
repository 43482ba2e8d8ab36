"""Adam (Kingma & Ba), with Chainer's bias correction folded into the step size `lr`."""
import math
from typing import Any

from .. import cuda, optimizer


class Adam(optimizer.GradientMethod):
    """Adam (states 'm' and 'v', the first and second moment estimates).

    m += (1 - beta1) * (grad - m); v += (1 - beta2) * (grad**2 - v);
    param -= lr * m / (sqrt(v) + eps), with lr = alpha * sqrt(1 - beta2**t) / (1 - beta1**t).
    """

    def __init__(self, alpha: float = 0.001, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
        self.alpha = alpha
        self.beta1 = beta1
        self.beta2 = beta2
        self.eps = eps

    @property
    def lr(self) -> float:
        """The bias-corrected step size at the current update count t."""
        t = max(self.t, 1)
        fix1 = 1.0 - self.beta1 ** t
        fix2 = 1.0 - self.beta2 ** t
        return self.alpha * math.sqrt(fix2) / fix1

    def init_state_cpu(self, param: Any, state: dict) -> None:
        xp = cuda.get_array_module(param.data)
        state["m"] = xp.zeros_like(param.data)
        state["v"] = xp.zeros_like(param.data)

    init_state_gpu = init_state_cpu

    def update_one_cpu(self, param: Any, state: dict) -> None:
        m, v, data, grad = state["m"], state["v"], param.data, param.grad
        xp = cuda.get_array_module(data)
        if not (data.flags.c_contiguous and m.flags.c_contiguous and v.flags.c_contiguous):
            self._update_reference(data, grad, m, v, xp)
            return
        # Chainer leaves param.grad as backward computed it (hooks and users may read it).
        ops = cuda._ops_for(data)
        ops.adam(data, grad, m, v, float(self.beta1), float(self.beta2), float(self.eps), float(self.lr),
                 keep_gradient=True)

    update_one_gpu = update_one_cpu

    def _update_reference(self, data: Any, grad: Any, m: Any, v: Any, xp: Any) -> None:
        t = data.dtype.type
        m += t(1 - self.beta1) * (grad - m)
        v += t(1 - self.beta2) * (grad * grad - v)
        data -= t(self.lr) * m / (xp.sqrt(v) + t(self.eps))
