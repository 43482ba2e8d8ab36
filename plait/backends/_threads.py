"""How many threads plait's CPU work uses: the user's limit, else a share of the free cores.

A user's setting always wins: `PLAIT_NUM_THREADS`, or any of the usual variables
(`OMP_NUM_THREADS`, `OPENBLAS_NUM_THREADS`, `MKL_NUM_THREADS`, `BLIS_NUM_THREADS`), or
`set_num_threads(n)`, or a `threadpoolctl.threadpool_limits` block around the work. Without one,
each plait process claims cores through lock files (one per core, `flock`ed, so the kernel
releases a claim when its process ends, however it ends), takes as many threads as it holds
claims (at least one), and leaves the rest to the next plait process: two trainings started on
one machine split it instead of each starting a thread per core and fighting over them. Cores
that other programs keep busy (the 1-minute load average, rounded) are not claimed either.

The OpenMP thread count of the compiled kernels is fixed through `OMP_NUM_THREADS` before the
OpenMP runtime loads (`plan_threads`, run by `plait.backends` on import); the BLAS's is applied
through threadpoolctl when the first NumpyOps is created (`apply_blas_limit`), since numpy has
usually loaded its BLAS long before plait.

Within that count, a matrix product of fewer than SERIAL_WORK multiply-adds runs on the calling
thread alone (`serial_blas`, around NumpyOps.gemm): after a threaded product OpenBLAS's workers
spin for up to about 0.1 s (2**28 cycles) waiting for the next one, burning a core each, which a
product of a few milliseconds never pays back. spaCy's parsers make thousands of small products
a second and its tok2vec and parser hundreds of medium ones; with numpy's OpenBLAS on 2 threads,
beam training took 3.8x the CPU time of one thread and ran no faster
(bench/spacy_train.py --threads 0).
"""
from __future__ import annotations

import ctypes
import errno
import os
import tempfile
from pathlib import Path
from typing import List, Optional

# Variables through which a user states a thread count (the first valid one counts).
USER_VARIABLES = (
    "PLAIT_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
)
SLOT_DIR_VARIABLE = "PLAIT_CPU_SLOT_DIR"
# The claims are off when this is "0" (e.g. a scheduler that already pins each job's cores).
CLAIM_VARIABLE = "PLAIT_CLAIM_CPUS"

_state = {"planned": False, "threads": None, "source": None, "blas_applied": False}
_slot_files: List[int] = []


def _user_threads() -> Optional[tuple]:
    for name in USER_VARIABLES:
        raw = os.environ.get(name, "").strip()
        if not raw:
            continue
        # OMP_NUM_THREADS may be a list ("4,2" for nested levels): the first level counts.
        head = raw.split(",")[0].strip()
        if head.isdigit() and int(head) >= 1:
            return int(head), name
    return None


def _int_variable(names: tuple) -> Optional[int]:
    """The first of `names` set to a positive int (its first comma-separated level), else None."""
    for name in names:
        raw = os.environ.get(name, "").strip()
        if raw:
            head = raw.split(",")[0].strip()
            return int(head) if head.isdigit() and int(head) >= 1 else None
    return None


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def slot_dir() -> Path:
    """Where the per-core lock files live (PLAIT_CPU_SLOT_DIR, else a shared temp folder)."""
    custom = os.environ.get(SLOT_DIR_VARIABLE)
    return Path(custom) if custom else Path(tempfile.gettempdir()) / "plait-cpu-slots"


def _idle_cores(n_cores: int) -> int:
    """How many of this process's n_cores the rest of the machine leaves idle (1-minute load).

    Cores busy with other programs are not free either: a BLAS worker put on one waits for the
    program there, and the thread waiting for that worker spins. On a 2-core machine with a load
    of 2, numpy's OpenBLAS on 2 threads ran every product from 26M to 8.6G multiply-adds slower
    than on one, wall clock included.
    """
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return n_cores
    machine = max(os.cpu_count() or n_cores, n_cores)
    return max(0, min(n_cores, machine - int(load + 0.5)))


def _claim_slots(n_cores: int, limit: Optional[int] = None) -> int:
    """Lock free slot files (of n_cores, at most `limit`); returns how many this process holds."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no claims, every process takes all cores
        return n_cores
    folder = slot_dir()
    try:
        folder.mkdir(mode=0o777, parents=True, exist_ok=True)
        # Other users' plait processes share the folder (sticky, like /tmp itself).
        if folder.stat().st_uid == os.getuid():
            os.chmod(folder, 0o1777)
    except OSError:
        return n_cores
    held = 0
    for k in range(n_cores):
        if limit is not None and held >= limit:
            break
        path = folder / f"core-{k}.lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                continue
            raise
        os.set_inheritable(fd, False)
        _slot_files.append(fd)
        held += 1
    return held


def release_slots() -> None:
    """Give back this process's core claims (closing the files drops the locks)."""
    while _slot_files:
        try:
            os.close(_slot_files.pop())
        except OSError:
            pass


def plan_threads() -> int:
    """Decide the thread count once per process and export it to OpenMP; returns it."""
    if _state["planned"]:
        return int(_state["threads"])
    # What OpenBLAS itself reads when it loads (most specific first), as the process got it:
    # taken before plait sets OMP_NUM_THREADS below, which a BLAS loaded earlier never saw.
    _state["blas_env"] = _int_variable(("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"))
    user = _user_threads()
    if user is not None:
        threads, source = user
    elif os.environ.get(CLAIM_VARIABLE, "1").strip() == "0":
        threads, source = available_cores(), "all cores (PLAIT_CLAIM_CPUS=0)"
    else:
        cores = available_cores()
        idle = _idle_cores(cores)
        held = _claim_slots(cores, idle)
        threads, source = max(1, held), f"{held} of {cores} cores claimed"
        if idle < cores:
            source += f" ({cores - idle} busy, by the load average)"
    # The kernels' OpenMP runtime follows the same count (PLAIT_NUM_THREADS=1 or
    # OPENBLAS_NUM_THREADS=1 alone must not leave it a thread per core); an OMP_NUM_THREADS
    # the user set is never touched.
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    _state.update(planned=True, threads=threads, source=source)
    return threads


def apply_blas_limit() -> None:
    """Hold the already-loaded BLAS to at most the planned count (once per process).

    It only ever lowers the BLAS's own count, so a lower limit the user set beforehand
    (threadpoolctl, or a variable the BLAS read when it loaded) stays as it is.
    """
    if _state["blas_applied"]:
        return
    _state["blas_applied"] = True
    n = plan_threads()
    # A BLAS that read a count <= n from the environment is held already; skipping the check
    # spares the threadpoolctl import (about 0.5 MB) in every such process.
    preset = _state.get("blas_env")
    if preset is not None and preset <= n:
        return
    _limit_blas(n, only_lower=True)


def _limit_blas(n: int, only_lower: bool = False) -> None:
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:  # pragma: no cover - a dependency, but never fatal
        return
    if only_lower:
        current = [lib.get("num_threads", 0) for lib in threadpool_info() if lib.get("user_api") == "blas"]
        if not current or max(current) <= n:
            return
    threadpool_limits(limits=n, user_api="blas")


# Products below this many multiply-adds run single-threaded: about 18 ms on one AVX-512 core,
# 33 ms on an AVX2 one. After a threaded product OpenBLAS's workers spin until the next one (up to
# about 0.1 s), so with T threads the process burns about T times the wall time of the gap after
# each product, whatever the product saved. Measured (bench/README.md, "Threads and the BLAS"):
# 2 threads made a 1.4G product 11% faster and cost 77% more CPU when other work of 20 ms
# followed it, and 4.3G 28% faster for 43% more; spaCy's beam pipeline (products of 75M-1.4G,
# far apart) used 1.43x the CPU of one thread for the same wall time under the former limit of
# 64M. Above the limit the product dominates its gap and the spin is paid back in wall time.
SERIAL_WORK = 2_000_000_000
_OPENBLAS_AFFIXES = [(p, s) for p in ("", "scipy_") for s in ("", "64_", "_64")]


class _OpenBLAS:
    """One loaded OpenBLAS's own thread-count functions, called through ctypes (~0.3 us)."""

    def __init__(self, dynlib) -> None:
        self.get = self.set = None
        for prefix, suffix in _OPENBLAS_AFFIXES:
            get = getattr(dynlib, f"{prefix}openblas_get_num_threads{suffix}", None)
            set_ = getattr(dynlib, f"{prefix}openblas_set_num_threads{suffix}", None)
            if get is not None and set_ is not None:
                get.restype = ctypes.c_int
                get.argtypes = []
                set_.restype = None
                set_.argtypes = [ctypes.c_int]
                self.get, self.set = get, set_
                return


# The BLAS libraries whose products plait starts: numpy's OpenBLAS (numpy.matmul) and the
# private one of _blas.py once loaded. None until probed; [] where none can be switched.
_serial_libs: Optional[list] = None


def _numpy_openblas():
    """numpy's own OpenBLAS as a ctypes library, or None (another BLAS, or not found)."""
    import numpy

    return _openblas_of(numpy)


def _openblas_of(package):
    """The OpenBLAS a package ships (numpy's, SciPy's), loaded already, as a ctypes library."""
    root = os.path.realpath(os.path.dirname(package.__file__))
    # A wheel keeps it in <package>.libs: found there without importing threadpoolctl (whose
    # import a process that set OPENBLAS_NUM_THREADS itself should not pay for).
    import glob

    bundled = sorted(glob.glob(os.path.join(root + ".libs", "lib*openblas*.so*")))
    no_load = getattr(os, "RTLD_NOLOAD", 0)
    if len(bundled) == 1 and no_load:
        try:
            # RTLD_NOLOAD: only the handle of the copy already in the process, never a new one.
            return ctypes.CDLL(bundled[0], mode=no_load | os.RTLD_LOCAL)
        except OSError:
            pass  # not loaded under that name: ask threadpoolctl
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - a dependency
        return None
    for lib in threadpool_info():
        path = os.path.realpath(lib.get("filepath") or "")
        if lib.get("internal_api") == "openblas" and (path.startswith(root + os.sep)
                                                        or path.startswith(root + ".libs" + os.sep)):
            try:
                return ctypes.CDLL(path)  # already loaded: this only finds its handle
            except OSError:
                return None
    return None


def add_serial_library(dynlib) -> None:
    """Also hold this OpenBLAS (a ctypes library) to one thread for small products."""
    global _serial_libs
    if _serial_libs is None:
        _probe_serial_libs()
    lib = _OpenBLAS(dynlib)
    if lib.get is not None and all(known.get is not lib.get and
                                   ctypes.cast(known.get, ctypes.c_void_p).value != ctypes.cast(lib.get, ctypes.c_void_p).value
                                   for known in _serial_libs):
        _serial_libs.append(lib)


def _probe_serial_libs() -> None:
    global _serial_libs
    _serial_libs = []
    found = _numpy_openblas()
    if found is not None:
        lib = _OpenBLAS(found)
        if lib.get is not None:
            _serial_libs.append(lib)


def serial_guard_addresses(private=None, table=None) -> tuple:
    """Addresses of the thread-count functions (get, set) of `table` and of `private`.

    For compiled code that makes products itself (plait.backends.cblas): `table` is the
    OpenBLAS behind its routines (numpy's or SciPy's), `private` plait's own, both ctypes
    libraries or None. It holds the BLAS to one thread for a product below SERIAL_WORK, as
    `serial_blas` does. Zeros where unknown.
    """
    found = []
    for dynlib in (table, private):
        lib = _OpenBLAS(dynlib) if dynlib is not None else None
        if lib is None or lib.get is None:
            found += [0, 0]
        else:
            found += [ctypes.cast(lib.get, ctypes.c_void_p).value or 0,
                      ctypes.cast(lib.set, ctypes.c_void_p).value or 0]
    return tuple(found)


def serial_blas(M: int, K: int, N: int) -> Optional[list]:
    """Before an (M, K) @ (K, N) product: hold the BLAS to one thread if the product is small.

    Returns what `end_serial_blas` restores afterwards, or None (nothing changed): plait runs
    one thread anyway, the product is big enough for threads, or no BLAS can be switched.
    """
    threads = _state["threads"] if _state["planned"] else plan_threads()
    if threads <= 1 or M * K * N >= SERIAL_WORK:
        return None
    return hold_serial_blas()


def hold_serial_blas() -> Optional[list]:
    """Hold the BLAS libraries plait calls to one thread, whatever the product's size (for
    compiled kernels that call the BLAS from their own threads); `end_serial_blas` gives the
    counts back. None where nothing had to change."""
    if _serial_libs is None:
        _probe_serial_libs()
    changed = None
    for lib in _serial_libs:
        n = lib.get()
        if n > 1:
            lib.set(1)
            if changed is None:
                changed = []
            changed.append((lib, n))
    return changed


def end_serial_blas(changed: Optional[list]) -> None:
    """Give the BLAS libraries back the thread counts `serial_blas` took from them."""
    if changed:
        for lib, n in changed:
            lib.set(n)


def set_num_threads(n: int) -> None:
    """Use n threads for plait's BLAS calls and compiled kernels from now on (drops core claims)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: 'n' must be an int >= 1, got {n!r}.")
    release_slots()
    _state.update(planned=True, threads=n, source="set_num_threads", blas_applied=True)
    _limit_blas(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        return
    threadpool_limits(limits=n, user_api="openmp")


def get_num_threads() -> int:
    """The thread count plait planned (the user's, or its share of the cores)."""
    return plan_threads()


def thread_source() -> str:
    """Where the count came from: a variable's name, set_num_threads, or the cores claimed."""
    plan_threads()
    return str(_state["source"])
