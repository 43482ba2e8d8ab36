"""Device utilities on CuPy that import and mostly work without it (chainer.cuda).

CuPy is imported lazily, on the first use of a GPU name (`cuda.cupy`, `cuda.ndarray`,
`cuda.Device`, ...), so `import plait.chainer` never loads it. Without CuPy, the CPU paths
(`to_cpu`, `get_array_module`, `get_device` on numpy arrays, `DummyDevice`) still work and the
GPU paths raise a RuntimeError that says so.
"""
import functools
import warnings
from typing import Any, Callable

import numpy

from ..util import is_cupy_array

__all__ = [
    "available", "cudnn_enabled", "check_cuda_available", "init", "get_device", "get_array_module",
    "to_cpu", "to_gpu", "copy", "elementwise", "reduce", "memoize", "DummyDevice",
    "DummyDeviceType", "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like",
    "full", "full_like", "cupy", "ndarray", "Device", "Event", "Stream",
]

cudnn_enabled = False


class _NoCupyArray:
    """Stands in for cupy.ndarray without CuPy: nothing is an instance of it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        check_cuda_available()


def _cupy() -> Any:
    from .. import compat

    return compat.cupy if compat.has_cupy else None


def __getattr__(name: str) -> Any:
    # Module-level lazy names: only here does CuPy get imported.
    if name == "available":
        return _cupy() is not None
    if name == "cupy":
        return _cupy()
    if name == "ndarray":
        cp = _cupy()
        return cp.ndarray if cp is not None else _NoCupyArray
    if name in ("Device", "Event", "Stream"):
        cp = _cupy()
        return getattr(cp.cuda, name) if cp is not None else None
    raise AttributeError(f"module 'plait.chainer.cuda' has no attribute {name!r}")


def init(arg: Any = None) -> None:
    """Deprecated (as in Chainer 1.7.2): nothing needs initialising; checks that CUDA is usable."""
    warnings.warn(
        "chainer.cuda.init is deprecated: nothing needs initialising. Call "
        "cuda.check_cuda_available() to check that CUDA can be used.",
        DeprecationWarning,
        stacklevel=2,
    )
    check_cuda_available()


def check_cuda_available() -> None:
    """Raise RuntimeError unless CuPy (and so a CUDA device) can be used."""
    if _cupy() is None:
        raise RuntimeError(
            "plait.chainer.cuda: CuPy is not available (it is not installed or failed to "
            "import), so nothing can run on a GPU. Install the cupy build for your CUDA "
            "version, or keep arrays and links on the CPU (to_cpu)."
        )


class DummyDeviceType:
    """The device of numpy arrays: a context manager and `use()` that do nothing."""

    id = -1

    def __int__(self) -> int:
        return -1

    def __enter__(self) -> "DummyDeviceType":
        return self

    def __exit__(self, *args: Any) -> None:
        return None

    def use(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, DummyDeviceType)

    def __hash__(self) -> int:
        return hash(DummyDeviceType)

    def __repr__(self) -> str:
        return "DummyDevice"


DummyDevice = DummyDeviceType()


def get_device(*args: Any) -> Any:
    """The device of the first GPU specifier among args (an int id, a cupy array or a Device).

    numpy arrays (and anything else that is not a device specifier) are skipped; when nothing
    selects a GPU the result is DummyDevice. A lone None means the current GPU device.
    """
    if len(args) == 1 and args[0] is None:
        cp = _cupy()
        return cp.cuda.Device() if cp is not None else DummyDevice
    for arg in args:
        if isinstance(arg, (int, numpy.integer)) and not isinstance(arg, bool):
            check_cuda_available()
            return _cupy().cuda.Device(int(arg))
        if is_cupy_array(arg):
            if arg.size == 0:
                continue  # an empty array holds no device memory (Chainer: no device)
            return arg.device
        cp = _cupy() if not isinstance(arg, numpy.ndarray) else None
        if cp is not None and isinstance(arg, cp.cuda.Device):
            return arg
    return DummyDevice


def get_array_module(*args: Any) -> Any:
    """cupy if any argument (an array, or a Variable holding one) lives on a GPU, else numpy."""
    for arg in args:
        data = getattr(arg, "data", arg) if _is_variable(arg) else arg
        if is_cupy_array(data):
            return _cupy()
    return numpy


def _is_variable(obj: Any) -> bool:
    from .variable import Variable

    return isinstance(obj, Variable)


def to_cpu(array: Any, stream: Any = None) -> Any:
    """The array on the host: a cupy array is copied to numpy, a numpy array returned as is."""
    if is_cupy_array(array):
        return array.get(stream)
    if isinstance(array, numpy.ndarray):
        return array
    raise TypeError(
        f"cuda.to_cpu: expected a numpy.ndarray or cupy.ndarray, got "
        f"{type(array).__module__}.{type(array).__name__}"
        + (" (pass variable.data, or call variable.to_cpu())" if _is_variable(array) else "") + "."
    )


def to_gpu(array: Any, device: Any = None, stream: Any = None) -> Any:
    """The array on a GPU (the given device, else the current one); cupy arrays are returned as is."""
    check_cuda_available()
    cp = _cupy()
    if is_cupy_array(array):
        return array
    with (get_device(device) if device is not None else cp.cuda.Device()):
        if stream is None:
            return cp.asarray(array)
        out = cp.empty(numpy.shape(array), dtype=numpy.asarray(array).dtype)
        out.set(numpy.ascontiguousarray(array), stream)
        return out


def copy(array: Any, out: Any = None, out_device: Any = None, stream: Any = None) -> Any:
    """A copy of a cupy array, into `out` if given, else on `out_device` (default: the array's device)."""
    check_cuda_available()
    cp = _cupy()
    if not is_cupy_array(array):
        raise TypeError(
            f"cuda.copy: expected a cupy.ndarray, got {type(array).__name__}. Use numpy.copy "
            f"for host arrays, or to_gpu to send one to a device."
        )
    if out is None:
        device = get_device(out_device) if out_device is not None else array.device
        with device:
            out = cp.empty_like(array)
    with array.device:
        if stream is None:
            out.data.copy_from_device(array.data, array.nbytes)
        else:
            out.data.copy_from_device_async(array.data, array.nbytes, stream)
    return out


def memoize(for_each_device: bool = False) -> Callable:
    """Cache a function's results per argument tuple (and per device); plain when CuPy is absent."""

    def decorator(f: Callable) -> Callable:
        cp = _cupy()
        if cp is not None:
            return cp.memoize(for_each_device)(f)
        return f

    return decorator


@functools.lru_cache(maxsize=None)
def _elementwise_kernel(in_params: str, out_params: str, operation: str, name: str, items: tuple) -> Any:
    return _cupy().ElementwiseKernel(in_params, out_params, operation, name, **dict(items))


@functools.lru_cache(maxsize=None)
def _reduction_kernel(args: tuple, items: tuple) -> Any:
    return _cupy().ReductionKernel(*args, **dict(items))


def elementwise(in_params: str, out_params: str, operation: str, name: str, **kwargs: Any) -> Any:
    """A cached cupy.ElementwiseKernel (the name is required); CuPy must be available."""
    check_cuda_available()
    return _elementwise_kernel(in_params, out_params, operation, name, tuple(sorted(kwargs.items())))


def reduce(
    in_params: str, out_params: str, map_expr: str, reduce_expr: str, post_map_expr: str,
    identity: Any, name: str, **kwargs: Any,
) -> Any:
    """A cached cupy.ReductionKernel (the name is required); CuPy must be available."""
    check_cuda_available()
    args = (in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name)
    return _reduction_kernel(args, tuple(sorted(kwargs.items())))


def _alloc(fn_name: str, n_positional: int) -> Callable:
    # The deprecated constructors default to float32 (cupy's own default to float64);
    # `n_positional` is how many positional arguments come before dtype.
    def alloc(*args: Any, **kwargs: Any) -> Any:
        check_cuda_available()
        if n_positional and len(args) <= n_positional:
            kwargs.setdefault("dtype", numpy.float32)
        return getattr(_cupy(), fn_name)(*args, **kwargs)

    alloc.__name__ = fn_name
    alloc.__doc__ = f"Deprecated: cupy.{fn_name}" + (" with float32 as the default dtype." if n_positional else ".")
    return alloc


empty = _alloc("empty", 1)
empty_like = _alloc("empty_like", 0)
zeros = _alloc("zeros", 1)
zeros_like = _alloc("zeros_like", 0)
ones = _alloc("ones", 1)
ones_like = _alloc("ones_like", 0)
full = _alloc("full", 2)
full_like = _alloc("full_like", 0)


# ---------------------------------------------------------------------------------------------
# Private: the plait backend (Ops) that runs a function's kernels on the arrays' device.

_OPS_CACHE: dict = {}


def _get_ops(xp: Any) -> Any:
    """The cached NumpyOps (xp is numpy) or CupyOps (xp is cupy) that the face's kernels run on."""
    ops = _OPS_CACHE.get(xp)
    if ops is None:
        from ..backends import CupyOps, NumpyOps

        ops = NumpyOps() if xp is numpy else CupyOps()
        _OPS_CACHE[xp] = ops
    return ops


def _ops_for(*arrays: Any) -> Any:
    """The Ops for arrays that all live on one device (CupyOps if any is a cupy array)."""
    for a in arrays:
        if is_cupy_array(a):
            return _get_ops(_cupy())
    return _get_ops(numpy)
