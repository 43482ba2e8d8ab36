"""plait.initializers: distributions, reproducibility, exact agreement with Thinc 8.3, config and errors."""
import math

import numpy
import pytest

from plait.backends import NumpyOps
from plait.config import Config, registry
from plait.initializers import (
    configure_normal_init,
    configure_uniform_init,
    glorot_normal_init,
    glorot_uniform_init,
    he_normal_init,
    he_uniform_init,
    lecun_normal_init,
    lecun_uniform_init,
    normal_init,
    uniform_init,
    zero_init,
)
from plait.util import fix_random_seed

# name -> (function, distribution, expected variance for shape (nO, nI))
FAN_INITS = {
    "lecun_normal_init": (lecun_normal_init, "normal", lambda nO, nI: 1.0 / nI),
    "he_normal_init": (he_normal_init, "normal", lambda nO, nI: 2.0 / nI),
    "glorot_normal_init": (glorot_normal_init, "normal", lambda nO, nI: 2.0 / (nO + nI)),
    "lecun_uniform_init": (lecun_uniform_init, "uniform", lambda nO, nI: 1.0 / nI),
    "he_uniform_init": (he_uniform_init, "uniform", lambda nO, nI: 2.0 / nI),
    "glorot_uniform_init": (glorot_uniform_init, "uniform", lambda nO, nI: 2.0 / (nO + nI)),
}
ALL_INITS = {name: spec[0] for name, spec in FAN_INITS.items()}
ALL_INITS.update({"zero_init": zero_init, "uniform_init": uniform_init, "normal_init": normal_init})


# ----------------------------------------------------------------------------------------------
# Distributions


@pytest.mark.parametrize("name", sorted(FAN_INITS))
def test_fan_init_variance_and_range(ops, name):
    fn, dist, variance = FAN_INITS[name]
    nO, nI = 300, 500
    fix_random_seed(0)
    W = ops.to_numpy(fn(ops, (nO, nI))).astype("float64")
    want = variance(nO, nI)
    # 150k draws: the sample variance is within ~0.5% of the truth; 3% leaves a wide margin.
    assert W.var() == pytest.approx(want, rel=0.03)
    assert abs(W.mean()) < 5 * math.sqrt(want / W.size)
    if dist == "uniform":
        bound = math.sqrt(3 * want)
        assert W.min() >= -bound and W.max() <= bound
        assert W.max() > 0.99 * bound and W.min() < -0.99 * bound
    else:
        # A normal sample of this size reaches past 4 std but is far from uniform-bounded.
        assert W.max() > 4 * math.sqrt(want)


@pytest.mark.parametrize("name", sorted(FAN_INITS))
def test_fan_in_is_shape_1_and_fan_out_shape_0(name):
    fn, _, variance = FAN_INITS[name]
    ops = NumpyOps()
    fix_random_seed(1)
    tall = fn(ops, (2000, 10)).var()
    fix_random_seed(1)
    wide = fn(ops, (10, 2000)).var()
    assert tall == pytest.approx(variance(2000, 10), rel=0.05)
    assert wide == pytest.approx(variance(10, 2000), rel=0.05)


@pytest.mark.parametrize("name", sorted(ALL_INITS))
def test_dtype_shape_and_array_type(ops, name):
    shape = (4, 6, 3) if name in FAN_INITS else (5, 7)
    W = ALL_INITS[name](ops, shape)
    assert isinstance(W, ops.xp.ndarray)
    assert W.dtype == numpy.float32
    assert W.shape == shape


def test_three_dim_shape_uses_first_two_dims():
    ops = NumpyOps()
    fix_random_seed(2)
    W = glorot_uniform_init(ops, (20, 30, 400))
    bound = math.sqrt(6.0 / (20 + 30))
    assert numpy.abs(W).max() <= bound
    assert numpy.abs(W).max() > 0.99 * bound


def test_zero_init(ops):
    W = zero_init(ops, (3, 4))
    assert not ops.to_numpy(W).any()
    assert zero_init(ops, (5,)).shape == (5,)
    assert zero_init(ops, ()).shape == ()


def test_uniform_init_bounds(ops):
    fix_random_seed(0)
    W = ops.to_numpy(uniform_init(ops, (200, 300), lo=0.5, hi=2.0))
    assert W.min() >= 0.5 and W.max() <= 2.0
    assert W.mean() == pytest.approx(1.25, abs=0.01)
    W = ops.to_numpy(uniform_init(ops, (100, 100)))
    assert W.min() >= -0.1 and W.max() <= 0.1 and W.min() < -0.099


def test_uniform_init_equal_bounds_is_constant():
    W = uniform_init(NumpyOps(), (3, 3), lo=0.25, hi=0.25)
    assert numpy.all(W == numpy.float32(0.25))


def test_normal_init_mean_is_the_std_like_thinc():
    ops = NumpyOps()
    assert not normal_init(ops, (10, 10)).any()
    fix_random_seed(0)
    W = normal_init(ops, (300, 400), mean=0.5).astype("float64")
    assert W.std() == pytest.approx(0.5, rel=0.02)
    assert abs(W.mean()) < 0.01


def test_empty_shapes_draw_nothing():
    ops = NumpyOps()
    for fn in FAN_INITS.values():
        assert fn[0](ops, (0, 5)).shape == (0, 5)
        assert fn[0](ops, (5, 0)).shape == (5, 0)
    assert uniform_init(ops, (0, 3)).shape == (0, 3)


# ----------------------------------------------------------------------------------------------
# Reproducibility


@pytest.mark.parametrize("name", sorted(set(ALL_INITS) - {"zero_init", "normal_init"}))
def test_fix_random_seed_reproduces(name):
    fn, ops = ALL_INITS[name], NumpyOps()
    fix_random_seed(42)
    first = fn(ops, (8, 9))
    fix_random_seed(42)
    again = fn(ops, (8, 9))
    fix_random_seed(43)
    other = fn(ops, (8, 9))
    assert numpy.array_equal(first, again)
    assert not numpy.array_equal(first, other)


def test_backend_does_not_change_the_numbers(ops):
    fix_random_seed(7)
    expected = glorot_uniform_init(NumpyOps(), (6, 5))
    fix_random_seed(7)
    got = ops.to_numpy(glorot_uniform_init(ops, (6, 5)))
    assert numpy.array_equal(expected, got)


@pytest.mark.parametrize("name", sorted(ALL_INITS))
@pytest.mark.parametrize("shape", [(7, 5), (3, 4, 6), (1, 1)])
def test_values_equal_thinc(name, shape):
    thinc_inits = pytest.importorskip("thinc.initializers")
    thinc_api = pytest.importorskip("thinc.api")
    kwargs = {"mean": 0.3} if name == "normal_init" else {}
    numpy.random.seed(11)
    expected = getattr(thinc_inits, name)(thinc_api.NumpyOps(), shape, **kwargs)
    fix_random_seed(11)
    got = ALL_INITS[name](NumpyOps(), shape, **kwargs)
    assert got.dtype == expected.dtype
    assert numpy.array_equal(got, expected)


def test_uniform_init_bounds_equal_thinc():
    thinc_inits = pytest.importorskip("thinc.initializers")
    thinc_api = pytest.importorskip("thinc.api")
    numpy.random.seed(5)
    expected = thinc_inits.uniform_init(thinc_api.NumpyOps(), (9, 4), lo=-2.0, hi=3.0)
    fix_random_seed(5)
    assert numpy.array_equal(uniform_init(NumpyOps(), (9, 4), lo=-2.0, hi=3.0), expected)


# ----------------------------------------------------------------------------------------------
# Registry and config


def test_registry_names_match_thinc():
    thinc_api = pytest.importorskip("thinc.api")
    assert set(thinc_api.registry.initializers.get_all()) <= set(registry.initializers.get_all())


@pytest.mark.parametrize("name", sorted(ALL_INITS))
def test_config_resolves_to_the_initializer(name):
    resolved = registry.resolve(Config().from_str(f'[init]\n@initializers = "{name}.v1"'))
    init = resolved["init"]
    fix_random_seed(3)
    got = init(NumpyOps(), (4, 5))
    fix_random_seed(3)
    assert numpy.array_equal(got, ALL_INITS[name](NumpyOps(), (4, 5)))


def test_config_passes_settings():
    resolved = registry.resolve(
        Config().from_str(
            """
            [uniform]
            @initializers = "uniform_init.v1"
            lo = 1.0
            hi = 1.5

            [normal]
            @initializers = "normal_init.v1"
            mean = 0.2
            """
        )
    )
    fix_random_seed(0)
    W = resolved["uniform"](NumpyOps(), (50, 50))
    assert W.min() >= 1.0 and W.max() <= 1.5
    fix_random_seed(0)
    from_config = resolved["normal"](NumpyOps(), (6, 2))
    fix_random_seed(0)
    assert numpy.array_equal(from_config, normal_init(NumpyOps(), (6, 2), mean=0.2))


def test_configure_functions_bind_keywords():
    init = configure_uniform_init(lo=0.0, hi=0.5)
    fix_random_seed(0)
    W = init(NumpyOps(), (10, 10))
    assert W.min() >= 0.0 and W.max() <= 0.5
    assert not configure_normal_init()(NumpyOps(), (3, 3)).any()


def test_config_bad_setting_fails_at_resolve():
    with pytest.raises(ValueError, match="lo"):
        registry.resolve(Config().from_str('[i]\n@initializers = "uniform_init.v1"\nlo = 1.0\nhi = 0.0'))


# ----------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("name", sorted(ALL_INITS))
@pytest.mark.parametrize(
    "shape, error, match",
    [
        ((3, 2.5), TypeError, r"shape\[1\]"),
        (("3", 4), TypeError, r"shape\[0\]"),
        ((3, -4), ValueError, r"shape\[1\]"),
        ("34", TypeError, "shape"),
        (None, TypeError, "shape"),
    ],
)
def test_bad_shape_names_the_dimension(name, shape, error, match):
    with pytest.raises(error, match=match) as info:
        ALL_INITS[name](NumpyOps(), shape)
    assert name in str(info.value)


@pytest.mark.parametrize("name", sorted(FAN_INITS))
def test_fan_init_needs_two_dims(name):
    with pytest.raises(ValueError, match="at least 2"):
        ALL_INITS[name](NumpyOps(), (5,))


@pytest.mark.parametrize("name", sorted(ALL_INITS))
def test_ops_must_come_first(name):
    with pytest.raises(TypeError, match="Ops"):
        ALL_INITS[name]((3, 4), NumpyOps())


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: uniform_init(NumpyOps(), (2, 2), lo=0.5, hi=0.1), ValueError, "lo must be <= hi"),
        (lambda: uniform_init(NumpyOps(), (2, 2), lo="a"), TypeError, "lo"),
        (lambda: uniform_init(NumpyOps(), (2, 2), hi=math.nan), ValueError, "hi"),
        (lambda: normal_init(NumpyOps(), (2, 2), mean=-1.0), ValueError, "mean"),
        (lambda: configure_normal_init(mean=-1.0), ValueError, "mean"),
        (lambda: configure_uniform_init(lo=1.0, hi=0.0), ValueError, "lo"),
    ],
)
def test_bad_settings(call, error, match):
    with pytest.raises(error, match=match):
        call()
