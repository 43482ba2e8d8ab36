"""The GPU fused op-tree kernels of plait.neon._fuse_cuda, tested without a GPU.

1. every generated CUDA source compiles to PTX with nvcc (skipped without nvcc);
2. the same sources, built for the host with the emulation header of plait.neon._cuda_emu
   (a small grid run one thread at a time, so grid-stride loops wrap), give numpy's results:
   every op, every broadcast pattern and stride class, column-major and sliced outputs,
   reductions over axis 0, 1 and None (at the root and inside a tree), float16 storage
   (all 65536 half values through a kernel), rand and binarize (skipped without g++);
3. without CuPy, the module imports and `execute` declines (returns False).

Oracle: numpy in float64. Tolerances: float32 rtol 1e-5 (transcendentals; 2e-6 elsewhere would
do), float64 rtol 1e-12, float16 outputs within one half ulp of rounding the float64 result
(rtol 1e-3).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from plait.neon import _fuse_cuda as F
from plait.neon._cuda_emu import host_compiler, shared_emulator


def T(op, a=None, b=None, **kw):
    d = {"op": op}
    d.update(kw)
    return (d, a, b)


TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13),
       np.float16: dict(rtol=1e-3, atol=1e-4)}

UNARY = {
    "neg": np.negative, "abs": np.abs, "sgn": np.sign, "sqrt": np.sqrt, "sqr": np.square,
    "exp": np.exp, "log": np.log, "safelog": lambda x: np.log(np.maximum(x, np.exp(-50.0))),
    "exp2": np.exp2, "log2": np.log2, "sig": lambda x: 1 / (1 + np.exp(-x)),
    "sig2": lambda x: 1 / (1 + np.exp2(-x)), "tanh": np.tanh,
    "tanh2": lambda x: np.tanh(x * np.log(2.0)), "rint": np.rint,
    "finite": lambda x: np.isfinite(x).astype(np.float64),
}
POSITIVE = {"sqrt", "log", "log2", "safelog"}

BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "eq": lambda a, b: (a == b) * 1.0, "ne": lambda a, b: (a != b) * 1.0,
    "lt": lambda a, b: (a < b) * 1.0, "le": lambda a, b: (a <= b) * 1.0,
    "gt": lambda a, b: (a > b) * 1.0, "ge": lambda a, b: (a >= b) * 1.0,
    "minimum": np.minimum, "maximum": np.maximum, "pow": np.power,
}


@pytest.fixture(scope="module")
def emu():
    if host_compiler() is None:
        pytest.skip("needs a host C++ compiler for the kernel emulation")
    # one emulator for the session; its libraries are cached on disk as the CPU kernels are
    return shared_emulator()


def run(emu, tree, out, rng=None):
    assert F.execute(tree, out, rng=rng, launcher=emu)
    return out


def _data(rs, shape, dtype, positive=False, scale=2.0):
    x = rs.randn(*shape) * scale
    if positive:
        x = np.abs(x) + 0.1
    return x.astype(dtype)


def _ref_close(got, ref, dtype):
    if dtype == np.float16:
        # within the rounding of the float64 result to half, plus a float32 ulp of slack
        assert_allclose(got.astype(np.float64), ref.astype(np.float16).astype(np.float64),
                        rtol=2e-3, atol=1e-4)
    else:
        assert_allclose(got, ref, **TOL[dtype])


# ---------------------------------------------------------------------------------------
# Import and the no-GPU path
# ---------------------------------------------------------------------------------------

def test_module_imports_without_cupy_and_declines_without_it():
    code = ("import sys, numpy as np\n"
            "from plait.neon import _fuse_cuda as F\n"
            "x = np.ones((2, 3), np.float32)\n"
            "ok = F.execute(({'op': 'add'}, x, 1.0), np.empty_like(x))\n"
            "print(ok, 'cupy' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    have_cupy = r.stdout.split()[1] == "True"
    if not have_cupy:
        assert r.stdout.split() == ["False", "False"]


# ---------------------------------------------------------------------------------------
# Elementwise ops
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(emu, op, dtype):
    rs = np.random.RandomState(1)
    x = _data(rs, (5, 13), dtype, positive=op in POSITIVE)
    if op == "finite":
        x[0, :3] = [np.inf, -np.inf, np.nan]
    if op == "rint":
        x[1, :4] = [0.5, 1.5, -2.5, 2.4999]
    out = np.full(x.shape, np.nan, dtype)
    run(emu, T(op, x), out)
    _ref_close(out, UNARY[op](x.astype(np.float64)), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(emu, op, dtype):
    rs = np.random.RandomState(2)
    a = _data(rs, (6, 11), dtype, positive=op == "pow")
    b = _data(rs, (6, 11), dtype, scale=1.0)
    b[0, :3] = a[0, :3]  # ties for the comparisons
    out = np.zeros_like(a)
    run(emu, T(op, a, b), out)
    _ref_close(out, BINARY[op](a.astype(np.float64), b.astype(np.float64)), dtype)


def test_nan_propagation_of_minimum_maximum(emu):
    a = np.array([[np.nan, 1.0, 2.0, np.nan]], np.float32)
    b = np.array([[0.0, np.nan, 1.0, np.nan]], np.float32)
    for op, ref in (("minimum", np.minimum), ("maximum", np.maximum)):
        out = np.zeros_like(a)
        run(emu, T(op, a, b), out)
        assert_array_equal(out, ref(a, b))


@pytest.mark.parametrize("exponent", [2.0, 3.0, 1.0, 0.0, -1.0, -2.0, 0.5, -0.5, 1.7])
def test_pow_constant_exponents(emu, exponent):
    x = _data(np.random.RandomState(3), (4, 7), np.float32, positive=True)
    out = np.zeros_like(x)
    run(emu, T("pow", x, exponent), out)
    assert_allclose(out, np.power(x.astype(np.float64), exponent), rtol=1e-5)


def test_shift_and_deterministic_binarize(emu):
    rs = np.random.RandomState(4)
    a = _data(rs, (3, 8), np.float32)
    b = _data(rs, (3, 8), np.float32)
    out = np.zeros_like(a)
    run(emu, T("shift", a, b, value=True), out)
    mag = np.log(np.maximum(np.abs(b.astype(np.float64)), np.exp(-50.0))) / np.log(2.0)
    assert_allclose(out, a * np.sign(b) * np.exp2(np.rint(mag)), rtol=1e-6)
    run(emu, T("shift", a, b, value=False), out)
    assert_allclose(out, a * np.exp2(b.astype(np.float64)), rtol=1e-5)
    run(emu, T("binarize", a, stochastic=False), out)
    assert_array_equal(out, np.where(a >= 0, 1.0, -1.0))


def test_a_six_op_expression_with_constants_as_arguments(emu):
    rs = np.random.RandomState(5)
    x, g = _data(rs, (9, 33), np.float32), _data(rs, (9, 33), np.float32)
    out = np.zeros_like(x)
    before = F.stats()["kernels"]
    for lr in (0.1, 0.01, 0.5):
        tree = T("sub", x, T("mul", lr, T("div", g, T("add", T("sqrt", T("sqr", g)), 1e-7))))
        run(emu, tree, out)
        ref = x - lr * (g / (np.sqrt(np.square(g.astype(np.float64))) + 1e-7))
        assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    assert F.stats()["kernels"] - before <= 1, "a new constant value must not make a new kernel"


# ---------------------------------------------------------------------------------------
# Broadcasting, strides, layouts
# ---------------------------------------------------------------------------------------

SHAPES = [(7, 10), (7, 1), (1, 10), (1, 1)]


@pytest.mark.parametrize("sa", SHAPES)
@pytest.mark.parametrize("sb", SHAPES)
def test_broadcast_patterns(emu, sa, sb):
    rs = np.random.RandomState(6)
    a, b = _data(rs, sa, np.float32), _data(rs, sb, np.float32)
    out = np.zeros((7, 10), np.float32)
    run(emu, T("add", T("mul", a, b), a), out)
    assert_allclose(out, np.broadcast_to(a * b + a, out.shape), rtol=1e-6)


def test_strided_transposed_and_sliced_operands(emu):
    rs = np.random.RandomState(7)
    big = _data(rs, (12, 20), np.float32)
    a = big[1:8:2, 3:19:3]            # non-unit inner stride
    bt = _data(rs, (6, 4), np.float32)
    out_big = np.zeros((10, 12), np.float32)
    out = out_big[2:6, 1:7]            # a slice of a larger array
    run(emu, T("add", a, T("transpose", bt)), out)
    assert_allclose(out, a + bt.T, rtol=1e-6)
    assert not out_big[:2].any() and not out_big[6:].any() and not out_big[:, 7:].any()
    col = np.zeros((6, 4), np.float32, order="F")   # column-major out: i runs fastest
    run(emu, T("exp", bt), col)
    assert_allclose(col, np.exp(bt.astype(np.float64)), rtol=1e-5)
    neg = big[::-1, ::-2]                            # negative strides
    out2 = np.zeros(neg.shape, np.float32)
    run(emu, T("neg", neg), out2)
    assert_array_equal(out2, -neg)


def test_overlapping_operand_is_read_before_it_is_overwritten(emu):
    x = _data(np.random.RandomState(8), (5, 6), np.float32)
    ref = x - x[0:1]
    run(emu, T("sub", x, x[0:1]), x)
    assert_allclose(x, ref, rtol=1e-6)


def test_shape_mismatch_names_the_shapes(emu):
    a = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"\(3, 5\).*\(3, 4\)"):
        F.execute(T("add", a, np.zeros((3, 5), np.float32)), a, launcher=emu)


def test_unsupported_trees_are_declined(emu):
    a = np.ones((3, 3), np.float32)
    out = np.full((3, 3), 7.0, np.float32)
    assert not F.execute(T("dot", a, a), out, launcher=emu)
    assert not F.execute(T("onehot", idx=a, axis=0), out, launcher=emu)
    assert not F.execute(T("argmax", a, axis=None), out[:1, :1], launcher=emu)
    assert not F.execute(T("add", a.astype(np.int32), 1), out, launcher=emu)
    assert not F.execute(T("add", a, 1), out.astype(np.int32), launcher=emu)
    assert not F.execute(T("transpose", T("add", a, 1)), out, launcher=emu)
    assert (out == 7.0).all()


# ---------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------

REDS = {"sum": np.sum, "max": np.max, "min": np.min, "argmax": np.argmax, "argmin": np.argmin}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op,axis", [(op, axis) for op in sorted(REDS) for axis in (0, 1, None)
                                     if not (axis is None and op.startswith("arg"))])
def test_reductions_at_the_root(emu, op, axis, dtype):
    # (argmax/argmin over axis None are declined: test_unsupported_trees_are_declined)
    rs = np.random.RandomState(9)
    x = _data(rs, (37, 23), dtype)
    x[3, 4] = x[5, 4] = x.max() + 1  # a tie: the first position wins
    shape = (1 if axis in (0, None) else 37, 1 if axis in (1, None) else 23)
    out = np.full(shape, np.nan, dtype)
    run(emu, T(op, T("mul", x, 1.5), axis=axis), out)
    x64 = x.astype(np.float64) * 1.5
    ref = REDS[op](x64, axis=axis)
    ref = np.asarray(ref, np.float64).reshape(shape)
    if op.startswith("arg"):
        assert_array_equal(out, ref)
    else:
        _ref_close(out, ref, dtype)


def test_reductions_inside_a_tree_softmax(emu):
    x = _data(np.random.RandomState(10), (10, 16), np.float32)
    out = np.zeros_like(x)
    e = T("exp", T("sub", x, T("max", x, axis=0)))
    run(emu, T("div", e, T("sum", e, axis=0)), out)
    ex = np.exp(x.astype(np.float64) - x.max(0))
    assert_allclose(out, ex / ex.sum(0), rtol=1e-5, atol=1e-7)
    # a (1, 1) reduction broadcast over the whole output, and a nested reduction
    run(emu, T("sub", x, T("sum", T("max", x, axis=1), axis=None)), out)
    assert_allclose(out, x - x.max(1).sum(), rtol=1e-5, atol=1e-5)


def test_reductions_propagate_nan_and_argmax_takes_it(emu):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    x[1, 2] = np.nan
    out = np.zeros((3, 1), np.float32)
    run(emu, T("max", x, axis=1), out)
    assert_array_equal(out.ravel(), np.max(x, axis=1))
    run(emu, T("argmax", x, axis=1), out)
    assert_array_equal(out.ravel(), np.argmax(x, axis=1))
    run(emu, T("min", x, axis=1), out)
    assert_array_equal(out.ravel(), np.min(x, axis=1))


def test_sum_accumulates_in_double(emu):
    x = np.full((1, 4097), 0.1, np.float32)
    x[0, 0] = 1e7
    out = np.zeros((1, 1), np.float32)
    run(emu, T("sum", x, axis=1), out)
    assert out[0, 0] == np.float32(x.astype(np.float64).sum())


# ---------------------------------------------------------------------------------------
# float16 storage
# ---------------------------------------------------------------------------------------

def test_every_half_value_loads_and_stores_exactly(emu):
    h = np.arange(65536, dtype=np.uint16).view(np.float16).reshape(256, 256)
    out = np.zeros((256, 256), np.float32)
    run(emu, T("mul", h, 1.0), out)
    finite = np.isfinite(h)
    assert_array_equal(out[finite], h[finite].astype(np.float32))
    assert np.isnan(out[np.isnan(h)]).all()
    back = np.zeros_like(h)
    run(emu, T("mul", out, 1.0), back)
    nan = np.isnan(h)
    assert_array_equal(back.view(np.uint16)[~nan], h.view(np.uint16)[~nan])
    assert np.isnan(back[nan]).all()


def test_float_to_half_rounds_to_nearest_even(emu):
    rs = np.random.RandomState(11)
    special = np.array([65504, 65519.99, 65520, 1e6, -1e6, 6.1e-5, 6.0e-8, 2.9e-8, 3.0e-8, 1e-9,
                        0.0, -0.0, np.inf, -np.inf, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11,
                        2049.0, 2051.0, 5.960464477539063e-08 * 1.5], np.float32)
    vals = np.concatenate([special, (rs.randn(4000) * 10.0 ** rs.uniform(-9, 5, 4000)).astype(np.float32)])
    x = vals.reshape(1, -1)
    out = np.zeros(x.shape, np.float16)
    run(emu, T("mul", x, 1.0), out)
    with np.errstate(over="ignore"):
        ref = x.astype(np.float16)
    assert_array_equal(out.view(np.uint16), ref.view(np.uint16))


def test_float16_tree_computes_in_float32(emu):
    rs = np.random.RandomState(12)
    a, b = _data(rs, (8, 9), np.float16), _data(rs, (1, 9), np.float16)
    out = np.zeros((8, 9), np.float16)
    run(emu, T("add", T("mul", a, b), T("sig", a)), out)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    ref = (a32 * b32 + np.float32(1) / (np.float32(1) + np.exp(-a32))).astype(np.float16)
    assert np.abs(out.astype(np.float32) - ref.astype(np.float32)).max() <= np.abs(ref).max() * 1e-3


# ---------------------------------------------------------------------------------------
# rand and stochastic binarize
# ---------------------------------------------------------------------------------------

def test_rand_is_uniform_reproducible_and_matches_the_cpu_fused_pass(emu):
    out = np.zeros((64, 50), np.float32)
    run(emu, T("rand"), out, rng=np.random.RandomState(42))
    assert 0.0 <= out.min() and out.max() < 1.0
    assert abs(out.mean() - 0.5) < 0.02 and 0.07 < out.var() < 0.097
    again = np.zeros_like(out)
    run(emu, T("rand"), again, rng=np.random.RandomState(42))
    assert_array_equal(out, again)
    other = np.zeros_like(out)
    run(emu, T("rand"), other, rng=np.random.RandomState(43))
    assert not np.array_equal(out, other)
    from plait.neon import _fuse
    cpu = np.zeros_like(out)
    if _fuse.execute(T("rand"), cpu, rng=np.random.RandomState(42)):
        assert_array_equal(out, cpu)


def test_stochastic_binarize(emu):
    x = np.tile(np.linspace(-1.5, 1.5, 7, dtype=np.float32).reshape(7, 1), (1, 4000))
    out = np.zeros_like(x)
    run(emu, T("binarize", x, stochastic=True), out, rng=np.random.RandomState(0))
    assert set(np.unique(out)) <= {-1.0, 1.0}
    p = (out == 1).mean(axis=1)
    assert_allclose(p, np.clip((x[:, 0] + 1) / 2, 0, 1), atol=0.03)


# ---------------------------------------------------------------------------------------
# nvcc: every generated source compiles to PTX
# ---------------------------------------------------------------------------------------

def _corpus():
    """Trees covering every op, dtype, broadcast pattern, stride class, layout and reduction."""
    rs = np.random.RandomState(0)
    trees = []
    for dt in (np.float16, np.float32, np.float64):
        x = rs.randn(6, 8).astype(dt)
        out = np.zeros((6, 8), dt)
        for op in UNARY:
            trees.append((T(op, x), out))
        for op in BINARY:
            trees.append((T(op, x, x[:1]), out))
        for e in _POWS:
            trees.append((T("pow", x, e), out))
        trees.append((T("shift", x, x[:, :1], value=True), out))
        trees.append((T("shift", x, 2.0, value=False), out))
        trees.append((T("binarize", x, stochastic=True), out))
        trees.append((T("binarize", x, stochastic=False), out))
        trees.append((T("add", T("rand"), np.float64(1.0)), out))
        trees.append((T("add", x[:, ::2][:, :3], T("transpose", x.T[:3, :6])),
                      np.zeros((6, 8), dt, order="F")[:, :3]))
        for op in REDS:
            for axis in (0, 1, None):
                if axis is None and op.startswith("arg"):
                    continue
                shape = (1 if axis in (0, None) else 6, 1 if axis in (1, None) else 8)
                trees.append((T(op, T("mul", x, 2.0), axis=axis), np.zeros(shape, dt)))
                trees.append((T("sub", x, T(op, x, axis=axis)), out))
    return trees


_POWS = [2.0, 3.0, 1.0, 0.0, -1.0, -2.0, 0.5, -0.5, 1.7]


def test_corpus_sources_are_distinct_and_well_formed():
    sources = {}
    for tree, out in _corpus():
        for src in F.sources_for(tree, out):
            sources[src] = True
    assert len(sources) > 150
    for src in sources:
        assert len(re.findall(r'extern "C" __global__ void (plait_neon_\w+)\(', src)) == 1
        assert "__shared__" not in src and "__syncthreads" not in src and "#include" not in src


def _bundle(sources, start=0):
    """One translation unit holding many sources: each in its own namespace with its kernel
    renamed plait_neon_<kind>_k<index>, and its macros undefined after it (nvcc's start-up,
    not the code, dominates compiling them one file each)."""
    parts = []
    for k, src in enumerate(sources, start):
        body = re.sub(r"__global__ void (plait_neon_\w+)\(", rf"__global__ void \1_k{k}(", src)
        macros = sorted(set(re.findall(r"^#define (\w+)", src, flags=re.M)))
        parts.append(f"namespace pl_src{k} {{\n{body}\n}}\n" + "".join(f"#undef {m}\n" for m in macros))
    return "".join(parts)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_every_generated_source_compiles_to_ptx(tmp_path):
    sources = {}
    for tree, out in _corpus():
        for src in F.sources_for(tree, out):
            sources[src] = True
    for src in F.generated_sources().values():   # and whatever the other tests generated
        sources[src] = True
    sources = list(sources)
    # Two files as they are (an elementwise and a reduction kernel), the rest bundled in two
    # translation units, one nvcc process each, side by side.
    single = [next(s for s in sources if "plait_neon_ew(" in s), next(s for s in sources if "plait_neon_red(" in s)]
    half = len(sources) // 2
    units = {"single0": single[0], "single1": single[1],
             "bundle0": _bundle(sources[:half]), "bundle1": _bundle(sources[half:], half)}
    procs = []
    for name, text in units.items():
        (tmp_path / f"{name}.cu").write_text(text)
    for group in (["single0", "single1", "bundle0"], ["bundle1"]):
        procs.append(subprocess.Popen(
            ["nvcc", "--ptx", "-arch=sm_80", *F.COMPILE_OPTIONS, "-odir", str(tmp_path)]
            + [str(tmp_path / f"{g}.cu") for g in group],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-4000:]
    assert re.findall(r"\.entry\s+(plait_neon_\w+)\(", (tmp_path / "single0.ptx").read_text()) == ["plait_neon_ew"]
    assert re.findall(r"\.entry\s+(plait_neon_\w+)\(", (tmp_path / "single1.ptx").read_text()) == ["plait_neon_red"]
    entries = {}
    for b in ("bundle0", "bundle1"):
        ptx = (tmp_path / f"{b}.ptx").read_text()
        for chunk in ptx.split(".entry")[1:]:
            name = re.match(r"\s+(plait_neon_\w+)\(", chunk).group(1)
            entries[name] = chunk.split("\n}\n", 1)[0]   # the entry's own body
    assert len(entries) == len(sources)
    for k, src in enumerate(sources):
        kind = re.search(r"__global__ void (plait_neon_\w+)\(", src).group(1)
        body = entries[f"{kind}_k{k}"]
        first = src.splitlines()[0]
        if "typedef float T;" in src and "(sum," not in first and "pow" not in first:
            # float math never runs double-precision arithmetic (constants arrive as doubles
            # and are converted once; sums accumulate in double on purpose)
            assert not re.search(r"\b(mul|add|sub|div|fma)\.rn\.f64\b", body), first
