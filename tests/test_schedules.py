"""plait.schedules: values per step (against formulas and Thinc 8.3), the iterator protocol, config and errors."""
import copy
import math
import pickle
from itertools import islice
from typing import Any

import pytest

from plait.config import Config, registry
from plait.schedules import (
    Schedule,
    compounding,
    constant,
    constant_then,
    cyclic_triangular,
    decaying,
    plateau,
    slanted_triangular,
    warmup_linear,
)

# (name, args, kwargs) for every Thinc 8.3 schedule, including float offsets that make the
# running `t += 1` of Thinc's generators round differently from a closed form.
THINC_CASES = [
    ("constant", (0.1,), {}),
    ("constant", (32,), {}),
    ("decaying", (0.005, 1e-4), {}),
    ("decaying", (0.3, 0.7), {"t": 7}),
    ("decaying", (0.3, 0.013), {"t": 0.1}),
    # With t = 24.77 a closed form t + step differs from Thinc's running sum at dozens of steps.
    ("decaying", (0.3, 0.013), {"t": 24.77}),
    ("slanted_triangular", (0.1, 500), {"t": 24.77}),
    ("compounding", (1.0, 10.0, 1.5), {}),
    ("compounding", (100, 1000, 1.001), {}),
    ("compounding", (1.0, 32.0, 1.001), {"t": 5.0}),
    ("compounding", (10.0, 1.0, 0.9), {}),
    ("compounding", (0.5, 1.0, 0.7), {}),
    ("compounding", (5.0, 1.0, 1.3), {}),
    ("compounding", (3.0, 3.0, 1.1), {}),
    ("warmup_linear", (0.01, 30, 60), {}),
    ("warmup_linear", (0.01, 0, 60), {}),
    ("warmup_linear", (0.002, 7, 7), {}),
    ("warmup_linear", (0.01, 250, 1000), {}),
    ("slanted_triangular", (0.1, 500), {}),
    ("slanted_triangular", (0.1, 500), {"t": 0.1}),
    ("slanted_triangular", (0.01, 97), {"cut_frac": 0.3, "ratio": 7, "t": 3.7}),
    ("slanted_triangular", (0.2, 40), {"cut_frac": 0.25, "ratio": 4, "decay": 0.5, "t": 2.0}),
    ("cyclic_triangular", (0.005, 0.001, 10), {}),
    ("cyclic_triangular", (0.001, 0.01, 7), {}),
    ("cyclic_triangular", (0.0, 1.0, 1), {}),
]
N_STEPS = 2500


def _case_id(case):
    name, args, kwargs = case
    return f"{name}{args}{kwargs or ''}"


@pytest.fixture(scope="module")
def thinc_schedules():
    return pytest.importorskip("thinc.schedules")


# ----------------------------------------------------------------------------------------------
# Differential: Thinc 8.3's generators


@pytest.mark.parametrize("case", THINC_CASES, ids=_case_id)
def test_values_equal_thinc_generators(thinc_schedules, case):
    name, args, kwargs = case
    expected = list(islice(getattr(thinc_schedules, name)(*args, **kwargs), N_STEPS))
    schedule = globals()[name](*args, **kwargs)
    by_call = [schedule(step) for step in range(N_STEPS)]
    by_next = list(islice(schedule, N_STEPS))
    by_generator = list(islice(schedule.to_generator(), N_STEPS))
    # Exact equality, not approx: the values must be bit-identical.
    assert by_call == expected
    assert by_next == expected
    assert by_generator == expected


@pytest.mark.parametrize("case", THINC_CASES, ids=_case_id)
def test_random_access_equals_thinc(thinc_schedules, case):
    name, args, kwargs = case
    expected = list(islice(getattr(thinc_schedules, name)(*args, **kwargs), N_STEPS))
    schedule = globals()[name](*args, **kwargs)
    # Backwards and jumping around exercises the memo of running recurrences.
    for step in [N_STEPS - 1, 3, 1700, 0, 1699, 1701, N_STEPS - 1, 12]:
        assert schedule(step) == expected[step], step


def test_to_generator_start_and_step_size_equal_thinc(thinc_schedules):
    expected = list(islice(thinc_schedules.compounding(1.0, 50.0, 1.01), 1000))
    got = list(islice(compounding(1.0, 50.0, 1.01).to_generator(start=5, step_size=3), 100))
    assert got == expected[5::3][:100]


def test_constant_then_equals_thinc(thinc_schedules):
    expected = list(
        islice(thinc_schedules.constant_then(0.5, 10, thinc_schedules.decaying(0.005, 1e-2)), 300)
    )
    schedule = constant_then(0.5, 10, decaying(0.005, 1e-2))
    assert [schedule(step) for step in range(300)] == expected
    assert list(islice(schedule, 300)) == expected


def test_registry_has_every_thinc_schedule_name():
    thinc_api = pytest.importorskip("thinc.api")
    thinc_names = set(thinc_api.registry.schedules.get_all())
    plait_names = set(registry.schedules.get_all())
    assert thinc_names <= plait_names
    assert "plateau.v1" in plait_names


# ----------------------------------------------------------------------------------------------
# Independent formula checks (no thinc needed)


def test_constant():
    schedule = constant(0.25)
    assert [schedule(step) for step in (0, 1, 10, 10**9)] == [0.25] * 4
    assert schedule.name == "constant"
    assert schedule.attrs == {"rate": 0.25}


def test_constant_then_restarts_the_wrapped_schedule():
    inner = warmup_linear(1.0, 4, 8)
    schedule = constant_then(0.5, 3, inner)
    assert [schedule(step) for step in range(3)] == [0.5, 0.5, 0.5]
    assert [schedule(step) for step in range(3, 12)] == [inner(step) for step in range(9)]


def test_constant_then_zero_steps_is_the_wrapped_schedule():
    schedule = constant_then(9.0, 0, decaying(1.0, 0.5))
    assert [schedule(step) for step in range(4)] == [1.0, 1 / 1.5, 1 / 2.0, 1 / 2.5]


@pytest.mark.parametrize("t", [0, 5])
def test_decaying_formula(t):
    schedule = decaying(0.005, 1e-3, t=t)
    for step in [0, 1, 2, 100, 12345]:
        assert schedule(step) == pytest.approx(0.005 / (1 + 1e-3 * (t + step)), rel=1e-14)
    assert schedule(0) == 0.005 / (1 + 1e-3 * t)


def test_compounding_formula_and_clipping():
    schedule = compounding(1.0, 10.0, 1.5)
    assert schedule(0) == 1.0
    assert schedule(1) == 1.5
    assert schedule(2) == 2.25
    for step in range(6):
        assert schedule(step) == pytest.approx(1.5**step, rel=1e-14)
    # 1.5**6 = 11.39 > 10: clipped from there on.
    assert [schedule(step) for step in range(6, 20)] == [10.0] * 14


def test_compounding_downwards_clips_below():
    schedule = compounding(10.0, 2.0, 0.5)
    assert [schedule(step) for step in range(5)] == [10.0, 5.0, 2.5, 2.0, 2.0]


def test_compounding_far_step_is_fast_and_clipped():
    # Only saturation detection keeps this from replaying 10**9 multiplications.
    schedule = compounding(1.0, 1000.0, 1.00001)
    assert schedule(10**9) == 1000.0
    assert schedule(10**9 + 7) == 1000.0
    assert schedule(0) == 1.0


def test_compounding_memo_follows_attr_changes():
    schedule = compounding(1.0, 100.0, 2.0)
    assert schedule(5) == 32.0
    schedule.attrs["compound"] = 3.0
    assert schedule(3) == 27.0
    assert schedule(4) == 81.0


def test_compounding_ignores_t_like_thinc():
    assert [compounding(1.0, 9.0, 2.0, t=4.0)(step) for step in range(5)] == [1.0, 2.0, 4.0, 8.0, 9.0]


def test_warmup_linear_values():
    schedule = warmup_linear(0.01, 3, 6)
    got = [schedule(step) for step in range(9)]
    want = [0.0, 0.01 / 3, 0.02 / 3, 0.01, 0.01 * 2 / 3, 0.01 / 3, 0.0, 0.0, 0.0]
    assert got == pytest.approx(want, abs=1e-15)
    assert max(got) == pytest.approx(0.01)


def test_slanted_triangular_shape():
    schedule = slanted_triangular(0.1, 100, cut_frac=0.1, ratio=32)
    values = [schedule(step) for step in range(100)]
    # Peak max_rate once t reaches the cut (t = step + 1 = 10), back to max_rate / ratio at num_steps.
    assert values[9] == pytest.approx(0.1)
    assert max(values) == pytest.approx(0.1)
    assert values[99] == pytest.approx(0.1 / 32)
    assert values[0] == pytest.approx(0.1 * (1 + 0.1 * 31) / 32)
    assert all(a < b for a, b in zip(values[:9], values[1:10]))
    assert all(a > b for a, b in zip(values[9:99], values[10:100]))


def test_cyclic_triangular_is_a_triangle_wave():
    schedule = cyclic_triangular(0.0, 1.0, 4)
    got = [schedule(step) for step in range(17)]
    want = [0.25, 0.5, 0.75, 1.0, 0.75, 0.5, 0.25, 0.0] * 2 + [0.25]
    assert got == pytest.approx(want, abs=1e-15)


def test_cyclic_triangular_swapped_bounds():
    schedule = cyclic_triangular(0.005, 0.001, 2)
    assert schedule(1) == pytest.approx(0.001)
    assert schedule(3) == pytest.approx(0.005)


# ----------------------------------------------------------------------------------------------
# plateau


def test_plateau_documented_example():
    schedule = plateau(2, 0.5, constant(1.0))
    got = [schedule(step, last_score=(step, 1.0)) for step in range(5)]
    assert got == [1.0, 1.0, 0.5, 0.5, 0.25]


def test_plateau_counts_each_evaluation_once():
    schedule = plateau(2, 0.5, constant(1.0))
    schedule(0, last_score=(0, 1.0))
    # The same evaluation reported at many steps is still one evaluation.
    assert [schedule(step, last_score=(1, 0.5)) for step in range(1, 10)] == [1.0] * 9
    assert schedule(10, last_score=(10, 0.5)) == 0.5


def test_plateau_improvement_resets_patience():
    schedule = plateau(2, 0.1, constant(1.0))
    scores = [1.0, 0.9, 2.0, 1.5, 1.9, 1.8]
    got = [schedule(step, last_score=(step, score)) for step, score in enumerate(scores)]
    assert got == pytest.approx([1.0, 1.0, 1.0, 1.0, 0.1, 0.1])


def test_plateau_without_score_keeps_current_scale():
    schedule = plateau(1, 0.5, warmup_linear(1.0, 0, 100))
    assert schedule(0) == 1.0
    schedule(1, last_score=(1, 3.0))
    schedule(2, last_score=(2, 2.0))
    assert schedule(10) == pytest.approx(0.5 * 0.9)
    assert next(schedule) == pytest.approx(0.5)


def test_plateau_inside_constant_then_gets_last_score():
    schedule = constant_then(0.3, 2, plateau(1, 0.5, constant(1.0)))
    assert schedule(0, last_score=(0, 1.0)) == 0.3
    assert schedule(2, last_score=(2, 1.0)) == 1.0
    assert schedule(3, last_score=(3, 0.5)) == 0.5


def test_plateau_rejects_malformed_last_score():
    schedule = plateau(2, 0.5, constant(1.0))
    with pytest.raises(TypeError, match="last_score"):
        schedule(0, last_score=0.5)


# ----------------------------------------------------------------------------------------------
# Iterator protocol and the Schedule class


def test_iter_returns_the_schedule_itself():
    schedule = decaying(1.0, 0.5)
    assert iter(schedule) is schedule


def test_next_advances_and_call_does_not():
    schedule = warmup_linear(1.0, 4, 8)
    assert next(schedule) == 0.0
    assert next(schedule) == 0.25
    assert schedule(6) == 0.5
    assert schedule(0) == 0.0
    assert next(schedule) == 0.5
    assert list(islice(schedule, 3)) == [0.75, 1.0, 0.75]
    assert next(iter(schedule)) == 0.5


def test_to_generator_is_independent_of_the_counter():
    schedule = compounding(1.0, 100.0, 2.0)
    next(schedule)
    next(schedule)
    gen = schedule.to_generator()
    assert list(islice(gen, 3)) == [1.0, 2.0, 4.0]
    assert next(schedule) == 4.0
    assert list(islice(schedule.to_generator(start=1, step_size=2), 3)) == [2.0, 8.0, 32.0]


def test_schedule_works_where_thinc8_expects_a_generator():
    # Thinc 8's Optimizer and spaCy's batchers do `next(iter(value))` and `for x in value`.
    sizes = compounding(1.0, 4.0, 2.0)
    seen = []
    for size in sizes:
        seen.append(size)
        if len(seen) == 5:
            break
    assert seen == [1.0, 2.0, 4.0, 4.0, 4.0]


def test_custom_schedule_receives_itself_step_and_extra():
    calls = []

    def fn(schedule, step, **extra):
        calls.append((schedule, step, extra))
        return schedule.attrs["base"] + step

    schedule: Schedule[int] = Schedule("linear", fn, attrs={"base": 10})
    assert schedule(3, foo=1) == 13
    assert calls[-1] == (schedule, 3, {"foo": 1})
    assert list(islice(schedule.to_generator(bar=2), 2)) == [10, 11]
    assert calls[-1][2] == {"bar": 2}
    assert next(schedule) == 10
    assert schedule.name == "linear"


def test_attrs_mutable_but_not_reassignable():
    schedule = constant(1.0)
    schedule.attrs["rate"] = 2.0
    assert schedule(0) == 2.0
    with pytest.raises(AttributeError):
        schedule.attrs = {}


def test_schedule_attrs_are_copied():
    attrs = {"rate": 1.0}
    schedule = Schedule("constant", lambda s, step: s.attrs["rate"], attrs=attrs)
    attrs["rate"] = 5.0
    assert schedule(0) == 1.0


def test_schedule_is_generic():
    assert Schedule[float] is not None
    assert Schedule[int].__origin__ is Schedule


def test_pickle_and_deepcopy_keep_values_and_counter():
    schedule = constant_then(0.5, 2, slanted_triangular(0.1, 50, t=0.3))
    next(schedule)
    for clone in (pickle.loads(pickle.dumps(schedule)), copy.deepcopy(schedule)):
        assert [clone(step) for step in range(60)] == [schedule(step) for step in range(60)]
        assert next(clone) == schedule(1)


def test_repr_names_schedule():
    assert repr(constant(0.5)) == "Schedule('constant', attrs={'rate': 0.5})"


@pytest.mark.parametrize(
    "bad_step, error",
    [(-1, ValueError), (1.0, TypeError), ("3", TypeError), (None, TypeError), (True, TypeError)],
)
def test_bad_step_is_refused(bad_step, error):
    schedule = constant(1.0)
    with pytest.raises(error, match="step"):
        schedule(bad_step)


def test_numpy_integer_step_is_accepted():
    numpy = pytest.importorskip("numpy")
    assert warmup_linear(1.0, 4, 8)(numpy.int64(2)) == 0.5


@pytest.mark.parametrize("kwargs", [{"step_size": 0}, {"start": -1}, {"step_size": 1.5}])
def test_to_generator_bad_arguments(kwargs):
    with pytest.raises((ValueError, TypeError)):
        constant(1.0).to_generator(**kwargs)


def test_schedule_init_checks_kinds():
    with pytest.raises(TypeError, match="name"):
        Schedule(3, lambda s, step: 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        Schedule("x", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="attrs"):
        Schedule("x", lambda s, step: 0, attrs=[1])  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# Bad arguments


BAD_ARGS = [
    (constant, ("fast",), {}, TypeError, "rate"),
    (constant, (math.inf,), {}, ValueError, "rate"),
    (constant_then, (0.1, -1, constant(1.0)), {}, ValueError, "steps"),
    (constant_then, (0.1, 2.5, constant(1.0)), {}, ValueError, "steps"),
    (constant_then, (0.1, 2, 3.0), {}, TypeError, "schedule"),
    (decaying, (-0.1, 1e-4), {}, ValueError, "base_rate"),
    (decaying, (0.1, -1e-4), {}, ValueError, "decay"),
    (decaying, (0.1, 1e-4), {"t": -2}, ValueError, "t"),
    (compounding, (1.0, 10.0, 0.0), {}, ValueError, "compound"),
    (compounding, (1.0, 10.0, -1.5), {}, ValueError, "compound"),
    (compounding, (-1.0, 10.0, 1.5), {}, ValueError, "start"),
    (compounding, (1.0, None, 1.5), {}, TypeError, "stop"),
    (warmup_linear, (-0.01, 1, 5), {}, ValueError, "initial_rate"),
    (warmup_linear, (0.01, "10", 50), {}, TypeError, "warmup_steps"),
    (slanted_triangular, (0.1, 0), {}, ValueError, "num_steps"),
    (slanted_triangular, (0.1, 5), {}, ValueError, "cut_frac"),
    (slanted_triangular, (0.1, 100), {"cut_frac": 1.0}, ValueError, "cut_frac"),
    (slanted_triangular, (0.1, 100), {"cut_frac": 0.0}, ValueError, "cut_frac"),
    (slanted_triangular, (0.1, 100), {"ratio": 0}, ValueError, "ratio"),
    (slanted_triangular, (-0.1, 100), {}, ValueError, "max_rate"),
    (cyclic_triangular, (0.001, 0.01, 0), {}, ValueError, "period"),
    (cyclic_triangular, (0.001, 0.01, 2.5), {}, ValueError, "period"),
    (cyclic_triangular, (-0.001, 0.01, 2), {}, ValueError, "min_lr"),
    (plateau, (0, 0.5, constant(1.0)), {}, ValueError, "max_patience"),
    (plateau, (2, 0.0, constant(1.0)), {}, ValueError, "scale"),
    (plateau, (2, 0.5, 1.0), {}, TypeError, "schedule"),
]


@pytest.mark.parametrize(
    "fn, args, kwargs, error, arg_name",
    BAD_ARGS,
    ids=[f"{case[0].__name__}-{case[4]}-{i}" for i, case in enumerate(BAD_ARGS)],
)
def test_bad_arguments_raise_naming_the_argument(fn, args, kwargs, error, arg_name):
    with pytest.raises(error, match=arg_name) as info:
        fn(*args, **kwargs)
    assert fn.__name__ in str(info.value)


def test_integral_float_counts_are_accepted():
    assert warmup_linear(1.0, 2.0, 4.0)(1) == warmup_linear(1.0, 2, 4)(1)
    assert cyclic_triangular(0.0, 1.0, 4.0)(3) == 1.0


# ----------------------------------------------------------------------------------------------
# Config


def _resolve(text: str) -> Any:
    return registry.resolve(Config().from_str(text))


def test_config_resolves_nested_schedules():
    resolved = _resolve(
        """
        [lr]
        @schedules = "constant_then.v1"
        rate = 0.005
        steps = 2

        [lr.schedule]
        @schedules = "plateau.v1"
        max_patience = 2
        scale = 0.5

        [lr.schedule.schedule]
        @schedules = "warmup_linear.v1"
        initial_rate = 0.01
        warmup_steps = 2
        total_steps = 6
        """
    )
    lr = resolved["lr"]
    assert isinstance(lr, Schedule)
    assert list(islice(lr, 9)) == pytest.approx([0.005, 0.005, 0.0, 0.005, 0.01, 0.0075, 0.005, 0.0025, 0.0])


@pytest.mark.parametrize(
    "block, want",
    [
        ('@schedules = "constant.v1"\nrate = 0.1', [0.1, 0.1, 0.1]),
        ('@schedules = "compounding.v1"\nstart = 1.0\nstop = 4.0\ncompound = 2.0\nt = 0.0', [1.0, 2.0, 4.0]),
        ('@schedules = "decaying.v1"\nbase_rate = 1.0\ndecay = 1.0\nt = 0', [1.0, 0.5, 1 / 3]),
        ('@schedules = "cyclic_triangular.v1"\nmin_lr = 0.0\nmax_lr = 1.0\nperiod = 2', [0.5, 1.0, 0.5]),
        (
            '@schedules = "slanted_triangular.v1"\nmax_rate = 1.0\nnum_steps = 20',
            [0.5 + 1 / 64, 1.0, 1 - 1 / 18 * 31 / 32],
        ),
    ],
)
def test_config_resolves_each_schedule(block, want):
    schedule = _resolve("[s]\n" + block)["s"]
    assert [schedule(step) for step in range(3)] == pytest.approx(want)


def test_config_bad_value_raises():
    with pytest.raises(ValueError, match="period"):
        _resolve('[s]\n@schedules = "cyclic_triangular.v1"\nmin_lr = 0.0\nmax_lr = 1.0\nperiod = 0')


def test_constant_then_takes_a_plain_iterable_like_thinc():
    # Thinc 8's constant_then chains any iterable after the constant phase.
    rates = constant_then(1.0, 2, [100, 200])
    assert [next(rates) for _ in range(4)] == [1.0, 1.0, 100, 200]
    with pytest.raises(ValueError, match="ended after 2 values"):
        next(rates)
    gen = constant_then(0.5, 1, (float(i) for i in range(10**6)))
    assert gen(20000) == 19999.0 and gen(20001) == 20000.0
    with pytest.raises(ValueError, match="no longer kept"):
        gen(1)


def test_warmup_linear_shorter_than_its_warmup_like_thinc():
    schedule = warmup_linear(1.0, 100, 20)
    assert [schedule(i) for i in (0, 10, 99, 100, 150)] == [0.0, 0.1, 0.99, 0.0, 0.0]
