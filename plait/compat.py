"""Optional dependencies (CuPy, PyTorch, TensorFlow, MXNet, h5py, os_signpost), resolved lazily.

The names match Thinc 8.3's `thinc.compat`, but nothing heavy is imported when this module
is: each name is computed on first access through the module-level `__getattr__` (PEP 562),
then cached as a plain module global so later lookups cost nothing.

Off switches: set `PLAIT_NO_CUPY=1` or `PLAIT_NO_TORCH=1` in the environment (before first
access) to make plait behave as if that package were not installed.

TensorFlow and MXNet stay off until `enable_tensorflow()` / `enable_mxnet()` is called, as in
Thinc 8.3.
"""
from __future__ import annotations

import importlib
import os
import sys
import threading
from typing import Any, Callable

__all__ = [
    "cupy",
    "cupyx",
    "cublas",
    "cupy_version",
    "cupy_from_dlpack",
    "has_cupy",
    "has_cupy_gpu",
    "has_gpu",
    "torch",
    "torch_version",
    "has_torch",
    "has_torch_cuda_gpu",
    "has_torch_mps",
    "has_torch_mps_gpu",
    "has_torch_gpu",
    "has_torch_amp",
    "tensorflow",
    "has_tensorflow",
    "has_tensorflow_gpu",
    "enable_tensorflow",
    "mxnet",
    "has_mxnet",
    "enable_mxnet",
    "h5py",
    "os_signpost",
    "has_os_signpost",
]

_TRUE_STRINGS = {"1", "true", "yes", "on"}

# TensorFlow and MXNet are opt-in (see enable_tensorflow / enable_mxnet), so these are
# ordinary globals from the start rather than lazily computed ones.
tensorflow: Any = None
has_tensorflow = False
has_tensorflow_gpu = False
mxnet: Any = None
has_mxnet = False

# Loading a group sets several globals at once; the lock keeps another thread from seeing
# half of a group.
_load_lock = threading.RLock()


def _switched_off(package: str) -> bool:
    """Whether the environment variable PLAIT_NO_<PACKAGE> asks to ignore `package`."""
    return os.environ.get(f"PLAIT_NO_{package.upper()}", "").strip().lower() in _TRUE_STRINGS


def _version(text: str) -> Any:
    """A comparable version object: packaging's Version when available, else an int tuple."""
    try:
        from packaging.version import Version
    except ImportError:  # pragma: no cover - packaging is nearly always installed
        parts = []
        for piece in text.split("+")[0].split("."):
            digits = "".join(ch for ch in piece if ch.isdigit())
            parts.append(int(digits) if digits else 0)
        return tuple(parts)
    try:
        return Version(text)
    except Exception:
        return Version("0.0.0")


def _load_cupy() -> dict[str, Any]:
    values: dict[str, Any] = {
        "cupy": None,
        "cupyx": None,
        "cublas": None,
        "cupy_version": None,
        "cupy_from_dlpack": None,
        "has_cupy": False,
        "has_cupy_gpu": False,
    }
    if _switched_off("cupy"):
        values["cupy_version"] = _version("0.0.0")
        return values
    try:
        cp = importlib.import_module("cupy")
        importlib.import_module("cupy.cublas")
        cpx = importlib.import_module("cupyx")
    except Exception:
        # A broken CUDA install surfaces here as all sorts of errors, not only ImportError;
        # any of them means "no usable CuPy".
        values["cupy_version"] = _version("0.0.0")
        return values
    values.update(
        cupy=cp,
        cupyx=cpx,
        cublas=cp.cublas,
        cupy_version=_version(getattr(cp, "__version__", "0.0.0")),
        cupy_from_dlpack=getattr(cp, "from_dlpack", None) or getattr(cp, "fromDlpack", None),
        has_cupy=True,
    )
    try:
        values["has_cupy_gpu"] = cp.cuda.runtime.getDeviceCount() > 0
    except Exception:
        values["has_cupy_gpu"] = False
    return values


def _load_torch() -> dict[str, Any]:
    values: dict[str, Any] = {
        "torch": None,
        "torch_version": None,
        "has_torch": False,
        "has_torch_cuda_gpu": False,
        "has_torch_mps": False,
        "has_torch_mps_gpu": False,
        "has_torch_gpu": False,
        "has_torch_amp": False,
    }
    if _switched_off("torch"):
        values["torch_version"] = _version("0.0.0")
        return values
    try:
        tc = importlib.import_module("torch")
        importlib.import_module("torch.utils.dlpack")
    except Exception:
        values["torch_version"] = _version("0.0.0")
        return values
    version = _version(str(tc.__version__))
    try:
        cuda_gpu = tc.cuda.device_count() != 0
    except Exception:
        cuda_gpu = False
    mps_backend = getattr(tc.backends, "mps", None)
    mps_built = bool(mps_backend is not None and mps_backend.is_built())
    mps_gpu = bool(mps_built and mps_backend.is_available())
    values.update(
        torch=tc,
        torch_version=version,
        has_torch=True,
        has_torch_cuda_gpu=cuda_gpu,
        has_torch_mps=mps_built,
        has_torch_mps_gpu=mps_gpu,
        has_torch_gpu=cuda_gpu,
        has_torch_amp=_torch_has_amp(tc, version),
    )
    return values


def _torch_has_amp(tc: Any, version: Any) -> bool:
    if version < _version("1.9.0"):
        return False
    # The helper moved from torch.cuda.amp.common to torch.amp.common in newer releases.
    for path in ("torch.amp.common", "torch.cuda.amp.common"):
        try:
            module = importlib.import_module(path)
        except Exception:
            continue
        check = getattr(module, "amp_definitely_not_available", None)
        if check is not None:
            try:
                return not check()
            except Exception:
                return False
    return False


def _load_gpu() -> dict[str, Any]:
    has_gpu = bool(_get("has_cupy_gpu"))
    # Only macOS has Metal; asking torch elsewhere would import it for a certain False.
    if not has_gpu and sys.platform == "darwin":
        has_gpu = bool(_get("has_torch_mps_gpu"))
    return {"has_gpu": has_gpu}


def _load_h5py() -> dict[str, Any]:
    try:
        return {"h5py": importlib.import_module("h5py")}
    except Exception:
        return {"h5py": None}


def _load_os_signpost() -> dict[str, Any]:
    try:
        module = importlib.import_module("os_signpost")
    except Exception:
        return {"os_signpost": None, "has_os_signpost": False}
    return {"os_signpost": module, "has_os_signpost": True}


_LOADERS: dict[str, Callable[[], dict[str, Any]]] = {}
for _loader, _names in (
    (_load_cupy, ("cupy", "cupyx", "cublas", "cupy_version", "cupy_from_dlpack", "has_cupy", "has_cupy_gpu")),
    (
        _load_torch,
        (
            "torch",
            "torch_version",
            "has_torch",
            "has_torch_cuda_gpu",
            "has_torch_mps",
            "has_torch_mps_gpu",
            "has_torch_gpu",
            "has_torch_amp",
        ),
    ),
    (_load_gpu, ("has_gpu",)),
    (_load_h5py, ("h5py",)),
    (_load_os_signpost, ("os_signpost", "has_os_signpost")),
):
    for _name in _names:
        _LOADERS[_name] = _loader
del _loader, _names, _name


def _get(name: str) -> Any:
    namespace = globals()
    if name in namespace:
        return namespace[name]
    with _load_lock:
        if name not in namespace:
            namespace.update(_LOADERS[name]())
    return namespace[name]


def __getattr__(name: str) -> Any:
    if name in _LOADERS:
        return _get(name)
    raise AttributeError(f"module 'plait.compat' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LOADERS))


def _reset() -> None:
    """Forget every lazily computed name so the next access probes again (for tests)."""
    namespace = globals()
    with _load_lock:
        for name in _LOADERS:
            namespace.pop(name, None)


def enable_tensorflow() -> None:
    """Import TensorFlow and turn on plait's TensorFlow support (xp2tensorflow, the shims)."""
    global tensorflow, has_tensorflow, has_tensorflow_gpu
    try:
        tf = importlib.import_module("tensorflow")
        importlib.import_module("tensorflow.experimental.dlpack")
    except ImportError as err:
        raise ImportError(
            "enable_tensorflow() could not import tensorflow: "
            f"{err}. Install it with `pip install 'plait[tensorflow]'` (TensorFlow 2.18 or newer, built for numpy 2)."
        ) from err
    tensorflow = tf
    has_tensorflow = True
    has_tensorflow_gpu = len(tf.config.get_visible_devices("GPU")) > 0


def enable_mxnet() -> None:
    """Import MXNet and turn on plait's MXNet support (xp2mxnet, the shims)."""
    global mxnet, has_mxnet
    try:
        mx = importlib.import_module("mxnet")
    except ImportError as err:
        raise ImportError(
            f"enable_mxnet() could not import mxnet: {err}. Install it with `pip install mxnet`."
        ) from err
    mxnet = mx
    has_mxnet = True
