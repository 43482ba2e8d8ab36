"""plait's Neon face: a drop-in for neon 2.x's backend API (``neon.backends``), on the CPU
(and on a CUDA GPU through CuPy: ``gen_backend('gpu')``).

    from plait.neon import gen_backend
    be = gen_backend(backend="cpu", rng_seed=0, batch_size=32)
    W = be.array(np.random.randn(10, 784)); x = be.iobuf(784); y = be.iobuf(10)
    y[:] = be.sig(be.dot(W, x))        # lazy op-tree, computed on assignment

Module layout follows neon: ``plait.neon`` is ``neon.backends`` (plus ``NervanaObject``, which
neon keeps in ``neon``), ``plait.neon.backend`` is ``neon.backends.backend``,
``plait.neon.nervanacpu`` is ``neon.backends.nervanacpu``, ``plait.neon.nervanagpu`` is
``neon.backends.nervanagpu`` (importing it does not import cupy), ``plait.neon.autodiff`` is
``neon.backends.autodiff``.
"""
import numpy as np

from .autodiff import Autodiff
from .backend import Backend, Block, OpCollection, OpTreeNode, Tensor
from .nervanacpu import CPUTensor, NervanaCPU
from .nervanagpu import GPUTensor, GPUUnavailableError, NervanaGPU

__all__ = [
    "gen_backend", "cleanup_backend", "Backend", "Tensor", "OpTreeNode", "OpCollection", "Block",
    "NervanaCPU", "CPUTensor", "NervanaGPU", "GPUTensor", "GPUUnavailableError", "NervanaObject",
    "Autodiff",
]


class NervanaObject:
    """The base of neon's objects; the class attribute ``be`` is the current backend
    (set by :func:`gen_backend`)."""

    be = None
    __counter = 0

    def __init__(self, name=None):
        if name is None:
            name = f"{self.classnm}_{NervanaObject.__counter}"
        self.name = name
        self._desc = None
        NervanaObject.__counter += 1

    @property
    def classnm(self):
        return type(self).__name__

    @property
    def modulenm(self):
        return f"{type(self).__module__}.{type(self).__name__}"


def cleanup_backend():
    """Forget the current backend (``NervanaObject.be``); its tensors stay usable."""
    be = NervanaObject.be
    if be is not None:
        be.cleanup_backend()
    NervanaObject.be = None


def gen_backend(backend="cpu", rng_seed=None, datatype=np.float32, batch_size=0,
                stochastic_round=False, device_id=0, max_devices=1, compat_mode=None,
                deterministic_update=None, deterministic=None, cache_dir=None):
    """Make a backend, make it the current one (``NervanaObject.be``) and return it.

    ``backend='cpu'``, or ``'gpu'`` where CuPy and a CUDA device exist (else
    :class:`GPUUnavailableError` says which is missing). Backends made earlier stay usable: each
    tensor executes on its own backend.
    """
    if backend is None:
        backend = "cpu"
    if backend == "gpu":
        from .nervanagpu import gpu_unavailable_reason

        reason = gpu_unavailable_reason()
        if reason is not None:
            raise GPUUnavailableError(
                f"gen_backend('gpu'): the GPU backend needs CuPy and a CUDA device, and here {reason}; "
                f"use backend='cpu'"
            )
    if backend in ("mgpu", "mkl", "argon"):
        raise NotImplementedError(
            f"gen_backend: the '{backend}' backend is not part of plait.neon; use backend='cpu'"
        )
    if backend not in Backend.backends:
        choices = ", ".join(repr(n) for n in Backend.backend_choices())
        raise ValueError(f"backend must be one of ({choices}), got {backend!r}")
    be = Backend.backends[backend](rng_seed=rng_seed, default_dtype=datatype, compat_mode=compat_mode,
                                   stochastic_round=stochastic_round, device_id=device_id)
    NervanaObject.be = be
    be.bsz = batch_size
    return be

