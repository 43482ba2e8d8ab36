"""plait.neon.autodiff against central differences (float64 backend: rtol 1e-6, atol 1e-7)."""
import numpy as np
import pytest

from plait.neon import NervanaCPU, OpTreeNode
from plait.neon.autodiff import Autodiff


@pytest.fixture
def be(monkeypatch):
    monkeypatch.setenv("PLAIT_NEON_FUSE", "0")
    return NervanaCPU(rng_seed=0, default_dtype=np.float64)


def _eval(be, tree):
    out = be.empty(tree.shape, dtype=np.float64)
    out[:] = tree
    return out.get()


def _numeric_grads(be, make_tree, tensors, weights, eps=1e-6):
    grads = []
    for t in tensors:
        g = np.zeros(t.shape)
        data = t._tensor
        for idx in np.ndindex(*t.shape):
            orig = data[idx]
            data[idx] = orig + eps
            up = np.sum(weights * _eval(be, make_tree()))
            data[idx] = orig - eps
            down = np.sum(weights * _eval(be, make_tree()))
            data[idx] = orig
            g[idx] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


def _check(be, make_tree, tensors):
    tree = make_tree()
    weights = np.random.RandomState(5).uniform(0.5, 1.5, size=tree.shape)
    ad = Autodiff(tree, be, next_error=be.array(weights))
    analytic = ad.get_grad_asnumpyarray(tensors)
    numeric = _numeric_grads(be, make_tree, tensors, weights)
    for a, n, t in zip(analytic, numeric, tensors):
        assert a.shape == tuple(t.shape)
        np.testing.assert_allclose(a, n, rtol=1e-6, atol=1e-7)


def _t(be, shape, lo=-1.5, hi=1.5, seed=0):
    return be.array(np.random.RandomState(seed).uniform(lo, hi, size=shape))


CASES = {
    "add_sub_mul_div": lambda be, a, b, p: (a + b) * (a - 2 * b) / (p + 1.0),
    "unary_chain": lambda be, a, b, p: be.tanh(a) * be.sig(b) + be.exp(a * 0.5) - be.square(b),
    "logs_and_roots": lambda be, a, b, p: be.log(p) + be.sqrt(p) * be.log2(p + 1) + be.safelog(p),
    "base2": lambda be, a, b, p: be.exp2(a) + be.sig2(b) + be.tanh2(a * b),
    "abs_neg": lambda be, a, b, p: abs(a) - -b * 3.0,
    "pow": lambda be, a, b, p: p ** b + a ** 2 + 2.0 ** a,
    "maximum_minimum": lambda be, a, b, p: be.maximum(a, b) * 2 + be.minimum(a, 0.3),
    "broadcast_column_row": lambda be, a, b, p: a * be.sum(b, axis=1) + be.max(p, axis=0),
    "reductions": lambda be, a, b, p: be.sum(a * b, axis=0) + be.mean(p, axis=0),
    "reduce_all": lambda be, a, b, p: be.sum(be.exp(a)) * b,
    "min_reduction": lambda be, a, b, p: be.min(a * b, axis=1) * be.max(p, axis=1),
    "mean_var_std": lambda be, a, b, p: be.var(a, axis=1) * be.std(p, axis=1) + be.mean(b * a),
    "clip_reciprocal": lambda be, a, b, p: be.clip(a, -0.5, 0.7) + be.reciprocal(p),
    "comparisons_are_constant": lambda be, a, b, p: a * (a > b) + b * be.sgn(a),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_elementwise_and_reductions(be, name):
    a, b, p = _t(be, (3, 4), seed=1), _t(be, (3, 4), seed=2), _t(be, (3, 4), 0.5, 2.0, seed=3)
    _check(be, lambda: CASES[name](be, a, b, p), [a, b, p])


def test_dot_and_transpose(be):
    w, x, bias = _t(be, (3, 5), seed=1), _t(be, (5, 4), seed=2), _t(be, (3, 1), seed=3)
    _check(be, lambda: be.tanh(be.dot(w, x) + bias), [w, x, bias])
    _check(be, lambda: be.dot(x.T, w.T) * 2.0, [w, x])
    _check(be, lambda: be.sum(be.dot(w, be.sig(x)), axis=0), [w, x])
    _check(be, lambda: (w * 2.0).T + 1.0, [w])


def test_gradient_of_a_tensor_used_twice_accumulates(be):
    a = _t(be, (2, 3), seed=4)
    _check(be, lambda: a * a + be.exp(a) * a, [a])


def test_api_helpers(be):
    a, b, unused = _t(be, (2, 3), seed=1), _t(be, (2, 3), seed=2), _t(be, (2, 3), seed=3)
    tree = a * b
    ad = Autodiff(tree, be)  # next_error defaults to ones
    trees = ad.get_grad_op_tree([a, b, unused])
    assert all(isinstance(t, (OpTreeNode, type(a))) for t in trees)
    ga, gb, gu = ad.get_grad_tensor([a, b, unused])
    np.testing.assert_allclose(ga.get(), b.get())
    np.testing.assert_allclose(gb.get(), a.get())
    np.testing.assert_array_equal(gu.get(), 0)
    bufs = [be.empty((2, 3)), be.empty((2, 3))]
    ad.back_prop_grad([a, b], bufs)
    np.testing.assert_allclose(bufs[0].get(), b.get())
    # next_error may double as a gradient buffer: it is written last
    err = be.ones((2, 3))
    ad2 = Autodiff(a * b, be, next_error=err)
    out_a = be.empty((2, 3))
    ad2.back_prop_grad([b, a], [err, out_a])
    np.testing.assert_allclose(out_a.get(), b.get())
    np.testing.assert_allclose(err.get(), a.get())
    with pytest.raises(ValueError, match="also an input"):
        ad.back_prop_grad([a], [b])
    ad.cleanup()
    assert ad.map_tensor_grad_op_tree == {}


def test_autodiff_builds_without_computing(be, monkeypatch):
    from plait.neon._arrays import ArrayBackend

    calls = []
    # Every computation of a backend goes through this one method.
    monkeypatch.setattr(ArrayBackend, "_execute_assign", lambda *a, **k: calls.append(1))
    a = _t(be, (2, 2))
    Autodiff(be.sum(be.tanh(be.dot(a, a)), axis=0), be, next_error=be.ones((1, 2)))
    assert calls == []


def test_gradients_through_slices_are_refused(be):
    a = _t(be, (4, 3))
    ad = Autodiff(a[0:2] * 2.0, be)
    with pytest.raises(NotImplementedError, match="transposed views"):
        ad.get_grad_tensor([a])


def test_safelog_gradient_is_zero_below_the_floor_not_nan(be):
    x = be.array([[0.0, 1e-30, 0.5]])
    g = Autodiff(be.safelog(x), be).get_grad_asnumpyarray([x])[0]
    np.testing.assert_allclose(g, [[0.0, 0.0, 2.0]])
