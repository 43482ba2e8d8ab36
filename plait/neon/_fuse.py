"""Fused execution of neon op-trees on the CPU: one compiled, blocked, multi-threaded pass.

`execute(tree, out, rng=None)` evaluates a lazy neon expression (nested `(op_dict, left, right)`
tuples over 2-D numpy arrays and scalars) straight into `out`. Each tree *signature* (the ops,
each leaf's dtype, broadcast pattern and contiguity, out's dtype and layout) becomes C source,
compiled once with the system compiler, loaded with ctypes and cached on disk and in memory.
The values themselves (scalar constants, sizes, strides, pointers, the random seed) are
arguments, so a training loop whose learning rate changes still hits the cache.

How a tree runs:

* Reductions (`sum max min argmax argmin`, axis 0, 1 or None) are split off as neon's GPU
  backend did: each reduction node is its own pass into a small temporary of the reduced shape
  ((1, n), (m, 1) or (1, 1)), innermost first, and the rest of the tree reads that temporary as
  a broadcast operand. A reduction at the root writes into `out` directly. So
  `exp(x - max(x, axis=0))` is two passes over x, never a temporary of x's size.
* The elementwise pass walks `out` in tiles of about 16K elements, rows of a tile outermost and
  the contiguous axis innermost (the problem is transposed when `out` is column-major), OpenMP
  over tiles, every intermediate in registers.
* `rand` is a counter-based generator: element (i, j) of stream k gets mix(seed_k + index), so
  the values depend on the seed (drawn from `rng`) and the element, never on the thread count.

* The per-call work (walking the tree into its key, shape and overlap checks, packing the
  arguments, the call without the GIL) is a small CPython extension, `_fuse_rt`, built once
  beside the kernels; without it the same steps run in Python (about 4x the overhead).
* Accuracy: float32 exp, exp2, log, log2, sig within 3 ulps and tanh within 5 ulps of the
  correctly rounded result over the whole float32 range (numpy's float32: 1-4 ulps), with
  numpy's infinities, NaNs and zeros; sums accumulate in double, in an order that depends on
  the shape only (never the thread count). float16 operands load as float32, a float16 out is
  rounded once; any float64 operand makes the whole tree compute in double.

`execute` returns False, computing nothing, for what it does not fuse (`dot`, `onehot`,
`transpose` of an expression, argmax/argmin over axis None, integer, bool or object dtypes,
arrays that are not 2-D, empty arrays, byte-swapped arrays, no C compiler); the caller then
evaluates with numpy. Operands that overlap `out` (other than as `out`'s own elements) are read
from a copy, so `x[:] = x - x[0:1]` behaves as numpy's assignment.

Environment: PLAIT_CACHE_DIR (kernels go to $PLAIT_CACHE_DIR/neon, else ~/.cache/plait/neon),
PLAIT_NEON_CC (the compiler, else $CC, cc, gcc, clang), PLAIT_NEON_FUSE_RT=0 (no C runtime, the
Python path), and plait's thread count (plait.backends.get_num_threads: PLAIT_NUM_THREADS,
OMP_NUM_THREADS, set_num_threads) for the OpenMP teams; passes under 32K elements run on the
calling thread.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import logging
import warnings
import weakref
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import _fuse_c as C

__all__ = ["execute", "cache_dir", "stats", "clear_memory_cache"]

_NDARRAY = np.ndarray
_SCALAR_TYPES = (int, float, bool, np.generic)
_DTYPES = {"e": "_Float16", "f": "float", "d": "double"}
_BINARY_OPS = frozenset(C.BINARY) - {"shift_v", "shift_e"} | {"shift"}
_UNARY_OPS = frozenset(
    ["neg", "abs", "sgn", "sqrt", "sqr", "exp", "log", "safelog", "exp2", "log2", "sig", "sig2",
     "tanh", "tanh2", "rint", "finite"])
_REDUCTION_OPS = frozenset(C.REDUCTIONS)
_POW_SPECIAL = {2.0: "pow@2", 3.0: "pow@3", 1.0: "pow@1", 0.0: "pow@0", -1.0: "pow@-1",
                -2.0: "pow@-2", 0.5: "pow@0.5", -0.5: "pow@-0.5"}
# Elements per tile of the elementwise pass, and the widest column block.
_TILE = 16384
_COL_BLOCK = 4096
_STRIDED_COL_BLOCK = 256
# Below this many elements a pass runs on the calling thread (waking a team costs more).
_SERIAL_ELEMENTS = 32768

# Counters the tests and the bench read: kernels compiled, loaded from disk, plans built.
_stats = {"compiled": 0, "loaded": 0, "plans": 0, "fallbacks": 0}


_log = logging.getLogger("plait.neon.fuse")
_warned = [False]


def _warn_once(msg: str) -> None:
    """A RuntimeWarning for the first build problem of the process; later ones only logged."""
    if not _warned[0]:
        _warned[0] = True
        warnings.warn(msg + " (further build problems are logged to 'plait.neon.fuse')",
                      RuntimeWarning, stacklevel=4)
    else:
        _log.warning(msg)


class _Unsupported(Exception):
    """A tree this module does not fuse: execute() returns False."""


def stats() -> Dict[str, int]:
    """Counts since import: kernels compiled, loaded from the disk cache, plans built."""
    return dict(_stats)


# --------------------------------------------------------------------------------------------
# The compiler and the disk cache
# --------------------------------------------------------------------------------------------

_toolchain_lock = threading.Lock()
_toolchain: Dict[str, Any] = {}


def cache_dir() -> str:
    """Where compiled kernels live: $PLAIT_CACHE_DIR/neon, else ~/.cache/plait/neon."""
    root = os.environ.get("PLAIT_CACHE_DIR")
    if root:
        return os.path.join(root, "neon")
    return os.path.join(os.path.expanduser("~"), ".cache", "plait", "neon")


def _cpu_flags() -> frozenset:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def _arch_flags() -> List[str]:
    """Instruction-set flags for this machine (the cache key includes them).

    x86-64-v3 (AVX2, FMA, F16C) where the CPU has it, v4 (AVX-512) where it has that too; a
    library built here is only ever loaded on a machine whose flags produce the same key.
    """
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return []
    flags = _cpu_flags()
    v3 = {"avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "movbe", "sse4_2", "popcnt"}
    v4 = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
    if v3 <= flags and v4 <= flags:
        return ["-march=x86-64-v4", "-mprefer-vector-width=512"]
    if v3 <= flags:
        return ["-march=x86-64-v3"]
    return []


def _probe(cc: str, flags: List[str], source: str) -> bool:
    with tempfile.TemporaryDirectory(prefix="plait-neon-probe-") as tmp:
        src = os.path.join(tmp, "p.c")
        with open(src, "w") as f:
            f.write(source)
        try:
            r = subprocess.run([cc, *flags, "-shared", "-fPIC", src, "-o", os.path.join(tmp, "p.so")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return False
        return r.returncode == 0


def _get_toolchain() -> Optional[Dict[str, Any]]:
    """The C compiler, its identity and the flags; None when there is no working compiler."""
    if "ok" in _toolchain:
        return _toolchain if _toolchain["ok"] else None
    with _toolchain_lock:
        if "ok" in _toolchain:
            return _toolchain if _toolchain["ok"] else None
        cc = os.environ.get("PLAIT_NEON_CC") or os.environ.get("CC") or shutil.which("cc") \
            or shutil.which("gcc") or shutil.which("clang")
        info: Dict[str, Any] = {"ok": False}
        if cc and (shutil.which(cc) or os.path.exists(cc)):
            try:
                ver = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
                ident = (ver.stdout or ver.stderr).strip().splitlines()[0] if ver.returncode == 0 else ""
            except (OSError, subprocess.SubprocessError, IndexError):
                ident = ""
            if ident:
                base = ["-O3", "-std=gnu11", "-fno-math-errno", "-fno-trapping-math",
                        "-ffp-contract=off", "-fopenmp-simd"] + _arch_flags()
                if not _probe(cc, base, "int plait_probe(void) { return 0; }\n"):
                    base = ["-O3", "-fno-math-errno", "-ffp-contract=off"]
                    if not _probe(cc, base, "int plait_probe(void) { return 0; }\n"):
                        base = None
                if base is not None:
                    omp = _probe(cc, base + ["-fopenmp"],
                                 "#include <omp.h>\nint plait_probe(void) { return omp_get_max_threads(); }\n")
                    f16 = _probe(cc, base, "float plait_probe(_Float16 *h) { return (float)h[0]; }\n")
                    flags = base + (["-fopenmp"] if omp else [])
                    info = {"ok": True, "cc": cc, "ident": ident, "flags": flags, "openmp": omp,
                            "float16": f16}
        _toolchain.clear()
        _toolchain.update(info)
        return _toolchain if info["ok"] else None


def _sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


_lib_lock = threading.Lock()
_libs: Dict[str, Any] = {}       # source hash -> loaded kernel function (or None: build failed)
_keepalive: List[Any] = []       # the CDLL objects, so their code stays mapped
_opened: set = set()             # library paths this process has dlopen()ed


def _dlopen(path: str):
    """ctypes.CDLL(path), from a private copy when this process opened `path` before.

    The dynamic loader hands back an already-loaded library for a path it has seen, so a file
    rebuilt after damage would otherwise never be read again in this process.
    """
    if path in _opened:
        fd, alias = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
        os.close(fd)
        try:
            shutil.copyfile(path, alias)
            lib = ctypes.CDLL(alias)
        finally:
            try:
                os.unlink(alias)
            except OSError:
                pass
    else:
        lib = ctypes.CDLL(path)
    _opened.add(path)
    _keepalive.append(lib)
    return lib


def _load_kernel(source: str):
    """The kernel function for `source`: from memory, else the disk cache, else compiled now.

    Files: <key>.so and <key>.sha256 (the library's checksum); both are written to temporary
    names and renamed into place, so readers never see half a file. A library that is missing
    its checksum, fails it (truncated, corrupted) or fails to load is rebuilt.
    """
    tc = _get_toolchain()
    if tc is None:
        return None
    key = hashlib.sha256("\0".join([source, tc["cc"], tc["ident"], " ".join(tc["flags"]),
                                    sys.platform]).encode()).hexdigest()[:40]
    fn = _libs.get(key, False)
    if fn is not False:
        return fn
    with _lib_lock:
        fn = _libs.get(key, False)
        if fn is not False:
            return fn
        folder = cache_dir()
        so_path = os.path.join(folder, key + ".so")
        sum_path = os.path.join(folder, key + ".sha256")
        fn = None
        if os.path.exists(so_path) and _verified(so_path, sum_path):
            try:
                fn = _dlopen(so_path).plait_fused
                _stats["loaded"] += 1
            except (OSError, AttributeError):
                fn = None
        if fn is None:
            fn = _compile(tc, source, folder, so_path, sum_path)
        _libs[key] = fn
        return fn


def _build(tc, source: str, folder: str, so_path: str, sum_path: str, extra=(), quiet=False) -> Optional[str]:
    """Compile `source` into so_path (checksum beside it), atomically; the path or None."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        folder = tempfile.mkdtemp(prefix="plait-neon-")
        so_path = os.path.join(folder, os.path.basename(so_path))
        sum_path = os.path.join(folder, os.path.basename(sum_path))
    tag = f".{os.getpid()}.{threading.get_ident()}.tmp"
    src_tmp = so_path + tag + ".c"
    so_tmp = so_path + tag
    sum_tmp = sum_path + tag
    try:
        with open(src_tmp, "w") as f:
            f.write(source)
        r = subprocess.run([tc["cc"], *tc["flags"], *extra, "-shared", "-fPIC", src_tmp, "-o", so_tmp, "-lm"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            msg = f"plait.neon: compiling {os.path.basename(so_path)} failed:\n{r.stderr[-2000:]}"
            _log.info(msg) if quiet else _warn_once(msg)
            return None
        digest = _sha(so_tmp)
        with open(sum_tmp, "w") as f:
            f.write(digest + "\n")
        os.replace(sum_tmp, sum_path)
        os.replace(so_tmp, so_path)
        return so_path
    except (OSError, subprocess.SubprocessError) as err:
        msg = f"plait.neon: could not build {os.path.basename(so_path)} ({err})"
        _log.info(msg) if quiet else _warn_once(msg)
        return None
    finally:
        for p in (src_tmp, so_tmp, sum_tmp):
            try:
                os.unlink(p)
            except OSError:
                pass


def _verified(so_path: str, sum_path: str) -> bool:
    """The library exists and matches its recorded checksum."""
    try:
        with open(sum_path) as f:
            expected = f.read().strip()
        return bool(expected) and _sha(so_path) == expected
    except OSError:
        return False


def _compile(tc, source: str, folder: str, so_path: str, sum_path: str):
    path = _build(tc, source, folder, so_path, sum_path)
    if path is None:
        return None
    try:
        fn = _dlopen(path).plait_fused
    except (OSError, AttributeError) as err:
        _warn_once(f"plait.neon: could not load a fused kernel ({err}), using numpy")
        return None
    _stats["compiled"] += 1
    return fn


# The C runtime (walk + argument packing + call); see _fuse_rt.py. _UNSET until first use.
_UNSET = object()
_rt: Any = _UNSET


def _get_rt():
    """The compiled per-call runtime, or None (no compiler, PLAIT_NEON_FUSE_RT=0, build failed)."""
    global _rt
    if _rt is not _UNSET:
        return _rt
    with _lib_lock:
        if _rt is not _UNSET:
            return _rt
        _rt = None
        tc = _get_toolchain()
        if tc is None or os.environ.get("PLAIT_NEON_FUSE_RT", "1").strip() == "0":
            return None
        try:
            import importlib.machinery
            import importlib.util
            import sysconfig
            from . import _fuse_rt
            incs = ["-I" + sysconfig.get_paths()["include"], "-I" + np.get_include()]
            key = hashlib.sha256("\0".join([_fuse_rt.SOURCE, tc["cc"], tc["ident"], " ".join(tc["flags"]),
                                            sys.version, np.__version__, *incs]).encode()).hexdigest()[:40]
            folder = cache_dir()
            so_path = os.path.join(folder, key + ".rt.so")
            sum_path = os.path.join(folder, key + ".rt.sha256")
            if not (os.path.exists(so_path) and _verified(so_path, sum_path)):
                if _build(tc, _fuse_rt.SOURCE, folder, so_path, sum_path, extra=["-O2", *incs], quiet=True) is None:
                    return None
                _stats["compiled"] += 1
            loader = importlib.machinery.ExtensionFileLoader("_plait_neon_rt", so_path)
            spec = importlib.util.spec_from_file_location("_plait_neon_rt", so_path, loader=loader)
            mod = importlib.util.module_from_spec(spec)
            loader.exec_module(mod)
            mod.init(*_rt_tables())
            _rt = mod
        except Exception as err:  # any failure: the Python path still works
            # Only slower, never wrong: a log line, not a warning.
            _log.info("plait.neon: the fused-call runtime is unavailable (%s); using the slower "
                      "Python path", err)
            _rt = None
        return _rt


def _rt_tables():
    """The token strings the C walk returns: the same ones the Python walk builds."""
    opmap = {}
    for op in _UNARY_OPS:
        opmap[op] = (1, op)
    for op in _BINARY_OPS - {"pow", "shift"}:
        opmap[op] = (2, op)
    opmap["pow"] = (3, "pow")
    opmap["shift"] = (4, ("shift_v", "shift_e"))
    for op in _REDUCTION_OPS:
        opmap[op] = (5, (f"{op}/0", f"{op}/1", f"{op}/N"))
    opmap["rand"] = (6, "rand")
    opmap["binarize"] = (7, ("binarize_s", "binarize_d"))
    opmap["transpose"] = (8, "")
    bits = [(f >> 3 & 1, f >> 2 & 1, f >> 1 & 1, f & 1) for f in range(16)]
    leaf = tuple(f"L{ch}{a}{b}{c}{d}" for ch in "efd" for a, b, c, d in bits)
    out = tuple(f"O{ch}{a}{b}{c}{d}" for ch in "efd" for a, b, c, d in bits)
    pows = tuple((float(v), t) for v, t in _POW_SPECIAL.items())
    return opmap, leaf, out, pows, "k", "kd", "rand"


# --------------------------------------------------------------------------------------------
# Walking a tree: the signature key, the array leaves and the scalar constants
# --------------------------------------------------------------------------------------------

def _walk(node, toks: list, leaves: list, consts: list) -> None:
    """Post-order tokens of `node`; arrays go to `leaves`, scalars to `consts`."""
    if isinstance(node, tuple):
        if len(node) != 3:
            raise _Unsupported
        opd, left, right = node
        try:
            op = opd["op"]
        except (TypeError, KeyError):
            raise _Unsupported from None
        if op in _BINARY_OPS:
            if op == "pow" and isinstance(right, _SCALAR_TYPES):
                try:
                    special = _POW_SPECIAL.get(float(right))
                except (TypeError, ValueError):
                    raise _Unsupported from None
                if special is not None:
                    _walk(left, toks, leaves, consts)
                    toks.append(special)
                    return
            elif op == "shift":
                op = "shift_v" if opd.get("value", True) else "shift_e"
            _walk(left, toks, leaves, consts)
            _walk(right, toks, leaves, consts)
            toks.append(op)
        elif op in _UNARY_OPS:
            _walk(left, toks, leaves, consts)
            toks.append(op)
        elif op in _REDUCTION_OPS:
            axis = opd.get("axis")
            if axis not in (0, 1, None):
                raise _Unsupported
            _walk(left, toks, leaves, consts)
            toks.append(f"{op}/{'N' if axis is None else int(axis)}")
        elif op == "rand":
            toks.append("rand")
        elif op == "binarize":
            _walk(left, toks, leaves, consts)
            toks.append("binarize_s" if opd.get("stochastic", True) else "binarize_d")
        elif op == "transpose" and type(left) is _NDARRAY:
            _walk(left.T, toks, leaves, consts)
        else:
            raise _Unsupported
    elif type(node) is _NDARRAY or isinstance(node, _NDARRAY):
        shape = node.shape
        if len(shape) != 2:
            if node.ndim == 0 and node.dtype.char in "efd?bhilqBHILQ":
                consts.append(float(node))
                toks.append("k" if node.dtype.char != "d" else "kd")
                return
            raise _Unsupported
        dt = node.dtype
        ch = dt.char
        if ch not in "efd" or not dt.isnative:
            raise _Unsupported
        m, n = shape
        if m == 1 and n == 1:
            consts.append(float(node[0, 0]))
            toks.append("k" if ch != "d" else "kd")
            return
        if m == 0 or n == 0:
            raise _Unsupported
        s0, s1 = node.strides
        isz = node.itemsize
        if s0 % isz or s1 % isz:
            raise _Unsupported
        toks.append(f"L{ch}{int(m == 1)}{int(n == 1)}{int(s0 == isz)}{int(s1 == isz)}")
        leaves.append(node)
    elif isinstance(node, _SCALAR_TYPES):
        if isinstance(node, np.generic) and node.dtype.char not in "efd?bhilqBHILQ":
            raise _Unsupported
        consts.append(float(node))
        toks.append("kd" if isinstance(node, np.float64) and not isinstance(node, float) else "k")
    else:
        raise _Unsupported


# --------------------------------------------------------------------------------------------
# Plans: a tree signature lowered into passes, each with its compiled kernel
# --------------------------------------------------------------------------------------------

class _N:
    """A node of the lowered tree."""
    __slots__ = ("kind", "op", "kids", "ref", "axis", "rk")

    def __init__(self, kind, op=None, kids=(), ref=None, axis=None, rk=None):
        self.kind = kind   # 'leaf' (ref = leaf index), 'tmp' (ref = temp index), 'const', 'rand', 'op', 'red'
        self.op = op
        self.kids = list(kids)
        self.ref = ref
        self.axis = axis
        self.rk = rk       # rand stream index ('rand' and 'binarize_s')


class _Pass:
    __slots__ = ("red", "axis", "inputs", "dest", "transposed", "fn", "has_rand", "nin")


class _Plan:
    """What one tree signature runs: passes, compiled kernels, how to fill their arguments."""

    def __init__(self, key: tuple):
        self.toks = key[:-1]
        o = key[-1]
        self.out_tok = (o[1], o[2] == "1", o[3] == "1", o[4] == "1", o[5] == "1")
        self.ok = False
        self.passes: List[_Pass] = []
        self.ntemps = 0
        self.temp_shapes: List[Tuple[bool, bool]] = []   # (dim0 is 1, dim1 is 1) of each temp
        self.has_rand = False
        self._build()

    # ---- lowering ----------------------------------------------------------------------
    def _build(self):
        tc = _get_toolchain()
        if tc is None:
            raise _Unsupported
        leaf_toks = []
        stack: List[_N] = []
        ctype = "float"
        nconst = 0
        nrand = 0
        for t in self.toks:
            if t[0] == "L":
                t = (t[1], t[2] == "1", t[3] == "1", t[4] == "1", t[5] == "1")
                stack.append(_N("leaf", ref=len(leaf_toks)))
                leaf_toks.append(t)
                if t[0] == "d":
                    ctype = "double"
                elif t[0] == "e" and not tc["float16"]:
                    raise _Unsupported
            elif t in ("k", "kd"):
                stack.append(_N("const", ref=nconst))
                nconst += 1
                if t == "kd":
                    ctype = "double"
            elif t == "rand":
                stack.append(_N("rand", rk=nrand))
                nrand += 1
            elif "/" in t:
                op, ax = t.split("/")
                axis = None if ax == "N" else int(ax)
                if op in ("argmax", "argmin") and axis is None:
                    raise _Unsupported
                stack.append(_N("red", op=op, kids=[stack.pop()], axis=axis))
            elif t in C.BINARY:
                b = stack.pop()
                a = stack.pop()
                stack.append(_N("op", op=t, kids=[a, b]))
            elif t == "binarize_s":
                stack.append(_N("op", op=t, kids=[stack.pop()], rk=nrand))
                nrand += 1
            else:
                stack.append(_N("op", op=t, kids=[stack.pop()]))
        if len(stack) != 1:
            raise _Unsupported
        if self.out_tok[0] == "d":
            pass  # out's dtype only sets the final rounding
        elif self.out_tok[0] == "e" and not tc["float16"]:
            raise _Unsupported
        self.ctype = ctype
        self.tdtype = np.dtype(np.float64 if ctype == "double" else np.float32)
        self.leaf_toks = leaf_toks
        self.has_rand = nrand > 0
        root = stack[0]
        # Reductions become passes into temporaries, innermost first.
        root = self._lower(root, top=True)
        if root.kind != "done":
            final = _Pass()
            final.red = False
            final.axis = None
            final.dest = ("out",)
            self._finish_pass(final, root, dest_flags=self._out_flags())
            self.passes.append(final)
        # One elementwise pass over exactly the tree's leaves: the C runtime can run it alone.
        self.fast = None
        self.fast_tr = 0
        only = self.passes[0]
        if len(self.passes) == 1 and not only.red and \
                only.inputs == [("leaf", i) for i in range(len(leaf_toks))]:
            self.fast = ctypes.cast(only.fn, ctypes.c_void_p).value
            self.fast_tr = int(only.transposed)
        # Every pass, for the C runtime's run(): (kernel, red, axis, transposed, dest, inputs, temp type).
        ttype = self.tdtype.num
        spec = []
        for p in self.passes:
            spec.append((ctypes.cast(p.fn, ctypes.c_void_p).value, 1 if p.red else 0,
                         2 if p.axis is None else p.axis, int(p.transposed),
                         -1 if p.dest[0] == "out" else p.dest[1],
                         tuple(ref if kind == "leaf" else -1 - ref for kind, ref in p.inputs), ttype))
        self.spec = tuple(spec) if len(self.temp_shapes) <= 32 else None
        self.ok = True

    def _out_flags(self):
        t = self.out_tok
        return (t[1], t[2], t[3], t[4])

    def _space(self, node) -> Optional[Tuple[bool, bool]]:
        """(dim0 is 1, dim1 is 1) of a subtree: a dim is 1 when every array in it has 1 there."""
        d0 = d1 = True
        seen = False
        todo = [node]
        while todo:
            n = todo.pop()
            if n.kind == "leaf":
                t = self.leaf_toks[n.ref]
                d0 &= t[1]
                d1 &= t[2]
                seen = True
            elif n.kind == "tmp":
                s = self.temp_shapes[n.ref]
                d0 &= s[0]
                d1 &= s[1]
                seen = True
            else:
                todo.extend(n.kids)
        return (d0, d1) if seen else None

    def _lower(self, node: _N, top: bool = False) -> _N:
        node.kids = [self._lower(k) for k in node.kids]
        if node.kind != "red":
            return node
        space = self._space(node.kids[0])
        if space is None:
            raise _Unsupported      # a reduction over scalars and rand only: its shape is unknown
        axis = node.axis
        shape = (True if axis in (0, None) else space[0], True if axis in (1, None) else space[1])
        p = _Pass()
        p.red = node.op
        p.axis = axis
        out_flags = self._out_flags()
        if top and (out_flags[0], out_flags[1]) == shape:
            # The root is this reduction and out has its shape: write into out directly.
            p.dest = ("out",)
            self._finish_pass(p, node.kids[0], dest_flags=out_flags, space=space)
            self.passes.append(p)
            return _N("done")
        ti = len(self.temp_shapes)
        self.temp_shapes.append(shape)
        p.dest = ("tmp", ti)
        # A temp is C-contiguous: its one long dim (if any) has unit stride.
        tflags = (shape[0], shape[1], shape[1], True)
        self._finish_pass(p, node.kids[0], dest_flags=tflags, space=space)
        self.passes.append(p)
        return _N("tmp", ref=ti)

    def _input_flags(self, n: _N):
        if n.kind == "leaf":
            t = self.leaf_toks[n.ref]
            return (t[1], t[2], t[3], t[4]), t[0]
        s = self.temp_shapes[n.ref]
        return (s[0], s[1], s[1], True), self.tdtype.char

    def _finish_pass(self, p: _Pass, expr: _N, dest_flags, space=None):
        inputs: List[_N] = []
        todo = [expr]
        order = []
        while todo:                      # inputs in a stable (pre-)order
            n = todo.pop()
            if n.kind in ("leaf", "tmp"):
                inputs.append(n)
            order.append(n)
            todo.extend(reversed(n.kids))
        p.inputs = [(n.kind, n.ref) for n in inputs]
        # Orientation: the contiguous axis innermost. The reference array is the destination for
        # an elementwise pass, the first full-shape input for a reduction.
        if p.red:
            ref = None
            for n in inputs:
                f, _ = self._input_flags(n)
                if not f[0] and not f[1]:
                    ref = f
                    break
            if ref is None:
                ref = self._input_flags(inputs[0])[0] if inputs else dest_flags
        else:
            ref = dest_flags
        d0is1, d1is1, c0, c1 = ref
        if not d1is1 and c1:
            tr = False
        elif not d0is1 and c0:
            tr = True
        else:
            tr = d1is1 and not d0is1
        p.transposed = tr
        p.has_rand = any(n.kind == "rand" or (n.kind == "op" and n.op == "binarize_s") for n in order)
        if p.has_rand:
            self.has_rand = True

        def kclass(flags):
            d0, d1, u0, u1 = flags
            if tr:
                d0, d1, u0, u1 = d1, d0, u1, u0
            outer = "b" if d0 else "v"
            inner = "b" if d1 else ("c" if u1 else "s")
            return outer + inner

        in_classes = []
        in_types = []
        for n in inputs:
            f, ch = self._input_flags(n)
            in_classes.append(kclass(f))
            in_types.append(_DTYPES[ch])
        dest_class = kclass(dest_flags)
        if p.dest[0] == "out":
            dest_type = _DTYPES[self.out_tok[0]]
        else:
            dest_type = _DTYPES[self.tdtype.char]
        axis = p.axis
        if p.red and axis is not None and tr:
            axis = 1 - axis
        src = _gen_source(self.ctype, expr, inputs, in_classes, in_types, dest_class, dest_type,
                          p.red, axis)
        fn = _load_kernel(src)
        if fn is None:
            raise _Unsupported
        p.fn = fn
        p.nin = len(inputs)


# --------------------------------------------------------------------------------------------
# Code generation
# --------------------------------------------------------------------------------------------

def _gen_expr(expr: _N, inputs: List[_N], in_classes, lines: List[str]) -> str:
    """Emit statements computing `expr` at element (i, j); returns the result's variable."""
    idx = {id(n): k for k, n in enumerate(inputs)}

    def load(n: _N) -> str:
        k = idx[id(n)]
        cls = in_classes[k]
        if cls[1] == "c":
            return f"(T)r{k}[j]"
        if cls[1] == "s":
            return f"(T)r{k}[j * a{k}s1]"
        return f"(T)r{k}[0]"

    return C.emit_expression(
        expr, lines, load=load,
        rand_at=lambda n: f"PL_RAND(sd{n.rk}, (uint64_t)(i * ri + j * rj))",
    )

def _consts_and_rands(expr: _N):
    consts, rands = set(), set()
    todo = [expr]
    while todo:
        n = todo.pop()
        if n.kind == "const":
            consts.add(n.ref)
        elif n.kind == "rand" or (n.kind == "op" and n.op == "binarize_s"):
            rands.add(n.rk)
        todo.extend(n.kids)
    return sorted(consts), sorted(rands)


def _gen_source(ctype, expr, inputs, in_classes, in_types, dest_class, dest_type, red, axis) -> str:
    """One translation unit: `void plait_fused(const int64_t *ia, const double *fa)`.

    ia: M, N (in the kernel's orientation), threads, seed, rand index strides (ri, rj),
    destination pointer and element strides, then pointer and strides of each input.
    fa: the tree's scalar constants.
    """
    L = [C.PRELUDE, C.TYPE_MACROS[ctype]]
    L.append("void plait_fused(const int64_t *ia, const double *fa) {")
    L.append("const int64_t M = ia[0], N = ia[1]; const int nt = (int)ia[2];")
    L.append("const uint64_t seed = (uint64_t)ia[3]; const int64_t ri = ia[4], rj = ia[5];")
    L.append("(void)seed; (void)ri; (void)rj; (void)fa; (void)nt;")
    L.append(f"{dest_type} *const pd = ({dest_type} *)(intptr_t)ia[6];")
    L.append("const int64_t ds0 = ia[7], ds1 = ia[8]; (void)ds0; (void)ds1;")
    for k, ty in enumerate(in_types):
        b = 9 + 3 * k
        L.append(f"const {ty} *const p{k} = (const {ty} *)(intptr_t)ia[{b}];")
        L.append(f"const int64_t a{k}s0 = ia[{b + 1}], a{k}s1 = ia[{b + 2}];"
                 f" (void)a{k}s0; (void)a{k}s1;")
    consts, rands = _consts_and_rands(expr)
    for c in consts:
        L.append(f"const T c{c} = (T)fa[{c}];")
    for r in rands:
        L.append(f"const uint64_t sd{r} = pl_mix(seed + 0x9e3779b97f4a7c15ULL * {r + 1}ULL);")

    def rows(indent=""):
        out = []
        for k, cls in enumerate(in_classes):
            if cls[0] == "v":
                out.append(f"{indent}const {in_types[k]} *const r{k} = p{k} + i * a{k}s0;")
            else:
                out.append(f"{indent}const {in_types[k]} *const r{k} = p{k};")
        return out

    body: List[str] = []
    res = _gen_expr(expr, inputs, in_classes, body)
    par = "#pragma omp parallel for num_threads(nt) schedule(static) if(nt > 1)"
    dst_elem_ew = "pd[i * ds0 + j]" if dest_class[1] == "c" else "pd[i * ds0 + j * ds1]"
    any_strided = any(c[1] == "s" for c in in_classes) or dest_class[1] == "s"
    if not red:
        cb = _STRIDED_COL_BLOCK if any_strided else _COL_BLOCK
        L.append(f"const int64_t CB = N < {cb} ? N : {cb};")
        L.append(f"int64_t RB = {_TILE} / CB; if (RB < 1) RB = 1; if (RB > M) RB = M;")
        L.append("const int64_t nbr = (M + RB - 1) / RB, nbc = (N + CB - 1) / CB;")
        L.append(par)
        L.append("for (int64_t t = 0; t < nbr * nbc; t++) {")
        L.append("const int64_t i0 = (t / nbc) * RB, j0 = (t % nbc) * CB;")
        L.append("const int64_t i1 = i0 + RB < M ? i0 + RB : M, j1 = j0 + CB < N ? j0 + CB : N;")
        L.append("for (int64_t i = i0; i < i1; i++) {")
        L += rows()
        L.append("#pragma GCC ivdep")
        L.append("for (int64_t j = j0; j < j1; j++) {")
        L += body
        L.append(f"{dst_elem_ew} = ({dest_type}){res};")
        L.append("}}}")
        L.append("}")
        return "\n".join(L) + "\n"

    return "\n".join(L + _gen_reduction(red, axis, body, res, rows, dest_type, par)) + "\n"


def _gen_reduction(red, axis, body, res, rows, dest_type, par) -> List[str]:
    """The loops of a reduction pass (kernel orientation: axis 1 is the inner, contiguous one).

    The work is split by shape alone, never by the thread count, so results do not depend on
    it: axis 1 takes a row per iteration, or (few long rows) chunks of 16K columns whose
    partial results are combined in order; axis 0 takes blocks of 256 columns, and with few
    such blocks also chunks of rows (at most 64), combined in order; axis None is axis 1's
    chunks over every row, combined in order. Partial buffers hold at most 64 x N or
    M x N / 16K values.
    """
    arg = red in ("argmax", "argmin")
    better = ">" if red in ("max", "argmax") else "<"
    acc_t = "double" if red == "sum" else "T"
    init = {"sum": "0", "max": "-(T)INFINITY", "min": "(T)INFINITY",
            "argmax": "-(T)INFINITY", "argmin": "(T)INFINITY"}[red]
    L: List[str] = []

    def row_reduce(jlo, jhi):
        """Reduce element (i, j) over j in [jlo, jhi): acc (and nanc, or bi for arg)."""
        out = []
        if arg:
            out.append(f"T acc = {init}; int64_t bi = {jlo};")
            out.append(f"for (int64_t j = {jlo}; j < {jhi}; j++) {{")
            out += body
            out.append(f"if ({res} {better} acc || ({res} != {res} && acc == acc)) {{ acc = {res}; bi = j; }}")
            out.append("}")
        elif red == "sum":
            out.append("double acc = 0;")
            out.append("#pragma omp simd reduction(+:acc)")
            out.append(f"for (int64_t j = {jlo}; j < {jhi}; j++) {{")
            out += body
            out.append(f"acc += (double){res};")
            out.append("}")
        else:
            out.append(f"T acc = {init}; int64_t nanc = 0;")
            out.append(f"#pragma omp simd reduction({red}:acc) reduction(+:nanc)")
            out.append(f"for (int64_t j = {jlo}; j < {jhi}; j++) {{")
            out += body
            out.append(f"acc = {res} {better} acc ? {res} : acc; nanc += ({res} != {res});")
            out.append("}")
        return out

    def final(acc, nan="nanc", idx="bi"):
        if arg:
            return f"({dest_type}){idx}"
        if red == "sum":
            return f"({dest_type}){acc}"
        return f"({dest_type})({nan} ? (T)NAN : {acc})"

    # Combining a partial (pa, pn, pi) into (a, n, b), in order.
    if arg:
        comb = "if (pa {b} a || (pa != pa && a == a)) {{ a = pa; b = pi; }}".format(b=better)
    elif red == "sum":
        comb = "a += pa;"
    else:
        comb = f"a = pa {better} a ? pa : a; n += pn;"

    def chunked_rows(rows_expr, store_dst):
        """Partials per (row, column chunk), then each group combined in order."""
        out = ["const int64_t CH = 16384, nch = (N + CH - 1) / CH;",
               f"const int64_t np_ = {rows_expr} * nch;",
               f"{acc_t} *part = ({acc_t} *)malloc(sizeof({acc_t}) * (size_t)np_);",
               "int64_t *paux = (int64_t *)malloc(sizeof(int64_t) * (size_t)np_);",
               "if (!part || !paux) { free(part); free(paux); return; }",
               par,
               "for (int64_t t = 0; t < np_; t++) {",
               "const int64_t i = t / nch, j0 = (t % nch) * CH, j1 = j0 + CH < N ? j0 + CH : N;"]
        out += rows()
        out += row_reduce("j0", "j1")
        aux = "bi" if arg else ("nanc" if red != "sum" else "0")
        out.append(f"part[t] = acc; paux[t] = {aux};")
        out.append("}")
        out += store_dst
        out.append("free(part); free(paux);")
        return out

    if axis == 1:
        L.append("if (M >= 16 || N < 65536) {")
        L.append(par)
        L.append("for (int64_t i = 0; i < M; i++) {")
        L += rows()
        L += row_reduce("0", "N")
        L.append(f"pd[i * ds0] = {final('acc')};")
        L.append("}")
        L.append("} else {")
        L += chunked_rows("M", [
            "for (int64_t i = 0; i < M; i++) {",
            f"{acc_t} a = part[i * nch]; int64_t n = paux[i * nch], b = paux[i * nch]; (void)n; (void)b;",
            "for (int64_t c = 1; c < nch; c++) {",
            f"const {acc_t} pa = part[i * nch + c]; const int64_t pn = paux[i * nch + c], pi = pn; (void)pn; (void)pi;",
            comb, "}",
            f"pd[i * ds0] = {final('a', 'n', 'b')};",
            "}"])
        L.append("}")
        L.append("}")
        return L
    if axis is None:
        L += chunked_rows("M", [
            f"{acc_t} a = part[0]; int64_t n = paux[0]; (void)n;",
            "for (int64_t t = 1; t < np_; t++) {",
            f"const {acc_t} pa = part[t]; const int64_t pn = paux[t]; (void)pn;",
            comb, "}",
            f"pd[0] = {final('a', 'n')};"])
        L.append("}")
        return L
    # axis 0: blocks of 256 columns; with few blocks and many rows, chunks of rows too.
    L.append("const int64_t nbc = (N + 255) / 256;")
    L.append("int64_t RCH = M;")
    L.append("if (M >= 2048 && nbc < 16) { RCH = 512; if ((M + RCH - 1) / RCH > 64) RCH = (M + 63) / 64; }")
    L.append("int64_t nrc = (M + RCH - 1) / RCH;")
    L.append(f"{acc_t} *part = NULL; int64_t *paux = NULL;")
    L.append("if (nrc > 1) {")
    L.append(f"part = ({acc_t} *)malloc(sizeof({acc_t}) * (size_t)(nrc * N));")
    L.append("paux = (int64_t *)malloc(sizeof(int64_t) * (size_t)(nrc * N));")
    L.append("if (!part || !paux) { free(part); free(paux); part = NULL; paux = NULL; RCH = M; nrc = 1; }")
    L.append("}")
    L.append(par)
    L.append("for (int64_t t = 0; t < nrc * nbc; t++) {")
    L.append("const int64_t rc = t / nbc, j0 = (t % nbc) * 256, j1 = j0 + 256 < N ? j0 + 256 : N;")
    L.append("const int64_t r0 = rc * RCH, r1 = r0 + RCH < M ? r0 + RCH : M;")
    L.append(f"{acc_t} acc[256]; int64_t aux[256];")
    L.append(f"for (int64_t j = 0; j < 256; j++) {{ acc[j] = {init}; aux[j] = {'r0' if arg else '0'}; }}")
    L.append("for (int64_t i = r0; i < r1; i++) {")
    L += rows()
    L.append("#pragma GCC ivdep")
    L.append("for (int64_t j = j0; j < j1; j++) {")
    L += body
    if arg:
        L.append(f"const int up = ({res} {better} acc[j - j0]) || ({res} != {res} && acc[j - j0] == acc[j - j0]);")
        L.append(f"acc[j - j0] = up ? {res} : acc[j - j0]; aux[j - j0] = up ? i : aux[j - j0];")
    elif red == "sum":
        L.append(f"acc[j - j0] += (double){res};")
    else:
        L.append(f"acc[j - j0] = ({res} {better} acc[j - j0] || {res} != {res}) ? {res} : acc[j - j0];")
    L.append("}}")
    L.append("if (nrc == 1) {")
    L.append("for (int64_t j = j0; j < j1; j++) " +
             (f"pd[j * ds1] = ({dest_type})aux[j - j0];" if arg else f"pd[j * ds1] = ({dest_type})acc[j - j0];"))
    L.append("} else {")
    L.append("for (int64_t j = j0; j < j1; j++) { part[rc * N + j] = acc[j - j0]; paux[rc * N + j] = aux[j - j0]; }")
    L.append("}")
    L.append("}")
    L.append("if (nrc > 1) {")
    L.append(par)
    L.append("for (int64_t j = 0; j < N; j++) {")
    L.append(f"{acc_t} a = part[j]; int64_t b = paux[j]; (void)b;")
    L.append("for (int64_t rc = 1; rc < nrc; rc++) {")
    L.append(f"const {acc_t} pa = part[rc * N + j]; const int64_t pi = paux[rc * N + j]; (void)pi;")
    if arg:
        L.append(comb)
    elif red == "sum":
        L.append("a += pa;")
    else:
        L.append(f"a = (pa {better} a || pa != pa) ? pa : a;")
    L.append("}")
    L.append("pd[j * ds1] = " + (f"({dest_type})b;" if arg else f"({dest_type})a;"))
    L.append("}")
    L.append("free(part); free(paux);")
    L.append("}")
    L.append("}")
    return L


# --------------------------------------------------------------------------------------------
# Running a plan
# --------------------------------------------------------------------------------------------

_plans: Dict[tuple, Any] = {}          # signature -> _Plan, or None (unsupported)
_plan_lock = threading.Lock()
_ptrs: Dict[int, Tuple[Any, int]] = {}  # id(array) -> (weakref, data address)


def _drop_ptr(key):
    def cb(_ref):
        _ptrs.pop(key, None)
    return cb


def _addr(a) -> int:
    """The data address of an ndarray, remembered per live array (neon reuses its tensors)."""
    k = id(a)
    hit = _ptrs.get(k)
    if hit is not None and hit[0]() is a:
        return hit[1]
    p = a.__array_interface__["data"][0]
    try:
        _ptrs[k] = (weakref.ref(a, _drop_ptr(k)), p)
    except TypeError:
        pass
    return p


_thread_fn = None


def _env_threads() -> int:
    for name in ("PLAIT_NUM_THREADS", "OMP_NUM_THREADS"):
        raw = os.environ.get(name, "").split(",")[0].strip()
        if raw.isdigit() and int(raw) > 0:
            return int(raw)
    return 1


def _num_threads() -> int:
    global _thread_fn
    if _thread_fn is None:
        try:
            from plait.backends._threads import get_num_threads as g
            _thread_fn = g
        except Exception:
            _thread_fn = _env_threads
    try:
        return max(1, int(_thread_fn()))
    except Exception:
        return 1


def _extent(a, ptr) -> Tuple[int, int]:
    lo = hi = ptr
    for d, s in zip(a.shape, a.strides):
        if d > 1:
            if s >= 0:
                hi += (d - 1) * s
            else:
                lo += (d - 1) * s
    return lo, hi + a.itemsize


def _shape_error(shapes, out_shape):
    return ValueError(f"plait.neon: operands with shapes {', '.join(str(s) for s in shapes)} "
                      f"do not broadcast together into out of shape {tuple(out_shape)}")


_I64 = {}


def _ia(vals):
    n = len(vals)
    t = _I64.get(n)
    if t is None:
        t = _I64[n] = ctypes.c_int64 * n
    return t(*vals)


def _seed(rng) -> int:
    """The kernel's 64-bit seed (as a signed int64), drawn from rng (numpy's global one if None)."""
    src = rng if rng is not None else np.random
    draw = getattr(src, "random_sample", None) or src.random    # RandomState, or a Generator
    # two uniform doubles, 53 random bits each (RandomState.bytes(8) costs 5 us a call)
    seed = ((int(draw() * 9007199254740992.0) << 11) ^ int(draw() * 9007199254740992.0)) & ((1 << 64) - 1)
    return seed - (1 << 64) if seed >= 1 << 63 else seed


def _run(plan: _Plan, leaves: list, consts: list, out: np.ndarray, seed: int) -> None:
    temps: List[np.ndarray] = []
    fa = (ctypes.c_double * max(1, len(consts)))(*consts)
    nthreads = None
    out_ptr = None
    out_ext = None
    for p in plan.passes:
        if p.fn is None:
            continue
        arrays = []
        addrs = []
        for kind, ref in p.inputs:
            if kind == "leaf":
                a = leaves[ref]
                arrays.append(a)
                addrs.append(_addr(a))
            else:
                a = temps[ref]
                arrays.append(a)
                addrs.append(a.__array_interface__["data"][0])
        # The pass's index space (original orientation) and the broadcast checks.
        if p.red:
            m = n = 1
            for a in arrays:
                s0, s1 = a.shape
                if s0 != 1:
                    if m == 1:
                        m = s0
                    elif s0 != m:
                        raise _shape_error([x.shape for x in arrays], (m, n))
                if s1 != 1:
                    if n == 1:
                        n = s1
                    elif s1 != n:
                        raise _shape_error([x.shape for x in arrays], (m, n))
        else:
            m, n = out.shape
            for a in arrays:
                s0, s1 = a.shape
                if (s0 != 1 and s0 != m) or (s1 != 1 and s1 != n):
                    raise _shape_error([x.shape for x in arrays], out.shape)
        if p.dest[0] == "out":
            dest = out
            if p.red:
                want = (1 if p.axis in (0, None) else m, 1 if p.axis in (1, None) else n)
                if out.shape != want:
                    raise ValueError(f"plait.neon: a reduction over axis {p.axis} of shape {(m, n)} "
                                     f"gives {want}, which does not fit out of shape {out.shape}")
            if out_ptr is None:
                out_ptr = _addr(out)
                out_ext = _extent(out, out_ptr)
            # Inputs that overlap out without being out's own elements are read from a copy.
            for k, a in enumerate(arrays):
                if a is out and not p.red:
                    continue
                pa = addrs[k]
                lo, hi = _extent(a, pa)
                if lo < out_ext[1] and out_ext[0] < hi:
                    if p.red or not (pa == out_ptr and a.strides == out.strides and a.shape == out.shape):
                        a = arrays[k] = np.array(a, copy=True)
                        addrs[k] = a.__array_interface__["data"][0]
            dptr = out_ptr
        else:
            tshape = plan.temp_shapes[p.dest[1]]
            dest = np.empty((1 if tshape[0] else m, 1 if tshape[1] else n), plan.tdtype)
            temps.append(dest)
            dptr = dest.__array_interface__["data"][0]
        size = m * n
        if nthreads is None:
            nthreads = _num_threads()
        nt = 1 if size < _SERIAL_ELEMENTS else nthreads
        tr = p.transposed
        if tr:
            km, kn = n, m
            ri, rj = 1, n
        else:
            km, kn = m, n
            ri, rj = n, 1
        vals = [km, kn, nt, seed, ri, rj, dptr]
        isz = dest.itemsize
        d0 = dest.strides[0] // isz if dest.shape[0] != 1 else 0
        d1 = dest.strides[1] // isz if dest.shape[1] != 1 else 0
        vals += (d1, d0) if tr else (d0, d1)
        for k, a in enumerate(arrays):
            isz = a.itemsize
            s0, s1 = a.strides
            sh0, sh1 = a.shape
            s0 = s0 // isz if sh0 != 1 else 0
            s1 = s1 // isz if sh1 != 1 else 0
            vals.append(addrs[k])
            vals += (s1, s0) if tr else (s0, s1)
        p.fn(_ia(vals), fa)


def _plan_for(key: tuple):
    plan = _plans.get(key, False)
    if plan is False:
        with _plan_lock:
            plan = _plans.get(key, False)
            if plan is False:
                try:
                    plan = _Plan(key)
                    _stats["plans"] += 1
                except _Unsupported:
                    plan = None
                _plans[key] = plan
    return plan


def execute(tree, out, rng=None) -> bool:
    """Evaluate the op-tree `tree` into the 2-D array `out` in one fused pass; True when done.

    False (nothing computed, nothing written) for trees this module does not fuse; a
    ValueError naming the shapes for operands that do not broadcast into `out`. With `rand`
    (or stochastic `binarize`) in the tree, one 64-bit seed is drawn from `rng`.
    """
    rt = _rt if _rt is not _UNSET else _get_rt()
    got = rt.walk(tree, out) if rt is not None else None
    if got is not None:
        key, leaves, consts = got
    else:
        if not isinstance(out, _NDARRAY):
            return False
        oshape = out.shape
        if len(oshape) != 2 or out.dtype.char not in "efd" or oshape[0] == 0 or oshape[1] == 0 \
                or not out.flags.writeable or not out.dtype.isnative:
            return False
        osz = out.itemsize
        s0, s1 = out.strides
        if s0 % osz or s1 % osz:
            return False
        toks: list = []
        leaves = []
        consts = []
        try:
            _walk(tree, toks, leaves, consts)
        except _Unsupported:
            _stats["fallbacks"] += 1
            return False
        toks.append(f"O{out.dtype.char}{int(oshape[0] == 1)}{int(oshape[1] == 1)}"
                    f"{int(s0 == osz)}{int(s1 == osz)}")
        key = tuple(toks)
    plan = _plans.get(key, False)
    if plan is False:
        plan = _plan_for(key)
    if plan is None:
        _stats["fallbacks"] += 1
        return False
    seed = _seed(rng) if plan.has_rand else 0
    if rt is not None:
        if plan.fast is not None:
            if rt.run1(plan.fast, out, leaves, consts, plan.fast_tr, _num_threads(), seed) == 0:
                return True
        elif plan.spec is not None:
            if rt.run(plan.spec, out, leaves, consts, _num_threads(), seed) == 0:
                return True
    _run(plan, leaves, consts, out, seed)
    return True


def clear_memory_cache() -> None:
    """Forget the plans and loaded kernels (the disk cache stays): the next call reloads."""
    with _plan_lock, _lib_lock:
        _plans.clear()
        _libs.clear()
