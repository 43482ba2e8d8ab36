"""hinge: the one-vs-all hinge loss of class scores against integer labels."""
from typing import Any

import numpy

from ... import cuda, function
from ...utils import type_check


class Hinge(function.Function):
    """x (nB, nC) scores, t (nB,) int labels -> () loss"""

    def __init__(self, norm: str = "L1") -> None:
        if norm not in ("L1", "L2"):
            raise ValueError(f"hinge: 'norm' must be 'L1' or 'L2', got {norm!r}.")
        self.norm = norm

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        x_type, t_type = in_types
        type_check.expect(
            x_type.dtype.kind == "f",
            t_type.dtype.kind == "i",
            x_type.ndim == 2,
            t_type.ndim == 1,
            x_type.shape[0] == t_type.shape[0],
        )

    def forward(self, inputs: tuple) -> tuple:
        x, t = inputs
        xp = cuda.get_array_module(x)
        nB, nC = x.shape
        if xp is numpy and t.size and (int(t.min()) < 0 or int(t.max()) >= nC):
            bad = t[(t < 0) | (t >= nC)]
            raise ValueError(f"hinge: labels must be in [0, {nC}); got {int(bad[0])}.")
        # Each score is pushed to be >= 1 for the true class and <= -1 for the others:
        # margin = max(0, 1 - x) there and max(0, 1 + x) elsewhere.
        sign = xp.ones_like(x)
        sign[xp.arange(nB), t] = -1
        self._sign = sign
        self._margin = xp.maximum(0, 1 + sign * x)
        per = self._margin if self.norm == "L1" else self._margin * self._margin
        return xp.asarray(per.sum(dtype=x.dtype) * x.dtype.type(1.0 / max(nB, 1)), dtype=x.dtype).reshape(()),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x = inputs[0]
        gloss = grad_outputs[0]
        if self.norm == "L1":
            gx = self._sign * (self._margin > 0)
        else:
            gx = self._sign * self._margin * x.dtype.type(2)
        gx *= gloss * x.dtype.type(1.0 / max(len(x), 1))
        return gx.astype(x.dtype, copy=False), None


def hinge(x: Any, t: Any, norm: str = "L1") -> Any:
    """Hinge loss (1/nB) sum_n sum_k max(0, 1 - s_nk x_nk)**p, s_nk = 1 for the label, -1 elsewhere.

    p is 1 for norm='L1' and 2 for norm='L2'. Differentiable in x only.
    """
    return Hinge(norm)(x, t)
