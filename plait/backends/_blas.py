"""Which BLAS computes NumpyOps' matrix products.

By default products go through numpy.matmul, i.e. the OpenBLAS numpy ships. On AMD Zen 4
processors that OpenBLAS picks its "SkylakeX" AVX-512 kernels, and Zen 4 runs them slower
than OpenBLAS's own AVX2 ("Haswell", also used for "Zen") kernels: single-threaded float32
products ran 0-100% faster (mostly 8-50%) with the AVX2 kernels of the newer OpenBLAS, from
32x64x64 to 1024^3, in all three transpose layouts (bench/README.md, "Matrix products").
float64 was mixed (0.8x-1.2x), so it stays on numpy's copy. numpy's copy cannot be switched
safely once loaded (and is shared with everything else in the process), so plait loads its own
OpenBLAS, the `scipy-openblas32` wheel (the build numpy and SciPy bundle), with the AVX2
kernels selected while it loads, and sends float32 products through it.

`PLAIT_BLAS` chooses: `auto` (default: as above, on Zen 4 only), `numpy` (never load a second
BLAS), `openblas` (use the private OpenBLAS on any processor, float32 and float64, with
OpenBLAS's own kernel choice unless `OPENBLAS_CORETYPE` names one). An `OPENBLAS_CORETYPE` the
user set is never overridden. Thread limits reach the private copy like any other BLAS
(threadpoolctl finds it; `OPENBLAS_NUM_THREADS` is read when it loads).
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Dict, Optional

VARIABLE = "PLAIT_BLAS"
MODES = ("auto", "numpy", "openblas")
_lock = threading.Lock()
_state: Dict[str, Any] = {"configured": False, "mode": None, "library": None, "corename": None,
                          "reason": "not configured yet", "float64": False}
_handle: Optional[ctypes.CDLL] = None


def _mode() -> str:
    raw = os.environ.get(VARIABLE, "auto").strip().lower() or "auto"
    if raw not in MODES:
        raise ValueError(
            f"{VARIABLE}={os.environ.get(VARIABLE)!r} is not a BLAS choice plait knows. "
            f"Use one of {', '.join(MODES)} (or unset it for 'auto')."
        )
    return raw


def is_zen4(cpuinfo: Optional[str] = None) -> bool:
    """Whether this is an AMD family-19h processor with AVX-512 (Zen 4), from /proc/cpuinfo."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
                cpuinfo = f.read(1 << 16)
        except OSError:
            return False
    fields: Dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough
            continue
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return (
        fields.get("vendor_id") == "AuthenticAMD"
        and fields.get("cpu family") == "25"
        and "avx512f" in fields.get("flags", "").split()
    )


def _private_library_path() -> str:
    # NOTE: found without importing scipy_openblas32: its __init__ loads the library with
    # RTLD_GLOBAL (before we could pick the kernels), and its symbols would then shadow those of
    # SciPy's own bundled OpenBLAS, which exports the same names.
    import glob
    import importlib.util

    spec = importlib.util.find_spec("scipy_openblas32")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the scipy-openblas32 package is not installed")
    for folder in spec.submodule_search_locations:
        found = sorted(glob.glob(os.path.join(folder, "lib", "libscipy_openblas*.so*")))
        found += sorted(glob.glob(os.path.join(folder, "lib", "libscipy_openblas*.dylib")))
        if found:
            return found[0]
    raise ImportError(f"scipy-openblas32 is installed but holds no library under {spec.submodule_search_locations}")


def _load_private(coretype: Optional[str]) -> ctypes.CDLL:
    path = _private_library_path()
    if coretype is None:
        return ctypes.CDLL(path)
    # OpenBLAS reads OPENBLAS_CORETYPE once, while it loads; the process's own value (none:
    # checked by the caller) is restored right after, so numpy's copy or a later load is unaffected.
    os.environ["OPENBLAS_CORETYPE"] = coretype
    try:
        return ctypes.CDLL(path)
    finally:
        del os.environ["OPENBLAS_CORETYPE"]


def configure(mode: Optional[str] = None) -> Dict[str, Any]:
    """Load (once) and install the BLAS routines for `mode` (default: PLAIT_BLAS); returns info()."""
    global _handle
    with _lock:
        if mode is None and _state["configured"]:
            return info()
        chosen = _mode() if mode is None else mode
        if chosen not in MODES:
            raise ValueError(f"plait BLAS mode {chosen!r} is unknown; use one of {', '.join(MODES)}.")
        from ._kernels_cpu import gemm as _gemm

        _gemm.set_routines(0, 0)
        _state.update(configured=True, mode=chosen, library=None, corename=None, float64=False)
        user_coretype = os.environ.get("OPENBLAS_CORETYPE")
        if chosen == "numpy":
            _state["reason"] = f"{VARIABLE}=numpy"
            return info()
        if chosen == "auto":
            if not is_zen4():
                _state["reason"] = "numpy's OpenBLAS already suits this processor"
                return info()
            if user_coretype:
                _state["reason"] = f"OPENBLAS_CORETYPE={user_coretype} set by the user; numpy's OpenBLAS obeys it"
                return info()
        if _handle is None:
            coretype = None if (user_coretype or chosen == "openblas") else "Haswell"
            try:
                _handle = _load_private(coretype)
            except (ImportError, OSError) as err:
                _state["reason"] = (
                    f"the private OpenBLAS could not be loaded ({type(err).__name__}: {err}); "
                    f"products go through numpy. Install it with: pip install scipy-openblas32"
                )
                return info()
        try:
            sgemm = ctypes.cast(_handle.scipy_cblas_sgemm, ctypes.c_void_p).value
            dgemm = ctypes.cast(_handle.scipy_cblas_dgemm, ctypes.c_void_p).value
            get_corename = _handle.scipy_openblas_get_corename
        except AttributeError as err:
            _state["reason"] = f"the private OpenBLAS lacks a routine ({err}); products go through numpy"
            return info()
        get_corename.restype = ctypes.c_char_p
        corename = (get_corename() or b"").decode("ascii", "replace")
        # `auto` only takes what was measured to win: float32 products.
        use_f64 = chosen == "openblas"
        _gemm.set_routines(sgemm, dgemm if use_f64 else 0)
        _state.update(library=_handle._name, corename=corename, float64=use_f64,
                      reason=("Zen 4: OpenBLAS's AVX2 kernels for float32 products"
                              if chosen == "auto" else f"{VARIABLE}=openblas"))
        return info()


def info() -> Dict[str, Any]:
    """What computes NumpyOps' products: mode, private library path and kernel, and why."""
    return {k: _state[k] for k in ("mode", "library", "corename", "float64", "reason")}
