"""ConvOps (N-d convolution, deconvolution, pooling) against plain loops and finite differences."""
import itertools

import numpy as np
import pytest

from plait.backends import NumpyOps
from plait.backends._conv import col2im_nd, conv_outsize, deconv_outsize, im2col_nd
from plait.backends._conv_ops import ConvOps


# The conv ops are Ops methods (Ops derives from ConvOps), so NumpyOps has them.
assert issubclass(NumpyOps, ConvOps)
ops = NumpyOps()


def _tup(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _outsize(size, k, s, p, d, cover_all):
    dk = k + (k - 1) * (d - 1)
    extra = s - 1 if cover_all else 0
    return (size + 2 * p - dk + extra) // s + 1


# ------------------------------------------------------------------ loop references


def naive_conv(X, W, b, s, p, d, groups, cover_all):
    n = X.ndim - 2
    s, p, d = _tup(s, n), _tup(p, n), _tup(d, n)
    nB, C = X.shape[:2]
    O, Cg = W.shape[:2]
    k = W.shape[2:]
    size = X.shape[2:]
    out = tuple(_outsize(size[i], k[i], s[i], p[i], d[i], cover_all) for i in range(n))
    Y = np.zeros((nB, O) + out)
    Og = O // groups
    for o in itertools.product(*map(range, out)):
        for kk in itertools.product(*map(range, k)):
            pos = tuple(o[i] * s[i] + kk[i] * d[i] - p[i] for i in range(n))
            if not all(0 <= pos[i] < size[i] for i in range(n)):
                continue
            for oc in range(O):
                g = oc // Og
                xs = X[(slice(None), slice(g * Cg, (g + 1) * Cg)) + pos]  # (nB, Cg)
                Y[(slice(None), oc) + o] += xs @ W[(oc, slice(None)) + kk]
    if b is not None:
        Y += b.reshape((1, O) + (1,) * n)
    return Y


def naive_deconv(X, W, b, s, p, d, groups, outsize):
    n = X.ndim - 2
    s, p, d = _tup(s, n), _tup(p, n), _tup(d, n)
    nB, C = X.shape[:2]
    Og = W.shape[1]
    O = Og * groups
    Cg = C // groups
    k = W.shape[2:]
    size = X.shape[2:]
    if outsize is None:
        outsize = tuple(s[i] * (size[i] - 1) + k[i] + (k[i] - 1) * (d[i] - 1) - 2 * p[i] for i in range(n))
    Y = np.zeros((nB, O) + tuple(outsize))
    for o in itertools.product(*map(range, size)):
        for kk in itertools.product(*map(range, k)):
            pos = tuple(o[i] * s[i] + kk[i] * d[i] - p[i] for i in range(n))
            if not all(0 <= pos[i] < outsize[i] for i in range(n)):
                continue
            for c in range(C):
                g = c // Cg
                Y[(slice(None), slice(g * Og, (g + 1) * Og)) + pos] += (
                    X[(slice(None), c) + o][:, None] * W[(c, slice(None)) + kk][None, :]
                )
    if b is not None:
        Y += b.reshape((1, O) + (1,) * n)
    return Y


def naive_pool(X, k, s, p, cover_all, kind):
    n = X.ndim - 2
    k, p = _tup(k, n), _tup(p, n)
    s = k if s is None else _tup(s, n)
    size = X.shape[2:]
    out = tuple(_outsize(size[i], k[i], s[i], p[i], 1, cover_all) for i in range(n))
    Y = np.zeros(X.shape[:2] + out)
    which = np.zeros(X.shape[:2] + out, dtype=int)
    for o in itertools.product(*map(range, out)):
        vals = []
        for kk in itertools.product(*map(range, k)):
            pos = tuple(o[i] * s[i] + kk[i] - p[i] for i in range(n))
            if all(0 <= pos[i] < size[i] for i in range(n)):
                vals.append(X[(slice(None), slice(None)) + pos])
            else:
                vals.append(np.full(X.shape[:2], -np.inf if kind == "max" else 0.0))
        vals = np.stack(vals, axis=-1)
        if kind == "max":
            Y[(slice(None), slice(None)) + o] = vals.max(-1)
            which[(slice(None), slice(None)) + o] = vals.argmax(-1)
        else:
            Y[(slice(None), slice(None)) + o] = vals.sum(-1) / np.prod(k)
    return Y, which


def naive_unpool(X, k, s, p, outsize):
    n = X.ndim - 2
    k, p = _tup(k, n), _tup(p, n)
    s = k if s is None else _tup(s, n)
    Y = np.zeros(X.shape[:2] + tuple(outsize))
    for o in itertools.product(*map(range, X.shape[2:])):
        for kk in itertools.product(*map(range, k)):
            pos = tuple(o[i] * s[i] + kk[i] - p[i] for i in range(n))
            if all(0 <= pos[i] < outsize[i] for i in range(n)):
                Y[(slice(None), slice(None)) + pos] += X[(slice(None), slice(None)) + o]
    return Y


def numeric_vjp(f, X, dY, eps=1e-6):
    X = np.array(X, dtype="float64", copy=True)
    g = np.zeros_like(X)
    fx, fg = X.reshape(-1), g.reshape(-1)
    for i in range(fx.size):
        v = fx[i]
        fx[i] = v + eps
        up = np.sum(f(X) * dY)
        fx[i] = v - eps
        down = np.sum(f(X) * dY)
        fx[i] = v
        fg[i] = (up - down) / (2 * eps)
    return g


# ------------------------------------------------------------------ cases

CONV_CASES = [
    # (X shape, W shape, stride, pad, dilation, groups, cover_all)
    ((2, 3, 7), (4, 3, 3), 1, 0, 1, 1, False),
    ((2, 4, 9), (6, 2, 2), 2, 1, 2, 2, True),
    ((1, 2, 5, 6), (3, 2, 3, 2), (2, 1), (1, 0), 1, 1, False),
    ((2, 4, 6, 7), (4, 2, 2, 3), (1, 2), 1, (2, 1), 2, True),
    ((1, 3, 5, 5), (2, 3, 3, 3), 3, 1, 1, 1, True),
    ((1, 2, 4, 5, 4), (2, 2, 2, 3, 2), (1, 2, 1), (0, 1, 1), 1, 1, False),
    ((2, 2, 4, 4, 5), (4, 1, 2, 2, 2), 2, 1, (1, 1, 2), 2, True),
]


@pytest.mark.parametrize("xs,ws,s,p,d,g,cover_all", CONV_CASES)
def test_conv_nd_matches_loops(xs, ws, s, p, d, g, cover_all):
    rng = np.random.default_rng(0)
    X, W, b = rng.normal(size=xs), rng.normal(size=ws), rng.normal(size=ws[0])
    Y = ops.conv_nd(X, W, b, stride=s, pad=p, dilation=d, groups=g, cover_all=cover_all)
    np.testing.assert_allclose(Y, naive_conv(X, W, b, s, p, d, g, cover_all), rtol=1e-10, atol=1e-10)
    Y32 = ops.conv_nd(X.astype("f"), W.astype("f"), None, stride=s, pad=p, dilation=d, groups=g, cover_all=cover_all)
    assert Y32.dtype == np.float32
    np.testing.assert_allclose(Y32, naive_conv(X, W, None, s, p, d, g, cover_all), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws,s,p,d,g,cover_all", CONV_CASES)
def test_backprop_conv_nd_numerical(xs, ws, s, p, d, g, cover_all):
    rng = np.random.default_rng(1)
    X, W, b = rng.normal(size=xs), rng.normal(size=ws), rng.normal(size=ws[0])
    kw = dict(stride=s, pad=p, dilation=d, groups=g, cover_all=cover_all)
    Y = ops.conv_nd(X, W, b, **kw)
    dY = rng.normal(size=Y.shape)
    dX, dW, db = ops.backprop_conv_nd(dY, X, W, **kw)
    assert dX.shape == X.shape and dW.shape == W.shape and db.shape == b.shape
    np.testing.assert_allclose(dX, numeric_vjp(lambda Z: ops.conv_nd(Z, W, b, **kw), X, dY), atol=1e-6)
    np.testing.assert_allclose(dW, numeric_vjp(lambda Z: ops.conv_nd(X, Z, b, **kw), W, dY), atol=1e-6)
    np.testing.assert_allclose(db, numeric_vjp(lambda Z: ops.conv_nd(X, W, Z, **kw), b, dY), atol=1e-6)


DECONV_CASES = [
    # (X shape, W shape (C, O/g, *k), stride, pad, dilation, groups, outsize)
    ((2, 3, 4), (3, 2, 3), 1, 0, 1, 1, None),
    ((2, 4, 3), (4, 1, 3), 2, 1, 1, 2, (6,)),
    ((1, 2, 3, 4), (2, 3, 3, 2), (2, 1), (1, 0), 1, 1, None),
    ((1, 2, 3, 3), (2, 2, 2, 2), 2, 0, (1, 2), 2, (7, 8)),
    ((1, 2, 2, 3, 2), (2, 2, 2, 2, 3), (2, 1, 2), (0, 1, 1), 1, 1, None),
]


@pytest.mark.parametrize("xs,ws,s,p,d,g,outsize", DECONV_CASES)
def test_deconv_nd_matches_loops_and_is_conv_adjoint(xs, ws, s, p, d, g, outsize):
    rng = np.random.default_rng(2)
    X, W = rng.normal(size=xs), rng.normal(size=ws)
    b = rng.normal(size=ws[1] * g)
    Y = ops.deconv_nd(X, W, b, stride=s, pad=p, dilation=d, groups=g, outsize=outsize)
    np.testing.assert_allclose(Y, naive_deconv(X, W, b, s, p, d, g, outsize), rtol=1e-10, atol=1e-10)
    # <deconv(X), Z> == <X, conv(Z)> for the conv whose outputs sit where X does.
    Y0 = ops.deconv_nd(X, W, None, stride=s, pad=p, dilation=d, groups=g, outsize=outsize)
    Z = rng.normal(size=Y.shape)
    for cover_all in (False, True):
        n = X.ndim - 2
        fits = all(
            conv_outsize(Y.shape[2 + i], ws[2 + i], _tup(s, n)[i], _tup(p, n)[i], cover_all, _tup(d, n)[i])
            == xs[2 + i]
            for i in range(n)
        )
        if fits:
            C = ops.conv_nd(Z, W, None, stride=s, pad=p, dilation=d, groups=g, cover_all=cover_all)
            np.testing.assert_allclose(np.sum(Y0 * Z), np.sum(X * C), rtol=1e-9)
            break
    else:
        pytest.fail("no cover_all setting fits the deconvolution's sizes")


@pytest.mark.parametrize("xs,ws,s,p,d,g,outsize", DECONV_CASES)
def test_backprop_deconv_nd_numerical(xs, ws, s, p, d, g, outsize):
    rng = np.random.default_rng(3)
    X, W = rng.normal(size=xs), rng.normal(size=ws)
    b = rng.normal(size=ws[1] * g)
    kw = dict(stride=s, pad=p, dilation=d, groups=g)
    Y = ops.deconv_nd(X, W, b, outsize=outsize, **kw)
    dY = rng.normal(size=Y.shape)
    dX, dW, db = ops.backprop_deconv_nd(dY, X, W, **kw)
    out = Y.shape[2:]
    np.testing.assert_allclose(dX, numeric_vjp(lambda Z: ops.deconv_nd(Z, W, b, outsize=out, **kw), X, dY), atol=1e-6)
    np.testing.assert_allclose(dW, numeric_vjp(lambda Z: ops.deconv_nd(X, Z, b, outsize=out, **kw), W, dY), atol=1e-6)
    np.testing.assert_allclose(db, numeric_vjp(lambda Z: ops.deconv_nd(X, W, Z, outsize=out, **kw), b, dY), atol=1e-6)


POOL_CASES = [
    # (X shape, ksize, stride, pad, cover_all)
    ((2, 3, 7), 2, None, 0, True),
    ((2, 2, 8), 3, 2, 1, False),
    ((1, 2, 6, 7), (2, 3), None, (1, 1), True),
    ((2, 1, 6, 6), 3, (2, 1), 1, False),
    ((1, 2, 5, 4, 6), 2, (2, 1, 2), (0, 1, 1), True),
]


@pytest.mark.parametrize("xs,k,s,p,cover_all", POOL_CASES)
def test_max_pool_nd_matches_loops_and_gradient(xs, k, s, p, cover_all):
    rng = np.random.default_rng(4)
    X = rng.permutation(np.prod(xs)).reshape(xs).astype("float64") / 7.0  # no ties
    Y, which = ops.max_pool_nd(X, k, s, p, cover_all)
    Yr, wr = naive_pool(X, k, s, p, cover_all, "max")
    np.testing.assert_array_equal(Y, Yr)
    np.testing.assert_array_equal(which, wr)
    dY = rng.normal(size=Y.shape)
    dX = ops.backprop_max_pool_nd(dY, which, X.shape, k, s, p, cover_all)
    num = numeric_vjp(lambda Z: ops.max_pool_nd(Z, k, s, p, cover_all)[0], X, dY, eps=1e-4)
    np.testing.assert_allclose(dX, num, atol=1e-6)


@pytest.mark.parametrize("xs,k,s,p,cover_all", POOL_CASES)
def test_avg_pool_nd_matches_loops_and_gradient(xs, k, s, p, cover_all):
    rng = np.random.default_rng(5)
    X = rng.normal(size=xs)
    Y = ops.avg_pool_nd(X, k, s, p, cover_all)
    np.testing.assert_allclose(Y, naive_pool(X, k, s, p, cover_all, "avg")[0], rtol=1e-12, atol=1e-12)
    dY = rng.normal(size=Y.shape)
    dX = ops.backprop_avg_pool_nd(dY, X.shape, k, s, p, cover_all)
    np.testing.assert_allclose(dX, numeric_vjp(lambda Z: ops.avg_pool_nd(Z, k, s, p, cover_all), X, dY), atol=1e-6)


def test_avg_pool_divides_by_full_window_including_padding():
    X = np.ones((1, 1, 2, 2))
    Y = ops.avg_pool_nd(X, 2, 1, 1)
    # The corner window holds one real 1 and three padded zeros.
    assert Y[0, 0, 0, 0] == pytest.approx(0.25)
    assert Y[0, 0, 1, 1] == pytest.approx(1.0)


@pytest.mark.parametrize("xs,k,s,p,cover_all", POOL_CASES)
def test_unpool_nd_matches_loops_and_gradient(xs, k, s, p, cover_all):
    rng = np.random.default_rng(6)
    X = rng.normal(size=xs)
    n = len(xs) - 2
    kt, pt = _tup(k, n), _tup(p, n)
    st = kt if s is None else _tup(s, n)
    out = tuple(deconv_outsize(xs[2 + i], kt[i], st[i], pt[i], cover_all) for i in range(n))
    Y = ops.unpool_nd(X, k, s, p, None, cover_all)
    assert Y.shape == xs[:2] + out
    np.testing.assert_allclose(Y, naive_unpool(X, k, s, p, out), rtol=1e-12, atol=1e-12)
    dY = rng.normal(size=Y.shape)
    dX = ops.backprop_unpool_nd(dY, X.shape, k, s, p, cover_all)
    num = numeric_vjp(lambda Z: ops.unpool_nd(Z, k, s, p, None, cover_all), X, dY)
    np.testing.assert_allclose(dX, num, atol=1e-6)


def test_unpool_explicit_outsize():
    X = np.arange(4.0).reshape(1, 1, 2, 2)
    Y = ops.unpool_nd(X, 2, outsize=(4, 4), cover_all=False)
    np.testing.assert_array_equal(Y[0, 0], np.kron(X[0, 0], np.ones((2, 2))))
    with pytest.raises(ValueError, match="outsize"):
        ops.unpool_nd(X, 2, outsize=(7, 4), cover_all=False)


def test_im2col_col2im_are_adjoint():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(2, 3, 6, 5))
    k, s, p, d = (3, 2), (2, 1), (1, 2), (1, 2)
    col = im2col_nd(np, X, k, s, p, d, cover_all=True)
    assert col.shape == (2, 3, 3, 2, 4, 7)
    Z = rng.normal(size=col.shape)
    back = col2im_nd(np, Z, X.shape[2:], s, p, d)
    np.testing.assert_allclose(np.sum(col * Z), np.sum(X * back), rtol=1e-12)


def test_conv_outsize_formulas():
    assert conv_outsize(7, 3, 2, 0) == 3
    assert conv_outsize(8, 3, 2, 0) == 3
    assert conv_outsize(8, 3, 2, 0, cover_all=True) == 4
    assert conv_outsize(7, 3, 1, 0, d=2) == 3
    assert deconv_outsize(3, 3, 2, 0) == 7
    assert deconv_outsize(4, 3, 2, 0, cover_all=True) == 8


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: ops.conv_nd(np.zeros((1, 2, 5)), np.zeros((3, 2, 3)), stride=0), "stride"),
        (lambda: ops.conv_nd(np.zeros((1, 2, 5)), np.zeros((3, 2, 3)), pad=-1), "pad"),
        (lambda: ops.conv_nd(np.zeros((1, 2, 5)), np.zeros((3, 2, 3)), stride=(1, 1)), "stride"),
        (lambda: ops.conv_nd(np.zeros((1, 2, 5)), np.zeros((3, 1, 3)), groups=2), "groups"),
        (lambda: ops.conv_nd(np.zeros((1, 2, 5)), np.zeros((3, 2, 3)), groups=2), "groups"),
        (lambda: ops.conv_nd(np.zeros((1, 2, 5)), np.zeros((3, 3, 3))), "C // groups"),
        (lambda: ops.conv_nd(np.zeros((1, 2, 5)), np.zeros((3, 2, 3, 3))), "W must have"),
        (lambda: ops.conv_nd(np.zeros((1, 2, 2)), np.zeros((3, 2, 3))), "too small"),
        (lambda: ops.conv_nd(np.zeros((1, 2)), np.zeros((3, 2))), "spatial"),
        (lambda: ops.conv_nd(np.zeros((1, 2, 5)), np.zeros((3, 2, 3)), np.zeros(2)), "b must"),
        (lambda: ops.deconv_nd(np.zeros((1, 2, 3)), np.zeros((2, 2, 3)), outsize=(12,)), "outsize"),
        (lambda: ops.deconv_nd(np.zeros((1, 2, 3)), np.zeros((3, 2, 3))), "first axis"),
        (lambda: ops.max_pool_nd(np.zeros((1, 2, 5)), 0), "ksize"),
        (lambda: ops.backprop_max_pool_nd(np.zeros((1, 2, 2)), np.zeros((1, 2, 2), "i"), (1, 3, 5), 2), "in_shape"),
    ],
)
def test_bad_arguments_raise_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_non_int_stride_is_type_error():
    with pytest.raises(TypeError, match="stride"):
        ops.conv_nd(np.zeros((1, 2, 5)), np.zeros((3, 2, 3)), stride=1.5)


def test_methods_work_unbound_on_a_plain_numpy_ops():
    # The Chainer face calls ConvOps.method(ops, ...) before ConvOps is one of Ops' bases.
    plain = NumpyOps()
    rng = np.random.default_rng(8)
    X, W = rng.normal(size=(1, 4, 6, 5)), rng.normal(size=(2, 2, 3, 3))
    np.testing.assert_allclose(
        ConvOps.conv_nd(plain, X, W, groups=2, pad=1), naive_conv(X, W, None, 1, 1, 1, 2, False), atol=1e-10
    )
    Y, which = ConvOps.max_pool_nd(plain, X, 2)
    assert which.dtype == np.int32
    dX = ConvOps.backprop_max_pool_nd(plain, np.ones_like(Y), which, X.shape, 2)
    assert dX.shape == X.shape and dX.sum() == Y.size


def test_max_pool_on_integers_pads_with_the_dtype_minimum():
    X = -np.arange(1, 10, dtype="int32").reshape(1, 1, 3, 3)
    Y, _ = ops.max_pool_nd(X, 2, 2, 1, cover_all=False)
    np.testing.assert_array_equal(Y[0, 0], [[-1, -2], [-4, -5]])
