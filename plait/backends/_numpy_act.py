"""NumpyOps fast paths: activations, their backprops, softmax and erf (compiled kernels in
_kernels_cpu/act.pyx).

Each method hands its arguments to the compiled kernel, which returns None when they fall
outside its fast case (C-contiguous float32/float64 numpy arrays of rank >= 1, one dtype and
shape; with inplace, a writeable output that overlaps no other input except by being it). Its
scalar arguments must be Python ints or floats the array's precision holds; softmax takes the
last axis only. Everything else, invalid calls included, goes to the Ops reference, which
computes the odd case or raises its error, so both accept and reject exactly the same calls.

hard_sigmoid, hard_tanh and relu_k (and their backprops) reach the compiled clipped_linear
through the reference methods, which call self.clipped_linear.
"""
import math
from typing import Any, Optional, Tuple

import numpy

from ..types import Floats2d, FloatsT, FloatsXdT

try:
    from ._kernels_cpu import act as _act
except ImportError:  # pragma: no cover - a source checkout without a build
    _act = None

_FLOAT32 = numpy.dtype("float32")
_FLOAT32_MAX = float(numpy.finfo(numpy.float32).max)


def _param(value: Any, X: Any) -> Optional[float]:
    """`value` as a float if the kernels may take it for X, else None.

    Python ints and floats only: numpy scalars follow other promotion rules. NaN, and values
    that overflow float32 for a float32 X (numpy warns there), are left to the reference.
    """
    kind = type(value)
    if kind is int:
        if abs(value) > 2**53:
            return None
        value = float(value)
    elif kind is not float:
        return None
    if math.isnan(value):
        return None
    if math.isfinite(value) and abs(value) > _FLOAT32_MAX and getattr(X, "dtype", None) == _FLOAT32:
        return None
    return value


def _last_axis(axis: Any, X: Any) -> bool:
    ndim = getattr(X, "ndim", 0)
    return type(axis) is int and ndim >= 1 and (axis == -1 or axis == ndim - 1)


class ActKernels:
    """Mixin for NumpyOps; each method overrides the Ops reference with the identical signature."""

    if _act is not None:

        def relu(self, X: Floats2d, inplace: bool = False) -> Floats2d:
            Y = _act.elementwise(_act.RELU, X, inplace=inplace)
            return super().relu(X, inplace=inplace) if Y is None else Y

        def backprop_relu(self, dY: Floats2d, Y: Floats2d, inplace: bool = False) -> Floats2d:
            dX = _act.elementwise(_act.BACKPROP_RELU, dY, Y, inplace=inplace)
            return super().backprop_relu(dY, Y, inplace=inplace) if dX is None else dX

        def sigmoid(self, X: FloatsXdT, *, inplace: bool = False) -> FloatsXdT:
            Y = _act.elementwise(_act.SIGMOID, X, inplace=inplace)
            return super().sigmoid(X, inplace=inplace) if Y is None else Y

        def backprop_sigmoid(self, dY: FloatsXdT, Y: FloatsXdT, *, inplace: bool = False) -> FloatsXdT:
            # In place the gradient goes into Y, as in Thinc.
            dX = _act.elementwise(_act.BACKPROP_SIGMOID, dY, Y, inplace=inplace, into_b=True)
            return super().backprop_sigmoid(dY, Y, inplace=inplace) if dX is None else dX

        def swish(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
            Y = _act.elementwise(_act.SWISH, X, inplace=inplace)
            return super().swish(X, inplace=inplace) if Y is None else Y

        def backprop_swish(
            self, dY: FloatsXdT, X: FloatsXdT, Y: FloatsXdT, inplace: bool = False
        ) -> FloatsXdT:
            dX = _act.elementwise(_act.BACKPROP_SWISH, dY, X, Y, inplace=inplace)
            return super().backprop_swish(dY, X, Y, inplace=inplace) if dX is None else dX

        def mish(self, X: FloatsXdT, threshold: float = 20.0, inplace: bool = False) -> FloatsXdT:
            thr = _param(threshold, X)
            Y = None if thr is None else _act.elementwise(_act.MISH, X, inplace=inplace, p0=thr)
            return super().mish(X, threshold, inplace) if Y is None else Y

        def backprop_mish(
            self, dY: FloatsXdT, X: Floats2d, threshold: float = 20.0, inplace: bool = False
        ) -> FloatsXdT:
            thr = _param(threshold, X)
            dX = None
            if thr is not None:
                dX = _act.elementwise(_act.BACKPROP_MISH, dY, X, inplace=inplace, p0=thr)
            return super().backprop_mish(dY, X, threshold, inplace) if dX is None else dX

        def gelu(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
            Y = _act.elementwise(_act.GELU, X, inplace=inplace)
            return super().gelu(X, inplace=inplace) if Y is None else Y

        def backprop_gelu(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
            dX = _act.elementwise(_act.BACKPROP_GELU, dY, X, inplace=inplace)
            return super().backprop_gelu(dY, X, inplace=inplace) if dX is None else dX

        def gelu_approx(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
            Y = _act.elementwise(_act.GELU_APPROX, X, inplace=inplace)
            return super().gelu_approx(X, inplace=inplace) if Y is None else Y

        def backprop_gelu_approx(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
            dX = _act.elementwise(_act.BACKPROP_GELU_APPROX, dY, X, inplace=inplace)
            return super().backprop_gelu_approx(dY, X, inplace=inplace) if dX is None else dX

        def dish(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
            Y = _act.elementwise(_act.DISH, X, inplace=inplace)
            return super().dish(X, inplace=inplace) if Y is None else Y

        def backprop_dish(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
            dX = _act.elementwise(_act.BACKPROP_DISH, dY, X, inplace=inplace)
            return super().backprop_dish(dY, X, inplace=inplace) if dX is None else dX

        def hard_swish(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
            Y = _act.elementwise(_act.HARD_SWISH, X, inplace=inplace)
            return super().hard_swish(X, inplace=inplace) if Y is None else Y

        def backprop_hard_swish(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
            dX = _act.elementwise(_act.BACKPROP_HARD_SWISH, dY, X, inplace=inplace)
            return super().backprop_hard_swish(dY, X, inplace=inplace) if dX is None else dX

        def hard_swish_mobilenet(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
            Y = _act.elementwise(_act.HARD_SWISH_MOBILENET, X, inplace=inplace)
            return super().hard_swish_mobilenet(X, inplace=inplace) if Y is None else Y

        def backprop_hard_swish_mobilenet(
            self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False
        ) -> FloatsXdT:
            dX = _act.elementwise(_act.BACKPROP_HARD_SWISH_MOBILENET, dY, X, inplace=inplace)
            return super().backprop_hard_swish_mobilenet(dY, X, inplace=inplace) if dX is None else dX

        def _clip_params(
            self, X: Any, slope: Any, offset: Any, min_val: Any, max_val: Any
        ) -> Optional[Tuple[float, float, float, float]]:
            """The four clipped_linear parameters as floats, or None (the reference then
            decides, and raises for min_val > max_val)."""
            params = tuple(_param(v, X) for v in (slope, offset, min_val, max_val))
            if None in params or params[2] > params[3]:
                return None
            return params

        def clipped_linear(
            self,
            X: FloatsXdT,
            slope: float = 1.0,
            offset: float = 0.0,
            min_val: float = 0.0,
            max_val: float = 1.0,
            inplace: bool = False,
        ) -> FloatsXdT:
            params = self._clip_params(X, slope, offset, min_val, max_val)
            Y = None
            if params is not None:
                s, o, lo, hi = params
                # NOTE: the reference skips `* slope` for 1 and `+ offset` for 0 (which would
                # turn -0.0 into 0.0), so the kernel must know, not just get 1 and 0.
                Y = _act.elementwise(_act.CLIPPED_LINEAR, X, inplace=inplace, p0=s, p1=o, p2=lo, p3=hi,
                                     p4=float(slope != 1.0), p5=float(offset != 0.0))
            if Y is None:
                return super().clipped_linear(X, slope, offset, min_val, max_val, inplace)
            return Y

        def backprop_clipped_linear(
            self,
            dY: FloatsXdT,
            X: FloatsXdT,
            slope: float = 1.0,
            offset: float = 0.0,
            min_val: float = 0.0,
            max_val: float = 1.0,
            inplace: bool = False,
        ) -> FloatsXdT:
            params = self._clip_params(X, slope, offset, min_val, max_val)
            dX = None
            if params is not None:
                s, o, lo, hi = params
                dX = _act.elementwise(_act.BACKPROP_CLIPPED_LINEAR, dY, X, inplace=inplace,
                                      p0=s, p1=o, p2=lo, p3=hi)
            if dX is None:
                return super().backprop_clipped_linear(dY, X, slope, offset, min_val, max_val, inplace)
            return dX

        def erf(self, X: FloatsXdT) -> FloatsXdT:
            Y = _act.elementwise(_act.ERF, X)
            return super().erf(X) if Y is None else Y

        def softmax(
            self, x: FloatsT, *, inplace: bool = False, axis: int = -1, temperature: float = 1.0
        ) -> FloatsT:
            T = _param(temperature, x)
            Y = None
            if T is not None and T > 0 and not math.isinf(T) and _last_axis(axis, x):
                Y = _act.softmax(x, inplace, T)
            if Y is None:
                return super().softmax(x, inplace=inplace, axis=axis, temperature=temperature)
            return Y

        def backprop_softmax(
            self, Y: FloatsT, dY: FloatsT, *, axis: int = -1, temperature: float = 1.0
        ) -> FloatsT:
            T = _param(temperature, Y)
            dX = None
            # The reference divides by any temperature; 0 and inf (numpy warns) are left to it.
            if T is not None and T != 0 and not math.isinf(T) and _last_axis(axis, Y):
                dX = _act.backprop_softmax(Y, dY, T)
            if dX is None:
                return super().backprop_softmax(Y, dY, axis=axis, temperature=temperature)
            return dX
