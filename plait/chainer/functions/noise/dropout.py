"""dropout: zero each element with probability `ratio`, scale the rest by 1 / (1 - ratio)."""
from typing import Any

import numpy

from ... import cuda, function
from ...utils import type_check


class Dropout(function.Function):
    """(any shape) -> (same shape); the mask is drawn once per Function object and reused."""

    def __init__(self, dropout_ratio: float) -> None:
        ratio = float(dropout_ratio)
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"dropout: 'ratio' must be in [0, 1], got {dropout_ratio!r}.")
        self.dropout_ratio = ratio

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        if getattr(self, "mask", None) is None and isinstance(x, numpy.ndarray) and self.dropout_ratio < 1.0:
            # NOTE: on the CPU the mask is Chainer 1.7.2's draw, numpy.random.rand(*shape) >= ratio,
            # so that a program seeded with numpy.random.seed (or plait.util.fix_random_seed)
            # drops the very units it dropped on Chainer.
            flag = numpy.random.rand(*x.shape) >= self.dropout_ratio
            self.mask = x.dtype.type(1.0 / (1.0 - self.dropout_ratio)) * flag
        if getattr(self, "mask", None) is None:
            # The backend draws the mask, so plait.util.fix_random_seed makes it reproducible.
            mask = cuda._ops_for(x).get_dropout_mask(x.shape, self.dropout_ratio)
            if mask.dtype != x.dtype:
                # The backend's mask is float32; rebuild the scale in x's precision.
                keep = mask != 0
                scale = 1.0 / (1.0 - self.dropout_ratio) if self.dropout_ratio < 1.0 else 0.0
                mask = keep.astype(x.dtype) * x.dtype.type(scale)
            self.mask = mask
        return x * self.mask,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        return grad_outputs[0] * self.mask,


def dropout(x: Any, ratio: float = 0.5, train: bool = True) -> Any:
    """Inverted dropout: in training, zero elements with probability `ratio` and scale the rest.

    With train=False it does nothing and returns x itself.
    """
    if train:
        return Dropout(ratio)(x)
    return x
