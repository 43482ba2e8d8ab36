"""NumpyOps' compiled layer_norm / backprop_layer_norm (NormKernels) against the Ops reference.

The kernels sum row statistics in float64 where numpy sums float32 pairwise, so results agree
with `Ops(numpy)` to rounding rather than bit for bit; they must be bit-identical across OpenMP
thread counts and repeated calls. The mixin is tested on its own class so that the test does
not depend on NumpyOps having it wired in yet.
"""
import numpy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from plait.backends import NumpyOps, Ops
from plait.backends._numpy_norm import NormKernels, _norm

pytestmark = pytest.mark.skipif(_norm is None, reason="compiled kernels not built")

FLOATS = ["float32", "float64"]


if NormKernels in NumpyOps.__mro__:
    NormOps = NumpyOps
else:  # until NumpyOps lists the mixin
    class NormOps(NormKernels, NumpyOps):
        pass


@pytest.fixture(scope="module")
def fast_ops():
    return NormOps()


def _data(rng, nB, nI, dtype, scale=1.0, offset=0.0):
    X = (rng.standard_normal((nB, nI)) * scale + offset).astype(dtype)
    G = (1.0 + 0.3 * rng.standard_normal(nI)).astype(dtype)
    b = (0.2 * rng.standard_normal(nI)).astype(dtype)
    dY = rng.standard_normal((nB, nI)).astype(dtype)
    return X, G, b, dY


def _close(got, want, tol):
    """|got - want| within tol times the largest |want| (the values share one scale)."""
    assert got.shape == want.shape
    if want.size:
        scale = max(float(numpy.abs(want).max()), 1.0)
        err = float(numpy.abs(got.astype("float64") - want.astype("float64")).max())
        assert err <= tol * scale, (err, tol * scale)


def _check(fast_ops, ref_ops, X, G, b, dY, eps=1e-08, cond=1.0):
    """Compare with the reference; `cond` is how much the rows' offset magnifies rounding."""
    dtype = str(X.dtype)
    tol = float(numpy.finfo(dtype).eps) * 64 * cond * max(1, X.shape[1])
    Y, mean, var = fast_ops.layer_norm(X, G, b, eps)
    rY, rmean, rvar = ref_ops.layer_norm(X, G, b, eps)
    assert Y.dtype == X.dtype and mean.dtype == X.dtype and var.dtype == X.dtype
    assert Y.shape == X.shape and mean.shape == (X.shape[0],) and var.shape == (X.shape[0],)
    _close(Y, rY, tol)
    _close(mean, rmean, tol)
    _close(var, rvar, tol)
    dX, dG, db = fast_ops.backprop_layer_norm(dY, X, G, mean, var)
    rdX, rdG, rdb = ref_ops.backprop_layer_norm(dY, X, G, rmean, rvar)
    assert dX.dtype == dG.dtype == db.dtype == X.dtype
    assert dX.shape == X.shape and dG.shape == G.shape and db.shape == G.shape
    _close(dX, rdX, tol)
    _close(dG, rdG, tol * max(1, X.shape[0]))
    _close(db, rdb, tol * max(1, X.shape[0]))
    return Y, mean, var, dX, dG, db


@pytest.mark.parametrize("dtype", FLOATS)
@given(nB=st.integers(0, 40), nI=st.integers(1, 70), seed=st.integers(0, 2**31 - 1),
       scale=st.sampled_from([1e-3, 1.0, 50.0]), offset=st.sampled_from([0.0, 3.0, -100.0]))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_matches_reference(fast_ops, ref_ops, dtype, nB, nI, seed, scale, offset):
    rng = numpy.random.default_rng(seed)
    _check(fast_ops, ref_ops, *_data(rng, nB, nI, dtype, scale, offset), cond=1.0 + abs(offset) / scale)


@pytest.mark.parametrize("dtype", FLOATS)
def test_constant_rows_and_custom_eps(fast_ops, ref_ops, dtype):
    X = numpy.full((5, 8), 2.5, dtype=dtype)
    G = numpy.ones(8, dtype=dtype)
    b = numpy.arange(8, dtype=dtype)
    dY = numpy.random.default_rng(1).standard_normal((5, 8)).astype(dtype)
    Y, mean, var, dX, dG, db = _check(fast_ops, ref_ops, X, G, b, dY)
    # A constant row normalises to zero, leaving only the shift.
    numpy.testing.assert_array_equal(Y, numpy.broadcast_to(b, Y.shape))
    assert numpy.isfinite(dX).all()
    _check(fast_ops, ref_ops, X + numpy.arange(8, dtype=dtype), G, b, dY, eps=0.5)
    Y2, _, var2 = fast_ops.layer_norm(X + numpy.arange(8, dtype=dtype), G, b, 0.5)
    numpy.testing.assert_allclose(var2, numpy.full(5, numpy.arange(8).var() + 0.5), rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
def test_empty_batch(fast_ops, ref_ops, dtype):
    X, G, b, dY = _data(numpy.random.default_rng(0), 0, 6, dtype)
    Y, mean, var = fast_ops.layer_norm(X, G, b)
    assert Y.shape == (0, 6) and mean.shape == (0,) and var.shape == (0,)
    dX, dG, db = fast_ops.backprop_layer_norm(dY, X, G, mean, var)
    assert dX.shape == (0, 6)
    numpy.testing.assert_array_equal(dG, numpy.zeros(6, dtype=dtype))
    numpy.testing.assert_array_equal(db, numpy.zeros(6, dtype=dtype))


def test_gradient_is_right(fast_ops):
    """dX, dG and db against central differences of sum(Y * dY), in float64."""
    rng = numpy.random.default_rng(3)
    X, G, b, dY = _data(rng, 4, 7, "float64")
    Y, mean, var = fast_ops.layer_norm(X, G, b)
    dX, dG, db = fast_ops.backprop_layer_norm(dY, X, G, mean, var)

    def loss(X_, G_, b_):
        return float((fast_ops.layer_norm(X_, G_, b_)[0] * dY).sum())

    h = 1e-6
    for arr, grad in ((X, dX), (G, dG), (b, db)):
        num = numpy.zeros_like(arr)
        for idx in numpy.ndindex(arr.shape):
            orig = arr[idx]
            arr[idx] = orig + h
            up = loss(X, G, b)
            arr[idx] = orig - h
            down = loss(X, G, b)
            arr[idx] = orig
            num[idx] = (up - down) / (2 * h)
        numpy.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", FLOATS)
def test_thread_count_does_not_change_bits(fast_ops, dtype):
    X, G, b, dY = _data(numpy.random.default_rng(5), 700, 64, dtype)
    results = []
    for n in (1, 2):
        with threadpool_limits(limits=n, user_api="openmp"):
            Y, mean, var = fast_ops.layer_norm(X, G, b)
            results.append((Y, mean, var) + fast_ops.backprop_layer_norm(dY, X, G, mean, var))
    for a, c in zip(*results):
        assert a.tobytes() == c.tobytes()


def test_odd_inputs_fall_back_to_the_reference(fast_ops, ref_ops):
    rng = numpy.random.default_rng(2)
    X, G, b, dY = _data(rng, 6, 10, "float32")
    # Non-contiguous, mixed dtypes, and float16: the reference computes them exactly.
    Xt = numpy.asfortranarray(X)
    for args in ((Xt, G, b), (X, G.astype("float64"), b), (X.astype("float16"), G, b)):
        got = fast_ops.layer_norm(*args)
        want = ref_ops.layer_norm(*args)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            numpy.testing.assert_array_equal(g, w)
    Y, mean, var = ref_ops.layer_norm(X, G, b)
    got = fast_ops.backprop_layer_norm(dY[:, ::2], X[:, ::2], G[::2], mean, var)
    want = ref_ops.backprop_layer_norm(dY[:, ::2], X[:, ::2], G[::2], mean, var)
    for g, w in zip(got, want):
        numpy.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("ops_cls", [Ops, NormOps])
def test_errors_name_the_problem(ops_cls):
    ops = ops_cls()
    X = numpy.zeros((3, 4), dtype="float32")
    G = numpy.ones(4, dtype="float32")
    with pytest.raises(ValueError, match="layer_norm.*'G'"):
        ops.layer_norm(X, numpy.ones(5, dtype="float32"), G)
    with pytest.raises(ValueError, match="layer_norm.*'b'"):
        ops.layer_norm(X, G, numpy.ones(3, dtype="float32"))
    with pytest.raises((ValueError, TypeError), match="layer_norm.*'X'"):
        ops.layer_norm(numpy.zeros(4, dtype="float32"), G, G)
    with pytest.raises(ValueError, match="backprop_layer_norm.*'mean'"):
        ops.backprop_layer_norm(X, X, G, numpy.zeros(2, dtype="float32"), numpy.ones(3, dtype="float32"))
    with pytest.raises(ValueError, match="backprop_layer_norm"):
        ops.backprop_layer_norm(X[:2], X, G, numpy.zeros(3, dtype="float32"), numpy.ones(3, dtype="float32"))


def test_reference_matches_the_old_layer_formulas(ref_ops):
    """The Ops reference keeps LayerNorm's numbers bit for bit (what the layer computed before)."""
    X, G, b, dY = _data(numpy.random.default_rng(9), 9, 12, "float32")
    mu = X.mean(axis=1, keepdims=True)
    dist = X - mu
    var = X.var(axis=1, keepdims=True) + 1e-08
    inv_std = var ** -0.5
    Xhat = dist * inv_std
    Y_old = Xhat * G + b
    dXhat = dY * G
    dX_old = 12 * dXhat - dXhat.sum(axis=1, keepdims=True) - dist * ((dXhat * dist).sum(axis=1, keepdims=True) / var)
    dX_old *= inv_std / 12
    Y, mean, v = ref_ops.layer_norm(X, G, b)
    dX, dG, db = ref_ops.backprop_layer_norm(dY, X, G, mean, v)
    assert Y.tobytes() == Y_old.tobytes()
    assert dX.tobytes() == dX_old.tobytes()
    assert dG.tobytes() == (dY * Xhat).sum(axis=0).tobytes()
    assert db.tobytes() == dY.sum(axis=0).tobytes()
