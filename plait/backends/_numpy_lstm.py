"""NumpyOps fast paths: LSTM and activations (compiled kernels in _kernels_cpu/lstm.pyx).

Each method takes the compiled path for numpy arrays of float32/float64 in C order (H0/C0
may be any layout) and otherwise calls the Ops reference, which also raises the errors:
the fast path validates with the reference's own helpers, so messages are the same.
"""
from typing import Any, Dict, Optional, Tuple

import numpy

from ..types import Floats1d, Floats2d, Floats3d, FloatsT, FloatsXdT, Ints1d
from . import _lstm, _threads

try:
    from ._kernels_cpu import lstm as _compiled
except ImportError:  # NOTE: a checkout without built extensions still works, on the reference.
    _compiled = None

_FLOAT32 = numpy.dtype("float32")
_FAST_DTYPES = (_FLOAT32, numpy.dtype("float64"))
# dsigmoid and dtanh are two numpy passes; below this size the call overhead of the compiled
# pass eats its gain (measured: 0.8x at 256-1024 values, 1.1-1.9x from 4096 on).
_MIN_FUSED_SIZE = 4096


# The kernels' whole-sequence float32 products go to the BLAS of NumpyOps' products where the
# kernels' own products lack AVX-512, and with AVX-512 from a size measured per processor
# (lstm.pyx, plait_lstm_blas_min_work): installed at the first float32 call; None until then,
# False where no BLAS routine could be had.
_blas_tables: Any = None

#: AVX-512 processors on which the BLAS takes the LSTM's whole-sequence products: (vendor,
#: family, model or None for the family) -> the fewest multiply-adds of (the input projection
#: and the input gradient, the weight gradients) it takes. Only where bench/lstm_products.py
#: timed them against the kernels' own (bench/README.md, "The BiLSTM's whole-sequence products
#: through the BLAS"); on other AVX-512 processors the kernels keep them.
BLAS_AVX512_WORK: Dict[Tuple[str, int, Optional[int]], Tuple[int, int]] = {
    ("GenuineIntel", 6, 207): (1 << 29, 1 << 28),  # Emerald Rapids
    # Zen 4: the weight gradients only; the input projection and gradient tied to 2**32.
    ("AuthenticAMD", 25, None): (-1, 1 << 23),
}


def _avx512_work() -> Tuple[int, int]:
    from . import _blas

    return _blas.avx512_cpu_entry(BLAS_AVX512_WORK) or (-1, -1)


def _hold_blas(dtype: Any) -> Optional[list]:
    """Before a float32 kernel call: point the kernels at the BLAS NumpyOps uses and, if they
    will call it, hold it to one thread (the two directions may call it at once, and its idle
    workers would spin against the time steps). Returns what `_threads.end_serial_blas` gives back."""
    global _blas_tables
    if dtype != _FLOAT32 or _blas_tables is False:
        return None
    if _blas_tables is None:
        try:
            from . import cblas

            # The routine's address needs only the BLAS tables resolved; NumpyOps' own BLAS is
            # set up below, and only where the kernels will call it (a private OpenBLAS that
            # `auto` chose then loads now rather than at the first large product).
            _compiled.set_blas_sgemm(cblas._sgemm_rowmajor_address(), *_avx512_work())
        except (ImportError, OSError, RuntimeError):
            # No BLAS routine can be resolved here: the kernels keep their own products.
            _blas_tables = False
            return None
        _blas_tables = cblas
    if not _compiled.blas_products():
        return None
    _blas_tables._follow_plait_blas()  # the BLAS NumpyOps uses may have changed (_blas.configure)
    return _threads.hold_serial_blas()


def _is_fast(X: Any, dtype: Any, ndim: Optional[int] = None) -> bool:
    return (
        type(X) is numpy.ndarray
        and X.dtype == dtype
        and (ndim is None or X.ndim == ndim)
        and X.flags.c_contiguous
    )


def _small_array(X: Any, dtype: Any, ndim: int) -> Optional[numpy.ndarray]:
    """H0/C0 are tiny: any array of the right dtype and rank is copied to C order if it must be."""
    if type(X) is not numpy.ndarray or X.dtype != dtype or X.ndim != ndim:
        return None
    return numpy.ascontiguousarray(X)


def _cast_float(X: Any, dtype: Any) -> Any:
    """A numpy float array in `dtype` (cast if it must be); anything else unchanged, for the checks."""
    if type(X) is numpy.ndarray and X.dtype.kind == "f" and X.dtype != dtype:
        return X.astype(dtype)
    return X


def _starts(sizes: numpy.ndarray) -> numpy.ndarray:
    starts = numpy.zeros_like(sizes)
    numpy.cumsum(sizes[:-1], out=starts[1:])
    return starts


def _flat_out(X: numpy.ndarray, inplace: bool) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """The result array and its flat view: X itself when inplace, else a new array."""
    out = X if inplace else numpy.empty_like(X)
    return out, out.reshape(-1)


class LstmKernels:
    """Mixin for NumpyOps; each method overrides the Ops reference with the identical signature."""

    def _lstm_stack_args(self, fn: str, params: Any, H0: Any, C0: Any, X: Any, size_at_t: Any):
        """Validate like the reference; None when the compiled kernel does not cover the arguments.

        Float inputs of another dtype than params are cast to it first, as the reference does.
        """
        if _compiled is None or type(params) is not numpy.ndarray or params.dtype not in _FAST_DTYPES:
            return None
        dtype = params.dtype
        X, H0, C0 = (_cast_float(A, dtype) for A in (X, H0, C0))
        if not (_is_fast(X, dtype, 2) and _is_fast(params, dtype, 1)):
            return None
        H0c = _small_array(H0, dtype, 3)
        C0c = _small_array(C0, dtype, 3)
        if H0c is None or C0c is None:
            return None
        # What the cheap tests above leave open, checked by the reference's own helpers.
        N, nI = (int(v) for v in X.shape)
        _lstm._check_stack_args(fn, params, H0, C0, nI)
        sizes = numpy.asarray(_lstm._sizes_to_list(fn, "size_at_t", size_at_t, N), dtype=numpy.int64)
        return X, H0, C0, H0c, C0c, sizes

    def lstm_forward_training(
        self, params: Floats1d, H0: Floats3d, C0: Floats3d, X: Floats2d, size_at_t: Ints1d
    ) -> Tuple[Floats2d, Tuple]:
        args = self._lstm_stack_args("lstm_forward_training", params, H0, C0, X, size_at_t)
        if args is None:
            return super().lstm_forward_training(params, H0, C0, X, size_at_t)  # type: ignore[misc]
        X, H0, C0, H0c, C0c, sizes = args
        held = _hold_blas(X.dtype)
        try:
            Y, Y4, G4, C4 = _compiled.lstm_forward(params, H0c, C0c, X, sizes, _starts(sizes), True)
        finally:
            _threads.end_serial_blas(held)
        return Y, (Y4, G4, C4, X, H0, C0)

    def lstm_forward_inference(
        self, params: Floats1d, H0: Floats3d, C0: Floats3d, X: Floats2d, size_at_t: Ints1d
    ) -> Floats2d:
        args = self._lstm_stack_args("lstm_forward_inference", params, H0, C0, X, size_at_t)
        if args is None:
            return super().lstm_forward_inference(params, H0, C0, X, size_at_t)  # type: ignore[misc]
        X, _, _, H0c, C0c, sizes = args
        held = _hold_blas(X.dtype)
        try:
            Y, _, _, _ = _compiled.lstm_forward(params, H0c, C0c, X, sizes, _starts(sizes), False)
        finally:
            _threads.end_serial_blas(held)
        return Y

    def backprop_lstm(
        self, dY: Floats2d, lengths: Ints1d, params: Floats1d, fwd_state: Tuple
    ) -> Tuple[Floats2d, Floats1d]:
        fn = "backprop_lstm"
        fallback = super().backprop_lstm  # type: ignore[misc]
        if _compiled is None or not isinstance(fwd_state, tuple) or len(fwd_state) != 6:
            return fallback(dY, lengths, params, fwd_state)
        Y4, G4, C4, X, H0, C0 = fwd_state
        if type(X) is not numpy.ndarray or X.dtype not in _FAST_DTYPES:
            return fallback(dY, lengths, params, fwd_state)
        dtype = X.dtype
        dY = _cast_float(dY, getattr(params, "dtype", dtype))
        if not (
            _is_fast(X, dtype, 2) and _is_fast(params, dtype, 1) and _is_fast(dY, dtype, 2)
            and _is_fast(Y4, dtype, 4) and _is_fast(G4, dtype, 4) and _is_fast(C4, dtype, 4)
        ):
            return fallback(dY, lengths, params, fwd_state)
        H0c = _small_array(H0, dtype, 3)
        C0c = _small_array(C0, dtype, 3)
        if H0c is None or C0c is None:
            return fallback(dY, lengths, params, fwd_state)
        N, nI = (int(v) for v in X.shape)
        depth, dirs, nO = _lstm._check_stack_args(fn, params, H0, C0, nI)
        _lstm._check_shape(fn, "fwd_state[0] (Y)", Y4, (depth, dirs, N, nO))
        _lstm._check_shape(fn, "fwd_state[1] (G)", G4, (depth, dirs, N, 4 * nO))
        _lstm._check_shape(fn, "fwd_state[2] (C)", C4, (depth, dirs, N, nO))
        _lstm._check_shape(fn, "dY", dY, (N, dirs * nO), " (the shape of the forward output)")
        sizes = numpy.asarray(_lstm._sizes_to_list(fn, "lengths", lengths, N), dtype=numpy.int64)
        held = _hold_blas(dtype)
        try:
            return _compiled.lstm_backward(dY, params, H0c, C0c, X, Y4, G4, C4, sizes, _starts(sizes))
        finally:
            _threads.end_serial_blas(held)

    def dsigmoid(self, Y: FloatsXdT, *, inplace: bool = False) -> FloatsXdT:
        if _compiled is None or type(Y) is not numpy.ndarray or Y.dtype not in _FAST_DTYPES \
                or not _is_fast(Y, Y.dtype) or (inplace and not Y.flags.writeable) \
                or Y.size < _MIN_FUSED_SIZE:
            return super().dsigmoid(Y, inplace=inplace)  # type: ignore[misc]
        out, flat = _flat_out(Y, inplace)
        _compiled.dsigmoid(Y.reshape(-1), flat)
        return out

    def dtanh(self, Y: FloatsT, *, inplace: bool = False) -> FloatsT:
        if _compiled is None or type(Y) is not numpy.ndarray or Y.dtype not in _FAST_DTYPES \
                or not _is_fast(Y, Y.dtype) or (inplace and not Y.flags.writeable) \
                or Y.size < _MIN_FUSED_SIZE:
            return super().dtanh(Y, inplace=inplace)  # type: ignore[misc]
        out, flat = _flat_out(Y, inplace)
        _compiled.dtanh(Y.reshape(-1), flat)
        return out
