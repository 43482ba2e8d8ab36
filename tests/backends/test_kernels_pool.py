"""NumpyOps' compiled 2-D max pooling against the Ops reference.

Y and the winners must equal the reference's exactly (NaN, -inf, ties, padding and cover_all
included), with one OpenMP thread and with two; the backprop exactly where windows do not
overlap, and to rounding where they do (the sums are added in another order).
"""
import contextlib

import numpy
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from plait.backends import NumpyOps, Ops

pool = pytest.importorskip("plait.backends._kernels_cpu.pool", reason="compiled kernels not built")
threadpoolctl = pytest.importorskip("threadpoolctl")

P = NumpyOps()
R = Ops()


@contextlib.contextmanager
def n_threads(n):
    with threadpoolctl.threadpool_limits(limits=n, user_api="openmp"):
        yield


def _values(rng, shape, dtype, kind):
    X = rng.standard_normal(shape).astype(dtype)
    if kind == "ties":
        X = rng.integers(-2, 3, size=shape).astype(dtype) * 0.5
        X[(X == 0) & (rng.random(shape) < 0.5)] = -0.0
    elif kind == "special":
        r = rng.random(shape)
        X[r < 0.1] = numpy.nan
        X[(r >= 0.1) & (r < 0.3)] = -numpy.inf
        X[(r >= 0.3) & (r < 0.35)] = numpy.inf
    return X


def test_the_fast_case_runs_compiled():
    X = numpy.ones((1, 1, 4, 4), "float32")
    assert pool.max_pool_2d(X, 2, 2, 2, 2, 0, 0, 2, 2) is not None
    Y, which = pool.max_pool_2d(X, 2, 2, 2, 2, 0, 0, 2, 2)
    assert pool.backprop_max_pool_2d(Y, which, 4, 4, 2, 2, 2, 2, 0, 0) is not None
    # Outside it: other dtypes and ranks, non-contiguous arrays, winners out of the window.
    assert pool.max_pool_2d(X.astype("int32"), 2, 2, 2, 2, 0, 0, 2, 2) is None
    assert pool.max_pool_2d(numpy.ones((4, 4), "float32"), 2, 2, 2, 2, 0, 0, 2, 2) is None
    assert pool.max_pool_2d(numpy.ones((1, 1, 4, 8), "f")[..., ::2], 2, 2, 2, 2, 0, 0, 2, 2) is None
    assert pool.backprop_max_pool_2d(Y, which + 4, 4, 4, 2, 2, 2, 2, 0, 0) is None
    assert pool.backprop_max_pool_2d(Y, which.astype("int64"), 4, 4, 2, 2, 2, 2, 0, 0) is None


@settings(max_examples=150, deadline=None)
@given(
    nB=st.integers(0, 3), C=st.integers(0, 3), H=st.integers(1, 9), W=st.integers(1, 9),
    kh=st.integers(1, 4), kw=st.integers(1, 4), sy=st.integers(1, 4), sx=st.integers(1, 4),
    ph=st.integers(0, 3), pw=st.integers(0, 3), cover_all=st.booleans(),
    dtype=st.sampled_from(["float32", "float64"]), kind=st.sampled_from(["normal", "ties", "special"]),
    threads=st.sampled_from([1, 2]), seed=st.integers(0, 2**31 - 1),
)
def test_max_pool_2d_equals_reference(nB, C, H, W, kh, kw, sy, sx, ph, pw, cover_all, dtype, kind, threads, seed):
    rng = numpy.random.default_rng(seed)
    X = _values(rng, (nB, C, H, W), dtype, kind)
    args = ((kh, kw), (sy, sx), (ph, pw), cover_all)
    try:
        Yr, wr = R.max_pool_nd(X, *args)
    except ValueError:
        with pytest.raises(ValueError):
            P.max_pool_nd(X, *args)
        return
    X0 = X.copy()
    with n_threads(threads):
        Y, which = P.max_pool_nd(X, *args)
    assert Y.dtype == Yr.dtype and which.dtype == wr.dtype == numpy.int32
    assert Y.tobytes() == Yr.tobytes() and which.tobytes() == wr.tobytes()
    assert X.tobytes() == X0.tobytes()

    dY = _values(rng, Y.shape, dtype, "normal")
    with n_threads(threads):
        dX = P.backprop_max_pool_nd(dY, which, X.shape, *args)
    dXr = R.backprop_max_pool_nd(dY, wr, X.shape, *args)
    assert dX.dtype == dXr.dtype and dX.shape == dXr.shape
    if sy >= kh and sx >= kw:
        assert dX.tobytes() == dXr.tobytes()
    else:
        tol = 1e-5 if dtype == "float32" else 1e-12
        numpy.testing.assert_allclose(dX, dXr, rtol=tol, atol=tol)


def test_a_window_wholly_in_the_padding_gives_minus_inf_and_no_gradient():
    X = numpy.arange(4, dtype="float32").reshape(1, 1, 2, 2)
    # cover_all with stride 3 leaves the last windows over padding only.
    args = (2, 3, 1, True)
    Y, which = P.max_pool_nd(X, *args)
    Yr, wr = R.max_pool_nd(X, *args)
    numpy.testing.assert_array_equal(Y, Yr)
    numpy.testing.assert_array_equal(which, wr)
    dX = P.backprop_max_pool_nd(numpy.ones_like(Y), which, X.shape, *args)
    numpy.testing.assert_array_equal(dX, R.backprop_max_pool_nd(numpy.ones_like(Yr), wr, X.shape, *args))


def test_bad_calls_raise_the_reference_errors():
    X = numpy.ones((1, 1, 4, 4), "float32")
    for call in (
        lambda ops: ops.max_pool_nd(X, 0),
        lambda ops: ops.max_pool_nd(X, 2, 2, -1),
        lambda ops: ops.max_pool_nd(X, 9, 1, 0, False),
        lambda ops: ops.backprop_max_pool_nd(numpy.ones((1, 1, 2, 2), "f"), numpy.zeros((1, 1, 2, 2), "int32"), (1, 2, 4, 4), 2),
    ):
        with pytest.raises(ValueError) as want:
            call(R)
        with pytest.raises(ValueError) as got:
            call(P)
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize("shape", [(0, 3, 4, 4), (2, 0, 4, 4), (0, 0, 6)])
def test_an_empty_batch_pools_to_an_empty_batch(shape):
    X = numpy.ones(shape, "float32")
    for ops in (P, R):
        Y, which = ops.max_pool_nd(X, 2)
        assert Y.shape == which.shape == shape[:2] + tuple(s // 2 for s in shape[2:])
        assert ops.avg_pool_nd(X, 2).shape == Y.shape
