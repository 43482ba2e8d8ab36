"""The CPU backend: numpy, BLAS for matrix products, and compiled Cython kernels where they pay."""
from typing import Any, Optional

import numpy

from ..types import DeviceTypes, Floats2d, Ints1d, Ints2d
from . import _murmur
from ._checks import check_array
from .ops import Ops


class NumpyOps(Ops):
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
        # NOTE: `use_blis` is accepted for Thinc compatibility. Matrix products go through the
        # BLAS numpy was built with (OpenBLAS in the wheels), which honours the usual thread limits.
        self.use_blis = bool(use_blis)

    def cblas(self) -> Any:
        """A table of row-major BLAS function pointers for Cython code (plait.backends.cblas.CBlas)."""
        from .cblas import CBlas

        return CBlas()

    def gemm(
        self,
        x: Floats2d,
        y: Floats2d,
        out: Optional[Floats2d] = None,
        trans1: bool = False,
        trans2: bool = False,
    ) -> Floats2d:
        check_array("gemm", "x", x, ndim=2, kind="f")
        check_array("gemm", "y", y, ndim=2, kind="f")
        if x.dtype != y.dtype or (out is not None and (out.dtype != x.dtype or not out.flags["C_CONTIGUOUS"])):
            return super().gemm(x, y, out=out, trans1=trans1, trans2=trans2)
        A = x.T if trans1 else x
        B = y.T if trans2 else y
        if A.shape[1] != B.shape[0]:
            return super().gemm(x, y, out=out, trans1=trans1, trans2=trans2)
        if out is not None and tuple(out.shape) != (A.shape[0], B.shape[1]):
            return super().gemm(x, y, out=out, trans1=trans1, trans2=trans2)
        # numpy.dot hands transposed views to BLAS without copying them.
        return numpy.dot(A, B, out=out)

    def hash(self, ids: Ints1d, seed: int) -> Ints2d:
        return _murmur.numpy_hash(self, ids, seed)

    def ngrams(self, n: int, keys: Ints1d) -> Ints1d:
        return _murmur.numpy_ngrams(self, n, keys)
