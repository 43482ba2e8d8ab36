"""NumpyOps fast paths for 2-D convolution and pooling: the three products of a convolution
(forward, data gradient, filter gradient) that conv_nd, deconv_nd and their backprops are built
on, with the windows copied out one image at a time into cache (_kernels_cpu/conv_gemm.pyx);
the im2col / col2im copies that the poolings and their backprops are built on, and max pooling
with its backprop whole (_kernels_cpu/conv.pyx).

The settings are read and checked by the same code as the Ops reference's (so a bad call raises
the same error); the kernels take float32/float64 C-contiguous arrays and decline everything
else, which the reference computes. 3-D products run on the same 2-D kernels with the first
spatial axis folded into the batch and the channels (_conv.fold_depth: each output plane's
input planes become channels); other spatial ranks stay with the reference.
"""
from typing import Any, Sequence, Tuple

import numpy

from ._conv import fold_depth, unfold_depth
from ._conv_ops import ConvOps, _n_spatial, _settings

try:
    from ._kernels_cpu import conv as _conv
    from ._kernels_cpu import conv_gemm as _conv_gemm
except ImportError:  # pragma: no cover - a source checkout without a build
    _conv = _conv_gemm = None

_INT_MAX = 2**31 - 1


def _small(*values: int) -> bool:
    return all(0 <= v <= _INT_MAX for v in values)


def _im2col_2d(X: Any, k: tuple, s: tuple, p: tuple, d: tuple, out: tuple, pad_value: Any, channels_first: bool) -> Any:
    """The compiled 2-D im2col, or None where it declines (then the reference runs)."""
    if len(k) != 2 or not _small(*k, *s, *p, *d, *out):
        return None
    return _conv.im2col_2d(X, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], out[0], out[1],
                           float(pad_value), channels_first)


def _folds(A: Any, B: Any) -> bool:
    """Whether a 3-D product can go to the 2-D kernels folded (they take what this admits)."""
    return (
        _conv_gemm is not None
        and isinstance(A, numpy.ndarray) and isinstance(B, numpy.ndarray)
        and A.dtype == B.dtype and A.dtype in (numpy.float32, numpy.float64)
        and A.ndim == 5 and B.ndim == 5 and A.size > 0 and B.size > 0
    )


class ConvKernels:
    """Mixin for NumpyOps; each method overrides the Ops reference with the identical signature."""

    if _conv is not None:

        def _im2col(self, X: Any, k: tuple, s: tuple, p: tuple, d: tuple, out: tuple, pad_value: Any = 0) -> Any:
            col = _im2col_2d(X, k, s, p, d, out, pad_value, False)
            return col if col is not None else super()._im2col(X, k, s, p, d, out, pad_value)

        def _im2col_channels_first(self, X: Any, k: tuple, s: tuple, p: tuple, d: tuple, out: tuple) -> Any:
            col = _im2col_2d(X, k, s, p, d, out, 0, True)
            return col if col is not None else super()._im2col_channels_first(X, k, s, p, d, out)

        def _conv_forward(self, X: Any, W: Any, b: Any, k: tuple, s: tuple, p: tuple, d: tuple, G: int, out: tuple) -> Any:
            if len(k) == 2:
                Y = _conv_gemm.forward(X, W, b, s, p, d, G, out)
                if Y is not None:
                    return Y
            elif len(k) == 3 and _folds(X, W):
                nB, O, M = X.shape[0], W.shape[0], out[0]
                Xg = fold_depth(numpy, X, k[0], s[0], p[0], d[0], M)
                W2 = W.reshape(O, -1, k[1], k[2])
                Y = _conv_gemm.forward(Xg, W2, b, s[1:], p[1:], d[1:], G, out[1:])
                if Y is not None:
                    return numpy.ascontiguousarray(Y.reshape((nB, M, O) + out[1:]).transpose(0, 2, 1, 3, 4))
            return super()._conv_forward(X, W, b, k, s, p, d, G, out)

        def _conv_backward_data(self, dY: Any, W: Any, size: tuple, s: tuple, p: tuple, d: tuple, G: int) -> Any:
            if len(size) == 2:
                dX = _conv_gemm.backward_data(dY, W, tuple(size), s, p, d, G)
                if dX is not None:
                    return dX
            elif len(size) == 3 and _folds(dY, W):
                nB, O, M = dY.shape[:3]
                t = W.shape[2]
                dYg = numpy.ascontiguousarray(dY.transpose(0, 2, 1, 3, 4)).reshape((nB * M, O) + dY.shape[3:])
                W2 = W.reshape(O, -1, W.shape[3], W.shape[4])
                dXg = _conv_gemm.backward_data(dYg, W2, tuple(size[1:]), s[1:], p[1:], d[1:], G)
                if dXg is not None:
                    return unfold_depth(numpy, dXg, nB, size[0], t, s[0], p[0], d[0])
            return super()._conv_backward_data(dY, W, size, s, p, d, G)

        def _conv_backward_filter(self, dY: Any, X: Any, k: tuple, s: tuple, p: tuple, d: tuple, G: int) -> Any:
            if len(k) == 2:
                dW = _conv_gemm.backward_filter(dY, X, k, s, p, d, G)
                if dW is not None:
                    return dW
            elif len(k) == 3 and _folds(dY, X):
                nB, O, M = dY.shape[:3]
                Xg = fold_depth(numpy, X, k[0], s[0], p[0], d[0], M)
                dYg = numpy.ascontiguousarray(dY.transpose(0, 2, 1, 3, 4)).reshape((nB * M, O) + dY.shape[3:])
                dW = _conv_gemm.backward_filter(dYg, Xg, k[1:], s[1:], p[1:], d[1:], G)
                if dW is not None:
                    return dW.reshape((O, X.shape[1] // G) + tuple(k))
            return super()._conv_backward_filter(dY, X, k, s, p, d, G)

        def _conv_backward_bias(self, dY: Any) -> Any:
            db = _conv_gemm.bias_grad(dY)
            return db if db is not None else super()._conv_backward_bias(dY)

        def _col2im(self, col: Any, size: tuple, s: tuple, p: tuple, d: tuple) -> Any:
            if len(size) == 2 and _small(*size, *s, *p, *d):
                X = _conv.col2im_2d(col, size[0], size[1], s[0], s[1], p[0], p[1], d[0], d[1])
                if X is not None:
                    return X
            return super()._col2im(col, size, s, p, d)

        def max_pool_nd(
            self, X: Any, ksize: Any, stride: Any = None, pad: Any = 0, cover_all: bool = True
        ) -> Tuple[Any, Any]:
            if getattr(X, "ndim", None) == 4:
                _, k, s, p, _, out = ConvOps._pool_args("Ops.max_pool_nd", X, ksize, stride, pad, cover_all)
                if _small(*k, *s, *p, *out):
                    result = _conv.max_pool_2d(X, k[0], k[1], s[0], s[1], p[0], p[1], out[0], out[1])
                    if result is not None:
                        return result
            return super().max_pool_nd(X, ksize, stride, pad, cover_all)

        def backprop_max_pool_nd(
            self,
            dY: Any,
            which: Any,
            in_shape: Sequence[int],
            ksize: Any,
            stride: Any = None,
            pad: Any = 0,
            cover_all: bool = True,
        ) -> Any:
            # `which` inside the window, before the kernel routes gradients by it.
            self._check_pool_which(dY, which, ksize, stride, pad)
            if getattr(dY, "ndim", None) == 4:
                where = "Ops.backprop_max_pool_nd"
                n = _n_spatial(dY, "dY", where)
                shape = ConvOps._pool_in_shape(where, in_shape, dY, n)
                k, s, p, _ = _settings(n, where, ksize, stride, pad)
                if _small(*k, *s, *p, *shape) and k[0] * k[1] <= _INT_MAX:
                    dX = _conv.backprop_max_pool_2d(dY, which, shape[2], shape[3], k[0], k[1], s[0], s[1], p[0], p[1])
                    if dX is not None:
                        return dX
            return super().backprop_max_pool_nd(dY, which, in_shape, ksize, stride, pad, cover_all)
