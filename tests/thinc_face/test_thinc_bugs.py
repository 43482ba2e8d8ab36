"""The Thinc 8.3 bugs that plait does not copy (docs/thinc-face.md, "Where plait departs from Thinc
on purpose"), each shown twice on the same case.

`test_<item>_thinc_bug` runs thinc 8.3.14 and asserts the bug is there, specifically enough that it
fails once thinc is fixed (and the item can leave that list). `test_<item>_plait` asserts what
plait does instead; it needs no thinc. Gradients are checked with float64 central differences.

The differential tests elsewhere step around these bugs when they compare with thinc
(THINC_GRADIENT_BUGS in tests/layers/test_weight_layers.py, _adjust_theirs in
tests/thinc_face/test_layer_table.py, the dX-only comparison in tests/backends/test_lstm.py);
this file is where each bug is shown.
"""
import numpy
import pytest

from plait.api import (
    Dish,
    Dropout,
    Linear,
    Model,
    MultiSoftmax,
    NumpyOps,
    Padded,
    bidirectional,
    with_cpu,
    with_debug,
    with_flatten,
    with_reshape,
)


def _thinc():
    return pytest.importorskip("thinc.api")


def _rng(seed):
    return numpy.random.default_rng(seed)


def _numeric_grad(loss_of, arr, eps=1e-6):
    """Central differences of loss_of(a) at a = arr, one cell at a time (arr itself is unchanged)."""
    arr = numpy.asarray(arr, dtype="float64")
    grad = numpy.zeros_like(arr)
    for idx in numpy.ndindex(*arr.shape):
        plus, minus = arr.copy(), arr.copy()
        plus[idx] += eps
        minus[idx] -= eps
        grad[idx] = (loss_of(plus) - loss_of(minus)) / (2 * eps)
    return grad


def _param_loss(model, node, name, loss):
    """loss() as a function of node's param `name`; the param is restored afterwards."""

    def loss_of(value):
        old = node.get_param(name)
        node.set_param(name, value)
        try:
            return loss()
        finally:
            node.set_param(name, old)

    return loss_of


def _float64(model, ops, seed):
    """Put every node on `ops` with random float64 params."""
    rng = _rng(seed)
    for node in model.walk():
        node.ops = ops
        for name in node.param_names:
            if node.has_param(name):
                node.set_param(name, rng.normal(size=node.get_param(name).shape))
    return model


def _check_grads(model, X, R, rtol=1e-6, atol=1e-8):
    """backprop(R) against central differences of sum(predict(X) * R), for X and every param."""

    def loss():
        return float((model.predict(X) * R).sum())

    _, backprop = model.begin_update(X)
    dX = backprop(R)
    numpy.testing.assert_allclose(dX, _numeric_grad(lambda X_: float((model.predict(X_) * R).sum()), X), rtol, atol)
    for node in model.walk():
        for name in node.param_names:
            expected = _numeric_grad(_param_loss(model, node, name, loss), node.get_param(name))
            numpy.testing.assert_allclose(node.get_grad(name), expected, rtol, atol, err_msg=f"{node.name}.{name}")


# --- Dish: thinc differentiates dish at the layer input, not at the preactivation ----------------


def _dish_derivative(Z):
    # d/dz [z/2 * (1 + z / sqrt(1 + z^2))] = 1/2 + z / (2 sqrt(1 + z^2)) + z / (2 (1 + z^2)^(3/2))
    root = numpy.sqrt(1 + Z * Z)
    return 0.5 + 0.5 * Z / root + 0.5 * Z / root**3


def test_dish_thinc_bug():
    T = _thinc()
    X, R = _rng(0).normal(size=(4, 3)), _rng(1).normal(size=(4, 3))
    model = T.Dish(3, 3)
    model.initialize(X=X.astype("float32"))
    _float64(model, T.Ops(), seed=2)  # thinc's NumpyOps.gemm is float32 only
    _, backprop = model(X, is_train=True)
    dX = backprop(R)
    W = model.get_param("W")
    numeric = _numeric_grad(lambda X_: float((model.predict(X_) * R).sum()), X)
    assert numpy.abs(dX - numeric).max() > 0.1
    # Exactly the chain rule with dish' taken at X instead of at X @ W.T + b.
    numpy.testing.assert_allclose(dX, (R * _dish_derivative(X)) @ W, rtol=1e-10)
    # With nI != nO the shapes do not even broadcast.
    model = T.Dish(6, 2)
    X2 = _rng(3).normal(size=(4, 2)).astype("float32")
    model.initialize(X=X2)
    Y, backprop = model(X2, is_train=True)
    with pytest.raises(ValueError, match="could not be broadcast"):
        backprop(numpy.ones_like(Y))


@pytest.mark.parametrize("nO,nI", [(3, 3), (6, 2)])
def test_dish_plait(nO, nI):
    X, R = _rng(0).normal(size=(4, nI)), _rng(1).normal(size=(4, nO))
    model = Dish(nO, nI)
    model.initialize(X=X)
    _check_grads(_float64(model, NumpyOps(), seed=2), X, R)


# --- MultiSoftmax: thinc returns the raw logits ---------------------------------------------------


def _multisoftmax_case():
    rng = _rng(4)
    return rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=5)


def test_multisoftmax_thinc_bug():
    T = _thinc()
    X, W, b = (a.astype("float32") for a in _multisoftmax_case())
    model = T.MultiSoftmax((2, 3), 4).initialize()
    model.set_param("W", W)
    model.set_param("b", b)
    Y = model.predict(X)
    # Its ops.softmax(..., inplace=True) returns a new array, which the layer drops.
    numpy.testing.assert_allclose(Y, X @ W.T + b, rtol=1e-6, atol=1e-6)
    assert not numpy.allclose(Y[:, :2].sum(axis=1), 1.0)


def test_multisoftmax_plait():
    X, W, b = _multisoftmax_case()
    model = MultiSoftmax((2, 3), 4).initialize()
    model.set_param("W", W)
    model.set_param("b", b)
    Y = model.predict(X)
    logits = X @ W.T + b
    for group in (slice(0, 2), slice(2, 5)):
        E = numpy.exp(logits[:, group])
        numpy.testing.assert_allclose(Y[:, group], E / E.sum(axis=1, keepdims=True), rtol=1e-6)
        numpy.testing.assert_allclose(Y[:, group].sum(axis=1), 1.0, rtol=1e-6)


# --- bidirectional: thinc never reverses, and backprops the l2r half into r2l ---------------------


def _cumsum_layer(ModelCls, PaddedCls):
    """A layer that remembers the past: Y[t] = W * (X[0] + ... + X[t]), per sequence (Padded)."""

    def forward(model, Xp, is_train):
        W = model.get_param("W")
        C = numpy.cumsum(Xp.data, axis=0)

        def backprop(dYp):
            model.inc_grad("W", (dYp.data * C).sum(axis=(0, 1)))
            dX = numpy.cumsum((dYp.data * W)[::-1], axis=0)[::-1]
            return PaddedCls(numpy.ascontiguousarray(dX), Xp.size_at_t, Xp.lengths, Xp.indices)

        return PaddedCls(C * W, Xp.size_at_t, Xp.lengths, Xp.indices), backprop

    def init(model, X=None, Y=None):
        model.set_param("W", numpy.array([0.5, 1.5]))

    return ModelCls("cumsum", forward, init=init, params={"W": None})


def _padded_case(PaddedCls):
    lengths = numpy.array([3, 2], dtype="int32")
    data = _rng(5).normal(size=(3, 2, 2))
    data[2, 1] = 0.0  # the padding step of the shorter sequence
    return PaddedCls(data, numpy.array([2, 2, 1], dtype="int32"), lengths, numpy.array([0, 1], dtype="int32"))


def _r2l_expected(Xp, W):
    """The right-to-left cumsum, at each sequence's real steps (padding left at 0)."""
    out = numpy.zeros_like(Xp.data)
    for b, n in enumerate(Xp.lengths):
        for t in range(n):
            out[t, b] = W * Xp.data[t:n, b].sum(axis=0)
    return out


def _real_steps(Xp):
    return numpy.arange(Xp.data.shape[0])[:, None] < numpy.asarray(Xp.lengths)[None, :]


def test_bidirectional_thinc_bug():
    T = _thinc()
    Xp = _padded_case(T.Padded)
    model = T.bidirectional(_cumsum_layer(T.Model, T.Padded))
    model.initialize(X=Xp)
    l2r, r2l = model.layers
    r2l.set_param("W", numpy.array([2.0, -1.0]))
    Yp, backprop = model(Xp, is_train=True)
    # The r2l half is r2l run left to right on the unreversed input ...
    numpy.testing.assert_allclose(Yp.data[..., 2:], numpy.cumsum(Xp.data, axis=0) * r2l.get_param("W"))
    mask = _real_steps(Xp)
    assert not numpy.allclose(Yp.data[..., 2:][mask], _r2l_expected(Xp, r2l.get_param("W"))[mask])
    # ... and backprop hands r2l the l2r half of dY: both get the same gradient.
    backprop(T.Padded(_rng(6).normal(size=(3, 2, 4)), Xp.size_at_t, Xp.lengths, Xp.indices))
    numpy.testing.assert_allclose(r2l.get_grad("W"), l2r.get_grad("W"))


def test_bidirectional_plait():
    Xp = _padded_case(Padded)
    model = bidirectional(_cumsum_layer(Model, Padded))
    model.initialize(X=Xp)
    l2r, r2l = model.layers
    r2l.set_param("W", numpy.array([2.0, -1.0]))
    Y = model.predict(Xp).data
    mask = _real_steps(Xp)
    numpy.testing.assert_allclose(Y[..., :2], numpy.cumsum(Xp.data, axis=0) * l2r.get_param("W"))
    numpy.testing.assert_allclose(Y[..., 2:][mask], _r2l_expected(Xp, r2l.get_param("W"))[mask])
    # Gradients, with the padding steps left out of the loss.
    R = _rng(6).normal(size=(3, 2, 4)) * mask[..., None]

    def padded(data):
        return Padded(data, Xp.size_at_t, Xp.lengths, Xp.indices)

    def loss_of_data(data):
        return float((model.predict(padded(data)).data * R).sum())

    _, backprop = model.begin_update(Xp)
    dX = backprop(padded(R)).data
    numpy.testing.assert_allclose(dX, _numeric_grad(loss_of_data, Xp.data), rtol=1e-6, atol=1e-8)
    for node in (l2r, r2l):
        expected = _numeric_grad(_param_loss(model, node, "W", lambda: loss_of_data(Xp.data)), node.get_param("W"))
        numpy.testing.assert_allclose(node.get_grad("W"), expected, rtol=1e-6, atol=1e-8)


# --- with_reshape: thinc reshapes dY to the input's shape and never back --------------------------


def test_with_reshape_thinc_bug():
    T = _thinc()
    X = _rng(7).normal(size=(2, 3, 4)).astype("float32")
    model = T.with_reshape(T.Linear(5)).initialize(X=X)
    Y, backprop = model(X, is_train=True)
    with pytest.raises(ValueError, match=r"cannot reshape array of size 30 into shape \(2,3,4\)"):
        backprop(numpy.ones_like(Y))
    # With nO == nI the reshape succeeds, and Linear is handed a 3d gradient.
    model = T.with_reshape(T.Linear(4)).initialize(X=X)
    Y, backprop = model(X, is_train=True)
    with pytest.raises(ValueError, match="should be 2-dimensional"):
        backprop(numpy.ones_like(Y))


@pytest.mark.parametrize("nO", [5, 4])
def test_with_reshape_plait(nO):
    X, R = _rng(7).normal(size=(2, 3, 4)), _rng(8).normal(size=(2, 3, nO))
    model = with_reshape(Linear(nO)).initialize(X=X)
    _check_grads(_float64(model, NumpyOps(), seed=9), X, R)


# --- with_flatten: thinc splits the input gradient along the features -----------------------------


def _tanh_rows_layer(ModelCls):
    """Items are 1d rows: Y = tanh(stack(rows)) * W, with dX returned as one (nItems, nF) array."""

    def forward(model, rows, is_train):
        W = model.get_param("W")
        H = numpy.tanh(numpy.stack(rows))

        def backprop(dY):
            model.inc_grad("W", (dY * H).sum(axis=0))
            return dY * W * (1 - H * H)

        return H * W, backprop

    def init(model, X=None, Y=None):
        model.set_param("W", numpy.array([0.5, -2.0]))

    return ModelCls("tanh_rows", forward, init=init, params={"W": None})


def _nested_rows():
    rows = _rng(10).normal(size=(5, 2))
    return [[rows[0]], [rows[1], rows[2]], [rows[3], rows[4]]]


def test_with_flatten_thinc_bug():
    T = _thinc()
    model = T.with_flatten(_tanh_rows_layer(T.Model))
    model.initialize(X=_nested_rows())
    Ynest, backprop = model(_nested_rows(), is_train=True)
    assert [y.shape for y in Ynest] == [(1, 2), (2, 2), (2, 2)]
    dXnest = backprop([numpy.ones_like(y) for y in Ynest])
    # The (5, 2) gradient is cut at the row offsets 1 and 3, but along the last axis.
    assert [d.shape for d in dXnest] == [(5, 1), (5, 1), (5, 0)]


def test_with_flatten_plait():
    Xnest = _nested_rows()
    model = with_flatten(_tanh_rows_layer(Model))
    model.initialize(X=Xnest)
    Ynest, backprop = model(Xnest, is_train=True)
    Rnest = [_rng(11 + i).normal(size=y.shape) for i, y in enumerate(Ynest)]
    dXnest = backprop(Rnest)
    assert [d.shape for d in dXnest] == [(1, 2), (2, 2), (2, 2)]
    flat = numpy.concatenate([numpy.stack(x) for x in Xnest])
    R = numpy.concatenate(Rnest)

    def loss_of_flat(values):
        nested = [list(values[0:1]), list(values[1:3]), list(values[3:5])]
        return float((numpy.concatenate(model.predict(nested)) * R).sum())

    numpy.testing.assert_allclose(numpy.concatenate(dXnest), _numeric_grad(loss_of_flat, flat), rtol=1e-6, atol=1e-8)
    inner = model.layers[0]
    expected = _numeric_grad(_param_loss(model, inner, "W", lambda: loss_of_flat(flat)), inner.get_param("W"))
    numpy.testing.assert_allclose(inner.get_grad("W"), expected, rtol=1e-6, atol=1e-8)


# --- with_cpu: thinc runs the wrapped layer in training mode, even in predict ---------------------


def _spy(ModelCls, seen):
    return ModelCls("spy", lambda model, X, is_train: (seen.append(is_train) or X, lambda dY: dY))


def test_with_cpu_thinc_bug():
    T = _thinc()
    seen = []
    T.with_cpu(_spy(T.Model, seen), T.NumpyOps()).predict(numpy.ones((2, 3), "f"))
    assert seen == [True]
    # So dropout stays on at prediction time.
    X = numpy.ones((50, 10), "f")
    Y = T.with_cpu(T.Dropout(0.5), T.NumpyOps()).predict(X)
    assert (Y == 0).any() and not numpy.array_equal(Y, X)


def test_with_cpu_plait():
    seen = []
    model = with_cpu(_spy(Model, seen), NumpyOps())
    model.predict(numpy.ones((2, 3), "f"))
    model.begin_update(numpy.ones((2, 3), "f"))
    assert seen == [False, True]
    X = numpy.ones((50, 10), "f")
    numpy.testing.assert_array_equal(with_cpu(Dropout(0.5), NumpyOps()).predict(X), X)


# --- with_debug: thinc computes the "debug:" name and then drops it -------------------------------


def test_with_debug_thinc_bug():
    T = _thinc()
    assert T.with_debug(T.Linear(2, 3), name="dbg").name == "linear"
    assert T.with_debug(T.Linear(2, 3)).name == "linear"


def test_with_debug_plait():
    assert with_debug(Linear(2, 3), name="dbg").name == "debug:dbg"
    assert with_debug(Linear(2, 3)).name == "debug:linear"


# --- backprop_lstm: thinc's parameter gradients are not the gradients of its forward --------------

# (depth 1) dirs, size_at_t; nO = 2, nI = 3, zero initial states
_LSTM_CASES = [(1, [3, 2, 1]), (2, [3, 3, 1])]


def _lstm_case(dirs, sizes):
    nO, nI = 2, 3
    rng = _rng(12)
    size_at_t = numpy.array(sizes, dtype="int32")
    params = rng.normal(size=dirs * (4 * nO * nI + 4 * nO + 4 * nO * nO + 4 * nO)) * 0.5
    X = rng.normal(size=(int(size_at_t.sum()), nI))
    dY = rng.normal(size=(X.shape[0], dirs * nO))
    return params, numpy.zeros((1, dirs, nO)), X, dY, size_at_t


@pytest.mark.parametrize("dirs,sizes", _LSTM_CASES)
def test_backprop_lstm_thinc_bug(dirs, sizes):
    T = _thinc()
    ops = T.NumpyOps()  # thinc's default; its compiled LSTM is float32 only
    params, H0, X, dY, size_at_t = _lstm_case(dirs, sizes)
    params, H0, X, dY = (a.astype("float32") for a in (params, H0, X, dY))
    _, state = ops.lstm_forward_training(params, H0, H0, X, size_at_t)
    dX, d_params = ops.backprop_lstm(dY.copy(), size_at_t, params, state)

    def loss_of(p, X_=X):
        Y = ops.lstm_forward_inference(p.astype("float32"), H0, H0, X_.astype("float32"), size_at_t)
        return float((Y * dY).sum())

    # Central differences of thinc's own forward; eps is large for float32 (good to about 1e-3 here).
    numeric = _numeric_grad(loss_of, params, eps=1e-2)
    assert numpy.abs(d_params - numeric).max() > 0.5
    nO, nI = 2, 3
    Wx = slice(0, 4 * nO * nI)  # the first direction's input weights
    assert numpy.abs(d_params[Wx] - numeric[Wx]).max() > 0.5
    # The input gradient is off too.
    assert numpy.abs(dX - _numeric_grad(lambda X_: loss_of(params, X_), X, eps=1e-2)).max() > 0.05


@pytest.mark.parametrize("dirs,sizes", _LSTM_CASES)
def test_backprop_lstm_plait(dirs, sizes):
    ops = NumpyOps()
    params, H0, X, dY, size_at_t = _lstm_case(dirs, sizes)
    _, state = ops.lstm_forward_training(params, H0, H0, X, size_at_t)
    dX, d_params = ops.backprop_lstm(dY.copy(), size_at_t, params, state)

    def loss_of(p, X_=X):
        return float((ops.lstm_forward_inference(p, H0, H0, X_, size_at_t) * dY).sum())

    numpy.testing.assert_allclose(d_params, _numeric_grad(loss_of, params), rtol=1e-6, atol=1e-8)
    numpy.testing.assert_allclose(dX, _numeric_grad(lambda X_: loss_of(params, X_), X), rtol=1e-6, atol=1e-8)
