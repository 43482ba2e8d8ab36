"""sigmoid_cross_entropy: binary cross entropy of sigmoid(x) against 0/1 labels, -1 ignored."""
from typing import Any

import numpy

from ... import cuda, function
from ...utils import type_check


class SigmoidCrossEntropy(function.Function):
    """x (any shape) scores, t (same shape) int labels in {0, 1, -1} -> () loss"""

    ignore_label = -1

    def __init__(self, use_cudnn: bool = True, normalize: bool = True) -> None:
        self.use_cudnn = use_cudnn
        self.normalize = normalize

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        x_type, t_type = in_types
        type_check.expect(
            x_type.dtype.kind == "f",
            t_type.dtype.kind == "i",
            x_type.shape == t_type.shape,
        )

    def forward(self, inputs: tuple) -> tuple:
        x, t = inputs
        xp = cuda.get_array_module(x)
        valid = t != self.ignore_label
        # Checked on the host only: on a GPU the test would synchronise every step.
        if xp is numpy and ((t != 0) & (t != 1) & valid).any():
            bad = t[(t != 0) & (t != 1) & valid]
            raise ValueError(
                f"sigmoid_cross_entropy: labels must be 0, 1 or {self.ignore_label} (ignored); got {int(bad[0])}."
            )
        self._valid = valid
        self._count = max(int(valid.sum()), 1) if self.normalize else max(len(x) if x.ndim else 1, 1)
        # -log p(t | x) = softplus(x) - t * x, written as max(x, 0) + log(1 + e^-|x|) - t * x
        # so that large |x| neither overflows nor loses the small term.
        loss = xp.maximum(x, 0) - x * t.astype(x.dtype)
        loss += xp.log1p(xp.exp(-xp.abs(x)))
        total = (loss * valid).sum(dtype=x.dtype)
        return xp.asarray(total * x.dtype.type(1.0 / self._count), dtype=x.dtype).reshape(()),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, t = inputs
        gloss = grad_outputs[0]
        gx = cuda._ops_for(x).sigmoid(x)
        gx -= t.astype(x.dtype)
        gx *= self._valid
        gx *= gloss * x.dtype.type(1.0 / self._count)
        return gx, None


def sigmoid_cross_entropy(x: Any, t: Any, use_cudnn: bool = True, normalize: bool = True) -> Any:
    """Mean binary cross entropy of sigmoid(x) against labels t (0 or 1; -1 is ignored).

    With normalize=True the sum is divided by the number of labels that are not -1, else by
    the batch size (len(x)). The loss is 0 when every label is -1. Differentiable in x only.
    """
    return SigmoidCrossEntropy(use_cudnn, normalize)(x, t)
