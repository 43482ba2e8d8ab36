"""NumpyOps fast paths: LSTM and activations (compiled kernels in _kernels_cpu)."""
from __future__ import annotations


class LstmKernels:
    """Mixin for NumpyOps; each method overrides the Ops reference with the identical signature."""
