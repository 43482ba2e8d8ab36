"""The function library, part 2: forward against NumPy, backward against numerical gradients,
type checks, and the documented options of each function."""
import numpy
import pytest

import plait.chainer as chainer
from plait.chainer import Variable, gradient_check
from plait.chainer.functions.activation.clipped_relu import ClippedReLU, clipped_relu
from plait.chainer.functions.activation.elu import elu
from plait.chainer.functions.activation.lstm import lstm
from plait.chainer.functions.activation.maxout import maxout
from plait.chainer.functions.activation.prelu import prelu
from plait.chainer.functions.activation.slstm import slstm
from plait.chainer.functions.activation.softplus import softplus
from plait.chainer.functions.array.broadcast import broadcast, broadcast_to
from plait.chainer.functions.array.concat import concat
from plait.chainer.functions.array.copy import copy
from plait.chainer.functions.array.expand_dims import expand_dims
from plait.chainer.functions.array.reshape import reshape
from plait.chainer.functions.array.select_item import select_item
from plait.chainer.functions.array.split_axis import split_axis
from plait.chainer.functions.array.swapaxes import swapaxes
from plait.chainer.functions.array.transpose import transpose
from plait.chainer.functions.array.where import where
from plait.chainer.functions.loss.contrastive import contrastive
from plait.chainer.functions.loss.cross_covariance import cross_covariance
from plait.chainer.functions.loss.hinge import hinge
from plait.chainer.functions.loss.sigmoid_cross_entropy import sigmoid_cross_entropy
from plait.chainer.functions.loss.vae import bernoulli_nll, gaussian_kl_divergence, gaussian_nll
from plait.chainer.functions.math.batch_l2_norm_squared import batch_l2_norm_squared
from plait.chainer.functions.math.batch_matmul import batch_matmul
from plait.chainer.functions.math.inv import batch_inv, inv
from plait.chainer.functions.math.minmax import max as f_max
from plait.chainer.functions.math.minmax import min as f_min
from plait.chainer.functions.noise.dropout import Dropout, dropout
from plait.chainer.functions.noise.gaussian import Gaussian, gaussian
from plait.chainer.functions.normalization.batch_normalization import (
    BatchNormalizationFunction,
    batch_normalization,
    fixed_batch_normalization,
)
from plait.chainer.functions.normalization.local_response_normalization import local_response_normalization
from plait.chainer.utils import type_check
from plait.util import fix_random_seed


def _rand(*shape, low=-1.0, high=1.0, seed=0):
    return numpy.random.RandomState(seed).uniform(low, high, shape)


def _away_from(x, points, margin=0.1):
    """x with values within `margin` of a kink moved off it (central differences fail there)."""
    x = x.copy()
    for p in points:
        near = numpy.abs(x - p) < margin
        x[near] = p + numpy.where(x[near] >= p, margin, -margin)
    return x


def _sigmoid(x):
    return 1 / (1 + numpy.exp(-x))


# --------------------------------------------------------------------------- numpy references

def _np_lstm(c_prev, x):
    # Unit j's gate inputs a, i, f, o sit at columns 4j, 4j+1, 4j+2, 4j+3.
    nH = c_prev.shape[1]
    c = numpy.empty_like(c_prev)
    h = numpy.empty_like(c_prev)
    for j in range(nH):
        a, i, f, o = (x[:, 4 * j + k] for k in range(4))
        c[:, j] = numpy.tanh(a) * _sigmoid(i) + c_prev[:, j] * _sigmoid(f)
        h[:, j] = numpy.tanh(c[:, j]) * _sigmoid(o)
    return c, h


def _np_slstm(c1, c2, x1, x2):
    nH = c1.shape[1]
    c = numpy.empty_like(c1)
    h = numpy.empty_like(c1)
    for j in range(nH):
        a1, i1, f1, o1 = (x1[:, 4 * j + k] for k in range(4))
        a2, i2, f2, o2 = (x2[:, 4 * j + k] for k in range(4))
        # Chainer's documented formula has tanh(a1 + a2) * sigmoid(i1 + i2); Chainer computes this.
        c[:, j] = (numpy.tanh(a1) * _sigmoid(i1) + numpy.tanh(a2) * _sigmoid(i2)
                   + c1[:, j] * _sigmoid(f1) + c2[:, j] * _sigmoid(f2))
        h[:, j] = numpy.tanh(c[:, j]) * _sigmoid(o1 + o2)
    return c, h


def _np_lrn(x, n, k, alpha, beta):
    C = x.shape[1]
    y = numpy.empty_like(x)
    for c in range(C):
        lo, hi = max(0, c - n // 2), min(C, c + n // 2 + 1)
        y[:, c] = x[:, c] / (k + alpha * (x[:, lo:hi] ** 2).sum(axis=1)) ** beta
    return y


def _np_bn(x, gamma, beta, eps=1e-5, mean=None, var=None):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if mean is None:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
    return gamma.reshape(shape) * (x - mean.reshape(shape)) / numpy.sqrt(var.reshape(shape) + eps) + beta.reshape(shape)


def _np_hinge(x, t, p):
    s = numpy.ones_like(x)
    s[numpy.arange(len(t)), t] = -1
    return (numpy.maximum(0, 1 + s * x) ** p).sum() / len(x)


def _np_contrastive(x0, x1, y, margin):
    d = numpy.sqrt(((x0 - x1) ** 2).sum(axis=1))
    return (y * d ** 2 + (1 - y) * numpy.maximum(margin - d, 0) ** 2).sum() / 2 / len(x0)


def _np_cross_cov(y, z):
    C = (y - y.mean(0)).T @ (z - z.mean(0)) / len(y)
    return 0.5 * (C ** 2).sum()


def _np_sce(x, t, normalize=True):
    valid = t != -1
    per = -(t * numpy.log(_sigmoid(x)) + (1 - t) * numpy.log(1 - _sigmoid(x)))
    count = max(valid.sum(), 1) if normalize else len(x)
    return (per * valid).sum() / count


# --------------------------------------------------------------------------- the table

def _cases():
    x34 = _rand(3, 4)
    c23, x2_12 = _rand(2, 3, seed=1), _rand(2, 12, seed=2)
    c23b, x2_12b = _rand(2, 3, seed=3), _rand(2, 12, seed=4)
    x3_6_2 = _rand(3, 6, 2, seed=5)
    t3 = numpy.array([0, 3, 1], dtype=numpy.int32)
    cond = _rand(2, 3, seed=6) > 0
    bn_x, bn_g, bn_b = _rand(5, 3, 2, seed=7), _rand(3, low=0.5, high=1.5, seed=8), _rand(3, seed=9)
    bn_m, bn_v = _rand(3, seed=10), _rand(3, low=0.5, high=1.5, seed=11)
    spd = _rand(3, 3, seed=12) + 3 * numpy.eye(3)
    spd_batch = _rand(2, 3, 3, seed=13) + 3 * numpy.eye(3)
    sce_t = numpy.array([[0, 1, -1, 1], [1, 1, 0, 0], [-1, 0, 1, 0]], dtype=numpy.int32)
    hinge_x = _away_from(_rand(3, 4, seed=14), (-1.0, 1.0))
    pair0, pair1 = _rand(4, 3, seed=15), _rand(4, 3, seed=16)
    pair_y = numpy.array([0, 1, 0, 1], dtype=numpy.int32)
    return {
        # name: (function of Variables, numpy reference, input arrays, output-grad shape(s) or None)
        "clipped_relu": (lambda x: clipped_relu(x, 0.5), lambda x: numpy.clip(x, 0, 0.5),
                         (_away_from(x34, (0.0, 0.5)),), (3, 4)),
        "elu": (lambda x: elu(x, 0.7), lambda x: numpy.where(x >= 0, x, 0.7 * (numpy.exp(x) - 1)),
                (_away_from(x34, (0.0,)),), (3, 4)),
        "softplus": (softplus, lambda x: numpy.log1p(numpy.exp(x)), (x34 * 3,), (3, 4)),
        "softplus_beta": (lambda x: softplus(x, beta=2.5), lambda x: numpy.log1p(numpy.exp(2.5 * x)) / 2.5,
                          (x34 * 3,), (3, 4)),
        "lstm": (lstm, _np_lstm, (c23, x2_12), ((2, 3), (2, 3))),
        "slstm": (slstm, _np_slstm, (c23, c23b, x2_12, x2_12b), ((2, 3), (2, 3))),
        "maxout": (lambda x: maxout(x, 3), lambda x: x.reshape(3, 2, 3, 2).max(axis=2), (x3_6_2,), (3, 2, 2)),
        "maxout_last_axis": (lambda x: maxout(x, 2, axis=-1), lambda x: x.reshape(3, 6, 1, 2).max(axis=-1),
                             (x3_6_2,), (3, 6, 1)),
        "maxout_2d": (lambda x: maxout(x, 2), lambda x: x.reshape(3, 2, 2).max(axis=-1), (x34,), (3, 2)),
        "prelu": (prelu, lambda x, W: numpy.where(x >= 0, x, W[None, :, None] * x),
                  (_away_from(x3_6_2, (0.0,)), _rand(6, seed=17)), (3, 6, 2)),
        "prelu_2d_W": (prelu, lambda x, W: numpy.where(x >= 0, x, W[None] * x),
                       (_away_from(x3_6_2, (0.0,)), _rand(6, 2, seed=18)), (3, 6, 2)),
        "broadcast": (broadcast, lambda a, b: tuple(numpy.broadcast_arrays(a, b)),
                      (_rand(2, 1, 3, seed=19), _rand(4, 1, seed=20)), ((2, 4, 3), (2, 4, 3))),
        "broadcast_to": (lambda x: broadcast_to(x, (2, 4, 3)), lambda x: numpy.broadcast_to(x, (2, 4, 3)),
                         (_rand(4, 1, seed=21),), (2, 4, 3)),
        "concat_axis1": (lambda a, b: concat((a, b)), lambda a, b: numpy.concatenate((a, b), axis=1),
                         (_rand(2, 3), _rand(2, 2, seed=1)), (2, 5)),
        "concat_axis0": (lambda a, b, c: concat((a, b, c), axis=0), lambda a, b, c: numpy.concatenate((a, b, c)),
                         (_rand(1, 3), _rand(2, 3, seed=1), _rand(3, 3, seed=2)), (6, 3)),
        "concat_neg_axis": (lambda a, b: concat([a, b], axis=-1), lambda a, b: numpy.concatenate((a, b), axis=-1),
                            (_rand(2, 2, 1), _rand(2, 2, 3, seed=1)), (2, 2, 4)),
        "copy": (lambda x: copy(x, -1), lambda x: x, (x34,), (3, 4)),
        "expand_dims": (lambda x: expand_dims(x, 1), lambda x: x[:, None], (x34,), (3, 1, 4)),
        "expand_dims_neg": (lambda x: expand_dims(x, -1), lambda x: x[..., None], (x34,), (3, 4, 1)),
        "reshape": (lambda x: reshape(x, (2, 6)), lambda x: x.reshape(2, 6), (x34,), (2, 6)),
        "reshape_infer": (lambda x: reshape(x, (-1, 3, 2)), lambda x: x.reshape(2, 3, 2), (x34,), (2, 3, 2)),
        "select_item": (select_item, lambda x, t: x[numpy.arange(3), t], (x34, t3), (3,)),
        "split_axis_sections": (lambda x: split_axis(x, 3, 1), lambda x: tuple(numpy.split(x, 3, axis=1)),
                                (x3_6_2,), ((3, 2, 2),) * 3),
        "split_axis_indices": (lambda x: split_axis(x, [1, 4], 1), lambda x: tuple(numpy.split(x, [1, 4], axis=1)),
                               (x3_6_2,), ((3, 1, 2), (3, 3, 2), (3, 2, 2))),
        "split_axis_last": (lambda x: split_axis(x, 2, -1), lambda x: tuple(numpy.split(x, 2, axis=-1)),
                            (x3_6_2,), ((3, 6, 1),) * 2),
        "swapaxes": (lambda x: swapaxes(x, 0, 2), lambda x: x.swapaxes(0, 2), (x3_6_2,), (2, 6, 3)),
        "transpose_default": (transpose, lambda x: x.T, (x3_6_2,), (2, 6, 3)),
        "transpose_axes": (lambda x: transpose(x, (1, 2, 0)), lambda x: x.transpose(1, 2, 0), (x3_6_2,), (6, 2, 3)),
        "where": (lambda x, y: where(Variable(cond), x, y), lambda x, y: numpy.where(cond, x, y),
                  (_rand(2, 3, seed=22), _rand(2, 3, seed=23)), (2, 3)),
        "batch_l2_norm_squared": (batch_l2_norm_squared, lambda x: (x.reshape(3, -1) ** 2).sum(axis=1),
                                  (x3_6_2,), (3,)),
        "inv": (inv, numpy.linalg.inv, (spd,), (3, 3)),
        "batch_inv": (batch_inv, numpy.linalg.inv, (spd_batch,), (2, 3, 3)),
        "max_all": (f_max, lambda x: x.max(), (x3_6_2,), None),
        "max_axis": (lambda x: f_max(x, axis=1), lambda x: x.max(axis=1), (x3_6_2,), (3, 2)),
        "max_axes_keepdims": (lambda x: f_max(x, axis=(0, -1), keepdims=True),
                              lambda x: x.max(axis=(0, 2), keepdims=True), (x3_6_2,), (1, 6, 1)),
        "min_all": (f_min, lambda x: x.min(), (x3_6_2,), None),
        "min_axis": (lambda x: f_min(x, axis=-1), lambda x: x.min(axis=-1), (x3_6_2,), (3, 6)),
        "batch_matmul": (batch_matmul, lambda a, b: a @ b, (_rand(2, 3, 4), _rand(2, 4, 5, seed=1)), (2, 3, 5)),
        "batch_matmul_transa": (lambda a, b: batch_matmul(a, b, transa=True),
                                lambda a, b: a.transpose(0, 2, 1) @ b, (_rand(2, 4, 3), _rand(2, 4, 5, seed=1)),
                                (2, 3, 5)),
        "batch_matmul_transb_vectors": (lambda a, b: batch_matmul(a, b, transb=True),
                                        lambda a, b: a[:, :, None] @ b[:, None, :],
                                        (_rand(2, 3), _rand(2, 4, seed=1)), (2, 3, 4)),
        "batch_matmul_both": (lambda a, b: batch_matmul(a, b, transa=True, transb=True),
                              lambda a, b: a.transpose(0, 2, 1) @ b.transpose(0, 2, 1),
                              (_rand(2, 4, 3), _rand(2, 5, 4, seed=1)), (2, 3, 5)),
        "batch_normalization": (batch_normalization, _np_bn, (bn_x, bn_g, bn_b), (5, 3, 2)),
        "batch_normalization_eps": (lambda x, g, b: batch_normalization(x, g, b, eps=0.5),
                                    lambda x, g, b: _np_bn(x, g, b, eps=0.5), (bn_x, bn_g, bn_b), (5, 3, 2)),
        "fixed_batch_normalization": (
            lambda x, g, b, m, v: fixed_batch_normalization(x, g, b, m, v, eps=0.1),
            lambda x, g, b, m, v: _np_bn(x, g, b, eps=0.1, mean=m, var=v),
            (bn_x, bn_g, bn_b, bn_m, bn_v), (5, 3, 2)),
        "lrn_default": (local_response_normalization, lambda x: _np_lrn(x, 5, 2, 1e-4, 0.75),
                        (_rand(2, 7, 2, low=-3, high=3),), (2, 7, 2)),
        "lrn_options": (lambda x: local_response_normalization(x, n=3, k=1, alpha=0.5, beta=0.6),
                        lambda x: _np_lrn(x, 3, 1, 0.5, 0.6), (_rand(2, 7, 2),), (2, 7, 2)),
        "sigmoid_cross_entropy": (sigmoid_cross_entropy, _np_sce, (x34 * 3, sce_t), None),
        "sigmoid_cross_entropy_unnormalized": (
            lambda x, t: sigmoid_cross_entropy(x, t, use_cudnn=False, normalize=False),
            lambda x, t: _np_sce(x, t, normalize=False), (x34 * 3, sce_t), None),
        "hinge_L1": (hinge, lambda x, t: _np_hinge(x, t, 1), (hinge_x, t3), None),
        "hinge_L2": (lambda x, t: hinge(x, t, norm="L2"), lambda x, t: _np_hinge(x, t, 2), (hinge_x, t3), None),
        "contrastive": (contrastive, lambda a, b, y: _np_contrastive(a, b, y, 1.0), (pair0, pair1, pair_y), None),
        "contrastive_margin": (lambda a, b, y: contrastive(a, b, y, margin=2.5),
                               lambda a, b, y: _np_contrastive(a, b, y, 2.5), (pair0, pair1, pair_y), None),
        "cross_covariance": (cross_covariance, _np_cross_cov, (_rand(5, 3), _rand(5, 2, seed=1)), None),
        "bernoulli_nll": (bernoulli_nll,
                          lambda x, y: -(x * numpy.log(_sigmoid(y)) + (1 - x) * numpy.log(1 - _sigmoid(y))).sum(),
                          (_rand(2, 3, low=0, high=1), _rand(2, 3, seed=1)), None),
        "gaussian_kl_divergence": (
            gaussian_kl_divergence,
            lambda m, v: 0.5 * (m ** 2 + numpy.exp(v) - v - 1).sum(), (_rand(2, 3), _rand(2, 3, seed=1)), None),
        "gaussian_nll": (
            gaussian_nll,
            lambda x, m, v: (0.5 * numpy.log(2 * numpy.pi * numpy.exp(v)) + (x - m) ** 2 / (2 * numpy.exp(v))).sum(),
            (_rand(2, 3), _rand(2, 3, seed=1), _rand(2, 3, seed=2)), None),
    }


CASES = _cases()
# float32 outputs are compared with the float64 reference at float32 precision.
FLOAT32_TOL = dict(rtol=2e-5, atol=2e-6)


def _as_tuple(y):
    return y if isinstance(y, tuple) else (y,)


def _cast(inputs, dtype):
    return [x.astype(dtype) if x.dtype.kind == "f" else x.copy() for x in inputs]


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [numpy.float64, numpy.float32])
def test_forward_matches_numpy(name, dtype):
    fn, ref, inputs, _ = CASES[name]
    ys = _as_tuple(fn(*[Variable(x) for x in _cast(inputs, dtype)]))
    expected = _as_tuple(ref(*inputs))
    assert len(ys) == len(expected)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == numpy.float64 else FLOAT32_TOL
    for y, e in zip(ys, expected):
        assert isinstance(y, Variable)
        assert y.data.dtype == dtype
        assert y.data.shape == numpy.shape(e)
        numpy.testing.assert_allclose(y.data, e, **tol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_matches_numerical_gradient(name):
    fn, _, inputs, gy_shapes = CASES[name]
    if gy_shapes is None:
        gy = None
    elif isinstance(gy_shapes[0], tuple):
        gy = tuple(_rand(*s, seed=40 + i) for i, s in enumerate(gy_shapes))
    else:
        gy = _rand(*gy_shapes, seed=42)
    gradient_check.check_backward(fn, tuple(x.copy() for x in inputs), gy, eps=1e-6, atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_gradients_are_float32(name):
    fn, _, inputs, _ = CASES[name]
    xs = [Variable(x) for x in _cast(inputs, numpy.float32)]
    ys = _as_tuple(fn(*xs))
    for y in ys:
        y.grad = numpy.ones(y.data.shape, dtype=numpy.float32)
    # Outputs of one function share their creator: one backward call covers them all.
    ys[0].backward()
    for x in xs:
        if x.data.dtype.kind == "f":
            assert x.grad is not None and x.grad.dtype == numpy.float32 and x.grad.shape == x.data.shape
        else:
            assert x.grad is None  # integer labels and indices get no gradient


# --------------------------------------------------------------------------- type checks

def _f(*shape, dtype="f"):
    return Variable(numpy.zeros(shape, dtype=dtype))


@pytest.mark.parametrize(
    "call, expect",
    [
        (lambda: clipped_relu(_f(2, dtype="i")), "in_types[0].dtype.kind == f"),
        (lambda: elu(_f(2, dtype="i")), "in_types[0].dtype.kind == f"),
        (lambda: softplus(_f(2, dtype="i")), "in_types[0].dtype.kind == f"),
        (lambda: lstm(_f(2, 3), _f(2, 10)), "in_types[1].shape[1] == 4 * in_types[0].shape[1]"),
        (lambda: lstm(_f(2, 3), _f(3, 12)), "in_types[1].shape[0] == in_types[0].shape[0]"),
        (lambda: lstm(_f(2, 3), _f(2, 12, dtype="d")), "in_types[1].dtype == in_types[0].dtype"),
        (lambda: slstm(_f(2, 3), _f(2, 4), _f(2, 12), _f(2, 12)), "in_types[1].shape == in_types[0].shape"),
        (lambda: maxout(_f(2, 5), 2), "in_types[0].shape[1] % pool_size == 0"),
        (lambda: maxout(_f(2, 4), 2, axis=2), "in_types[0].ndim > axis"),
        (lambda: prelu(_f(2, 3, 4), _f(4)), "in_types[0].shape[1:2] == in_types[1].shape"),
        (lambda: broadcast(_f(2, 3), _f(4, 3)), "each dimension has the same size or is 1"),
        (lambda: broadcast_to(_f(2, 3), (4, 3)), "in_types[0].shape[0] == 4 or in_types[0].shape[0] == 1"),
        (lambda: concat((_f(2, 3), _f(3, 3))), "in_types[1].shape[0] == in_types[0].shape[0]"),
        (lambda: concat((_f(2, 3), _f(2, 3, dtype="d"))), "in_types[1].dtype == in_types[0].dtype"),
        (lambda: concat((_f(2, 3), _f(2, 3)), axis=2), "in_types[0].ndim > axis"),
        (lambda: expand_dims(_f(2, 3), 3), "in_types[0].ndim >= axis"),
        (lambda: expand_dims(_f(2, 3), -4), "in_types[0].ndim >= -axis - 1"),
        (lambda: reshape(_f(2, 3), (4, 2)), "prod(in_types[0].shape) == prod(shape)"),
        (lambda: reshape(_f(2, 3), (4, -1)), "prod(in_types[0].shape) % 4 == 0"),
        (lambda: select_item(_f(3, 4), _f(3)), "in_types[1].dtype.kind == i"),
        (lambda: select_item(_f(3, 4), _f(2, dtype="i")), "in_types[0].shape[0] == in_types[1].shape[0]"),
        (lambda: split_axis(_f(2, 5), 2, 1), "in_types[0].shape[1] % sections == 0"),
        (lambda: split_axis(_f(2, 4), 2, 2), "in_types[0].ndim > axis"),
        (lambda: swapaxes(_f(2, 3), 0, 2), "in_types[0].ndim > axis2"),
        (lambda: transpose(_f(2, 3), (0, 1, 2)), "in_types[0].ndim == len(axes)"),
        (lambda: transpose(_f(2, 3), (0, 0)), "axes is a permutation of 0 .. 1"),
        (lambda: where(_f(2, 3), _f(2, 3), _f(2, 3)), "in_types[0].dtype == <class 'numpy.bool'>"),
        (lambda: where(_f(2, 3, dtype="?"), _f(2, 3), _f(3, 2)), "in_types[2].shape == in_types[0].shape"),
        (lambda: batch_l2_norm_squared(_f(3)), "in_types[0].ndim >= 2"),
        (lambda: inv(_f(2, 3)), "in_types[0].shape[0] == in_types[0].shape[1]"),
        (lambda: batch_inv(_f(3, 3)), "in_types[0].ndim == 3"),
        (lambda: f_max(_f(2, 3), axis=2), "in_types[0].ndim > 2"),
        (lambda: f_min(_f(2, dtype="i")), "in_types[0].dtype.kind == f"),
        (lambda: batch_matmul(_f(2, 3, 4), _f(2, 3, 4)), "inner dimensions agree"),
        (lambda: batch_matmul(_f(2, 3, 4), _f(3, 4, 4)), "in_types[0].shape[0] == in_types[1].shape[0]"),
        (lambda: dropout(_f(2, dtype="i")), "in_types[0].dtype.kind == f"),
        (lambda: gaussian(_f(2, 3), _f(3, 2)), "in_types[0].shape == in_types[1].shape"),
        (lambda: batch_normalization(_f(4, 3), _f(2), _f(2)), "in_types[0].shape[1:2] == in_types[1].shape"),
        (lambda: batch_normalization(_f(4, 3), _f(3), _f(3, dtype="d")), "in_types[2].dtype == in_types[0].dtype"),
        (lambda: fixed_batch_normalization(_f(4, 3), _f(3), _f(3), _f(3), _f(2)), "in_types[4].shape == in_types[1].shape"),
        (lambda: local_response_normalization(_f(3)), "in_types[0].ndim >= 2"),
        (lambda: sigmoid_cross_entropy(_f(2, 3), _f(2, 3)), "in_types[1].dtype.kind == i"),
        (lambda: sigmoid_cross_entropy(_f(2, 3), _f(2, dtype="i")), "in_types[0].shape == in_types[1].shape"),
        (lambda: hinge(_f(2, 3), _f(3, dtype="i")), "in_types[0].shape[0] == in_types[1].shape[0]"),
        (lambda: hinge(_f(2, 3, 1), _f(2, dtype="i")), "in_types[0].ndim == 2"),
        (lambda: contrastive(_f(2, 3), _f(2, 4), _f(2, dtype="i")), "in_types[0].shape == in_types[1].shape"),
        (lambda: contrastive(_f(2, 3), _f(2, 3), _f(3, dtype="i")), "in_types[0].shape[0] == in_types[2].shape[0]"),
        (lambda: cross_covariance(_f(2, 3), _f(3, 3)), "in_types[0].shape[0] == in_types[1].shape[0]"),
    ],
)
def test_type_check_failures_are_readable(call, expect):
    with pytest.raises(type_check.InvalidType) as info:
        call()
    text = str(info.value)
    assert text.startswith("Invalid operation is performed in: ")
    assert "(Forward)" in text
    assert f"Expect: {expect}" in text, text
    assert "\nActual: " in text


def test_type_check_message_names_function_and_values():
    with pytest.raises(type_check.InvalidType) as info:
        lstm(_f(2, 3), _f(2, 10))
    assert str(info.value) == (
        "Invalid operation is performed in: LSTM (Forward)\n\n"
        "Expect: in_types[1].shape[1] == 4 * in_types[0].shape[1]\n"
        "Actual: 10 != 12"
    )


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: clipped_relu(_f(2), z=0.0), ValueError, "'z' must be > 0"),
        (lambda: clipped_relu(_f(2), z="5"), TypeError, "'z' must be a real number"),
        (lambda: softplus(_f(2), beta=0), ValueError, "'beta' must be non-zero"),
        (lambda: maxout(_f(2, 4), 0), ValueError, "'pool_size' must be a positive integer"),
        (lambda: maxout(_f(2, 4), 2.0), TypeError, "'pool_size' must be an int"),
        (lambda: split_axis(_f(2, 4), 0, 1), ValueError, "number of sections must be >= 1"),
        (lambda: split_axis(_f(2, 4), "ab", 1), TypeError, "indices_or_sections"),
        (lambda: split_axis(_f(2, 4), [0, 2], 1), ValueError, "piece 0 would be empty"),
        (lambda: split_axis(_f(2, 4), [2, 2], 1), ValueError, "piece 1 would be empty"),
        (lambda: split_axis(_f(2, 4), [2, 4], 1), ValueError, "piece 2 would be empty"),
        (lambda: reshape(_f(2, 4), (-1, -1)), ValueError, "one -1"),
        (lambda: select_item(_f(2, 3), Variable(numpy.array([0, 3], "i"))), ValueError, r"in \[0, 3\)"),
        (lambda: f_max(_f(0, 3), axis=0), ValueError, "empty axis"),
        (lambda: f_max(_f(2, 3), axis=(1, 1)), ValueError, "duplicate"),
        (lambda: f_min(_f(2, 3), axis=1.5), TypeError, "axis must be None, an int or a tuple"),
        (lambda: inv(Variable(numpy.ones((2, 2), "f"))), ValueError, "singular"),
        (lambda: batch_inv(Variable(numpy.zeros((2, 2, 2), "f"))), ValueError, "singular"),
        (lambda: dropout(_f(2), ratio=1.5), ValueError, r"'ratio' must be in \[0, 1\]"),
        (lambda: batch_normalization(_f(4, 3), _f(3), _f(3), eps=-1), ValueError, "'eps' must be >= 0"),
        (lambda: local_response_normalization(_f(2, 3), n=0), ValueError, "'n' must be a positive int"),
        (lambda: sigmoid_cross_entropy(_f(1, 2), Variable(numpy.array([[0, 2]], "i"))), ValueError,
         "labels must be 0, 1 or -1"),
        (lambda: hinge(_f(2, 3), Variable(numpy.array([0, 3], "i"))), ValueError, r"labels must be in \[0, 3\)"),
        (lambda: hinge(_f(2, 3), Variable(numpy.array([0, 1], "i")), norm="L3"), ValueError,
         "'norm' must be 'L1' or 'L2'"),
        (lambda: contrastive(_f(2, 3), _f(2, 3), _f(2, dtype="i"), margin=0), ValueError, "'margin' must be > 0"),
    ],
)
def test_bad_arguments_raise_clear_errors(make, error, match):
    with pytest.raises(error, match=match):
        make()


# --------------------------------------------------------------------------- options and behaviour

def test_clipped_relu_default_cap_is_20_and_gradient_vanishes_outside():
    x = Variable(numpy.array([-1.0, 0.5, 19.0, 25.0], dtype=numpy.float32))
    y = clipped_relu(x)
    numpy.testing.assert_array_equal(y.data, [0.0, 0.5, 19.0, 20.0])
    y.grad = numpy.ones(4, dtype=numpy.float32)
    y.backward()
    numpy.testing.assert_array_equal(x.grad, [0, 1, 1, 0])
    assert ClippedReLU(3).cap == 3.0  # ints are accepted as caps


def test_softplus_is_stable_for_large_inputs():
    x = numpy.array([-1000.0, -30.0, 0.0, 30.0, 1000.0], dtype=numpy.float32)
    y = softplus(Variable(x)).data
    assert numpy.isfinite(y).all()
    numpy.testing.assert_allclose(y, [0.0, numpy.exp(-30.0), numpy.log(2.0), 30.0, 1000.0], rtol=1e-6, atol=1e-30)


def test_lstm_with_only_h_used_backpropagates():
    c_prev, x = Variable(_rand(2, 3)), Variable(_rand(2, 12, seed=1))
    c, h = lstm(c_prev, x)
    loss = chainer.functions.sum(h)
    loss.backward()
    # Finite differences of sum(h) against x (gc is None in backward).
    def f():
        return (_np_lstm(c_prev.data, x.data)[1],)
    gx, = gradient_check.numerical_grad(f, (x.data,), (numpy.ones((2, 3)),), eps=1e-6)
    numpy.testing.assert_allclose(x.grad, gx, rtol=1e-6, atol=1e-8)
    assert c_prev.grad is not None


def test_lstm_accepts_trailing_axes():
    c_prev, x = _rand(2, 3, 2), _rand(2, 12, 2, seed=1)
    c, h = lstm(Variable(c_prev), Variable(x))
    for k in range(2):
        ec, eh = _np_lstm(c_prev[..., k], x[..., k])
        numpy.testing.assert_allclose(c.data[..., k], ec, rtol=1e-12)
        numpy.testing.assert_allclose(h.data[..., k], eh, rtol=1e-12)
    gradient_check.check_backward(lstm, (c_prev, x), (_rand(2, 3, 2, seed=5), _rand(2, 3, 2, seed=6)),
                                  eps=1e-6, atol=1e-7, rtol=1e-6)


def test_maxout_routes_gradient_to_the_winner_only():
    x = Variable(numpy.array([[1.0, 3.0, 2.0, -1.0, -2.0, -3.0]], dtype=numpy.float32))
    y = maxout(x, 3)
    numpy.testing.assert_array_equal(y.data, [[3.0, -1.0]])
    y.grad = numpy.array([[10.0, 20.0]], dtype=numpy.float32)
    y.backward()
    numpy.testing.assert_array_equal(x.grad, [[0, 10, 0, 20, 0, 0]])


def test_prelu_weight_gradient_is_the_negative_part():
    x = numpy.array([[-2.0, 3.0], [-1.0, -4.0]])
    W = numpy.array([0.5, 0.25])
    xv, Wv = Variable(x), Variable(W)
    y = prelu(xv, Wv)
    numpy.testing.assert_array_equal(y.data, [[-1.0, 3.0], [-0.5, -1.0]])
    y.grad = numpy.ones_like(x)
    y.backward()
    numpy.testing.assert_array_equal(Wv.grad, [-3.0, -4.0])
    numpy.testing.assert_array_equal(xv.grad, [[0.5, 1.0], [0.5, 0.25]])


def test_broadcast_single_input_returns_a_variable():
    y = broadcast(_f(2, 3))
    assert isinstance(y, Variable) and y.data.shape == (2, 3)


def test_concat_gradient_splits_back():
    a, b = Variable(_rand(2, 1)), Variable(_rand(2, 3, seed=1))
    y = concat((a, b))
    y.grad = numpy.arange(8.0).reshape(2, 4)
    y.backward()
    numpy.testing.assert_array_equal(a.grad, [[0.0], [4.0]])
    numpy.testing.assert_array_equal(b.grad, [[1.0, 2.0, 3.0], [5.0, 6.0, 7.0]])


def test_copy_to_host_is_a_copy_and_gpu_needs_cupy():
    x = Variable(_rand(2, 3))
    y = copy(x, -1)
    assert y.data is not x.data and not numpy.shares_memory(y.data, x.data)
    numpy.testing.assert_array_equal(y.data, x.data)
    if not chainer.cuda.available:
        with pytest.raises(RuntimeError, match="CuPy is not available"):
            copy(x, 0)


def test_expand_dims_is_a_view():
    x = _rand(2, 3)
    assert numpy.shares_memory(expand_dims(Variable(x), 0).data, x)


@pytest.mark.parametrize("sections, widths", [(1, None), (2, [2, 2]), ([1], [1, 3]), ([], None)])
def test_split_axis_returns_tuple_or_single_variable(sections, widths):
    x = Variable(_rand(3, 4))
    out = split_axis(x, sections, 1)
    if widths is None:
        assert isinstance(out, Variable) and out.data.shape == (3, 4)
        forced = split_axis(x, sections, 1, force_tuple=True)
        assert isinstance(forced, tuple) and len(forced) == 1
    else:
        assert isinstance(out, tuple) and [o.data.shape[1] for o in out] == widths


def test_split_axis_unused_piece_gets_zero_gradient():
    x = Variable(_rand(2, 6))
    a, b, c = split_axis(x, 3, 1)
    loss = chainer.functions.sum(b * 2.0)
    loss.backward()
    expected = numpy.zeros((2, 6))
    expected[:, 2:4] = 2.0
    numpy.testing.assert_array_equal(x.grad, expected)


def test_where_condition_gets_no_gradient_and_split_is_exact():
    cond = Variable(numpy.array([[True, False, True]]))
    x, y = Variable(numpy.ones((1, 3))), Variable(numpy.zeros((1, 3)))
    out = where(cond, x, y)
    numpy.testing.assert_array_equal(out.data, [[1, 0, 1]])
    out.grad = numpy.array([[1.0, 2.0, 3.0]])
    out.backward()
    numpy.testing.assert_array_equal(x.grad, [[1, 0, 3]])
    numpy.testing.assert_array_equal(y.grad, [[0, 2, 0]])
    assert cond.grad is None


def test_select_item_gradient_is_scattered():
    x, t = Variable(numpy.zeros((2, 3))), Variable(numpy.array([2, 0], dtype=numpy.int32))
    y = select_item(x, t)
    y.grad = numpy.array([5.0, 7.0])
    y.backward()
    numpy.testing.assert_array_equal(x.grad, [[0, 0, 5], [7, 0, 0]])


def test_max_ties_all_receive_the_gradient():
    x = Variable(numpy.array([[1.0, 3.0, 3.0]]))
    y = f_max(x)
    y.backward()
    numpy.testing.assert_array_equal(x.grad, [[0, 1, 1]])


def test_dropout_train_false_is_identity():
    x = Variable(_rand(3, 4))
    assert dropout(x, train=False) is x
    assert dropout(x, ratio=0.9, train=False) is x


def test_dropout_mask_follows_fix_random_seed_and_backend():
    x = numpy.ones((50, 40), dtype=numpy.float32)
    fix_random_seed(7)
    y1 = dropout(Variable(x), 0.3).data
    fix_random_seed(7)
    y2 = dropout(Variable(x), 0.3).data
    numpy.testing.assert_array_equal(y1, y2)
    # Chainer 1.7.2's draw, so that a seeded program drops what it dropped on Chainer.
    fix_random_seed(7)
    numpy.testing.assert_array_equal(y1, numpy.float32(1 / 0.7) * (numpy.random.rand(50, 40) >= 0.3))
    kept = y1 != 0
    assert 0.6 < kept.mean() < 0.8
    numpy.testing.assert_allclose(y1[kept], 1 / 0.7, rtol=1e-6)


def test_dropout_float64_scale_is_exact_and_backward_reuses_mask():
    x = Variable(numpy.ones((20, 30)))
    y = dropout(x, 0.3)
    kept = y.data != 0
    assert y.data.dtype == numpy.float64
    assert (y.data[kept] == 1.0 / 0.7).all()
    y.grad = numpy.full((20, 30), 2.0)
    y.backward()
    numpy.testing.assert_array_equal(x.grad, 2.0 * y.data)


def test_dropout_edge_ratios():
    x = Variable(numpy.ones((4, 5), dtype=numpy.float32))
    numpy.testing.assert_array_equal(dropout(x, 0.0).data, x.data)
    assert not dropout(x, 1.0).data.any()


def test_dropout_gradient_check_with_one_function_object():
    func = Dropout(0.4)  # the mask is drawn once per object, so repeated calls agree
    gradient_check.check_backward(func, (_rand(3, 4),), _rand(3, 4, seed=1), eps=1e-6, atol=1e-7, rtol=1e-6)


def test_gaussian_sample_statistics_and_seed():
    mean = numpy.full((200, 50), 1.5)
    ln_var = numpy.full((200, 50), numpy.log(4.0))
    fix_random_seed(3)
    y1 = gaussian(Variable(mean), Variable(ln_var)).data
    fix_random_seed(3)
    y2 = gaussian(Variable(mean), Variable(ln_var)).data
    numpy.testing.assert_array_equal(y1, y2)
    assert abs(y1.mean() - 1.5) < 0.1
    assert abs(y1.std() - 2.0) < 0.1


def test_gaussian_gradients_match_reparameterisation():
    func = Gaussian()
    m, v = Variable(_rand(2, 3)), Variable(_rand(2, 3, seed=1))
    y = func(m, v)
    y.grad = numpy.ones((2, 3))
    y.backward()
    numpy.testing.assert_array_equal(m.grad, numpy.ones((2, 3)))
    numpy.testing.assert_allclose(v.grad, 0.5 * (y.data - m.data), rtol=1e-12)
    gradient_check.check_backward(Gaussian(), (_rand(2, 3), _rand(2, 3, seed=1)), _rand(2, 3, seed=2),
                                  eps=1e-6, atol=1e-7, rtol=1e-6)


def test_batch_normalization_keeps_batch_statistics():
    x = _rand(6, 3, 2)
    func = BatchNormalizationFunction(1e-3)
    y = func(Variable(x), Variable(numpy.ones(3)), Variable(numpy.zeros(3)))
    numpy.testing.assert_allclose(func.mean, x.mean(axis=(0, 2)), rtol=1e-12)
    numpy.testing.assert_allclose(func.var, x.var(axis=(0, 2)), rtol=1e-12)
    # Normalised output: zero mean and (almost, because of eps) unit variance per channel.
    numpy.testing.assert_allclose(y.data.mean(axis=(0, 2)), 0, atol=1e-12)
    numpy.testing.assert_allclose(y.data.var(axis=(0, 2)), x.var(axis=(0, 2)) / (x.var(axis=(0, 2)) + 1e-3))


def test_fixed_batch_normalization_equals_batch_version_with_batch_stats():
    x, g, b = _rand(6, 3), _rand(3, seed=1), _rand(3, seed=2)
    y1 = batch_normalization(Variable(x), Variable(g), Variable(b), eps=0.01).data
    y2 = fixed_batch_normalization(Variable(x), Variable(g), Variable(b), Variable(x.mean(0)), Variable(x.var(0)),
                                   eps=0.01).data
    numpy.testing.assert_allclose(y1, y2, rtol=1e-12)


def test_lrn_even_window_uses_half_on_each_side():
    x = _rand(1, 6, 1)
    y = local_response_normalization(Variable(x), n=4, k=1, alpha=1, beta=1).data
    numpy.testing.assert_allclose(y, _np_lrn(x, 4, 1, 1, 1), rtol=1e-12)


def test_sigmoid_cross_entropy_all_ignored_is_zero_with_zero_grad():
    x = Variable(_rand(2, 3).astype(numpy.float32))
    t = Variable(numpy.full((2, 3), -1, dtype=numpy.int32))
    loss = sigmoid_cross_entropy(x, t)
    assert loss.data.shape == () and float(loss.data) == 0.0
    loss.backward()
    assert not x.grad.any() and t.grad is None


def test_sigmoid_cross_entropy_is_stable_for_large_scores():
    x = numpy.array([[1000.0, -1000.0]], dtype=numpy.float32)
    t = numpy.array([[1, 0]], dtype=numpy.int32)
    assert float(sigmoid_cross_entropy(Variable(x), Variable(t)).data) == 0.0
    assert float(sigmoid_cross_entropy(Variable(x), Variable(1 - t)).data) == pytest.approx(1000.0)


def test_contrastive_identical_dissimilar_pair_has_finite_gradient():
    x0 = Variable(numpy.ones((1, 2)))
    x1 = Variable(numpy.ones((1, 2)))
    loss = contrastive(x0, x1, Variable(numpy.array([0], dtype=numpy.int32)), margin=2.0)
    assert float(loss.data) == pytest.approx(2.0)  # max(2 - 0, 0)**2 / 2
    loss.backward()
    assert numpy.isfinite(x0.grad).all() and numpy.isfinite(x1.grad).all()


def test_vae_losses_accept_arrays_and_return_scalars():
    x, m, v = _rand(2, 3, low=0, high=1), _rand(2, 3, seed=1), _rand(2, 3, seed=2)
    for out in (bernoulli_nll(x, m), gaussian_kl_divergence(m, v), gaussian_nll(x, m, v)):
        assert isinstance(out, Variable) and out.data.shape == ()
