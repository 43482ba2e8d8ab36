"""local_response_normalization: divide each channel by a power of its neighbours' energy."""
from typing import Any

from ... import cuda, function
from ...utils import type_check


def _channel_window_sum(xp: Any, a: Any, half: int) -> Any:
    """out[:, c] = sum of a[:, c - half .. c + half] (clipped at the ends), for each c."""
    if half == 0:
        return a.copy()
    C = a.shape[1]
    padded = xp.zeros((a.shape[0], C + 2 * half) + a.shape[2:], dtype=a.dtype)
    padded[:, half:half + C] = a
    out = padded[:, 0:C].copy()
    for offset in range(1, 2 * half + 1):
        out += padded[:, offset:offset + C]
    return out


class LocalResponseNormalization(function.Function):
    """(nB, C, ...) -> (nB, C, ...), normalised across a window of n // 2 channels each side."""

    def __init__(self, n: int = 5, k: float = 2, alpha: float = 1e-4, beta: float = 0.75) -> None:
        if int(n) != n or n < 1:
            raise ValueError(f"local_response_normalization: 'n' must be a positive int, got {n!r}.")
        self.n = int(n)
        self.k = float(k)
        self.alpha = float(alpha)
        self.beta = float(beta)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_type, = in_types
        type_check.expect(x_type.dtype.kind == "f", x_type.ndim >= 2)

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        xp = cuda.get_array_module(x)
        t = x.dtype.type
        # unit = k + alpha * (sum of squares over the window); y = x * unit**-beta
        self._unit = _channel_window_sum(xp, x * x, self.n // 2)
        self._unit *= t(self.alpha)
        self._unit += t(self.k)
        self._scale = self._unit ** t(-self.beta)
        self._y = x * self._scale
        return self._y,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, gy = inputs[0], grad_outputs[0]
        xp = cuda.get_array_module(x)
        t = x.dtype.type
        # y_c depends on x_j for every j in c's window, and the windows are symmetric, so the
        # cross term for x_j sums y_c * gy_c / unit_c over j's own window.
        cross = _channel_window_sum(xp, self._y * gy / self._unit, self.n // 2)
        gx = gy * self._scale
        gx -= t(2.0 * self.alpha * self.beta) * x * cross
        return gx,


def local_response_normalization(x: Any, n: int = 5, k: float = 2, alpha: float = 1e-4, beta: float = 0.75) -> Any:
    """Local response normalisation across channels (axis 1).

    y_c = x_c / (k + alpha * sum_{j = c - n//2}^{c + n//2} x_j**2) ** beta, the window clipped
    at the first and last channel.
    """
    return LocalResponseNormalization(n, k, alpha, beta)(x)
