"""plait.loss: gradients checked numerically in float64, behaviour by hand, and values against Thinc 8.3."""
import inspect

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.config import Config, registry
from plait.loss import (
    CategoricalCrossentropy,
    CosineDistance,
    L2Distance,
    Loss,
    SequenceCategoricalCrossentropy,
)

NAMES = ["A", "B", "C", "D"]


def _softmax(Z):
    E = numpy.exp(Z - Z.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def _guesses(rng, nB=6, nO=4, dtype="float32"):
    return _softmax(rng.normal(size=(nB, nO))).astype(dtype)


def _numeric_grad(f, X, eps=1e-6):
    """Central differences of a scalar function f at X (float64)."""
    dX = numpy.zeros_like(X)
    for idx in numpy.ndindex(*X.shape):
        old = X[idx]
        X[idx] = old + eps
        up = f(X)
        X[idx] = old - eps
        down = f(X)
        X[idx] = old
        dX[idx] = (up - down) / (2 * eps)
    return dX


def _cross_entropy(Z, target, mask_rows, normalize):
    """Softmax cross-entropy of logits Z against target distributions, over unmasked rows."""
    log_p = Z - Z.max(axis=1, keepdims=True)
    log_p = log_p - numpy.log(numpy.exp(log_p).sum(axis=1, keepdims=True))
    total = -(target * log_p).sum(axis=1) @ mask_rows
    return total / Z.shape[0] if normalize else total


# ---------------------------------------------------------------------------- CategoricalCrossentropy


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_categorical_gradient_is_the_cross_entropy_gradient_wrt_logits(normalize, smoothing):
    rng = numpy.random.default_rng(0)
    Z = rng.normal(size=(5, 4))
    labels = [0, 3, -1, 2, 1]
    loss = CategoricalCrossentropy(normalize=normalize, missing_value=-1, label_smoothing=smoothing)
    dZ = loss.get_grad(_softmax(Z), labels)
    assert dZ.dtype == numpy.float64
    target = numpy.full((5, 4), smoothing / 3)
    target[numpy.arange(5), [0, 3, 0, 2, 1]] = 1 - smoothing
    mask_rows = numpy.asarray([1.0, 1.0, 0.0, 1.0, 1.0])
    expected = _numeric_grad(lambda Z: _cross_entropy(Z, target, mask_rows, normalize), Z.copy())
    numpy.testing.assert_allclose(dZ, expected, rtol=1e-6, atol=1e-9)
    assert not dZ[2].any()


def test_categorical_soft_targets_gradient():
    rng = numpy.random.default_rng(1)
    Z = rng.normal(size=(4, 3))
    T = _softmax(rng.normal(size=(4, 3)))
    dZ = CategoricalCrossentropy().get_grad(_softmax(Z), T)
    expected = _numeric_grad(lambda Z: _cross_entropy(Z, T, numpy.ones(4), True), Z.copy())
    numpy.testing.assert_allclose(dZ, expected, rtol=1e-6, atol=1e-9)


def test_categorical_loss_is_the_sum_of_squared_gradient():
    rng = numpy.random.default_rng(2)
    G = _guesses(rng)
    loss = CategoricalCrossentropy()
    d, value = loss(G, [0, 1, 2, 3, 0, 1])
    assert float(value) == pytest.approx(float((d.astype("float64") ** 2).sum()), rel=1e-6)
    assert float(loss.get_loss(G, [0, 1, 2, 3, 0, 1])) == pytest.approx(float(value))
    numpy.testing.assert_array_equal(loss.get_grad(G, [0, 1, 2, 3, 0, 1]), d)


def test_label_forms_agree():
    rng = numpy.random.default_rng(3)
    G = _guesses(rng)
    ints = [0, 1, 2, 3, 0, 1]
    expected = (G - numpy.eye(4, dtype="f")[ints]) / 6
    loss = CategoricalCrossentropy(names=NAMES)
    for truths in (ints, tuple(ints), numpy.asarray(ints, dtype="int32"), numpy.asarray(ints, dtype="uint64"),
                   [NAMES[i] for i in ints], numpy.eye(4, dtype="f")[ints], [numpy.int64(i) for i in ints]):
        numpy.testing.assert_allclose(loss.get_grad(G, truths), expected, rtol=1e-6, err_msg=repr(truths))


@pytest.mark.parametrize(
    "missing,truths",
    [
        (-1, [0, -1, 2, -1, 0, 1]),
        (-1, numpy.asarray([0, -1, 2, -1, 0, 1])),
        ("", ["A", "", "C", "", "A", "B"]),
        (None, ["A", None, "C", None, "A", "B"]),
        (99, [0, 99, 2, 99, 0, 1]),
    ],
)
def test_missing_values_give_zero_rows(missing, truths):
    rng = numpy.random.default_rng(4)
    G = _guesses(rng)
    d = CategoricalCrossentropy(names=NAMES, missing_value=missing).get_grad(G, truths)
    assert not d[[1, 3]].any()
    numpy.testing.assert_allclose(d[[0, 2, 4, 5]], (G - numpy.eye(4, dtype="f")[[0, 1, 2, 3, 0, 1]])[[0, 2, 4, 5]] / 6)


def test_missing_value_in_one_hot_truths_masks_by_argmax():
    rng = numpy.random.default_rng(5)
    G = _guesses(rng)
    T = numpy.eye(4, dtype="f")[[0, 2, 1, 2, 3, 0]]
    d = CategoricalCrossentropy(missing_value=2).get_grad(G, T)
    assert not d[[1, 3]].any()
    assert d[[0, 2, 4, 5]].all()


def test_negative_labels_only_push_down_the_negated_class():
    rng = numpy.random.default_rng(6)
    G = _guesses(rng, nB=3)
    d = CategoricalCrossentropy(names=NAMES, neg_prefix="!").get_grad(G, ["A", "!C", "D"])
    numpy.testing.assert_allclose(d[1], [0, 0, G[1, 2] / 3, 0], rtol=1e-6)
    numpy.testing.assert_allclose(d[0], (G[0] - [1, 0, 0, 0]) / 3, rtol=1e-6)
    # With label smoothing the negated class still has target 0.
    d = CategoricalCrossentropy(names=NAMES, neg_prefix="!", label_smoothing=0.1).get_grad(G, ["A", "!C", "D"])
    numpy.testing.assert_allclose(d[1], [0, 0, G[1, 2] / 3, 0], rtol=1e-6)


def test_label_smoothing_target_rows_sum_to_one():
    rng = numpy.random.default_rng(7)
    G = _guesses(rng, nB=2, nO=5, dtype="float64")
    d = CategoricalCrossentropy(label_smoothing=0.3, normalize=False).get_grad(G, [4, 0])
    target = G - d
    numpy.testing.assert_allclose(target.sum(axis=1), 1.0)
    numpy.testing.assert_allclose(target[0], [0.075, 0.075, 0.075, 0.075, 0.7])


def test_empty_batch():
    d, value = CategoricalCrossentropy()(numpy.zeros((0, 3), dtype="f"), [])
    assert d.shape == (0, 3) and float(value) == 0.0


def test_guesses_are_not_modified():
    rng = numpy.random.default_rng(8)
    G = _guesses(rng)
    T = numpy.eye(4, dtype="f")[[0, 1, 2, 3, 0, 1]]
    G0, T0 = G.copy(), T.copy()
    CategoricalCrossentropy(names=NAMES, missing_value=1)(G, T)
    numpy.testing.assert_array_equal(G, G0)
    numpy.testing.assert_array_equal(T, T0)


# ---------------------------------------------------------------------------- errors


def test_unknown_label_is_a_key_error():
    G = _guesses(numpy.random.default_rng(9), nB=2)
    with pytest.raises(KeyError, match="'E'"):
        CategoricalCrossentropy(names=NAMES).get_grad(G, ["A", "E"])
    with pytest.raises(KeyError, match="'!E'"):
        CategoricalCrossentropy(names=NAMES, neg_prefix="!").get_grad(G, ["A", "!E"])


def test_string_labels_need_names():
    G = _guesses(numpy.random.default_rng(9), nB=2)
    with pytest.raises(ValueError, match="names"):
        CategoricalCrossentropy().get_grad(G, ["A", "B"])


@pytest.mark.parametrize("smoothing", [-0.1, 1.0, 2.0])
def test_label_smoothing_out_of_range_at_construction(smoothing):
    with pytest.raises(ValueError, match="label_smoothing"):
        CategoricalCrossentropy(label_smoothing=smoothing)


def test_label_smoothing_too_large_for_the_classes():
    G = _guesses(numpy.random.default_rng(9), nB=2, nO=2)
    with pytest.raises(ValueError, match="label_smoothing"):
        CategoricalCrossentropy(label_smoothing=0.5).get_grad(G, [0, 1])


def test_label_smoothing_refused_for_soft_targets():
    G = _guesses(numpy.random.default_rng(9), nB=2)
    with pytest.raises(ValueError, match="label smoothing"):
        CategoricalCrossentropy(label_smoothing=0.1).get_grad(G, G.copy())


@pytest.mark.parametrize(
    "truths,err,pattern",
    [
        (numpy.zeros((2, 3), dtype="f"), ValueError, "shapes"),
        ([0, 1, 2], ValueError, "3 truths for 2 rows"),
        (numpy.asarray([0, 4]), ValueError, "class index 4"),
        ([0, -2], ValueError, "class index -2"),
        ([0, "A"], TypeError, "only ints or only strings"),
        (numpy.asarray([0.0, 1.0]), TypeError, "integer"),
        (numpy.zeros((2, 4, 1), dtype="f"), ValueError, "1d class indices or 2d"),
        ({"a": 1}, TypeError, "truths"),
        (numpy.full((2, 4), 2.0, dtype="f"), ValueError, r"\[0, 1\]"),
    ],
)
def test_bad_truths(truths, err, pattern):
    G = _guesses(numpy.random.default_rng(9), nB=2)
    with pytest.raises(err, match=pattern):
        CategoricalCrossentropy().get_grad(G, truths)


def test_bad_guesses():
    loss = CategoricalCrossentropy()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        loss.get_grad(numpy.asarray([[1.5, -0.5]], dtype="f"), [0])
    with pytest.raises(ValueError, match="2d"):
        loss.get_grad(numpy.asarray([0.5, 0.5], dtype="f"), [0])
    with pytest.raises(TypeError, match="array"):
        loss.get_grad([[0.5, 0.5]], [0])


@pytest.mark.parametrize("kwargs,truths", [
    ({}, [0, 1, 2, 3, 0, 1]),
    ({"label_smoothing": 0.1}, numpy.asarray([0, 1, 2, 3, 0, 1], dtype="int32")),
    ({"missing_value": -1}, [0, -1, 2, 3, -1, 1]),
    ({"missing_value": -1}, numpy.asarray([0, -1, 2, 3, -1, 1])),
    ({"names": NAMES, "missing_value": ""}, ["A", "", "C", "D", "", "A"]),
    ({"names": NAMES, "neg_prefix": "!"}, ["A", "!B", "C", "!D", "A", "A"]),
    ({"names": NAMES, "neg_prefix": "!", "missing_value": ""}, ["", "!B", "C", "!D", "", "A"]),
    ({"missing_value": 2}, numpy.eye(4, dtype="f")[[0, 1, 2, 3, 2, 1]]),
    ({"normalize": False}, numpy.eye(4, dtype="f")[[0, 1, 2, 3, 2, 1]]),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradient_is_the_masked_difference_bit_for_bit(kwargs, truths, dtype):
    # get_grad skips the mask where nothing is masked and divides in place: the values must
    # be exactly (guesses - target) * mask / nB with convert_truths' (full) target and mask.
    loss = CategoricalCrossentropy(**kwargs)
    G = _guesses(numpy.random.default_rng(31), dtype=dtype)
    target, mask = loss.convert_truths(truths, G)
    assert mask.shape == G.shape and mask.dtype == G.dtype
    expected = (G - target) * mask
    if loss.normalize:
        expected = expected / G.shape[0]
    got = loss.get_grad(G, truths)
    assert got.dtype == expected.dtype
    numpy.testing.assert_array_equal(got, expected)
    if "missing_value" not in kwargs and "neg_prefix" not in kwargs:
        assert (mask == 1).all()  # nothing masked: convert_truths still gives the ones


def test_out_of_range_values_are_refused_next_to_nans():
    # NaN is neither below 0 nor above 1 (as with any(x > 1)), but it must not hide a value
    # that is, in the guesses or in 2d truths.
    loss = CategoricalCrossentropy()
    G = numpy.asarray([[numpy.nan, 1.0], [0.25, 0.75]], dtype="f")
    assert numpy.isnan(loss.get_grad(G, [1, 0])[0, 0])
    for bad in (1.5, -0.5, numpy.inf):
        G_bad = G.copy()
        G_bad[1, 1] = bad
        with pytest.raises(ValueError, match=r"guesses outside the \[0, 1\] interval"):
            loss.get_grad(G_bad, [1, 0])
        T = numpy.asarray([[numpy.nan, 1.0], [0.0, bad]], dtype="f")
        with pytest.raises(ValueError, match=r"truth values outside the \[0, 1\] interval"):
            loss.get_grad(G[[1, 1]], T)
    # Integer guesses are numbers too (0 and 1 are in range).
    numpy.testing.assert_array_equal(
        loss.get_grad(numpy.asarray([[0, 1], [1, 0]]), [1, 0]), numpy.zeros((2, 2))
    )


def test_a_subclass_conversion_of_the_truths_is_used():
    class Halved(CategoricalCrossentropy):
        def convert_truths(self, truths, guesses):
            target, mask = super().convert_truths(truths, guesses)
            mask[0] = 0
            return target * 0.5, mask

    G = _guesses(numpy.random.default_rng(32), nB=3)
    got = Halved(normalize=False).get_grad(G, [0, 1, 2])
    expected = G - numpy.eye(4, dtype="f")[[0, 1, 2]] * 0.5
    expected[0] = 0
    numpy.testing.assert_allclose(got, expected, rtol=0, atol=0)


def test_names_must_match_the_width():
    G = _guesses(numpy.random.default_rng(9), nB=2, nO=3)
    with pytest.raises(ValueError, match="4 names.*nO=3"):
        CategoricalCrossentropy(names=NAMES).get_grad(G, [0, 1])


# ---------------------------------------------------------------------------- SequenceCategoricalCrossentropy


def test_sequence_loss_divides_by_the_number_of_sequences():
    rng = numpy.random.default_rng(10)
    Gs = [_guesses(rng, nB=n) for n in (3, 5, 1)]
    Ts = [[0, 1, 2], ["A", "B", "C", "D", "A"], numpy.asarray([3])]
    loss = SequenceCategoricalCrossentropy(names=NAMES)
    ds, value = loss(Gs, Ts)
    single = CategoricalCrossentropy(names=NAMES, normalize=False)
    for d, G, T in zip(ds, Gs, Ts):
        numpy.testing.assert_allclose(d, single.get_grad(G, T) / 3, rtol=1e-6)
    assert float(value) == pytest.approx(sum(float((d.astype("float64") ** 2).sum()) for d in ds), rel=1e-6)
    assert float(loss.get_loss(Gs, Ts)) == pytest.approx(float(value))
    ds_raw = SequenceCategoricalCrossentropy(names=NAMES, normalize=False).get_grad(Gs, Ts)
    numpy.testing.assert_allclose(ds_raw[1], single.get_grad(Gs[1], Ts[1]))


def test_sequence_loss_errors():
    rng = numpy.random.default_rng(11)
    Gs = [_guesses(rng, nB=2), _guesses(rng, nB=2)]
    loss = SequenceCategoricalCrossentropy(names=NAMES)
    with pytest.raises(ValueError, match="2 sequences of guesses but 1"):
        loss.get_grad(Gs, [[0, 1]])
    with pytest.raises(KeyError, match="sequence 1"):
        loss.get_grad(Gs, [["A", "B"], ["A", "Z"]])


# ---------------------------------------------------------------------------- L2Distance


@pytest.mark.parametrize("normalize", [True, False])
def test_l2_gradient_is_half_squared_error_gradient(normalize):
    rng = numpy.random.default_rng(12)
    G, T = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    scale = 1 / 4 if normalize else 1.0
    expected = _numeric_grad(lambda X: 0.5 * ((X - T) ** 2).sum() * scale, G.copy())
    loss = L2Distance(normalize=normalize)
    d, value = loss(G, T)
    numpy.testing.assert_allclose(d, expected, rtol=1e-7, atol=1e-9)
    assert value == pytest.approx(((G - T) * scale).__pow__(2).sum())
    assert loss.get_loss(G, T) == pytest.approx(value)


def test_l2_shape_mismatch():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        L2Distance()(numpy.zeros((2, 3), dtype="f"), numpy.zeros((3, 2), dtype="f"))


# ---------------------------------------------------------------------------- CosineDistance


@pytest.mark.parametrize("normalize", [True, False])
def test_cosine_gradient_is_the_gradient_of_the_loss(normalize):
    rng = numpy.random.default_rng(13)
    G, T = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    loss = CosineDistance(normalize=normalize)
    expected = _numeric_grad(lambda X: float(loss.get_loss(X, T)), G.copy())
    d, value = loss(G, T)
    numpy.testing.assert_allclose(d, expected, rtol=1e-6, atol=1e-9)
    cos = (G * T).sum(axis=1) / (numpy.linalg.norm(G, axis=1) * numpy.linalg.norm(T, axis=1))
    numpy.testing.assert_allclose(loss.get_similarity(G, T)[:, 0], cos, rtol=1e-6)
    assert float(value) == pytest.approx((1 - cos).sum() / (5 if normalize else 1), rel=1e-6)


def test_cosine_ignore_zeros_skips_zero_truth_rows():
    rng = numpy.random.default_rng(14)
    G, T = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    T[1] = 0
    plain, ignoring = CosineDistance(), CosineDistance(ignore_zeros=True)
    d, value = ignoring(G, T)
    assert not d[1].any() and d[0].any()
    rows = [0, 2, 3]
    assert float(value) == pytest.approx(float(plain.get_loss(G[rows], T[rows])) * 3 / 4, rel=1e-6)
    numpy.testing.assert_allclose(d[rows], plain.get_grad(G[rows], T[rows]) * 3 / 4, rtol=1e-6)


def test_cosine_shape_mismatch():
    with pytest.raises(ValueError, match="mismatched shapes"):
        CosineDistance().get_grad(numpy.zeros((2, 3), dtype="f"), numpy.zeros((2, 4), dtype="f"))


# ---------------------------------------------------------------------------- base class and registry


def test_loss_base_call_combines_grad_and_loss():
    class Abs(Loss):
        def get_grad(self, guesses, truths):
            return numpy.sign(guesses - truths)

        def get_loss(self, guesses, truths):
            return float(numpy.abs(guesses - truths).sum())

    d, value = Abs()(numpy.asarray([1.0, -2.0]), numpy.asarray([0.0, 0.0]))
    numpy.testing.assert_array_equal(d, [1.0, -1.0])
    assert value == 3.0


REGISTERED = {
    "CategoricalCrossentropy.v1": (CategoricalCrossentropy, {"normalize", "names", "missing_value"}),
    "CategoricalCrossentropy.v2": (CategoricalCrossentropy, {"normalize", "names", "missing_value", "neg_prefix"}),
    "CategoricalCrossentropy.v3": (
        CategoricalCrossentropy,
        {"normalize", "names", "missing_value", "neg_prefix", "label_smoothing"},
    ),
    "SequenceCategoricalCrossentropy.v1": (SequenceCategoricalCrossentropy, {"normalize", "names"}),
    "SequenceCategoricalCrossentropy.v2": (SequenceCategoricalCrossentropy, {"normalize", "names", "neg_prefix"}),
    "SequenceCategoricalCrossentropy.v3": (
        SequenceCategoricalCrossentropy,
        {"normalize", "names", "missing_value", "neg_prefix", "label_smoothing"},
    ),
    "L2Distance.v1": (L2Distance, {"normalize"}),
    "CosineDistance.v1": (CosineDistance, {"normalize", "ignore_zeros"}),
}


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_registered_factories(name):
    cls, params = REGISTERED[name]
    factory = registry.losses.get(name)
    assert set(inspect.signature(factory).parameters) == params
    assert isinstance(factory(), cls)


def test_resolve_loss_from_config():
    cfg = Config().from_str(
        """
        [loss]
        @losses = "CategoricalCrossentropy.v3"
        normalize = false
        names = ["A", "B", "C", "D"]
        missing_value = ""
        neg_prefix = "!"
        label_smoothing = 0.1
        """
    )
    loss = registry.resolve(cfg)["loss"]
    assert isinstance(loss, CategoricalCrossentropy)
    assert (loss.normalize, list(loss.names), loss.missing_value, loss.neg_prefix, loss.label_smoothing) == (
        False, NAMES, "", "!", 0.1
    )
    seq = registry.resolve(Config().from_str('[loss]\n@losses = "SequenceCategoricalCrossentropy.v2"\nneg_prefix = "!"'))
    assert seq["loss"].cc.neg_prefix == "!" and seq["loss"].normalize is True
    assert seq["loss"].cc.normalize is False


# ---------------------------------------------------------------------------- Thinc 8.3 parity


def _thinc_loss():
    return pytest.importorskip("thinc.loss")


CC_CASES = [
    ({}, [0, 1, 2, 3, 0, 1]),
    ({}, numpy.asarray([0, 1, 2, 3, 0, 1], dtype="int32")),
    ({"label_smoothing": 0.1}, [0, 1, 2, 3, 0, 1]),
    ({"label_smoothing": 0.2}, numpy.asarray([3, 1, 2, 3, 0, 1])),
    ({"missing_value": -1}, [0, -1, 2, 3, -1, 1]),
    ({"missing_value": -1}, numpy.asarray([0, -1, 2, 3, -1, 1])),
    ({"names": NAMES}, ["A", "B", "C", "D", "A", "A"]),
    ({"names": NAMES, "missing_value": ""}, ["A", "", "C", "D", "", "A"]),
    ({"names": NAMES, "neg_prefix": "!"}, ["A", "!B", "C", "!D", "A", "A"]),
    ({"names": NAMES, "normalize": False, "label_smoothing": 0.2}, ["A", "B", "C", "D", "A", "A"]),
    ({"missing_value": 2}, numpy.eye(4, dtype="f")[[0, 1, 2, 3, 2, 1]]),
    ({"normalize": False}, "soft"),
]


@pytest.mark.parametrize("kwargs,truths", CC_CASES)
def test_categorical_matches_thinc(kwargs, truths):
    thinc_loss = _thinc_loss()
    rng = numpy.random.default_rng(20)
    G = _guesses(rng)
    if isinstance(truths, str):
        truths = _guesses(rng)
    d_ours, loss_ours = CategoricalCrossentropy(**kwargs)(G, truths)
    d_theirs, loss_theirs = thinc_loss.CategoricalCrossentropy(**kwargs)(G, truths)
    assert d_ours.dtype == d_theirs.dtype and d_ours.shape == d_theirs.shape
    numpy.testing.assert_allclose(d_ours, d_theirs, rtol=1e-6, atol=1e-7)
    assert float(loss_ours) == pytest.approx(float(loss_theirs), rel=1e-6)


@settings(max_examples=25, deadline=None)
@given(
    nB=st.integers(0, 7),
    nO=st.integers(2, 6),
    seed=st.integers(0, 2**16),
    smoothing=st.sampled_from([0.0, 0.05, 0.3]),
    normalize=st.booleans(),
)
def test_categorical_matches_thinc_on_random_batches(nB, nO, seed, smoothing, normalize):
    thinc_loss = _thinc_loss()
    rng = numpy.random.default_rng(seed)
    if smoothing >= (nO - 1) / nO:
        smoothing = 0.0
    G = _guesses(rng, nB=nB, nO=nO)
    labels = rng.integers(0, nO, size=nB)
    kwargs = {"label_smoothing": smoothing, "normalize": normalize}
    d_ours, loss_ours = CategoricalCrossentropy(**kwargs)(G, labels)
    d_theirs, loss_theirs = thinc_loss.CategoricalCrossentropy(**kwargs)(G, labels)
    numpy.testing.assert_allclose(d_ours, d_theirs, rtol=1e-6, atol=1e-7)
    assert float(loss_ours) == pytest.approx(float(loss_theirs), rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("kwargs", [{}, {"normalize": False}, {"label_smoothing": 0.1}])
def test_sequence_matches_thinc(kwargs):
    thinc_loss = _thinc_loss()
    rng = numpy.random.default_rng(21)
    Gs = [_guesses(rng, nB=n) for n in (2, 4)]
    Ts = [["A", "B"], ["C", "D", "A", "B"]]
    ds_ours, loss_ours = SequenceCategoricalCrossentropy(names=NAMES, **kwargs)(Gs, Ts)
    ds_theirs, loss_theirs = thinc_loss.SequenceCategoricalCrossentropy(names=NAMES, **kwargs)(Gs, Ts)
    for a, b in zip(ds_ours, ds_theirs):
        numpy.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert float(loss_ours) == pytest.approx(float(loss_theirs), rel=1e-6)


@pytest.mark.parametrize(
    "cls_name,kwargs",
    [
        ("L2Distance", {}),
        ("L2Distance", {"normalize": False}),
        ("CosineDistance", {}),
        ("CosineDistance", {"normalize": False}),
        ("CosineDistance", {"ignore_zeros": True}),
    ],
)
def test_distances_match_thinc(cls_name, kwargs):
    thinc_loss = _thinc_loss()
    rng = numpy.random.default_rng(22)
    G = rng.normal(size=(6, 5)).astype("f")
    T = rng.normal(size=(6, 5)).astype("f")
    T[3] = 0
    ours = globals()[cls_name](**kwargs)
    theirs = getattr(thinc_loss, cls_name)(**kwargs)
    d_ours, loss_ours = ours(G, T)
    d_theirs, loss_theirs = theirs(G, T)
    assert d_ours.dtype == d_theirs.dtype
    numpy.testing.assert_allclose(d_ours, d_theirs, rtol=1e-6, atol=1e-7)
    assert float(loss_ours) == pytest.approx(float(loss_theirs), rel=1e-6)
    if cls_name == "CosineDistance":
        numpy.testing.assert_allclose(ours.get_similarity(G, T), theirs.get_similarity(G, T), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_registered_signatures_match_thinc(name):
    thinc_config = pytest.importorskip("thinc.config")
    ours = inspect.signature(registry.losses.get(name))
    theirs = inspect.signature(thinc_config.registry.losses.get(name))
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == [
        (p.name, p.kind, p.default) for p in theirs.parameters.values()
    ]


@pytest.mark.parametrize("cls_name", ["CategoricalCrossentropy", "SequenceCategoricalCrossentropy", "L2Distance", "CosineDistance"])
def test_constructor_signatures_match_thinc(cls_name):
    thinc_loss = _thinc_loss()
    ours = inspect.signature(globals()[cls_name].__init__)
    theirs = inspect.signature(getattr(thinc_loss, cls_name).__init__)
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == [
        (p.name, p.kind, p.default) for p in theirs.parameters.values()
    ]


# ---------------------------------------------------------------- sequence loss: stacked fast path


def _per_sequence(loss, guesses, truths):
    # What the loss computes one sequence at a time (a 1-sequence call never stacks).
    n = len(guesses)
    out = []
    for Y, T in zip(guesses, truths):
        dY = loss.get_grad([Y], [T])[0]
        out.append(dY / n if loss.normalize else dY)
    return out


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("kind", ["ints", "onehot", "missing"])
def test_sequence_loss_stacked_path_equals_the_per_sequence_loop(normalize, kind):
    rng = numpy.random.default_rng(0)
    lengths = [3, 1, 5, 2]
    guesses = [rng.dirichlet(numpy.ones(4), size=n).astype("f") for n in lengths]
    if kind == "onehot":
        truths = [numpy.eye(4, dtype="f")[rng.integers(0, 4, n)] for n in lengths]
        loss = SequenceCategoricalCrossentropy(normalize=normalize)
    else:
        truths = [rng.integers(0, 4, n).astype("int64") for n in lengths]
        loss = SequenceCategoricalCrossentropy(normalize=normalize)
        if kind == "missing":
            loss = SequenceCategoricalCrossentropy(normalize=normalize)
            loss.cc.missing_value = 3
    got = loss.get_grad(guesses, truths)
    want = _per_sequence(loss, guesses, truths)
    assert [g.shape for g in got] == [(n, 4) for n in lengths]
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


def test_sequence_loss_errors_still_name_the_sequence():
    guesses = [numpy.full((2, 3), 1 / 3, dtype="f"), numpy.full((2, 3), 1 / 3, dtype="f")]
    truths = [numpy.array([0, 1]), numpy.array([2, 7])]  # 7 is out of range in sequence 1
    with pytest.raises(ValueError, match="sequence 1"):
        SequenceCategoricalCrossentropy().get_grad(guesses, truths)
