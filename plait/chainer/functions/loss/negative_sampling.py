"""negative_sampling: score the true word against a few sampled noise words instead of the whole vocabulary."""
from typing import Any, Callable

import numpy

from ... import cuda, function
from ...utils import type_check


class NegativeSamplingFunction(function.Function):
    """x (nB, nI), t (nB,) int, W (nV, nI) -> () summed loss (or (nB,) with reduce='no').

    Row b's loss is -log sigmoid(W[t[b]] . x[b]) - sum_k log sigmoid(-W[s[b, k]] . x[b]) over
    sample_size noise words s drawn by the sampler. Rows with t == -1 contribute nothing.
    """

    ignore_label = -1

    def __init__(self, sampler: Callable[[Any], Any], sample_size: int, reduce: str = "sum") -> None:
        if not callable(sampler):
            raise TypeError(
                f"negative_sampling: 'sampler' must be callable as sampler(shape) -> int array, got "
                f"{type(sampler).__name__}; pass e.g. WalkerAlias(probs).sample."
            )
        if isinstance(sample_size, bool) or not isinstance(sample_size, (int, numpy.integer)) or sample_size < 0:
            raise ValueError(f"negative_sampling: 'sample_size' must be an int >= 0, got {sample_size!r}.")
        if reduce not in ("sum", "no"):
            raise ValueError(f"negative_sampling: 'reduce' must be 'sum' or 'no', got {reduce!r}.")
        self.sampler = sampler
        self.sample_size = int(sample_size)
        self.reduce = reduce

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 3)
        x_type, t_type, w_type = in_types
        type_check.expect(
            x_type.dtype.kind == "f",
            x_type.ndim == 2,
            t_type.dtype.kind == "i",
            t_type.ndim == 1,
            x_type.shape[0] == t_type.shape[0],
            w_type.dtype == x_type.dtype,
            w_type.ndim == 2,
            w_type.shape[1] == x_type.shape[1],
        )

    def _make_samples(self, t: Any, nV: int) -> Any:
        """(nB, 1 + sample_size) int32 word IDs: column 0 the true words t, then the noise words.

        They are kept as `self.samples`, as in Chainer; a `samples` already set (on the instance,
        or on the class, as Chainer's tests do to fix the noise words) is used as it is.
        """
        fixed = getattr(self, "samples", None)
        if fixed is not None:
            return fixed
        xp = cuda.get_array_module(t)
        shape = (int(t.shape[0]), self.sample_size + 1)
        # The sampler is asked for one column more than needed, as Chainer does, so that a
        # fixed-seed sampler yields the same noise words here as there; column 0 is overwritten.
        drawn = self.sampler(shape)
        if tuple(getattr(drawn, "shape", ())) != shape or getattr(drawn, "dtype", numpy.float32).kind not in "iu":
            raise ValueError(
                f"negative_sampling: sampler({shape}) must return an int array of shape {shape}, got "
                f"{type(drawn).__name__} of shape {getattr(drawn, 'shape', None)}, dtype "
                f"{getattr(drawn, 'dtype', None)}."
            )
        samples = xp.array(drawn, dtype=numpy.int32)
        samples[:, 0] = xp.where(t == self.ignore_label, 0, t)
        # Checked on the host only: on a GPU the test would synchronise every step.
        if xp is numpy and samples.size and (samples.min() < 0 or samples.max() >= nV):
            raise ValueError(
                f"negative_sampling: word IDs (labels t other than {self.ignore_label}, and sampled words) "
                f"must lie in 0..{nV - 1} (rows of W), got min {int(samples.min())}, max "
                f"{int(samples.max())}."
            )
        self.samples = samples
        return samples

    def forward(self, inputs: tuple) -> tuple:
        x, t, W = inputs
        xp = cuda.get_array_module(x)
        samples = self._make_samples(t, W.shape[0])
        keep = (t != self.ignore_label).astype(x.dtype)  # (nB,)
        # (nB, 1 + k): scores, negated for the true word so that every term is -log sigmoid(-z).
        z = xp.einsum("bkn,bn->bk", W[samples], x)
        z[:, 0] *= -1
        losses = xp.logaddexp(0, z).sum(axis=1, dtype=x.dtype) * keep
        self._retained = (samples, z, keep)
        if self.reduce == "sum":
            return xp.asarray(losses.sum(dtype=x.dtype), dtype=x.dtype).reshape(()),
        return losses.astype(x.dtype, copy=False),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, t, W = inputs
        xp = cuda.get_array_module(x)
        samples, z, keep = self._retained
        gy = grad_outputs[0]
        gy = gy * keep if self.reduce == "sum" else gy.reshape(-1) * keep
        # d/dz log(1 + e^z) = sigmoid(z); the true word's column was negated, so its sign flips back.
        g = xp.exp(z - xp.logaddexp(0, z))
        g[:, 0] *= -1
        g = (g * gy[:, None]).astype(x.dtype, copy=False)  # (nB, 1 + k)
        dx = xp.einsum("bk,bkn->bn", g, W[samples]).astype(x.dtype, copy=False)
        dW = xp.zeros_like(W)
        if samples.size:
            values = xp.ascontiguousarray(g[:, :, None] * x[:, None, :], dtype=W.dtype)
            # The same word may be drawn many times in a batch; its gradients must add up.
            cuda._ops_for(W).scatter_add(dW, samples, values)
        return dx, None, dW


def negative_sampling(x: Any, t: Any, W: Any, sampler: Callable[[Any], Any], sample_size: int,
                      reduce: str = "sum") -> Any:
    """Negative sampling loss. x (nB, nI), t (nB,) int32, W (nV, nI) -> () (or (nB,) with reduce='no')

    For each row b: -log sigmoid(W[t[b]] . x[b]) - sum_{k < sample_size} log sigmoid(-W[s_bk] . x[b]),
    with noise words s drawn by sampler(shape) (an int array of that shape, e.g. WalkerAlias.sample
    on counts ** 0.75). The rows' losses are summed; t == -1 marks rows to ignore.
    Differentiable in x and W.
    """
    return NegativeSamplingFunction(sampler, sample_size, reduce)(x, t, W)
