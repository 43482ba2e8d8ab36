"""Optimizers: each update rule against a NumPy formula, the update protocol, hooks and state."""
import math

import numpy
import pytest

import plait.chainer as chainer
import plait.chainer.functions as F
import plait.chainer.links as L
from plait.chainer import Link, Variable, optimizers
from plait.chainer.optimizer import GradientClipping, WeightDecay


def _model(seed=0):
    rs = numpy.random.RandomState(seed)
    link = Link(w=(3, 4), b=(4,))
    link.w.data[...] = rs.randn(3, 4)
    link.b.data[...] = rs.randn(4)
    return link


def _grads(seed):
    rs = numpy.random.RandomState(100 + seed)
    return {"w": rs.randn(3, 4).astype("f"), "b": rs.randn(4).astype("f")}


# Reference update rules written out in float64: (hyper-parameters) -> step(p, g, state, t) -> p.
def _sgd(lr=0.01):
    return lambda p, g, s, t: p - lr * g


def _momentum(lr=0.01, momentum=0.9):
    def step(p, g, s, t):
        s["v"] = momentum * s.get("v", 0) - lr * g
        return p + s["v"]
    return step


def _nesterov(lr=0.01, momentum=0.9):
    def step(p, g, s, t):
        s["v"] = momentum * s.get("v", 0) - lr * g
        return p + momentum ** 2 * s["v"] - (1 + momentum) * lr * g
    return step


def _adagrad(lr=0.001, eps=1e-8):
    def step(p, g, s, t):
        s["h"] = s.get("h", 0) + g * g
        return p - lr * g / (numpy.sqrt(s["h"]) + eps)
    return step


def _adadelta(rho=0.95, eps=1e-6):
    def step(p, g, s, t):
        s["msg"] = rho * s.get("msg", 0) + (1 - rho) * g * g
        dx = numpy.sqrt((s.get("msdx", 0) + eps) / (s["msg"] + eps)) * g
        s["msdx"] = rho * s.get("msdx", 0) + (1 - rho) * dx * dx
        return p - dx
    return step


def _adam(alpha=0.001, beta1=0.9, beta2=0.999, eps=1e-8):
    def step(p, g, s, t):
        s["m"] = beta1 * s.get("m", 0) + (1 - beta1) * g
        s["v"] = beta2 * s.get("v", 0) + (1 - beta2) * g * g
        lr = alpha * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
        return p - lr * s["m"] / (numpy.sqrt(s["v"]) + eps)
    return step


def _rmsprop(lr=0.01, alpha=0.99, eps=1e-8):
    def step(p, g, s, t):
        s["ms"] = alpha * s.get("ms", 0) + (1 - alpha) * g * g
        return p - lr * g / (numpy.sqrt(s["ms"]) + eps)
    return step


def _graves(lr=1e-4, alpha=0.95, momentum=0.9, eps=1e-4):
    def step(p, g, s, t):
        s["n"] = alpha * s.get("n", 0) + (1 - alpha) * g * g
        s["g"] = alpha * s.get("g", 0) + (1 - alpha) * g
        s["delta"] = momentum * s.get("delta", 0) - lr * g / numpy.sqrt(s["n"] - s["g"] ** 2 + eps)
        return p + s["delta"]
    return step


CASES = {
    "SGD": (optimizers.SGD, {"lr": 0.1}, _sgd, []),
    "MomentumSGD": (optimizers.MomentumSGD, {"lr": 0.1, "momentum": 0.8}, _momentum, ["v"]),
    "NesterovAG": (optimizers.NesterovAG, {"lr": 0.1, "momentum": 0.8}, _nesterov, ["v"]),
    "AdaGrad": (optimizers.AdaGrad, {"lr": 0.1}, _adagrad, ["h"]),
    "AdaDelta": (optimizers.AdaDelta, {"rho": 0.9}, _adadelta, ["msg", "msdx"]),
    "Adam": (optimizers.Adam, {"alpha": 0.01}, _adam, ["m", "v"]),
    "RMSprop": (optimizers.RMSprop, {"lr": 0.05}, _rmsprop, ["ms"]),
    "RMSpropGraves": (optimizers.RMSpropGraves, {"lr": 0.01}, _graves, ["n", "g", "delta"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_update_rule_matches_formula(name):
    cls, kwargs, ref, state_keys = CASES[name]
    link = _model()
    opt = cls(**kwargs)
    opt.setup(link)
    expected = {n: getattr(link, n).data.astype(numpy.float64) for n in ("w", "b")}
    ref_states = {n: {} for n in expected}
    step = ref(**kwargs)
    for t in range(1, 4):
        grads = _grads(t)
        for n, g in grads.items():
            getattr(link, n).grad = g.copy()
        opt.update()
        assert opt.t == t
        for n in expected:
            expected[n] = step(expected[n], grads[n].astype(numpy.float64), ref_states[n], t)
            numpy.testing.assert_allclose(getattr(link, n).data, expected[n], rtol=1e-5, atol=1e-6)
            # The gradient is left as it was (Chainer does not consume it).
            numpy.testing.assert_array_equal(getattr(link, n).grad, grads[n])
    assert sorted(opt._states["/w"]) == sorted(state_keys)


@pytest.mark.parametrize("name", sorted(CASES))
def test_default_hyperparameters(name):
    cls = CASES[name][0]
    expected = {
        "SGD": {"lr": 0.01}, "MomentumSGD": {"lr": 0.01, "momentum": 0.9},
        "NesterovAG": {"lr": 0.01, "momentum": 0.9}, "AdaGrad": {"lr": 0.001, "eps": 1e-8},
        "AdaDelta": {"rho": 0.95, "eps": 1e-6},
        "Adam": {"alpha": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
        "RMSprop": {"lr": 0.01, "alpha": 0.99, "eps": 1e-8},
        "RMSpropGraves": {"lr": 1e-4, "alpha": 0.95, "momentum": 0.9, "eps": 1e-4},
    }[name]
    opt = cls()
    for key, value in expected.items():
        assert getattr(opt, key) == value


def test_adam_lr_is_bias_corrected():
    opt = optimizers.Adam(alpha=0.01, beta1=0.8, beta2=0.99)
    opt.setup(_model())
    opt.t = 3
    assert opt.lr == pytest.approx(0.01 * math.sqrt(1 - 0.99 ** 3) / (1 - 0.8 ** 3))


def test_update_with_lossfun_zeroes_grads_first():
    link = _model()
    opt = optimizers.SGD(lr=1.0)
    opt.setup(link)
    link.w.grad[...] = 1000.0  # stale gradient that must not leak into the update
    link.b.grad[...] = 1000.0
    x = Variable(numpy.ones((2, 4), "f"))
    calls = []

    def lossfun(x, scale=1.0):
        calls.append(scale)
        return F.sum(F.linear(x, link.w, None) * scale)

    w_before = link.w.data.copy()
    opt.update(lossfun, x, scale=2.0)
    assert calls == [2.0]
    numpy.testing.assert_allclose(link.w.grad, numpy.full((3, 4), 4.0))  # 2 rows of ones, scale 2
    numpy.testing.assert_allclose(link.w.data, w_before - link.w.grad)
    assert (link.b.grad == 0).all()


def test_tutorial_update_protocols_agree():
    numpy.random.seed(0)
    x = numpy.random.rand(8, 4).astype("f")
    t = numpy.array([0, 1, 0, 1, 1, 0, 1, 0], numpy.int32)

    class MLP(chainer.Chain):
        def __init__(self):
            super().__init__(l1=L.Linear(4, 5), l2=L.Linear(5, 2))

        def __call__(self, x):
            return self.l2(F.relu(self.l1(x)))

    a = L.Classifier(MLP())
    b = L.Classifier(MLP())
    b.copyparams(a)
    oa, ob = optimizers.MomentumSGD(), optimizers.MomentumSGD()
    oa.setup(a)
    ob.setup(b)
    for _ in range(3):
        oa.update(a, Variable(x), Variable(t))
        b.zerograds()
        loss = b(Variable(x), Variable(t))
        loss.backward()
        ob.update()
    for p, q in zip(a.params(), b.params()):
        numpy.testing.assert_allclose(p.data, q.data, rtol=1e-6)


def test_params_without_grad_are_skipped():
    link = _model()
    link.w.cleargrad()
    link.b.grad = numpy.ones(4, "f")
    opt = optimizers.SGD(lr=1.0)
    opt.setup(link)
    w = link.w.data.copy()
    b = link.b.data.copy()
    opt.update()
    numpy.testing.assert_array_equal(link.w.data, w)
    numpy.testing.assert_allclose(link.b.data, b - 1)


def test_weight_decay_and_gradient_clipping_hooks():
    link = _model()
    opt = optimizers.SGD(lr=1.0)
    opt.setup(link)
    opt.add_hook(WeightDecay(0.5))
    grads = _grads(0)
    for n, g in grads.items():
        getattr(link, n).grad = g.copy()
    w = link.w.data.copy()
    opt.update()
    numpy.testing.assert_allclose(link.w.data, w - (grads["w"] + 0.5 * w), rtol=1e-6)
    opt.remove_hook("WeightDecay")
    with pytest.raises(KeyError, match="no hook named 'WeightDecay'"):
        opt.remove_hook("WeightDecay")

    opt.add_hook(GradientClipping(1.0))
    with pytest.raises(KeyError, match="already registered"):
        opt.add_hook(GradientClipping(2.0))
    link.w.grad = numpy.full((3, 4), 3.0, "f")
    link.b.grad = numpy.zeros(4, "f")
    w = link.w.data.copy()
    opt.update()
    norm = math.sqrt(12 * 9.0)
    numpy.testing.assert_allclose(link.w.data, w - 3.0 / norm, rtol=1e-5)
    numpy.testing.assert_allclose(math.sqrt(sum((p.grad ** 2).sum() for p in link.params())), 1.0, rtol=1e-5)


def test_function_hook_and_order():
    link = _model()
    opt = optimizers.SGD()
    opt.setup(link)
    seen = []
    opt.add_hook(lambda o: seen.append(("a", o.t)), name="a")
    opt.add_hook(lambda o: seen.append(("b", o.t)), name="b")
    for p in link.params():
        p.zerograd()
    opt.update()
    assert seen == [("a", 0), ("b", 0)]  # hooks run before t is counted
    with pytest.raises(TypeError, match="must be callable"):
        opt.add_hook(3, name="x")


def test_setup_is_required():
    opt = optimizers.SGD()
    with pytest.raises(RuntimeError, match="call setup"):
        opt.add_hook(WeightDecay(0.1))
    with pytest.raises(RuntimeError, match="no target; call setup"):
        opt.update()
    with pytest.raises(TypeError, match="optimization target must be a link"):
        opt.setup([1, 2])


def test_deprecated_methods():
    link = _model()
    opt = optimizers.SGD(lr=1.0)
    opt.setup(link)
    opt.zero_grads()
    assert all(not p.grad.any() for p in link.params())
    opt.accumulate_grads([numpy.full((3, 4), 2.0, "f"), numpy.full(4, 2.0, "f")])
    assert opt.compute_grads_norm() == pytest.approx(math.sqrt(16 * 4.0))
    opt.clip_grads(1.0)
    assert opt.compute_grads_norm() == pytest.approx(1.0, rel=1e-5)
    opt.zero_grads()
    w = link.w.data.copy()
    opt.weight_decay(0.1)
    numpy.testing.assert_allclose(link.w.grad, 0.1 * w, rtol=1e-6)
    with pytest.raises(ValueError, match="got 1 gradient arrays for 2 parameters"):
        opt.accumulate_grads([numpy.zeros((3, 4), "f")])


def test_new_epoch_and_prepare_for_new_params():
    link = _model()
    opt = optimizers.MomentumSGD()
    opt.setup(link)
    opt.new_epoch()
    opt.new_epoch()
    assert opt.epoch == 2
    link.add_param("c", (2,))
    link.c.data[...] = 0
    link.c.grad = numpy.ones(2, "f")
    link.w.cleargrad()
    link.b.cleargrad()
    opt.update()
    assert "/c" in opt._states and opt._states["/c"]["v"].shape == (2,)


def test_optimizer_serialization_roundtrip(tmp_path):
    link = _model()
    opt = optimizers.Adam()
    opt.setup(link)
    for t in range(1, 3):
        for n, g in _grads(t).items():
            getattr(link, n).grad = g
        opt.update()
    opt.new_epoch()
    path = tmp_path / "opt.npz"
    chainer.serializers.save_npz(str(path), opt)
    with numpy.load(path) as f:
        keys = set(f.files)
        assert {"t", "epoch", "w/m", "w/v", "b/m", "b/v"} == keys  # Chainer 1.7.2's keys
        assert int(f["t"]) == 2 and int(f["epoch"]) == 1
    fresh = optimizers.Adam()
    fresh.setup(_model())
    chainer.serializers.load_npz(str(path), fresh)
    assert fresh.t == 2 and fresh.epoch == 1
    numpy.testing.assert_array_equal(fresh._states["/w"]["m"], opt._states["/w"]["m"])
    numpy.testing.assert_array_equal(fresh._states["/b"]["v"], opt._states["/b"]["v"])


def test_optimizer_state_loads_without_per_param_t(tmp_path):
    # Chainer 1.7.2 wrote no '<path>/t' keys.
    link = _model()
    opt = optimizers.MomentumSGD()
    opt.setup(link)
    path = tmp_path / "old.npz"
    numpy.savez(path, t=numpy.array(5), epoch=numpy.array(2), **{"w/v": numpy.ones((3, 4), "f"), "b/v": numpy.ones(4, "f")})
    chainer.serializers.load_npz(str(path), opt)
    assert opt.t == 5 and opt.epoch == 2 and (opt._states["/w"]["v"] == 1).all()


def test_adam_keeps_working_with_non_contiguous_params():
    link = Link(w=(4, 3))
    link.w.data = numpy.asfortranarray(numpy.ones((4, 3), "f"))
    link.w.grad = numpy.ones((4, 3), "f")
    opt = optimizers.Adam(alpha=0.1)
    opt.setup(link)
    opt._states["/w"]["m"] = numpy.asfortranarray(opt._states["/w"]["m"])
    opt.update()
    numpy.testing.assert_allclose(link.w.data, 1 - 0.1, rtol=1e-4)
