"""contrastive: pull similar pairs together, push dissimilar ones at least `margin` apart."""
from typing import Any

from ... import cuda, function
from ...utils import type_check


class Contrastive(function.Function):
    """x0, x1 (nB, nK), y (nB,) int labels (1 similar, 0 dissimilar) -> () loss"""

    def __init__(self, margin: float = 1) -> None:
        if not float(margin) > 0:
            raise ValueError(f"contrastive: 'margin' must be > 0, got {margin!r}.")
        self.margin = float(margin)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 3)
        x0_type, x1_type, y_type = in_types
        type_check.expect(
            x0_type.dtype.kind == "f",
            x1_type.dtype == x0_type.dtype,
            y_type.dtype.kind == "i",
            x0_type.ndim == 2,
            x0_type.shape == x1_type.shape,
            y_type.ndim == 1,
            x0_type.shape[0] == y_type.shape[0],
        )

    def forward(self, inputs: tuple) -> tuple:
        x0, x1, y = inputs
        xp = cuda.get_array_module(x0)
        t = x0.dtype.type
        self._diff = x0 - x1  # (nB, nK)
        dist_sq = (self._diff * self._diff).sum(axis=1)
        self._dist = xp.sqrt(dist_sq)
        self._gap = xp.maximum(t(self.margin) - self._dist, 0)  # max(margin - d, 0)
        similar = y.astype(x0.dtype)
        per = similar * dist_sq + (1 - similar) * self._gap * self._gap
        n = max(len(x0), 1)
        return xp.asarray(per.sum(dtype=x0.dtype) * t(0.5 / n), dtype=x0.dtype).reshape(()),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x0, _, y = inputs
        xp = cuda.get_array_module(x0)
        t = x0.dtype.type
        gloss = grad_outputs[0]
        similar = y.astype(x0.dtype)
        # Similar: d(d^2)/d x0 = 2 diff. Dissimilar: d(gap^2)/d x0 = -2 gap diff / d, zero when
        # the pair is already farther apart than the margin (gap = 0); d = 0 gives gap / d = inf
        # but then diff = 0, and the gradient is taken as 0.
        safe_dist = xp.where(self._dist > 0, self._dist, 1)
        coeff = similar - (1 - similar) * xp.where(self._dist > 0, self._gap / safe_dist, 0)
        gx0 = self._diff * coeff[:, None]
        gx0 *= gloss * t(1.0 / max(len(x0), 1))
        gx0 = gx0.astype(x0.dtype, copy=False)
        return gx0, -gx0, None


def contrastive(x0: Any, x1: Any, y: Any, margin: float = 1) -> Any:
    """Contrastive loss (1 / 2N) sum_n y_n d_n^2 + (1 - y_n) max(margin - d_n, 0)^2, d_n = |x0_n - x1_n|.

    Differentiable in x0 and x1.
    """
    return Contrastive(margin)(x0, x1, y)
