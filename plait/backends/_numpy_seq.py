"""NumpyOps fast paths: seq2col, maxout, reductions (compiled kernels in _kernels_cpu)."""
from __future__ import annotations


class SeqKernels:
    """Mixin for NumpyOps; each method overrides the Ops reference with the identical signature."""
