"""Array, device and framework helpers with the names and behaviour of Thinc 8.3's `thinc.util`.

Nothing here imports CuPy, PyTorch, TensorFlow or MXNet at module import. Predicates such as
`is_torch_array` look in `sys.modules` instead: an object cannot be a torch tensor unless torch
has been imported already. Converters import the framework when first called and raise an
`ImportError` naming the package to install when it is missing.
"""
from __future__ import annotations

import collections.abc
import contextlib
import functools
import inspect
import os
import platform
import random
import sys
import tempfile
import types as _pytypes
import typing
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional, Sequence, TypeVar, Union

import numpy

from . import compat as _compat

if TYPE_CHECKING:
    from .backends import Ops
    from .types import ArrayXd, DTypes, FloatsXd, IntsXd, Padded, Ragged, Shape

__all__ = [
    "DATA_VALIDATION",
    "ArrayInfo",
    "DataValidationError",
    "assert_mxnet_installed",
    "assert_pytorch_installed",
    "assert_tensorflow_installed",
    "convert_recursive",
    "copy_array",
    "data_validation",
    "fix_random_seed",
    "get_array_module",
    "get_torch_default_device",
    "get_width",
    "gpu_is_available",
    "is_cupy_array",
    "is_mxnet_array",
    "is_mxnet_gpu_array",
    "is_numpy_array",
    "is_tensorflow_array",
    "is_tensorflow_gpu_array",
    "is_torch_array",
    "is_torch_cuda_array",
    "is_torch_gpu_array",
    "is_torch_mps_array",
    "is_xp_array",
    "iterate_recursive",
    "make_tempfile",
    "mxnet2xp",
    "partial",
    "prefer_gpu",
    "require_cpu",
    "require_gpu",
    "set_active_gpu",
    "tensorflow2xp",
    "to_categorical",
    "to_numpy",
    "torch2xp",
    "use_nvtx_range",
    "validate_fwd_input_output",
    "validate_type",
    "xp2mxnet",
    "xp2tensorflow",
    "xp2torch",
    "has_cupy",
    "has_torch",
]

# Model.initialize checks forward functions' annotations against sample data only while this is on.
DATA_VALIDATION: ContextVar[bool] = ContextVar("DATA_VALIDATION", default=False)

# thinc.util re-exports these flags and modules from thinc.compat; here they are forwarded on
# access so that importing plait.util stays free of the frameworks.
_FORWARDED = {
    "cupy": "cupy",
    "cupy_from_dlpack": "cupy_from_dlpack",
    "has_cupy": "has_cupy",
    "has_cupy_gpu": "has_cupy_gpu",
    "has_gpu": "has_gpu",
    "has_mxnet": "has_mxnet",
    "has_tensorflow": "has_tensorflow",
    "has_torch": "has_torch",
    "has_torch_cuda_gpu": "has_torch_cuda_gpu",
    "has_torch_mps": "has_torch_mps",
    "torch": "torch",
    "tf": "tensorflow",
    "mx": "mxnet",
}


def __getattr__(name: str) -> Any:
    if name in _FORWARDED:
        return getattr(_compat, _FORWARDED[name])
    raise AttributeError(f"module 'plait.util' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FORWARDED))


def _loaded(module_name: str) -> Any:
    """The module if it has been imported already, else None (never triggers an import)."""
    return sys.modules.get(module_name)


def _describe(value: Any) -> str:
    """A short description of a value for error messages: type, and shape/dtype for arrays."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    if shape is not None and dtype is not None:
        return f"{kind} of shape {tuple(shape)} and dtype {dtype}"
    return kind


# --- array kinds -------------------------------------------------------------------------


def get_array_module(arr: Any) -> Any:
    """The array module (numpy or cupy) that `arr` belongs to."""
    if isinstance(arr, numpy.ndarray):
        return numpy
    if is_cupy_array(arr):
        return sys.modules["cupy"]
    # NOTE: the first sentence is Thinc's wording, which code written for Thinc matches.
    raise ValueError(
        f"Only numpy and cupy arrays are supported, but found {type(arr)} instead. If "
        "get_array_module module wasn't called directly, this might indicate a bug in Thinc-style "
        f"code calling it. get_array_module got {_describe(arr)}: convert the data with "
        "ops.asarray(...) first."
    )


def gpu_is_available() -> bool:
    """Whether a GPU plait can use (CUDA via CuPy, or Apple Metal via PyTorch) is present."""
    return bool(_compat.has_gpu)


def is_xp_array(obj: Any) -> bool:
    """Whether `obj` is a numpy or cupy array."""
    return is_numpy_array(obj) or is_cupy_array(obj)


def is_numpy_array(obj: Any) -> bool:
    """Whether `obj` is a numpy array."""
    return isinstance(obj, numpy.ndarray)


def is_cupy_array(obj: Any) -> bool:
    """Whether `obj` is a cupy array."""
    cupy = _loaded("cupy")
    return cupy is not None and isinstance(obj, getattr(cupy, "ndarray", ()))


def is_torch_array(obj: Any) -> bool:
    """Whether `obj` is a torch tensor."""
    torch = _loaded("torch")
    return torch is not None and isinstance(obj, getattr(torch, "Tensor", ()))


def is_torch_cuda_array(obj: Any) -> bool:
    """Whether `obj` is a torch tensor on a CUDA device."""
    return is_torch_array(obj) and bool(obj.is_cuda)


def is_torch_mps_array(obj: Any) -> bool:
    """Whether `obj` is a torch tensor on an Apple Metal device."""
    return is_torch_array(obj) and bool(getattr(obj, "is_mps", False))


def is_torch_gpu_array(obj: Any) -> bool:
    """Whether `obj` is a torch tensor on any GPU (CUDA or Metal)."""
    return is_torch_cuda_array(obj) or is_torch_mps_array(obj)


def is_tensorflow_array(obj: Any) -> bool:
    """Whether `obj` is a TensorFlow tensor."""
    tf = _loaded("tensorflow")
    return tf is not None and isinstance(obj, getattr(tf, "Tensor", ()))


def is_tensorflow_gpu_array(obj: Any) -> bool:
    """Whether `obj` is a TensorFlow tensor placed on a GPU."""
    return is_tensorflow_array(obj) and "GPU:" in str(obj.device)


def is_mxnet_array(obj: Any) -> bool:
    """Whether `obj` is an MXNet NDArray."""
    mx = _loaded("mxnet")
    if mx is None:
        return False
    nd = getattr(mx, "nd", None)
    return nd is not None and isinstance(obj, getattr(nd, "NDArray", ()))


def is_mxnet_gpu_array(obj: Any) -> bool:
    """Whether `obj` is an MXNet NDArray that lives on a GPU."""
    return is_mxnet_array(obj) and obj.context.device_type != "cpu"


def to_numpy(data: Any) -> numpy.ndarray:
    """`data` as a numpy array: numpy arrays pass through, cupy arrays are copied to the host."""
    if isinstance(data, numpy.ndarray):
        return data
    if is_cupy_array(data):
        return data.get()
    return numpy.array(data)


def copy_array(dst: ArrayXd, src: ArrayXd) -> None:
    """Copy `src` into `dst` in place (broadcasting as numpy/cupy do); either may be on the GPU."""
    if isinstance(dst, numpy.ndarray) and isinstance(src, numpy.ndarray):
        dst[...] = src
    elif is_cupy_array(dst):
        cupy = sys.modules["cupy"]
        cupy.copyto(dst, cupy.asarray(src))
    else:
        numpy.copyto(dst, to_numpy(src))


# --- devices -----------------------------------------------------------------------------


def get_torch_default_device() -> Any:
    """The torch device that matches the current ops: `cuda:<n>` for CupyOps, `mps`, else `cpu`."""
    if not _compat.has_torch:
        raise _TorchMissingError(
            "get_torch_default_device: PyTorch is not available. Install it with `pip install torch`."
        )
    torch = _compat.torch
    from .backends import CupyOps, MPSOps, get_current_ops

    ops = get_current_ops()
    if isinstance(ops, CupyOps):
        return torch.device(f"cuda:{torch.cuda.current_device()}")
    if isinstance(ops, MPSOps):
        return torch.device("mps")
    return torch.device("cpu")


class _TorchMissingError(ImportError, ValueError):
    """Thinc raises ValueError here, the rest of plait ImportError; this satisfies both."""


def fix_random_seed(seed: int = 0) -> None:
    """Seed Python's `random`, numpy and, where installed, torch and CuPy."""
    random.seed(seed)
    numpy.random.seed(seed % 2**32)
    if _compat.has_torch:
        # torch.manual_seed rejects seeds outside the unsigned 64-bit range.
        _compat.torch.manual_seed(seed % 0xFFFF_FFFF_FFFF_FFFF)
    if _compat.has_cupy_gpu:
        _compat.cupy.random.seed(seed)
        if _compat.has_torch and _compat.has_torch_cuda_gpu:
            torch = _compat.torch
            torch.cuda.manual_seed_all(seed)
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False


def set_active_gpu(gpu_id: int) -> Any:
    """Make CUDA device `gpu_id` current for CuPy (and torch when it has CUDA); returns the cupy Device."""
    if not _compat.has_cupy_gpu:
        raise ValueError(
            f"set_active_gpu({gpu_id!r}): no CUDA GPU detected through CuPy "
            f"(cupy installed: {bool(_compat.has_cupy)}). Install cupy for your CUDA version and check the driver."
        )
    device = _compat.cupy.cuda.device.Device(gpu_id)
    device.use()
    if _compat.has_torch_cuda_gpu:
        _compat.torch.cuda.set_device(gpu_id)
    return device


def require_cpu() -> bool:
    """Make the CPU backend (NumpyOps) the current ops. Returns True."""
    from .backends import get_ops, set_current_ops

    set_current_ops(get_ops("cpu"))
    return True


def prefer_gpu(gpu_id: int = 0) -> bool:
    """Switch to the GPU backend when a GPU is available; returns whether it did."""
    if gpu_is_available():
        require_gpu(gpu_id=gpu_id)
        return True
    return False


def require_gpu(gpu_id: int = 0) -> bool:
    """Make the GPU backend the current ops, or raise ValueError saying why it cannot. Returns True."""
    from .backends import CupyOps, MPSOps, set_current_ops

    if platform.system() == "Darwin" and not _compat.has_cupy:
        if not _compat.has_torch:
            raise ValueError("require_gpu: cannot use a GPU on macOS without PyTorch (pip install torch).")
        if not _compat.has_torch_mps:
            raise ValueError("require_gpu: the installed PyTorch was built without Metal (MPS) support.")
    elif platform.system() != "Darwin" and not _compat.has_cupy:
        raise ValueError(
            "require_gpu: cannot use a GPU because CuPy is not installed. "
            "Install the cupy package matching your CUDA version (e.g. `pip install cupy-cuda12x`)."
        )
    if not gpu_is_available():
        raise ValueError(f"require_gpu({gpu_id}): no GPU device detected. Use require_cpu() or prefer_gpu().")
    if _compat.has_cupy_gpu:
        # Switch the device first, so that the new ops is created on (and reports) it.
        set_active_gpu(gpu_id)
        set_current_ops(CupyOps(device_id=gpu_id))
    else:
        set_current_ops(MPSOps())
    return True


@contextlib.contextmanager
def use_nvtx_range(message: str, id_color: int = -1) -> Iterator[None]:
    """Mark the block as an NVTX range for CUDA profilers; a no-op without CuPy."""
    if not _compat.has_cupy:
        yield
        return
    nvtx = _compat.cupy.cuda.nvtx
    nvtx.RangePush(message, id_color)
    try:
        yield
    finally:
        nvtx.RangePop()


# --- labels and shapes -------------------------------------------------------------------


def to_categorical(Y: IntsXd, n_classes: Optional[int] = None, *, label_smoothing: float = 0.0) -> FloatsXd:
    """One-hot encode integer labels, optionally with label smoothing: (...) -> (..., n_classes) float32."""
    xp = get_array_module(Y)
    if n_classes is None:
        if Y.size == 0:
            raise ValueError(
                "to_categorical: cannot infer n_classes from an empty Y (shape "
                f"{tuple(Y.shape)}). Pass n_classes=..."
            )
        n_classes = int(Y.max()) + 1
    else:
        n_classes = int(n_classes)
    if label_smoothing < 0.0:
        raise ValueError(
            f"to_categorical: the label_smoothing parameter has to be greater than or equal to 0, but found {label_smoothing}."
        )
    if label_smoothing == 0.0:
        if n_classes < 1:
            raise ValueError(f"to_categorical: n_classes should be at least 1, but found {n_classes}.")
        off_value = 0.0
    else:
        if n_classes <= 1:
            raise ValueError(
                "to_categorical: n_classes should be greater than 1 when label smoothing is enabled, "
                f"but {n_classes} was provided."
            )
        off_value = label_smoothing / (n_classes - 1)
        # At (n-1)/n every class gets the same probability and the gold label carries no signal.
        max_smooth = (n_classes - 1) / n_classes
        if label_smoothing >= max_smooth:
            raise ValueError(
                f"to_categorical: for {n_classes} classes the label_smoothing parameter has to be less than "
                f"{max_smooth}, but found {label_smoothing}."
            )
    table = xp.full((n_classes, n_classes), off_value, dtype="float32")
    xp.fill_diagonal(table, 1.0 - label_smoothing)
    return table[Y]


def get_width(X: Union[ArrayXd, Ragged, Padded, Sequence[ArrayXd]], *, dim: int = -1) -> int:
    """The width (size of axis `dim`) of a batch: an array, Ragged, Padded, or a list/tuple of arrays.

    A 0d array has width 0; a 1d array is read as integer labels and has width max + 1.
    """
    from .types import Padded, Ragged

    if isinstance(X, (Ragged, Padded)):
        return get_width(X.data, dim=dim)
    if hasattr(X, "shape") and hasattr(X, "ndim"):
        if len(X.shape) == 0:
            return 0
        if len(X.shape) == 1:
            if X.shape[0] == 0:
                raise ValueError(
                    "get_width: cannot infer the width of an empty 1d array (read as labels, width = max + 1)."
                )
            return int(X.max()) + 1
        return int(X.shape[dim])
    if isinstance(X, (list, tuple)):
        return 0 if len(X) == 0 else get_width(X[0], dim=dim)
    raise ValueError(
        f"get_width: cannot get the width of {_describe(X)}: expected an array, Ragged, Padded, "
        "or a list/tuple of arrays."
    )


@dataclass
class ArrayInfo:
    """Shape and dtype of an array, to check that a gradient matches its output."""

    shape: Shape
    dtype: DTypes

    @classmethod
    def from_array(cls, arr: ArrayXd) -> "ArrayInfo":
        return cls(shape=arr.shape, dtype=arr.dtype)

    def check_consistency(self, arr: ArrayXd) -> None:
        """Raise ValueError unless `arr` has this shape and dtype."""
        if arr.shape != self.shape:
            raise ValueError(
                f"Shape mismatch in backprop. Y: {self.shape}, dY: {arr.shape}. "
                "The gradient passed to backprop must have the shape of the forward output."
            )
        if arr.dtype != self.dtype:
            raise ValueError(
                f"Type mismatch in backprop. Y: {self.dtype}, dY: {arr.dtype}. "
                "The gradient passed to backprop must have the dtype of the forward output."
            )


# --- nested structures -------------------------------------------------------------------


def convert_recursive(is_match: Callable[[Any], bool], convert_item: Callable[[Any], Any], obj: Any) -> Any:
    """Apply `convert_item` to every value matching `is_match` inside nested lists, tuples, dicts
    and ArgsKwargs, keeping the containers' types."""
    from .types import ArgsKwargs

    if is_match(obj):
        return convert_item(obj)
    if isinstance(obj, ArgsKwargs):
        items = convert_recursive(is_match, convert_item, list(obj.items()))
        return ArgsKwargs.from_items(items)
    if isinstance(obj, dict):
        return {
            convert_recursive(is_match, convert_item, key): convert_recursive(is_match, convert_item, value)
            for key, value in obj.items()
        }
    if isinstance(obj, list):
        return [convert_recursive(is_match, convert_item, item) for item in obj]
    if isinstance(obj, tuple):
        return tuple(convert_recursive(is_match, convert_item, item) for item in obj)
    return obj


def iterate_recursive(is_match: Callable[[Any], bool], obj: Any) -> Iterator[Any]:
    """Yield every value matching `is_match` inside nested lists, tuples, dicts (keys too) and ArgsKwargs."""
    from .types import ArgsKwargs

    if is_match(obj):
        yield obj
    elif isinstance(obj, ArgsKwargs):
        yield from iterate_recursive(is_match, list(obj.items()))
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield from iterate_recursive(is_match, key)
            yield from iterate_recursive(is_match, value)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from iterate_recursive(is_match, item)


# --- frameworks --------------------------------------------------------------------------


def _installed(module_name: str) -> bool:
    if module_name in sys.modules:
        return sys.modules[module_name] is not None
    try:
        import importlib.util

        return importlib.util.find_spec(module_name) is not None
    except (ImportError, ValueError):
        return False


def assert_pytorch_installed() -> None:
    """Raise ImportError unless PyTorch can be used."""
    if not _compat.has_torch:
        raise ImportError("PyTorch support requires torch: pip install torch")


def assert_tensorflow_installed() -> None:
    """Raise ImportError unless TensorFlow is installed and enabled with enable_tensorflow()."""
    if _compat.has_tensorflow:
        return
    if not _installed("tensorflow"):
        raise ImportError(
            "TensorFlow support requires tensorflow (2.18 or newer, built for numpy 2): "
            "pip install 'plait[tensorflow]'"
        )
    raise ImportError(
        "TensorFlow is installed but not enabled: call plait.compat.enable_tensorflow() "
        "(also importable as plait.api.enable_tensorflow) first."
    )


def assert_mxnet_installed() -> None:
    """Raise ImportError unless MXNet is installed and enabled with enable_mxnet()."""
    if _compat.has_mxnet:
        return
    if not _installed("mxnet"):
        raise ImportError("MXNet support requires mxnet: pip install mxnet")
    raise ImportError(
        "MXNet is installed but not enabled: call plait.compat.enable_mxnet() "
        "(also importable as plait.api.enable_mxnet) first."
    )


def _wants_numpy(ops: Optional[Ops], on_gpu: bool) -> bool:
    """Whether a framework tensor should come back as numpy (True) or cupy (False)."""
    if ops is None:
        return not on_gpu
    return getattr(ops, "xp", numpy) is numpy


def _require_cupy(where: str) -> Any:
    if not _compat.has_cupy:
        raise ImportError(
            f"{where}: returning a GPU array needs CuPy. Install the cupy package matching your CUDA "
            "version, or pass ops=NumpyOps() to get a numpy array."
        )
    return _compat.cupy


def xp2torch(xp_tensor: ArrayXd, requires_grad: bool = False, device: Optional[Any] = None) -> Any:
    """A torch tensor over the same memory as a numpy/cupy array (no copy), moved to `device`
    (default: get_torch_default_device()); moving between CPU and GPU copies, of course."""
    assert_pytorch_installed()
    torch = _compat.torch
    if device is None:
        device = get_torch_default_device()
    if isinstance(xp_tensor, numpy.ndarray):
        torch_tensor = _numpy2torch(torch, xp_tensor)
    elif hasattr(xp_tensor, "__dlpack__"):
        torch_tensor = torch.utils.dlpack.from_dlpack(xp_tensor)
    elif hasattr(xp_tensor, "toDlpack"):
        torch_tensor = torch.utils.dlpack.from_dlpack(xp_tensor.toDlpack())
    else:
        torch_tensor = _numpy2torch(torch, numpy.asarray(xp_tensor))
    torch_tensor = torch_tensor.to(device)
    if requires_grad:
        if not (torch_tensor.is_floating_point() or torch_tensor.is_complex()):
            raise ValueError(
                f"xp2torch: requires_grad=True needs a float array, got dtype {xp_tensor.dtype}. "
                "Pass requires_grad=False for integer or boolean inputs."
            )
        torch_tensor.requires_grad_()
    return torch_tensor


def _numpy2torch(torch: Any, arr: numpy.ndarray) -> Any:
    """torch.from_numpy, sharing memory; a copy only for layouts torch cannot view."""
    # torch cannot view negative strides or non-native byte order; those need one copy.
    if any(stride < 0 for stride in arr.strides) or not arr.dtype.isnative:
        arr = numpy.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    return torch.from_numpy(arr)


def torch2xp(torch_tensor: Any, *, ops: Optional[Ops] = None) -> ArrayXd:
    """A numpy or cupy array over a torch tensor's memory: cupy when `ops` is a GPU backend, numpy
    for a CPU backend; with `ops=None`, wherever the tensor lives. Copies only across devices."""
    assert_pytorch_installed()
    torch = _compat.torch
    if not is_torch_array(torch_tensor):
        raise TypeError(f"torch2xp: expected a torch.Tensor, got {_describe(torch_tensor)}.")
    tensor = torch_tensor.detach()
    if tensor.dtype == torch.bfloat16:
        raise TypeError(
            "torch2xp: bfloat16 tensors have no numpy/cupy dtype. Convert first with "
            "tensor.float() (float32) or tensor.half() (float16)."
        )
    on_gpu = is_torch_cuda_array(tensor)
    if _wants_numpy(ops, on_gpu):
        return tensor.cpu().numpy()
    cupy = _require_cupy("torch2xp")
    if not on_gpu:
        return cupy.asarray(tensor.cpu().numpy())
    if hasattr(cupy, "from_dlpack"):
        # The __dlpack__ protocol: cupy keeps the tensor alive and syncs streams itself.
        return cupy.from_dlpack(tensor)
    return _compat.cupy_from_dlpack(torch.utils.dlpack.to_dlpack(tensor))


def xp2tensorflow(xp_tensor: ArrayXd, requires_grad: bool = False, as_variable: bool = False) -> Any:
    """A TensorFlow tensor (or Variable with `as_variable=True`) from a numpy/cupy array."""
    assert_tensorflow_installed()
    tf = _compat.tensorflow
    if is_cupy_array(xp_tensor):
        tf_tensor = tf.experimental.dlpack.from_dlpack(xp_tensor.toDlpack())
    else:
        tf_tensor = tf.convert_to_tensor(xp_tensor)
    # tf.Variable and tf.stop_gradient would move the data to a GPU when one is visible;
    # pinning the device keeps it where it was.
    if as_variable:
        with tf.device(tf_tensor.device):
            tf_tensor = tf.Variable(tf_tensor, trainable=requires_grad)
    elif not requires_grad:
        with tf.device(tf_tensor.device):
            tf_tensor = tf.stop_gradient(tf_tensor)
    return tf_tensor


def tensorflow2xp(tf_tensor: Any, *, ops: Optional[Ops] = None) -> ArrayXd:
    """A numpy or cupy array from a TensorFlow tensor (the choice of `ops` as in torch2xp)."""
    assert_tensorflow_installed()
    tf = _compat.tensorflow
    on_gpu = is_tensorflow_gpu_array(tf_tensor)
    if _wants_numpy(ops, on_gpu):
        return tf_tensor.numpy()
    cupy = _require_cupy("tensorflow2xp")
    if on_gpu:
        return _compat.cupy_from_dlpack(tf.experimental.dlpack.to_dlpack(tf_tensor))
    return cupy.asarray(tf_tensor.numpy())


def xp2mxnet(xp_tensor: ArrayXd, requires_grad: bool = False) -> Any:
    """An MXNet NDArray from a numpy/cupy array."""
    assert_mxnet_installed()
    mx = _compat.mxnet
    if is_cupy_array(xp_tensor):
        mx_tensor = mx.nd.from_dlpack(xp_tensor.toDlpack())
    else:
        mx_tensor = mx.nd.from_numpy(numpy.asarray(xp_tensor))
    if requires_grad:
        mx_tensor.attach_grad()
    return mx_tensor


def mxnet2xp(mx_tensor: Any, *, ops: Optional[Ops] = None) -> ArrayXd:
    """A numpy or cupy array from an MXNet NDArray (the choice of `ops` as in torch2xp)."""
    assert_mxnet_installed()
    on_gpu = is_mxnet_gpu_array(mx_tensor)
    if _wants_numpy(ops, on_gpu):
        return mx_tensor.detach().asnumpy()
    cupy = _require_cupy("mxnet2xp")
    if on_gpu:
        return _compat.cupy_from_dlpack(mx_tensor.to_dlpack_for_write())
    return cupy.asarray(mx_tensor.asnumpy())


# --- small helpers -----------------------------------------------------------------------

PartialT = TypeVar("PartialT")


def partial(func: Callable[..., PartialT], *args: Any, **kwargs: Any) -> Callable[..., PartialT]:
    """functools.partial that keeps the wrapped function's docstring."""
    bound = functools.partial(func, *args, **kwargs)
    bound.__doc__ = func.__doc__
    return bound


@contextlib.contextmanager
def make_tempfile(mode: str = "r") -> Iterator[Any]:
    """A named temporary file, closed and deleted when the block ends."""
    handle = tempfile.NamedTemporaryFile(mode=mode, delete=False)
    try:
        yield handle
    finally:
        handle.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(handle.name)


def _write_bytes_atomically(path: Union[str, "os.PathLike[str]"], data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a part.

    One writer for all of plait: plait._safeio.write_file_atomically (temporary sibling,
    fsync, os.replace, folder fsync; the temporary file removed on any failure).
    """
    from ._safeio import write_file_atomically

    write_file_atomically(path, data)


@contextlib.contextmanager
def data_validation(validation: bool) -> Iterator[None]:
    """Turn data validation (DATA_VALIDATION) on or off for the block, in this context only."""
    token = DATA_VALIDATION.set(bool(validation))
    try:
        yield
    finally:
        DATA_VALIDATION.reset(token)


# --- data validation ---------------------------------------------------------------------


class DataValidationError(ValueError):
    """A model's input or output does not match its forward function's type annotations."""

    def __init__(self, name: str, X: Any, Y: Any, errors: Sequence[Mapping[str, Any]] = ()) -> None:
        rows = []
        for error in errors:
            location = " -> ".join(str(part) for part in error.get("loc", ()))
            rows.append((location, str(error.get("msg", ""))))
        width = max((len(loc) for loc, _ in rows), default=0)
        table = "\n".join(f"{loc.ljust(width)}   {msg}" for loc, msg in rows)
        message = f"Data validation error in '{name}'\nX: {type(X)} Y: {type(Y)}\n\n{table}"
        super().__init__("\n\n" + message)
        self.name = name
        self.errors = list(errors)


def _types_namespace() -> dict[str, Any]:
    try:
        from . import types

        return vars(types)
    except ImportError:  # pragma: no cover - types.py is part of the package
        return {}


def _resolve(annotation: Any, globalns: Optional[dict[str, Any]]) -> Any:
    """Evaluate a string or ForwardRef annotation; None when it cannot be resolved (not checked)."""
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if not isinstance(annotation, str):
        return annotation
    for namespace in (globalns or {}, _types_namespace()):
        try:
            return eval(annotation, dict(namespace), {})  # noqa: S307 - annotations are code by design
        except Exception:
            continue
    return None


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")


def _check(value: Any, annotation: Any, loc: tuple, globalns: Optional[dict[str, Any]]) -> Optional[tuple]:
    """First mismatch between `value` and `annotation` as (location, message), or None."""
    annotation = _resolve(annotation, globalns)
    if annotation is None or annotation is Any or annotation is object or annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, TypeVar):
        if annotation.__bound__ is not None:
            return _check(value, annotation.__bound__, loc, globalns)
        if annotation.__constraints__:
            return _check(value, Union[annotation.__constraints__], loc, globalns)
        return None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Union or origin is _pytypes.UnionType:
        failures = [_check(value, arg, loc, globalns) for arg in args]
        if any(failure is None for failure in failures):
            return None
        # A single deeper failure is more useful than "is none of".
        deeper = [f for f in failures if f[0] != loc]
        if len(deeper) == 1:
            return deeper[0]
        return loc, f"{_summary(value)} is not {_type_name(annotation)}"
    if origin is typing.Literal:
        return None if value in args else (loc, f"{value!r} is not one of {list(args)}")
    if origin is not None:
        return _check_generic(value, origin, args, annotation, loc, globalns)
    if isinstance(annotation, type):
        # plait.types' array classes (Floats2d, ...) check ndim and dtype kind in `validate`.
        validate = getattr(annotation, "validate", None)
        if annotation.__module__ == "plait.types" and callable(validate):
            try:
                validate(value)
            except (ValueError, TypeError) as err:
                text = str(err)
                if not text.startswith(annotation.__qualname__):
                    text = f"{_summary(value)} is not {annotation.__qualname__}: {text}"
                return loc, text
            return None
        if annotation is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return None
        if not isinstance(value, annotation):
            return loc, f"{_summary(value)} is not {annotation.__qualname__}"
    return None


def _check_generic(value: Any, origin: Any, args: tuple, annotation: Any, loc: tuple, globalns: Any) -> Optional[tuple]:
    if origin is collections.abc.Callable:
        return None if callable(value) else (loc, f"{_summary(value)} is not callable")
    if origin is tuple:
        if not isinstance(value, tuple):
            return loc, f"{_summary(value)} is not a tuple"
        if len(args) == 2 and args[1] is Ellipsis:
            items = [(i, item, args[0]) for i, item in enumerate(value)]
        elif args == ((),):
            items = []
        elif args:
            if len(value) != len(args):
                return loc, f"tuple of length {len(value)} does not match {_type_name(annotation)}"
            items = [(i, item, arg) for i, (item, arg) in enumerate(zip(value, args))]
        else:
            items = []
        for i, item, arg in items:
            failure = _check(item, arg, loc + (i,), globalns)
            if failure:
                return failure
        return None
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        if not isinstance(value, collections.abc.Mapping):
            return loc, f"{_summary(value)} is not a mapping"
        key_type, value_type = args if len(args) == 2 else (Any, Any)
        for key, item in value.items():
            failure = _check(key, key_type, loc + (key,), globalns) or _check(item, value_type, loc + (key,), globalns)
            if failure:
                return failure
        return None
    if origin in (list, collections.abc.Sequence, collections.abc.MutableSequence, set, frozenset, collections.abc.Iterable):
        wanted = {list: list, set: set, frozenset: frozenset}.get(origin, collections.abc.Sequence)
        if origin is collections.abc.Iterable:
            wanted = collections.abc.Iterable
        if not isinstance(value, wanted) or isinstance(value, (str, bytes)):
            return loc, f"{_summary(value)} is not {_type_name(annotation)}"
        if args and not isinstance(value, (set, frozenset)) and isinstance(value, collections.abc.Sequence):
            for i, item in enumerate(value):
                failure = _check(item, args[0], loc + (i,), globalns)
                if failure:
                    return failure
        return None
    if isinstance(origin, type):
        return None if isinstance(value, origin) else (loc, f"{_summary(value)} is not {_type_name(annotation)}")
    return None


def _summary(value: Any) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{type(value).__name__}(shape={tuple(value.shape)}, dtype={value.dtype})"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def validate_type(value: Any, type_: Any) -> Optional[str]:
    """Check `value` against a type annotation; returns an error message, or None when it matches."""
    failure = _check(value, type_, (), None)
    if failure is None:
        return None
    loc, msg = failure
    where = "root" if not loc else ", ".join(str(part) for part in loc)
    return f"at {where}: {msg}"


def validate_fwd_input_output(name: str, func: Callable[[Any, Any, bool], Any], X: Any, Y: Any) -> None:
    """Check X and Y against the annotations of a forward function `func(model, X, is_train) -> (Y, backprop)`.

    Used by Model.initialize on sample data while data validation is on; raises DataValidationError.
    """
    signature = inspect.signature(func)
    params = list(signature.parameters.values())
    if len(params) != 3:
        listed = ", ".join(p.name for p in params)
        msg = f"Invalid forward function. Expected 3 arguments (model, X, is_train), got {len(params)} ({listed})"
        raise DataValidationError(name, X, Y, [{"msg": msg}])
    globalns = getattr(inspect.unwrap(func), "__globals__", None)
    errors = []
    x_type = params[1].annotation
    if X is not None and x_type is not inspect.Parameter.empty:
        # Only a sample of a long list is checked: sample data can be big and is homogeneous.
        sample = X[:5] if isinstance(X, list) else X
        failure = _check(sample, x_type, (), globalns)
        if failure:
            errors.append({"loc": ("X",), "msg": _failure_text(failure)})
    if Y is not None and signature.return_annotation is not inspect.Signature.empty:
        failure = _check((Y, lambda dY: dY), signature.return_annotation, (), globalns)
        if failure:
            errors.append({"loc": ("Y",), "msg": _failure_text(failure)})
    if errors:
        raise DataValidationError(name, X, Y, errors)


def _failure_text(failure: tuple) -> str:
    loc, msg = failure
    return f"at {'root' if not loc else ', '.join(str(part) for part in loc)}: {msg}"
