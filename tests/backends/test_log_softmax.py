"""Ops.log_softmax and its backprop (used by the Chainer face's log_softmax, softmax_cross_entropy and CTC)."""
import numpy as np
import pytest

from plait.backends import NumpyOps, Ops

from _gradcheck import numeric_vjp


@pytest.fixture(params=[Ops, NumpyOps], ids=["Ops", "NumpyOps"])
def ops(request):
    return request.param()


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_log_softmax_equals_log_of_softmax(ops, axis):
    X = np.random.default_rng(0).standard_normal((4, 5, 3))
    e = np.exp(X - X.max(axis=axis, keepdims=True))
    want = np.log(e / e.sum(axis=axis, keepdims=True))
    np.testing.assert_allclose(ops.log_softmax(X, axis=axis), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.exp(ops.log_softmax(X, axis=axis)).sum(axis=axis), 1.0, rtol=1e-12)


def test_log_softmax_stays_finite_where_softmax_underflows(ops):
    X = np.array([[0.0, -1000.0, 1000.0]], dtype="float32")
    Y = ops.log_softmax(X)
    assert np.isfinite(Y).all()
    np.testing.assert_allclose(Y, [[-1000.0, -2000.0, 0.0]], rtol=1e-6)


@pytest.mark.parametrize("axis", [-1, 0])
def test_backprop_log_softmax_matches_finite_differences(ops, axis):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((3, 4))
    dY = rng.standard_normal((3, 4))
    Y = ops.log_softmax(X, axis=axis)
    got = ops.backprop_log_softmax(Y, dY, axis=axis)
    want = numeric_vjp(lambda x: ops.log_softmax(x, axis=axis), X, dY)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_bad_input_is_refused(ops):
    with pytest.raises(TypeError, match="log_softmax"):
        ops.log_softmax(np.array([["a", "b"]]))
    with pytest.raises(ValueError, match="backprop_log_softmax"):
        ops.backprop_log_softmax(np.zeros((2, 3)), np.zeros((3, 2)))
