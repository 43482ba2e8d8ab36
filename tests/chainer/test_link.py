"""Link, Chain, ChainList, FunctionSet and the Linear and Classifier links."""
import math
import warnings

import numpy
import pytest

import plait.chainer as chainer
import plait.chainer.functions as F
import plait.chainer.links as L
from plait.chainer import Chain, ChainList, FunctionSet, Link, Variable


class MyChain(Chain):
    def __init__(self):
        super().__init__(l1=L.Linear(4, 3), l2=L.Linear(3, 2))

    def __call__(self, x):
        return self.l2(self.l1(x))


class MyChain2(ChainList):
    def __init__(self):
        super().__init__(L.Linear(4, 3), L.Linear(3, 2))

    def __call__(self, x):
        return self[1](self[0](x))


def test_link_params_from_constructor_and_add_param():
    link = Link(W=(3, 4), b=3)
    assert link.W.data.shape == (3, 4) and link.b.data.shape == (3,)
    assert link.W.data.dtype == numpy.float32
    assert numpy.isnan(link.W.data).all() and numpy.isnan(link.W.grad).all()
    assert link.W.name == "W" and link.W.volatile == "auto"
    link.add_param("c", (2,), dtype=numpy.float64)
    assert link.c.data.dtype == numpy.float64
    assert [name for name, _ in link.namedparams()] == ["/W", "/b", "/c"]
    assert list(link.params()) == [link.W, link.b, link.c]
    with pytest.raises(AttributeError, match="already has an attribute of that name"):
        link.add_param("W", (1,))
    link.add_persistent("count", 3)
    assert link.count == 3
    with pytest.raises(AttributeError, match="cannot register persistent 'count'"):
        link.add_persistent("count", 4)
    assert link.xp is numpy and list(link.children()) == []
    assert [p for p, _ in link.namedlinks()] == ["/"] and list(link.namedlinks(skipself=True)) == []


def test_tutorial_eltwise_param_product():
    class EltwiseParamProduct(Link):
        def __init__(self, shape):
            super().__init__(W=shape)
            self.W.data[...] = numpy.random.randn(*shape)

        def __call__(self, x):
            return self.W * x

    link = EltwiseParamProduct((2, 3))
    x = Variable(numpy.ones((2, 3), "f"))
    link.zerograds()
    F.sum(link(x)).backward()
    numpy.testing.assert_array_equal(link.W.grad, numpy.ones((2, 3)))


def test_chain_paths_and_traversal():
    model = L.Classifier(MyChain())
    names = [n for n, _ in model.namedparams()]
    assert names == ["/predictor/l1/W", "/predictor/l1/b", "/predictor/l2/W", "/predictor/l2/b"]
    assert [n for n, _ in model.namedlinks()] == ["/", "/predictor", "/predictor/l1", "/predictor/l2"]
    assert [n for n, _ in model.namedlinks(skipself=True)] == ["/predictor", "/predictor/l1", "/predictor/l2"]
    assert len(list(model.links())) == 4 and len(list(model.links(skipself=True))) == 3
    assert list(model.children()) == [model.predictor]
    assert model["predictor"] is model.predictor
    assert model.predictor.name == "predictor" and model.predictor.l1.name == "l1"


def test_chainlist():
    c = MyChain2()
    assert len(c) == 2 and c[0].name == "0" and c[1].name == "1"
    assert [n for n, _ in c.namedparams()] == ["/0/W", "/0/b", "/1/W", "/1/b"]
    c.add_link(L.Linear(2, 2))
    assert len(c) == 3 and c[2].name == "2" and list(c) == [c[0], c[1], c[2]]
    y = c(Variable(numpy.ones((5, 4), "f")))
    assert y.data.shape == (5, 2)


def test_add_link_errors():
    c = Chain()
    l = L.Linear(2, 2)
    c.add_link("a", l)
    with pytest.raises(ValueError, match="already registered in another chain as 'a'"):
        Chain(b=l)
    with pytest.raises(AttributeError, match="cannot register link 'a'"):
        c.add_link("a", L.Linear(2, 2))
    with pytest.raises(TypeError, match="must be a Link"):
        c.add_link("z", 3)
    with pytest.raises(ValueError, match="already registered"):
        ChainList(l)


def test_copy_shares_arrays_but_not_variables():
    model = MyChain()
    copied = model.copy()
    assert copied.name is None and copied.l1.name == "l1"
    assert copied.l1 is not model.l1 and copied.l1.W is not model.l1.W
    assert copied.l1.W.data is model.l1.W.data
    cl = MyChain2().copy()
    assert cl[0].name == "0"


def test_zerograds_cleargrads_addgrads_copyparams():
    a, b = MyChain(), MyChain()
    x = Variable(numpy.random.rand(5, 4).astype("f"))
    for m in (a, b):
        m.zerograds()
        F.sum(m(x)).backward()
    ga = [p.grad.copy() for p in a.params()]
    a.addgrads(b)
    for p, g, q in zip(a.params(), ga, b.params()):
        numpy.testing.assert_allclose(p.grad, g + q.grad, rtol=1e-6)
    a.copyparams(b)
    for p, q in zip(a.params(), b.params()):
        numpy.testing.assert_array_equal(p.data, q.data)
        assert p.data is not q.data
    a.zerograds()
    assert all(not p.grad.any() for p in a.params())
    a.cleargrads()
    assert all(p.grad is None for p in a.params())
    F.sum(a(x)).backward()
    for p, q in zip(a.params(), b.params()):
        numpy.testing.assert_allclose(p.grad, q.grad, rtol=1e-6)


def test_chainlist_copyparams_addgrads_and_serialize_paths():
    a, b = MyChain2(), MyChain2()
    a.copyparams(b)
    numpy.testing.assert_array_equal(a[1].W.data, b[1].W.data)
    d = chainer.serializers.DictionarySerializer()
    d.save(a)
    assert sorted(d.target) == ["0/W", "0/b", "1/W", "1/b"]


def test_to_gpu_without_cupy_is_a_clear_error():
    if chainer.cuda.available:
        pytest.skip("CuPy is available here")
    with pytest.raises(RuntimeError, match="CuPy is not available"):
        MyChain().to_gpu()
    model = MyChain()
    assert model.to_cpu() is model


def test_function_set_still_works():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        model = FunctionSet(l1=L.Linear(4, 3), l2=L.Linear(3, 2))
    assert model["l1"] is model.l1
    model.l3 = L.Linear(2, 2)
    assert model.l3.name == "l3"
    assert [n for n, _ in model.namedparams()][-2:] == ["/l3/W", "/l3/b"]
    params, grads = model.collect_parameters()
    assert len(params) == 6 and params[0] is model.l1.W.data
    new = [numpy.full_like(p, 0.5) for p in params]
    model.copy_parameters_from(new)
    assert (model.l1.W.data == 0.5).all() and model.l1.W.data is params[0]
    opt = chainer.optimizers.SGD(lr=1.0)
    opt.setup(model)
    opt.zero_grads()
    x = Variable(numpy.ones((1, 4), "f"))
    F.sum(model.l3(model.l2(model.l1(x)))).backward()
    before = model.l1.b.data.copy()
    opt.update()
    numpy.testing.assert_allclose(model.l1.b.data, before - model.l1.b.grad)


def test_linear_defaults_and_init_statistics():
    numpy.random.seed(0)
    l = L.Linear(400, 300)
    assert l.W.data.shape == (300, 400) and l.W.data.dtype == numpy.float32
    assert not l.b.data.any()
    assert abs(float(l.W.data.std()) - math.sqrt(1 / 400)) < 0.002
    assert abs(float(l.W.data.mean())) < 0.002
    l2 = L.Linear(400, 300, wscale=2.0, bias=0.5)
    assert abs(float(l2.W.data.std()) - 2 * math.sqrt(1 / 400)) < 0.004
    assert (l2.b.data == 0.5).all()


def test_linear_initial_values_and_nobias():
    W = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
    l = L.Linear(3, 2, initialW=W, initial_bias=numpy.array([1, 2], "f"))
    numpy.testing.assert_array_equal(l.W.data, W)
    numpy.testing.assert_array_equal(l.b.data, [1, 2])
    x = numpy.ones((4, 3), "f")
    numpy.testing.assert_allclose(l(Variable(x)).data, x @ W.T + [1, 2])
    nb = L.Linear(3, 2, nobias=True, initialW=W)
    assert nb.b is None and [n for n, _ in nb.namedparams()] == ["/W"]
    numpy.testing.assert_allclose(nb(Variable(x)).data, x @ W.T)
    with pytest.raises(ValueError, match=r"initial value for W has shape \(3, 2\), expected \(2, 3\)"):
        L.Linear(3, 2, initialW=W.T)


def test_linear_lazy_in_size_and_nd_input():
    l = L.Linear(None, 5)
    assert l.W is None
    y = l(Variable(numpy.ones((2, 3, 4), "f")))
    assert l.W.data.shape == (5, 12) and y.data.shape == (2, 5)
    assert [n for n, _ in l.namedparams()] == ["/b", "/W"]


def test_linear_rejects_wrong_input_size():
    from plait.chainer.utils import type_check

    with pytest.raises(type_check.InvalidType, match="LinearFunction"):
        L.Linear(3, 2)(Variable(numpy.ones((4, 5), "f")))


def test_linear_gradient_check_through_the_link():
    l = L.Linear(3, 2)
    l.W.data = l.W.data.astype(numpy.float64)
    l.b.data = l.b.data.astype(numpy.float64)
    x = numpy.random.RandomState(0).rand(4, 3)
    gy = numpy.random.RandomState(1).rand(4, 2)
    chainer.gradient_check.check_backward(l, x, gy, (l.W, l.b), eps=1e-6, atol=1e-7)


def test_classifier():
    numpy.random.seed(0)
    model = L.Classifier(MyChain())
    x = Variable(numpy.random.rand(6, 4).astype("f"))
    t = Variable(numpy.array([0, 1, 0, 1, 1, 0], dtype=numpy.int32))
    loss = model(x, t)
    y = model.predictor(x).data
    e = numpy.exp(y - y.max(1, keepdims=True))
    expected = -numpy.log(e / e.sum(1, keepdims=True))[numpy.arange(6), t.data].mean()
    assert loss is model.loss
    numpy.testing.assert_allclose(loss.data, expected, rtol=1e-5)
    numpy.testing.assert_allclose(model.accuracy.data, (y.argmax(1) == t.data).mean(), rtol=1e-6)
    numpy.testing.assert_allclose(model.y.data, y, rtol=1e-6)
    model.compute_accuracy = False
    model(x, t)
    assert model.accuracy is None
    mse = L.Classifier(L.Linear(4, 1), lossfun=F.mean_squared_error, accfun=None)
    mse.compute_accuracy = False
    target = Variable(numpy.zeros((6, 1), "f"))
    numpy.testing.assert_allclose(mse(x, target).data, (mse.y.data ** 2).mean(), rtol=1e-6)
