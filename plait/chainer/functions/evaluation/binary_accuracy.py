"""binary_accuracy: the fraction of examples whose score has the sign of the label (not
differentiable)."""
from typing import Any

import numpy

from ... import cuda, function
from ...utils import type_check


class BinaryAccuracy(function.Function):
    """y float32 scores, t int32 labels of y's shape -> () float32 accuracy.

    A score >= 0 predicts 1, one < 0 predicts 0; labels equal to ignore_label (-1) are not
    counted (all ignored: the accuracy is 0).
    """

    ignore_label = -1

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        y_type, t_type = in_types
        type_check.expect(
            y_type.dtype == numpy.float32,
            t_type.dtype == numpy.int32,
            t_type.shape == y_type.shape,
        )

    def forward(self, inputs: tuple) -> tuple:
        y, t = inputs
        xp = cuda.get_array_module(y, t)
        y = y.ravel()
        t = t.ravel()
        count = xp.maximum(1, (t != self.ignore_label).sum())
        hits = ((y >= 0) == t).sum(dtype=numpy.float32)
        return xp.asarray(hits / count, dtype=numpy.float32),


def binary_accuracy(y: Any, t: Any) -> Any:
    """Fraction of y's elements whose sign (>= 0: 1, < 0: 0) matches t; t == -1 is skipped."""
    return BinaryAccuracy()(y, t)
