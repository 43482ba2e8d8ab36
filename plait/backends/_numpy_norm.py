"""NumpyOps fast paths: layer normalization and its backprop (compiled kernels in _kernels_cpu/norm.pyx).

Each kernel takes C-contiguous float32/float64 arrays of one dtype and returns None for anything
else (or mismatched shapes), so that the Ops reference computes the odd case or raises its error.
"""
from typing import Tuple

from ..types import Floats1d, Floats2d

try:
    from ._kernels_cpu import norm as _norm
except ImportError:  # pragma: no cover - a source checkout without a build
    _norm = None


class NormKernels:
    """Mixin for NumpyOps; each method overrides the Ops reference with the identical signature."""

    if _norm is not None:

        def layer_norm(
            self, X: Floats2d, G: Floats1d, b: Floats1d, eps: float = 1e-08
        ) -> Tuple[Floats2d, Floats1d, Floats1d]:
            out = _norm.layer_norm(X, G, b, eps) if isinstance(eps, float) else None
            return super().layer_norm(X, G, b, eps) if out is None else out

        def backprop_layer_norm(
            self, dY: Floats2d, X: Floats2d, G: Floats1d, mean: Floats1d, var: Floats1d
        ) -> Tuple[Floats2d, Floats1d, Floats1d]:
            out = _norm.backprop_layer_norm(dY, X, G, mean, var)
            return super().backprop_layer_norm(dY, X, G, mean, var) if out is None else out
