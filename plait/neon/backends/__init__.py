"""``neon.backends`` under its own name, for the ``neon`` import alias (plait.neon_alias).

With the alias on, ``import neon.backends`` must find a package of that name; it is this one,
and its names are plait.neon's own objects (``neon.backends.gen_backend is
plait.neon.gen_backend``), so the two spellings never give two copies of a class.
"""
from .. import (  # noqa: F401
    Autodiff,
    Backend,
    Block,
    CPUTensor,
    GPUTensor,
    GPUUnavailableError,
    NervanaCPU,
    NervanaGPU,
    OpCollection,
    OpTreeNode,
    Tensor,
    cleanup_backend,
    gen_backend,
)

__all__ = [
    "gen_backend", "cleanup_backend", "Backend", "Tensor", "OpTreeNode", "OpCollection", "Block",
    "NervanaCPU", "CPUTensor", "NervanaGPU", "GPUTensor", "GPUUnavailableError", "Autodiff",
]
