"""softmax_cross_entropy: mean negative log-likelihood of integer labels under softmax(x)."""
from typing import Any

import numpy

from ... import cuda, function
from ...utils import type_check
from ..activation.log_softmax import _log_softmax, logsumexp  # noqa: F401 - chainer's helper


def softmax_log(x: Any, use_cudnn: bool = True) -> Any:
    """log(softmax(x)) along axis 1 of an array (the helper of Chainer's module of this name)."""
    return _log_softmax(x)


class SoftmaxCrossEntropy(function.Function):
    """x (nB, nC, d1, ...), t (nB, d1, ...) int -> () loss; label -1 is ignored."""

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
            x_type.ndim >= 2,
            t_type.ndim == x_type.ndim - 1,
            x_type.shape[0] == t_type.shape[0],
            x_type.shape[2:] == t_type.shape[1:],
        )

    def _types_ok(self, in_data: tuple) -> bool:
        return type_check._scores_and_labels_ok(in_data)

    def forward(self, inputs: tuple) -> tuple:
        x, t = inputs
        xp = cuda.get_array_module(x)
        log_y = _log_softmax(x)
        self.y = xp.exp(log_y)  # kept for backward: softmax(x)
        n_class = x.shape[1]
        # Move the class axis last so each position is one row of scores: (N, nC).
        log_p = xp.moveaxis(log_y, 1, -1).reshape(-1, n_class)
        t_flat = t.ravel()
        valid = t_flat != self.ignore_label
        # Always checked on the host; on a GPU only in debug mode (set_debug(True)), as in
        # Chainer: there the check synchronises the device every step.
        if (xp is numpy or function.is_debug()) and bool(
            ((t_flat < 0) & valid).any() or (t_flat >= n_class).any()
        ):
            bad = t_flat[((t_flat < 0) & valid) | (t_flat >= n_class)]
            raise ValueError(
                f"softmax_cross_entropy: labels must be in [0, {n_class}) or {self.ignore_label} "
                f"(ignored); got {int(bad[0])}."
            )
        picked = log_p[xp.arange(t_flat.size), xp.where(valid, t_flat, 0)]
        count = int(valid.sum()) if self.normalize else len(x)
        self._coeff = 1.0 / max(count, 1)
        loss = -(picked * valid).sum(dtype=x.dtype) * x.dtype.type(self._coeff)
        return xp.asarray(loss, dtype=x.dtype).reshape(()),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, t = inputs
        xp = cuda.get_array_module(x)
        gloss = grad_outputs[0]
        n_class = x.shape[1]
        gx = xp.moveaxis(self.y, 1, -1).reshape(-1, n_class).copy()
        t_flat = t.ravel()
        valid = t_flat != self.ignore_label
        gx[xp.arange(t_flat.size), xp.where(valid, t_flat, 0)] -= 1
        gx *= valid[:, None]
        gx *= gloss * x.dtype.type(self._coeff)
        if x.ndim > 2:
            moved = (x.shape[0],) + x.shape[2:] + (n_class,)
            gx = xp.ascontiguousarray(xp.moveaxis(gx.reshape(moved), -1, 1))
        return gx.astype(x.dtype, copy=False), None


def softmax_cross_entropy(x: Any, t: Any, use_cudnn: bool = True, normalize: bool = True) -> Any:
    """Cross entropy of softmax(x) (over axis 1) against integer labels t; returns a scalar.

    With normalize=True the sum is divided by the number of labels that are not -1, else by
    the batch size.
    """
    return SoftmaxCrossEntropy(use_cudnn, normalize)(x, t)
