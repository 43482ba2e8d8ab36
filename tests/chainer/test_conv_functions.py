"""Chainer-face convolution, deconvolution and pooling: loops, numerical gradients, real Chainer."""
import itertools
import subprocess
import textwrap

import numpy as np
import pytest

from plait.chainer import Variable, gradient_check
from plait.chainer.functions.connection.convolution_2d import Convolution2DFunction, convolution_2d
from plait.chainer.functions.connection.deconvolution_2d import deconvolution_2d
from plait.chainer.functions.pooling.average_pooling_2d import AveragePooling2D, average_pooling_2d
from plait.chainer.functions.pooling.max_pooling_2d import MaxPooling2D, max_pooling_2d
from plait.chainer.functions.pooling.spatial_pyramid_pooling_2d import spatial_pyramid_pooling_2d
from plait.chainer.functions.pooling.unpooling_2d import unpooling_2d
from plait.chainer.links.connection.convolution_2d import Convolution2D
from plait.chainer.links.connection.deconvolution_2d import Deconvolution2D
from plait.chainer.utils import type_check

from _env import CHAINER_PEER as PEER, chainer_peer_available as _peer_available  # noqa: E402


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def loop_conv2d(x, W, b, stride, pad, cover_all=False):
    (sy, sx), (ph, pw) = _pair(stride), _pair(pad)
    n, c, h, w = x.shape
    o, _, kh, kw = W.shape
    ey, ex = (sy - 1, sx - 1) if cover_all else (0, 0)
    oh, ow = (h + 2 * ph - kh + ey) // sy + 1, (w + 2 * pw - kw + ex) // sx + 1
    xp = np.zeros((n, c, h + 2 * ph + ey, w + 2 * pw + ex))
    xp[:, :, ph : ph + h, pw : pw + w] = x
    y = np.zeros((n, o, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        patch = xp[:, :, i * sy : i * sy + kh, j * sx : j * sx + kw]
        y[:, :, i, j] = np.tensordot(patch, W, axes=([1, 2, 3], [1, 2, 3]))
    if b is not None:
        y += b[None, :, None, None]
    return y


def loop_deconv2d(x, W, b, stride, pad, outsize=None):
    (sy, sx), (ph, pw) = _pair(stride), _pair(pad)
    n, c, h, w = x.shape
    _, o, kh, kw = W.shape
    oh, ow = outsize or (sy * (h - 1) + kh - 2 * ph, sx * (w - 1) + kw - 2 * pw)
    full = np.zeros((n, o, max(oh + 2 * ph, sy * (h - 1) + kh), max(ow + 2 * pw, sx * (w - 1) + kw)))
    for i, j in itertools.product(range(h), range(w)):
        full[:, :, i * sy : i * sy + kh, j * sx : j * sx + kw] += np.tensordot(x[:, :, i, j], W, axes=(1, 0))
    y = full[:, :, ph : ph + oh, pw : pw + ow]
    if b is not None:
        y = y + b[None, :, None, None]
    return y


def loop_pool2d(x, k, s, p, cover_all, kind):
    (kh, kw), (ph, pw) = _pair(k), _pair(p)
    sy, sx = _pair(k if s is None else s)
    n, c, h, w = x.shape
    ey, ex = (sy - 1, sx - 1) if cover_all else (0, 0)
    oh, ow = (h + 2 * ph - kh + ey) // sy + 1, (w + 2 * pw - kw + ex) // sx + 1
    fill = -np.inf if kind == "max" else 0.0
    xp = np.full((n, c, h + 2 * ph + ey, w + 2 * pw + ex), fill)
    xp[:, :, ph : ph + h, pw : pw + w] = x
    y = np.zeros((n, c, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        patch = xp[:, :, i * sy : i * sy + kh, j * sx : j * sx + kw]
        y[:, :, i, j] = patch.max(axis=(2, 3)) if kind == "max" else patch.sum(axis=(2, 3)) / (kh * kw)
    return y


def _distinct(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.permutation(int(np.prod(shape))).reshape(shape).astype("float64") / 10.0


# ------------------------------------------------------------------ forward against loops


@pytest.mark.parametrize("stride,pad,cover_all", [(1, 0, False), (2, 1, False), ((2, 1), (0, 2), False), (2, 0, True)])
def test_convolution_2d_forward(stride, pad, cover_all):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 6, 7)).astype("f")
    W = rng.normal(size=(4, 3, 3, 2)).astype("f")
    b = rng.normal(size=4).astype("f")
    y = convolution_2d(x, W, b, stride=stride, pad=pad, cover_all=cover_all)
    assert isinstance(y, Variable) and y.data.dtype == np.float32
    np.testing.assert_allclose(y.data, loop_conv2d(x, W, b, stride, pad, cover_all), rtol=1e-4, atol=1e-4)
    y_nob = convolution_2d(x, W, None, stride, pad, cover_all=cover_all)
    np.testing.assert_allclose(y_nob.data, loop_conv2d(x, W, None, stride, pad, cover_all), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride,pad,outsize", [(1, 0, None), (2, 1, None), ((2, 3), (1, 0), None), (2, 1, (6, 8))])
def test_deconvolution_2d_forward(stride, pad, outsize):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 3, 4))
    W = rng.normal(size=(3, 2, 3, 3))
    b = rng.normal(size=2)
    y = deconvolution_2d(x, W, b, stride=stride, pad=pad, outsize=outsize)
    np.testing.assert_allclose(y.data, loop_deconv2d(x, W, b, stride, pad, outsize), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("k,s,p,cover_all", [(2, None, 0, True), (3, 2, 1, True), ((2, 3), (1, 2), (1, 0), False), (3, 2, 0, True)])
def test_max_pooling_2d_forward(k, s, p, cover_all):
    x = _distinct((2, 3, 7, 8), 2)
    y = max_pooling_2d(x, k, s, p, cover_all)
    np.testing.assert_array_equal(y.data, loop_pool2d(x, k, s, p, cover_all, "max"))


@pytest.mark.parametrize("k,s,p", [(2, None, 0), (3, 2, 1), ((2, 3), (1, 2), (1, 0))])
def test_average_pooling_2d_forward(k, s, p):
    x = np.random.default_rng(3).normal(size=(2, 3, 7, 8))
    y = average_pooling_2d(x, k, s, p)
    np.testing.assert_allclose(y.data, loop_pool2d(x, k, s, p, False, "avg"), rtol=1e-12, atol=1e-12)


def test_unpooling_2d_forward_tiles_windows():
    x = np.arange(6.0).reshape(1, 1, 2, 3)
    y = unpooling_2d(x, 2, cover_all=False)
    np.testing.assert_array_equal(y.data[0, 0], np.kron(x[0, 0], np.ones((2, 2))))
    # cover_all (the default) gives the smallest size that pools back to (2, 3): 2*1+1 by 2*2+1.
    assert unpooling_2d(x, 2).data.shape == (1, 1, 3, 5)
    assert unpooling_2d(x, 2, outsize=(4, 6), cover_all=False).data.shape == (1, 1, 4, 6)
    with pytest.raises(type_check.InvalidType):
        unpooling_2d(x, 2, outsize=(9, 6), cover_all=False)


def test_spatial_pyramid_pooling_2d_forward():
    x = _distinct((2, 3, 8, 8), 4)
    y = spatial_pyramid_pooling_2d(x, 3, MaxPooling2D)
    assert y.data.shape == (2, 3 * (1 + 4 + 16), 1, 1)
    expected = np.concatenate(
        [loop_pool2d(x, k, None, 0, True, "max").reshape(2, -1) for k in (8, 4, 2)], axis=1
    )
    np.testing.assert_array_equal(y.data[:, :, 0, 0], expected)
    with pytest.raises(NotImplementedError, match="MaxPooling2D"):
        spatial_pyramid_pooling_2d(x, 2, AveragePooling2D)


# ------------------------------------------------------------------ numerical gradients


def _gc(func, xs, seed=5):
    ys = func(*[Variable(x) for x in xs])
    gy = np.random.default_rng(seed).normal(size=ys.data.shape)
    gradient_check.check_backward(func, xs, gy, eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("stride,pad,cover_all", [(1, 0, False), (2, 1, False), ((2, 1), (1, 0), True)])
def test_convolution_2d_backward(stride, pad, cover_all):
    rng = np.random.default_rng(6)
    xs = (rng.normal(size=(2, 2, 5, 6)), rng.normal(size=(3, 2, 2, 3)), rng.normal(size=3))
    _gc(lambda x, W, b: convolution_2d(x, W, b, stride, pad, cover_all=cover_all), xs)
    _gc(lambda x, W: convolution_2d(x, W, None, stride, pad, cover_all=cover_all), xs[:2])


@pytest.mark.parametrize("stride,pad,outsize", [(1, 0, None), (2, 1, None), (2, 1, (6, 8))])
def test_deconvolution_2d_backward(stride, pad, outsize):
    rng = np.random.default_rng(7)
    xs = (rng.normal(size=(2, 2, 3, 4)), rng.normal(size=(2, 3, 3, 3)), rng.normal(size=3))
    _gc(lambda x, W, b: deconvolution_2d(x, W, b, stride, pad, outsize), xs)


@pytest.mark.parametrize("k,s,p,cover_all", [(2, None, 0, True), (3, 2, 1, True), ((2, 3), (1, 2), (1, 0), False)])
def test_max_pooling_2d_backward(k, s, p, cover_all):
    x = _distinct((1, 2, 5, 6), 8)
    _gc(lambda v: max_pooling_2d(v, k, s, p, cover_all), (x,))


@pytest.mark.parametrize("k,s,p", [(2, None, 0), (3, 2, 1)])
def test_average_pooling_2d_backward(k, s, p):
    x = np.random.default_rng(9).normal(size=(1, 2, 5, 6))
    _gc(lambda v: average_pooling_2d(v, k, s, p), (x,))


@pytest.mark.parametrize("k,s,p,cover_all", [(2, None, 0, True), (3, 2, 1, False), (2, 1, 0, True)])
def test_unpooling_2d_backward(k, s, p, cover_all):
    x = np.random.default_rng(10).normal(size=(1, 2, 3, 4))
    _gc(lambda v: unpooling_2d(v, k, s, p, None, cover_all), (x,))


def test_spatial_pyramid_pooling_2d_backward():
    x = _distinct((1, 2, 7, 6), 11)
    _gc(lambda v: spatial_pyramid_pooling_2d(v, 3, MaxPooling2D), (x,))


# ------------------------------------------------------------------ type checks and links


def test_convolution_2d_rejects_channel_mismatch():
    with pytest.raises(type_check.InvalidType):
        convolution_2d(np.zeros((1, 3, 5, 5), "f"), np.zeros((2, 4, 3, 3), "f"))
    with pytest.raises(type_check.InvalidType):
        Convolution2DFunction()(np.zeros((1, 3, 5, 5), "f"), np.zeros((2, 3, 3, 3), "d"))
    with pytest.raises(type_check.InvalidType):
        deconvolution_2d(np.zeros((1, 3, 5, 5), "f"), np.zeros((2, 3, 3, 3), "f"))


def test_convolution2d_link_shapes_init_and_grads():
    np.random.seed(0)
    link = Convolution2D(3, 8, (3, 2), stride=2, pad=1, wscale=2.0)
    assert link.W.data.shape == (8, 3, 3, 2) and link.b.data.shape == (8,)
    assert np.all(link.b.data == 0)
    big = Convolution2D(16, 64, 3)
    std = big.W.data.std()
    assert abs(std - np.sqrt(1.0 / (16 * 9))) < 0.1 * np.sqrt(1.0 / (16 * 9))
    x = np.random.rand(2, 3, 7, 6).astype("f")
    y = link(x)
    np.testing.assert_allclose(y.data, loop_conv2d(x, link.W.data, link.b.data, 2, 1), rtol=1e-4, atol=1e-4)
    link.zerograds()
    y.grad = np.ones_like(y.data)
    y.backward()
    assert link.W.grad.shape == link.W.data.shape
    np.testing.assert_allclose(link.b.grad, np.full(8, y.data[0, 0].size * 2), rtol=1e-6)

    lazy = Convolution2D(None, 4, 3, nobias=True)
    assert lazy.b is None and lazy.W is None
    assert lazy(x).data.shape == (2, 4, 5, 4) and lazy.W.data.shape == (4, 3, 3, 3)

    W0 = np.ones((2, 3, 1, 1), "f")
    fixed = Convolution2D(3, 2, 1, initialW=W0, initial_bias=np.array([1.0, -1.0]))
    np.testing.assert_allclose(fixed(x).data[:, 0], x.sum(axis=1) + 1, rtol=1e-5)
    with pytest.raises(ValueError, match="initial value for W"):
        Convolution2D(3, 2, 1, initialW=np.ones((2, 3, 2, 2)))
    with pytest.raises(ValueError, match="out_channels"):
        Convolution2D(3, 0, 1)


def test_deconvolution2d_link():
    np.random.seed(1)
    link = Deconvolution2D(4, 3, 3, stride=2, pad=1, outsize=(8, 6))
    assert link.W.data.shape == (4, 3, 3, 3)
    x = np.random.rand(2, 4, 4, 3).astype("f")
    y = link(x)
    assert y.data.shape == (2, 3, 8, 6)
    np.testing.assert_allclose(
        y.data, loop_deconv2d(x, link.W.data, link.b.data, 2, 1, (8, 6)), rtol=1e-4, atol=1e-4
    )
    y.grad = np.ones_like(y.data)
    y.backward()
    assert link.W.grad.shape == (4, 3, 3, 3)
    assert Deconvolution2D(4, 3, 2, nobias=True).b is None


# ------------------------------------------------------------------ real Chainer


_PEER = """
import sys, numpy as np, chainer, chainer.functions as F
d = sys.argv[1]
a = dict(np.load(d + '/in.npz'))
out = {}
def run(name, f, *xs):
    vs = [chainer.Variable(x) for x in xs]
    y = f(*vs)
    y.grad = a['gy_' + name]
    y.backward()
    out['y_' + name] = y.array
    for i, v in enumerate(vs):
        out['g%d_' % i + name] = v.grad
run('conv', lambda x, W, b: F.convolution_2d(x, W, b, stride=(2, 1), pad=(1, 2)), a['x'], a['W'], a['b'])
run('convca', lambda x, W: F.convolution_2d(x, W, None, 2, 0, cover_all=True), a['x'], a['W'])
run('deconv', lambda x, W, b: F.deconvolution_2d(x, W, b, stride=2, pad=1, outsize=(10, 12)), a['xd'], a['Wd'], a['bd'])
run('max', lambda x: F.max_pooling_2d(x, 3, 2, 1), a['xp'])
run('maxnc', lambda x: F.max_pooling_2d(x, (2, 3), (2, 2), 0, cover_all=False), a['xp'])
run('avg', lambda x: F.average_pooling_2d(x, 3, 2, 1), a['x'])
run('unpool', lambda x: F.unpooling_2d(x, 2, 2, 0), a['x'])
run('unpoolnc', lambda x: F.unpooling_2d(x, 3, 2, 1, cover_all=False), a['x'])
run('spp', lambda x: F.spatial_pyramid_pooling_2d(x, 3, pooling='max'), a['xp'])
np.savez(d + '/out.npz', **out)
"""


@pytest.mark.skipif(not _peer_available(), reason=f"no Python with chainer at {PEER}")
def test_against_real_chainer(tmp_path):
    rng = np.random.default_rng(12)
    a = {
        "x": rng.normal(size=(2, 3, 7, 9)),
        "W": rng.normal(size=(4, 3, 3, 2)),
        "b": rng.normal(size=4),
        "xd": rng.normal(size=(2, 3, 5, 6)),
        "Wd": rng.normal(size=(3, 2, 3, 4)),
        "bd": rng.normal(size=2),
        "xp": _distinct((2, 3, 9, 11), 13),
    }
    cases = {
        "conv": (lambda x, W, b: convolution_2d(x, W, b, stride=(2, 1), pad=(1, 2)), ("x", "W", "b")),
        "convca": (lambda x, W: convolution_2d(x, W, None, 2, 0, cover_all=True), ("x", "W")),
        "deconv": (lambda x, W, b: deconvolution_2d(x, W, b, stride=2, pad=1, outsize=(10, 12)), ("xd", "Wd", "bd")),
        "max": (lambda x: max_pooling_2d(x, 3, 2, 1), ("xp",)),
        "maxnc": (lambda x: max_pooling_2d(x, (2, 3), (2, 2), 0, cover_all=False), ("xp",)),
        "avg": (lambda x: average_pooling_2d(x, 3, 2, 1), ("x",)),
        "unpool": (lambda x: unpooling_2d(x, 2, 2, 0), ("x",)),
        "unpoolnc": (lambda x: unpooling_2d(x, 3, 2, 1, cover_all=False), ("x",)),
        "spp": (lambda x: spatial_pyramid_pooling_2d(x, 3, MaxPooling2D), ("xp",)),
    }
    ours = {}
    for name, (f, keys) in cases.items():
        vs = [Variable(a[k]) for k in keys]
        y = f(*vs)
        gy = rng.normal(size=y.data.shape)
        a["gy_" + name] = gy
        y.grad = gy
        y.backward()
        ours[name] = (y.data, [v.grad for v in vs])
    np.savez(tmp_path / "in.npz", **a)
    proc = subprocess.run([PEER, "-c", textwrap.dedent(_PEER), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"the chainer peer failed:\n{proc.stdout}\n{proc.stderr}"
    theirs = np.load(tmp_path / "out.npz")
    for name, (y, grads) in ours.items():
        np.testing.assert_allclose(y, theirs["y_" + name], rtol=1e-10, atol=1e-10, err_msg=name)
        for i, g in enumerate(grads):
            np.testing.assert_allclose(g, theirs["g%d_" % i + name], rtol=1e-10, atol=1e-10, err_msg=f"{name} grad {i}")
