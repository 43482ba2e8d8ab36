"""NumpyOps fast paths: seq2col, maxout, reductions (compiled kernels in _kernels_cpu).

Each method hands its arguments to the compiled kernel, which returns None when they fall
outside its fast case (C-contiguous float32/float64 arrays of the right rank, int32/int64
lengths and indices) or when they are invalid; the Ops reference then computes the odd case or
raises its error, so both backends accept and reject exactly the same calls.
"""
from typing import Optional, Tuple

import numpy

from ..types import Floats2d, Floats3d, Ints1d, Ints2d
from ._checks import cumsum_dtype

try:
    from ._kernels_cpu import maxout as _maxout
    from ._kernels_cpu import seq as _seq
except ImportError:  # pragma: no cover - a source checkout without a build
    _seq = _maxout = None


class SeqKernels:
    """Mixin for NumpyOps; each method overrides the Ops reference with the identical signature."""

    if _seq is not None:

        def seq2col(self, seq: Floats2d, nW: int, *, lengths: Optional[Ints1d] = None) -> Floats2d:
            Y = _seq.seq2col(seq, nW, lengths)
            return super().seq2col(seq, nW, lengths=lengths) if Y is None else Y

        def backprop_seq2col(self, dY: Floats2d, nW: int, *, lengths: Optional[Ints1d] = None) -> Floats2d:
            dX = _seq.backprop_seq2col(dY, nW, lengths)
            return super().backprop_seq2col(dY, nW, lengths=lengths) if dX is None else dX

        def maxout(self, X: Floats3d) -> Tuple[Floats2d, Ints2d]:
            out = _seq.maxout(X)
            return super().maxout(X) if out is None else out

        def backprop_maxout(self, dY: Floats2d, which: Ints2d, P: int) -> Floats3d:
            dX = _seq.backprop_maxout(dY, which, P)
            return super().backprop_maxout(dY, which, P) if dX is None else dX

        def backprop_maxout_affine(
            self, dY: Floats2d, which: Ints2d, X: Floats2d, W: Floats3d
        ) -> Tuple[Floats2d, Floats3d, Floats2d]:
            dX = _maxout.backprop_maxout_dx(dY, which, W)
            # X goes to the kernel or the BLAS below only as a float array of dY's dtype; any
            # other X is the reference's to convert or refuse (it refuses integers).
            if (
                dX is None
                or type(X) is not numpy.ndarray
                or X.dtype != dY.dtype
                or X.shape != (dY.shape[0], W.shape[2])
            ):
                return super().backprop_maxout_affine(dY, which, X, W)
            nO, nP, nI = W.shape
            # The sparse dW kernel does 1/nP of the BLAS's arithmetic but less efficiently; it
            # wins from 3 pieces, and on AVX-512 while dW is at most 12 MiB unless float32 with 3
            # pieces and int32 winners (measured; see sparse_dw_wanted). `which` passed the dX
            # kernel's checks: an int32 or int64 array.
            sparse = _maxout.sparse_dw_wanted(nO, nP, nI, X.dtype.itemsize, which.dtype.itemsize)
            grads = _maxout.backprop_maxout_dw(dY, which, X, nP, False) if sparse else None
            if grads is None:  # few pieces, or X of another dtype or layout: the dense product
                grads = self._maxout_dw_dense(dY, which, X, nP)
            return dX, grads[0], grads[1]

        def _maxout_dw_dense(self, dY: Floats2d, which: Ints2d, X: Floats2d, nP: int
                             ) -> Tuple[Floats3d, Floats2d]:
            """(dW, db) of Maxout the dense way: the (rows, nO, nP) piece gradients, their
            product with X through the BLAS, and their column sums. bench/maxout_kernels.py
            times it against the sparse kernel."""
            dZ = self.backprop_maxout(dY, which, nP)
            nO, nI = dZ.shape[1], X.shape[1]
            dW = self.gemm(dZ.reshape((dZ.shape[0], nO * nP)), X, trans1=True).reshape((nO, nP, nI))
            return dW, dZ.sum(axis=0)

        def reduce_first(self, X: Floats2d, lengths: Ints1d) -> Tuple[Floats2d, Ints1d]:
            out = _seq.reduce_first(X, lengths)
            if out is None or not out[1].shape[0]:  # no sequences: offsets of the lengths' dtype
                return super().reduce_first(X, lengths)
            return out

        def backprop_reduce_first(self, d_firsts: Floats2d, starts_ends: Ints1d) -> Floats2d:
            dX = _seq.backprop_reduce_first(d_firsts, starts_ends)
            return super().backprop_reduce_first(d_firsts, starts_ends) if dX is None else dX

        def reduce_last(self, X: Floats2d, lengths: Ints1d) -> Tuple[Floats2d, Ints1d]:
            out = _seq.reduce_last(X, lengths)
            if out is None or not out[1].shape[0]:
                return super().reduce_last(X, lengths)
            # The indices in the dtype of the lengths' cumulative sum, as the reference's.
            return out[0], out[1].astype(cumsum_dtype(lengths.dtype))

        def backprop_reduce_last(self, d_lasts: Floats2d, lasts: Ints1d) -> Floats2d:
            dX = _seq.backprop_reduce_last(d_lasts, lasts)
            return super().backprop_reduce_last(d_lasts, lasts) if dX is None else dX

        def reduce_sum(self, X: Floats2d, lengths: Ints1d) -> Floats2d:
            Y = _seq.reduce_sum(X, lengths)
            return super().reduce_sum(X, lengths) if Y is None else Y

        def backprop_reduce_sum(self, d_sums: Floats2d, lengths: Ints1d) -> Floats2d:
            dX = _seq.backprop_reduce_sum(d_sums, lengths)
            return super().backprop_reduce_sum(d_sums, lengths) if dX is None else dX

        def reduce_mean(self, X: Floats2d, lengths: Ints1d) -> Floats2d:
            Y = _seq.reduce_mean(X, lengths)
            return super().reduce_mean(X, lengths) if Y is None else Y

        def backprop_reduce_mean(self, d_means: Floats2d, lengths: Ints1d) -> Floats2d:
            dX = _seq.backprop_reduce_mean(d_means, lengths)
            return super().backprop_reduce_mean(d_means, lengths) if dX is None else dX

        def reduce_max(self, X: Floats2d, lengths: Ints1d) -> Tuple[Floats2d, Ints2d]:
            out = _seq.reduce_max(X, lengths)
            return super().reduce_max(X, lengths) if out is None else out

        def backprop_reduce_max(self, d_maxes: Floats2d, which: Ints2d, lengths: Ints1d) -> Floats2d:
            dX = _seq.backprop_reduce_max(d_maxes, which, lengths)
            return super().backprop_reduce_max(d_maxes, which, lengths) if dX is None else dX
