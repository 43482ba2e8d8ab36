"""accuracy: the fraction of rows whose highest score is the label (not differentiable)."""
from typing import Any, Optional

from ... import cuda, function
from ...utils import type_check


class Accuracy(function.Function):
    """y (nB, nC, d1, ...) scores, t (nB, d1, ...) int labels -> () accuracy, in y's dtype."""

    def __init__(self, ignore_label: Optional[int] = None) -> None:
        self.ignore_label = ignore_label

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        y_type, t_type = in_types
        type_check.expect(
            y_type.dtype.kind == "f",
            t_type.dtype.kind == "i",
            y_type.ndim >= 2,
            t_type.ndim == y_type.ndim - 1,
            y_type.shape[0] == t_type.shape[0],
            y_type.shape[2:] == t_type.shape[1:],
        )

    def _types_ok(self, in_data: tuple) -> bool:
        return type_check._scores_and_labels_ok(in_data)

    def forward(self, inputs: tuple) -> tuple:
        y, t = inputs
        xp = cuda.get_array_module(y)
        pred = y.argmax(axis=1).reshape(t.shape)
        if self.ignore_label is None:
            hit = (pred == t).mean(dtype=y.dtype) if t.size else y.dtype.type(0)
            return xp.asarray(hit, dtype=y.dtype),
        mask = t != self.ignore_label
        total = int(mask.sum())
        if total == 0:
            return xp.asarray(0, dtype=y.dtype),
        return xp.asarray(((pred == t) & mask).sum() / total, dtype=y.dtype),


def accuracy(y: Any, t: Any, ignore_label: Optional[int] = None) -> Any:
    """Fraction of examples whose argmax over axis 1 of y equals t (labels == ignore_label skipped)."""
    return Accuracy(ignore_label)(y, t)
