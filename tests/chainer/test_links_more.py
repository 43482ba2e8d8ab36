"""EmbedID, Parameter, Maxout, PReLU, BatchNormalization, LSTM, GRU, StatefulGRU, Bilinear and their functions."""
import numpy
import pytest

from plait.chainer import Variable, gradient_check, serializers
from plait.chainer.functions.connection.bilinear import bilinear
from plait.chainer.functions.connection.embed_id import EmbedIDFunction, embed_id
from plait.chainer.links.activation.prelu import PReLU
from plait.chainer.links.connection.bilinear import Bilinear
from plait.chainer.links.connection.embed_id import EmbedID
from plait.chainer.links.connection.gru import GRU, StatefulGRU
from plait.chainer.links.connection.lstm import LSTM
from plait.chainer.links.activation.maxout import Maxout
from plait.chainer.links.connection.parameter import Parameter
from plait.chainer.links.normalization.batch_normalization import BatchNormalization


def _rng(seed=0):
    return numpy.random.RandomState(seed)


def _to_f64(link):
    """Turn every parameter of the hierarchy into float64 (for central differences)."""
    for p in link.params():
        p.data = p.data.astype(numpy.float64)
        p.cleargrad()
    return link


def _check_link_grads(link, func, xs, out_shape, seed=1, **tol):
    """check_backward over func's inputs and every parameter of `link`, in float64."""
    gy = _rng(seed).uniform(-1, 1, out_shape)
    gradient_check.check_backward(func, xs, gy, params=tuple(link.params()), eps=1e-6,
                                  atol=tol.get("atol", 1e-6), rtol=tol.get("rtol", 1e-5))


def _roundtrip(tmp_path, link, make, keys):
    """Save `link`, check the file's keys, load into a fresh link from make() and compare."""
    path = tmp_path / "link.npz"
    serializers.save_npz(str(path), link)
    with numpy.load(str(path)) as f:
        assert sorted(f.files) == sorted(keys)
    other = make()
    serializers.load_npz(str(path), other)
    for (name, p), (name2, q) in zip(sorted(link.namedparams()), sorted(other.namedparams())):
        assert name == name2
        numpy.testing.assert_array_equal(p.data, q.data)
    return other


def _sigmoid(x):
    return 1 / (1 + numpy.exp(-x))


# ------------------------------------------------------------------ embed_id / EmbedID

def test_embed_id_forward_matches_take_and_shapes():
    W = _rng().randn(6, 3).astype(numpy.float32)
    x = numpy.array([[0, 5, 2], [2, 2, 1]], dtype=numpy.int32)
    y = embed_id(x, W)
    assert y.data.shape == (2, 3, 3) and y.data.dtype == numpy.float32
    numpy.testing.assert_array_equal(y.data, W[x])


def test_embed_id_ignore_label_gives_zero_rows_and_no_grad():
    W = _rng().randn(4, 2)
    x = numpy.array([1, -1, 1, 3], dtype=numpy.int32)
    y = embed_id(x, Variable(W), ignore_label=-1)
    numpy.testing.assert_array_equal(y.data[1], 0)
    numpy.testing.assert_array_equal(y.data[[0, 2, 3]], W[[1, 1, 3]])
    Wv = Variable(W)
    y = embed_id(x, Wv, ignore_label=-1)
    y.grad = numpy.arange(8, dtype=numpy.float64).reshape(4, 2)
    y.backward()
    # repeated ID 1 accumulates rows 0 and 2; the ignored row adds nothing anywhere
    numpy.testing.assert_array_equal(Wv.grad, [[0, 0], [4, 6], [0, 0], [6, 7]])


@pytest.mark.parametrize("ignore_label", [None, 2])
def test_embed_id_gradient_check(ignore_label):
    W = _rng().randn(5, 4)
    x = numpy.array([[0, 2, 4], [2, 3, 0]], dtype=numpy.int32)
    gy = _rng(1).randn(2, 3, 4)
    gradient_check.check_backward(lambda x, W: embed_id(x, W, ignore_label), (x, W), gy,
                                  eps=1e-6, atol=1e-7, rtol=1e-6)


def test_embed_id_errors():
    W = numpy.zeros((3, 2), numpy.float32)
    with pytest.raises(ValueError, match=r"0\.\.2"):
        embed_id(numpy.array([0, 3], numpy.int32), W)
    with pytest.raises(Exception, match="dtype"):
        embed_id(numpy.array([0.0, 1.0], numpy.float32), W)
    with pytest.raises(TypeError, match="ignore_label"):
        EmbedIDFunction(ignore_label="x")


def test_embed_id_link_forward_backward_and_serialize(tmp_path):
    numpy.random.seed(0)
    link = EmbedID(7, 3)
    assert link.W.data.shape == (7, 3) and link.W.data.dtype == numpy.float32
    assert abs(float(link.W.data.std()) - 1) < 0.6  # N(0, 1) init
    x = numpy.array([6, 0, 6], numpy.int32)
    y = link(x)
    numpy.testing.assert_array_equal(y.data, link.W.data[x])
    link.cleargrads()
    y.grad = numpy.ones((3, 3), numpy.float32)
    y.backward()
    assert link.W.grad[6].tolist() == [2, 2, 2] and link.W.grad[0].tolist() == [1, 1, 1]
    assert not link.W.grad[1:6].any()
    _roundtrip(tmp_path, link, lambda: EmbedID(7, 3), ["W"])
    init = numpy.arange(6, dtype=numpy.float32).reshape(3, 2)
    numpy.testing.assert_array_equal(EmbedID(3, 2, initialW=init).W.data, init)
    with pytest.raises(ValueError, match="initialW"):
        EmbedID(3, 2, initialW=numpy.zeros((2, 3)))
    with pytest.raises(ValueError, match="in_size"):
        EmbedID(0, 2)


# ------------------------------------------------------------------ Parameter

def test_parameter_returns_its_array_and_passes_gradients():
    a = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
    link = Parameter(a)
    assert link.W.data is a
    y = link()
    numpy.testing.assert_array_equal(y.data, a)
    assert y.volatile == "off"
    link.cleargrads()
    y.grad = numpy.full((2, 3), 2, numpy.float32)
    y.backward()
    numpy.testing.assert_array_equal(link.W.grad, 2)
    assert link(volatile="on").volatile == "on"
    assert [n for n, _ in link.namedparams()] == ["/W"]
    with pytest.raises(TypeError, match="array"):
        Parameter([1, 2])


# ------------------------------------------------------------------ Maxout

def test_maxout_link_forward_matches_numpy_and_layout():
    r = _rng()
    W = r.randn(2, 3, 4).astype(numpy.float32)  # (out_size, pool_size, in_size)
    b = r.randn(2, 3).astype(numpy.float32)
    link = Maxout(4, 2, 3, initialW=W, initial_bias=b)
    assert link.linear.W.data.shape == (6, 4) and link.linear.b.data.shape == (6,)
    x = r.randn(5, 4).astype(numpy.float32)
    expected = (numpy.einsum("opi,bi->bop", W, x) + b).max(axis=2)
    numpy.testing.assert_allclose(link(x).data, expected, rtol=1e-5, atol=1e-6)
    assert Maxout(4, 2, 3, initial_bias=None).linear.b is None
    numpy.testing.assert_array_equal(Maxout(4, 2, 3, initial_bias=0.5).linear.b.data, 0.5)
    with pytest.raises(ValueError, match="initialW"):
        Maxout(4, 2, 3, initialW=numpy.zeros((2, 2, 4)))


def test_maxout_link_gradient_and_serialize(tmp_path):
    numpy.random.seed(2)
    link = _to_f64(Maxout(3, 2, 2, initial_bias=0.1))
    x = _rng(3).randn(4, 3)
    _check_link_grads(link, link, (x,), (4, 2))
    _roundtrip(tmp_path, link, lambda: Maxout(3, 2, 2), ["linear/W", "linear/b"])


# ------------------------------------------------------------------ PReLU

def test_prelu_link_forward_gradient_serialize(tmp_path):
    link = PReLU()
    assert link.W.data.shape == () and float(link.W.data) == 0.25
    x = numpy.array([[-2.0, 3.0]], numpy.float32)
    numpy.testing.assert_array_equal(link(x).data, [[-0.5, 3.0]])
    link = PReLU((3,), init=0.1)
    link.W.data[...] = [0.1, -0.5, 2.0]
    x = _rng().randn(4, 3, 2).astype(numpy.float32)
    expected = numpy.where(x >= 0, x, x * link.W.data[None, :, None])
    numpy.testing.assert_allclose(link(x).data, expected)
    link = _to_f64(link)
    x = _rng(1).randn(4, 3, 2)
    x[numpy.abs(x) < 0.05] = 0.3  # keep away from the kink
    _check_link_grads(link, link, (x,), x.shape)
    other = _roundtrip(tmp_path, link, lambda: PReLU((3,)), ["W"])
    numpy.testing.assert_allclose(other.W.data, [0.1, -0.5, 2.0], rtol=1e-6)


# ------------------------------------------------------------------ BatchNormalization

def test_batch_normalization_training_mode_and_moving_averages():
    link = BatchNormalization(3, decay=0.8)
    assert link.gamma.data.tolist() == [1, 1, 1] and link.beta.data.tolist() == [0, 0, 0]
    assert link.avg_mean.tolist() == [0, 0, 0] and link.avg_var.tolist() == [0, 0, 0] and link.N == 0
    x = _rng().randn(6, 3, 2).astype(numpy.float32) * 2 + 1
    y = link(x)
    mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    expected = (x - mean[None, :, None]) / numpy.sqrt(var[None, :, None] + 1e-5)
    numpy.testing.assert_allclose(y.data, expected, rtol=1e-4, atol=1e-5)
    m = 12
    numpy.testing.assert_allclose(link.avg_mean, 0.2 * mean, rtol=1e-5)
    numpy.testing.assert_allclose(link.avg_var, 0.2 * var * m / (m - 1), rtol=1e-5)
    link(x)
    numpy.testing.assert_allclose(link.avg_mean, 0.2 * mean * 1.8, rtol=1e-5)


def test_batch_normalization_finetune_then_test_mode():
    link = BatchNormalization((2,))
    r = _rng(4)
    batches = [r.randn(5, 2).astype(numpy.float32) + 3 for _ in range(3)]
    link(batches[0])  # training moves the averages, which start_finetuning's pass replaces
    link.start_finetuning()
    for b in batches:
        link(b, finetune=True)
    assert link.N == 3
    numpy.testing.assert_allclose(link.avg_mean, numpy.mean([b.mean(0) for b in batches], 0), rtol=1e-5)
    numpy.testing.assert_allclose(link.avg_var, numpy.mean([b.var(0, ddof=1) for b in batches], 0), rtol=1e-5)
    link.gamma.data[...] = [2, 3]
    link.beta.data[...] = [-1, 1]
    x = r.randn(4, 2).astype(numpy.float32)
    before = (link.avg_mean.copy(), link.N)
    y = link(x, test=True)
    expected = 2 * 0 + (x - link.avg_mean) / numpy.sqrt(link.avg_var + 1e-5) * [2, 3] + [-1, 1]
    numpy.testing.assert_allclose(y.data, expected, rtol=1e-5, atol=1e-5)
    numpy.testing.assert_array_equal(link.avg_mean, before[0])
    assert link.N == before[1]


def test_batch_normalization_gradients_and_serialize(tmp_path):
    link = BatchNormalization(3, dtype=numpy.float64)
    r = _rng(5)
    link.gamma.data[...] = r.uniform(0.5, 1.5, 3)
    link.beta.data[...] = r.randn(3)
    x = r.randn(5, 3)
    state = (link.avg_mean.copy(), link.avg_var.copy())

    def train(x):
        # Reset the averages so every call of the check sees the same link.
        link.avg_mean[...], link.avg_var[...] = state
        return link(x)

    _check_link_grads(link, train, (x,), x.shape, atol=1e-5, rtol=1e-4)
    link.avg_mean[...] = [0.1, 0.2, 0.3]
    link.avg_var[...] = [1.0, 2.0, 0.5]
    _check_link_grads(link, lambda x: link(x, test=True), (x,), x.shape)
    link.N = 4
    other = _roundtrip(tmp_path, link, lambda: BatchNormalization(3, dtype=numpy.float64),
                       ["gamma", "beta", "avg_mean", "avg_var", "N"])
    numpy.testing.assert_array_equal(other.avg_var, [1.0, 2.0, 0.5])
    assert int(other.N) == 4


# ------------------------------------------------------------------ LSTM

def _np_lstm(c, gates):
    g = gates.reshape(len(gates), -1, 4)
    a, i, f, o = numpy.tanh(g[..., 0]), _sigmoid(g[..., 1]), _sigmoid(g[..., 2]), _sigmoid(g[..., 3])
    c = a * i + f * c
    return c, o * numpy.tanh(c)


def test_lstm_link_two_steps_match_numpy_and_reset():
    numpy.random.seed(6)
    link = LSTM(3, 2)
    assert link.upward.W.data.shape == (8, 3) and link.lateral.W.data.shape == (8, 2)
    assert link.lateral.b is None and link.c is None and link.h is None
    r = _rng(7)
    xs = [r.randn(4, 3).astype(numpy.float32) for _ in range(2)]
    Wu, bu, Wl = link.upward.W.data, link.upward.b.data, link.lateral.W.data
    c = numpy.zeros((4, 2), numpy.float32)
    c, h = _np_lstm(c, xs[0] @ Wu.T + bu)
    y0 = link(xs[0])
    numpy.testing.assert_allclose(y0.data, h, rtol=1e-5, atol=1e-6)
    c, h = _np_lstm(c, xs[1] @ Wu.T + bu + h @ Wl.T)
    y1 = link(xs[1])
    numpy.testing.assert_allclose(y1.data, h, rtol=1e-5, atol=1e-6)
    numpy.testing.assert_allclose(link.c.data, c, rtol=1e-5, atol=1e-6)
    assert link.h is y1
    link.reset_state()
    assert link.c is None and link.h is None
    numpy.testing.assert_allclose(link(xs[0]).data, y0.data, rtol=1e-6)


def test_lstm_link_gradient_through_two_steps_and_serialize(tmp_path):
    numpy.random.seed(8)
    link = _to_f64(LSTM(3, 2))
    r = _rng(9)
    x0, x1 = r.randn(2, 3), r.randn(2, 3)

    def two_steps(x0, x1):
        link.reset_state()
        link(x0)
        return link(x1)

    _check_link_grads(link, two_steps, (x0, x1), (2, 2))
    _roundtrip(tmp_path, link, lambda: LSTM(3, 2), ["upward/W", "upward/b", "lateral/W"])


# ------------------------------------------------------------------ GRU / StatefulGRU

def _np_gru(link, h, x):
    lin = {n: (getattr(link, n).W.data, getattr(link, n).b.data) for n in ("W_r", "U_r", "W_z", "U_z", "W", "U")}

    def ap(name, v):
        W, b = lin[name]
        return v @ W.T + b

    r = _sigmoid(ap("W_r", x) + ap("U_r", h))
    z = _sigmoid(ap("W_z", x) + ap("U_z", h))
    h_bar = numpy.tanh(ap("W", x) + ap("U", r * h))
    return (1 - z) * h + z * h_bar


def test_gru_forward_matches_numpy_and_gradients():
    numpy.random.seed(10)
    link = GRU(2, 3)
    assert link.W_r.W.data.shape == (2, 3) and link.U_r.W.data.shape == (2, 2)
    assert GRU(4).W.W.data.shape == (4, 4)  # n_inputs defaults to n_units
    r = _rng(11)
    h, x = r.randn(5, 2).astype(numpy.float32), r.randn(5, 3).astype(numpy.float32)
    numpy.testing.assert_allclose(link(h, x).data, _np_gru(link, h, x), rtol=1e-5, atol=1e-6)
    link = _to_f64(link)
    _check_link_grads(link, link, (h.astype(numpy.float64), x.astype(numpy.float64)), (5, 2))


def test_stateful_gru_steps_state_and_serialize(tmp_path):
    numpy.random.seed(12)
    link = StatefulGRU(3, 2)
    assert link.h is None and link.W.W.data.shape == (2, 3)
    r = _rng(13)
    xs = [r.randn(4, 3).astype(numpy.float32) for _ in range(2)]
    h = _np_gru(link, numpy.zeros((4, 2), numpy.float32), xs[0])
    numpy.testing.assert_allclose(link(xs[0]).data, h, rtol=1e-5, atol=1e-6)
    h = _np_gru(link, h, xs[1])
    numpy.testing.assert_allclose(link(xs[1]).data, h, rtol=1e-5, atol=1e-6)
    link.reset_state()
    assert link.h is None
    h0 = Variable(r.randn(4, 2).astype(numpy.float32))
    link.set_state(h0)
    numpy.testing.assert_allclose(link(xs[0]).data, _np_gru(link, h0.data, xs[0]), rtol=1e-5, atol=1e-6)
    link = _to_f64(link)

    def two_steps(x0, x1):
        link.reset_state()
        link(x0)
        return link(x1)

    _check_link_grads(link, two_steps, tuple(x.astype(numpy.float64) for x in xs), (4, 2))
    keys = [f"{n}/{p}" for n in ("W_r", "U_r", "W_z", "U_z", "W", "U") for p in ("W", "b")]
    _roundtrip(tmp_path, link, lambda: StatefulGRU(3, 2), keys)


# ------------------------------------------------------------------ bilinear / Bilinear

def test_bilinear_function_forward_and_gradients():
    r = _rng(14)
    e1, e2 = r.randn(4, 2, 1), r.randn(4, 3)  # e1's extra axis is flattened
    W, V1, V2, b = r.randn(2, 3, 5), r.randn(2, 5), r.randn(3, 5), r.randn(5)
    quad = numpy.einsum("ij,ik,jkl->il", e1.reshape(4, 2), e2, W)
    numpy.testing.assert_allclose(bilinear(e1, e2, W).data, quad)
    full = quad + e1.reshape(4, 2) @ V1 + e2 @ V2 + b
    numpy.testing.assert_allclose(bilinear(e1, e2, W, V1, V2, b).data, full)
    gy = r.randn(4, 5)
    gradient_check.check_backward(bilinear, (e1, e2, W), gy, eps=1e-6, atol=1e-6, rtol=1e-5)
    gradient_check.check_backward(bilinear, (e1, e2, W, V1, V2, b), gy, eps=1e-6, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="together"):
        bilinear(e1, e2, W, V1)


def test_bilinear_link_init_forward_serialize(tmp_path):
    numpy.random.seed(15)
    link = Bilinear(2, 3, 4)
    assert link.W.data.shape == (2, 3, 4) and link.V1.data.shape == (2, 4)
    assert link.V2.data.shape == (3, 4) and link.b.data.tolist() == [0, 0, 0, 0]
    r = _rng(16)
    e1, e2 = r.randn(5, 2).astype(numpy.float32), r.randn(5, 3).astype(numpy.float32)
    expected = numpy.einsum("ij,ik,jkl->il", e1, e2, link.W.data) + e1 @ link.V1.data + e2 @ link.V2.data
    numpy.testing.assert_allclose(link(e1, e2).data, expected, rtol=1e-5, atol=1e-5)
    _roundtrip(tmp_path, link, lambda: Bilinear(2, 3, 4), ["W", "V1", "V2", "b"])
    nb = Bilinear(2, 3, 4, nobias=True, initialW=numpy.ones((2, 3, 4)))
    assert not hasattr(nb, "V1") and nb.W.data.sum() == 24
    numpy.testing.assert_allclose(nb(e1, e2).data, numpy.outer(e1.sum(1) * e2.sum(1), numpy.ones(4)), rtol=1e-5)
    init = (numpy.ones((2, 4)), numpy.zeros((3, 4)), numpy.full(4, 2.0))
    lb = Bilinear(2, 3, 4, initial_bias=init)
    assert lb.V1.data.sum() == 8 and lb.b.data.tolist() == [2, 2, 2, 2]
    link = _to_f64(Bilinear(2, 3, 2))
    _check_link_grads(link, link, (e1.astype(numpy.float64), e2.astype(numpy.float64)), (5, 2))
    with pytest.raises(ValueError, match="initial_bias"):
        Bilinear(2, 3, 4, initial_bias=(1, 2))
