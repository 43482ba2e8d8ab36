"""The custom CUDA kernels and CupyOps.

Four layers, so that most of this runs on a machine without a GPU:

1. the kernel sources compile to PTX with ``nvcc`` (skipped without nvcc);
2. the same sources, compiled for the host by g++ with a small emulation header (one thread
   at a time, ``atomicAdd`` as a plain add), give numpy's results (skipped without g++);
3. without cupy: the modules import, CupyOps refuses to construct with a clear error, and
   every override keeps the exact signature of ``Ops``;
4. ``gpu``-marked: every CupyOps override equals the reference ``Ops`` on numpy.
"""
from __future__ import annotations

import ctypes
import inspect
import re
import shutil
import subprocess
import sys
import textwrap

import numpy
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from plait.backends import _kernels_gpu as kg

DTYPES = ["float32", "float64"]
RAGGED = [0, 3, 1, 0, 4, 2, 0, 1]  # zero-length sequences at the start, middle and end


def _tol(dtype):
    return dict(rtol=2e-5, atol=2e-6) if dtype == "float32" else dict(rtol=1e-11, atol=1e-12)


# ---------------------------------------------------------------------------------------
# The kernel module itself
# ---------------------------------------------------------------------------------------


def test_kernel_module_imports_without_cupy():
    code = (
        "import sys\n"
        "import plait.backends._kernels_gpu as k, plait.backends.cupy_ops\n"
        "k.kernel_sources('float64')\n"
        "print(sorted(m for m in ('cupy', 'torch', 'tensorflow', 'mxnet') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_kernel_names_follow_the_convention_and_cover_the_fast_paths():
    for name in kg.KERNELS:
        assert re.fullmatch(r"plait_[a-z0-9_]+_(fwd|bwd)", name), name
    expected_ops = [
        "seq2col", "maxout", "relu", "mish", "swish", "dish", "gelu", "clipped_linear",
        "hard_swish", "hard_swish_mobilenet", "reduce_sum", "reduce_mean", "reduce_max",
        "sigmoid", "softmax",
    ]
    for op in expected_ops:
        assert f"plait_{op}_fwd" in kg.KERNELS and f"plait_{op}_bwd" in kg.KERNELS, op
    for name in ["plait_hash_fwd", "plait_gather_add_fwd", "plait_scatter_add_fwd",
                 "plait_adam_fwd", "plait_clip_gradient_fwd"]:
        assert name in kg.KERNELS


@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_sources_define_each_kernel_once(dtype):
    sources = kg.kernel_sources(dtype)
    assert set(sources) == set(kg.KERNELS)
    combined = kg.combined_source(dtype)
    for name, src in sources.items():
        real = "float" if dtype == "float32" else "double"
        assert f"typedef {real} real_t;" in src
        assert src.count(f"void {name}(") == 1
        assert combined.count(f"void {name}(") == 1
        assert "__syncthreads" not in src and "__shared__" not in src


def test_unknown_family_and_dtype_are_rejected():
    with pytest.raises(KeyError, match="unknown kernel family"):
        kg.family_source("no_such_op")
    with pytest.raises(NotImplementedError, match="float16"):
        kg.family_source("relu", "float16")


# ---------------------------------------------------------------------------------------
# 1. PTX compilation with nvcc
# ---------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_every_module_compiles_to_ptx(tmp_path):
    files = []
    for dtype in DTYPES:
        for family in kg.families():
            path = tmp_path / f"{family}_{dtype}.cu"
            path.write_text(kg.family_source(family, dtype))
            files.append(path)
    # One nvcc process for all modules: they are small, and start-up dominates.
    proc = subprocess.run(
        ["nvcc", "--ptx", "-arch=sm_80", *kg.COMPILE_OPTIONS, "-odir", str(tmp_path)]
        + [str(f) for f in files],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    n_entries = 0
    for dtype in DTYPES:
        for family in kg.families():
            ptx = (tmp_path / f"{family}_{dtype}.ptx").read_text()
            names = re.findall(r"\.entry\s+(plait_\w+)\(", ptx)
            assert sorted(names) == sorted(n for n, f in kg.KERNELS.items() if f == family)
            n_entries += len(names)
            if dtype == "float32" and family != "clip_gradient":
                # float kernels must not fall back to double-precision math (clip_gradient
                # divides in double once per thread, to round its scale as the reference does).
                assert not re.search(r"\.f64\b", ptx), family
    assert n_entries == 2 * len(kg.KERNELS)


# ---------------------------------------------------------------------------------------
# 2. Host emulation: the CUDA sources compiled by g++, one thread at a time
# ---------------------------------------------------------------------------------------

EMULATION_HEADER = r"""
#include <math.h>
#define __global__
#define __device__
#define __forceinline__ inline
struct pl_emu_dim3 { unsigned int x, y, z; };
static pl_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
// Threads run one after another, so a plain read-modify-write is atomic.
template <typename T> inline T atomicAdd(T* address, T value) {
    T old = *address;
    *address = old + value;
    return old;
}
extern "C" void pl_emu_set_thread(unsigned int block, unsigned int thread,
                                  unsigned int n_blocks, unsigned int n_threads) {
    blockIdx.x = block; threadIdx.x = thread; gridDim.x = n_blocks; blockDim.x = n_threads;
    blockIdx.y = blockIdx.z = threadIdx.y = threadIdx.z = 0;
    gridDim.y = gridDim.z = blockDim.y = blockDim.z = 1;
}
"""


class _Emulator:
    """Runs a dtype's kernels on the host through ctypes, with a small emulated grid."""

    # Deliberately odd: fewer threads than work items, so the grid-stride loops wrap.
    GRID = (2, 3)

    def __init__(self, path):
        self.lib = ctypes.CDLL(str(path))
        self.lib.pl_emu_set_thread.argtypes = [ctypes.c_uint] * 4

    @staticmethod
    def _arg(value):
        if isinstance(value, numpy.ndarray):
            assert value.flags["C_CONTIGUOUS"]
            return ctypes.c_void_p, value.ctypes.data_as(ctypes.c_void_p)
        if value is None:
            return ctypes.c_void_p, None
        kinds = {
            numpy.float32: ctypes.c_float,
            numpy.float64: ctypes.c_double,
            numpy.int64: ctypes.c_longlong,
            numpy.uint32: ctypes.c_uint,
        }
        ctype = kinds[type(value)]
        return ctype, ctype(value.item())

    def __call__(self, name, *args):
        fn = getattr(self.lib, name)
        converted = [self._arg(a) for a in args]
        fn.argtypes = [c for c, _ in converted]
        fn.restype = None
        n_blocks, n_threads = self.GRID
        for block in range(n_blocks):
            for thread in range(n_threads):
                self.lib.pl_emu_set_thread(block, thread, n_blocks, n_threads)
                fn(*[v for _, v in converted])


@pytest.fixture(scope="module")
def emulators(tmp_path_factory):
    gxx = shutil.which("g++") or shutil.which("c++")
    if gxx is None:
        pytest.skip("needs a host C++ compiler for the kernel emulation")
    tmp = tmp_path_factory.mktemp("gpu_emulation")
    libs = {}
    for dtype in DTYPES:
        src = tmp / f"kernels_{dtype}.cpp"
        src.write_text(EMULATION_HEADER + kg.combined_source(dtype))
        lib = tmp / f"kernels_{dtype}.so"
        proc = subprocess.run(
            [gxx, "-O1", "-ffp-contract=off", "-shared", "-fPIC", "-std=c++14", "-o", str(lib), str(src)],
            capture_output=True, text=True,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        libs[dtype] = _Emulator(lib)
    return libs


def _ends(lengths):
    return numpy.cumsum(numpy.asarray(lengths, dtype="int64")).astype("int32")


def _rand(rng, shape, dtype, scale=3.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _np_seq2col(X, nW, lengths):
    nB, nI = X.shape
    nF = 2 * nW + 1
    Y = numpy.zeros((nB, nF, nI), dtype=X.dtype)
    start = 0
    for length in lengths:
        for b in range(start, start + length):
            for f in range(nF):
                src = b - nW + f
                if start <= src < start + length:
                    Y[b, f] = X[src]
        start += length
    return Y.reshape(nB, nF * nI)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nW", [1, 2, 3])
@pytest.mark.parametrize("lengths", [None, RAGGED, [5], [1, 1, 1, 1, 1]])
def test_emulated_seq2col(emulators, dtype, nW, lengths):
    run = emulators[dtype]
    rng = numpy.random.default_rng(nW)
    nB = sum(lengths) if lengths is not None else 9
    nI = 4
    X = _rand(rng, (nB, nI), dtype)
    seq_lengths = lengths if lengths is not None else [nB]
    ends = _ends(lengths) if lengths is not None else numpy.zeros(1, dtype="int32")
    nL = len(lengths) if lengths is not None else 0
    nF = 2 * nW + 1
    Y = numpy.full((nB, nF * nI), numpy.nan, dtype=dtype)
    run("plait_seq2col_fwd", Y, X, ends, kg.i64(nL), kg.i64(nW), kg.i64(nB), kg.i64(nI))
    assert_array_equal(Y, _np_seq2col(X, nW, seq_lengths))
    # Backward is the adjoint of forward: <seq2col(X), dY> == <X, backprop(dY)>.
    dY = _rand(rng, (nB, nF * nI), dtype)
    dX = numpy.full((nB, nI), numpy.nan, dtype=dtype)
    run("plait_seq2col_bwd", dX, dY, ends, kg.i64(nL), kg.i64(nW), kg.i64(nB), kg.i64(nI))
    # Explicit adjoint: scatter every dY entry back to the row it was copied from.
    expected = numpy.zeros((nB, nI), dtype="float64")
    dY3 = dY.reshape(nB, nF, nI)
    start = 0
    for length in seq_lengths:
        for b in range(start, start + length):
            for f in range(nF):
                src = b - nW + f
                if start <= src < start + length:
                    expected[src] += dY3[b, f]
        start += length
    assert_allclose(dX, expected, **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_maxout(emulators, dtype):
    run = emulators[dtype]
    rng = numpy.random.default_rng(0)
    nB, nO, nP = 5, 3, 4
    X = _rand(rng, (nB, nO, nP), dtype)
    X[0, 0] = [1.0, 2.0, 2.0, -1.0]  # a tie goes to the first position
    X[1, 1, 2] = numpy.nan  # a NaN wins, as in numpy
    Y = numpy.zeros((nB, nO), dtype=dtype)
    which = numpy.full((nB, nO), -1, dtype="int32")
    run("plait_maxout_fwd", Y, which, X, kg.i64(nB * nO), kg.i64(nP))
    assert_array_equal(Y, X.max(axis=-1))
    assert_array_equal(which, X.argmax(axis=-1))
    dY = _rand(rng, (nB, nO), dtype)
    dX = numpy.full((nB, nO, nP), numpy.nan, dtype=dtype)
    run("plait_maxout_bwd", dX, dY, which, kg.i64(nB * nO), kg.i64(nP))
    expected = numpy.zeros_like(dX)
    numpy.put_along_axis(expected, which[..., None].astype("int64"), dY[..., None], axis=-1)
    assert_array_equal(dX, expected)


def _erf(X):
    from scipy.special import erf

    return erf(X.astype("float64"))


def _sigmoid(X):
    return 1.0 / (1.0 + numpy.exp(-numpy.clip(X.astype("float64"), -20.0, 20.0)))


def _softplus(X):
    return numpy.logaddexp(0.0, X.astype("float64"))


# The inputs include 2.5 exactly, so that `x >= threshold` is told apart from `x > threshold`.
MISH_THRESHOLD = 2.5

# name -> (forward(X), derivative(X)) in float64.
ACTIVATIONS = {
    "relu": (lambda X: numpy.maximum(X, 0), None),
    "sigmoid": (_sigmoid, None),
    "mish": (
        lambda X: numpy.where(X >= MISH_THRESHOLD, X, X * numpy.tanh(_softplus(X))),
        lambda X: numpy.where(
            X >= MISH_THRESHOLD,
            1.0,
            numpy.tanh(_softplus(X))
            + X * _sigmoid(X) * (1 - numpy.tanh(_softplus(X)) ** 2),
        ),
    ),
    "swish": (lambda X: X * _sigmoid(X), None),
    "dish": (
        lambda X: 0.5 * X * (1 + X / numpy.sqrt(1 + X * X)),
        lambda X: 0.5 + X / numpy.sqrt(1 + X * X) - 0.5 * X**3 / (1 + X * X) ** 1.5,
    ),
    "gelu": (
        lambda X: X * 0.5 * (1 + _erf(X / numpy.sqrt(2.0))),
        lambda X: 0.5 * (1 + _erf(X / numpy.sqrt(2.0)))
        + X * numpy.exp(-0.5 * X * X) / numpy.sqrt(2 * numpy.pi),
    ),
    "hard_swish": (
        lambda X: X * numpy.clip(0.2 * X + 0.5, 0, 1),
        lambda X: numpy.where(X > 2.5, 1.0, numpy.where(X < -2.5, 0.0, 0.4 * X + 0.5)),
    ),
    "hard_swish_mobilenet": (
        lambda X: X * numpy.clip(X + 3, 0, 6) / 6,
        lambda X: numpy.where(X > 3, 1.0, numpy.where(X < -3, 0.0, (2 * X + 3) / 6)),
    ),
}


def _activation_input(dtype):
    rng = numpy.random.default_rng(7)
    X = _rand(rng, (37, 5), dtype, scale=4.0)
    # Hit the branch points and the saturated tails.
    X.flat[:12] = [0.0, -0.0, 2.5, -2.5, 3.0, -3.0, 19.5, 20.0, 25.0, -25.0, 60.0, -60.0]
    return X


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
def test_emulated_activations(emulators, dtype, op):
    run = emulators[dtype]
    forward, derivative = ACTIVATIONS[op]
    X = _activation_input(dtype)
    X64 = X.astype("float64")
    N = kg.i64(X.size)
    extra = (kg.real(dtype, MISH_THRESHOLD),) if op == "mish" else ()
    Y = numpy.full_like(X, numpy.nan)
    run(f"plait_{op}_fwd", Y, X, *extra, N)
    if op == "relu":
        assert_array_equal(Y, numpy.maximum(X, 0))
    assert_allclose(Y, forward(X64), **_tol(dtype))
    dY = _rand(numpy.random.default_rng(8), X.shape, dtype)
    dX = numpy.full_like(X, numpy.nan)
    if op == "relu":
        run("plait_relu_bwd", dX, dY, Y, N)
        expected = dY * (Y > 0)
        assert_array_equal(dX, expected)
    elif op == "sigmoid":
        run("plait_sigmoid_bwd", dX, dY, Y, N)
        expected = dY * (Y * (1 - Y))
        assert_array_equal(dX, expected)
    elif op == "swish":
        run("plait_swish_bwd", dX, dY, X, Y, N)
        s = _sigmoid(X64)
        expected = dY * (Y + s * (1 - Y))
    else:
        run(f"plait_{op}_bwd", dX, dY, X, *extra, N)
        expected = dY * derivative(X64)
    assert_allclose(dX, expected, **_tol(dtype))
    # In place (output aliasing the input) gives the same values.
    Xi = X.copy()
    run(f"plait_{op}_fwd", Xi, Xi, *extra, N)
    assert_array_equal(Xi, Y)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "slope,offset,lo,hi",
    [(1.0, 0.0, 0.0, 6.0), (0.2, 0.5, 0.0, 1.0), (1.0, 0.0, -1.0, 1.0), (-2.0, 1.0, -3.0, 2.0)],
)
def test_emulated_clipped_linear(emulators, dtype, slope, offset, lo, hi):
    run = emulators[dtype]
    X = _activation_input(dtype)
    N = kg.i64(X.size)
    Y = numpy.full_like(X, numpy.nan)
    r = lambda v: kg.real(dtype, v)  # noqa: E731
    run("plait_clipped_linear_fwd", Y, X, r(slope), r(offset), r(lo), r(hi), N)
    assert_allclose(Y, numpy.clip(X * r(slope) + r(offset), lo, hi), **_tol(dtype))
    dY = _rand(numpy.random.default_rng(3), X.shape, dtype)
    dX = numpy.full_like(X, numpy.nan)
    run("plait_clipped_linear_bwd", dX, dY, X, r(slope), r(offset), r(lo), r(hi), N)
    linear = X * r(slope) + r(offset)
    mask = (r(lo) < linear) & (linear < r(hi))
    assert_array_equal(dX, dY * numpy.where(mask, r(slope), r(0.0)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lengths", [RAGGED, [4], [1, 2, 3], [0, 0]])
def test_emulated_reductions(emulators, dtype, lengths):
    run = emulators[dtype]
    rng = numpy.random.default_rng(len(lengths))
    nR, nS, nO = sum(lengths), len(lengths), 3
    X = _rand(rng, (nR, nO), dtype)
    ends = _ends(lengths)
    starts = ends - numpy.asarray(lengths)
    sums = numpy.stack([X[s:e].sum(axis=0) for s, e in zip(starts, ends)])
    means = numpy.stack(
        [X[s:e].mean(axis=0) if e > s else numpy.zeros(nO, dtype) for s, e in zip(starts, ends)]
    )
    Y = numpy.full((nS, nO), numpy.nan, dtype=dtype)
    run("plait_reduce_sum_fwd", Y, X, ends, kg.i64(nS), kg.i64(nO))
    assert_allclose(Y, sums, **_tol(dtype))
    run("plait_reduce_mean_fwd", Y, X, ends, kg.i64(nS), kg.i64(nO))
    assert_allclose(Y, means, **_tol(dtype))

    dY = _rand(rng, (nS, nO), dtype)
    dX = numpy.full((nR, nO), numpy.nan, dtype=dtype)
    run("plait_reduce_sum_bwd", dX, dY, ends, kg.i64(nS), kg.i64(nR), kg.i64(nO))
    assert_array_equal(dX, numpy.repeat(dY, lengths, axis=0))
    run("plait_reduce_mean_bwd", dX, dY, ends, kg.i64(nS), kg.i64(nR), kg.i64(nO))
    safe = numpy.maximum(numpy.asarray(lengths), 1).astype(dtype)[:, None]
    assert_allclose(dX, numpy.repeat(dY / safe, lengths, axis=0), **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_reduce_max(emulators, dtype):
    run = emulators[dtype]
    lengths = [3, 1, 4, 2]
    rng = numpy.random.default_rng(11)
    nR, nS, nO = sum(lengths), len(lengths), 5
    X = _rand(rng, (nR, nO), dtype)
    X[0:3, 0] = [1.0, 7.0, 7.0]  # tie: first row wins
    X[4, 1] = numpy.nan  # NaN wins
    ends = _ends(lengths)
    Y = numpy.zeros((nS, nO), dtype=dtype)
    which = numpy.full((nS, nO), -1, dtype="int32")
    run("plait_reduce_max_fwd", Y, which, X, ends, kg.i64(nS), kg.i64(nO))
    starts = ends - numpy.asarray(lengths)
    assert_array_equal(Y, numpy.stack([X[s:e].max(axis=0) for s, e in zip(starts, ends)]))
    assert_array_equal(which, numpy.stack([X[s:e].argmax(axis=0) for s, e in zip(starts, ends)]))
    dY = _rand(rng, (nS, nO), dtype)
    dX = numpy.zeros((nR, nO), dtype=dtype)
    run("plait_reduce_max_bwd", dX, dY, which, ends, kg.i64(nS), kg.i64(nO))
    expected = numpy.zeros_like(dX)
    for s in range(nS):
        for o in range(nO):
            expected[starts[s] + which[s, o], o] = dY[s, o]
    assert_array_equal(dX, expected)


def _murmur3_x64_128_py(key: int, seed: int):
    """Plain-Python MurmurHash3_x64_128 of an 8-byte little-endian key (the test oracle)."""
    mask = (1 << 64) - 1

    def rotl(x, r):
        return ((x << r) | (x >> (64 - r))) & mask

    def fmix(k):
        k ^= k >> 33
        k = (k * 0xFF51AFD7ED558CCD) & mask
        k ^= k >> 33
        k = (k * 0xC4CEB9FE1A85EC53) & mask
        k ^= k >> 33
        return k

    k1 = (key * 0x87C37B91114253D5) & mask
    k1 = rotl(k1, 31)
    k1 = (k1 * 0x4CF5AD432745937F) & mask
    h1 = seed ^ k1 ^ 8
    h2 = seed ^ 8
    h1 = (h1 + h2) & mask
    h2 = (h2 + h1) & mask
    h1, h2 = fmix(h1), fmix(h2)
    h1 = (h1 + h2) & mask
    h2 = (h2 + h1) & mask
    return [h1 & 0xFFFFFFFF, h1 >> 32, h2 & 0xFFFFFFFF, h2 >> 32]


HASH_KEYS = numpy.array(
    [0, 1, 2, 255, 2**32 - 1, 2**32, 2**63, 2**64 - 1, 123456789012345678, 42], dtype="uint64"
)


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**32 - 1])
def test_emulated_hash(emulators, seed):
    run = emulators["float32"]
    out = numpy.zeros((len(HASH_KEYS), 4), dtype="uint32")
    run("plait_hash_fwd", out, HASH_KEYS, kg.u32(seed), kg.i64(len(HASH_KEYS)))
    expected = numpy.array([_murmur3_x64_128_py(int(k), seed) for k in HASH_KEYS], dtype="uint32")
    assert_array_equal(out, expected)


@pytest.mark.parametrize("seed", [0, 7, 2**31 + 5])
def test_emulated_hash_matches_thinc(emulators, seed):
    thinc_numpy_ops = pytest.importorskip("thinc.backends.numpy_ops")
    run = emulators["float64"]
    keys = numpy.random.default_rng(seed % 1000).integers(0, 2**63, size=50, dtype="uint64")
    keys = numpy.concatenate([keys, HASH_KEYS])
    out = numpy.zeros((len(keys), 4), dtype="uint32")
    run("plait_hash_fwd", out, keys, kg.u32(seed), kg.i64(len(keys)))
    assert_array_equal(out, thinc_numpy_ops.NumpyOps().hash(keys, seed))


@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_gather_and_scatter_add(emulators, dtype):
    run = emulators[dtype]
    rng = numpy.random.default_rng(5)
    nT, nO, nB, nK = 6, 4, 5, 3
    table = _rand(rng, (nT, nO), dtype)
    indices = rng.integers(-nT, nT, size=(nB, nK)).astype("int32")
    indices[0] = [2, 2, -1]  # repeats and a negative index
    Y = numpy.full((nB, nO), numpy.nan, dtype=dtype)
    run("plait_gather_add_fwd", Y, table, indices, kg.i64(nT), kg.i64(nO), kg.i64(nB), kg.i64(nK))
    assert_allclose(Y, table[indices].sum(axis=1), **_tol(dtype))

    flat = indices.reshape(-1).copy()
    values = _rand(rng, (flat.size, nO), dtype)
    out = table.copy()
    run("plait_scatter_add_fwd", out, flat, values, kg.i64(nT), kg.i64(flat.size), kg.i64(nO))
    expected = table.copy()
    numpy.add.at(expected, flat, values)
    assert_allclose(out, expected, **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_adam_and_clip_gradient(emulators, dtype):
    run = emulators[dtype]
    rng = numpy.random.default_rng(9)
    W, G = _rand(rng, (23,), dtype), _rand(rng, (23,), dtype)
    M1, M2 = _rand(rng, (23,), dtype), numpy.abs(_rand(rng, (23,), dtype))
    b1, b2, eps, lr, mod = 0.9, 0.999, 1e-8, 0.01, 0.5
    r = lambda v: kg.real(dtype, v)  # noqa: E731
    W2, G2, M12, M22 = W.copy(), G.copy(), M1.copy(), M2.copy()
    run("plait_adam_fwd", W2, G2, M12, M22, r(b1), r(b2), r(1 - b1), r(1 - b2), r(eps), r(lr),
        r(mod), kg.i64(W.size))
    assert_array_equal(G2, numpy.zeros_like(G))
    m1 = M1 * b1 + G * (1 - b1)
    m2 = M2 * b2 + G * G * (1 - b2)
    assert_allclose(M12, m1, **_tol(dtype))
    assert_allclose(M22, m2, **_tol(dtype))
    assert_allclose(W2, W - lr * (m1 / (mod * numpy.sqrt(m2) + eps)), **_tol(dtype))

    norm = numpy.array([numpy.linalg.norm(G)], dtype=dtype)
    n = float(norm[0])
    for threshold, scaled in [(n * 2, False), (n / 4, True), (n, True)]:
        G2 = G.copy()
        run("plait_clip_gradient_fwd", G2, norm, numpy.float64(threshold), kg.i64(G.size))
        expected = G * numpy.dtype(dtype).type(threshold / n) if scaled else G
        assert_array_equal(G2, expected)
    # A zero gradient has norm 0 and is left alone (no division by zero).
    Z = numpy.zeros(5, dtype=dtype)
    run("plait_clip_gradient_fwd", Z, numpy.zeros(1, dtype=dtype), numpy.float64(0.0), kg.i64(5))
    assert_array_equal(Z, numpy.zeros(5, dtype=dtype))


# ---------------------------------------------------------------------------------------
# 3. CupyOps without a GPU: import, construction error, signatures
# ---------------------------------------------------------------------------------------


def _overrides():
    from plait.backends.cupy_ops import CupyOps
    from plait.backends.ops import Ops

    return [
        name
        for name, value in vars(CupyOps).items()
        if callable(value) and not name.startswith("_") and hasattr(Ops, name)
    ]


def test_cupy_ops_overrides_the_documented_fast_paths():
    expected = {
        "cblas", "asarray", "to_numpy", "gemm", "seq2col", "backprop_seq2col", "maxout",
        "backprop_maxout", "relu", "backprop_relu", "mish", "backprop_mish", "swish",
        "backprop_swish", "dish", "backprop_dish", "gelu", "backprop_gelu", "clipped_linear",
        "backprop_clipped_linear", "hard_swish", "backprop_hard_swish", "hard_swish_mobilenet",
        "backprop_hard_swish_mobilenet", "reduce_sum", "reduce_mean", "reduce_max",
        "backprop_reduce_sum", "backprop_reduce_mean", "backprop_reduce_max", "hash",
        "gather_add", "scatter_add", "adam", "clip_gradient", "sigmoid", "backprop_sigmoid",
        "softmax", "backprop_softmax", "get_dropout_mask",
    }
    assert expected <= set(_overrides())


def test_cupy_ops_overrides_keep_the_ops_signatures():
    from plait.backends.cupy_ops import CupyOps
    from plait.backends.ops import Ops

    names = _overrides()
    assert names
    for name in names:
        assert inspect.signature(getattr(CupyOps, name)) == inspect.signature(getattr(Ops, name)), name


def test_cupy_ops_class_attributes():
    from plait.backends.cupy_ops import CupyOps
    from plait.backends.ops import Ops

    assert CupyOps.name == "cupy"
    assert issubclass(CupyOps, Ops)


def _cupy_importable() -> bool:
    try:
        import cupy  # noqa: F401
    except Exception:
        return False
    return True


@pytest.mark.skipif(_cupy_importable(), reason="checks the behaviour without cupy")
def test_computing_with_cupy_ops_without_cupy_is_a_clear_error():
    from plait.backends import get_ops
    from plait.backends.cupy_ops import CupyOps

    assert CupyOps.xp is None  # resolved lazily, None without cupy, as in Thinc
    # As in Thinc, the object can be made (Thinc's tests do, on any machine)...
    for ops in (CupyOps(), get_ops("cupy")):
        assert ops.name == "cupy"
        # ...and the first computation says what is missing.
        with pytest.raises(ValueError, match="CupyOps requires cupy.*NumpyOps"):
            ops.alloc2f(2, 3)
        with pytest.raises(ValueError, match="CupyOps requires cupy"):
            ops.xp


def test_computing_with_cupy_ops_without_a_device_is_a_clear_error():
    code = textwrap.dedent(
        """
        import os, sys
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        from plait.backends.cupy_ops import CupyOps
        try:
            CupyOps().alloc2f(2, 3)
        except ValueError as err:
            print("ValueError:", err)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("ValueError: CupyOps"), out.stdout + out.stderr
    assert "NumpyOps" in out.stdout


# ---------------------------------------------------------------------------------------
# 4. CupyOps end to end: every override equals the reference Ops on numpy.
#
# Each test runs twice: on a real GPU ("cuda", marked gpu, skipped without one), and
# "emulated": with a stand-in `cupy` module whose arrays are a numpy subclass and whose
# RawModule runs the host-compiled kernels of section 2. The emulated run checks all of
# CupyOps' own logic (argument packing, fast-path choice, fallbacks, errors) without a GPU.
# ---------------------------------------------------------------------------------------


from _env import HAS_GPU  # noqa: E402


def gpu(test):
    """Mark a test as needing cupy and a CUDA device (skipped cleanly without them)."""
    test = pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")(test)
    return pytest.mark.gpu(test)


class _FakeDeviceArray(numpy.ndarray):
    """A numpy array posing as a cupy array: `.get()` copies it "to the host"."""

    def get(self):
        return numpy.array(self, copy=True).view(numpy.ndarray)


def _to_fake(value):
    if isinstance(value, numpy.ndarray) and not isinstance(value, _FakeDeviceArray):
        return value.view(_FakeDeviceArray)
    if isinstance(value, numpy.generic):  # cupy returns 0-d arrays, never scalars
        return numpy.asarray(value).view(_FakeDeviceArray)
    if isinstance(value, (tuple, list)):
        return type(value)(_to_fake(v) for v in value)
    return value


def _fake_function(fn):
    def wrapped(*args, **kwargs):
        return _to_fake(fn(*args, **kwargs))

    return wrapped


class _FakeRawModule:
    """`cupy.RawModule` stand-in: kernels run on the host through the emulation libraries."""

    def __init__(self, emulators, code, options=()):
        dtype = "float64" if "typedef double real_t;" in code else "float32"
        self.emulator = emulators[dtype]
        self.names = set(re.findall(r'extern "C" __global__ void (plait_\w+)\(', code))
        assert "--fmad=false" in options

    def get_function(self, name):
        assert name in self.names, name

        def launch(grid, block, args):
            assert grid[0] >= 1 and block[0] >= 1
            # The grid-stride loops make any launch shape correct, so the emulator's small
            # grid stands in for the requested one.
            host_args = [
                numpy.asarray(a) if isinstance(a, _FakeDeviceArray) else a for a in args
            ]
            self.emulator(name, *host_args)

        return launch


def _fake_cupy(emulators):
    import types

    fake = types.ModuleType("cupy")
    fake.__version__ = "0.0.0-emulated"
    fake.ndarray = _FakeDeviceArray
    fake.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDeviceCount=lambda: 1, getDevice=lambda: 0)
    )
    fake.RawModule = lambda code, options=(): _FakeRawModule(emulators, code, options)
    fake.linalg = types.SimpleNamespace(norm=_fake_function(numpy.linalg.norm))
    fake.random = types.SimpleNamespace(
        random_sample=lambda shape, dtype="float64": _to_fake(
            numpy.random.default_rng(0).random(shape, dtype=dtype)
        )
    )

    def asarray(data, dtype=None):
        if isinstance(data, _FakeDeviceArray) and (dtype is None or data.dtype == dtype):
            return data
        return numpy.array(data, dtype=dtype, copy=True).view(_FakeDeviceArray)

    fake.asarray = asarray

    def __getattr__(name):
        value = getattr(numpy, name)
        if callable(value) and not isinstance(value, (type, numpy.ufunc)):
            return _fake_function(value)
        return value

    fake.__getattr__ = __getattr__
    return fake


@pytest.fixture(
    params=[
        "emulated",
        pytest.param(
            "cuda",
            marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")],
        ),
    ]
)
def gops(request, monkeypatch):
    if request.param == "emulated":
        fake = _fake_cupy(request.getfixturevalue("emulators"))
        monkeypatch.setitem(sys.modules, "cupy", fake)
        monkeypatch.setattr(kg, "_MODULES", {})
    from plait.backends.cupy_ops import CupyOps

    return CupyOps()


@pytest.fixture
def ref():
    from plait.backends.ops import Ops

    return Ops()


def _g(X):
    import cupy

    return cupy.asarray(X)


def _gpu_tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if str(dtype) == "float32" else dict(rtol=1e-10, atol=1e-12)


def _same(got, expected, dtype=None, exact=False):
    import cupy

    assert isinstance(got, cupy.ndarray), type(got)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if exact:
        assert_array_equal(got.get(), expected)
    else:
        assert_allclose(got.get(), expected, **_gpu_tol(dtype or expected.dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize(
    "op", ["relu", "sigmoid", "mish", "swish", "dish", "gelu", "hard_swish", "hard_swish_mobilenet",
           "hard_sigmoid", "hard_tanh", "relu_k", "clipped_linear"],
)
def test_cupy_ops_activations_match_reference(gops, ref, op, dtype, inplace):
    X = _activation_input(dtype)
    dY = _rand(numpy.random.default_rng(1), X.shape, dtype)
    kwargs = {"slope": -0.7, "offset": 0.3, "min_val": -1.5, "max_val": 2.0} if op == "clipped_linear" else {}
    Y_ref = getattr(ref, op)(X.copy(), **kwargs)
    Xg = _g(X)
    Y = getattr(gops, op)(Xg, inplace=inplace, **kwargs)
    _same(Y, Y_ref)
    assert (Y is Xg) == inplace
    if not inplace:
        assert_array_equal(Xg.get(), X)  # input untouched
    if op == "relu":
        dX_ref = ref.backprop_relu(dY, Y_ref)
        dYg = _g(dY)
        dX = gops.backprop_relu(dYg, _g(Y_ref), inplace=inplace)
    elif op == "sigmoid":
        # In place, backprop_sigmoid writes into Y (Thinc's convention), not into dY.
        dX_ref = ref.backprop_sigmoid(dY, Y_ref)
        dYg, Yg = _g(dY), _g(Y_ref)
        dX = gops.backprop_sigmoid(dYg, Yg, inplace=inplace)
        _same(dX, dX_ref)
        assert (dX is Yg) == inplace
        return
    elif op == "swish":
        dX_ref = ref.backprop_swish(dY, X, Y_ref)
        dYg = _g(dY)
        dX = gops.backprop_swish(dYg, _g(X), _g(Y_ref), inplace=inplace)
    else:
        dX_ref = getattr(ref, f"backprop_{op}")(dY, X, **kwargs)
        dYg = _g(dY)
        dX = getattr(gops, f"backprop_{op}")(dYg, _g(X), inplace=inplace, **kwargs)
    _same(dX, dX_ref)
    assert (dX is dYg) == inplace


def _softmax_input(dtype, shape=(9, 6)):
    X = _rand(numpy.random.default_rng(11), shape, dtype, scale=6.0)
    X.flat[min(X.size - 1, 8)] = 80.0  # exp would overflow without the max shift
    return X


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_emulated_softmax(emulators, dtype, temperature):
    run = emulators[dtype]
    X = _softmax_input(dtype)
    nR, nC = X.shape
    Z = X.astype("float64") / temperature
    expected = numpy.exp(Z - Z.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    Y = numpy.full_like(X, numpy.nan)
    run("plait_softmax_fwd", Y, X, kg.real(dtype, temperature), kg.i64(nR), kg.i64(nC))
    assert_allclose(Y, expected, **_tol(dtype))
    dY = _rand(numpy.random.default_rng(12), X.shape, dtype)
    dX = numpy.full_like(X, numpy.nan)
    run("plait_softmax_bwd", dX, dY, Y, kg.real(dtype, temperature), kg.i64(nR), kg.i64(nC))
    Y64, dY64 = Y.astype("float64"), dY.astype("float64")
    grad = (Y64 * dY64 - Y64 * (Y64 * dY64).sum(axis=1, keepdims=True)) / temperature
    assert_allclose(dX, grad, rtol=_tol(dtype)["rtol"], atol=_tol(dtype)["atol"] * 10)
    # A NaN anywhere in a row makes that row NaN (numpy's max propagates it); other rows stay.
    Xn = X.copy()
    Xn[3, 4] = numpy.nan
    run("plait_softmax_fwd", Y, Xn, kg.real(dtype, temperature), kg.i64(nR), kg.i64(nC))
    assert numpy.isnan(Y[3]).all() and not numpy.isnan(numpy.delete(Y, 3, axis=0)).any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(9, 6), (2, 3, 5), (7,), (4, 1), (3, 100)])
@pytest.mark.parametrize("temperature", [1.0, 0.5])
@pytest.mark.parametrize("inplace", [False, True])
def test_cupy_ops_softmax_matches_reference(gops, ref, dtype, shape, temperature, inplace):
    X = _softmax_input(dtype, shape)
    Y_ref = ref.softmax(X.copy(), temperature=temperature)
    Xg = _g(X)
    Y = gops.softmax(Xg, inplace=inplace, temperature=temperature)
    _same(Y, Y_ref)
    assert (Y is Xg) == inplace
    dY = _rand(numpy.random.default_rng(2), shape, dtype)
    dX_ref = ref.backprop_softmax(Y_ref, dY, temperature=temperature)
    _same(gops.backprop_softmax(_g(Y_ref), _g(dY), temperature=temperature), dX_ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_dropout_mask(emulators, dtype):
    U = numpy.linspace(0.0, 0.999, 41).astype(dtype)
    M = numpy.full_like(U, numpy.nan)
    drop, scale = kg.real(dtype, 0.25), kg.real(dtype, 1 / 0.75)
    emulators[dtype]("plait_dropout_fwd", M, U, drop, scale, kg.i64(U.size))
    assert_array_equal(M, numpy.where(U >= drop, scale, 0).astype(dtype))


@pytest.mark.parametrize("drop", [0.25, 0.5])
def test_cupy_ops_dropout_mask(gops, ref, drop):
    M = gops.get_dropout_mask((200, 50), drop)
    assert M.dtype == numpy.float32 and M.shape == (200, 50)
    values = numpy.unique(M.get())
    assert set(values.tolist()) <= {0.0, float(numpy.float32(1 / (1 - drop)))}
    assert abs(float((M.get() == 0).mean()) - drop) < 0.03
    # The edges keep the reference's answers: all ones, all zeros, and its errors.
    _same(gops.get_dropout_mask((3, 2), 0.0), ref.get_dropout_mask((3, 2), 0.0))
    _same(gops.get_dropout_mask((3, 2), None), ref.get_dropout_mask((3, 2), None))
    _same(gops.get_dropout_mask(4, 1.0), ref.get_dropout_mask(4, 1.0))
    with pytest.raises(ValueError, match="shape"):
        gops.get_dropout_mask((3, -1), drop)


def test_cupy_ops_softmax_other_axes_and_errors_follow_the_reference(gops, ref):
    X = _softmax_input("float32", (4, 5))
    _same(gops.softmax(_g(X), axis=0), ref.softmax(X, axis=0))
    _same(gops.softmax(_g(X), axis=1), ref.softmax(X, axis=1))
    Y = ref.softmax(X, axis=0)
    _same(gops.backprop_softmax(_g(Y), _g(X), axis=0), ref.backprop_softmax(Y, X, axis=0))
    with pytest.raises(ValueError, match="temperature"):
        gops.softmax(_g(X), temperature=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cupy_ops_activation_parameters(gops, ref, dtype):
    X = _activation_input(dtype)
    dY = numpy.ones_like(X)
    _same(gops.relu_k(_g(X), k=2.5), ref.relu_k(X, k=2.5))
    _same(gops.relu_k(_g(X), 4.0), ref.relu_k(X, 4.0))
    _same(gops.backprop_relu_k(_g(dY), _g(X), k=2.5), ref.backprop_relu_k(dY, X, k=2.5))
    _same(gops.mish(_g(X), threshold=5.0), ref.mish(X, threshold=5.0))
    _same(gops.backprop_mish(_g(dY), _g(X), threshold=5.0), ref.backprop_mish(dY, X, threshold=5.0))
    # min_val > max_val is numpy's clip (Thinc's): every value becomes max_val.
    _same(gops.clipped_linear(_g(X), min_val=2.0, max_val=1.0), ref.clipped_linear(X, min_val=2.0, max_val=1.0))
    assert (ref.clipped_linear(X, min_val=2.0, max_val=1.0) == 1.0).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nW", [1, 2, 3])
@pytest.mark.parametrize(
    "lengths", [None, RAGGED, [1, 1, 1], [7], [0, 0, 5, 0]], ids=["none", "ragged", "ones", "one", "zeros"]
)
def test_cupy_ops_seq2col_matches_reference(gops, ref, dtype, nW, lengths):
    nB = sum(lengths) if lengths is not None else 6
    X = _rand(numpy.random.default_rng(nW), (nB, 3), dtype)
    L = numpy.asarray(lengths, dtype="int32") if lengths is not None else None
    Lg = _g(L) if L is not None else None
    Y_ref = ref.seq2col(X, nW, lengths=L)
    _same(gops.seq2col(_g(X), nW, lengths=Lg), Y_ref, exact=True)
    dY = _rand(numpy.random.default_rng(2), Y_ref.shape, dtype)
    _same(gops.backprop_seq2col(_g(dY), nW, lengths=Lg), ref.backprop_seq2col(dY, nW, lengths=L))
    if L is not None:
        # int64 lengths, and lengths left on the host, take the same path.
        _same(gops.seq2col(_g(X), nW, lengths=_g(L.astype("int64"))), Y_ref, exact=True)
        _same(gops.seq2col(_g(X), nW, lengths=L), Y_ref, exact=True)


def test_cupy_ops_seq2col_errors_match_reference(gops, ref):
    X = numpy.ones((5, 2), dtype="float32")
    bad = numpy.asarray([2, 2], dtype="int32")
    for call in [
        lambda o, x, l: o.seq2col(x, 1, lengths=l),
        lambda o, x, l: o.backprop_seq2col(o.seq2col(x, 1), 1, lengths=l),
        lambda o, x, l: o.seq2col(x, -1),
    ]:
        with pytest.raises(ValueError) as expected:
            call(ref, X, bad)
        with pytest.raises(ValueError) as got:
            call(gops, _g(X), _g(bad))
        assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cupy_ops_maxout_matches_reference(gops, ref, dtype):
    X = _rand(numpy.random.default_rng(0), (7, 5, 3), dtype)
    X[0, 0] = [2.0, 2.0, 1.0]
    best_ref, which_ref = ref.maxout(X)
    best, which = gops.maxout(_g(X))
    _same(best, best_ref, exact=True)
    _same(which, which_ref, exact=True)
    dY = _rand(numpy.random.default_rng(1), best_ref.shape, dtype)
    _same(gops.backprop_maxout(_g(dY), which, 3), ref.backprop_maxout(dY, which_ref, 3), exact=True)
    with pytest.raises(IndexError) as expected:
        ref.backprop_maxout(dY, which_ref, 2)
    with pytest.raises(IndexError) as got:
        gops.backprop_maxout(_g(dY), which, 2)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lengths", [RAGGED, [3], [1, 2, 3, 4], []], ids=["ragged", "one", "ramp", "empty"])
def test_cupy_ops_reductions_match_reference(gops, ref, dtype, lengths):
    rng = numpy.random.default_rng(len(lengths))
    L = numpy.asarray(lengths, dtype="int32")
    X = _rand(rng, (int(L.sum()), 4), dtype)
    dS = _rand(rng, (len(lengths), 4), dtype)
    for op in ["reduce_sum", "reduce_mean"]:
        _same(getattr(gops, op)(_g(X), _g(L)), getattr(ref, op)(X, L))
        bwd = f"backprop_{op}"
        _same(getattr(gops, bwd)(_g(dS), _g(L)), getattr(ref, bwd)(dS, L))
    if 0 in lengths:
        with pytest.raises(ValueError) as expected:
            ref.reduce_max(X, L)
        with pytest.raises(ValueError) as got:
            gops.reduce_max(_g(X), _g(L))
        assert str(got.value) == str(expected.value)
    else:
        M_ref, which_ref = ref.reduce_max(X, L)
        M, which = gops.reduce_max(_g(X), _g(L))
        _same(M, M_ref, exact=True)
        _same(which, which_ref, exact=True)
        _same(gops.backprop_reduce_max(_g(dS), which, _g(L)), ref.backprop_reduce_max(dS, which_ref, L), exact=True)


def test_cupy_ops_reductions_ignore_rows_past_the_lengths_as_thinc(gops, ref):
    rng = numpy.random.default_rng(5)
    X = _rand(rng, (6, 3), "float32")
    dS = _rand(rng, (4, 3), "float32")
    L = numpy.asarray([1, 3], dtype="int32")
    for op in ["reduce_sum", "reduce_mean", "backprop_reduce_sum", "backprop_reduce_mean"]:
        arg = dS if op.startswith("backprop") else X
        _same(getattr(gops, op)(_g(arg), _g(L)), getattr(ref, op)(arg, L))
    M_ref, which_ref = ref.reduce_max(X, L)
    M, which = gops.reduce_max(_g(X), _g(L))
    _same(M, M_ref, exact=True)
    _same(which, which_ref, exact=True)
    which_more = numpy.concatenate([which_ref, numpy.zeros((2, 3), "int32")])
    _same(gops.backprop_reduce_max(_g(dS), _g(which_more), _g(L)), ref.backprop_reduce_max(dS, which_more, L))


def test_cupy_ops_reduction_errors_match_reference(gops, ref):
    X = numpy.ones((4, 2), dtype="float32")
    cases = [
        ("reduce_sum", (X, numpy.asarray([3, 2], dtype="int32"))),
        ("reduce_mean", (X, numpy.asarray([1, -1], dtype="int32"))),
        ("reduce_max", (X, numpy.asarray([4, 0], dtype="int32"))),
        ("backprop_reduce_sum", (X, numpy.asarray([1, 1, 1, 1, 1], dtype="int32"))),
        ("backprop_reduce_max", (X[:2], numpy.asarray([[0, 3], [0, 0]], dtype="int32"), numpy.asarray([2, 2], dtype="int32"))),
    ]
    for op, args in cases:
        with pytest.raises((ValueError, TypeError, IndexError)) as expected:
            getattr(ref, op)(*args)
        with pytest.raises((ValueError, TypeError, IndexError)) as got:
            getattr(gops, op)(*[_g(a) for a in args])
        assert type(got.value) is type(expected.value), op
        assert str(got.value) == str(expected.value), op


@pytest.mark.parametrize("seed", [0, 1, 2**32 - 1])
def test_cupy_ops_hash_is_bit_identical(gops, ref, seed):
    keys = numpy.concatenate(
        [HASH_KEYS, numpy.random.default_rng(seed % 7).integers(0, 2**64 - 1, 1000, dtype="uint64")]
    )
    got = gops.hash(_g(keys), seed)
    _same(got, ref.hash(keys, seed), exact=True)
    expected = numpy.array([_murmur3_x64_128_py(int(k), seed) for k in keys[:10]], dtype="uint32")
    assert_array_equal(got.get()[:10], expected)
    _same(gops.hash(_g(keys.astype("int64")), seed), ref.hash(keys.astype("int64"), seed), exact=True)
    _same(gops.hash(_g(keys[:0]), seed), ref.hash(keys[:0], seed), exact=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_cupy_ops_gather_and_scatter_add_match_reference(gops, ref, dtype, index_dtype):
    rng = numpy.random.default_rng(4)
    table = _rand(rng, (50, 8), dtype)
    indices = rng.integers(0, 50, size=(30, 4)).astype(index_dtype)
    indices[0] = [3, 3, 3, 49]
    _same(gops.gather_add(_g(table), _g(indices)), ref.gather_add(table, indices))
    with pytest.raises(IndexError) as expected:
        ref.gather_add(table, -indices - 1)
    with pytest.raises(IndexError) as got:
        gops.gather_add(_g(table), _g(-indices - 1))
    assert str(got.value) == str(expected.value)

    flat = numpy.concatenate([indices.reshape(-1), -indices[:3, 0] - 1])  # repeats and negatives
    values = _rand(rng, (flat.size, 8), dtype)
    expected_table = ref.scatter_add(table.copy(), flat, values)
    gtable = _g(table)
    out = gops.scatter_add(gtable, _g(flat), _g(values))
    assert out is gtable
    _same(out, expected_table)
    # 2d indices into a 1d table
    t1 = _rand(rng, (20,), dtype)
    idx2 = rng.integers(0, 20, size=(5, 6)).astype(index_dtype)
    v2 = _rand(rng, (5, 6), dtype)
    _same(gops.scatter_add(_g(t1), _g(idx2), _g(v2)), ref.scatter_add(t1.copy(), idx2, v2))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cupy_ops_adam_and_clip_gradient_match_reference(gops, ref, dtype):
    rng = numpy.random.default_rng(6)
    arrays = [_rand(rng, (300,), dtype) for _ in range(3)] + [numpy.abs(_rand(rng, (300,), dtype))]
    args = (0.9, 0.999, 1e-8, 0.001)
    expected = ref.adam(*[a.copy() for a in arrays], *args, mod_rate=0.7)
    garrays = [_g(a) for a in arrays]
    got = gops.adam(*garrays, *args, mod_rate=0.7)
    assert all(g is a for g, a in zip(got, garrays))
    for g, e in zip(got, expected):
        _same(g, e)
    kept = [_g(a) for a in arrays]
    gops.adam(*kept, *args, mod_rate=0.7, keep_gradient=True)
    _same(kept[1], arrays[1])
    for i in (0, 2, 3):
        _same(kept[i], expected[i])
    G = _rand(rng, (40, 3), dtype)
    norm = float(numpy.linalg.norm(G))
    for threshold in [norm * 2, norm / 3]:
        gG = _g(G)
        assert gops.clip_gradient(gG, threshold) is gG
        _same(gG, ref.clip_gradient(G.copy(), threshold))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cupy_ops_gemm_matches_reference(gops, ref, dtype):
    rng = numpy.random.default_rng(2)
    x, y = _rand(rng, (6, 4), dtype), _rand(rng, (5, 4), dtype)
    _same(gops.gemm(_g(x), _g(y), trans2=True), ref.gemm(x, y, trans2=True))
    _same(gops.gemm(_g(x), _g(y.T.copy())), ref.gemm(x, y.T.copy()))
    _same(gops.gemm(_g(x.T.copy()), _g(y), trans1=True, trans2=True), ref.gemm(x, y, trans2=True))
    out = _g(numpy.zeros((6, 5), dtype=dtype))
    assert gops.gemm(_g(x), _g(y), out=out, trans2=True) is out
    _same(out, ref.gemm(x, y, trans2=True))
    with pytest.raises(TypeError, match="numpy array"):
        gops.gemm(x, _g(y), trans2=True)


def test_cupy_ops_asarray_and_to_numpy(gops):
    import cupy

    X = numpy.arange(6, dtype="float32").reshape(2, 3)
    gX = gops.asarray(X)
    assert isinstance(gX, cupy.ndarray) and gX.dtype == X.dtype
    assert gops.asarray(gX) is gX
    assert gops.asarray(gX, dtype="float64").dtype == numpy.float64
    assert_array_equal(gops.asarray([[1, 2], [3, 4]], dtype="int32").get(), [[1, 2], [3, 4]])
    assert_array_equal(gops.asarray([gX, gX]).get(), numpy.stack([X, X]))
    assert_array_equal(gops.asarray1i([1, 2, 3]).get(), [1, 2, 3])
    back = gops.to_numpy(gX)
    assert isinstance(back, numpy.ndarray)
    assert_array_equal(back, X)
    big = gops.to_numpy(gX, byte_order=">")
    assert big.dtype.byteorder == ">" and big.dtype.newbyteorder("=") == X.dtype
    assert_array_equal(big, X)
    assert gops.to_numpy(X) is X
    with pytest.raises(NotImplementedError, match="NumpyOps"):
        gops.cblas()


@gpu
def test_cupy_ops_asarray_from_torch_shares_memory():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    from plait.backends.cupy_ops import CupyOps

    ops = CupyOps()
    t = torch.arange(6, dtype=torch.float32, device="cuda").reshape(2, 3)
    a = ops.asarray(t)
    assert int(a.data.ptr) == t.data_ptr()
    a[0, 0] = 42.0
    assert float(t[0, 0]) == 42.0
    assert_array_equal(ops.asarray(torch.ones(2)).get(), [1.0, 1.0])


def test_cupy_ops_fallbacks_for_unsupported_layouts_and_dtypes(gops, ref):
    X = _activation_input("float32")
    strided = _g(X)[:, ::2]
    assert not strided.flags.c_contiguous
    _same(gops.dish(strided), ref.dish(X[:, ::2]))
    _same(gops.mish(strided), ref.mish(X[:, ::2]))
    _same(gops.relu(strided), ref.relu(X[:, ::2]))
    half = X.astype("float16")
    _same(gops.relu(_g(half)), ref.relu(half), dtype="float32")
    # float32 table with int64 lengths and non-contiguous X in a reduction
    L = numpy.asarray([2, 3], dtype="int64")
    X5 = _rand(numpy.random.default_rng(0), (5, 6), "float32")
    _same(gops.reduce_sum(_g(X5)[:, ::2], _g(L)), ref.reduce_sum(X5[:, ::2], L))


def test_cupy_ops_grid_stride_covers_large_arrays(gops, ref):
    # More elements than one launch has threads (_BLOCK * _MAX_BLOCKS), so threads loop.
    n = kg._BLOCK * kg._MAX_BLOCKS * 2 + 17
    X = numpy.random.default_rng(0).standard_normal(n).astype("float32")
    _same(gops.relu(_g(X)), ref.relu(X), exact=True)
    _same(gops.hard_swish(_g(X)), ref.hard_swish(X))


def test_cupy_ops_cupy_ops_basics(gops):
    import cupy

    from plait.backends import get_ops

    assert gops.xp is cupy and type(gops).xp is cupy
    assert gops.name == "cupy" and gops.device_type == "gpu" and gops.device_id == 0
    assert isinstance(get_ops("cupy"), type(gops))
    with pytest.raises(ValueError, match="device_id"):
        type(gops)(device_id=999).alloc2f(1, 1)


def test_cupy_ops_fast_paths_launch_every_kernel(gops, monkeypatch):
    launched = []
    real_launch = kg.launch

    def recording_launch(name, dtype, n, args):
        launched.append(name)
        return real_launch(name, dtype, n, args)

    monkeypatch.setattr(kg, "launch", recording_launch)
    rng = numpy.random.default_rng(0)
    X = _g(_rand(rng, (6, 4), "float32"))
    L = _g(numpy.asarray([2, 0, 4], dtype="int32"))
    for op in ["relu", "mish", "swish", "dish", "gelu", "clipped_linear", "hard_swish",
               "hard_swish_mobilenet"]:
        Y = getattr(gops, op)(X)
        if op == "relu":
            gops.backprop_relu(X, Y)
        elif op == "swish":
            gops.backprop_swish(X, X, Y)
        else:
            getattr(gops, f"backprop_{op}")(X, X)
    gops.backprop_seq2col(gops.seq2col(X, 1, lengths=L), 1, lengths=L)
    best, which = gops.maxout(X.reshape((3, 2, 4)))
    gops.backprop_maxout(best, which, 4)
    for op in ["reduce_sum", "reduce_mean"]:
        getattr(gops, f"backprop_{op}")(getattr(gops, op)(X, L), L)
    L2 = _g(numpy.asarray([2, 4], dtype="int32"))
    M, which = gops.reduce_max(X, L2)
    gops.backprop_reduce_max(M, which, L2)
    gops.backprop_sigmoid(X, gops.sigmoid(X))
    gops.get_dropout_mask((5, 3), 0.25)
    gops.backprop_softmax(gops.softmax(X), X)
    gops.hash(_g(numpy.arange(5, dtype="uint64")), 1)
    table = _g(_rand(rng, (10, 3), "float32"))
    gops.gather_add(table, _g(numpy.asarray([[1, 2], [3, 3]], dtype="int32")))
    gops.scatter_add(table, _g(numpy.asarray([1, 1], dtype="int32")), table[:2].copy())
    W = _g(_rand(rng, (8,), "float32"))
    gops.adam(W, W.copy(), W.copy(), W * W, 0.9, 0.999, 1e-8, 0.1)
    gops.clip_gradient(W, 0.1)
    assert sorted(set(launched)) == sorted(kg.KERNELS)


def test_cupy_ops_random_ragged_batches_match_reference(gops, ref):
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies

    @hypothesis.settings(
        max_examples=25, deadline=None,
        suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture],
    )
    @hypothesis.given(
        lengths=st.lists(st.integers(0, 5), min_size=0, max_size=8),
        nO=st.integers(1, 4),
        nW=st.integers(1, 3),
        dtype=st.sampled_from(DTYPES),
        seed=st.integers(0, 2**16),
    )
    def check(lengths, nO, nW, dtype, seed):
        rng = numpy.random.default_rng(seed)
        L = numpy.asarray(lengths, dtype="int32")
        X = _rand(rng, (int(L.sum()), nO), dtype)
        _same(gops.seq2col(_g(X), nW, lengths=_g(L)), ref.seq2col(X, nW, lengths=L), exact=True)
        dY = _rand(rng, (X.shape[0], nO * (2 * nW + 1)), dtype)
        _same(gops.backprop_seq2col(_g(dY), nW, lengths=_g(L)), ref.backprop_seq2col(dY, nW, lengths=L))
        _same(gops.reduce_sum(_g(X), _g(L)), ref.reduce_sum(X, L))
        _same(gops.reduce_mean(_g(X), _g(L)), ref.reduce_mean(X, L))
        dS = _rand(rng, (len(lengths), nO), dtype)
        _same(gops.backprop_reduce_mean(_g(dS), _g(L)), ref.backprop_reduce_mean(dS, L))
        if all(n > 0 for n in lengths):
            M, which = gops.reduce_max(_g(X), _g(L))
            M_ref, which_ref = ref.reduce_max(X, L)
            _same(M, M_ref, exact=True)
            _same(which, which_ref, exact=True)

    check()


@pytest.mark.parametrize("dtype", ["uint64", "int64"])
def test_asarray_converts_host_lists_at_the_requested_dtype(gops, dtype):
    """Python ints beyond float64's 53-bit mantissa keep every bit (a float64 detour rounded them)."""
    values = [16, 11648197037703959513] if dtype == "uint64" else [16, -(2**62) - 3]
    got = gops.asarray(values, dtype=dtype)
    _same(got, numpy.asarray(values, dtype=dtype), exact=True)
    assert [int(v) for v in got.get()] == values
