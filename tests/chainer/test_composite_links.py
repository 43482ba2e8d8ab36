"""Inception, InceptionBN and MLPConvolution2D: shapes, NumPy forward, gradients, npz layout, chainer peer."""
import subprocess
import textwrap

import numpy
import pytest

import plait.chainer.functions as F
from plait.chainer import Variable, gradient_check, serializers
from plait.chainer.links.connection.inception import Inception
from plait.chainer.links.connection.inceptionbn import InceptionBN
from plait.chainer.links.connection.mlp_convolution_2d import MLPConvolution2D

from _env import CHAINER_PEER as PEER, chainer_peer_available as _peer_available  # noqa: E402
EPS = 1e-5


def _rng(seed=0):
    return numpy.random.RandomState(seed)


# ------------------------------------------------------------------ NumPy references

def _np_windows(x, k, stride, pad, fill):
    """The (k_H * k_W) strided views of x padded with `fill`: a list of (n, c, h_O, w_O) arrays."""
    n, c, h, w = x.shape
    xp = numpy.full((n, c, h + 2 * pad, w + 2 * pad), fill, dtype=numpy.float64)
    xp[:, :, pad:pad + h, pad:pad + w] = x
    h_O = (h + 2 * pad - k) // stride + 1
    w_O = (w + 2 * pad - k) // stride + 1
    return [((i, j), xp[:, :, i:i + stride * h_O:stride, j:j + stride * w_O:stride])
            for i in range(k) for j in range(k)]


def _np_conv(x, W, b=None, stride=1, pad=0):
    """Cross-correlation as Chainer defines it: y[n, o] = sum_c W[o, c] * x[n, c] (windowed) + b[o]."""
    k = W.shape[2]
    assert W.shape[3] == k
    y = sum(numpy.einsum("nchw,oc->nohw", patch, W[:, :, i, j])
            for (i, j), patch in _np_windows(x, k, stride, pad, 0.0))
    return y if b is None else y + b[None, :, None, None]


def _np_max_pool(x, stride=1):
    return numpy.max([p for _, p in _np_windows(x, 3, stride, 1, -numpy.inf)], axis=0)


def _np_avg_pool(x, stride=1):
    # Padded zeros count in the mean: always divide by 9.
    return numpy.sum([p for _, p in _np_windows(x, 3, stride, 1, 0.0)], axis=0) / 9.0


def _np_bn(x, bn, test):
    if test:
        mean, var = bn.avg_mean, bn.avg_var
    else:
        mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    shape = (1, -1, 1, 1)
    xhat = (x - mean.reshape(shape)) / numpy.sqrt(var.reshape(shape) + EPS)
    return bn.gamma.data.reshape(shape) * xhat + bn.beta.data.reshape(shape)


def _relu(x):
    return numpy.maximum(x, 0)


def _W(link):
    return link.W.data.astype(numpy.float64)


def _b(link):
    return None if link.b is None else link.b.data.astype(numpy.float64)


def _np_inception(m, x):
    def c(link, h, pad=0):
        return _np_conv(h, _W(link), _b(link), pad=pad)
    y1 = c(m.conv1, x)
    y3 = c(m.conv3, _relu(c(m.proj3, x)), pad=1)
    y5 = c(m.conv5, _relu(c(m.proj5, x)), pad=2)
    yp = c(m.projp, _np_max_pool(x))
    return _relu(numpy.concatenate([y1, y3, y5, yp], axis=1))


def _np_inceptionbn(m, x, test):
    s = m.stride

    def cbr(conv, bn, h, stride=1, pad=0):
        return _relu(_np_bn(_np_conv(h, _W(conv), None, stride, pad), bn, test))
    ys = []
    if m.out1 > 0:
        ys.append(cbr(m.conv1, m.conv1n, x))
    ys.append(cbr(m.conv3, m.conv3n, cbr(m.proj3, m.proj3n, x), s, 1))
    h = cbr(m.conv33a, m.conv33an, cbr(m.proj33, m.proj33n, x), 1, 1)
    ys.append(cbr(m.conv33b, m.conv33bn, h, s, 1))
    p = _np_max_pool(x, s) if m.pooltype == "max" else _np_avg_pool(x, s)
    if m.proj_pool is not None:
        p = cbr(m.poolp, m.poolpn, p)
    ys.append(p)
    return numpy.concatenate(ys, axis=1)


def _np_mlpconv(m, x, stride, pad, act=_relu):
    convs = list(m)
    h = _np_conv(x, _W(convs[0]), _b(convs[0]), stride, pad)
    for conv in convs[1:]:
        h = _np_conv(act(h), _W(conv), _b(conv))
    return h


def _randomize(link, seed=3):
    """Non-trivial values everywhere: biases, gamma, beta and BN population statistics."""
    rng = _rng(seed)
    for path, p in sorted(link.namedparams()):
        if path.endswith("/gamma"):
            p.data[...] = rng.uniform(0.5, 1.5, p.data.shape)
        elif path.endswith("/b") or path.endswith("/beta"):
            p.data[...] = rng.uniform(-0.3, 0.3, p.data.shape)
    for _, sub in sorted(link.namedlinks(), key=lambda t: t[0]):
        if hasattr(sub, "avg_mean"):
            sub.avg_mean[...] = rng.uniform(-0.2, 0.2, sub.avg_mean.shape)
            sub.avg_var[...] = rng.uniform(0.5, 1.5, sub.avg_var.shape)
    return link


def _to_f64(link):
    for p in link.params():
        p.data = p.data.astype(numpy.float64)
        p.cleargrad()
    for _, sub in link.namedlinks():
        if hasattr(sub, "avg_mean"):
            sub.avg_mean = sub.avg_mean.astype(numpy.float64)
            sub.avg_var = sub.avg_var.astype(numpy.float64)
    return link


def _keys(path):
    with numpy.load(str(path)) as f:
        return sorted(f.files)


# ------------------------------------------------------------------ Inception

@pytest.mark.parametrize("hw", [(5, 5), (4, 7), (1, 1)])
def test_inception_shape_keeps_spatial_size(hw):
    m = Inception(3, 2, 3, 4, 2, 5, 6)
    y = m(_rng().randn(2, 3, *hw).astype(numpy.float32))
    assert y.data.shape == (2, 2 + 4 + 5 + 6) + hw
    assert y.data.dtype == numpy.float32
    assert (y.data >= 0).all()


def test_inception_children_and_param_shapes():
    m = Inception(3, 2, 3, 4, 5, 6, 7)
    shapes = {path: p.data.shape for path, p in m.namedparams()}
    assert shapes == {
        "/conv1/W": (2, 3, 1, 1), "/conv1/b": (2,),
        "/proj3/W": (3, 3, 1, 1), "/proj3/b": (3,),
        "/conv3/W": (4, 3, 3, 3), "/conv3/b": (4,),
        "/proj5/W": (5, 3, 1, 1), "/proj5/b": (5,),
        "/conv5/W": (6, 5, 5, 5), "/conv5/b": (6,),
        "/projp/W": (7, 3, 1, 1), "/projp/b": (7,),
    }


def test_inception_forward_matches_numpy():
    m = _randomize(Inception(3, 2, 3, 4, 2, 3, 2))
    x = _rng(1).randn(2, 3, 5, 6).astype(numpy.float32)
    y = m(Variable(x))
    numpy.testing.assert_allclose(y.data, _np_inception(m, x.astype(numpy.float64)), rtol=1e-4, atol=1e-5)


def test_inception_forward_matches_functions_composition():
    m = _randomize(Inception(2, 1, 2, 2, 1, 2, 1))
    x = _rng(2).randn(1, 2, 4, 4).astype(numpy.float32)
    c = m.conv1
    by_hand = F.relu(F.concat((
        F.convolution_2d(x, c.W, c.b),
        F.convolution_2d(F.relu(F.convolution_2d(x, m.proj3.W, m.proj3.b)), m.conv3.W, m.conv3.b, pad=1),
        F.convolution_2d(F.relu(F.convolution_2d(x, m.proj5.W, m.proj5.b)), m.conv5.W, m.conv5.b, pad=2),
        F.convolution_2d(F.max_pooling_2d(x, 3, 1, 1), m.projp.W, m.projp.b),
    ), axis=1))
    numpy.testing.assert_array_equal(m(x).data, by_hand.data)


def test_inception_gradients_float64():
    m = _to_f64(_randomize(Inception(2, 1, 2, 1, 1, 2, 1)))
    x = _rng(4).randn(2, 2, 3, 4)
    gy = _rng(5).uniform(-1, 1, (2, 1 + 1 + 2 + 1, 3, 4))
    gradient_check.check_backward(m, x, gy, params=(m.conv3.W, m.conv5.b, m.projp.W),
                                  eps=1e-6, atol=1e-6, rtol=1e-5)


def test_inception_param_grad_numerically():
    m = _to_f64(_randomize(Inception(2, 1, 1, 2, 1, 1, 1)))
    x = _rng(6).randn(1, 2, 3, 3)
    gy = _rng(7).uniform(-1, 1, (1, 5, 3, 3))
    m.cleargrads()
    y = m(Variable(x))
    y.grad = gy
    y.backward()
    W = m.proj3.W.data
    numeric = numpy.zeros_like(W)
    for idx in numpy.ndindex(W.shape):
        old = W[idx]
        W[idx] = old + 1e-6
        up = (m(x).data * gy).sum()
        W[idx] = old - 1e-6
        down = (m(x).data * gy).sum()
        W[idx] = old
        numeric[idx] = (up - down) / 2e-6
    assert numpy.abs(numeric).max() > 0
    numpy.testing.assert_allclose(m.proj3.W.grad, numeric, rtol=1e-5, atol=1e-7)


def test_inception_npz_keys_and_round_trip(tmp_path):
    m = _randomize(Inception(3, 2, 2, 2, 2, 2, 2))
    path = tmp_path / "inception.npz"
    serializers.save_npz(str(path), m)
    assert _keys(path) == sorted(f"{c}/{p}" for c in ("conv1", "proj3", "conv3", "proj5", "conv5", "projp")
                                 for p in ("W", "b"))
    other = Inception(3, 2, 2, 2, 2, 2, 2)
    serializers.load_npz(str(path), other)
    x = _rng(8).randn(1, 3, 4, 4).astype(numpy.float32)
    numpy.testing.assert_array_equal(other(x).data, m(x).data)


@pytest.mark.parametrize("args", [(3, 0, 2, 2, 2, 2, 2), (3, 2, 2, 2, 2, 2, -1), (3, 2.5, 2, 2, 2, 2, 2),
                                  (0, 2, 2, 2, 2, 2, 2)])
def test_inception_rejects_bad_sizes(args):
    with pytest.raises(ValueError, match="Inception"):
        Inception(*args)


# ------------------------------------------------------------------ InceptionBN

@pytest.mark.parametrize("out1, pooltype, proj_pool, stride, hw, expect_c, expect_hw", [
    (2, "max", 3, 1, (5, 6), 2 + 4 + 5 + 3, (5, 6)),
    (2, "avg", 3, 1, (4, 4), 2 + 4 + 5 + 3, (4, 4)),
    (0, "max", None, 2, (6, 6), 4 + 5 + 3, (3, 3)),   # even size: pooled and strided convs agree
    (0, "avg", None, 2, (5, 7), 4 + 5 + 3, (3, 4)),
    (0, "max", 2, 2, (4, 5), 4 + 5 + 2, (2, 3)),
    (0, "avg", 2, 1, (3, 3), 4 + 5 + 2, (3, 3)),
])
def test_inceptionbn_shapes(out1, pooltype, proj_pool, stride, hw, expect_c, expect_hw):
    m = InceptionBN(3, out1, 2, 4, 2, 5, pooltype, proj_pool, stride)
    y = m(_rng().randn(2, 3, *hw).astype(numpy.float32))
    assert y.data.shape == (2, expect_c) + expect_hw
    assert y.data.dtype == numpy.float32


def test_inceptionbn_children_follow_the_configuration():
    full = {name for name, _ in InceptionBN(3, 2, 2, 2, 2, 2, "max", 2).namedlinks(skipself=True)}
    assert full == {"/" + n for n in ("conv1", "conv1n", "proj3", "proj3n", "conv3", "conv3n", "proj33", "proj33n",
                                      "conv33a", "conv33an", "conv33b", "conv33bn", "poolp", "poolpn")}
    bare = {name for name, _ in InceptionBN(3, 0, 2, 2, 2, 2, "avg", None, 2).namedlinks(skipself=True)}
    assert bare == full - {"/conv1", "/conv1n", "/poolp", "/poolpn"}
    m = InceptionBN(3, 2, 2, 2, 2, 2, "max", 2)
    assert all(getattr(m, c).b is None for c in ("conv1", "proj3", "conv3", "proj33", "conv33a", "conv33b", "poolp"))


# Error types as in Chainer 1.7.2: it asserts the 1x1-path conditions (plait's error is also
# a ValueError) and raises NotImplementedError for an unknown pooltype.
@pytest.mark.parametrize("kwargs, match, error", [
    (dict(out1=2, pooltype="max", proj_pool=2, stride=2), "stride", AssertionError),
    (dict(out1=2, pooltype="max", proj_pool=None), "proj_pool", AssertionError),
    (dict(out1=0, pooltype="min", proj_pool=2), "pooltype", NotImplementedError),
    (dict(out1=-1, pooltype="max", proj_pool=2), "out1", ValueError),
    (dict(out1=0, pooltype="avg", proj_pool=0), "proj_pool", ValueError),
    (dict(out1=0, pooltype="avg", proj_pool=2, stride=0), "stride", ValueError),
])
def test_inceptionbn_rejects_bad_configurations(kwargs, match, error):
    with pytest.raises(error, match=match):
        InceptionBN(3, proj3=2, out3=2, proj33=2, out33=2, **kwargs)


@pytest.mark.parametrize("out1, pooltype, proj_pool, stride", [(2, "max", 2, 1), (0, "avg", None, 2),
                                                                (0, "max", 3, 2)])
def test_inceptionbn_train_forward_matches_numpy_and_updates_statistics(out1, pooltype, proj_pool, stride):
    m = _randomize(InceptionBN(3, out1, 2, 3, 2, 2, pooltype, proj_pool, stride))
    x = _rng(9).randn(3, 3, 6, 5).astype(numpy.float32)
    expected = _np_inceptionbn(m, x.astype(numpy.float64), test=False)
    before = m.conv3n.avg_mean.copy()
    y = m(x)
    numpy.testing.assert_allclose(y.data, expected, rtol=1e-4, atol=1e-4)
    assert not numpy.allclose(m.conv3n.avg_mean, before)


def test_inceptionbn_test_mode_uses_population_statistics():
    m = _randomize(InceptionBN(3, 2, 2, 3, 2, 2, "max", 2))
    x = _rng(10).randn(2, 3, 4, 4).astype(numpy.float32)
    expected = _np_inceptionbn(m, x.astype(numpy.float64), test=True)
    stats = [(bn.avg_mean.copy(), bn.avg_var.copy()) for bn in (m.conv1n, m.conv33bn, m.poolpn)]
    numpy.testing.assert_allclose(m(x, test=True).data, expected, rtol=1e-4, atol=1e-4)
    m.train = False  # the attribute of the 1.7.2 docs selects the same mode
    numpy.testing.assert_allclose(m(x).data, expected, rtol=1e-4, atol=1e-4)
    for bn, (mean, var) in zip((m.conv1n, m.conv33bn, m.poolpn), stats):
        numpy.testing.assert_array_equal(bn.avg_mean, mean)
        numpy.testing.assert_array_equal(bn.avg_var, var)
    train_y = m(x, test=False).data
    assert not numpy.allclose(train_y, expected, atol=1e-3)


def test_inceptionbn_gradients_float64():
    m = _to_f64(_randomize(InceptionBN(2, 1, 1, 2, 1, 1, "max", 1)))
    x = _rng(11).randn(3, 2, 3, 3)
    gy = _rng(12).uniform(-1, 1, (3, 1 + 2 + 1 + 1, 3, 3))
    gradient_check.check_backward(m, x, gy, params=(m.conv3.W, m.conv33an.gamma, m.poolpn.beta),
                                  eps=1e-6, atol=1e-5, rtol=1e-4)


def test_inceptionbn_strided_avg_gradients_float64():
    m = _to_f64(_randomize(InceptionBN(2, 0, 1, 1, 1, 1, "avg", None, 2)))
    x = _rng(13).randn(2, 2, 4, 4)
    gy = _rng(14).uniform(-1, 1, (2, 1 + 1 + 2, 2, 2))
    gradient_check.check_backward(lambda v: m(v, test=True), x, gy, params=(m.conv33b.W, m.proj3.W),
                                  eps=1e-6, atol=1e-6, rtol=1e-5)


def test_inceptionbn_npz_keys_and_round_trip(tmp_path):
    m = _randomize(InceptionBN(3, 2, 2, 2, 2, 2, "max", 2))
    m(_rng(15).randn(2, 3, 4, 4).astype(numpy.float32))  # moves avg_mean and avg_var away from 0
    path = tmp_path / "inceptionbn.npz"
    serializers.save_npz(str(path), m)
    convs = ("conv1", "proj3", "conv3", "proj33", "conv33a", "conv33b", "poolp")
    expected = [f"{c}/W" for c in convs]
    expected += [f"{c}n/{k}" for c in convs for k in ("gamma", "beta", "avg_mean", "avg_var", "N")]
    assert _keys(path) == sorted(expected)
    other = InceptionBN(3, 2, 2, 2, 2, 2, "max", 2)
    serializers.load_npz(str(path), other)
    numpy.testing.assert_array_equal(other.conv33an.avg_var, m.conv33an.avg_var)
    x = _rng(16).randn(1, 3, 4, 4).astype(numpy.float32)
    numpy.testing.assert_array_equal(other(x, test=True).data, m(x, test=True).data)


# ------------------------------------------------------------------ MLPConvolution2D

@pytest.mark.parametrize("out_channels, ksize, stride, pad, hw, expect_hw", [
    ((4,), 3, 1, 0, (5, 5), (3, 3)),
    ((4, 5, 6), 3, 2, 1, (6, 7), (3, 4)),
    ([2, 3], (3, 1), 1, (1, 0), (4, 4), (4, 4)),
])
def test_mlpconv_shapes(out_channels, ksize, stride, pad, hw, expect_hw):
    m = MLPConvolution2D(3, out_channels, ksize, stride, pad)
    y = m(_rng().randn(2, 3, *hw).astype(numpy.float32))
    assert y.data.shape == (2, tuple(out_channels)[-1]) + expect_hw
    assert len(m) == len(out_channels)
    assert [c.W.data.shape[2:] for c in list(m)[1:]] == [(1, 1)] * (len(out_channels) - 1)


def test_mlpconv_forward_matches_numpy_and_leaves_output_unactivated():
    m = _randomize(MLPConvolution2D(3, (4, 3, 5), 3, stride=2, pad=1))
    x = _rng(17).randn(2, 3, 5, 6).astype(numpy.float32)
    y = m(x).data
    numpy.testing.assert_allclose(y, _np_mlpconv(m, x.astype(numpy.float64), 2, 1), rtol=1e-4, atol=1e-5)
    assert (y < 0).any()


def test_mlpconv_custom_activation_and_wscale():
    m = _randomize(MLPConvolution2D(2, (3, 2), 1, activation=F.tanh))
    assert m.activation is F.tanh
    x = _rng(18).randn(1, 2, 3, 3).astype(numpy.float32)
    numpy.testing.assert_allclose(m(x).data, _np_mlpconv(m, x.astype(numpy.float64), 1, 0, numpy.tanh),
                                  rtol=1e-4, atol=1e-5)
    numpy.random.seed(0)
    small = MLPConvolution2D(8, (64, 64), 3, wscale=0.01)
    numpy.random.seed(0)
    big = MLPConvolution2D(8, (64, 64), 3, wscale=1)
    numpy.testing.assert_allclose(small[1].W.data, big[1].W.data * 0.01, rtol=1e-5)


def test_mlpconv_gradients_float64():
    m = _to_f64(_randomize(MLPConvolution2D(2, (3, 2, 2), 2, pad=1)))
    x = _rng(19).randn(2, 2, 3, 3)
    gy = _rng(20).uniform(-1, 1, (2, 2, 4, 4))
    gradient_check.check_backward(m, x, gy, params=tuple(m.params()), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_mlpconv_npz_keys_and_round_trip(tmp_path):
    m = _randomize(MLPConvolution2D(3, (4, 2), 3))
    path = tmp_path / "mlpconv.npz"
    serializers.save_npz(str(path), m)
    assert _keys(path) == ["0/W", "0/b", "1/W", "1/b"]
    other = MLPConvolution2D(3, (4, 2), 3)
    serializers.load_npz(str(path), other)
    x = _rng(21).randn(1, 3, 4, 4).astype(numpy.float32)
    numpy.testing.assert_array_equal(other(x).data, m(x).data)


@pytest.mark.parametrize("out_channels, exc", [((), ValueError), ((3, 0), ValueError), (4, TypeError),
                                               ("34", TypeError), ((2, 1.5), ValueError)])
def test_mlpconv_rejects_bad_out_channels(out_channels, exc):
    with pytest.raises(exc, match="out_channels"):
        MLPConvolution2D(3, out_channels, 3)


# ------------------------------------------------------------------ chainer 7.8.1 peer


_PEER = """
import sys, numpy as np, chainer, chainer.links as L, chainer.functions as F
from chainer import serializers
d = sys.argv[1]
x = np.load(d + '/x.npz')
def fix_eps(link):
    # plait follows Chainer 1.7.2's BatchNormalization eps (1e-5); 7.8.1 defaults to 2e-5.
    for l in link.links():
        if isinstance(l, L.BatchNormalization):
            l.eps = 1e-5
    return link
def make():
    return {
        'inc': L.Inception(3, 2, 2, 3, 2, 2, 2),
        'bn': fix_eps(L.InceptionBN(3, 2, 2, 3, 2, 2, 'max', 2)),
        'bns': fix_eps(L.InceptionBN(3, 0, 2, 2, 1, 2, 'avg', None, 2)),
        'bnm': fix_eps(L.InceptionBN(3, 0, 2, 2, 1, 2, 'max', 2, 2)),
        'mlp': L.MLPConvolution2D(3, (4, 3, 2), 3, 2, 1, activation=F.tanh),
    }
out = {}
# 1) read the links plait saved and run them (training mode first: BN statistics move).
links = make()
for name, link in links.items():
    serializers.load_npz(d + '/plait_%s.npz' % name, link)
with chainer.using_config('train', True):
    for name, link in links.items():
        out['train_' + name] = link(x['x']).array
for name in ('bn', 'bns', 'bnm'):
    out['avg_var_' + name] = links[name].conv33bn.avg_var
with chainer.using_config('train', False):
    for name in ('bn', 'bns', 'bnm'):
        out['test_' + name] = links[name](x['x']).array
# 2) chainer's own randomly initialised links, saved for plait to read.
np.random.seed(5)
own = make()
with chainer.using_config('train', False):
    for name, link in own.items():
        serializers.save_npz(d + '/chainer_%s.npz' % name, link)
        out['own_' + name] = link(x['x']).array
np.savez(d + '/peer_out.npz', **out)
"""


def _plait_links():
    return {
        "inc": Inception(3, 2, 2, 3, 2, 2, 2),
        "bn": InceptionBN(3, 2, 2, 3, 2, 2, "max", 2),
        "bns": InceptionBN(3, 0, 2, 2, 1, 2, "avg", None, 2),
        "bnm": InceptionBN(3, 0, 2, 2, 1, 2, "max", 2, 2),
        "mlp": MLPConvolution2D(3, (4, 3, 2), 3, 2, 1, activation=F.tanh),
    }


@pytest.mark.skipif(not _peer_available(), reason=f"no Python with chainer at {PEER}")
def test_composite_links_match_chainer(tmp_path):
    # An even size with stride 2 is where max pooling's cover_all would change the shape.
    x = _rng(22).randn(4, 3, 6, 6).astype(numpy.float32)
    numpy.savez(str(tmp_path / "x.npz"), x=x)
    links = {name: _randomize(link, seed=30 + i) for i, (name, link) in enumerate(_plait_links().items())}
    for name, link in links.items():
        serializers.save_npz(str(tmp_path / f"plait_{name}.npz"), link)
    proc = subprocess.run([PEER, "-c", textwrap.dedent(_PEER), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"the chainer peer failed:\n{proc.stdout}\n{proc.stderr}")
    with numpy.load(str(tmp_path / "peer_out.npz")) as f:
        peer = dict(f)

    for name, link in links.items():
        y = link(x) if name in ("inc", "mlp") else link(x, test=False)
        numpy.testing.assert_allclose(y.data, peer["train_" + name], rtol=1e-4, atol=1e-5, err_msg=name)
    for name in ("bn", "bns", "bnm"):
        numpy.testing.assert_allclose(links[name].conv33bn.avg_var, peer["avg_var_" + name], rtol=1e-5,
                                      err_msg=name)
        numpy.testing.assert_allclose(links[name](x, test=True).data, peer["test_" + name],
                                      rtol=1e-4, atol=1e-5, err_msg=name)

    fresh = _plait_links()
    for name, link in fresh.items():
        serializers.load_npz(str(tmp_path / f"chainer_{name}.npz"), link)
        y = link(x, test=True) if isinstance(link, InceptionBN) else link(x)
        numpy.testing.assert_allclose(y.data, peer["own_" + name], rtol=1e-4, atol=1e-5, err_msg=name)
