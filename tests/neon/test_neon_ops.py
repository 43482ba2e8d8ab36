"""plait.neon: every Backend op against an independent numpy oracle computed in float64.

Each test runs on the numpy reference evaluator (PLAIT_NEON_FUSE=0) and, when plait.neon._fuse
imports, on the fused path too. Tolerances: float32 rtol 1e-5 / atol 1e-6 (transcendentals
rtol 1e-5 as well), float16 rtol 2e-3 / atol 2e-3 (the result is rounded to float16 once: half
an ulp is 4.9e-4 relative), float64 rtol 1e-12. The oracle reads the stored (rounded) inputs.
"""
import importlib

import numpy as np
import pytest

from plait.neon import NervanaCPU, OpTreeNode


def _fuse_available():
    try:
        mod = importlib.import_module("plait.neon._fuse")
    except ImportError:
        return False
    return hasattr(mod, "execute")


MODES = [
    pytest.param("numpy", id="numpy"),
    pytest.param("fused", id="fused",
                 marks=pytest.mark.skipif(not _fuse_available(), reason="plait.neon._fuse not available")),
]

TOL = {
    np.float32: dict(rtol=1e-5, atol=1e-6),
    np.float16: dict(rtol=2e-3, atol=2e-3),
    np.float64: dict(rtol=1e-12, atol=1e-12),
}


@pytest.fixture(params=MODES)
def mode(request):
    return request.param


@pytest.fixture
def be(mode, monkeypatch):
    monkeypatch.setenv("PLAIT_NEON_FUSE", "0" if mode == "numpy" else "1")
    return NervanaCPU(rng_seed=0)


# The fused path compiles one kernel per tree signature (cached on disk); to keep a cold run of
# this folder short, the dtype sweeps run fused in float32, and in float16/float64 for a few ops.
FUSED_OTHER_DTYPES = {"sig", "exp", "tanh", "sqrt", "add", "multiply", "greater", "sum", "max"}


def _skip_cold_fused(mode, name, dtype):
    if mode == "fused" and dtype != np.float32 and name not in FUSED_OTHER_DTYPES:
        pytest.skip("fused path covered in float32 for this op (keeps kernel compiles few)")


def _host(t):
    return t.get().astype(np.float64)


def _close(actual, expected, dtype=np.float32):
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, **TOL[dtype])


def _rand(shape, lo=-2.0, hi=2.0, seed=0):
    return np.random.RandomState(seed).uniform(lo, hi, size=shape)


UNARY = {
    # name: (backend call, oracle, input range)
    "negative": (lambda be, a: be.negative(a), np.negative, (-2, 2)),
    "neg_operator": (lambda be, a: -a, np.negative, (-2, 2)),
    "absolute": (lambda be, a: be.absolute(a), np.abs, (-2, 2)),
    "fabs": (lambda be, a: be.fabs(a), np.abs, (-2, 2)),
    "abs_operator": (lambda be, a: abs(a), np.abs, (-2, 2)),
    "sgn": (lambda be, a: be.sgn(a), np.sign, (-2, 2)),
    "sqrt": (lambda be, a: be.sqrt(a), np.sqrt, (0.01, 4)),
    "square": (lambda be, a: be.square(a), np.square, (-2, 2)),
    "exp": (lambda be, a: be.exp(a), np.exp, (-3, 3)),
    "exp2": (lambda be, a: be.exp2(a), np.exp2, (-3, 3)),
    "log": (lambda be, a: be.log(a), np.log, (0.05, 5)),
    "log2": (lambda be, a: be.log2(a), np.log2, (0.05, 5)),
    "safelog": (lambda be, a: be.safelog(a), lambda x: np.log(np.maximum(x, np.exp(-50.0))), (0.05, 5)),
    "sig": (lambda be, a: be.sig(a), lambda x: 1 / (1 + np.exp(-x)), (-6, 6)),
    "sig2": (lambda be, a: be.sig2(a), lambda x: 1 / (1 + 2.0 ** -x), (-6, 6)),
    "tanh": (lambda be, a: be.tanh(a), np.tanh, (-3, 3)),
    "tanh2": (lambda be, a: be.tanh2(a), lambda x: (4.0 ** x - 1) / (4.0 ** x + 1), (-3, 3)),
    "reciprocal": (lambda be, a: be.reciprocal(a), lambda x: 1 / x, (0.5, 3)),
    "rint": (lambda be, a: be.rint(a), np.rint, (-4.4, 4.4)),
    "finite": (lambda be, a: be.finite(a), lambda x: np.isfinite(x).astype(float), (-2, 2)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(be, mode, name, dtype):
    _skip_cold_fused(mode, name, dtype)
    call, oracle, (lo, hi) = UNARY[name]
    a = be.array(_rand((5, 7), lo, hi), dtype=dtype)
    out = be.empty((5, 7), dtype=dtype)
    result = call(be, a)
    assert isinstance(result, OpTreeNode)
    out[:] = result
    assert out.dtype == dtype
    _close(out.get(), oracle(_host(a)), dtype)
    # the out= form computes the same and returns out
    out2 = be.empty((5, 7), dtype=dtype)
    if name.endswith("_operator"):
        return
    method = getattr(be, name)
    assert method(a, out=out2) is out2
    _close(out2.get(), oracle(_host(a)), dtype)


def test_finite_and_safelog_edge_values(be):
    a = be.array([[1.0, np.inf, -np.inf, np.nan, 0.0]])
    out = be.empty((1, 5))
    be.finite(a, out=out)
    np.testing.assert_array_equal(out.get(), [[1, 0, 0, 0, 1]])
    z = be.array([[0.0, -1.0, 1.0]])
    be.safelog(z, out=be.empty((1, 3)))
    out = be.empty((1, 3))
    out[:] = be.safelog(z)
    np.testing.assert_allclose(out.get(), [[-50.0, -50.0, 0.0]], rtol=1e-6)


BINARY = {
    "add": (lambda be, a, b: be.add(a, b), np.add, "+"),
    "subtract": (lambda be, a, b: be.subtract(a, b), np.subtract, "-"),
    "multiply": (lambda be, a, b: be.multiply(a, b), np.multiply, "*"),
    "divide": (lambda be, a, b: be.divide(a, b), np.divide, "/"),
    "true_divide": (lambda be, a, b: be.true_divide(a, b), np.divide, None),
    "power": (lambda be, a, b: be.power(a, b), np.power, "**"),
    "maximum": (lambda be, a, b: be.maximum(a, b), np.maximum, None),
    "minimum": (lambda be, a, b: be.minimum(a, b), np.minimum, None),
    "equal": (lambda be, a, b: be.equal(a, b), lambda x, y: (x == y).astype(float), "=="),
    "not_equal": (lambda be, a, b: be.not_equal(a, b), lambda x, y: (x != y).astype(float), "!="),
    "less": (lambda be, a, b: be.less(a, b), lambda x, y: (x < y).astype(float), "<"),
    "less_equal": (lambda be, a, b: be.less_equal(a, b), lambda x, y: (x <= y).astype(float), "<="),
    "greater": (lambda be, a, b: be.greater(a, b), lambda x, y: (x > y).astype(float), ">"),
    "greater_equal": (lambda be, a, b: be.greater_equal(a, b), lambda x, y: (x >= y).astype(float), ">="),
}

OPERATORS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "**": lambda a, b: a ** b, "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def _operands(name):
    a = _rand((4, 6), 0.5, 2.0, seed=1)
    b = _rand((4, 6), 0.5, 2.0, seed=2)
    if name in ("equal", "not_equal", "less_equal", "greater_equal"):
        b[::2] = a[::2]  # some ties
    return a, b


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_tensor_tensor(be, mode, name, dtype):
    _skip_cold_fused(mode, name, dtype)
    call, oracle, sym = BINARY[name]
    an, bn = _operands(name)
    a, b = be.array(an, dtype=dtype), be.array(bn, dtype=dtype)
    out = be.empty((4, 6), dtype=dtype)
    out[:] = call(be, a, b)
    _close(out.get(), oracle(_host(a), _host(b)), dtype)
    if sym is not None:
        out[:] = OPERATORS[sym](a, b)
        _close(out.get(), oracle(_host(a), _host(b)), dtype)
    assert getattr(be, name)(a, b, out=out) is out


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast_and_scalars(be, mode, name):
    if mode == "fused" and name not in ("add", "subtract", "divide", "power", "maximum", "less"):
        pytest.skip("fused broadcasting covered on a few ops (keeps kernel compiles few)")
    call, oracle, sym = BINARY[name]
    an, bn = _operands(name)
    a = be.array(an)
    col = be.array(bn[:, :1])  # (4, 1)
    row = be.array(bn[:1, :])  # (1, 6)
    out = be.empty((4, 6))
    for other, host in ((col, _host(col)), (row, _host(row)), (1.5, 1.5), (np.float32(1.5), 1.5), (2, 2.0)):
        out[:] = call(be, a, other)
        _close(out.get(), oracle(_host(a), host))
        out[:] = call(be, other, a)  # scalar / column on the left
        _close(out.get(), oracle(host, _host(a)))
        if sym is not None:
            out[:] = OPERATORS[sym](other, a)
            _close(out.get(), oracle(host, _host(a)))


def test_clip(be):
    a = be.array(_rand((3, 5), -3, 3))
    out = be.empty((3, 5))
    be.clip(a, -1.0, 0.5, out=out)
    _close(out.get(), np.clip(_host(a), -1, 0.5))
    lo = be.array(np.full((3, 1), -0.25))
    out[:] = be.clip(a, lo, 2.0)
    _close(out.get(), np.clip(_host(a), -0.25, 2.0))


def test_compound_expression_matches_oracle(be):
    x, w, b = _rand((6, 8), seed=1), _rand((6, 8), seed=2), _rand((6, 1), seed=3)
    X, W, B = be.array(x), be.array(w), be.array(b)
    out = be.empty((6, 8))
    out[:] = be.tanh(X * W + B) * 0.5 - be.maximum(X, 0) / (1.0 + be.exp(-W)) + X ** 2
    expected = np.tanh(x * w + b) * 0.5 - np.maximum(x, 0) / (1 + np.exp(-w)) + x ** 2
    _close(out.get(), expected)


# -- reductions ---------------------------------------------------------------------------------


REDUCTIONS = {
    "sum": np.sum, "max": np.max, "min": np.min,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions(be, mode, name, axis, dtype):
    _skip_cold_fused(mode, name, dtype)
    a = be.array(_rand((5, 7)), dtype=dtype)
    shape = {0: (1, 7), 1: (5, 1), None: (1, 1)}[axis]
    tree = getattr(be, name)(a, axis=axis)
    assert tree.shape == shape
    out = be.empty(shape, dtype=dtype)
    out[:] = tree
    host = _host(a)
    expected = REDUCTIONS[name](host, axis=axis, keepdims=True) if axis is not None \
        else np.array([[REDUCTIONS[name](host)]])
    tol = dict(rtol=5e-3, atol=1e-2) if dtype == np.float16 else TOL[dtype]
    np.testing.assert_allclose(out.get().astype(np.float64), expected, **tol)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin(be, name):
    host = _rand((4, 9))
    host[1, 3] = host[1, 5] = 10.0 if name == "argmax" else -10.0  # ties: the first index wins
    a = be.array(host)
    fn = getattr(np, name)
    out = be.empty((4, 1))
    getattr(be, name)(a, out=out)  # default axis is 1
    np.testing.assert_array_equal(out.get().ravel(), fn(host, axis=1))
    assert out.get()[1, 0] == 3
    out0 = be.empty((1, 9), dtype=np.int32)
    getattr(be, name)(a, axis=0, out=out0)
    np.testing.assert_array_equal(out0.get().ravel(), fn(host, axis=0))
    outall = be.empty((1, 1))
    getattr(be, name)(a, axis=None, out=outall)
    assert outall.get()[0, 0] == fn(host)


@pytest.mark.parametrize("axis", [0, 1, None])
def test_mean_var_std(be, axis):
    host = _rand((6, 5))
    a = be.array(host)
    shape = {0: (1, 5), 1: (6, 1), None: (1, 1)}[axis]
    h = a.get().astype(np.float64)
    for name, oracle in (("mean", np.mean), ("var", np.var), ("std", np.std)):
        out = be.empty(shape)
        assert getattr(be, name)(a, axis=axis, out=out) is out
        expected = oracle(h, axis=axis, keepdims=True) if axis is not None else np.array([[oracle(h)]])
        _close(out.get(), expected)
        out2 = be.empty(shape)
        out2[:] = getattr(be, name)(a, axis=axis)
        _close(out2.get(), expected)


def test_std_out_holds_the_std_not_the_variance(be):
    """neon 2.x's std(out=) wrote the variance into out; here out receives the std."""
    a = be.array([[1.0, 3.0, 5.0, 7.0]])
    out = be.empty((1, 1))
    be.std(a, out=out)
    np.testing.assert_allclose(out.get(), [[np.sqrt(5.0)]], rtol=1e-6)


def test_var_binary_uses_power_of_two_squares(be):
    a = be.array([[1.0, 2.0, 4.0, 9.0]])
    out = be.empty((1, 1))
    be.var(a, binary=True, out=out)
    h = a.get().astype(np.float64)
    c = h - h.mean()
    pow2 = np.sign(c) * 2.0 ** np.rint(np.log(np.maximum(np.abs(c), np.exp(-50.0))) / np.log(2.0))
    _close(out.get(), np.array([[np.mean(c * pow2)]]))


def test_reduction_inside_elementwise_tree(be):
    host = _rand((5, 6))
    a = be.array(host)
    out = be.empty((5, 6))
    out[:] = be.exp(a - be.max(a, axis=0)) / be.sum(be.exp(a - be.max(a, axis=0)), axis=0)
    h = a.get().astype(np.float64)
    e = np.exp(h - h.max(axis=0))
    _close(out.get(), e / e.sum(axis=0))
    out[:] = be.fprop_softmax(a, axis=0)
    _close(out.get(), e / e.sum(axis=0))


# -- shift, binarize, onehot, rand ------------------------------------------------------------


def test_shift(be):
    a = be.array([[1.0, -3.0, 0.5, 2.0]])
    b = be.array([[3.0, 5.0, -0.3, 1.0]])
    out = be.empty((1, 4))
    be.shift(a, b, out=out)
    h_a, h_b = _host(a), _host(b)
    pow2 = np.sign(h_b) * 2.0 ** np.rint(np.log2(np.abs(h_b)))
    _close(out.get(), h_a * pow2)
    out[:] = be.shift(a, b, value=False)
    _close(out.get(), h_a * 2.0 ** h_b)


def test_binarize(be):
    host = _rand((40, 50), -1.5, 1.5)
    a = be.array(host)
    out = be.empty((40, 50))
    be.binarize(a, stochastic=False, out=out)
    np.testing.assert_array_equal(out.get(), np.where(host >= 0, 1, -1))
    be.binarize(a, out=out)  # stochastic: +1 with probability clip((a + 1) / 2, 0, 1)
    vals = out.get()
    assert set(np.unique(vals)) <= {-1.0, 1.0}
    assert (vals[host >= 1] == 1).all() and (vals[host <= -1] == -1).all()
    mid = np.abs(host) < 0.2
    assert 0.3 < (vals[mid] == 1).mean() < 0.7
    # neon's CPU call form binarize(a, out, stochastic)
    out2 = be.empty((40, 50))
    be.binarize(a, out2, stochastic=False)
    np.testing.assert_array_equal(out2.get(), np.where(host >= 0, 1, -1))


def test_stochastic_ops_draw_from_be_rng():
    be1, be2 = NervanaCPU(rng_seed=11), NervanaCPU(rng_seed=11)
    a1, a2 = be1.zeros((8, 8)), be2.zeros((8, 8))
    o1, o2 = be1.empty((8, 8)), be2.empty((8, 8))
    be1.binarize(a1, out=o1)
    be2.binarize(a2, out=o2)
    np.testing.assert_array_equal(o1.get(), o2.get())
    o1[:] = be1.rand()
    o2[:] = be2.rand()
    np.testing.assert_array_equal(o1.get(), o2.get())
    assert ((o1.get() >= 0) & (o1.get() < 1)).all()


@pytest.mark.parametrize("axis", [0, 1])
def test_onehot(be, axis):
    labels = np.array([3, 0, 2, 2, 4])
    idx = be.array(labels.reshape(1, -1), dtype=np.int32)
    shape = (5, 5) if axis == 0 else (5, 5)
    out = be.empty(shape)
    assert be.onehot(idx, axis=axis, out=out) is out
    eye = np.eye(5)[labels]
    np.testing.assert_array_equal(out.get(), eye.T if axis == 0 else eye)
    wide = be.empty((7, 5))
    wide[:] = be.onehot(idx, axis=0)
    np.testing.assert_array_equal(wide.get(), np.eye(7)[labels].T)
    # onehot inside a bigger expression
    wide[:] = be.onehot(idx, axis=0) * 2 - 1
    np.testing.assert_array_equal(wide.get(), np.eye(7)[labels].T * 2 - 1)


def test_onehot_errors(be):
    with pytest.raises(ValueError, match="axis"):
        be.onehot(be.array([[1]], dtype=np.int32), axis=2)
    with pytest.raises(TypeError, match="integer"):
        be.onehot(be.array([[1.0]]), axis=0)


# -- matrix products ----------------------------------------------------------------------------


def test_dot_op_tree(be):
    a, b = _rand((4, 6), seed=1), _rand((6, 3), seed=2)
    A, B = be.array(a), be.array(b)
    out = be.empty((4, 3))
    assert be.dot(A, B, out=out) is out
    _close(out.get(), _host(A) @ _host(B))
    out[:] = be.dot(A, B) * 2 + 1
    _close(out.get(), 2 * (_host(A) @ _host(B)) + 1)
    outT = be.empty((6, 6))
    outT[:] = be.dot(A.T, A)
    _close(outT.get(), _host(A).T @ _host(A))
    out16 = be.empty((4, 3), dtype=np.float16)
    be.dot(be.array(a, dtype=np.float16), be.array(b, dtype=np.float16), out=out16)
    np.testing.assert_allclose(out16.get().astype(np.float64),
                               a.astype(np.float16).astype(np.float64) @ b.astype(np.float16), rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("trans", ["nn", "tn", "nt"])
@pytest.mark.parametrize("alpha,beta,relu", [(1.0, 0.0, False), (0.5, 0.0, True), (2.0, 1.5, False),
                                             (-1.0, 0.5, True)])
def test_compound_dot(be, trans, alpha, beta, relu):
    m, k, n = 5, 7, 4
    a = _rand((k, m) if trans == "tn" else (m, k), seed=3)
    b = _rand((n, k) if trans == "nt" else (k, n), seed=4)
    c0 = _rand((m, n), seed=5)
    A, B, C = be.array(a), be.array(b), be.array(c0)
    opA = A.T if trans == "tn" else A
    opB = B.T if trans == "nt" else B
    assert be.compound_dot(opA, opB, C, alpha=alpha, beta=beta, relu=relu) is C
    ha = _host(A).T if trans == "tn" else _host(A)
    hb = _host(B).T if trans == "nt" else _host(B)
    prod = alpha * (ha @ hb)
    if relu:
        prod = np.maximum(prod, 0)
    _close(C.get(), prod + beta * c0.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_compound_dot_other_dtypes(be, dtype):
    a, b, c0 = _rand((6, 5), seed=1), _rand((5, 4), seed=2), _rand((6, 4), seed=3)
    A, B, C = be.array(a, dtype=dtype), be.array(b, dtype=dtype), be.array(c0, dtype=dtype)
    hc = _host(C)
    be.compound_dot(A, B, C, alpha=0.5, beta=1.0)
    tol = dict(rtol=5e-3, atol=5e-3) if dtype == np.float16 else TOL[dtype]
    assert C.dtype == dtype
    np.testing.assert_allclose(_host(C), 0.5 * _host(A) @ _host(B) + hc, **tol)


def test_compound_dot_into_a_slice_and_bsum(be):
    a, b = _rand((3, 4), seed=1), _rand((4, 5), seed=2)
    A, B = be.array(a), be.array(b)
    C = be.zeros((3, 10))
    bsum = be.empty((3, 1))
    be.compound_dot(A, B, C[:, 5:10], bsum=bsum)
    _close(C.get()[:, 5:], _host(A) @ _host(B))
    assert (C.get()[:, :5] == 0).all()
    _close(bsum.get(), (_host(A) @ _host(B)).sum(axis=1, keepdims=True))


def test_compound_dot_shape_error_names_operands(be):
    with pytest.raises(ValueError, match=r"compound_dot.*\(3, 4\).*\(5, 2\).*A.T or B.T"):
        be.compound_dot(be.ones((3, 4)), be.ones((5, 2)), be.ones((3, 2)))


def test_batched_dot_three_modes(be):
    X, K, Cc, N = 3, 4, 5, 6
    a_kc, b_xcn, b_xkn = _rand((K, Cc), seed=1), _rand((X, Cc, N), seed=2), _rand((X, K, N), seed=3)
    A = be.array(a_kc)
    # fprop: A (K, C), B (X, C, N) -> C (X, K, N)
    out = be.empty((X, K, N))
    be.batched_dot(A, be.array(b_xcn), out)
    _close(out.get(), np.einsum("kc,xcn->xkn", _host(A), b_xcn.astype(np.float32).astype(np.float64)))
    # bprop: A.T (C, K), B (X, K, N) -> C (X, C, N)
    out = be.empty((X, Cc, N))
    be.batched_dot(A.T, be.array(b_xkn), out)
    _close(out.get(), np.einsum("kc,xkn->xcn", _host(A), b_xkn.astype(np.float32).astype(np.float64)))
    # update: A (X, K, N), B.T with B (X, C, N) -> C (K, C), accumulated with beta
    E, I = be.array(b_xkn), be.array(b_xcn)
    c0 = _rand((K, Cc), seed=9)
    out = be.array(c0)
    be.batched_dot(E, I.T, out, alpha=0.5, beta=2.0)
    expected = 0.5 * np.einsum("xkn,xcn->kc", _host(E), _host(I)) + 2.0 * c0.astype(np.float32)
    _close(out.get(), expected)
    # relu is applied to alpha * product, before the beta term
    c1 = _rand((X, K, N), seed=11)
    out = be.array(c1)
    be.batched_dot(A, be.array(b_xcn), out, alpha=-1.0, beta=0.5, relu=True)
    prod = np.einsum("kc,xcn->xkn", _host(A), b_xcn.astype(np.float32).astype(np.float64))
    _close(out.get(), np.maximum(-prod, 0) + 0.5 * c1.astype(np.float32))
    with pytest.raises(ValueError, match="batched_dot"):
        be.batched_dot(A, be.array(b_xkn), be.empty((X, K, N)))


def test_xnor_compound_dot(be):
    a = np.where(_rand((4, 8), seed=1) >= 0, 1.0, -1.0)
    b = np.where(_rand((8, 3), seed=2) >= 0, 1.0, -1.0)
    C = be.empty((4, 3))
    be.xnor_compound_dot(be.array(a), be.array(b), C)
    np.testing.assert_array_equal(C.get(), a @ b)
    # non +-1 operands are taken by their sign, as an XNOR kernel does
    be.xnor_compound_dot(be.array(a * 3.5), be.array(b * 0.25), C, beta=1.0)
    np.testing.assert_array_equal(C.get(), 2 * (a @ b))


def test_fc_bias_helpers(be):
    x, bias = _rand((4, 6), seed=1), _rand((4, 1), seed=2)
    X, Bias = be.array(x), be.array(bias)
    be.add_fc_bias(X, Bias)
    _close(X.get(), x.astype(np.float32) + bias.astype(np.float32))
    grad = be.empty((4, 1))
    be.update_fc_bias(X, grad)
    _close(grad.get(), _host(X).sum(axis=1, keepdims=True))


def test_copy_transpose(be):
    host = _rand((2, 3, 4))
    a = be.array(host)
    out = be.empty((4, 2, 3))
    be.copy_transpose(a, out, axes=(2, 0, 1))
    _close(out.get(), np.transpose(_host(a), (2, 0, 1)))
    out2 = be.empty((4, 3))
    be.copy_transpose(be.array(host[0]), out2)
    _close(out2.get(), _host(a)[0].T)


# -- layer-level compounds ----------------------------------------------------------------------


class _Tanh:
    def __init__(self, be):
        self.be = be

    def __call__(self, x):
        return self.be.tanh(x)

    def bprop(self, y):
        return 1.0 - y * y


@pytest.mark.parametrize("reverse", [False, True])
def test_rnn_unroll_fprop_and_bprop(be, reverse):
    nout, nsteps, bsz = 3, 4, 2
    w = _rand((nout, nout), -0.5, 0.5, seed=1)
    bias = _rand((nout, 1), seed=2)
    ff = _rand((nout, nsteps * bsz), seed=3)
    W, Bias = be.array(w), be.array(bias)
    h_buf = be.zeros((nout, (nsteps + 1) * bsz))
    h_ff = be.array(ff)
    h_s = [h_buf[:, (t + 1) * bsz:(t + 2) * bsz] for t in range(nsteps)]
    h_prev_s = [h_buf[:, t * bsz:(t + 1) * bsz] for t in range(nsteps)]
    h_ff_s = [h_ff[:, t * bsz:(t + 1) * bsz] for t in range(nsteps)]
    if reverse:  # BiRNN's backward direction: h[t] depends on h[t + 1]
        h_s, h_prev_s = h_prev_s, h_s
    act = _Tanh(be)
    be.compound_rnn_unroll_fprop(W, h_prev_s, h_ff_s, h_s, Bias, nout, nsteps, nsteps, act, reverse=reverse)
    ref = np.zeros((nout, (nsteps + 1) * bsz))
    wf, bf, fff = _host(W), _host(Bias), _host(h_ff)
    order = range(nsteps - 1, -1, -1) if reverse else range(nsteps)
    for t in order:
        src = slice((t + 1) * bsz, (t + 2) * bsz) if reverse else slice(t * bsz, (t + 1) * bsz)
        dst = slice(t * bsz, (t + 1) * bsz) if reverse else slice((t + 1) * bsz, (t + 2) * bsz)
        ref[:, dst] = np.tanh(wf @ ref[:, src] + fff[:, t * bsz:(t + 1) * bsz] + bf)
    _close(h_buf.get(), ref)

    # bprop (reverse=True is the plain RNN's direction)
    err = _rand((nout, (nsteps + 1) * bsz), seed=4)
    d_buf = be.array(err)
    h_s = [h_buf[:, (t + 1) * bsz:(t + 2) * bsz] for t in range(nsteps)]
    delta_s = [d_buf[:, (t + 1) * bsz:(t + 2) * bsz] for t in range(nsteps)]
    delta_prev_s = [d_buf[:, t * bsz:(t + 1) * bsz] for t in range(nsteps)]
    be.compound_rnn_unroll_bprop(W.T, delta_prev_s, delta_s, h_s, nout, nsteps, nsteps, act, reverse=True)
    dref = err.astype(np.float32).astype(np.float64)
    href = h_buf.get().astype(np.float64)
    for t in range(nsteps - 1, -1, -1):
        cur = slice((t + 1) * bsz, (t + 2) * bsz)
        prev = slice(t * bsz, (t + 1) * bsz)
        dref[:, cur] = (1 - href[:, cur] ** 2) * dref[:, cur]
        dref[:, prev] += wf.T @ dref[:, cur]
    _close(d_buf.get(), dref)


def test_rnn_unroll_shared_ff_buffer_and_used_steps(be):
    nout, bsz = 2, 3
    w = _rand((nout, nout), -0.5, 0.5, seed=5)
    W, Bias = be.array(w), be.zeros((nout, 1))
    h = be.array(_rand((nout, 3 * bsz), seed=6))  # h_ff is h itself: beta-accumulated
    h0 = be.zeros((nout, bsz))
    before = h.get().astype(np.float64)
    h_s = [h[:, t * bsz:(t + 1) * bsz] for t in range(3)]
    h_prev_s = [h0] + h_s[:2]
    be.compound_rnn_unroll_fprop(W, h_prev_s, h_s, h_s, Bias, nout, 3, 2, _Tanh(be))
    ref = before.copy()
    prev = np.zeros((nout, bsz))
    for t in range(2):
        ref[:, t * bsz:(t + 1) * bsz] = np.tanh(_host(W) @ prev + before[:, t * bsz:(t + 1) * bsz])
        prev = ref[:, t * bsz:(t + 1) * bsz]
    _close(h.get(), ref)  # the third step (unused) is untouched


@pytest.mark.parametrize("pad_idx", [None, 2])
def test_compound_bprop_lut(be, pad_idx):
    vocab, dim = 6, 3
    ids = np.array([2, 0, 2, 5, 1, 2])
    err = _rand((dim, ids.size), seed=1)
    dW = be.array(np.full((vocab, dim), 7.0))
    inputs = be.array(ids.reshape(1, -1), dtype=np.int32)
    be.compound_bprop_lut(ids.size, inputs, be.array(err), be.array(err.T), dW, pad_idx)
    ref = np.full((vocab, dim), 7.0)
    e = err.astype(np.float32).astype(np.float64)
    for w in set(ids.tolist()):
        if w != pad_idx:
            ref[w] = e[:, ids == w].sum(axis=1)
    _close(dW.get(), ref)


@pytest.mark.parametrize("binary", [False])
def test_batchnorm_compounds(be, binary):
    C, N = 4, 16
    x = _rand((C, N), seed=1)
    gamma, beta = _rand((C, 1), 0.5, 1.5, seed=2), _rand((C, 1), seed=3)
    X, G, Bt = be.array(x), be.array(gamma), be.array(beta)
    xsum, xvar = be.empty((C, 1)), be.empty((C, 1))
    gmean, gvar = be.zeros((C, 1)), be.ones((C, 1))
    y = be.empty((C, N))
    eps, rho = 1e-3, 0.9
    be.compound_fprop_bn(X, xsum, xvar, gmean, gvar, G, Bt, y, eps, rho, compute_batch_sum=True)
    h = _host(X)
    mu, var = h.mean(axis=1, keepdims=True), h.var(axis=1, keepdims=True)
    xhat = (h - mu) / np.sqrt(var + eps)
    _close(xsum.get(), mu)
    _close(xvar.get(), var)
    _close(gmean.get(), (1 - rho) * mu)
    _close(gvar.get(), rho + (1 - rho) * var)
    _close(y.get(), xhat * _host(G) + _host(Bt), np.float32)
    # backward against the closed form of batch-norm's gradient
    d_in = _rand((C, N), seed=4)
    Din = be.array(d_in)
    gg, gb, d_out = be.empty((C, 1)), be.empty((C, 1)), be.empty((C, N))
    be.compound_bprop_bn(d_out, gg, gb, Din, X, xsum, xvar, G, eps)
    dy = _host(Din)
    ref_gg = (xhat * dy).sum(axis=1, keepdims=True)
    ref_gb = dy.sum(axis=1, keepdims=True)
    ref_dx = _host(G) / np.sqrt(var + eps) * (dy - (xhat * ref_gg + ref_gb) / N)
    np.testing.assert_allclose(gg.get(), ref_gg, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gb.get(), ref_gb, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(d_out.get(), ref_dx, rtol=1e-4, atol=1e-5)
    # inference uses the running statistics
    y2 = be.empty((C, N))
    be.compound_fprop_bn(X, xsum, xvar, gmean, gvar, G, Bt, y2, eps, rho, False, inference=True)
    ref = (h - _host(gmean)) / np.sqrt(_host(gvar) + eps) * _host(G) + _host(Bt)
    np.testing.assert_allclose(y2.get(), ref, rtol=1e-4, atol=1e-5)


def test_relu_helpers_and_skipnode(be):
    x = be.array([[-2.0, 0.5, 3.0]])
    out = be.empty((1, 3))
    out[:] = be.fprop_relu(None, x, 0.1)
    _close(out.get(), [[-0.2, 0.5, 3.0]])
    out[:] = be.bprop_relu(None, x, None, None, 0.1)
    _close(out.get(), [[0.1, 1.0, 1.0]])
    y = be.ones((1, 3))
    be.fprop_skipnode(x, y, 2.0)
    _close(y.get(), [[0.0, 2.5, 5.0]])


def test_nms(be):
    dets = be.array([[0, 0, 10, 10, 0.9], [1, 1, 10, 10, 0.8], [20, 20, 30, 30, 0.7],
                     [0, 0, 1, 1, 0.0]])
    assert be.nms(dets, 0.5) == [0, 2]
    assert be.nms(dets, 0.95) == [0, 1, 2]


# -- RNG ----------------------------------------------------------------------------------------


def test_rng_state_reset_and_reproducibility():
    be = NervanaCPU(rng_seed=123)
    m1 = be.empty((10, 10))
    be.make_binary_mask(m1, keepthresh=0.3)
    vals = m1.get()
    assert set(np.unique(vals)) <= {0.0, 1.0}
    be.rng_reset()
    m2 = be.empty((10, 10))
    be.make_binary_mask(m2, keepthresh=0.3)
    np.testing.assert_array_equal(m2.get(), vals)
    state = be.rng_get_state()
    assert be.rng_get_state(None)[0] == state[0]  # the page's one-argument form is accepted
    n1 = be.empty((3, 3))
    be.fill_normal(n1, mean=1.0, stdv=2.0)
    be.rng_set_state(state)
    n2 = be.empty((3, 3))
    be.fill_normal(n2, mean=1.0, stdv=2.0)
    np.testing.assert_array_equal(n1.get(), n2.get())
    rng = be.gen_rng(7)
    assert rng is be.rng
    expected = np.random.RandomState(7).uniform(size=(2, 2)) < 0.5
    m3 = be.empty((2, 2))
    be.make_binary_mask(m3)
    np.testing.assert_array_equal(m3.get(), expected)
    be2 = NervanaCPU(rng_seed=123)
    m4 = be2.empty((10, 10))
    be2.make_binary_mask(m4, keepthresh=0.3)
    np.testing.assert_array_equal(m4.get(), vals)


# -- errors -------------------------------------------------------------------------------------


def test_shape_errors_name_operands(be):
    a = be.array(np.ones((3, 4)), name="acts")
    b = be.array(np.ones((2, 4)), name="bias")
    with pytest.raises(ValueError, match=r"'add'.*'acts' of shape \(3, 4\).*'bias' of shape \(2, 4\)"):
        a + b
    with pytest.raises(ValueError, match=r"'dot'.*\(3, 4\).*\(2, 4\).*\.T"):
        be.dot(a, b)
    out = be.empty((3, 5), name="out")
    with pytest.raises(ValueError, match=r"cannot assign op-tree 'mul' of shape \(3, 4\) to .*'out' of shape \(3, 5\)"):
        out[:] = a * 2
    with pytest.raises(ValueError, match=r"cannot assign .*\(3, 4\).*\(3, 5\)"):
        out[:] = a
    with pytest.raises(ValueError, match="axis"):
        be.sum(a, axis=3)


def test_layers_delegation_reports_missing_pieces(be, monkeypatch):
    import sys
    import types

    fake = types.ModuleType("plait.neon._layers")
    seen = {}

    def fprop_conv(layer, I, F, O, **kw):
        seen.update(layer=layer, I=I, F=F, O=O, kw=kw)
        return "ok"

    fake.fprop_conv = fprop_conv
    monkeypatch.setitem(sys.modules, "plait.neon._layers", fake)
    import plait.neon as pkg
    monkeypatch.setattr(pkg, "_layers", fake, raising=False)
    I, F, O, bias = be.ones((2, 3)), be.ones((2, 2)), be.ones((2, 3)), be.ones((2, 1))
    assert be.fprop_conv("L", I, F, O, bias=bias, alpha=2.0) == "ok"
    assert seen["I"] is I._tensor and seen["O"] is O._tensor
    assert seen["kw"]["bias"] is bias._tensor and seen["kw"]["alpha"] == 2.0
    with pytest.raises(NotImplementedError, match="bprop_pool"):
        be.bprop_pool("L", I, O)


def test_nested_dots_reductions_and_transposes(be):
    """Deep trees mixing dot, reductions over both axes, transposes and broadcasting."""
    xs = [_rand((3, 3), 0.5, 1.5, seed=s) for s in range(5)]
    X = [be.array(x) for x in xs]
    h = [_host(t) for t in X]
    out = be.empty((3, 3))
    f4 = be.dot(1.0 / X[3], (X[4] / X[2]).T).T
    f5 = be.dot(X[3], (X[4] - X[0]).T)
    f6 = be.dot(X[2] / f4.T, f5 + X[3]).T
    out[:] = (be.std(be.var(X[0], axis=0), axis=1) + be.max(X[1], axis=0) + be.min(X[1], axis=0)
              + be.std(X[2]).T + f4 + 1.0 / be.dot(f5, f6))
    r4 = (1.0 / h[3] @ (h[4] / h[2]).T).T
    r5 = h[3] @ (h[4] - h[0]).T
    r6 = ((h[2] / r4.T) @ (r5 + h[3])).T
    expected = (np.std(np.var(h[0], axis=0, keepdims=True), axis=1, keepdims=True)
                + h[1].max(axis=0, keepdims=True) + h[1].min(axis=0, keepdims=True)
                + np.std(h[2]) + r4 + 1.0 / (r5 @ r6))
    np.testing.assert_allclose(out.get(), expected, rtol=1e-4, atol=1e-5)


def test_reductions_into_row_and_column_slices(be):
    x = _rand((5, 8), seed=3)
    X = be.array(x)
    h = _host(X)
    rows = be.empty((4, 8))
    rows[0, :] = be.mean(X, axis=0)
    rows[1, :] = be.max(X, axis=0) + be.min(X, axis=0)
    rows[2, :] = be.std(X)
    rows[3, :] = be.argmax(X, axis=0)
    np.testing.assert_allclose(rows.get()[0], h.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(rows.get()[1], h.max(axis=0) + h.min(axis=0), rtol=1e-5)
    np.testing.assert_allclose(rows.get()[2], np.full(8, h.std()), rtol=1e-5)
    np.testing.assert_array_equal(rows.get()[3], h.argmax(axis=0))
    cols = be.empty((5, 2))
    cols[:, 0] = be.std(X, axis=1)
    cols[:, 1] = be.argmin(X, axis=1)
    np.testing.assert_allclose(cols.get()[:, 0], h.std(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(cols.get()[:, 1], h.argmin(axis=1))


def test_dot_subtrees_are_split_off_before_fusing(monkeypatch):
    """The fused executor gets the elementwise rest of a tree; dots run on BLAS first."""
    import plait.neon.nervanacpu as cpu

    seen = []

    class FakeFuse:
        @staticmethod
        def execute(tree, out, rng=None):
            stack = tree.traverse([])
            seen.append([x["op"] for x in stack if isinstance(x, dict)])
            assert all(not isinstance(x, type(tree)) for x in stack)
            return False  # decline: the numpy evaluator finishes the job

    monkeypatch.setattr(cpu, "_fuse_module", FakeFuse)
    monkeypatch.setenv("PLAIT_NEON_FUSE", "1")
    be = NervanaCPU(rng_seed=0)
    w, x, b = _rand((4, 5), seed=1), _rand((5, 3), seed=2), _rand((4, 1), seed=3)
    W, X, B = be.array(w), be.array(x), be.array(b)
    out = be.empty((4, 3))
    out[:] = be.sig(be.dot(W, X) + B)
    assert seen == [["add", "sig"]]
    _close(out.get(), 1 / (1 + np.exp(-(_host(W) @ _host(X) + _host(B)))))
    be.dot(W, X, out=out)  # a bare dot goes straight to BLAS
    assert len(seen) == 1
    _close(out.get(), _host(W) @ _host(X))
    idx = be.array([[0, 2, 3]], dtype=np.int32)
    out[:] = be.onehot(idx, axis=0) * 3.0
    assert seen[-1] == ["mul"]
    np.testing.assert_array_equal(out.get(), np.eye(4)[[0, 2, 3]].T * 3)
