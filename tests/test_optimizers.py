"""plait.optimizers: update rules checked by hand, against numpy re-derivations, and against Thinc 8.3."""
import inspect
import math

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _env import HAS_GPU
from plait.config import Config, registry
from plait.optimizers import ADAM_DEFAULTS, SGD_DEFAULTS, SGD, Adam, Optimizer, RAdam

KEY = (1, "W")


def _rand(rng, shape, dtype="float32"):
    return rng.normal(size=shape).astype(dtype)


# ---------------------------------------------------------------------------- references


def _numpy_adam(W, grads, *, lr, b1, b2, eps, clip=0.0, L2=0.0, decay=True):
    """Textbook Adam with bias-corrected step size and optional clipping / L2, in float64."""
    W = W.astype("float64").copy()
    m = numpy.zeros_like(W)
    v = numpy.zeros_like(W)
    for t, g in enumerate(grads, start=1):
        g = g.astype("float64").copy()
        if L2 and not decay:
            g = g + L2 * W
        if clip:
            norm = numpy.linalg.norm(g)
            if norm >= clip:
                g = g * (clip / norm)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        step = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
        W = W - step * m / (numpy.sqrt(v) + eps)
        if L2 and decay:
            W = W - lr * L2 * W
    return W


def _numpy_radam(W, grads, *, lr, b1, b2, eps):
    """Rectified Adam (Liu et al. 2019) with Thinc's step count (one ahead of the update count)."""
    W = W.astype("float64").copy()
    m = numpy.zeros_like(W)
    v = numpy.zeros_like(W)
    rho_inf = 2 / (1 - b2) - 1
    for n, g in enumerate(grads, start=1):
        t = n + 1
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        rho = rho_inf - 2 * t * b2**t / (1 - b2**t)
        if rho >= 5:
            r = math.sqrt(((rho - 4) * (rho - 2) * rho_inf) / ((rho_inf - 4) * (rho_inf - 2) * rho))
            v_hat_sqrt = numpy.sqrt(v) / math.sqrt(1 - b2**t)
            # eps is added to the uncorrected sqrt(v), as in the reference implementation.
            W = W - lr * r * m_hat * (numpy.sqrt(v) / (numpy.sqrt(v) + eps)) / v_hat_sqrt
        else:
            W = W - lr * m_hat
    return W


# ---------------------------------------------------------------------------- SGD


def test_sgd_step_by_hand_updates_in_place_and_zeroes_gradient():
    opt = SGD(0.5, grad_clip=0.0, use_averages=False)
    W = numpy.asarray([1.0, 2.0, 3.0], dtype="f")
    dW = numpy.asarray([0.2, -0.4, 1.0], dtype="f")
    W_out, dW_out = opt(KEY, W, dW)
    numpy.testing.assert_allclose(W_out, [0.9, 2.2, 2.5], rtol=1e-6)
    assert W_out is W
    assert dW_out is dW and not dW.any()
    assert opt.nr_update[KEY] == 1
    assert opt.mom1 == {} and opt.averages is None


def test_sgd_lr_scale_multiplies_the_step():
    opt = SGD(0.1, grad_clip=0.0)
    W = numpy.ones((2, 2), dtype="f")
    opt(KEY, W, numpy.ones((2, 2), dtype="f"), lr_scale=3.0)
    numpy.testing.assert_allclose(W, 1 - 0.3, rtol=1e-6)


def test_weight_decay_is_applied_after_the_step():
    lr, L2 = 0.1, 0.5
    opt = SGD(lr, L2=L2, grad_clip=0.0, L2_is_weight_decay=True)
    W = numpy.asarray([2.0, -1.0], dtype="f")
    g = numpy.asarray([1.0, 1.0], dtype="f")
    opt(KEY, W, g.copy())
    expected = numpy.asarray([2.0, -1.0]) - lr * g
    expected = expected - lr * L2 * expected
    numpy.testing.assert_allclose(W, expected, rtol=1e-6)


def test_l2_penalty_is_added_to_the_gradient():
    lr, L2 = 0.1, 0.5
    opt = SGD(lr, L2=L2, grad_clip=0.0, L2_is_weight_decay=False)
    W0 = numpy.asarray([2.0, -1.0], dtype="f")
    W = W0.copy()
    opt(KEY, W, numpy.asarray([1.0, 1.0], dtype="f"))
    numpy.testing.assert_allclose(W, W0 - lr * (1.0 + L2 * W0), rtol=1e-6)


def test_weight_decay_and_l2_differ_under_adam():
    rng = numpy.random.default_rng(3)
    W0, g = _rand(rng, (20,)), _rand(rng, (20,))
    W_decay, W_l2 = W0.copy(), W0.copy()
    Adam(0.01, L2=0.1, L2_is_weight_decay=True)(KEY, W_decay, g.copy())
    Adam(0.01, L2=0.1, L2_is_weight_decay=False)(KEY, W_l2, g.copy())
    assert not numpy.allclose(W_decay, W_l2)
    numpy.testing.assert_allclose(
        W_decay, _numpy_adam(W0, [g], lr=0.01, b1=0.9, b2=0.999, eps=1e-8, clip=1.0, L2=0.1), rtol=1e-5
    )
    numpy.testing.assert_allclose(
        W_l2,
        _numpy_adam(W0, [g], lr=0.01, b1=0.9, b2=0.999, eps=1e-8, clip=1.0, L2=0.1, decay=False),
        rtol=1e-5,
    )


# ---------------------------------------------------------------------------- clipping


def test_gradient_clipping_rescales_to_the_threshold():
    opt = SGD(1.0, grad_clip=2.0)
    W = numpy.zeros((3, 4), dtype="f")
    g = numpy.full((3, 4), 3.0, dtype="f")  # norm 3 * sqrt(12) > 2
    opt(KEY, W, g)
    assert float(numpy.linalg.norm(W)) == pytest.approx(2.0, rel=1e-6)
    numpy.testing.assert_allclose(W, -2.0 / math.sqrt(12), rtol=1e-6)


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.floats(-50, 50, allow_nan=False, width=32), min_size=1, max_size=30),
    clip=st.floats(0.01, 10.0),
)
def test_clipped_step_never_exceeds_threshold_and_keeps_direction(values, clip):
    g = numpy.asarray(values, dtype="float64")
    W = numpy.zeros_like(g)
    SGD(1.0, grad_clip=clip)(KEY, W, g.copy())
    norm = numpy.linalg.norm(g)
    assert numpy.linalg.norm(W) <= clip * (1 + 1e-9) + 1e-12
    if norm < clip:
        numpy.testing.assert_allclose(W, -g)
    else:
        numpy.testing.assert_allclose(W, -g * (clip / norm), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------- Adam, RAdam


@pytest.mark.parametrize("lr_scale", [1.0, 0.5])
def test_adam_matches_a_numpy_adam_over_many_steps(lr_scale):
    rng = numpy.random.default_rng(0)
    W0 = _rand(rng, (6, 5), "float64")
    grads = [_rand(rng, (6, 5), "float64") for _ in range(60)]
    opt = Adam(0.01, beta1=0.8, beta2=0.95, eps=1e-6, grad_clip=0.0, use_averages=False)
    W = W0.copy()
    for g in grads:
        W, _ = opt(KEY, W, g.copy(), lr_scale=lr_scale)
    expected = _numpy_adam(W0, grads, lr=0.01 * lr_scale, b1=0.8, b2=0.95, eps=1e-6)
    numpy.testing.assert_allclose(W, expected, rtol=1e-10, atol=1e-12)
    assert opt.mom1[KEY].shape == (30,) and opt.mom1[KEY].dtype == numpy.float64
    assert opt.nr_update[KEY] == 60


def test_adam_with_clipping_and_decay_matches_numpy_float32():
    rng = numpy.random.default_rng(1)
    W0 = _rand(rng, (40,))
    grads = [_rand(rng, (40,)) * 3 for _ in range(30)]
    opt = Adam(0.005, L2=0.01, grad_clip=1.5)
    W = W0.copy()
    for g in grads:
        W, _ = opt(KEY, W, g.copy())
    expected = _numpy_adam(W0, grads, lr=0.005, b1=0.9, b2=0.999, eps=1e-8, clip=1.5, L2=0.01)
    numpy.testing.assert_allclose(W, expected, rtol=1e-4, atol=1e-5)


def test_radam_matches_a_numpy_radam_through_both_phases():
    rng = numpy.random.default_rng(2)
    W0 = _rand(rng, (4, 3), "float64")
    grads = [_rand(rng, (4, 3), "float64") for _ in range(40)]
    # With beta2=0.99 the variance estimate becomes usable (rho >= 5) after a few steps.
    opt = RAdam(0.01, beta1=0.9, beta2=0.99, eps=1e-8, grad_clip=0.0, use_averages=False)
    W = W0.copy()
    W_after_first = None
    for i, g in enumerate(grads):
        W, _ = opt(KEY, W, g.copy())
        if i == 0:
            W_after_first = W.copy()
    # First step: momentum SGD, bias-corrected as if at step 2 (Thinc's count).
    numpy.testing.assert_allclose(W_after_first, W0 - 0.01 * (0.1 / (1 - 0.9**2)) * grads[0], rtol=1e-12)
    expected = _numpy_radam(W0, grads, lr=0.01, b1=0.9, b2=0.99, eps=1e-8)
    numpy.testing.assert_allclose(W, expected, rtol=1e-9, atol=1e-12)


def test_radam_honours_lr_scale():
    # NOTE: Thinc 8.3's RAdam ignores lr_scale; plait applies it like Adam and SGD do.
    W_full, W_half = numpy.zeros(3), numpy.zeros(3)
    RAdam(0.1, grad_clip=0.0)(KEY, W_full, numpy.ones(3))
    RAdam(0.1, grad_clip=0.0)(KEY, W_half, numpy.ones(3), lr_scale=0.5)
    assert W_full.all()
    numpy.testing.assert_allclose(W_half, W_full / 2)


def test_moments_and_updates_are_kept_per_key():
    opt = Adam(0.1, grad_clip=0.0)
    A = numpy.ones(3, dtype="f")
    B = numpy.ones(3, dtype="f")
    for _ in range(3):
        opt((1, "W"), A, numpy.ones(3, dtype="f"))
    opt((2, "W"), B, numpy.ones(3, dtype="f"))
    assert opt.nr_update[(1, "W")] == 3 and opt.nr_update[(2, "W")] == 1
    assert set(opt.mom1) == {(1, "W"), (2, "W")}
    # A first bias-corrected Adam step with a constant gradient moves by exactly lr.
    numpy.testing.assert_allclose(B, 1 - 0.1, rtol=1e-5)


def test_non_contiguous_weights_are_updated():
    opt = Adam(0.1, grad_clip=0.0)
    W = numpy.ones((4, 6), dtype="f")[:, ::2]
    W_out, g = opt(KEY, W, numpy.ones((4, 3), dtype="f"))
    assert W_out.shape == (4, 3)
    numpy.testing.assert_allclose(W_out, 0.9, rtol=1e-5)


def test_empty_gradient_is_a_no_op():
    opt = Adam(0.1)
    W = numpy.zeros((0, 4), dtype="f")
    W_out, g_out = opt(KEY, W, numpy.zeros((0, 4), dtype="f"))
    assert W_out is W and opt.nr_update[KEY] == 0 and KEY not in opt.mom1


# ---------------------------------------------------------------------------- averages


def test_averages_follow_the_warming_up_moving_average():
    opt = SGD(0.1, grad_clip=0.0)
    W = numpy.asarray([1.0, 2.0], dtype="f")
    ema = numpy.zeros(2)
    for t in range(1, 8):
        W, _ = opt(KEY, W, numpy.asarray([1.0, -1.0], dtype="f"))
        decay = min((1 + t) / (10 + t), 0.9999)
        ema = ema - (1 - decay) * (ema - W)
    numpy.testing.assert_allclose(opt.averages[KEY], ema, rtol=1e-5)
    assert opt.averages[KEY] is not W


def test_use_averages_false_keeps_none():
    opt = Adam(0.1, use_averages=False)
    opt(KEY, numpy.ones(3, dtype="f"), numpy.ones(3, dtype="f"))
    assert opt.averages is None


# ---------------------------------------------------------------------------- schedules


def test_list_schedule_steps_and_keeps_its_last_value():
    opt = SGD([0.3, 0.2, 0.1])
    assert opt.learn_rate == 0.3
    assert "learn_rate" in opt.schedules
    seen = []
    for _ in range(4):
        opt.step_schedules()
        seen.append(opt.learn_rate)
    assert seen == [0.2, 0.1, 0.1, 0.1]
    assert opt.step == 4


def test_generator_schedule_is_read_with_next():
    def rates():
        value = 1.0
        while True:
            yield value
            value /= 2

    opt = Adam(rates(), beta1=iter([0.9, 0.5]))
    opt.step_schedules()
    opt.step_schedules()
    assert opt.learn_rate == 0.25
    assert opt.b1 == 0.5


def test_callable_schedule_is_evaluated_at_the_step_with_last_score():
    calls = []

    def schedule(step, **extra):
        calls.append((step, extra.get("last_score")))
        return 0.1 / (1 + step)

    opt = Adam(schedule)
    assert opt.learn_rate == pytest.approx(0.1)
    opt.step_schedules()
    opt.step_schedules()
    assert opt.learn_rate == pytest.approx(0.1 / 3)
    assert opt.last_score is None
    opt.last_score = 0.75
    assert opt.last_score == (2, 0.75)
    assert calls[-1] == (2, (2, 0.75))
    assert [c[0] for c in calls[:3]] == [0, 1, 2]


def test_plait_schedules_plug_in():
    schedules = pytest.importorskip("plait.schedules")
    opt = Adam(schedules.warmup_linear(0.01, 4, 10))
    values = [opt.learn_rate]
    for _ in range(5):
        opt.step_schedules()
        values.append(opt.learn_rate)
    numpy.testing.assert_allclose(values, [0.0, 0.0025, 0.005, 0.0075, 0.01, 0.01 * 5 / 6])


def test_plateau_schedule_reacts_to_last_score():
    schedules = pytest.importorskip("plait.schedules")
    if not hasattr(schedules, "plateau"):
        pytest.skip("plait.schedules has no plateau")
    opt = Adam(schedules.plateau(2, 0.5, schedules.constant(1.0)))
    assert opt.learn_rate == 1.0
    for score in (0.5, 0.4, 0.3):  # best, then two evaluations without improvement
        opt.step_schedules()
        opt.last_score = score
    assert opt.learn_rate == 0.5


def test_assigning_learn_rate_sets_the_current_value():
    opt = Adam(0.1)
    opt.learn_rate = 0.5
    assert opt.learn_rate == 0.5
    opt.learn_rate = [0.2, 0.3]
    assert opt.learn_rate == 0.2
    opt.step_schedules()
    assert opt.learn_rate == 0.3


def test_scheduled_learn_rate_is_used_by_the_update():
    opt = SGD([1.0, 0.5], grad_clip=0.0)
    W = numpy.zeros(2, dtype="f")
    opt(KEY, W, numpy.ones(2, dtype="f"))
    opt.step_schedules()
    opt(KEY, W, numpy.ones(2, dtype="f"))
    numpy.testing.assert_allclose(W, -1.5)


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs,arg",
    [
        ({"learn_rate": -0.1}, "learn_rate"),
        ({"learn_rate": float("nan")}, "learn_rate"),
        ({"beta1": 1.0}, "beta1"),
        ({"beta1": -0.1}, "beta1"),
        ({"beta2": 1.5}, "beta2"),
        ({"eps": -1e-8}, "eps"),
        ({"L2": -0.01}, "L2"),
        ({"grad_clip": -1.0}, "grad_clip"),
        ({"learn_rate": [0.1, -0.2]}, "learn_rate"),
    ],
)
def test_bad_hyper_parameters_name_the_argument(kwargs, arg):
    kwargs = {"learn_rate": 0.1, **kwargs}
    with pytest.raises(ValueError, match=f"'{arg}'"):
        opt = Adam(**kwargs)
        opt.step_schedules()


def test_bad_value_from_a_schedule_says_which_step():
    opt = Adam(iter([0.1, 0.1, -1.0]))
    opt.step_schedules()
    with pytest.raises(ValueError, match="schedule for 'learn_rate'.*step 2"):
        opt.step_schedules()


@pytest.mark.parametrize("value", ["0.1", None, {"rate": 0.1}, []])
def test_invalid_schedules_raise(value):
    with pytest.raises(ValueError, match="learn_rate"):
        Adam(value)


def test_setter_validates():
    opt = Adam(0.1)
    with pytest.raises(ValueError, match="'beta2'"):
        opt.b2 = 1.0
    assert opt.b2 == 0.999


def test_shape_mismatch_names_the_key():
    opt = Adam(0.1)
    with pytest.raises(ValueError, match=r"\(7, 'W'\).*\(3,\).*\(4,\)"):
        opt((7, "W"), numpy.zeros(3, dtype="f"), numpy.zeros(4, dtype="f"))


def test_resized_parameter_names_the_key():
    opt = Adam(0.1)
    opt((7, "b"), numpy.zeros(3, dtype="f"), numpy.ones(3, dtype="f"))
    with pytest.raises(ValueError, match=r"\(7, 'b'\)"):
        opt((7, "b"), numpy.zeros(4, dtype="f"), numpy.ones(4, dtype="f"))


def test_integer_arrays_are_refused():
    with pytest.raises(TypeError, match="floats"):
        SGD(0.1)(KEY, numpy.zeros(3, dtype="i"), numpy.zeros(3, dtype="i"))


def test_second_moment_without_first_is_not_implemented():
    opt = Optimizer(0.1, beta1=0.0, beta2=0.9)
    with pytest.raises(NotImplementedError, match="beta1"):
        opt(KEY, numpy.zeros(3, dtype="f"), numpy.ones(3, dtype="f"))


def test_unknown_attributes_cannot_be_set():
    opt = Adam(0.1)
    with pytest.raises(AttributeError):
        opt.learnrate = 0.2


# ---------------------------------------------------------------------------- registry and API


def test_factories_are_registered():
    assert registry.optimizers.get("Adam.v1") is Adam
    assert registry.optimizers.get("RAdam.v1") is RAdam
    assert registry.optimizers.get("SGD.v1") is SGD


def test_defaults():
    opt = Adam()
    assert (opt.learn_rate, opt.b1, opt.b2, opt.eps, opt.L2, opt.grad_clip) == (
        0.001, 0.9, 0.999, 1e-8, 0.0, 1.0
    )
    assert opt.L2_is_weight_decay and not opt.use_radam and opt.averages == {}
    assert RAdam().use_radam
    sgd = SGD(0.1)
    assert (sgd.b1, sgd.b2, sgd.grad_clip) == (0.0, 0.0, SGD_DEFAULTS["grad_clip"])
    assert ADAM_DEFAULTS["learn_rate"] == 0.001
    with pytest.raises(TypeError):
        SGD()  # learn_rate has no default


def test_resolve_from_config():
    cfg = Config().from_str(
        """
        [optimizer]
        @optimizers = "Adam.v1"
        learn_rate = 0.02
        beta1 = 0.8
        L2 = 0.001
        use_averages = false
        """
    )
    opt = registry.resolve(cfg)["optimizer"]
    assert isinstance(opt, Optimizer)
    assert (opt.learn_rate, opt.b1, opt.L2, opt.averages) == (0.02, 0.8, 0.001, None)


def test_config_validation_rejects_a_string_learn_rate():
    from plait.config import ConfigValidationError

    with pytest.raises(ConfigValidationError, match="optimizer -> learn_rate"):
        registry.resolve(Config().from_str('[optimizer]\n@optimizers = "Adam.v1"\nlearn_rate = "fast"\n'))


def test_resolve_with_a_scheduled_learn_rate():
    pytest.importorskip("plait.schedules")
    cfg = Config().from_str(
        """
        [optimizer]
        @optimizers = "RAdam.v1"

        [optimizer.learn_rate]
        @schedules = "warmup_linear.v1"
        initial_rate = 0.01
        warmup_steps = 2
        total_steps = 4
        """
    )
    opt = registry.resolve(cfg)["optimizer"]
    assert opt.use_radam
    values = [opt.learn_rate]
    for _ in range(3):
        opt.step_schedules()
        values.append(opt.learn_rate)
    numpy.testing.assert_allclose(values, [0.0, 0.005, 0.01, 0.005])


def test_model_finish_update_applies_the_optimizer():
    model_mod = pytest.importorskip("plait.model")
    W0 = numpy.ones((2, 3), dtype="f")
    model = model_mod.Model("toy", lambda m, X, is_train: (X, lambda dY: dY), params={"W": W0.copy()})
    model.inc_grad("W", numpy.full((2, 3), 0.5, dtype="f"))
    opt = SGD(0.1, grad_clip=0.0)
    model.finish_update(opt)
    numpy.testing.assert_allclose(model.get_param("W"), W0 - 0.05)
    assert (model.id, "W") in opt.averages
    with model.use_params(opt.averages):
        numpy.testing.assert_allclose(model.get_param("W"), opt.averages[(model.id, "W")])


# ---------------------------------------------------------------------------- Thinc 8.3 parity


def _thinc():
    return pytest.importorskip("thinc.optimizers")


@pytest.mark.parametrize("name", ["Adam", "RAdam", "SGD", "Optimizer"])
def test_signatures_match_thinc(name):
    thinc_opt = _thinc()
    ours = inspect.signature(globals()[name] if name != "Optimizer" else Optimizer.__init__)
    theirs = inspect.signature(getattr(thinc_opt, name) if name != "Optimizer" else thinc_opt.Optimizer.__init__)
    assert list(ours.parameters) == list(theirs.parameters)
    for p in ours.parameters.values():
        q = theirs.parameters[p.name]
        assert (p.kind, p.default) == (q.kind, q.default), p.name


PARITY_CASES = [
    ("Adam", {}),
    ("Adam", {"learn_rate": 0.01, "L2": 0.01, "grad_clip": 0.5}),
    ("Adam", {"learn_rate": 0.01, "L2": 0.01, "L2_is_weight_decay": False, "beta2": 0.9}),
    ("RAdam", {}),
    ("RAdam", {"learn_rate": 0.01, "beta2": 0.95, "L2": 0.001, "grad_clip": 0.0}),
    ("SGD", {"learn_rate": 0.05}),
    ("SGD", {"learn_rate": 0.05, "L2": 0.1, "L2_is_weight_decay": False, "grad_clip": 2.0}),
]


@pytest.mark.parametrize("name,kwargs", PARITY_CASES)
def test_updates_match_thinc(name, kwargs):
    thinc_opt = _thinc()
    rng = numpy.random.default_rng(7)
    ours = globals()[name](**kwargs)
    theirs = getattr(thinc_opt, name)(**kwargs)
    shapes = {(1, "W"): (8, 5), (1, "b"): (5,), (2, "W"): (3, 4, 2)}
    params_ours = {k: _rand(rng, s) for k, s in shapes.items()}
    params_theirs = {k: v.copy() for k, v in params_ours.items()}
    for step in range(120):
        for key, shape in shapes.items():
            if step % 3 == 2 and key == (1, "b"):
                continue  # keys updated at different rates keep separate counts
            g = _rand(rng, shape) * 2
            params_ours[key], g_ours = ours(key, params_ours[key], g.copy())
            params_theirs[key], _ = theirs(key, params_theirs[key], g.copy())
            assert not g_ours.any()
        ours.step_schedules()
        theirs.step_schedules()
    for key in shapes:
        numpy.testing.assert_allclose(params_ours[key], params_theirs[key], rtol=1e-6, atol=1e-6)
        numpy.testing.assert_allclose(ours.averages[key], theirs.averages[key], rtol=1e-6, atol=1e-6)
        if key in theirs.mom1:
            numpy.testing.assert_allclose(ours.mom1[key], theirs.mom1[key], rtol=1e-5, atol=1e-7)
            numpy.testing.assert_allclose(ours.mom2[key], theirs.mom2[key], rtol=1e-5, atol=1e-9)
        assert ours.nr_update[key] == theirs.nr_update[key]
    assert set(ours.mom1) == set(theirs.mom1)


def test_schedule_values_match_thinc_generators():
    thinc_opt = _thinc()
    thinc_sched = pytest.importorskip("thinc.schedules")
    schedules = pytest.importorskip("plait.schedules")
    ours = Adam(schedules.decaying(0.01, 0.1), beta1=[0.9, 0.8, 0.7])
    theirs = thinc_opt.Adam(thinc_sched.decaying(0.01, 0.1), beta1=[0.9, 0.8, 0.7])
    for _ in range(6):
        assert (ours.learn_rate, ours.b1) == (theirs.learn_rate, theirs.b1)
        ours.step_schedules()
        theirs.step_schedules()


def test_thinc_generators_work_here_too():
    thinc_sched = pytest.importorskip("thinc.schedules")
    opt = SGD(thinc_sched.compounding(0.1, 1.0, 2.0))
    opt.step_schedules()
    opt.step_schedules()
    assert opt.learn_rate == pytest.approx(0.4)


# ---------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
@pytest.mark.parametrize("name", ["Adam", "RAdam", "SGD"])
def test_gpu_updates_match_cpu(name):
    import cupy

    rng = numpy.random.default_rng(5)
    opt_cpu, opt_gpu = globals()[name](0.01), globals()[name](0.01)
    W_cpu = _rand(rng, (16, 8))
    W_gpu = cupy.asarray(W_cpu)
    for _ in range(20):
        g = _rand(rng, (16, 8))
        W_cpu, _ = opt_cpu(KEY, W_cpu, g.copy())
        W_gpu, g_gpu = opt_gpu(KEY, W_gpu, cupy.asarray(g))
        assert not bool(g_gpu.any())
    numpy.testing.assert_allclose(cupy.asnumpy(W_gpu), W_cpu, rtol=1e-5, atol=1e-6)
    numpy.testing.assert_allclose(cupy.asnumpy(opt_gpu.averages[KEY]), opt_cpu.averages[KEY], rtol=1e-5, atol=1e-6)
