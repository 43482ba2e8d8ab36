"""Gradients the backward pass does not compute as it goes: a root's gradient through Linear or
Convolution2D is computed when read, and Linear writes W's gradient into a zerograd() array.

Each test compares against the same computation done eagerly: debug mode asks every function
for every gradient at once, cleargrads() leaves no array to write into, and plain numpy gives
the closed forms.
"""
import copy
import pickle

import numpy
import pytest

import plait.chainer as chainer
import plait.chainer.functions as F
import plait.chainer.links as L
from plait.chainer import Variable
from plait.chainer import variable as variable_module
from plait.chainer.variable import DeferredGrad

from _env import HAS_GPU


def _rng(seed=0):
    return numpy.random.default_rng(seed)


def _mlp():
    model = chainer.Chain(l1=L.Linear(6, 5), l2=L.Linear(5, 3))
    return model


def _loss(model, x, t):
    return F.softmax_cross_entropy(model.l2(F.relu(model.l1(x))), t)


def _data(seed=0, n=4):
    rng = _rng(seed)
    return rng.normal(size=(n, 6)).astype("f"), rng.integers(0, 3, n).astype("int32")


def _eager_input_grad(model, X, T):
    with chainer.DebugMode(True):
        x = Variable(X)
        _loss(model, x, Variable(T)).backward()
        assert not x._grad_pending
        return x.grad


def test_linear_input_grad_is_pending_until_read_and_then_exact():
    model = _mlp()
    X, T = _data()
    expected = _eager_input_grad(model, X, T)
    x = Variable(X)
    _loss(model, x, Variable(T)).backward()
    assert x._grad is None and len(x._grad_pending) == 1
    g = x.grad
    assert not x._grad_pending and x.grad is g
    numpy.testing.assert_array_equal(g, expected)
    # The parameters' gradients are never deferred: the optimizer reads them at once.
    assert not model.l1.W._grad_pending and not model.l1.b._grad_pending


def test_input_grad_uses_the_weights_as_they_were_at_backward():
    model = _mlp()
    X, T = _data(1)
    expected = _eager_input_grad(model, X, T)
    optimizer = chainer.optimizers.Adam(alpha=0.1)
    optimizer.setup(model)
    W_before = model.l1.W.data.copy()
    x = Variable(X)
    optimizer.update(lambda a, b: _loss(model, a, b), x, Variable(T))
    assert x._grad_pending and not numpy.array_equal(model.l1.W.data, W_before)
    # Writing into the weights by hand after the update still does not reach the pending gradient.
    model.l1.W.data[...] = 7.0
    numpy.testing.assert_array_equal(x.grad, expected)


def test_matches_the_closed_form_and_a_numerical_gradient():
    rng = _rng(2)
    X = rng.normal(size=(3, 4))
    W = rng.normal(size=(5, 4))
    gy = rng.normal(size=(3, 5))
    x = Variable(X)
    y = F.linear(x, Variable(W))
    y.grad = gy
    y.backward()
    numpy.testing.assert_allclose(x.grad, gy @ W, rtol=1e-12)
    eps = 1e-6
    num = numpy.zeros_like(X)
    for idx in numpy.ndindex(*X.shape):
        Xp, Xm = X.copy(), X.copy()
        Xp[idx] += eps
        Xm[idx] -= eps
        num[idx] = ((Xp @ W.T) * gy).sum() - ((Xm @ W.T) * gy).sum()
    numpy.testing.assert_allclose(x.grad, num / (2 * eps), rtol=1e-6, atol=1e-8)


def test_a_root_used_twice_sums_both_contributions():
    rng = _rng(3)
    X = rng.normal(size=(2, 3))
    W1, W2 = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    x = Variable(X)
    y = F.sum(F.linear(x, Variable(W1)) + F.linear(x, Variable(W2))) + F.sum(x * 2.0)
    y.backward()
    # Two deferred contributions (the linears: one is computed when the other arrives, so that
    # at most one is ever pending) and one computed at once (x * 2).
    assert len(x._grad_pending) == 1 and x._grad is not None
    numpy.testing.assert_allclose(x.grad, numpy.ones((2, 4)) @ (W1 + W2) + 2.0, rtol=1e-12)


def test_accumulates_onto_an_existing_gradient_and_across_backward_calls():
    rng = _rng(4)
    X, W = rng.normal(size=(2, 3)), rng.normal(size=(4, 3))
    gy = rng.normal(size=(2, 4))
    x = Variable(X)
    for _ in range(2):
        y = F.linear(x, Variable(W))
        y.grad = gy
        y.backward()
    numpy.testing.assert_allclose(x.grad, 2 * gy @ W, rtol=1e-12)
    x.zerograd()
    same = x._grad
    y = F.linear(x, Variable(W))
    y.grad = gy
    y.backward()
    g = x.grad
    assert g is same  # zerograd keeps the array; the deferred gradient is added into it
    numpy.testing.assert_allclose(g, gy @ W, rtol=1e-12)


def test_a_root_reused_by_many_backward_passes_holds_one_pending_gradient():
    rng = _rng(15)
    X, W = rng.normal(size=(2, 3)), rng.normal(size=(4, 3))
    x = Variable(X)
    for _ in range(50):
        F.sum(F.linear(x, Variable(W))).backward()
        assert len(x._grad_pending) == 1
    numpy.testing.assert_allclose(x.grad, 50 * numpy.ones((2, 4)) @ W, rtol=1e-12)


@pytest.mark.parametrize("reset", ["cleargrad", "zerograd", "assign"])
def test_resetting_the_gradient_drops_what_is_pending(reset):
    rng = _rng(5)
    x = Variable(rng.normal(size=(2, 3)).astype("f"))
    y = F.linear(x, Variable(rng.normal(size=(4, 3)).astype("f")))
    y.grad = numpy.ones((2, 4), "f")
    y.backward()
    assert x._grad_pending
    if reset == "cleargrad":
        x.cleargrad()
        assert x.grad is None
    elif reset == "zerograd":
        x.zerograd()
        numpy.testing.assert_array_equal(x.grad, numpy.zeros((2, 3), "f"))
    else:
        x.grad = numpy.full((2, 3), 5, "f")
        numpy.testing.assert_array_equal(x.grad, numpy.full((2, 3), 5, "f"))
    assert not x._grad_pending


def test_retained_intermediate_gradients_can_be_changed_without_effect():
    rng = _rng(6)
    X, W = rng.normal(size=(2, 3)), rng.normal(size=(4, 3))
    x = Variable(X)
    h = F.linear(x, Variable(W))
    y = F.sum(h * 3.0)
    y.backward(retain_grad=True)
    h.grad[...] = 100.0  # the user changes the gradient that fed Linear's backward
    numpy.testing.assert_allclose(x.grad, numpy.full((2, 4), 3.0) @ W, rtol=1e-12)


def test_pickle_copy_and_addgrad_see_the_gradient():
    rng = _rng(7)
    X, W = rng.normal(size=(2, 3)), rng.normal(size=(4, 3))
    expected = numpy.ones((2, 4)) @ W

    def fresh():
        x = Variable(X)
        y = F.linear(x, Variable(W))
        y.grad = numpy.ones((2, 4))
        y.backward()
        return x

    numpy.testing.assert_allclose(pickle.loads(pickle.dumps(fresh())).grad, expected, rtol=1e-12)
    numpy.testing.assert_allclose(copy.deepcopy(fresh()).grad, expected, rtol=1e-12)
    assert copy.copy(fresh()).grad is None  # a shallow copy starts without grad, as in Chainer
    target = Variable(numpy.zeros((2, 3)))
    target.addgrad(fresh())
    numpy.testing.assert_allclose(target.grad, expected, rtol=1e-12)
    x = fresh()
    assert "grad: None" not in x.debug_print()


def test_intermediate_variables_are_never_deferred():
    rng = _rng(8)
    x = Variable(rng.normal(size=(2, 3)))
    h = x * 1.0
    y = F.linear(h, Variable(rng.normal(size=(4, 3))))
    y.grad = numpy.ones((2, 4))
    y.backward(retain_grad=True)
    assert not h._grad_pending and h._grad is not None
    assert not x._grad_pending


@pytest.mark.parametrize("stride, pad, cover_all", [(2, 1, True), (3, 0, True), (1, 2, False)])
def test_convolution_function_input_grad_matches_debug_mode(stride, pad, cover_all):
    rng = _rng(19)
    X = rng.normal(size=(2, 3, 8, 7))
    W = rng.normal(size=(4, 3, 3, 2))

    def run():
        x = Variable(X)
        y = F.convolution_2d(x, Variable(W), stride=stride, pad=pad, cover_all=cover_all)
        y.grad = numpy.cos(numpy.arange(y.data.size)).reshape(y.data.shape)
        y.backward()
        return x

    with chainer.DebugMode(True):
        expected = run().grad
    x = run()
    assert x._grad_pending
    numpy.testing.assert_allclose(x.grad, expected, rtol=1e-12, atol=1e-12)


def test_convolution_input_grad_is_deferred_and_exact():
    rng = _rng(9)
    X = rng.normal(size=(2, 3, 7, 6)).astype("f")
    conv = L.Convolution2D(3, 4, 3, stride=2, pad=1)
    gy_shape = conv(Variable(X)).data.shape
    gy = rng.normal(size=gy_shape).astype("f")
    conv.zerograds()
    with chainer.DebugMode(True):
        x0 = Variable(X)
        y0 = conv(x0)
        y0.grad = gy
        y0.backward()
        expected = x0.grad
        gW0 = conv.W.grad.copy()
    conv.zerograds()
    x = Variable(X)
    y = conv(x)
    y.grad = gy
    y.backward()
    assert x._grad_pending
    numpy.testing.assert_array_equal(conv.W.grad, gW0)
    numpy.testing.assert_array_equal(x.grad, expected)


def test_a_user_function_may_return_deferred_gradients():
    class Double(chainer.Function):
        _deferrable_inputs = (0,)

        def forward(self, inputs):
            return inputs[0] * 2,

        def backward(self, inputs, grad_outputs):
            gy = grad_outputs[0]
            if self._lazy_grads:
                return DeferredGrad(lambda g: g * 2, (gy.copy(),), gy.shape, gy.dtype),
            return gy * 2,

    x = Variable(numpy.arange(3.0))
    h = x * 1.0  # not a root: its deferred gradient is computed at once
    y = Double()(Double()(x) + Double()(h))
    y.grad = numpy.ones(3)
    y.backward()
    assert len(x._grad_pending) == 1
    numpy.testing.assert_array_equal(x.grad, numpy.full(3, 8.0))


def test_a_deferred_gradient_of_the_wrong_shape_is_an_error():
    class Bad(chainer.Function):
        _deferrable_inputs = (0,)

        def forward(self, inputs):
            return inputs[0].copy(),

        def backward(self, inputs, grad_outputs):
            return DeferredGrad(lambda: None, (), (9,), inputs[0].dtype),

    x = Variable(numpy.zeros(3))
    y = Bad()(x)
    y.grad = numpy.ones(3)
    with pytest.raises(ValueError, match=r"Bad.backward \(gradient of input 0\): the deferred gradient has shape \(9,\)"):
        y.backward()


def test_the_tutorial_update_reads_the_same_input_gradient_as_eager_chainer_would():
    model = _mlp()
    eager = copy.deepcopy(model)
    X, T = _data(10, n=8)
    opt, opt_eager = chainer.optimizers.SGD(lr=0.5), chainer.optimizers.SGD(lr=0.5)
    opt.setup(model)
    opt_eager.setup(eager)
    x, x_eager = Variable(X), Variable(X)
    opt.update(lambda a, b: _loss(model, a, b), x, Variable(T))
    with chainer.DebugMode(True):
        opt_eager.update(lambda a, b: _loss(eager, a, b), x_eager, Variable(T))
    numpy.testing.assert_array_equal(model.l1.W.data, eager.l1.W.data)
    numpy.testing.assert_array_equal(x.grad, x_eager.grad)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
def test_deferred_input_grads_on_gpu_match_cpu():
    import cupy

    model = _mlp()
    X, T = _data(11)
    expected = _eager_input_grad(model, X, T)
    model.to_gpu()
    x = Variable(cupy.asarray(X))
    _loss(model, x, Variable(cupy.asarray(T))).backward()
    assert x._grad_pending
    g = x.grad
    assert isinstance(g, cupy.ndarray)
    numpy.testing.assert_allclose(cupy.asnumpy(g), expected, rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# A parameter's pending zero gradient takes Linear's weight gradient directly (no copy)


def _reference_param_grads(model, X, T):
    ref = copy.deepcopy(model)
    ref.cleargrads()  # no pending arrays: every gradient is computed fresh
    _loss(ref, Variable(X), Variable(T)).backward()
    return {name: p.grad.copy() for name, p in ref.namedparams()}


def test_zerograd_array_receives_the_weight_gradient_in_place():
    model = _mlp()
    X, T = _data(12)
    expected = _reference_param_grads(model, X, T)
    model.zerograds()
    arrays = {name: p._grad for name, p in model.namedparams()}
    _loss(model, Variable(X), Variable(T)).backward()
    for name, p in model.namedparams():
        assert p.grad is arrays[name], name
        numpy.testing.assert_array_equal(p.grad, expected[name], err_msg=name)


def test_a_weight_used_twice_sums_both_gradients():
    rng = _rng(13)
    lin = L.Linear(3, 3)
    X = rng.normal(size=(2, 3)).astype("f")
    lin.cleargrads()
    F.sum(lin(lin(Variable(X)))).backward()
    expected = lin.W.grad.copy()
    lin.zerograds()
    F.sum(lin(lin(Variable(X)))).backward()
    numpy.testing.assert_allclose(lin.W.grad, expected, rtol=1e-6)
    # The same variable as Linear's input and weight: no array is handed over.
    W = Variable(rng.normal(size=(3, 3)))
    W.zerograd()
    F.sum(F.linear(W, W)).backward()
    Wd = W.data
    numpy.testing.assert_allclose(W.grad, numpy.ones((3, 3)) @ Wd + (numpy.ones((3, 3)).T @ Wd), rtol=1e-12)


def test_accumulating_gradients_and_odd_layouts_take_the_copying_path():
    rng = _rng(14)
    lin = L.Linear(4, 2)
    X = rng.normal(size=(3, 4)).astype("f")
    lin.cleargrads()
    F.sum(lin(Variable(X))).backward()
    once = lin.W.grad.copy()
    F.sum(lin(Variable(X))).backward()  # no zerograd in between: accumulates
    numpy.testing.assert_allclose(lin.W.grad, 2 * once, rtol=1e-6)
    lin.W.grad = numpy.asfortranarray(numpy.full((2, 4), 9, "f"))
    lin.W.zerograd()
    F.sum(lin(Variable(X))).backward()
    numpy.testing.assert_allclose(lin.W.grad, once, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# The copies pending gradients hold are bounded process-wide


def _backward_through_linear(X, W):
    x = Variable(X)
    F.sum(F.linear(x, Variable(W))).backward()
    return x


def test_many_live_inputs_hold_at_most_the_budget(monkeypatch):
    rng = _rng(16)
    W = rng.normal(size=(8, 5)).astype("f")
    per = 2 * 8 * 4 + W.nbytes  # the copies of gy (2, 8) and W
    # Room for one: whatever older tests left pending is computed, and this one is dropped.
    monkeypatch.setattr(variable_module, "DEFERRED_GRAD_BUDGET", per)
    _backward_through_linear(rng.normal(size=(2, 5)).astype("f"), W)
    assert variable_module._deferred_bytes == 0
    monkeypatch.setattr(variable_module, "DEFERRED_GRAD_BUDGET", 3 * per)
    xs = [_backward_through_linear(rng.normal(size=(2, 5)).astype("f"), W) for _ in range(10)]
    assert variable_module._deferred_bytes == 3 * per
    assert [bool(x._grad_pending) for x in xs] == [False] * 7 + [True] * 3
    for x in xs:  # the ones computed early and the ones still pending are all right
        numpy.testing.assert_allclose(x.grad, numpy.ones((2, 8), "f") @ W, rtol=1e-6)
    assert variable_module._deferred_bytes == 0


def test_held_bytes_are_released_when_the_input_goes_or_its_grad_is_cleared():
    rng = _rng(17)
    W = rng.normal(size=(8, 5)).astype("f")
    before = variable_module._deferred_bytes
    x = _backward_through_linear(rng.normal(size=(2, 5)).astype("f"), W)
    assert variable_module._deferred_bytes == before + 2 * 8 * 4 + W.nbytes
    x.cleargrad()
    assert variable_module._deferred_bytes == before
    x = _backward_through_linear(rng.normal(size=(2, 5)).astype("f"), W)
    del x
    assert variable_module._deferred_bytes == before


def test_copies_larger_than_the_budget_are_not_made(monkeypatch):
    rng = _rng(18)
    W = rng.normal(size=(8, 5)).astype("f")
    monkeypatch.setattr(variable_module, "DEFERRED_GRAD_BUDGET", W.nbytes)  # gy's copy won't fit too
    x = _backward_through_linear(rng.normal(size=(2, 5)).astype("f"), W)
    assert not x._grad_pending and x._grad is not None
    numpy.testing.assert_allclose(x.grad, numpy.ones((2, 8), "f") @ W, rtol=1e-6)
