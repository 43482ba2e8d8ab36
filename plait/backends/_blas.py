"""Which BLAS computes NumpyOps' matrix products.

By default products go through numpy.matmul, i.e. the OpenBLAS numpy ships, except on AMD's
AVX-512 processors (Zen 4 and Zen 5), where float32 products go through plait's own copy of a
newer OpenBLAS, as below. On AMD Zen 4
processors that OpenBLAS picks its "SkylakeX" AVX-512 kernels, and Zen 4 runs them slower
than OpenBLAS's own AVX2 ("Haswell", also used for "Zen") kernels: single-threaded float32
products from 32x64x64 to 1024^3, in all three transpose layouts, ran at the same speed or up
to 2x faster with the AVX2 kernels of the newer OpenBLAS, mostly 8-50% faster (single noisy
readings as low as 0.7x around 1e6 multiply-adds did not repeat; bench/README.md, "Matrix
products"). float64 was mixed (0.8x-1.2x), so it stays on numpy's copy. numpy's copy cannot be
switched safely once loaded (and is shared with everything else in the process), so plait loads
its own OpenBLAS, the `scipy-openblas32` wheel (the build numpy and SciPy bundle), with the AVX2
kernels selected while it loads, at the first float32 product of at least LOAD_MIN_WORK
multiply-adds, and sends every float32 product through it from then on.

On Zen 5 (full-width AVX-512) the SkylakeX kernels are the right ones, but those of the newer
private copy ran the MLP's forward products (128x784 @ 784x512^T, 256x512 @ 512x512^T) 10-13%
faster than numpy's and no product slower (bench/blas_choice.py, bench/README.md), so `auto`
loads it there too, with OpenBLAS's own kernel choice.

On Zen 5 and on Intel's Emerald Rapids Xeons (OWN_KERNEL_CPUS: the processors where it was
measured), `auto` also sends float32 products of dense-layer shapes (fewer than 2**28
multiply-adds; not x @ y.T with an output of at most 16 x 64) to plait's own AVX-512 kernels
(_kernels_cpu/dense_gemm.pyx), which read the weights in place instead of packing them: on Zen 5
10-20% faster than the private OpenBLAS on an MLP's forward and input-gradient products, 2-6% on
its weight gradients; on Emerald Rapids 1.09x numpy's OpenBLAS at the median of the shapes the
rule takes (bench/README.md, "plait's own products"). Bigger products stay with the BLAS,
whose packed blocks and threads win there. With their AVX2 build (processors without AVX-512, or
`PLAIT_ISA=avx2`) `auto` sends them, on any processor, only the thin products among those: M at
most 64, K at most 128, or N at most 64 (16 for a transposed x; dense_gemm.wanted). The rule got
98.0% of the better of numpy's OpenBLAS with its AVX2 kernels and these over
dense_gemm_grid.py's 756 shapes (the BLAS alone 87.4%); at the MLP's larger shapes the BLAS wins
by up to 10%, and the MLP's training loop at width 512 was 4-8% slower with every product on the
AVX2 kernels (bench/README.md, "Panels for the copied operand"). Measured on an Emerald Rapids
Xeon with AVX2 forced; `bench/dense_gemm_grid.py --blas numpy` measures it on any processor. On
Zen 4 (THIN_OWN_KERNEL_CPUS) `auto` gives the AVX-512 build the same thin products only: the
grid favoured it at most dense-layer shapes (1.13x the private OpenBLAS at the median of the
shapes the full rule takes), but in an MLP's training loop only the thin products paid (1.03-1.23x
in 10 of the 12 cells of bench/matrix.py, 1.2x at batch 16; 0.93-0.95x with every product at
width 512, batch 256).

`PLAIT_BLAS` chooses: `auto` (default: as above), `numpy` (never load a second
BLAS, no own kernels), `openblas` (use the private OpenBLAS on any processor, float32 and float64,
with OpenBLAS's own kernel choice unless `OPENBLAS_CORETYPE` names one; no own kernels), `plait`
(as `auto`, and plait's own kernels for every float32 product they can take, on any processor
with AVX-512 or AVX2 and FMA). An `OPENBLAS_CORETYPE` the user set is never overridden (it does
not concern plait's own kernels). Thread limits reach the private copy like any other BLAS
(threadpoolctl finds it; `OPENBLAS_NUM_THREADS` is read when it loads); plait's own kernels run
on the calling thread, like every product of that size (_threads.SERIAL_WORK).
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Any, Dict, Optional, Tuple

VARIABLE = "PLAIT_BLAS"
MODES = ("auto", "numpy", "openblas", "plait")
_lock = threading.Lock()
_state: Dict[str, Any] = {"configured": False, "mode": None, "library": None, "corename": None,
                          "reason": "not configured yet", "float64": False, "own_kernels": "off"}
#: Whether NumpyOps offers float32 products to plait's own kernels first (_kernels_cpu/dense_gemm).
own_kernels = False
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
    return _amd_avx512_family(cpuinfo) == 25


def is_zen5(cpuinfo: Optional[str] = None) -> bool:
    """Whether this is an AMD family-1Ah processor with AVX-512 (Zen 5), from /proc/cpuinfo."""
    return _amd_avx512_family(cpuinfo) == 26


def avx512_cpu(cpuinfo: Optional[str] = None) -> Optional[Tuple[str, int, int]]:
    """(vendor_id, cpu family, model) of an x86 processor with AVX-512, from /proc/cpuinfo's first
    processor; None without AVX-512 or where /proc/cpuinfo cannot be read or parsed."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
                cpuinfo = f.read(1 << 16)
        except OSError:
            return None
    fields: Dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough
            continue
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    if "avx512f" not in fields.get("flags", "").split():
        return None
    try:
        return fields.get("vendor_id", ""), int(fields.get("cpu family", "")), int(fields.get("model", ""))
    except ValueError:
        return None


def _amd_avx512_family(cpuinfo: Optional[str] = None) -> Optional[int]:
    """The CPU family of an AMD processor with AVX-512 (from /proc/cpuinfo), else None."""
    found = avx512_cpu(cpuinfo)
    return found[1] if found is not None and found[0] == "AuthenticAMD" else None


#: The AVX-512 processors on which `auto` sends dense-layer float32 products to plait's own
#: kernels: (vendor, family, model or None for every model) -> name. Only processors where
#: bench/dense_gemm_grid.py and bench/blas_choice.py were run and the rule won (bench/README.md,
#: "plait's own products"); elsewhere `PLAIT_BLAS=plait` turns them on for every shape.
OWN_KERNEL_CPUS: Dict[Tuple[str, int, Optional[int]], str] = {
    ("AuthenticAMD", 26, None): "Zen 5",
    ("GenuineIntel", 6, 207): "Emerald Rapids",  # 5th-generation Xeon Scalable
}
#: The AVX-512 processors on which `auto` sends them only the thin products among those (the
#: bounds the AVX2 build's rule uses, dense_gemm mode 3): on Zen 4 the grid favoured the kernels
#: at most dense-layer shapes, but in a whole MLP training loop the thin products gained 3-23%,
#: the others nothing that repeated and 5-7% lost at width 512, batch 256 (bench/README.md,
#: "On Zen 4").
THIN_OWN_KERNEL_CPUS: Dict[Tuple[str, int, Optional[int]], str] = {
    ("AuthenticAMD", 25, None): "Zen 4",
}


def avx512_cpu_entry(table: Dict[Tuple[str, int, Optional[int]], Any], cpuinfo: Optional[str] = None) -> Any:
    """This AVX-512 processor's entry in a per-processor table keyed (vendor, family, model),
    where a model of None stands for the whole family; None if it has none or no AVX-512."""
    found = avx512_cpu(cpuinfo)
    if found is None:
        return None
    vendor, family, model = found
    return table.get((vendor, family, model), table.get((vendor, family, None)))


def own_kernels_cpu(cpuinfo: Optional[str] = None) -> Optional[str]:
    """The name of this processor if `auto` uses plait's own products on it (OWN_KERNEL_CPUS)."""
    return avx512_cpu_entry(OWN_KERNEL_CPUS, cpuinfo)


def thin_own_kernels_cpu(cpuinfo: Optional[str] = None) -> Optional[str]:
    """The name of this processor if `auto` gives plait's own AVX-512 products only the thin
    shapes on it (THIN_OWN_KERNEL_CPUS)."""
    return avx512_cpu_entry(THIN_OWN_KERNEL_CPUS, cpuinfo)


def _auto_choice() -> Optional[str]:
    """What `auto` loads the private OpenBLAS for on this processor: 'Zen 4' (with OpenBLAS's
    AVX2 kernels), 'Zen 5' (with its own choice, AVX-512), or None (numpy's copy suits it)."""
    family = _amd_avx512_family()
    return {25: "Zen 4", 26: "Zen 5"}.get(family) if family is not None else None


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


def _load_private(coretype: Optional[str], threads: Optional[int] = None) -> ctypes.CDLL:
    path = _private_library_path()
    # OpenBLAS reads these variables once, while it loads; the process's own values are
    # restored right after, so numpy's copy and anything loaded later are unaffected.
    settings = {}
    if coretype is not None:
        settings["OPENBLAS_CORETYPE"] = coretype
    if threads is not None:
        settings["OPENBLAS_NUM_THREADS"] = str(threads)
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        return ctypes.CDLL(path)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# True while `auto` has chosen the private OpenBLAS but not loaded it yet. It costs about 3 MB
# of resident memory, so it loads at the first float32 product of at least LOAD_MIN_WORK
# multiply-adds (NumpyOps.gemm calls load_pending): below that (~80 us of work) it would save
# a few microseconds a call. A process that only does small products never maps it; once
# loaded, it takes every float32 product.
pending = False
LOAD_MIN_WORK = 8_000_000


def worth_loading(x: Any, y: Any, trans1: bool, trans2: bool) -> bool:
    """Whether op(x) @ op(y) is big enough to load the private OpenBLAS for."""
    if getattr(x, "ndim", 0) != 2 or getattr(y, "ndim", 0) != 2:
        return False
    M = x.shape[1] if trans1 else x.shape[0]
    K = x.shape[0] if trans1 else x.shape[1]
    N = y.shape[0] if trans2 else y.shape[1]
    return M * N * K >= LOAD_MIN_WORK


def configure(mode: Optional[str] = None) -> Dict[str, Any]:
    """Choose the BLAS for `mode` (default: PLAIT_BLAS); returns info().

    An explicit mode loads and installs the private OpenBLAS now; the default (`auto`, from
    NumpyOps) only decides, and the library loads at the first float32 product.
    """
    global pending
    with _lock:
        if mode is None and _state["configured"]:
            return info()
        chosen = _mode() if mode is None else mode
        if chosen not in MODES:
            raise ValueError(f"plait BLAS mode {chosen!r} is unknown; use one of {', '.join(MODES)}.")
        from ._kernels_cpu import gemm as _gemm

        _gemm.set_routines(0, 0)
        pending = False
        _state.update(configured=True, mode=chosen, library=None, corename=None, float64=False)
        _set_own_kernels(chosen)
        user_coretype = os.environ.get("OPENBLAS_CORETYPE")
        if chosen == "numpy":
            _state["reason"] = f"{VARIABLE}=numpy"
            return info()
        if chosen == "auto":
            if _auto_choice() is None:
                _state["reason"] = "numpy's OpenBLAS already suits this processor"
                return info()
            if user_coretype:
                _state["reason"] = f"OPENBLAS_CORETYPE={user_coretype} set by the user; numpy's OpenBLAS obeys it"
                return info()
        if mode is None:
            pending = True
            _state["reason"] = (
                f"{_auto_choice() or chosen}: the private OpenBLAS loads at the first float32 product of "
                f">= {LOAD_MIN_WORK:,} multiply-adds"
            )
            return info()
        _install(chosen, user_coretype)
        return info()


def _set_own_kernels(chosen: str) -> None:
    """Switch plait's own float32 kernels for `chosen`: under `auto` for the shapes where they
    were measured to win, with their AVX-512 build on the processors of OWN_KERNEL_CPUS and with
    their AVX2 build on any (its rule takes thin products only), with their AVX-512 build for the
    thin products on the processors of THIN_OWN_KERNEL_CPUS; everywhere they can run under
    `plait`; off otherwise."""
    global own_kernels
    from ._kernels_cpu import dense_gemm

    level = dense_gemm.level()
    if chosen == "plait":
        mode = 2
    elif chosen == "auto" and (level == 3 or (level == 4 and own_kernels_cpu() is not None)):
        mode = 1
    elif chosen == "auto" and level == 4 and thin_own_kernels_cpu() is not None:
        mode = 3
    else:
        mode = 0
    if mode and not dense_gemm.available():
        mode = 0
    dense_gemm.set_mode(mode)
    own_kernels = mode > 0
    _state["own_kernels"] = ("off", "dense-layer shapes", "every float32 product",
                             "thin dense-layer shapes")[mode]


def load_pending() -> bool:
    """Load and install the private OpenBLAS that `auto` chose; True once its routines are in."""
    global pending
    with _lock:
        if not pending:
            return _state["library"] is not None
        pending = False
        _install(_state["mode"], os.environ.get("OPENBLAS_CORETYPE"))
        return _state["library"] is not None


def _numpy_blas_threads() -> Optional[int]:
    from . import _threads

    planned = _threads.plan_threads()
    preset = _threads._state.get("blas_env")
    if preset is not None and preset <= planned and "threadpoolctl" not in sys.modules:
        # numpy's BLAS read it when it loaded, and no threadpoolctl block can have changed it
        # since (threadpoolctl was never imported): no need to import it just to ask.
        return preset
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    counts = [lib.get("num_threads") for lib in threadpool_info() if lib.get("user_api") == "blas"]
    counts = [n for n in counts if isinstance(n, int) and n > 0]
    return min(counts) if counts else None


def _install(chosen: str, user_coretype: Optional[str]) -> None:
    global _handle
    from ._kernels_cpu import gemm as _gemm

    cpu = _auto_choice() if chosen == "auto" else None
    if _handle is None:
        # auto: OpenBLAS's AVX2 kernels on Zen 4, its own choice on Zen 5 (bench/README.md).
        coretype = "Haswell" if (cpu == "Zen 4" and not user_coretype) else None
        # Loaded late, it starts with the thread count the BLAS already in the process runs
        # with (the user's limit, a threadpoolctl block, or plait's own share of the cores).
        threads = _numpy_blas_threads()
        try:
            _handle = _load_private(coretype, threads)
        except (ImportError, OSError) as err:
            _state["reason"] = (
                f"the private OpenBLAS could not be loaded ({type(err).__name__}: {err}); "
                f"products go through numpy. Install it with: pip install scipy-openblas32"
            )
            return
    try:
        sgemm = ctypes.cast(_handle.scipy_cblas_sgemm, ctypes.c_void_p).value
        dgemm = ctypes.cast(_handle.scipy_cblas_dgemm, ctypes.c_void_p).value
        get_corename = _handle.scipy_openblas_get_corename
    except AttributeError as err:
        _state["reason"] = f"the private OpenBLAS lacks a routine ({err}); products go through numpy"
        return
    from . import _threads

    _threads.add_serial_library(_handle)
    get_corename.restype = ctypes.c_char_p
    corename = (get_corename() or b"").decode("ascii", "replace")
    # `auto` only takes what was measured to win: float32 products.
    use_f64 = chosen == "openblas"
    _gemm.set_routines(sgemm, dgemm if use_f64 else 0)
    _state.update(library=_handle._name, corename=corename, float64=use_f64,
                  reason=(f"{cpu}: the private OpenBLAS ({corename} kernels) for float32 products"
                          if chosen == "auto" else f"{VARIABLE}=openblas"))


def info() -> Dict[str, Any]:
    """What computes NumpyOps' products: mode, private library path and kernel, and why."""
    return {k: _state[k] for k in ("mode", "library", "corename", "float64", "reason", "own_kernels")}
