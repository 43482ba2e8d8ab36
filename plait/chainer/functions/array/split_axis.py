"""split_axis: cut a variable into pieces along an axis (the inverse of concat)."""
import numbers
from typing import Any, Sequence, Union

from ... import cuda, function
from ...utils import type_check


class SplitAxis(function.Function):
    """(..., d, ...) -> pieces (..., d_k, ...) with sum_k d_k == d, cut along `axis`."""

    def __init__(self, indices_or_sections: Union[int, Sequence[int]], axis: int) -> None:
        if isinstance(indices_or_sections, bool):
            raise TypeError("split_axis: 'indices_or_sections' must be an int or a 1-D sequence of ints, got a bool.")
        if isinstance(indices_or_sections, numbers.Integral):
            if indices_or_sections < 1:
                raise ValueError(
                    f"split_axis: the number of sections must be >= 1, got {indices_or_sections}."
                )
            self.indices_or_sections: Union[int, tuple] = int(indices_or_sections)
        else:
            try:
                indices = tuple(indices_or_sections)
            except TypeError:
                indices = None
            if indices is None or not all(
                isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in indices
            ):
                raise TypeError(
                    f"split_axis: 'indices_or_sections' must be an int or a 1-D sequence of ints, "
                    f"got {type(indices_or_sections).__name__}: {indices_or_sections!r}."
                )
            self.indices_or_sections = tuple(int(i) for i in indices)
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
            raise TypeError(f"split_axis: 'axis' must be an int, got {type(axis).__name__}: {axis!r}.")
        self.axis = int(axis)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_type = in_types[0]
        if self.axis >= 0:
            type_check.expect(x_type.ndim > type_check.Variable(self.axis, "axis"))
        else:
            type_check.expect(x_type.ndim >= type_check.Variable(-self.axis, "-axis"))
        axis = self.axis % x_type.ndim.eval()
        if isinstance(self.indices_or_sections, int):
            sections = type_check.Variable(self.indices_or_sections, "sections")
            type_check.expect(x_type.shape[axis] % sections == 0)

    def _bounds(self, size: int) -> list:
        if isinstance(self.indices_or_sections, int):
            step = size // self.indices_or_sections
            return [step * k for k in range(1, self.indices_or_sections)]
        return list(self.indices_or_sections)

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        xp = cuda.get_array_module(x)
        axis = self.axis % x.ndim
        size = x.shape[axis]
        bounds = self._bounds(size)
        # NOTE: the positions are clipped to [0, size] as numpy does, so only real emptiness is refused.
        edges = [0] + [min(max(b, 0), size) for b in bounds] + [size]
        widths = [max(0, b - a) for a, b in zip(edges[:-1], edges[1:])]
        if 0 in widths:
            raise ValueError(
                f"split_axis: piece {widths.index(0)} would be empty: axis {axis} of x (shape "
                f"{x.shape}) cut at {bounds} gives widths {widths}. Every piece must be non-empty."
            )
        return tuple(xp.split(x, bounds, axis=axis))

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x = inputs[0]
        xp = cuda.get_array_module(x)
        axis = self.axis % x.ndim
        if all(gy is not None for gy in grad_outputs):
            return xp.concatenate(grad_outputs, axis=axis),
        # Pieces that reached no loss contribute zeros.
        gx = xp.zeros_like(x)
        for piece, gy in zip(xp.split(gx, self._bounds(x.shape[axis]), axis=axis), grad_outputs):
            if gy is not None:
                piece[...] = gy
        return gx,


def split_axis(
    x: Any, indices_or_sections: Union[int, Sequence[int]], axis: int, force_tuple: bool = False
) -> Any:
    """x cut along `axis`: into n equal pieces (an int n) or at the given sorted positions.

    Returns a tuple of Variables, or a single Variable when there is one piece (unless
    force_tuple=True). Raises ValueError if a piece would be empty.
    """
    out = SplitAxis(indices_or_sections, axis)(x)
    if force_tuple and not isinstance(out, tuple):
        return (out,)
    return out
