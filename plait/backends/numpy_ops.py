"""The CPU backend: numpy, BLAS for matrix products, and compiled Cython kernels where they pay.

`gemm` is inherited: the reference's numpy.matmul already hands transposed views straight to the
BLAS numpy was built with (measured equal to numpy.dot), so an override would only repeat it.
"""
from typing import Any

import numpy

from ..types import DeviceTypes, Ints1d, Ints2d
from . import _murmur, _threads
from ._numpy_gather import GatherKernels
from ._numpy_lstm import LstmKernels
from ._numpy_norm import NormKernels
from ._numpy_seq import SeqKernels
from .ops import Ops


# The compiled fast paths come from mixins, one per kernel family, so each family's
# wrappers sit next to nothing else; each falls back to Ops outside its fast path.
class NumpyOps(SeqKernels, GatherKernels, LstmKernels, NormKernels, Ops):
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
        # NOTE: `use_blis` is accepted for Thinc compatibility. Matrix products go through the
        # BLAS numpy was built with (OpenBLAS in the wheels), which honours the usual thread limits.
        self.use_blis = bool(use_blis)

    def cblas(self) -> Any:
        """A table of row-major BLAS function pointers for Cython code (plait.backends.cblas.CBlas)."""
        from .cblas import CBlas

        return CBlas()

    def hash(self, ids: Ints1d, seed: int) -> Ints2d:
        return _murmur.numpy_hash(self, ids, seed)

    def ngrams(self, n: int, keys: Ints1d) -> Ints1d:
        return _murmur.numpy_ngrams(self, n, keys)
