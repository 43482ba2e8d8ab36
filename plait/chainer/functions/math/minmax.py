"""max and min: the largest / smallest elements over some axes (all by default)."""
import numbers
from typing import Any, Optional, Tuple, Union

from ... import cuda, function, utils
from ...utils import type_check


def _normalize_axis(name: str, axis: Any) -> Optional[Tuple[int, ...]]:
    if axis is None:
        return None
    if isinstance(axis, numbers.Integral) and not isinstance(axis, bool):
        return (int(axis),)
    if isinstance(axis, tuple) and all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in axis):
        if len(set(axis)) != len(axis):
            raise ValueError(f"{name}: duplicate value in axis: {axis}.")
        return tuple(int(a) for a in axis)
    raise TypeError(f"{name}: axis must be None, an int or a tuple of ints, got {axis!r}.")


class _Extremum(function.Function):
    _name = ""

    def __init__(self, axis: Optional[Union[int, tuple]] = None, keepdims: bool = False) -> None:
        self.axis = _normalize_axis(self._name, axis)
        self.keepdims = bool(keepdims)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")
        if self.axis is not None:
            for axis in self.axis:
                if axis >= 0:
                    type_check.expect(in_types[0].ndim > axis)
                else:
                    type_check.expect(-axis - 1 < in_types[0].ndim)

    def _reduce(self, x: Any) -> Any:
        raise NotImplementedError

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        axes = range(x.ndim) if self.axis is None else [a % x.ndim for a in self.axis]
        if any(x.shape[a] == 0 for a in axes):
            raise ValueError(
                f"{self._name}: cannot reduce x of shape {x.shape} over axis {self.axis}: an empty "
                f"axis has no {self._name}imum."
            )
        self.y = utils.force_array(self._reduce(x))
        return self.y,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, gy = inputs[0], grad_outputs[0]
        xp = cuda.get_array_module(x)
        y = self.y
        if self.axis is not None and not self.keepdims:
            for a in sorted(a % x.ndim for a in self.axis):
                y = xp.expand_dims(y, a)
                gy = xp.expand_dims(gy, a)
        # NOTE: every element equal to the extremum receives the full gradient (ties are not split).
        return utils.force_array(gy * (x == y)),


SelectorBase = _Extremum


class Max(_Extremum):
    """(any shape) -> the shape without the reduced axes (kept as 1 with keepdims)"""

    _name = "max"

    def _reduce(self, x: Any) -> Any:
        return x.max(axis=self.axis, keepdims=self.keepdims)


class Min(_Extremum):
    """(any shape) -> the shape without the reduced axes (kept as 1 with keepdims)"""

    _name = "min"

    def _reduce(self, x: Any) -> Any:
        return x.min(axis=self.axis, keepdims=self.keepdims)


def max(x: Any, axis: Optional[Union[int, tuple]] = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Maximum of x's elements over `axis` (None: all); ties all receive the gradient."""
    return Max(axis, keepdims)(x)


def min(x: Any, axis: Optional[Union[int, tuple]] = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Minimum of x's elements over `axis` (None: all); ties all receive the gradient."""
    return Min(axis, keepdims)(x)
