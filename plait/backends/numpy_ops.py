"""The CPU backend: numpy, BLAS for matrix products, and compiled Cython kernels where they pay.

`gemm` goes to numpy.matmul (which hands transposed views straight to numpy's BLAS), except
where plait's own OpenBLAS copy measured faster (Zen 4 float32 products; see _blas.py).
"""
from typing import Any, List, Optional, Sequence

import numpy

from ..types import ArrayXd, DeviceTypes, DTypes, Floats2d, Ints1d, Ints2d
from . import _blas, _murmur, _threads, block_cache
from ._kernels_cpu import dense_gemm as _dense_gemm
from ._kernels_cpu import gemm as _gemm_kernel
from ._numpy_act import ActKernels
from ._numpy_gather import GatherKernels
from ._numpy_lstm import LstmKernels
from ._numpy_norm import NormKernels
from ._numpy_conv import ConvKernels
from ._numpy_seq import SeqKernels
from .ops import Ops

# Freed large arrays are kept for the next ones (PLAIT_BLOCK_CACHE; see block_cache.py).
block_cache.install()


def _matmul(x: Any, y: Any, out: Any, trans1: bool, trans2: bool) -> Optional[Floats2d]:
    """op(x) @ op(y) for 2-d float arrays of one dtype, with numpy; None for anything else.

    The common call without the reference's checks, which cost as much as a small product.
    """
    if type(x) is not numpy.ndarray or type(y) is not numpy.ndarray or x.ndim != 2 or y.ndim != 2:
        return None
    dtype = x.dtype
    if y.dtype != dtype or (dtype != numpy.float32 and dtype != numpy.float64):
        return None
    A = x.T if trans1 else x
    B = y.T if trans2 else y
    if A.shape[1] != B.shape[0]:
        return None
    if out is not None and (
        type(out) is not numpy.ndarray
        or out.dtype != dtype
        or out.shape != (A.shape[0], B.shape[1])
        or not out.flags.writeable
    ):
        return None
    if A.shape[1] == 1:
        # NOTE: numpy.matmul multiplies a column by a row (inner dimension 1) in a plain C loop,
        # not through its BLAS: 8x slower than a broadcast multiply for (384, 1) @ (1, 1024).
        # spaCy's parser makes that product at every step with a single state (the weight
        # gradient of a one-row batch). One product per value, as the BLAS computes it.
        return numpy.multiply(A, B, out=out)
    return numpy.matmul(A, B, out=out)


# The dtypes NumpyOps._gemm_accumulate hands to the BLAS.
_ACCUMULATE_DTYPES = (numpy.dtype("float32"), numpy.dtype("float64"))


# The compiled fast paths come from mixins, one per kernel family, so each family's
# wrappers sit next to nothing else; each falls back to Ops outside its fast path.
class NumpyOps(ActKernels, SeqKernels, GatherKernels, LstmKernels, NormKernels, ConvKernels, Ops):
    """Ops on the CPU with numpy arrays."""

    name = "numpy"
    xp = numpy

    def __init__(
        self,
        device_type: DeviceTypes = "cpu",
        device_id: int = -1,
        *,
        use_blis: bool = True,
    ) -> None:
        if device_type not in ("cpu", None):
            raise ValueError(
                f"NumpyOps runs on the CPU only, got device_type={device_type!r}. Use CupyOps for a GPU."
            )
        super().__init__(device_type="cpu", device_id=device_id)
        _threads.apply_blas_limit()
        # Decides only; a private BLAS loads at the first float32 product, with the thread
        # count the process's BLAS has by then.
        _blas.configure()
        # NOTE: `use_blis` is accepted for Thinc compatibility. Matrix products go through the
        # BLAS numpy was built with (OpenBLAS in the wheels), which honours the usual thread limits.
        self.use_blis = bool(use_blis)

    def gemm(
        self,
        x: Floats2d,
        y: Floats2d,
        out: Optional[Floats2d] = None,
        trans1: bool = False,
        trans2: bool = False,
    ) -> Floats2d:
        # Small products run on this thread alone (plait/backends/_threads.py, SERIAL_WORK).
        changed = None
        if (_threads._state["threads"] or 1) > 1 and type(x) is numpy.ndarray and type(y) is numpy.ndarray:
            if x.ndim == 2 and y.ndim == 2:
                M, K = (x.shape[1], x.shape[0]) if trans1 else x.shape
                changed = _threads.serial_blas(M, K, y.shape[0] if trans2 else y.shape[1])
        try:
            return self._gemm(x, y, out, trans1, trans2)
        finally:
            if changed is not None:
                _threads.end_serial_blas(changed)

    def _gemm(self, x: Any, y: Any, out: Any, trans1: bool, trans2: bool) -> Floats2d:
        # The kernels decline (None) whatever they do not take, including every invalid call,
        # which the reference then checks and reports. plait's own float32 kernels come first
        # where _blas switched them on (the shapes of dense layers, single-threaded).
        if _blas.own_kernels:
            result = _dense_gemm.gemm(x, y, out, trans1, trans2, False)
            if result is not None:
                return result
        result = _gemm_kernel.gemm(x, y, out, trans1, trans2)
        if result is not None:
            return result
        if (
            _blas.pending
            and getattr(x, "dtype", None) == numpy.float32
            and _blas.worth_loading(x, y, trans1, trans2)
            and _blas.load_pending()
        ):
            result = _gemm_kernel.gemm(x, y, out, trans1, trans2)
            if result is not None:
                return result
        result = _matmul(x, y, out, trans1, trans2)
        if result is not None:
            return result
        return super().gemm(x, y, out=out, trans1=trans1, trans2=trans2)

    def _gemm_accumulate(self, x: Any, y: Any, out: Any, trans1: bool = False,
                         trans2: bool = False) -> bool:
        # plait's own kernels first where they are on: they check the operands themselves
        # (dtype, layout, an `out` that overlaps an input) and decline what they do not take.
        if _blas.own_kernels and _dense_gemm.gemm(x, y, out, trans1, trans2, True) is not None:
            return True
        # Else through the cblas() table (beta=1): the BLAS `gemm` uses, under the same thread rules.
        if not (type(x) is numpy.ndarray and type(y) is numpy.ndarray and type(out) is numpy.ndarray):
            return False
        dtype = out.dtype
        if (dtype not in _ACCUMULATE_DTYPES or x.dtype != dtype or y.dtype != dtype
                or x.ndim != 2 or y.ndim != 2 or out.ndim != 2
                or not (out.flags.c_contiguous and out.flags.writeable)):
            return False
        M, K = (x.shape[1], x.shape[0]) if trans1 else x.shape
        K2, N = (y.shape[1], y.shape[0]) if trans2 else y.shape
        if K != K2 or out.shape != (M, N) or K == 0:
            return False
        # The BLAS may not write into an operand it reads (the fallback adds a fresh product).
        if numpy.may_share_memory(out, x) or numpy.may_share_memory(out, y):
            return False
        from . import cblas as _cblas

        _cblas._follow_plait_blas()
        _cblas.CBlas().gemm(x, y, out=out, trans1=trans1, trans2=trans2, beta=1.0)
        return True

    def cblas(self) -> Any:
        """A table of row-major BLAS function pointers for Cython code (plait.backends.cblas.CBlas).

        The very type that spaCy's parser type-checks as thinc.backends.cblas.CBlas under the
        alias; its float32 products go through the BLAS that `gemm` uses, under plait's thread count.
        """
        from . import cblas as _cblas

        _cblas._follow_plait_blas()
        return _cblas.CBlas()

    def flatten(
        self,
        X: Sequence[ArrayXd],
        dtype: Optional[DTypes] = None,
        pad: int = 0,
        ndim_if_empty: int = 2,
    ) -> ArrayXd:
        # The common call (a list of same-dtype, same-rank arrays, no padding) is one
        # concatenate; the reference checks each array first, at ~1 us per document.
        if pad == 0 and dtype is None and type(X) is list and X:
            first = X[0]
            if type(first) is numpy.ndarray and first.ndim >= 1:
                dt, nd = first.dtype, first.ndim
                # Some array must have values: where none has, the reference (as Thinc) returns
                # zeros of the first one's shape in float32, not a concatenation.
                if all(type(x) is numpy.ndarray and x.dtype == dt and x.ndim == nd for x in X) and any(
                    x.size for x in X
                ):
                    try:
                        return numpy.concatenate(X)
                    except ValueError:
                        pass  # mismatched trailing shapes: the reference names the culprit
        return super().flatten(X, dtype, pad, ndim_if_empty)

    def unflatten(self, X: ArrayXd, lengths: Ints1d, pad: int = 0) -> List[ArrayXd]:
        if (
            pad == 0
            and type(X) is numpy.ndarray
            and X.ndim >= 1
            and type(lengths) is numpy.ndarray
            and lengths.ndim == 1
            and lengths.dtype.kind == "i"
            and lengths.size
        ):
            n = X.shape[0]
            # Lengths in 0..n cannot overflow the int64 cumsum unless there are ~2**63 / n of
            # them; outside that, the wrapped sum could match n (the reference sums Python ints).
            if int(lengths.min()) < 0 or int(lengths.max()) > n or lengths.size * max(n, 1) >= 2**62:
                return super().unflatten(X, lengths, pad)
            ends = numpy.cumsum(lengths)
            if int(ends[-1]) == n:
                # Plain slices: numpy.split costs ~4 us per piece in swapaxes calls.
                bounds = [0, *ends.tolist()]
                return [X[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]
        return super().unflatten(X, lengths, pad)

    def hash(self, ids: Ints1d, seed: int) -> Ints2d:
        return _murmur.numpy_hash(self, ids, seed)

    def ngrams(self, n: int, keys: Ints1d) -> Ints1d:
        return _murmur.numpy_ngrams(self, n, keys)
