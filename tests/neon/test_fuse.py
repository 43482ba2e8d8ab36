"""plait.neon._fuse: op-trees compiled into one fused pass, checked against a float64 numpy oracle.

Tolerances: float32 results within rtol 2e-6 / atol 2e-6 of the float64 oracle on moderate
inputs (the fused exp/log/tanh are within a few float32 ulps; sums accumulate in double);
float16 results within rtol 2e-3 / atol 2e-3 (half precision rounds at 2**-11 relative);
float64 results within rtol 1e-12.

The file keeps its compiled signatures few (shared shapes and dtypes) so that a cold run stays
short; kernels go to a temporary cache folder, never the user's.
"""
import os

import numpy as np
import pytest

from plait.neon import _fuse

TOOLCHAIN = _fuse._get_toolchain()
pytestmark = pytest.mark.skipif(TOOLCHAIN is None, reason="no working C compiler for the fused kernels")

F32 = dict(rtol=2e-6, atol=2e-6)
F16 = dict(rtol=2e-3, atol=2e-3)


@pytest.fixture(scope="module", autouse=True)
def _cache_folder(tmp_path_factory):
    old = os.environ.get("PLAIT_CACHE_DIR")
    os.environ["PLAIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("neon-cache"))
    yield
    if old is None:
        os.environ.pop("PLAIT_CACHE_DIR", None)
    else:
        os.environ["PLAIT_CACHE_DIR"] = old


def N(op, left=None, right=None, **kw):
    d = {"op": op}
    d.update(kw)
    return (d, left, right)


# ---- an independent float64 evaluator (neon's CPU semantics, written from numpy) ----------

UNARY = {
    "neg": lambda x: -x,
    "abs": np.abs,
    "sgn": np.sign,
    "sqrt": np.sqrt,
    "sqr": lambda x: x * x,
    "exp": np.exp,
    "log": np.log,
    "safelog": lambda x: np.log(np.maximum(x, np.exp(-50.0))),
    "exp2": np.exp2,
    "log2": np.log2,
    "sig": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "sig2": lambda x: 1.0 / (1.0 + np.exp2(-x)),
    "tanh": np.tanh,
    "tanh2": lambda x: (np.exp2(2 * x) - 1) / (np.exp2(2 * x) + 1),
    "rint": np.rint,
    "finite": lambda x: np.isfinite(x).astype(np.float64),
    "transpose": lambda x: x.T,
}
BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "eq": lambda a, b: (a == b) * 1.0, "ne": lambda a, b: (a != b) * 1.0,
    "lt": lambda a, b: (a < b) * 1.0, "le": lambda a, b: (a <= b) * 1.0,
    "gt": lambda a, b: (a > b) * 1.0, "ge": lambda a, b: (a >= b) * 1.0,
    "pow": np.power, "minimum": np.minimum, "maximum": np.maximum,
}


def oracle(node):
    if isinstance(node, tuple):
        d, left, right = node
        op = d["op"]
        if op in UNARY:
            return UNARY[op](oracle(left))
        if op in BINARY:
            return BINARY[op](oracle(left), oracle(right))
        if op == "binarize":
            assert not d.get("stochastic", True)
            return np.where(oracle(left) >= 0, 1.0, -1.0)
        if op == "shift":
            a, b = oracle(left), oracle(right)
            if d.get("value", True):
                e = np.rint(np.log(np.maximum(np.abs(b), np.exp(-50.0))) / np.log(2.0))
                return a * (np.sign(b) * np.exp2(e))
            return a * np.exp2(b)
        x = oracle(left)
        axis = d["axis"]
        if op in ("sum", "max", "min"):
            return getattr(np, op)(x, axis=axis, keepdims=True)
        f = np.argmax if op == "argmax" else np.argmin
        shape = list(x.shape)
        shape[axis] = 1
        return f(x, axis=axis).reshape(shape).astype(np.float64)
    if isinstance(node, np.ndarray):
        return node.astype(np.float64)
    return np.float64(node)


def run(tree, out):
    assert _fuse.execute(tree, out) is True
    return out


def check(tree, out, tol=F32):
    run(tree, out)
    want = np.broadcast_to(oracle(tree), out.shape)
    np.testing.assert_allclose(out.astype(np.float64), want, equal_nan=True, **tol)


RS = np.random.RandomState(1234)
M, Nn = 24, 160                       # the shared operand shape: few distinct signatures
X = RS.uniform(-3, 3, (M, Nn)).astype(np.float32)
Y = RS.uniform(-3, 3, (M, Nn)).astype(np.float32)
POS = RS.uniform(0.05, 5, (M, Nn)).astype(np.float32)
ROW = RS.uniform(-2, 2, (1, Nn)).astype(np.float32)
COL = RS.uniform(-2, 2, (M, 1)).astype(np.float32)


def out32(shape=(M, Nn)):
    return np.full(shape, np.nan, np.float32)


# ---- every op ----------------------------------------------------------------------------

@pytest.mark.parametrize("op", sorted(set(UNARY) - {"transpose"}))
def test_unary_op_matches_float64_oracle(op):
    x = POS if op in ("sqrt", "log", "log2", "safelog") else X
    if op == "rint":
        x = X.copy()
        x[0, :6] = [0.5, 1.5, 2.5, -0.5, -1.5, 3.5]    # ties go to even, as np.rint
    check(N(op, x), out32())


def test_unary_specials_follow_numpy():
    """NaN, infinities and zeros behave as numpy's float32 ops (same signature as above)."""
    s = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 3e38, -3e38, 100.0, -100.0],
                 np.float32)
    x = np.resize(s, (M, Nn)).astype(np.float32)
    with np.errstate(all="ignore"):
        for op in ("exp", "log", "safelog", "exp2", "log2", "sig", "tanh", "sqrt", "sgn", "finite",
                   "abs", "rint"):
            out = run(N(op, x), out32())
            want = UNARY[op](x.astype(np.float32)).astype(np.float32)
            np.testing.assert_allclose(out, want, rtol=3e-6, atol=1e-37, equal_nan=True,
                                       err_msg=op)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_op_matches_float64_oracle(op):
    a, b = (POS, Y) if op == "pow" else (X, Y)
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        a = np.rint(X)
        b = np.rint(Y)                # plenty of ties
    check(N(op, a, b), out32())


def test_minimum_maximum_propagate_nan():
    a = X.copy()
    b = Y.copy()
    a[0, 0] = np.nan
    b[0, 1] = np.nan
    for op, f in (("minimum", np.minimum), ("maximum", np.maximum)):
        out = run(N(op, a, b), out32())
        np.testing.assert_array_equal(out, f(a, b))


@pytest.mark.parametrize("p", [2, 3, 0.5, -1, 1.7])
def test_pow_by_a_constant(p):
    check(N("pow", POS, p), out32(), tol=dict(rtol=4e-6, atol=2e-6))


def test_pow_constant_is_an_argument_not_code():
    before = _fuse.stats()["compiled"]
    check(N("pow", POS, 1.3), out32(), tol=dict(rtol=4e-6, atol=2e-6))
    check(N("mul", N("add", X, 0.123456), -7.5), out32())
    mid = _fuse.stats()["compiled"]
    check(N("pow", POS, 2.9), out32(), tol=dict(rtol=4e-6, atol=2e-6))
    check(N("mul", N("add", X, 9.75), 0.001), out32())
    assert _fuse.stats()["compiled"] == mid            # new constants, no new kernels
    assert mid - before <= 2


def test_shift_and_binarize():
    check(N("shift", X, Y, value=True), out32())
    check(N("shift", X, ROW, value=False), out32())
    check(N("binarize", X, stochastic=False), out32())


def test_stochastic_binarize_probabilities():
    x = np.zeros((200, 200), np.float32)
    x[:50] = 1.5
    x[50:100] = -1.5
    out = np.empty_like(x)
    assert _fuse.execute(N("binarize", x, stochastic=True), out, rng=np.random.RandomState(3))
    assert set(np.unique(out)) <= {-1.0, 1.0}
    assert (out[:50] == 1).all() and (out[50:100] == -1).all()
    assert abs(out[100:].mean()) < 0.02                 # p = (0 + 1) / 2


# ---- dtypes --------------------------------------------------------------------------------

def test_float16_leaves_and_out():
    a, b, c = X.astype(np.float16), Y.astype(np.float16), ROW.astype(np.float16)
    out = np.zeros((M, Nn), np.float16)
    check(N("sig", N("add", N("mul", a, b), c)), out, tol=F16)
    # float16 leaves into a float32 out: computed in float32, no half rounding of the result
    check(N("sig", N("add", N("mul", a, b), c)), out32())


def test_float64_leaves_compute_in_double():
    a, b = X.astype(np.float64), Y.astype(np.float64)
    out = np.zeros((M, Nn), np.float64)
    run(N("tanh", N("add", N("mul", a, b), 0.25)), out)
    np.testing.assert_allclose(out, np.tanh(a * b + 0.25), rtol=1e-12, atol=1e-15)


# ---- broadcasting, views -----------------------------------------------------------------

def test_broadcast_patterns():
    one = np.array([[0.75]], np.float32)
    check(N("sub", N("add", X, N("mul", ROW, COL)), one), out32())
    check(N("add", ROW, 1.0), out32())                  # a row broadcast down out
    check(N("mul", COL, ROW), out32())                  # outer product by broadcasting
    check(N("add", ROW, ROW), out32((1, Nn)))
    check(N("add", COL, 2), out32((M, 1)))


def test_strided_views_as_leaves_and_out():
    big = RS.uniform(-1, 1, (3 * M, 4 * Nn)).astype(np.float32)
    a = big[::3, 1::4]                                  # strided both ways
    b = np.asfortranarray(Y)                            # column-major
    c = X.T.copy().T                                    # a transposed view
    check(N("add", N("mul", a, b), c), out32())
    dest = np.zeros((2 * M, 3 * Nn), np.float32)
    view = dest[1::2, ::3]
    check(N("add", N("mul", a, b), c), view)
    untouched = dest.copy()
    untouched[1::2, ::3] = 0
    assert not untouched.any()                          # only the view was written
    fout = np.asfortranarray(out32())                   # column-major out: the transposed loop
    check(N("sub", N("mul", a, ROW), COL), fout)


def test_transpose_of_a_leaf_is_a_view():
    t = RS.uniform(-1, 1, (Nn, M)).astype(np.float32)
    check(N("add", N("transpose", t), X), out32())


def test_in_place_and_overlapping_out():
    x = X.copy()
    assert _fuse.execute(N("add", N("mul", x, 2.0), 1.0), x)
    np.testing.assert_allclose(x, X * 2 + 1, rtol=1e-6)
    x = X.copy()
    want = x - x[0:1, :]                                # numpy reads the row before writing
    assert _fuse.execute(N("sub", x, x[0:1, :]), x)
    np.testing.assert_allclose(x, want, rtol=1e-6)
    x = X.copy()
    want = x[:-1] + 1
    assert _fuse.execute(N("add", x[:-1], 1.0), x[1:])  # shifted overlap
    np.testing.assert_allclose(x[1:], want, rtol=1e-6)


# ---- reductions ----------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["sum", "max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1])
def test_reduction_over_an_axis(op, axis):
    shape = (1, Nn) if axis == 0 else (M, 1)
    check(N(op, N("mul", X, Y), axis=axis), out32(shape), tol=dict(rtol=1e-5, atol=1e-5))


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_reduction_over_everything(op):
    check(N(op, N("mul", X, Y), axis=None), out32((1, 1)), tol=dict(rtol=1e-5, atol=1e-5))


def test_reduction_on_a_column_major_operand():
    f = np.asfortranarray(X)
    check(N("sum", f, axis=0), out32((1, Nn)), tol=dict(rtol=1e-5, atol=1e-5))
    check(N("max", f, axis=1), out32((M, 1)))


def test_reduction_propagates_nan_and_argmax_takes_the_first():
    x = np.rint(X)
    x[3, 7] = np.nan
    out = run(N("max", x, axis=1), out32((M, 1)))
    np.testing.assert_array_equal(out, np.max(x, axis=1, keepdims=True))
    out = run(N("argmax", np.rint(X), axis=0), out32((1, Nn)))
    np.testing.assert_array_equal(out[0], np.argmax(np.rint(X), axis=0))


def test_reductions_inside_a_tree():
    # softmax over axis 0: max and sum passes, the sum's own tree holding the max
    e = N("exp", N("sub", X, N("max", X, axis=0)))
    check(N("div", e, N("sum", e, axis=0)), out32(), tol=dict(rtol=1e-5, atol=1e-6))
    # centring rows, a scalar reduction broadcast, two axes in one tree
    check(N("sub", X, N("mul", N("sum", X, axis=1), 1.0 / Nn)), out32(), tol=dict(rtol=1e-5, atol=1e-5))
    check(N("add", N("sub", X, N("max", X, axis=None)), N("min", Y, axis=0)), out32())
    # elementwise work after a root reduction, into its shape
    check(N("sqrt", N("sum", N("sqr", X), axis=0)), out32((1, Nn)), tol=dict(rtol=1e-5, atol=1e-5))


# ---- rand ------------------------------------------------------------------------------------

def test_rand_is_uniform_and_reproducible_from_the_rng():
    out1 = np.empty((300, 300), np.float32)
    out2 = np.empty((300, 300), np.float32)
    assert _fuse.execute(N("rand"), out1, rng=np.random.RandomState(7))
    assert _fuse.execute(N("rand"), out2, rng=np.random.RandomState(7))
    np.testing.assert_array_equal(out1, out2)
    assert out1.min() >= 0 and out1.max() < 1
    assert abs(out1.mean() - 0.5) < 0.005 and abs(out1.var() - 1 / 12) < 0.002
    rng = np.random.RandomState(7)
    _fuse.execute(N("rand"), out2, rng=rng)
    _fuse.execute(N("rand"), out2, rng=rng)             # the rng moved on: new values
    assert not np.array_equal(out1, out2)
    # two rand nodes in one tree are different streams
    a = np.empty((300, 300), np.float32)
    assert _fuse.execute(N("sub", N("rand"), N("rand")), a, rng=np.random.RandomState(7))
    assert np.abs(a).max() > 0.5


def test_rand_does_not_depend_on_the_thread_count(monkeypatch):
    out1 = np.empty((400, 300), np.float32)
    out2 = np.empty((400, 300), np.float32)
    tree = N("lt", N("rand"), 0.3)                       # a dropout mask
    monkeypatch.setattr(_fuse, "_thread_fn", lambda: 1)
    _fuse.execute(tree, out1, rng=np.random.RandomState(11))
    monkeypatch.setattr(_fuse, "_thread_fn", lambda: 3)
    _fuse.execute(tree, out2, rng=np.random.RandomState(11))
    np.testing.assert_array_equal(out1, out2)
    assert abs(out1.mean() - 0.3) < 0.01


def test_sums_do_not_depend_on_the_thread_count(monkeypatch):
    x = RS.uniform(-1, 1, (700, 300)).astype(np.float32)
    outs = []
    for nt in (1, 2, 3):
        monkeypatch.setattr(_fuse, "_thread_fn", lambda nt=nt: nt)
        o = np.empty((1, 1), np.float32)
        run(N("sum", x, axis=None), o)
        outs.append(o[0, 0])
    assert outs[0] == outs[1] == outs[2]


# ---- what is not fused, and errors --------------------------------------------------------

@pytest.mark.parametrize("tree", [
    N("dot", X, Y.T),
    N("onehot", axis=0),
    N("transpose", N("add", X, 1.0)),
    N("argmax", X, axis=None),
    N("add", X.astype(np.int32), 1.0),
    N("add", np.zeros((2, 3, 4), np.float32), 1.0),
    N("add", np.array([object()] * 4, dtype=object).reshape(2, 2), 1.0),
    N("sum", X, axis=2),
    N("nosuchop", X),
], ids=["dot", "onehot", "transpose-expr", "argmax-none", "int", "3d", "object", "axis2", "unknown"])
def test_unsupported_trees_return_false_and_write_nothing(tree):
    out = np.full((M, Nn), 5.0, np.float32)
    assert _fuse.execute(tree, out) is False
    assert (out == 5.0).all()


def test_shapes_that_do_not_broadcast_raise_with_the_shapes():
    with pytest.raises(ValueError, match=r"\(24, 160\).*\(5, 160\)"):
        _fuse.execute(N("add", X, np.zeros((5, Nn), np.float32)), out32())
    with pytest.raises(ValueError, match=r"\(1, 160\)"):
        _fuse.execute(N("add", X, 1.0), out32((1, Nn)))


def test_no_compiler_means_false(monkeypatch):
    monkeypatch.setattr(_fuse, "_toolchain", {"ok": False})
    monkeypatch.setattr(_fuse, "_plans", {})
    out = np.full((M, Nn), 5.0, np.float32)
    assert _fuse.execute(N("add", X, 1.0), out) is False
    assert (out == 5.0).all()


# ---- the caches -----------------------------------------------------------------------------

def test_second_call_compiles_nothing_and_the_disk_cache_serves_a_new_process(monkeypatch, tmp_path):
    monkeypatch.setenv("PLAIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_fuse, "_plans", {})
    monkeypatch.setattr(_fuse, "_libs", {})
    tree = N("maximum", N("mul", X, 3.0), N("neg", Y))
    s0 = _fuse.stats()
    check(tree, out32())
    s1 = _fuse.stats()
    assert s1["compiled"] == s0["compiled"] + 1
    check(tree, out32())
    assert _fuse.stats()["compiled"] == s1["compiled"]  # memory cache
    files = sorted(os.listdir(tmp_path / "neon"))
    assert [f.rsplit(".", 1)[1] for f in files] == ["sha256", "so"]
    monkeypatch.setattr(_fuse, "_plans", {})            # as a new process would: disk only
    monkeypatch.setattr(_fuse, "_libs", {})
    check(tree, out32())
    s2 = _fuse.stats()
    assert s2["compiled"] == s1["compiled"] and s2["loaded"] == s1["loaded"] + 1


@pytest.mark.parametrize("damage", ["truncate", "garbage", "no-checksum"])
def test_a_damaged_cache_file_is_rebuilt(monkeypatch, tmp_path, damage):
    monkeypatch.setenv("PLAIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_fuse, "_plans", {})
    monkeypatch.setattr(_fuse, "_libs", {})
    tree = N("minimum", N("mul", X, 3.0), N("abs", Y))
    check(tree, out32())
    folder = tmp_path / "neon"
    so = next(p for p in folder.iterdir() if p.suffix == ".so")
    data = so.read_bytes()

    def damage_on_disk(new_bytes):
        # A new file in its place: this process still has the library mapped, and writing the
        # mapped file in place would make its pages fault (SIGBUS) when next touched.
        tmp = so.with_name(so.name + ".damaged")
        tmp.write_bytes(new_bytes)
        os.replace(tmp, so)

    if damage == "truncate":
        damage_on_disk(data[: len(data) // 3])
    elif damage == "garbage":
        damage_on_disk(data[:200] + b"\xcc" * (len(data) - 200))
    else:
        next(p for p in folder.iterdir() if p.suffix == ".sha256").unlink()
    monkeypatch.setattr(_fuse, "_plans", {})
    monkeypatch.setattr(_fuse, "_libs", {})
    before = _fuse.stats()["compiled"]
    check(tree, out32())
    assert _fuse.stats()["compiled"] == before + 1
    assert so.read_bytes() != b"" and len(so.read_bytes()) == len(data)


# ---- the C runtime and the Python path agree ----------------------------------------------

WALK_TREES = [
    N("add", N("mul", X, Y), ROW),
    N("sig", N("add", N("mul", X, 0.5), COL)),
    N("pow", POS, 2), N("pow", POS, np.float32(0.5)), N("pow", POS, 1.7), N("pow", POS, Y),
    N("shift", X, Y, value=False), N("shift", X, Y),
    N("binarize", X), N("binarize", X, stochastic=False),
    N("sum", X, axis=0), N("max", X, axis=1), N("min", X, axis=None), N("argmax", X, axis=0),
    N("rand"), N("transpose", X.T),
    N("add", X, np.array([[2.0]], np.float64)), N("add", X, np.array([[2.0]], np.float32)),
    N("add", X, True), N("mul", X, np.int64(3)), N("sub", X, np.float64(0.25)),
    N("add", X.astype(np.float16), X.astype(np.float64)),
    N("add", X[::2, ::3], np.asfortranarray(Y)[::2, ::3]),
]


@pytest.mark.skipif(_fuse._get_rt() is None, reason="the C runtime did not build")
@pytest.mark.parametrize("k", range(len(WALK_TREES)))
def test_c_walk_gives_the_python_key(k):
    tree = WALK_TREES[k]
    out = out32(X[::2, ::3].shape) if k == len(WALK_TREES) - 1 else out32()
    got = _fuse._rt.walk(tree, out)
    assert got is not None
    toks, leaves, consts = [], [], []
    _fuse._walk(tree, toks, leaves, consts)
    assert got[0][:-1] == tuple(toks)
    assert [id(a) for a in got[1]] == [id(a) for a in leaves] or k == 15   # transpose: new view
    assert got[2] == consts


def test_c_walk_defers_what_it_does_not_know():
    rt = _fuse._get_rt()
    if rt is None:
        pytest.skip("the C runtime did not build")
    assert rt.walk(N("add", X, np.zeros((2, 2, 2), np.float32)), out32()) is None
    assert rt.walk(N("dot", X, Y), out32()) is None
    assert rt.walk(N("add", X, 1.0), np.zeros((M, Nn), np.int32)) is None


def test_python_path_matches_the_c_path(monkeypatch):
    trees = [N("add", N("mul", X, Y), ROW), N("exp", N("sub", X, N("max", X, axis=0))),
             N("tanh", N("add", X[::2, ::3], 1.0))]
    outs = [out32(), out32(), out32(X[::2, ::3].shape)]
    fast = [run(t, o).copy() for t, o in zip(trees, outs)]
    monkeypatch.setattr(_fuse, "_rt", None)
    for t, o, f in zip(trees, outs, fast):
        o[...] = np.nan
        np.testing.assert_array_equal(run(t, o), f)
    with pytest.raises(ValueError, match="do not broadcast"):
        _fuse.execute(N("add", X, np.zeros((5, Nn), np.float32)), out32())


def test_multi_pass_errors_and_overlap():
    with pytest.raises(ValueError, match="does not fit out"):
        _fuse.execute(N("sum", X, axis=0), out32((1, 7)))
    with pytest.raises(ValueError, match=r"\(3, 7\)"):
        _fuse.execute(N("add", N("sum", X, axis=0), np.zeros((3, 7), np.float32)), out32())
    x = X.copy()
    want = np.exp(x - x.max(axis=0, keepdims=True)) + x[0:1, :]
    assert _fuse.execute(N("add", N("exp", N("sub", x, N("max", x, axis=0))), x[0:1, :]), x)
    np.testing.assert_allclose(x, want, rtol=2e-6, atol=2e-6)
    x = X.copy()
    want = x.sum(axis=1, keepdims=True)
    assert _fuse.execute(N("sum", x, axis=1), x[:, 3:4])      # out is a column of the operand
    np.testing.assert_allclose(x[:, 3:4], want, rtol=1e-5, atol=1e-5)


def test_a_bare_leaf_or_scalar_is_a_copy_or_a_fill():
    check(X[::2, ::3].copy(), out32(X[::2, ::3].shape))
    out = run(2.5, out32())
    assert (out == 2.5).all()
    check(ROW, out32())


@pytest.mark.parametrize("shape,axis", [((3, 70000), 1), ((5000, 20), 0), ((3, 70000), None)],
                         ids=["few-long-rows", "many-rows-few-columns", "all"])
def test_split_reductions_are_exact_and_thread_independent(monkeypatch, shape, axis):
    """Shapes that split a reduction into chunks combined in order (for parallelism)."""
    x = np.rint(RS.uniform(-50, 50, shape)).astype(np.float32)
    x.flat[12345] = 99.0                             # a unique maximum, and a tie below it
    x.flat[23456] = 99.0 if axis == 1 else 98.0
    ops = ["sum", "max", "min"] + (["argmax", "argmin"] if axis is not None else [])
    oshape = (1, 1) if axis is None else ((1, shape[1]) if axis == 0 else (shape[0], 1))
    for op in ops:
        results = []
        for nt in (1, 3):
            monkeypatch.setattr(_fuse, "_thread_fn", lambda nt=nt: nt)
            results.append(run(N(op, x, axis=axis), out32(oshape)).copy())
        np.testing.assert_array_equal(results[0], results[1], err_msg=op)
        want = oracle(N(op, x, axis=axis))
        np.testing.assert_array_equal(results[0], want.astype(np.float32), err_msg=op)   # integers: exact
    x[1, 5] = np.nan
    got = run(N("max", x, axis=axis), out32(oshape))
    np.testing.assert_array_equal(got, np.max(x, axis=axis, keepdims=True))
