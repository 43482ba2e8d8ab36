"""Fused execution of neon op-trees on the GPU: one generated CUDA kernel per pass signature.

`execute(tree, out, rng=None, launcher=None)` evaluates a lazy neon expression (nested
`(op_dict, left, right)` tuples, neon op names, over 2-D device arrays and scalars) straight
into the 2-D device array `out`, as `plait.neon._fuse.execute` does on the CPU:

* Each pass *signature* (the ops in post-order, each leaf's dtype, broadcast pattern
  (m, n)/(m, 1)/(1, n)/(1, 1) and stride class (unit or general inner stride), the
  destination's dtype, pattern, stride class and loop orientation) becomes one CUDA source with
  one `extern "C" __global__` kernel. Sizes, strides, pointers, the tree's scalar constants and
  the random seed are kernel arguments, so a changing learning rate never recompiles. Kernels
  are compiled lazily with `cupy.RawModule` and cached per signature (and per source text).
* Elementwise passes are a grid-stride loop over out's elements (i fastest when out is
  column-major, so neighbouring threads touch neighbouring addresses); every intermediate is
  a register.
* Reductions (`sum max min argmax argmin`, axis 0 or 1) are split off into their own kernels,
  as neon's GPU backend did: one thread per output element loops over the reduced axis
  (sums accumulate in double; max/min propagate NaN; arg* take the first extreme, a NaN
  winning, as numpy). Axis None is axis 1 into an (m, 1) temporary, then axis 0 of that.
  A reduction at the root writes into `out` directly; elsewhere its (1, n)/(m, 1)/(1, 1)
  temporary enters the rest of the tree as a broadcast leaf.
* float16 arrays are stored as float16 and loaded/stored through exact bit conversions
  (round-to-nearest-even on store); the math runs in float32, or in double when any operand
  (or a numpy float64 constant) is float64. The sources use no `cuda_fp16.h`, no shared
  memory, no `__syncthreads` and no warp intrinsics.
* `rand` (and stochastic `binarize`) is a counter-based generator: element (i, j) of stream k
  is splitmix64(seed_k + (i * n + j) * golden), the seed drawn from the backend's RNG with
  `plait.neon._fuse`'s draw, so for the same RNG state the values equal the CPU fused pass's.

`execute` returns False, computing nothing, for what it does not fuse (`dot`, `onehot`,
`transpose` of an expression, argmax/argmin over axis None, integer or bool dtypes, arrays that
are not 2-D, empty arrays; no CuPy): the caller then splits or falls back to its reference
evaluator. Operands that overlap `out` (other than as `out`'s own elements) are read from a
copy.

Because the sources use only `threadIdx`/`blockIdx`/`blockDim`/`gridDim`, they also compile for
the host with a small emulation header (`plait.neon._cuda_emu`), which is how their arithmetic
is tested against numpy on machines without a GPU; `launcher=` selects that (or any) runner.
"""
from __future__ import annotations

import hashlib
import threading
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import _fuse_c as C

__all__ = ["execute", "sources_for", "CupyLauncher", "KERNEL_EW", "KERNEL_RED", "COMPILE_OPTIONS",
           "stats", "generated_sources"]

KERNEL_EW = "plait_neon_ew"
KERNEL_RED = "plait_neon_red"
# No FMA contraction: numpy multiplies and adds separately (see plait.backends._kernels_gpu).
COMPILE_OPTIONS = ("--std=c++14", "--fmad=false")

_SCALAR_TYPES = (int, float, bool, np.generic)
_BINARY_OPS = frozenset(C.BINARY) - {"shift_v", "shift_e"} | {"shift"}
_UNARY_OPS = frozenset(
    ["neg", "abs", "sgn", "sqrt", "sqr", "exp", "log", "safelog", "exp2", "log2", "sig", "sig2",
     "tanh", "tanh2", "rint", "finite"])
_REDUCTION_OPS = frozenset(C.REDUCTIONS)
_POW_SPECIAL = {2.0: "pow@2", 3.0: "pow@3", 1.0: "pow@1", 0.0: "pow@0", -1.0: "pow@-1",
                -2.0: "pow@-2", 0.5: "pow@0.5", -0.5: "pow@-0.5"}
_STORAGE = {"e": "unsigned short", "f": "float", "d": "double"}

_BLOCK = 256
_MAX_BLOCKS = 4096

_stats = {"kernels": 0, "passes": 0, "fallbacks": 0}
_sources: Dict[tuple, str] = {}     # pass signature -> CUDA source
_lock = threading.Lock()


def stats() -> Dict[str, int]:
    """Counts since import: distinct kernel sources generated, passes launched, trees declined."""
    return dict(_stats)


def generated_sources() -> Dict[tuple, str]:
    """Every CUDA source generated in this process, by pass signature."""
    return dict(_sources)


class _Unsupported(Exception):
    """A tree this module does not fuse: execute() returns False."""


# --------------------------------------------------------------------------------------------
# The CUDA prelude: integer types, the grid-stride loop, float16 bits, NaN/inf, the generator
# --------------------------------------------------------------------------------------------

PRELUDE = r"""
typedef long long pl_i64;
typedef unsigned long long pl_u64;
typedef unsigned int pl_u32;

#define PL_GRID_LOOP(e, n) \
    for (pl_i64 e = (pl_i64)blockIdx.x * blockDim.x + threadIdx.x; e < (pl_i64)(n); \
         e += (pl_i64)blockDim.x * gridDim.x)

__device__ __forceinline__ float pl_fbits(pl_u32 u) { union { pl_u32 u; float f; } c; c.u = u; return c.f; }
__device__ __forceinline__ pl_u32 pl_ubits(float f) { union { pl_u32 u; float f; } c; c.f = f; return c.u; }
__device__ __forceinline__ double pl_dbits(pl_u64 u) { union { pl_u64 u; double d; } c; c.u = u; return c.d; }

// float16 (IEEE binary16 bits) -> float: exact.
__device__ __forceinline__ float pl_h2f(unsigned short h) {
    const pl_u32 sign = (pl_u32)(h & 0x8000u) << 16;
    const pl_u32 e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return pl_fbits(sign | 0x7f800000u | (m << 13));      // inf, NaN
    if (e == 0u) {                                                        // zero, subnormal
        const float v = (float)m * 5.9604644775390625e-08f;               // m * 2**-24
        return sign ? -v : v;
    }
    return pl_fbits(sign | ((e + 112u) << 23) | (m << 13));
}

// float -> float16, rounded to nearest even; overflow to inf, NaN stays NaN.
__device__ __forceinline__ unsigned short pl_f2h(float f) {
    const pl_u32 x = pl_ubits(f);
    const pl_u32 sign = (x >> 16) & 0x8000u;
    const pl_u32 ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (unsigned short)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
    if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);      // >= 65520: inf
    if (ax < 0x38800000u) {                                               // below 2**-14
        const float s = pl_fbits(ax) * 16777216.0f;                       // exact: * 2**24
        return (unsigned short)(sign | (pl_u32)rintf(s));
    }
    pl_u32 r = ax - 0x38000000u;                                          // rebias 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);
    return (unsigned short)(sign | (r >> 13));
}

"""

# The random stream: the C pass's own source (plait.neon._fuse_c), so both draw the same numbers.
PRELUDE += C.rng_source("__device__ __forceinline__", "pl_u64")

# The names the shared op expressions of plait.neon._fuse_c use, per compute type. float math
# calls the float functions by name, so no float kernel runs double-precision routines.
TYPE_MACROS = {
    "float": r"""
typedef float T;
#define PL_EXP(x) expf(x)
#define PL_EXP2(x) exp2f(x)
#define PL_LOG(x) logf(x)
#define PL_LOG2(x) log2f(x)
#define PL_TANH(x) tanhf(x)
#define PL_SQRT(x) sqrtf(x)
#define PL_ABS(x) fabsf(x)
#define PL_RINT(x) rintf(x)
#define PL_POW(x, y) powf((x), (y))
#define PL_RAND(s, i) pl_randf((s), (i))
#define PL_SAFE_MIN 1.9287498479639178e-22f
#define PL_INV_LN2 1.44269504088896341f
#define PL_INF pl_fbits(0x7f800000u)
#define PL_NAN pl_fbits(0x7fc00000u)
""",
    "double": r"""
typedef double T;
#define PL_EXP(x) exp(x)
#define PL_EXP2(x) exp2(x)
#define PL_LOG(x) log(x)
#define PL_LOG2(x) log2(x)
#define PL_TANH(x) tanh(x)
#define PL_SQRT(x) sqrt(x)
#define PL_ABS(x) fabs(x)
#define PL_RINT(x) rint(x)
#define PL_POW(x, y) pow((x), (y))
#define PL_RAND(s, i) pl_randd((s), (i))
#define PL_SAFE_MIN 1.9287498479639178e-22
#define PL_INV_LN2 1.4426950408889634
#define PL_INF pl_dbits(0x7ff0000000000000ULL)
#define PL_NAN pl_dbits(0x7ff8000000000000ULL)
""",
}


# --------------------------------------------------------------------------------------------
# Launchers: who compiles and runs a source (CuPy here; the host emulation in _cuda_emu)
# --------------------------------------------------------------------------------------------

class CupyLauncher:
    """Compiles sources with ``cupy.RawModule`` (lazily, cached per source and device) and
    launches them on the current CUDA device."""

    def __init__(self):
        import cupy  # noqa: F401  (raises ImportError without CuPy)

        self.xp = cupy
        self._fns: Dict[Tuple[str, int], Any] = {}

    def token(self) -> int:
        """What a compiled kernel is specific to besides its source: the current device."""
        return self.xp.cuda.runtime.getDevice()

    def function(self, source: str, name: str):
        dev = self.xp.cuda.runtime.getDevice()
        key = (hashlib.sha256(source.encode()).hexdigest(), dev)
        fn = self._fns.get(key)
        if fn is None:
            module = self.xp.RawModule(code=source, options=COMPILE_OPTIONS)
            fn = self._fns[key] = module.get_function(name)
        return fn

    def launch(self, fn, n: int, args: tuple) -> None:
        blocks = max(1, min(_MAX_BLOCKS, (int(n) + _BLOCK - 1) // _BLOCK))
        fn((blocks,), (_BLOCK,), args)

    @staticmethod
    def ptr(a) -> int:
        return a.data.ptr


_default_launcher: Any = None


def _get_default_launcher():
    global _default_launcher
    if _default_launcher is None:
        try:
            _default_launcher = CupyLauncher()
        except Exception:
            _default_launcher = False
    return _default_launcher or None


class _Recorder:
    """A launcher that only records sources (runs nothing): `sources_for` uses it."""

    xp = np

    def __init__(self):
        self.sources: List[str] = []

    def function(self, source, name):
        self.sources.append(source)
        return None

    def launch(self, fn, n, args):
        pass

    @staticmethod
    def ptr(a):
        return a.__array_interface__["data"][0]


# --------------------------------------------------------------------------------------------
# Walking a tree: validation, leaves, constants
# --------------------------------------------------------------------------------------------

def _is_array(x) -> bool:
    return not isinstance(x, (tuple, np.generic)) and hasattr(x, "strides") and hasattr(x, "dtype") \
        and hasattr(x, "ndim")


def _check(node) -> None:
    """Raise _Unsupported for anything this module does not fuse (before any kernel runs)."""
    if isinstance(node, tuple):
        if len(node) != 3:
            raise _Unsupported
        opd, left, right = node
        try:
            op = opd["op"]
        except (TypeError, KeyError):
            raise _Unsupported from None
        if op in _BINARY_OPS:
            _check(left)
            _check(right)
        elif op in _UNARY_OPS or op == "binarize":
            _check(left)
        elif op in _REDUCTION_OPS:
            axis = opd.get("axis")
            if axis not in (0, 1, None) or (axis is None and op in ("argmax", "argmin")):
                raise _Unsupported
            _check(left)
        elif op == "rand":
            pass
        elif op == "transpose" and _is_array(left):
            _check(left)
        else:
            raise _Unsupported
    elif _is_array(node):
        if node.ndim == 0:
            if node.dtype.char not in "efd?bhilqBHILQ":
                raise _Unsupported
            return
        if node.ndim != 2 or node.dtype.char not in "efd" or not node.dtype.isnative:
            raise _Unsupported
        if node.shape[0] == 0 or node.shape[1] == 0:
            raise _Unsupported
        isz = node.itemsize
        if node.strides[0] % isz or node.strides[1] % isz:
            raise _Unsupported
    elif isinstance(node, _SCALAR_TYPES):
        if isinstance(node, np.generic) and node.dtype.char not in "efd?bhilqBHILQ":
            raise _Unsupported
    else:
        raise _Unsupported


class _N:
    """A node of one pass's expression."""
    __slots__ = ("kind", "op", "kids", "ref")

    def __init__(self, kind, op=None, kids=(), ref=None):
        self.kind = kind    # 'leaf' (ref: leaf index), 'const' (ref: const index), 'rand' (ref: stream), 'op'
        self.op = op
        self.kids = list(kids)
        self.ref = ref


class _Pass:
    """One pass's expression, its leaves (arrays), constants, tokens and compute type."""

    def __init__(self):
        self.leaves: List[Any] = []
        self.consts: List[float] = []
        self.toks: List[str] = []
        self.nrand = 0
        self.double = False

    def add_leaf(self, a) -> _N:
        m, n = a.shape
        isz = a.itemsize
        ch = a.dtype.char
        if ch == "d":
            self.double = True
        unit = (n == 1) or a.strides[1] == isz
        self.toks.append(f"L{ch}{int(m == 1)}{int(n == 1)}{int(unit)}")
        self.leaves.append(a)
        return _N("leaf", ref=len(self.leaves) - 1)

    def add_const(self, value, is_double) -> _N:
        self.consts.append(float(value))
        self.toks.append("kd" if is_double else "k")
        if is_double:
            self.double = True
        return _N("const", ref=len(self.consts) - 1)

    def add_rand(self, tok="rand") -> int:
        self.toks.append(tok)
        self.nrand += 1
        return self.nrand - 1


def _lower(node, p: _Pass, reduce_fn) -> _N:
    """The pass expression of `node`; reductions are run by reduce_fn into temporaries first."""
    if isinstance(node, tuple):
        opd, left, right = node
        op = opd["op"]
        if op in _REDUCTION_OPS:
            return p.add_leaf(reduce_fn(left, op, opd.get("axis")))
        if op in _BINARY_OPS:
            if op == "pow" and isinstance(right, _SCALAR_TYPES):
                special = _POW_SPECIAL.get(float(right))
                if special is not None:
                    a = _lower(left, p, reduce_fn)
                    p.toks.append(special)
                    return _N("op", op=special, kids=[a])
            if op == "shift":
                op = "shift_v" if opd.get("value", True) else "shift_e"
            a = _lower(left, p, reduce_fn)
            b = _lower(right, p, reduce_fn)
            p.toks.append(op)
            return _N("op", op=op, kids=[a, b])
        if op in _UNARY_OPS:
            a = _lower(left, p, reduce_fn)
            p.toks.append(op)
            return _N("op", op=op, kids=[a])
        if op == "binarize":
            a = _lower(left, p, reduce_fn)
            if opd.get("stochastic", True):
                return _N("op", op="binarize_s", kids=[a], ref=p.add_rand("binarize_s"))
            p.toks.append("binarize_d")
            return _N("op", op="binarize_d", kids=[a])
        if op == "rand":
            return _N("rand", ref=p.add_rand())
        if op == "transpose":
            return _lower(left.T, p, reduce_fn)
        raise _Unsupported
    if _is_array(node):
        if node.ndim == 0:
            return p.add_const(float(node), node.dtype.char == "d")
        return p.add_leaf(node)
    return p.add_const(node, isinstance(node, np.float64) and not isinstance(node, float))


# --------------------------------------------------------------------------------------------
# Code generation
# --------------------------------------------------------------------------------------------

def _load(k: int, tok: str, ctype: str) -> str:
    """The load of leaf k at (i, j) from its token L<ch><m==1><n==1><unit inner stride>."""
    ch, b0, b1, unit = tok[1], tok[2] == "1", tok[3] == "1", tok[4] == "1"
    parts = []
    if not b0:
        parts.append(f"i * s{k}r")
    if not b1:
        parts.append("j" if unit else f"j * s{k}c")
    idx = " + ".join(parts) if parts else "0"
    raw = f"p{k}[{idx}]"
    return f"(T)pl_h2f({raw})" if ch == "e" else f"(T){raw}"


def _gen_expr(expr: _N, leaf_toks: List[str], ctype: str, lines: List[str]) -> str:
    """Statements computing `expr` at element (i, j) of an N-column output; the result's name."""
    return C.emit_expression(
        expr, lines,
        load=lambda n: _load(n.ref, leaf_toks[n.ref], ctype),
        rand_at=lambda n: f"PL_RAND(sd{n.ref}, (pl_u64)(i * N + j))",
    )

def _store(dest_ch: str, value: str) -> str:
    if dest_ch == "e":
        return f"pl_f2h((float)({value}))"
    return f"({_STORAGE[dest_ch]})({value})"


def _gen_source(ctype, expr, p: _Pass, dest_tok: str, red: Optional[str], axis) -> Tuple[str, str]:
    """(kernel name, source) for one pass.

    Kernel arguments: dest pointer, dest row and column element strides, M, N (the pass's
    index space), seed, then per leaf its pointer and row/column element strides, then the
    scalar constants as doubles.
    """
    leaf_toks = [t for t in p.toks if t[0] == "L"]
    name = KERNEL_RED if red else KERNEL_EW
    dch = dest_tok[1]
    args = [f"{_STORAGE[dch]} *pd", "pl_i64 dr", "pl_i64 dc", "pl_i64 M", "pl_i64 N", "pl_u64 seed"]
    for k, tok in enumerate(leaf_toks):
        args.append(f"const {_STORAGE[tok[1]]} *p{k}")
        args.append(f"pl_i64 s{k}r")
        args.append(f"pl_i64 s{k}c")
    for c in range(len(p.consts)):
        args.append(f"double c{c}_arg")
    L = [f"// plait.neon fused pass: {' '.join(p.toks)} -> {dest_tok}" +
         (f" ({red}, axis {axis})" if red else ""),
         PRELUDE, TYPE_MACROS[ctype]]
    L.append(f'extern "C" __global__ void {name}({", ".join(args)}) {{')
    L.append("(void)dr; (void)dc; (void)seed;")
    for c in range(len(p.consts)):
        L.append(f"const T c{c} = (T)c{c}_arg;")
    for r in range(p.nrand):
        L.append(f"const pl_u64 sd{r} = pl_mix(seed + 0x9e3779b97f4a7c15ULL * {r + 1}ULL);")
    body: List[str] = []
    res = _gen_expr(expr, leaf_toks, ctype, body)
    if not red:
        b0, b1, unit, colmajor = (dest_tok[2] == "1", dest_tok[3] == "1", dest_tok[4] == "1",
                                  dest_tok[5] == "1")
        didx = " + ".join(([] if b0 else ["i * dr"]) + ([] if b1 else ["j" if unit else "j * dc"])) or "0"
        L.append("PL_GRID_LOOP(e, M * N) {")
        if colmajor:
            L.append("const pl_i64 i = e % M, j = e / M;")
        else:
            L.append("const pl_i64 i = e / N, j = e % N;")
        L += body
        L.append(f"pd[{didx}] = {_store(dch, res)};")
        L.append("}")
        L.append("}")
        return name, "\n".join(L) + "\n"
    # One thread per output element, looping over the reduced axis.
    outer, inner, n_out, n_in = ("i", "j", "M", "N") if axis == 1 else ("j", "i", "N", "M")
    dstore = "pd[i * dr]" if axis == 1 else "pd[j * dc]"
    arg = red in ("argmax", "argmin")
    better = ">" if red in ("max", "argmax") else "<"
    L.append(f"PL_GRID_LOOP({outer}, {n_out}) {{")
    if red == "sum":
        L.append("double acc = 0.0;")
    else:
        L.append(f"T acc = {'-' if better == '>' else ''}PL_INF; " +
                 ("pl_i64 best = 0;" if arg else "int nan = 0;"))
    L.append(f"for (pl_i64 {inner} = 0; {inner} < {n_in}; ++{inner}) {{")
    L += body
    if red == "sum":
        L.append(f"acc += (double){res};")
    elif arg:
        L.append(f"if ({res} {better} acc || ({res} != {res} && acc == acc)) "
                 f"{{ acc = {res}; best = {inner}; }}")
    else:
        L.append(f"nan |= ({res} != {res}); acc = {res} {better} acc ? {res} : acc;")
    L.append("}")
    if red == "sum":
        final = "acc"
    elif arg:
        final = "(T)best"
    else:
        final = "(nan ? PL_NAN : acc)"
    L.append(f"{dstore} = {_store(dch, final)};")
    L.append("}")
    L.append("}")
    return name, "\n".join(L) + "\n"


# --------------------------------------------------------------------------------------------
# Running passes
# --------------------------------------------------------------------------------------------

def _shape_error(shapes, out_shape):
    return ValueError(f"plait.neon: operands with shapes {', '.join(str(tuple(s)) for s in shapes)} "
                      f"do not broadcast together into out of shape {tuple(out_shape)}")


def _space(leaves) -> Optional[Tuple[int, int]]:
    """The broadcast (m, n) of a pass's leaves; None when it has none."""
    if not leaves:
        return None
    m = n = 1
    for a in leaves:
        s0, s1 = a.shape
        if s0 != 1:
            if m not in (1, s0):
                raise _shape_error([x.shape for x in leaves], (m, n))
            m = s0
        if s1 != 1:
            if n not in (1, s1):
                raise _shape_error([x.shape for x in leaves], (m, n))
            n = s1
    return m, n


def _extent(a, ptr) -> Tuple[int, int]:
    lo = hi = ptr
    for d, s in zip(a.shape, a.strides):
        if d > 1:
            if s >= 0:
                hi += (d - 1) * s
            else:
                lo += (d - 1) * s
    return lo, hi + a.itemsize


def _dest_tok(dest, colmajor_ok=True) -> str:
    m, n = dest.shape
    isz = dest.itemsize
    unit = n == 1 or dest.strides[1] == isz
    colmajor = colmajor_ok and m > 1 and n > 1 and not unit and dest.strides[0] == isz
    return f"O{dest.dtype.char}{int(m == 1)}{int(n == 1)}{int(unit)}{int(colmajor)}"


class _Runner:
    """Runs one tree's passes with one launcher; draws the seed once, when a pass needs it."""

    def __init__(self, launcher, rng):
        self.L = launcher
        self.rng = rng
        self._seed = None
        self._rand_passes = 0

    def seed(self) -> int:
        """The seed of the next pass that draws: one 64-bit draw from the RNG per tree (the CPU
        fused pass's draw), and for each later pass of the same tree a distinct offset of it."""
        if self._seed is None:
            from ._fuse import _seed
            self._seed = _seed(self.rng) & ((1 << 64) - 1)
        k = self._rand_passes
        self._rand_passes += 1
        return (self._seed + k * 0xD1B54A32D192ED03) & ((1 << 64) - 1)

    def run_pass(self, tree, dest, red=None, axis=None, space=None) -> None:
        p = _Pass()
        expr = _lower(tree, p, self.reduce)
        leaves = p.leaves
        if red:
            sp = _space(leaves)
            if sp is None:
                raise _Unsupported      # a reduction of scalars and rand only: no shape
            m, n = sp
        else:
            m, n = dest.shape
            for a in leaves:
                s0, s1 = a.shape
                if (s0 != 1 and s0 != m) or (s1 != 1 and s1 != n):
                    raise _shape_error([x.shape for x in leaves], dest.shape)
        ctype = "double" if p.double else "float"
        dtok = _dest_tok(dest, colmajor_ok=not red)
        key = (tuple(p.toks), dtok, red, axis, ctype)
        src = _sources.get(key)
        if src is None:
            with _lock:
                src = _sources.get(key)
                if src is None:
                    src = _gen_source(ctype, expr, p, dtok, red, axis)[1]
                    _sources[key] = src
                    _stats["kernels"] += 1
        # Compiled kernels are cached on the launcher, by signature (and device).
        token = getattr(self.L, "token", None)
        fkey = (key, token() if token is not None else 0)
        fns = self.L.__dict__.setdefault("_plait_kernels", {})
        fn = fns.get(fkey)
        if fn is None:
            fn = self.L.function(src, KERNEL_RED if red else KERNEL_EW)
            if not isinstance(self.L, _Recorder):
                fns[fkey] = fn
        # Inputs that overlap dest without being dest's own elements are read from a copy.
        dptr = self.L.ptr(dest)
        dext = _extent(dest, dptr)
        xp = self.L.xp
        args: List[Any] = [dest, *self._strides(dest), np.int64(m), np.int64(n),
                           np.uint64(self.seed() if p.nrand else 0)]
        for a in leaves:
            ptr = self.L.ptr(a)
            lo, hi = _extent(a, ptr)
            if lo < dext[1] and dext[0] < hi and (red or not (
                    ptr == dptr and a.strides == dest.strides and a.shape == dest.shape)):
                a = xp.array(a, copy=True)
            args += [a, *self._strides(a)]
        args += [np.float64(c) for c in p.consts]
        n_out = (m if axis == 1 else n) if red else m * n
        self.L.launch(fn, n_out, tuple(args))
        _stats["passes"] += 1

    @staticmethod
    def _strides(a):
        isz = a.itemsize
        s0 = a.strides[0] // isz if a.shape[0] != 1 else 0
        s1 = a.strides[1] // isz if a.shape[1] != 1 else 0
        return np.int64(s0), np.int64(s1)

    def _temp_dtype(self, tree):
        p = _Pass()
        # Only the compute type matters: float64 leaves or constants make it double.
        stack = [tree]
        while stack:
            x = stack.pop()
            if isinstance(x, tuple):
                stack += [x[1], x[2]]
            elif _is_array(x):
                if x.dtype.char == "d":
                    p.double = True
            elif isinstance(x, np.float64) and not isinstance(x, float):
                p.double = True
        return np.float64 if p.double else np.float32

    def _reduced_space(self, tree):
        leaves = []
        stack = [tree]
        while stack:
            x = stack.pop()
            if isinstance(x, tuple):
                if x[0]["op"] in _REDUCTION_OPS:
                    ax = x[0].get("axis")
                    sp = self._reduced_space(x[1])
                    leaves.append(np.empty((1 if ax in (0, None) else sp[0],
                                            1 if ax in (1, None) else sp[1]), np.int8))
                elif x[0]["op"] == "transpose":
                    leaves.append(x[1].T)
                else:
                    stack += [x[1], x[2]]
            elif _is_array(x) and x.ndim == 2:
                leaves.append(x)
        sp = _space(leaves)
        if sp is None:
            raise _Unsupported
        return sp

    def reduce(self, tree, op, axis, dest=None):
        """Run the reduction `op` over `axis` of `tree` into `dest` (a new temporary if None)."""
        m, n = self._reduced_space(tree)
        xp = self.L.xp
        tdt = self._temp_dtype(tree)
        if axis is None:
            rows = xp.empty((m, 1), tdt)
            self.run_pass(tree, rows, op, 1)
            if dest is None:
                dest = xp.empty((1, 1), tdt)
            self.run_pass(rows, dest, op, 0)
            return dest
        if dest is None:
            dest = xp.empty((1 if axis == 0 else m, 1 if axis == 1 else n), tdt)
        self.run_pass(tree, dest, op, axis)
        return dest


def _out_ok(out) -> bool:
    if not _is_array(out) or out.ndim != 2 or out.dtype.char not in "efd" or not out.dtype.isnative:
        return False
    if out.shape[0] == 0 or out.shape[1] == 0:
        return False
    isz = out.itemsize
    return not (out.strides[0] % isz or out.strides[1] % isz)


def _run_tree(tree, out, runner: _Runner) -> None:
    if isinstance(tree, tuple) and tree[0]["op"] in _REDUCTION_OPS:
        axis = tree[0].get("axis")
        m, n = runner._reduced_space(tree[1])
        want = (1 if axis in (0, None) else m, 1 if axis in (1, None) else n)
        if tuple(out.shape) == want and (axis is not None or tree[0]["op"] in ("sum", "max", "min")):
            runner.reduce(tree[1], tree[0]["op"], axis, dest=out)
            return
    runner.run_pass(tree, out)


def execute(tree, out, rng=None, launcher=None) -> bool:
    """Evaluate the op-tree `tree` into the 2-D device array `out`; True when done.

    False (nothing computed, nothing written) for trees this module does not fuse or when no
    launcher is available (no CuPy); a ValueError naming the shapes for operands that do not
    broadcast into `out`. With `rand` (or stochastic `binarize`) in the tree, one 64-bit seed
    is drawn from `rng` (numpy's global RNG when None).
    """
    L = launcher if launcher is not None else _get_default_launcher()
    if L is None or not _out_ok(out):
        _stats["fallbacks"] += 1
        return False
    try:
        _check(tree)
    except _Unsupported:
        _stats["fallbacks"] += 1
        return False
    try:
        _run_tree(tree, out, _Runner(L, rng))
    except _Unsupported:
        _stats["fallbacks"] += 1
        return False
    return True


def sources_for(tree, out) -> List[str]:
    """The CUDA sources `execute(tree, out)` compiles and launches, in order (nothing runs):
    `tree` and `out` are host (numpy) arrays standing in for device ones."""
    rec = _Recorder()
    if not _out_ok(out):
        raise ValueError("sources_for: out must be a non-empty 2-D float array")
    _check(tree)
    _run_tree(tree, out, _Runner(rec, np.random.RandomState(0)))
    return rec.sources
