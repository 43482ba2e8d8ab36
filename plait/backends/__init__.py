"""Backends (Ops classes) and the choice of the current one.

The current ops is context-local (a ContextVar, so asyncio tasks and `use_ops` blocks are
isolated) with a process-wide default behind it: `set_current_ops` sets both, so a thread or
context that has not chosen ops yet starts from the ops given to the last `set_current_ops`
call (NumpyOps when there was none). A context keeps the ops it first observed until it sets
another, so a later `set_current_ops` in another thread never switches it under its feet.
"""
from __future__ import annotations

import contextlib
import os
import threading
from contextvars import ContextVar
from typing import Any, Callable, Dict, Iterator, Optional

# NOTE: OpenMP workers that finish early spin by default, holding a core another process
# (or the other half of the same kernel) needs; on a shared 2-core machine that made
# 2-thread kernels up to 8x slower than 1 thread. Passive waiting costs nothing measurable
# when cores are free. It must be set before the OpenMP runtime loads; a user's setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The thread count (the user's, else this process's share of the free cores) must reach
# OMP_NUM_THREADS before the kernels load the OpenMP runtime; see _threads.py.
from ._threads import get_num_threads, plan_threads, set_num_threads  # noqa: E402

plan_threads()

from ._param_server import ParamServer  # noqa: E402
from ._cupy_allocators import cupy_pytorch_allocator, cupy_tensorflow_allocator  # noqa: E402
from .cupy_ops import CupyOps  # noqa: E402
from .mps_ops import MPSOps  # noqa: E402
from .numpy_ops import NumpyOps  # noqa: E402
from .ops import Ops  # noqa: E402

__all__ = [
    "Ops",
    "NumpyOps",
    "CupyOps",
    "MPSOps",
    "ParamServer",
    "get_ops",
    "use_ops",
    "get_current_ops",
    "set_current_ops",
    "get_array_ops",
    "set_gpu_allocator",
    "use_pytorch_for_gpu_memory",
    "use_tensorflow_for_gpu_memory",
    "has_cupy",
    "context_pools",
    "cupy_pytorch_allocator",
    "cupy_tensorflow_allocator",
    "get_num_threads",
    "set_num_threads",
]



# Name -> Ops class. Kept as one small table (plus aliases) so that a catalogue registry can
# replace it without touching get_ops' callers.
_OPS_CLASSES: Dict[str, Callable[..., Ops]] = {
    NumpyOps.name: NumpyOps,
    CupyOps.name: CupyOps,
    MPSOps.name: MPSOps,
}
_OPS_ALIASES: Dict[str, str] = {"cpu": "numpy", "gpu": "cupy"}


class _UnknownOpsError(KeyError, ValueError):
    """Unknown backend name: a KeyError (plait's rule) that is also the ValueError thinc raises."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _known_ops_names() -> list:
    return sorted(set(_OPS_CLASSES) | set(_OPS_ALIASES))


def get_ops(name: str, **kwargs: Any) -> Ops:
    """A new backend object by name ("numpy"/"cpu", "cupy"/"gpu"); kwargs go to its constructor."""
    if not isinstance(name, str):
        raise TypeError(
            f"get_ops: expected a backend name (str), got {type(name).__name__} {name!r}. "
            f"Known names: {', '.join(_known_ops_names())}."
        )
    cls = _OPS_CLASSES.get(_OPS_ALIASES.get(name, name))
    if cls is None:
        raise _UnknownOpsError(
            f"get_ops: unknown backend {name!r}. Known names: {', '.join(_known_ops_names())}."
        )
    return cls(**kwargs)


def get_array_ops(arr: Any) -> Ops:
    """A new backend object for an array: CupyOps for a cupy array, NumpyOps otherwise."""
    from ..util import is_cupy_array

    return CupyOps() if is_cupy_array(arr) else NumpyOps()


# --- current ops ---------------------------------------------------------------------------

context_ops: ContextVar[Optional[Ops]] = ContextVar("plait_context_ops", default=None)
_default_lock = threading.Lock()
_default_ops: Optional[Ops] = None
# What each thread last passed to set_current_ops, to notice contexts that lost their ops.
_thread_state = threading.local()


def _get_default_ops() -> Ops:
    global _default_ops
    ops = _default_ops
    if ops is None:
        with _default_lock:
            if _default_ops is None:
                _default_ops = get_ops("cpu")
            ops = _default_ops
    return ops


def get_current_ops() -> Ops:
    """The backend object of the current context."""
    ops = context_ops.get()
    if ops is None:
        ops = _get_default_ops()
        # Pin it, so this context is unaffected by later set_current_ops calls in other threads.
        context_ops.set(ops)
    return ops


def set_current_ops(ops: Ops) -> None:
    """Make `ops` the current backend of this context and the default for new threads/contexts."""
    global _default_ops
    if not isinstance(ops, Ops):
        raise TypeError(
            f"set_current_ops: expected an Ops instance, got {type(ops).__name__}. "
            "Create one with get_ops('numpy') or get_ops('cupy')."
        )
    context_ops.set(ops)
    with _default_lock:
        _default_ops = ops
    _thread_state.ops = ops


@contextlib.contextmanager
def use_ops(name: str, **kwargs: Any) -> Iterator[Ops]:
    """Use the backend `name` (kwargs go to its constructor) in this context for the block.

    Only the current context changes: other threads, and the default for new ones, do not.
    Yields the backend object.
    """
    ops = get_ops(name, **kwargs)
    previous = context_ops.get()
    token = context_ops.set(ops)
    try:
        yield ops
    finally:
        try:
            context_ops.reset(token)
        except ValueError:
            # The token belongs to another Context (a generator resumed elsewhere): restore by value.
            context_ops.set(previous)


def contextvars_eq_thread_ops() -> bool:
    """Whether this context's ops has the type that this thread last set (False hints at a
    context, e.g. a notebook cell, that did not keep its context variables)."""
    current = context_ops.get()
    if current is None:
        current = _default_ops
    thread_ops = getattr(_thread_state, "ops", _default_ops)
    return type(current) is type(thread_ops)


# --- GPU memory ----------------------------------------------------------------------------

_GPU_ALLOCATORS = ("pytorch", "tensorflow")
# The CuPy memory pools made by use_*_for_gpu_memory, by allocator name. Thinc keeps them in
# this context variable (its tests and spaCy read `context_pools.get()`); the default dict is
# shared by every context that has not set its own, so a pool installed once is seen by all.
context_pools: ContextVar[dict] = ContextVar("context_pools", default={})
_gpu_pools_lock = threading.Lock()


def set_gpu_allocator(allocator: str) -> None:
    """Route CuPy's GPU memory allocations through PyTorch ("pytorch") or TensorFlow ("tensorflow")."""
    if allocator == "pytorch":
        use_pytorch_for_gpu_memory()
    elif allocator == "tensorflow":
        use_tensorflow_for_gpu_memory()
    else:
        raise ValueError(
            f"set_gpu_allocator: invalid allocator {allocator!r}. "
            f"Available allocators are: {', '.join(repr(a) for a in _GPU_ALLOCATORS)}."
        )


def _require_cupy(where: str) -> Any:
    from .. import compat

    if not compat.has_cupy:
        raise ImportError(
            f"{where}: routes CuPy's GPU allocations, so it needs cupy. Install the cupy package "
            "matching your CUDA version (e.g. `pip install cupy-cuda12x`)."
        )
    return compat.cupy


def _install_pool(kind: str, allocate: Callable[[int], Any]) -> None:
    cupy = _require_cupy(f"use_{kind}_for_gpu_memory")
    with _gpu_pools_lock:
        pools = context_pools.get()
        pool = pools.get(kind)
        if pool is None:
            pool = cupy.cuda.MemoryPool(allocator=allocate)
            pools[kind] = pool
    cupy.cuda.set_allocator(pool.malloc)


def use_pytorch_for_gpu_memory() -> None:
    """Make CuPy allocate GPU memory from PyTorch's caching allocator.

    With both libraries on one GPU, each would otherwise keep its own pool, and memory free in
    one pool is unavailable to the other. A no-op unless the current ops run on CUDA.
    """
    from ..util import assert_pytorch_installed, get_torch_default_device

    assert_pytorch_installed()
    _require_cupy("use_pytorch_for_gpu_memory")
    if get_torch_default_device().type != "cuda":
        return
    _install_pool("pytorch", cupy_pytorch_allocator)


def use_tensorflow_for_gpu_memory() -> None:
    """Make CuPy allocate GPU memory from TensorFlow (see use_pytorch_for_gpu_memory for why)."""
    from ..util import assert_tensorflow_installed

    assert_tensorflow_installed()
    _install_pool("tensorflow", cupy_tensorflow_allocator)


def __getattr__(name: str) -> Any:
    # thinc.backends exposes these from thinc.compat; forwarding keeps CuPy unimported until asked.
    if name in ("has_cupy", "cupy"):
        from .. import compat

        return getattr(compat, name)
    raise AttributeError(f"module 'plait.backends' has no attribute {name!r}")
