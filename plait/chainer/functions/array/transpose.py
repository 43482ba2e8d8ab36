"""transpose: permute the axes (a view)."""
from typing import Any, Optional, Sequence

import numpy

from ... import function
from ...utils import type_check


class Transpose(function.Function):
    """(d0, ..., dn) -> (d_axes[0], ..., d_axes[n]); reversed when axes is None."""

    def __init__(self, axes: Optional[Sequence[int]] = None) -> None:
        self.axes = None if axes is None else tuple(int(a) for a in axes)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        if self.axes is None:
            return
        x_type = in_types[0]
        type_check.expect(x_type.ndim == type_check.Variable(len(self.axes), "len(axes)"))
        ndim = x_type.ndim.eval()
        if sorted(a % ndim for a in self.axes) != list(range(ndim)) or any(not -ndim <= a < ndim for a in self.axes):
            raise type_check.InvalidType(
                f"axes is a permutation of 0 .. {ndim - 1}", f"axes == {self.axes}"
            )

    def forward(self, inputs: tuple) -> tuple:
        return inputs[0].transpose(self.axes),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        gy = grad_outputs[0]
        if self.axes is None:
            return gy.transpose(),
        inverse = numpy.argsort([a % gy.ndim for a in self.axes])
        return gy.transpose(tuple(int(a) for a in inverse)),


def transpose(x: Any, axes: Optional[Sequence[int]] = None) -> Any:
    """x with its axes permuted by `axes` (reversed by default)."""
    return Transpose(axes)(x)
