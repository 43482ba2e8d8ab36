"""The GPU backend: cupy arrays, cuBLAS for matrix products and the custom CUDA kernels.

Each override keeps the exact signature of its `Ops` method and takes its fast path only for
C-contiguous float32/float64 cupy arrays whose arguments it can check without surprises;
everything else (other dtypes, strided views, numpy inputs, invalid arguments) goes to the
reference `Ops` method, so results and error messages are the reference's. Where a check
needs the data (sequence lengths, index ranges), the fast path asks the same question and
hands invalid input to the reference to raise its own error.

Importing this module never imports cupy: `CupyOps.xp` and the constructor do.
"""
import sys
from typing import Any, Optional, Sequence, Tuple, Union

import numpy

from ..types import (
    ArrayXd,
    DeviceTypes,
    DTypes,
    Floats1d,
    Floats2d,
    Floats3d,
    FloatsT,
    FloatsXd,
    FloatsXdT,
    Ints1d,
    Ints2d,
    IntsXd,
    Shape,
)
from . import _kernels_gpu as _k
from . import _murmur
from ._checks import check_lengths, describe
from .ops import Ops

_FAST_DTYPES = (numpy.dtype("float32"), numpy.dtype("float64"))
_INT32_MAX = 2**31 - 1
# Longest last axis that softmax's row kernel takes (measured on an H200, bench/gpu.py: at
# 256 values a row it ran 1.4x slower than the reference's passes; at 10 it wins).
_SOFTMAX_ROW_MAX = 64


def _import_cupy() -> Any:
    """The cupy module, or None when it cannot be imported."""
    module = sys.modules.get("cupy")
    if module is not None:
        return module
    try:
        import cupy
    except Exception:  # ImportError, or a broken CUDA install failing at import
        return None
    return cupy


class _LazyCupy:
    """Class attribute that resolves to cupy on access (None without cupy, as in Thinc).

    On an instance built where cupy or its GPU is missing it raises the error saying why, so
    that the first operation fails clearly instead of on None.
    """

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is not None:
            error = instance.__dict__.get("_gpu_error")
            if error is not None:
                raise ValueError(f"{instance!r} cannot compute: {error}") from error
        return _import_cupy()


def _require_gpu(device_id: int) -> Any:
    """cupy, after checking that it imports and that CUDA device `device_id` exists."""
    try:
        import cupy
    except Exception as err:
        raise ValueError(
            f"CupyOps requires cupy, which could not be imported ({type(err).__name__}: {err}). "
            "Install the cupy package matching your CUDA version (e.g. `pip install cupy-cuda12x`), "
            "or use NumpyOps (get_ops('numpy')) on the CPU."
        ) from err
    try:
        n_devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # no driver, or no device the driver can see
        raise ValueError(
            f"CupyOps needs a CUDA GPU, but CUDA reported none ({type(err).__name__}: {err}). "
            "Check the NVIDIA driver and CUDA_VISIBLE_DEVICES, or use NumpyOps on the CPU."
        ) from err
    if n_devices < 1:
        raise ValueError(
            "CupyOps needs a CUDA GPU, but none is visible. Check the NVIDIA driver and "
            "CUDA_VISIBLE_DEVICES, or use NumpyOps (get_ops('numpy')) on the CPU."
        )
    if not isinstance(device_id, (int, numpy.integer)) or not 0 <= device_id < n_devices:
        raise ValueError(
            f"CupyOps: device_id={device_id!r} is not a visible CUDA device; "
            f"valid ids are 0..{n_devices - 1}."
        )
    return cupy


class CupyOps(Ops):
    """Ops on an NVIDIA GPU with cupy arrays, custom CUDA kernels where they pay."""

    name = "cupy"
    xp = _LazyCupy()

    def __init__(self, device_type: DeviceTypes = "gpu", device_id: int = 0, **kwargs) -> None:
        super().__init__(device_type=device_type, device_id=device_id, **kwargs)
        self._gpu_error: Optional[ValueError] = None
        try:
            _require_gpu(device_id)
        except ValueError as err:
            # NOTE: Thinc builds a CupyOps without cupy or a GPU (its tests get_ops("cupy") on
            # any machine); the error is raised at the first use of the array module instead.
            self._gpu_error = err

    # ------------------------------------------------------------------ fast-path tests

    @staticmethod
    def _fast(*arrays: Any) -> bool:
        """Whether all arrays are C-contiguous cupy arrays of one float dtype the kernels support."""
        cupy = sys.modules.get("cupy")
        if cupy is None:
            return False
        dtype = getattr(arrays[0], "dtype", None)
        if dtype not in _FAST_DTYPES:
            return False
        for X in arrays:
            if not isinstance(X, cupy.ndarray) or X.dtype != dtype or not X.flags.c_contiguous:
                return False
        return True

    @staticmethod
    def _is_int_array(X: Any, ndim: Optional[int] = None) -> bool:
        cupy = sys.modules.get("cupy")
        return (
            cupy is not None
            and isinstance(X, cupy.ndarray)
            and X.dtype.kind in "iu"
            and (ndim is None or X.ndim == ndim)
        )

    @staticmethod
    def _same_shape(*arrays: Any) -> bool:
        return all(tuple(X.shape) == tuple(arrays[0].shape) for X in arrays[1:])

    def _int32(self, X: Any) -> Any:
        """An int32 C-contiguous copy-or-view of an index array whose values fit (checked by the caller)."""
        return self.xp.ascontiguousarray(X, dtype="int32")

    def _ends(self, values: Sequence[int]) -> Optional[Any]:
        """Device int32 cumulative sequence ends, or None when the row count overflows int32."""
        ends = numpy.cumsum(numpy.asarray(values, dtype="int64"), dtype="int64")
        if ends.size and ends[-1] > _INT32_MAX:
            return None
        return self.xp.asarray(ends.astype("int32"))

    @staticmethod
    def _quiet_lengths(fn: str, lengths: Any, n_rows: Optional[int], allow_zero: bool) -> Optional[Tuple[int, ...]]:
        """Sequence lengths as Python ints when they pass the reference's checks, else None."""
        try:
            return check_lengths(fn, lengths, n_rows, allow_zero=allow_zero)
        except (TypeError, ValueError):
            return None

    def _index_range(self, X: Any) -> Tuple[int, int]:
        """(min, max) of a non-empty index array, read back in one transfer."""
        xp = self.xp
        low_high = xp.stack([X.min().astype("int64"), X.max().astype("int64")]).get()
        return int(low_high[0]), int(low_high[1])

    @staticmethod
    def _valid_nW(nW: Any) -> bool:
        return isinstance(nW, (int, numpy.integer)) and not isinstance(nW, bool) and nW >= 1

    # ------------------------------------------------------------------ C-level access

    def cblas(self) -> Any:
        """Not available on the GPU: the C BLAS table is for CPU Cython code (raises NotImplementedError)."""
        raise NotImplementedError(
            "CupyOps.cblas(): a C BLAS table is only available on NumpyOps (CPU code); on the GPU, "
            "matrix products go through CupyOps.gemm (cuBLAS)."
        )

    # ------------------------------------------------------------------ conversion

    def asarray(
        self,
        data: Union[ArrayXd, Sequence[ArrayXd], Sequence[Any]],
        *,
        dtype: Optional[DTypes] = None,
    ) -> ArrayXd:
        """`data` as a cupy array: zero-copy for cupy arrays and GPU tensors, a host-to-device copy otherwise."""
        from .. import util

        cupy = self.xp
        if isinstance(data, cupy.ndarray):
            array = data
        elif util.is_torch_array(data):
            # A CUDA tensor is shared through DLPack; a CPU tensor is copied up.
            array = util.torch2xp(data, ops=self)
        elif util.is_tensorflow_array(data):
            array = util.tensorflow2xp(data, ops=self)
        elif util.is_mxnet_array(data):
            array = util.mxnet2xp(data, ops=self)
        elif hasattr(data, "__cuda_array_interface__"):
            array = cupy.asarray(data)
        elif (
            isinstance(data, (list, tuple))
            and len(data) > 0
            and all(isinstance(x, cupy.ndarray) for x in data)
        ):
            array = cupy.stack(data)
        else:
            if getattr(data, "dtype", None) == numpy.dtype(object):
                raise TypeError(
                    f"CupyOps.asarray: 'data' is an array of Python objects ({describe(data)}); "
                    "the GPU holds numbers only. Convert it to a numeric dtype first, e.g. "
                    "numpy.asarray(data, dtype='float32')."
                )
            # The dtype goes into the conversion itself: a list of Python ints above int64's range
            # read without it becomes float64 on the host, and the cast after it rounds them.
            array = cupy.asarray(data, dtype=None if dtype is None else numpy.dtype(dtype))
        if dtype is not None:
            array = array.astype(numpy.dtype(dtype), copy=False)
        return array

    def to_numpy(self, data, *, byte_order=None):
        """`data` as a numpy array (copied from the GPU), optionally with byte order "<", ">", "=" or "|"."""
        cupy = sys.modules.get("cupy")
        if cupy is not None and isinstance(data, cupy.ndarray):
            array = data.get()
            if byte_order is not None:
                array = array.astype(array.dtype.newbyteorder(byte_order), copy=False)
            return array
        return super().to_numpy(data, byte_order=byte_order)

    # ------------------------------------------------------------------ matrices and windows

    def gemm(
        self,
        x: Floats2d,
        y: Floats2d,
        out: Optional[Floats2d] = None,
        trans1: bool = False,
        trans2: bool = False,
    ) -> Floats2d:
        """Matrix product through cuBLAS (cupy.matmul, into `out` when given)."""
        cupy = self.xp
        for name, arr in (("x", x), ("y", y), ("out", out)):
            if isinstance(arr, numpy.ndarray) and not isinstance(arr, cupy.ndarray):
                raise TypeError(
                    f"CupyOps.gemm: argument '{name}' is a numpy array ({describe(arr)}), but "
                    "CupyOps computes on the GPU. Move it there first with ops.asarray(...)."
                )
        return super().gemm(x, y, out=out, trans1=trans1, trans2=trans2)

    def seq2col(self, seq: Floats2d, nW: int, *, lengths: Optional[Ints1d] = None) -> Floats2d:
        """Concatenate each row with its nW neighbours on each side, zero-padded at sequence edges.

        (M, N) -> (M, N * (2 * nW + 1))
        """
        if not (self._fast(seq) and seq.ndim == 2 and self._valid_nW(nW)):
            return super().seq2col(seq, nW, lengths=lengths)
        nB, nI = seq.shape
        nL, ends = 0, self.xp.zeros((1,), dtype="int32")
        if lengths is not None:
            values = self._quiet_lengths("seq2col", lengths, nB, allow_zero=True)
            ends = self._ends(values) if values is not None else None
            if ends is None:
                return super().seq2col(seq, nW, lengths=lengths)
            nL = len(values)
            if nL == 0:  # no sequences, so no rows either
                ends = self.xp.zeros((1,), dtype="int32")
        nF = 2 * int(nW) + 1
        Y = self.xp.empty((nB, nF * nI), dtype=seq.dtype)
        _k.launch(
            "plait_seq2col_fwd", seq.dtype, nB * nF * nI,
            (Y, seq, ends, _k.i64(nL), _k.i64(nW), _k.i64(nB), _k.i64(nI)),
        )
        return Y

    def backprop_seq2col(
        self, dY: Floats2d, nW: int, *, lengths: Optional[Ints1d] = None
    ) -> Floats2d:
        """Gradient of seq2col: sum each window slot back onto the row it was copied from.

        (M, N * (2 * nW + 1)) -> (M, N)
        """
        if not (self._fast(dY) and dY.ndim == 2 and self._valid_nW(nW)):
            return super().backprop_seq2col(dY, nW, lengths=lengths)
        nF = 2 * int(nW) + 1
        nB = dY.shape[0]
        if dY.shape[1] % nF:
            return super().backprop_seq2col(dY, nW, lengths=lengths)
        nI = dY.shape[1] // nF
        nL, ends = 0, self.xp.zeros((1,), dtype="int32")
        if lengths is not None:
            values = self._quiet_lengths("backprop_seq2col", lengths, nB, allow_zero=True)
            ends = self._ends(values) if values is not None else None
            if ends is None:
                return super().backprop_seq2col(dY, nW, lengths=lengths)
            nL = len(values)
            if nL == 0:
                ends = self.xp.zeros((1,), dtype="int32")
        dX = self.xp.empty((nB, nI), dtype=dY.dtype)
        _k.launch(
            "plait_seq2col_bwd", dY.dtype, nB * nI,
            (dX, dY, ends, _k.i64(nL), _k.i64(nW), _k.i64(nB), _k.i64(nI)),
        )
        return dX

    # ------------------------------------------------------------------ maxout

    def maxout(self, X: Floats3d) -> Tuple[Floats2d, Ints2d]:
        """Max over the last axis and which piece won.  (nB, nO, nP) -> (nB, nO), (nB, nO) int32"""
        if not (self._fast(X) and X.ndim == 3 and X.shape[2] >= 1):
            return super().maxout(X)
        nB, nO, nP = X.shape
        best = self.xp.empty((nB, nO), dtype=X.dtype)
        which = self.xp.empty((nB, nO), dtype="int32")
        _k.launch("plait_maxout_fwd", X.dtype, nB * nO, (best, which, X, _k.i64(nB * nO), _k.i64(nP)))
        return best, which

    def backprop_maxout(self, dY: Floats2d, which: Ints2d, P: int) -> Floats3d:
        """Route each gradient to the piece that won.  (nB, nO) -> (nB, nO, P)"""
        fast = (
            self._fast(dY)
            and dY.ndim == 2
            and self._is_int_array(which, ndim=2)
            and self._same_shape(dY, which)
            and isinstance(P, (int, numpy.integer))
            and 1 <= P <= _INT32_MAX
        )
        if fast and which.size:
            low, high = self._index_range(which)
            fast = low >= 0 and high < P
        if not fast:
            return super().backprop_maxout(dY, which, P)
        nBO = dY.size
        dX = self.xp.empty(tuple(dY.shape) + (int(P),), dtype=dY.dtype)
        _k.launch(
            "plait_maxout_bwd", dY.dtype, nBO * int(P),
            (dX, dY, self._int32(which), _k.i64(nBO), _k.i64(P)),
        )
        return dX

    # ------------------------------------------------------------------ elementwise activations

    def _unary(self, name: str, X: Any, inplace: bool, *scalars: Any) -> Any:
        Y = X if inplace else self.xp.empty_like(X)
        _k.launch(name, X.dtype, X.size, (Y, X) + scalars + (_k.i64(X.size),))
        return Y

    def _binary(self, name: str, dY: Any, inplace: bool, *inputs: Any) -> Any:
        """Launch a backward kernel dX = f(dY, *inputs, ...), into dY when in place."""
        dX = dY if inplace else self.xp.empty_like(dY)
        _k.launch(name, dY.dtype, dY.size, (dX, dY) + inputs + (_k.i64(dY.size),))
        return dX

    def relu(self, X: Floats2d, inplace: bool = False) -> Floats2d:
        if not self._fast(X):
            return super().relu(X, inplace=inplace)
        return self._unary("plait_relu_fwd", X, inplace)

    def backprop_relu(self, dY: Floats2d, Y: Floats2d, inplace: bool = False) -> Floats2d:
        if not (self._fast(dY, Y) and self._same_shape(dY, Y)):
            return super().backprop_relu(dY, Y, inplace=inplace)
        return self._binary("plait_relu_bwd", dY, inplace, Y)

    def sigmoid(self, X: FloatsXdT, *, inplace: bool = False) -> FloatsXdT:
        if not self._fast(X):
            return super().sigmoid(X, inplace=inplace)
        return self._unary("plait_sigmoid_fwd", X, inplace)

    def backprop_sigmoid(self, dY: FloatsXdT, Y: FloatsXdT, *, inplace: bool = False) -> FloatsXdT:
        if not (self._fast(dY, Y) and self._same_shape(dY, Y)):
            return super().backprop_sigmoid(dY, Y, inplace=inplace)
        # In place the result goes into Y, as in the reference (and Thinc).
        dX = Y if inplace else self.xp.empty_like(Y)
        _k.launch("plait_sigmoid_bwd", Y.dtype, Y.size, (dX, dY, Y, _k.i64(Y.size)))
        return dX

    def get_dropout_mask(self, shape: Shape, drop: Optional[float]) -> FloatsXd:
        if not isinstance(drop, (float, int, numpy.floating, numpy.integer)) or not 0 < drop < 1:
            return super().get_dropout_mask(shape, drop)
        shape = (shape,) if isinstance(shape, (int, numpy.integer)) else tuple(shape)
        if any(not isinstance(d, (int, numpy.integer)) or d < 0 for d in shape):
            return super().get_dropout_mask(shape, drop)
        # One float32 draw per value and one kernel, where the reference draws float64 and
        # runs three passes (compare, divide, cast).
        mask = self.xp.random.random_sample(shape, dtype="float32")
        scale = numpy.float32(1.0 / (1.0 - float(drop)))
        _k.launch("plait_dropout_fwd", "float32", mask.size,
                  (mask, mask, numpy.float32(drop), scale, _k.i64(mask.size)))
        return mask

    @staticmethod
    def _last_axis(X: Any, axis: Any) -> bool:
        """Whether `axis` names the last axis of a non-empty-rowed array of 1 or more dims."""
        if isinstance(axis, bool) or not isinstance(axis, (int, numpy.integer)):
            return False
        return X.ndim >= 1 and X.shape[-1] > 0 and int(axis) in (-1, X.ndim - 1)

    def softmax(
        self, x: FloatsT, *, inplace: bool = False, axis: int = -1, temperature: float = 1.0
    ) -> FloatsT:
        # One thread per row: ahead of the reference's five passes for rows up to a few dozen
        # values (class scores), behind it for long rows, whose reads it cannot coalesce.
        if not (self._fast(x) and self._last_axis(x, axis) and x.shape[-1] <= _SOFTMAX_ROW_MAX
                and temperature != 0):
            return super().softmax(x, inplace=inplace, axis=axis, temperature=temperature)
        Y = x if inplace else self.xp.empty_like(x)
        nC = x.shape[-1]
        _k.launch(
            "plait_softmax_fwd", x.dtype, x.size // nC,
            (Y, x, _k.real(x.dtype, temperature), _k.i64(x.size // nC), _k.i64(nC)),
        )
        return Y

    def backprop_softmax(
        self, Y: FloatsT, dY: FloatsT, *, axis: int = -1, temperature: float = 1.0
    ) -> FloatsT:
        if not (self._fast(Y, dY) and self._same_shape(Y, dY) and self._last_axis(Y, axis)
                and Y.shape[-1] <= _SOFTMAX_ROW_MAX):
            return super().backprop_softmax(Y, dY, axis=axis, temperature=temperature)
        dX = self.xp.empty_like(Y)
        nC = Y.shape[-1]
        _k.launch(
            "plait_softmax_bwd", Y.dtype, Y.size // nC,
            (dX, dY, Y, _k.real(Y.dtype, temperature), _k.i64(Y.size // nC), _k.i64(nC)),
        )
        return dX

    def mish(self, X: FloatsXdT, threshold: float = 20.0, inplace: bool = False) -> FloatsXdT:
        if not self._fast(X):
            return super().mish(X, threshold=threshold, inplace=inplace)
        return self._unary("plait_mish_fwd", X, inplace, _k.real(X.dtype, threshold))

    def backprop_mish(
        self, dY: FloatsXdT, X: Floats2d, threshold: float = 20.0, inplace: bool = False
    ) -> FloatsXdT:
        if not (self._fast(dY, X) and self._same_shape(dY, X)):
            return super().backprop_mish(dY, X, threshold=threshold, inplace=inplace)
        return self._binary("plait_mish_bwd", dY, inplace, X, _k.real(X.dtype, threshold))

    def swish(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        if not self._fast(X):
            return super().swish(X, inplace=inplace)
        return self._unary("plait_swish_fwd", X, inplace)

    def backprop_swish(
        self, dY: FloatsXdT, X: FloatsXdT, Y: FloatsXdT, inplace: bool = False
    ) -> FloatsXdT:
        if not (self._fast(dY, X, Y) and self._same_shape(dY, X, Y)):
            return super().backprop_swish(dY, X, Y, inplace=inplace)
        return self._binary("plait_swish_bwd", dY, inplace, X, Y)

    def dish(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        if not self._fast(X):
            return super().dish(X, inplace=inplace)
        return self._unary("plait_dish_fwd", X, inplace)

    def backprop_dish(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        if not (self._fast(dY, X) and self._same_shape(dY, X)):
            return super().backprop_dish(dY, X, inplace=inplace)
        return self._binary("plait_dish_bwd", dY, inplace, X)

    def gelu(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        if not self._fast(X):
            return super().gelu(X, inplace=inplace)
        return self._unary("plait_gelu_fwd", X, inplace)

    def backprop_gelu(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        if not (self._fast(dY, X) and self._same_shape(dY, X)):
            return super().backprop_gelu(dY, X, inplace=inplace)
        return self._binary("plait_gelu_bwd", dY, inplace, X)

    # relu_k, hard_sigmoid and hard_tanh (and their backprops) are left to Ops: it writes them
    # as clipped_linear with fixed constants, so they reach the kernel below unchanged.

    def clipped_linear(
        self,
        X: FloatsXdT,
        slope: float = 1.0,
        offset: float = 0.0,
        min_val: float = 0.0,
        max_val: float = 1.0,
        inplace: bool = False,
    ) -> FloatsXdT:
        if not self._fast(X) or min_val > max_val:
            return super().clipped_linear(
                X, slope=slope, offset=offset, min_val=min_val, max_val=max_val, inplace=inplace
            )
        r = X.dtype.type
        return self._unary(
            "plait_clipped_linear_fwd", X, inplace, r(slope), r(offset), r(min_val), r(max_val)
        )

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
        if not (self._fast(dY, X) and self._same_shape(dY, X)):
            return super().backprop_clipped_linear(
                dY, X, slope=slope, offset=offset, min_val=min_val, max_val=max_val, inplace=inplace
            )
        r = X.dtype.type
        return self._binary(
            "plait_clipped_linear_bwd", dY, inplace, X, r(slope), r(offset), r(min_val), r(max_val)
        )

    def hard_swish(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        if not self._fast(X):
            return super().hard_swish(X, inplace=inplace)
        return self._unary("plait_hard_swish_fwd", X, inplace)

    def backprop_hard_swish(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        if not (self._fast(dY, X) and self._same_shape(dY, X)):
            return super().backprop_hard_swish(dY, X, inplace=inplace)
        return self._binary("plait_hard_swish_bwd", dY, inplace, X)

    def hard_swish_mobilenet(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        if not self._fast(X):
            return super().hard_swish_mobilenet(X, inplace=inplace)
        return self._unary("plait_hard_swish_mobilenet_fwd", X, inplace)

    def backprop_hard_swish_mobilenet(
        self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False
    ) -> FloatsXdT:
        if not (self._fast(dY, X) and self._same_shape(dY, X)):
            return super().backprop_hard_swish_mobilenet(dY, X, inplace=inplace)
        return self._binary("plait_hard_swish_mobilenet_bwd", dY, inplace, X)

    # ------------------------------------------------------------------ ragged reductions

    def _reduce(self, name: str, fn: str, X: Any, lengths: Any, allow_zero: bool) -> Optional[Any]:
        """Run a (nN, nO) -> (nS, nO) reduction kernel, or None when the reference must handle it."""
        if not (self._fast(X) and X.ndim == 2):
            return None
        values = self._quiet_lengths(fn, lengths, X.shape[0], allow_zero=allow_zero)
        ends = self._ends(values) if values is not None else None
        if ends is None:
            return None
        nS, nO = len(values), X.shape[1]
        Y = self.xp.empty((nS, nO), dtype=X.dtype)
        outputs: Tuple[Any, ...] = (Y,)
        if name == "plait_reduce_max_fwd":
            outputs = (Y, self.xp.empty((nS, nO), dtype="int32"))
        _k.launch(name, X.dtype, nS * nO, outputs + (X, ends, _k.i64(nS), _k.i64(nO)))
        return outputs if len(outputs) > 1 else Y

    def _backprop_reduce(self, name: str, fn: str, dY: Any, lengths: Any) -> Optional[Any]:
        """Run a (nS, nO) -> (sum(lengths), nO) broadcast kernel, or None for the reference."""
        if not (self._fast(dY) and dY.ndim == 2):
            return None
        values = self._quiet_lengths(fn, lengths, None, allow_zero=True)
        if values is None or len(values) != dY.shape[0]:
            return None
        ends = self._ends(values)
        if ends is None:
            return None
        nS, nO, nR = len(values), dY.shape[1], sum(values)
        dX = self.xp.empty((nR, nO), dtype=dY.dtype)
        _k.launch(name, dY.dtype, nR * nO, (dX, dY, ends, _k.i64(nS), _k.i64(nR), _k.i64(nO)))
        return dX

    def reduce_sum(self, X: Floats2d, lengths: Ints1d) -> Floats2d:
        Y = self._reduce("plait_reduce_sum_fwd", "reduce_sum", X, lengths, allow_zero=True)
        return super().reduce_sum(X, lengths) if Y is None else Y

    def reduce_mean(self, X: Floats2d, lengths: Ints1d) -> Floats2d:
        Y = self._reduce("plait_reduce_mean_fwd", "reduce_mean", X, lengths, allow_zero=True)
        return super().reduce_mean(X, lengths) if Y is None else Y

    def reduce_max(self, X: Floats2d, lengths: Ints1d) -> Tuple[Floats2d, Ints2d]:
        result = self._reduce("plait_reduce_max_fwd", "reduce_max", X, lengths, allow_zero=False)
        return super().reduce_max(X, lengths) if result is None else result

    def backprop_reduce_sum(self, d_sums: Floats2d, lengths: Ints1d) -> Floats2d:
        dX = self._backprop_reduce("plait_reduce_sum_bwd", "backprop_reduce_sum", d_sums, lengths)
        return super().backprop_reduce_sum(d_sums, lengths) if dX is None else dX

    def backprop_reduce_mean(self, d_means: Floats2d, lengths: Ints1d) -> Floats2d:
        dX = self._backprop_reduce("plait_reduce_mean_bwd", "backprop_reduce_mean", d_means, lengths)
        return super().backprop_reduce_mean(d_means, lengths) if dX is None else dX

    def backprop_reduce_max(self, d_maxes: Floats2d, which: Ints2d, lengths: Ints1d) -> Floats2d:
        fast = (
            self._fast(d_maxes)
            and d_maxes.ndim == 2
            and self._is_int_array(which, ndim=2)
            and self._same_shape(d_maxes, which)
        )
        values = self._quiet_lengths("backprop_reduce_max", lengths, None, False) if fast else None
        ends = self._ends(values) if values is not None and len(values) == d_maxes.shape[0] else None
        if ends is not None and which.size:
            xp = self.xp
            lens = xp.asarray(numpy.asarray(values, dtype="int64"))
            if bool(((which < 0) | (which >= lens[:, None])).any()):
                ends = None
        if ends is None:
            return super().backprop_reduce_max(d_maxes, which, lengths)
        nS, nO = d_maxes.shape
        dX = self.xp.zeros((sum(values), nO), dtype=d_maxes.dtype)
        _k.launch(
            "plait_reduce_max_bwd", d_maxes.dtype, nS * nO,
            (dX, d_maxes, self._int32(which), ends, _k.i64(nS), _k.i64(nO)),
        )
        return dX

    # ------------------------------------------------------------------ hashing and tables

    def hash(self, ids: Ints1d, seed: int) -> Ints2d:
        """MurmurHash3_x64_128 of each uint64 key, as four uint32 words, bit-identical to Thinc.  (N,) -> (N, 4)"""
        keys = _murmur._as_keys(self, ids, "ids", "CupyOps.hash")
        seed = _murmur._check_seed(seed, "CupyOps.hash")
        n = keys.shape[0]
        out = self.xp.empty((n, 4), dtype="uint32")
        _k.launch("plait_hash_fwd", "float32", n, (out, keys, _k.u32(seed), _k.i64(n)))
        return out

    def gather_add(self, table: Floats2d, indices: Ints2d) -> Floats2d:
        """Sum the rows of `table` picked by each row of `indices`.  (T, O), (B, K) -> (B, O)"""
        fast = (
            self._fast(table)
            and table.ndim == 2
            and self._is_int_array(indices, ndim=2)
            and table.shape[0] <= _INT32_MAX
        )
        if fast and indices.size:
            low, high = self._index_range(indices)
            fast = low >= 0 and high < table.shape[0]
        if not fast:
            return super().gather_add(table, indices)
        nT, nO = table.shape
        nB, nK = indices.shape
        Y = self.xp.empty((nB, nO), dtype=table.dtype)
        _k.launch(
            "plait_gather_add_fwd", table.dtype, nB * nO,
            (Y, table, self._int32(indices), _k.i64(nT), _k.i64(nO), _k.i64(nB), _k.i64(nK)),
        )
        return Y

    def scatter_add(self, table: FloatsXd, indices: IntsXd, values: FloatsXd) -> FloatsXd:
        """Add `values` into `table` at `indices` (atomically, so repeats accumulate); returns `table`."""
        if (
            self._fast(table, values)
            and self._is_int_array(indices)
            and indices.ndim >= 1
            and tuple(values.shape) == tuple(indices.shape[:-1]) + (1,) + tuple(table.shape[1:])
        ):
            # Values broadcast over the last index axis (HashEmbed's gradient): spelled out, so
            # the atomic kernel below takes them.
            values = self.xp.ascontiguousarray(
                self.xp.broadcast_to(values, tuple(indices.shape) + tuple(table.shape[1:]))
            )
        fast = (
            self._fast(table, values)
            and table.ndim >= 1
            and self._is_int_array(indices)
            and tuple(values.shape) == tuple(indices.shape) + tuple(table.shape[1:])
            and table.shape[0] <= _INT32_MAX
        )
        if fast and indices.size:
            low, high = self._index_range(indices)
            fast = low >= -table.shape[0] and high < table.shape[0]
        if not fast:
            return super().scatter_add(table, indices, values)
        nT, nM = table.shape[0], indices.size
        nR = table.size // nT if nT else 0
        _k.launch(
            "plait_scatter_add_fwd", table.dtype, nM * nR,
            (table, self._int32(indices.reshape(-1)), values, _k.i64(nT), _k.i64(nM), _k.i64(nR)),
        )
        return table

    # ------------------------------------------------------------------ optimizer updates

    def adam(
        self,
        weights: Floats1d,
        gradient: Floats1d,
        mom1: Floats1d,
        mom2: Floats1d,
        beta1: float,
        beta2: float,
        eps: float,
        learn_rate: float,
        mod_rate: float = 1.0,
        *,
        keep_gradient: bool = False,
    ) -> Tuple[Floats1d, Floats1d, Floats1d, Floats1d]:
        """One fused Adam step in place on weights, mom1 and mom2, zeroing gradient unless keep_gradient (learn_rate bias-corrected by the caller)."""
        if not (self._fast(weights, gradient, mom1, mom2) and self._same_shape(weights, gradient, mom1, mom2)):
            return super().adam(
                weights, gradient, mom1, mom2, beta1, beta2, eps, learn_rate, mod_rate=mod_rate,
                keep_gradient=keep_gradient,
            )
        r = weights.dtype.type
        # The kernel zeroes the gradient it reads; a kept gradient hands it a copy instead.
        consumed = gradient.copy() if keep_gradient else gradient
        _k.launch(
            "plait_adam_fwd", weights.dtype, weights.size,
            (
                weights, consumed, mom1, mom2,
                r(beta1), r(beta2), r(1.0 - beta1), r(1.0 - beta2),
                r(eps), r(learn_rate), r(mod_rate), _k.i64(weights.size),
            ),
        )
        return weights, gradient, mom1, mom2

    def clip_gradient(self, gradient: FloatsT, threshold: float) -> FloatsT:
        """Rescale `gradient` in place so its L2 norm is at most `threshold`, without a host round trip."""
        if not self._fast(gradient):
            return super().clip_gradient(gradient, threshold)
        try:
            from cupy import cublas
        except ImportError:  # a cupy without the cuBLAS wrappers
            norm = self.xp.linalg.norm(gradient.ravel()).reshape((1,))
        else:
            # One cuBLAS call whose result stays in device memory (no host sync), where
            # linalg.norm runs three kernels and more Python.
            norm = cublas.nrm2(gradient.ravel())
        _k.launch(
            "plait_clip_gradient_fwd", gradient.dtype, gradient.size,
            (gradient, self.xp.ascontiguousarray(norm, dtype=gradient.dtype),
             numpy.float64(threshold), _k.i64(gradient.size)),
        )
        return gradient
