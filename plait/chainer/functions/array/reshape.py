"""reshape: the same elements in another shape (a view where possible)."""
import numbers
from typing import Any, Sequence

import numpy

from ... import function
from ...utils import type_check


class Reshape(function.Function):
    """(any shape) -> `shape`, with the same number of elements; one entry may be -1."""

    def __init__(self, shape: Sequence[int]) -> None:
        if isinstance(shape, numbers.Integral):
            shape = (shape,)
        shape = tuple(shape)
        if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in shape):
            raise TypeError(f"reshape: 'shape' must be a tuple of ints, got {shape!r}.")
        if sum(1 for d in shape if d == -1) > 1 or any(d < -1 for d in shape):
            raise ValueError(f"reshape: 'shape' may hold one -1 and otherwise sizes >= 0, got {shape}.")
        self.shape = tuple(int(d) for d in shape)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_type = in_types[0]
        if -1 in self.shape:
            known = int(numpy.prod([d for d in self.shape if d != -1], dtype=numpy.int64))
            size = int(numpy.prod(x_type.shape.eval(), dtype=numpy.int64))
            if known == 0 or size % known:
                raise type_check.InvalidType(
                    f"prod(in_types[0].shape) % {known} == 0 (to fill the -1 of shape {self.shape})",
                    f"prod(in_types[0].shape) == {size} (shape {x_type.shape.eval()})",
                )
            return
        target = type_check.Variable(int(numpy.prod(self.shape, dtype=numpy.int64)), "prod(shape)")
        type_check.expect(type_check.prod(x_type.shape) == target)

    def forward(self, inputs: tuple) -> tuple:
        return inputs[0].reshape(self.shape),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        return grad_outputs[0].reshape(inputs[0].shape),


def reshape(x: Any, shape: Sequence[int]) -> Any:
    """x's elements in `shape` (C order); one dimension may be -1, to be inferred."""
    return Reshape(shape)(x)
