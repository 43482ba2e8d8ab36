"""NumpyOps fast paths: gather/scatter, dropout mask, optimizer step (compiled kernels in _kernels_cpu)."""
from __future__ import annotations


class GatherKernels:
    """Mixin for NumpyOps; each method overrides the Ops reference with the identical signature."""
