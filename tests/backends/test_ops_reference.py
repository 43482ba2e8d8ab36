"""Forward results of every Ops method against independent numpy formulas and Thinc 8.3.

For each op: the result equals a formula written here from the op's definition, equals
Thinc's `NumpyOps` on the same input (skipped without thinc), is the same from `Ops`
and `NumpyOps`, leaves its inputs alone unless asked, and honours `inplace=True`.
The utility methods (alloc*, reshape*, asarray*, minibatch, ...) follow at the end.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import special

try:
    from ._gradcheck import other_module_ops, split_rows, to_np
except ImportError:  # tests/ is not a package: pytest puts this folder on sys.path
    from _gradcheck import other_module_ops, split_rows, to_np  # type: ignore[no-redef]

FLOATS = ("float32", "float64")


def _tol(dtype, scale=1.0):
    if np.dtype(dtype) == np.float32:
        return dict(rtol=2e-5 * scale, atol=2e-6 * scale)
    return dict(rtol=1e-6 * scale, atol=1e-6 * scale)


# --- independent formulas ------------------------------------------------------------------


def _softmax(X, axis=-1, temperature=1.0):
    Z = np.asarray(X, dtype="float64") / temperature
    Z = np.exp(Z - Z.max(axis=axis, keepdims=True))
    return Z / Z.sum(axis=axis, keepdims=True)


def _backprop_softmax(Y, dY, axis=-1, temperature=1.0):
    Y = np.asarray(Y, dtype="float64")
    dY = np.asarray(dY, dtype="float64")
    return (Y * dY - Y * (Y * dY).sum(axis=axis, keepdims=True)) / temperature


def _per_sequence(fn, X, lengths):
    pieces = split_rows(np.asarray(X, dtype="float64"), lengths)
    return np.concatenate([fn(p) for p in pieces], axis=0) if pieces else np.zeros((0, X.shape[1]))


def _softmax_sequences(X, lengths):
    return _per_sequence(lambda p: _softmax(p, axis=0) if len(p) else p, X, lengths)


def _backprop_softmax_sequences(dY, Y, lengths):
    Y = np.asarray(Y, dtype="float64")
    dY = np.asarray(dY, dtype="float64")
    prod = Y * dY
    sums = _reduce(lambda p: p.sum(axis=0), prod, lengths)
    return prod - Y * np.repeat(sums, lengths, axis=0)


def _reduce(fn, X, lengths):
    X = np.asarray(X, dtype="float64")
    return np.array([fn(p) if len(p) else np.zeros(X.shape[1]) for p in split_rows(X, lengths)]).reshape(
        len(lengths), X.shape[1]
    )


def _seq2col(X, nW, lengths=None):
    X = np.asarray(X, dtype="float64")
    nB, nI = X.shape
    lengths = [nB] if lengths is None else list(lengths)
    out = np.zeros((nB, (2 * nW + 1) * nI))
    start = 0
    for n in lengths:
        for t in range(n):
            for k, offset in enumerate(range(-nW, nW + 1)):
                if 0 <= t + offset < n:
                    out[start + t, k * nI : (k + 1) * nI] = X[start + t + offset]
        start += n
    return out


def _backprop_seq2col(dY, nW, lengths=None):
    dY = np.asarray(dY, dtype="float64")
    nB = dY.shape[0]
    nI = dY.shape[1] // (2 * nW + 1)
    lengths = [nB] if lengths is None else list(lengths)
    dX = np.zeros((nB, nI))
    start = 0
    for n in lengths:
        for t in range(n):
            for k, offset in enumerate(range(-nW, nW + 1)):
                if 0 <= t + offset < n:
                    dX[start + t + offset] += dY[start + t, k * nI : (k + 1) * nI]
        start += n
    return dX


def _mish(X, threshold=20.0):
    X = np.asarray(X, dtype="float64")
    return np.where(X >= threshold, X, X * np.tanh(np.log1p(np.exp(np.minimum(X, threshold)))))


def _dmish(X):
    t = np.tanh(np.log1p(np.exp(X)))
    return t + X * (1 - t**2) * special.expit(X)


def _backprop_mish(dY, X, threshold=20.0):
    X = np.asarray(X, dtype="float64")
    return np.where(X >= threshold, dY, dY * _dmish(np.minimum(X, threshold)))


_C = math.sqrt(2 / math.pi)


def _gelu_approx(X):
    return 0.5 * X * (1 + np.tanh(_C * (X + 0.044715 * X**3)))


def _dgelu_approx(X):
    t = np.tanh(_C * (X + 0.044715 * X**3))
    return 0.5 * (1 + t) + 0.5 * X * (1 - t**2) * _C * (1 + 3 * 0.044715 * X**2)


def _gaussian_cdf(X):
    return 0.5 * (1 + special.erf(X / math.sqrt(2)))


def _dish(X):
    return 0.5 * X * (1 + X / np.sqrt(1 + X**2))


def _ddish(X):
    s = np.sqrt(1 + X**2)
    return 0.5 * (1 + X / s) + 0.5 * X * (1 / s - X**2 / s**3)


def _clipped(X, slope=1.0, offset=0.0, min_val=0.0, max_val=1.0):
    return np.clip(np.asarray(X, dtype="float64") * slope + offset, min_val, max_val)


def _dclipped(dY, X, slope=1.0, offset=0.0, min_val=0.0, max_val=1.0):
    low, high = (min_val - offset) / slope, (max_val - offset) / slope
    return dY * slope * ((low < X) & (X < high))


def _hard_swish(X):
    return X * np.clip(0.2 * X + 0.5, 0, 1)


def _dhard_swish(X):
    return np.where(X > 2.5, 1.0, np.where(X < -2.5, 0.0, 0.4 * X + 0.5))


def _hard_swish_mobilenet(X):
    return X * np.clip(X + 3, 0, 6) / 6


def _dhard_swish_mobilenet(X):
    return np.where(X > 3, 1.0, np.where(X < -3, 0.0, (2 * X + 3) / 6))


def _maxout(X):
    return X.max(axis=-1), X.argmax(axis=-1)


def _backprop_maxout(dY, which, P):
    dX = np.zeros((*dY.shape, P))
    np.put_along_axis(dX, np.asarray(which, dtype="int64")[..., None], np.asarray(dY)[..., None], axis=-1)
    return dX


def _starts_ends(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype("int32")


def _reduce_max(X, lengths):
    maxes = _reduce(lambda p: p.max(axis=0), X, lengths)
    which = np.array([p.argmax(axis=0) for p in split_rows(np.asarray(X), lengths)]).reshape(maxes.shape)
    return maxes, which


def _backprop_reduce_max(d_maxes, which, lengths):
    dX = np.zeros((sum(lengths), d_maxes.shape[1]))
    for i, (start, n) in enumerate(zip(_starts_ends(lengths)[:-1], lengths)):
        for j in range(d_maxes.shape[1]):
            dX[start + which[i, j], j] = d_maxes[i, j]
    return dX


def _position_encode(N, D, period=10000):
    out = np.zeros((N, D))
    pos = np.arange(N, dtype="float64")[:, None]
    for j in range(0, D - 1, 2):
        out[:, j : j + 1] = np.sin(pos / period ** (2 * j / D))
        out[:, j + 1 : j + 2] = np.cos(pos / period ** (2 * j / D))
    if D % 2:
        # NOTE: Thinc fills an odd last column with the sine of the previous pair's
        # frequency (of frequency 1 when D == 1), not with a new frequency.
        j_prev = max(D - 3, 0)
        out[:, D - 1 : D] = np.sin(pos / period ** (2 * j_prev / D))
    return out


def _logloss(y_true, y_pred):
    return -(y_true * np.log(y_pred + 1e-8) + (1 - y_true) * np.log((1 - y_pred) + 1e-8))


# --- the table of array ops ----------------------------------------------------------------

LENGTHS = [2, 0, 3, 1]  # includes a zero-length sequence
POS_LENGTHS = [2, 3, 1, 1]


@dataclass
class Case:
    id: str
    method: str
    make: Callable[[np.random.Generator, str], Tuple[tuple, dict]]
    formula: Callable[..., Any]
    inplace_targets: Optional[Tuple[int, ...]] = None  # args that inplace=True may write into
    dtypes: Tuple[str, ...] = FLOATS
    tol: float = 1.0
    keeps_dtype: bool = True


def _u(rng, shape, dtype, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def _i32(x):
    return np.asarray(x, dtype="int32")


def _elementwise(method, formula, lo=-4.0, hi=4.0, shape=(4, 5), **kw):
    return Case(
        id=method if "id" not in kw else kw.pop("id"),
        method=method,
        make=lambda rng, dt: ((_u(rng, shape, dt, lo, hi),), dict(kw.get("kwargs", {}))),
        formula=lambda X, **k: formula(np.asarray(X, dtype="float64"), **k),
        inplace_targets=(0,),
        **{k: v for k, v in kw.items() if k != "kwargs"},
    )


def _backprop_elementwise(method, formula, lo=-4.0, hi=4.0, shape=(3, 2, 4), **kw):
    """backprop_op(dY, X, **kwargs); inplace writes into dY."""
    return Case(
        id=method if "id" not in kw else kw.pop("id"),
        method=method,
        make=lambda rng, dt: ((_u(rng, shape, dt, -1, 1), _u(rng, shape, dt, lo, hi)), dict(kw.get("kwargs", {}))),
        formula=lambda dY, X, **k: formula(np.asarray(dY, dtype="float64"), np.asarray(X, dtype="float64"), **k),
        inplace_targets=(0,),
        **{k: v for k, v in kw.items() if k != "kwargs"},
    )


CLIP_KW = dict(slope=0.5, offset=0.25, min_val=-0.5, max_val=2.0)

CASES = [
    _elementwise("sigmoid", special.expit, lo=-30, hi=30),
    _elementwise("dsigmoid", lambda Y: Y * (1 - Y), lo=0.0, hi=1.0),
    _elementwise("dtanh", lambda Y: 1 - Y**2, lo=-1.0, hi=1.0),
    Case(
        "backprop_sigmoid",
        "backprop_sigmoid",
        lambda rng, dt: ((_u(rng, (4, 5), dt, -1, 1), _u(rng, (4, 5), dt, 0, 1)), {}),
        lambda dY, Y: np.asarray(dY, "float64") * Y * (1 - np.asarray(Y, "float64")),
        inplace_targets=(0, 1),  # Thinc writes into Y; writing into dY is as good
    ),
    _elementwise("softmax", _softmax),
    _elementwise(
        "softmax", _softmax, id="softmax_axis0_t2", kwargs=dict(axis=0, temperature=2.0)
    ),
    _elementwise(
        "softmax",
        _softmax,
        id="softmax_3d_axis1_t05",
        shape=(2, 3, 4),
        kwargs=dict(axis=1, temperature=0.5),
    ),
    Case(
        "backprop_softmax",
        "backprop_softmax",
        lambda rng, dt: ((_softmax(_u(rng, (4, 5), "float64")).astype(dt), _u(rng, (4, 5), dt, -1, 1)), {}),
        _backprop_softmax,
    ),
    Case(
        "backprop_softmax_axis0_t2",
        "backprop_softmax",
        lambda rng, dt: (
            (_softmax(_u(rng, (4, 5), "float64"), axis=0).astype(dt), _u(rng, (4, 5), dt, -1, 1)),
            dict(axis=0, temperature=2.0),
        ),
        _backprop_softmax,
    ),
    Case(
        "softmax_sequences",
        "softmax_sequences",
        lambda rng, dt: ((_u(rng, (sum(LENGTHS), 3), dt), _i32(LENGTHS)), {}),
        lambda X, L: _softmax_sequences(X, list(L)),
        inplace_targets=(0,),
    ),
    Case(
        "backprop_softmax_sequences",
        "backprop_softmax_sequences",
        lambda rng, dt: (
            (
                _u(rng, (sum(LENGTHS), 3), dt, -1, 1),
                _softmax_sequences(_u(rng, (sum(LENGTHS), 3), "float64"), LENGTHS).astype(dt),
                _i32(LENGTHS),
            ),
            {},
        ),
        lambda dY, Y, L: _backprop_softmax_sequences(dY, Y, list(L)),
    ),
    _elementwise("relu", lambda X: X * (X > 0)),
    Case(
        "backprop_relu",
        "backprop_relu",
        lambda rng, dt: ((_u(rng, (4, 5), dt, -1, 1), np.maximum(_u(rng, (4, 5), dt), 0)), {}),
        lambda dY, Y: np.asarray(dY, "float64") * (Y > 0),
        inplace_targets=(0,),
    ),
    _elementwise("clipped_linear", _clipped),
    _elementwise("clipped_linear", _clipped, id="clipped_linear_params", kwargs=CLIP_KW),
    _backprop_elementwise("backprop_clipped_linear", _dclipped),
    _backprop_elementwise("backprop_clipped_linear", _dclipped, id="backprop_clipped_linear_params", kwargs=CLIP_KW),
    _elementwise("relu_k", lambda X: np.clip(X, 0, 6), lo=-3, hi=9),
    _elementwise("relu_k", lambda X, n: np.clip(X, 0, n), id="relu_k_n2", kwargs=dict(n=2.0)),
    _backprop_elementwise("backprop_relu_k", lambda dY, X: dY * ((0 < X) & (X < 6)), lo=-3, hi=9),
    _backprop_elementwise(
        "backprop_relu_k", lambda dY, X, n: dY * ((0 < X) & (X < n)), id="backprop_relu_k_n2", kwargs=dict(n=2.0)
    ),
    _elementwise("hard_sigmoid", lambda X: np.clip(0.2 * X + 0.5, 0, 1)),
    _backprop_elementwise(
        "backprop_hard_sigmoid", lambda dY, X: dY * 0.2 * ((-2.5 < X) & (X < 2.5))
    ),
    _elementwise("hard_tanh", lambda X: np.clip(X, -1, 1)),
    _backprop_elementwise(
        "backprop_hard_tanh", lambda dY, X: dY * ((-1 < X) & (X < 1))
    ),
    _elementwise("hard_swish", _hard_swish),
    _backprop_elementwise("backprop_hard_swish", lambda dY, X: dY * _dhard_swish(X)),
    _elementwise("hard_swish_mobilenet", _hard_swish_mobilenet, lo=-5, hi=5),
    _backprop_elementwise("backprop_hard_swish_mobilenet", lambda dY, X: dY * _dhard_swish_mobilenet(X), lo=-5, hi=5),
    _elementwise("swish", lambda X: X * special.expit(X), lo=-8, hi=8),
    Case(
        "backprop_swish",
        "backprop_swish",
        lambda rng, dt: (
            (lambda X: (_u(rng, (4, 5), dt, -1, 1), X, (X * special.expit(X.astype("float64"))).astype(dt)))(
                _u(rng, (4, 5), dt, -8, 8)
            ),
            {},
        ),
        lambda dY, X, Y: dY * (special.expit(X) + X * special.expit(X) * (1 - special.expit(X))),
        inplace_targets=(0,),
    ),
    _elementwise("dish", _dish, lo=-6, hi=6),
    _backprop_elementwise("backprop_dish", lambda dY, X: dY * _ddish(X), lo=-6, hi=6),
    _elementwise("gelu", lambda X: X * _gaussian_cdf(X), lo=-5, hi=5),
    _backprop_elementwise(
        "backprop_gelu",
        lambda dY, X: dY * (_gaussian_cdf(X) + X * np.exp(-0.5 * X**2) / math.sqrt(2 * math.pi)),
        lo=-5,
        hi=5,
    ),
    _elementwise("gelu_approx", _gelu_approx, lo=-5, hi=5),
    # Thinc rounds the constants of this derivative and accumulates it in float32.
    _backprop_elementwise("backprop_gelu_approx", lambda dY, X: dY * _dgelu_approx(X), lo=-5, hi=5, tol=10.0),
    _elementwise("mish", _mish, lo=-6, hi=6),
    _elementwise("mish", _mish, id="mish_threshold_1", lo=-3, hi=3, kwargs=dict(threshold=1.0)),
    _elementwise("mish", _mish, id="mish_large", lo=15, hi=40),
    _backprop_elementwise("backprop_mish", _backprop_mish, lo=-6, hi=6, shape=(4, 5)),
    _backprop_elementwise(
        "backprop_mish", _backprop_mish, id="backprop_mish_threshold_1", lo=-3, hi=3, shape=(4, 5), kwargs=dict(threshold=1.0)
    ),
    Case(
        "erf",
        "erf",
        lambda rng, dt: ((_u(rng, (4, 5), dt, -4, 4),), {}),
        lambda X: special.erf(np.asarray(X, "float64")),
        tol=1.0,
    ),
    Case(
        "sechsq",
        "sechsq",
        lambda rng, dt: ((np.concatenate([_u(rng, (3, 5), dt, -5, 5), np.array([[-40, -21, 0, 21, 40]], dt)]),), {}),
        lambda X: 1 / np.cosh(np.asarray(X, "float64")) ** 2,
    ),
    Case(
        "logloss",
        "logloss",
        lambda rng, dt: (((rng.random((4, 5)) > 0.5).astype(dt), _u(rng, (4, 5), dt, 0.01, 0.99)), {}),
        lambda y, p: _logloss(np.asarray(y, "float64"), np.asarray(p, "float64")),
    ),
    Case(
        "maxout",
        "maxout",
        lambda rng, dt: ((_u(rng, (4, 3, 5), dt),), {}),
        lambda X: _maxout(np.asarray(X, "float64")),
    ),
    Case(
        "maxout_empty",
        "maxout",
        lambda rng, dt: ((np.zeros((0, 3, 2), dt),), {}),
        lambda X: (np.zeros((0, 3)), np.zeros((0, 3), "int32")),
    ),
    Case(
        "backprop_maxout",
        "backprop_maxout",
        lambda rng, dt: ((_u(rng, (4, 3), dt), _i32(rng.integers(0, 5, (4, 3))), 5), {}),
        lambda dY, which, P: _backprop_maxout(dY, which, P),
    ),
    *[
        Case(
            f"seq2col_nW{nW}_{'lengths' if with_lengths else 'nolengths'}",
            "seq2col",
            (
                lambda nW, wl: lambda rng, dt: (
                    (_u(rng, (sum(LENGTHS), 3), dt), nW),
                    dict(lengths=_i32(LENGTHS)) if wl else {},
                )
            )(nW, with_lengths),
            lambda X, nW, lengths=None: _seq2col(X, nW, None if lengths is None else list(lengths)),
        )
        for nW in (1, 2, 3)
        for with_lengths in (False, True)
    ],
    *[
        Case(
            f"backprop_seq2col_nW{nW}_{'lengths' if with_lengths else 'nolengths'}",
            "backprop_seq2col",
            (
                lambda nW, wl: lambda rng, dt: (
                    (_u(rng, (sum(LENGTHS), 3 * (2 * nW + 1)), dt), nW),
                    dict(lengths=_i32(LENGTHS)) if wl else {},
                )
            )(nW, with_lengths),
            lambda dY, nW, lengths=None: _backprop_seq2col(dY, nW, None if lengths is None else list(lengths)),
        )
        for nW in (1, 2, 3)
        for with_lengths in (False, True)
    ],
    Case(
        "reduce_sum",
        "reduce_sum",
        lambda rng, dt: ((_u(rng, (sum(LENGTHS), 3), dt), _i32(LENGTHS)), {}),
        lambda X, L: _reduce(lambda p: p.sum(axis=0), X, list(L)),
    ),
    Case(
        "reduce_mean",
        "reduce_mean",
        lambda rng, dt: ((_u(rng, (sum(LENGTHS), 3), dt), _i32(LENGTHS)), {}),
        lambda X, L: _reduce(lambda p: p.mean(axis=0), X, list(L)),
    ),
    Case(
        "reduce_max",
        "reduce_max",
        lambda rng, dt: ((_u(rng, (sum(POS_LENGTHS), 3), dt), _i32(POS_LENGTHS)), {}),
        lambda X, L: _reduce_max(np.asarray(X, "float64"), list(L)),
    ),
    Case(
        "reduce_first",
        "reduce_first",
        lambda rng, dt: ((_u(rng, (sum(POS_LENGTHS), 3), dt), _i32(POS_LENGTHS)), {}),
        lambda X, L: (np.asarray(X)[_starts_ends(L)[:-1]], _starts_ends(L)),
    ),
    Case(
        "reduce_last",
        "reduce_last",
        lambda rng, dt: ((_u(rng, (sum(POS_LENGTHS), 3), dt), _i32(POS_LENGTHS)), {}),
        lambda X, L: (np.asarray(X)[np.cumsum(L) - 1], np.cumsum(L) - 1),
    ),
    Case(
        "backprop_reduce_sum",
        "backprop_reduce_sum",
        lambda rng, dt: ((_u(rng, (len(LENGTHS), 3), dt), _i32(LENGTHS)), {}),
        lambda d, L: np.repeat(np.asarray(d, "float64"), L, axis=0),
    ),
    Case(
        "backprop_reduce_mean",
        "backprop_reduce_mean",
        lambda rng, dt: ((_u(rng, (len(LENGTHS), 3), dt), _i32(LENGTHS)), {}),
        lambda d, L: np.repeat(np.asarray(d, "float64") / np.maximum(L, 1)[:, None], L, axis=0),
    ),
    Case(
        "backprop_reduce_max",
        "backprop_reduce_max",
        lambda rng, dt: (
            (
                _u(rng, (len(POS_LENGTHS), 3), dt),
                _i32(np.floor(rng.random((len(POS_LENGTHS), 3)) * np.array(POS_LENGTHS)[:, None])),
                _i32(POS_LENGTHS),
            ),
            {},
        ),
        lambda d, which, L: _backprop_reduce_max(np.asarray(d, "float64"), which, list(L)),
    ),
    Case(
        "backprop_reduce_first",
        "backprop_reduce_first",
        lambda rng, dt: ((_u(rng, (len(POS_LENGTHS), 3), dt), _starts_ends(POS_LENGTHS)), {}),
        lambda d, se: _scatter_rows(d, se[:-1], int(se[-1])),
    ),
    Case(
        "backprop_reduce_last",
        "backprop_reduce_last",
        lambda rng, dt: ((_u(rng, (len(POS_LENGTHS), 3), dt), _i32(np.cumsum(POS_LENGTHS) - 1)), {}),
        lambda d, lasts: _scatter_rows(d, lasts, int(lasts[-1]) + 1),
    ),
    *[
        Case(
            f"gemm_t{int(t1)}{int(t2)}",
            "gemm",
            (
                lambda t1, t2: lambda rng, dt: (
                    (_u(rng, (3, 4) if t1 else (4, 3), dt), _u(rng, (5, 3) if t2 else (3, 5), dt)),
                    dict(trans1=t1, trans2=t2),
                )
            )(t1, t2),
            lambda x, y, trans1, trans2: (x.T if trans1 else x).astype("float64") @ (y.T if trans2 else y),
        )
        for t1 in (False, True)
        for t2 in (False, True)
    ],
    Case(
        "affine",
        "affine",
        lambda rng, dt: ((_u(rng, (4, 3), dt), _u(rng, (5, 3), dt), _u(rng, (5,), dt)), {}),
        lambda X, W, b: np.asarray(X, "float64") @ W.T + b,
    ),
    Case(
        "tile",
        "tile",
        lambda rng, dt: ((_u(rng, (2, 3), dt), 3), {}),
        lambda X, reps: np.tile(X, reps),
    ),
    Case(
        "gather_add",
        "gather_add",
        lambda rng, dt: ((_u(rng, (6, 3), dt), _i32(rng.integers(0, 6, (4, 2)))), {}),
        lambda table, idx: np.asarray(table, "float64")[idx].sum(axis=1),
    ),
    Case(
        "insert_into",
        "insert_into",
        lambda rng, dt: (((3, 4, 2), [_u(rng, (n, 2), dt) for n in (2, 4, 0)]), {}),
        lambda shape, Xs: _insert_into(shape, Xs),
    ),
]


def _scatter_rows(d, rows, n_rows):
    out = np.zeros((n_rows, d.shape[1]))
    out[np.asarray(rows)] = d
    return out


def _insert_into(shape, Xs):
    out = np.zeros(shape)
    for i, x in enumerate(Xs):
        out[i, : len(x)] = x
    return out


CASE_IDS = [c.id for c in CASES]
CASE_BY_ID = {c.id: c for c in CASES}
assert len(CASE_BY_ID) == len(CASES), "duplicate case ids"
INPLACE_IDS = [c.id for c in CASES if c.inplace_targets is not None]


# --- helpers -------------------------------------------------------------------------------


def _dev(ops, value):
    """Move numpy arrays (also inside lists/tuples) onto the backend."""
    if isinstance(value, np.ndarray):
        return ops.asarray(value.copy())
    if isinstance(value, list):
        return [_dev(ops, v) for v in value]
    return value


def _norm(ops, value):
    """Backend result -> numpy arrays, with tuples/lists/Padded/Ragged unpacked into lists."""
    if value is None or isinstance(value, (int, float, np.number)):
        return value
    if isinstance(value, (tuple, list)):
        return [_norm(ops, v) for v in value]
    if hasattr(value, "size_at_t"):  # Padded
        return [_norm(ops, value.data), *(_norm(ops, getattr(value, a)) for a in ("size_at_t", "lengths", "indices"))]
    if hasattr(value, "lengths") and hasattr(value, "data"):  # Ragged
        return [_norm(ops, value.data), _norm(ops, value.lengths)]
    return to_np(ops, value)


def _assert_same(actual, expected, *, rtol, atol, dtype=None, path="result"):
    """Recursive allclose; float arrays must have `dtype` when given, int arrays an int dtype."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), f"{path}: expected a sequence, got {type(actual)}"
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            _assert_same(a, e, rtol=rtol, atol=atol, dtype=dtype, path=f"{path}[{i}]")
        return
    if expected is None:
        assert actual is None, f"{path}: expected None, got {type(actual)}"
        return
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind in "iu":
        assert actual.dtype.kind in "iu", f"{path}: dtype {actual.dtype}, expected integers"
        np.testing.assert_array_equal(actual, expected, err_msg=path)
    else:
        if dtype is not None and actual.dtype.kind == "f":
            assert actual.dtype == np.dtype(dtype), f"{path}: dtype {actual.dtype} != {dtype}"
        assert_allclose(actual.astype("float64"), expected.astype("float64"), rtol=rtol, atol=atol, err_msg=path)


def _run(ops, case, args, kwargs):
    return _norm(ops, getattr(ops, case.method)(*_dev(ops, list(args)), **kwargs))


@pytest.fixture(scope="module")
def thinc_ops():
    pytest.importorskip("thinc")
    from thinc.backends.numpy_ops import NumpyOps as ThincNumpyOps

    # use_blis=False: Thinc's BLIS gemm is float32-only; its numpy path is the same maths.
    return ThincNumpyOps(use_blis=False)


# --- the table-driven tests --------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case_id", CASE_IDS)
def test_matches_formula(ops, case_id, dtype):
    case = CASE_BY_ID[case_id]
    args, kwargs = case.make(np.random.default_rng(0), dtype)
    expected = case.formula(*args, **kwargs)
    actual = _run(ops, case, args, kwargs)
    _assert_same(actual, expected, dtype=dtype if case.keeps_dtype else None, **_tol(dtype, case.tol))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case_id", CASE_IDS)
def test_matches_thinc(ops, thinc_ops, case_id, dtype):
    case = CASE_BY_ID[case_id]
    args, kwargs = case.make(np.random.default_rng(1), dtype)
    expected = _norm(thinc_ops, getattr(thinc_ops, case.method)(*_dev(thinc_ops, list(args)), **kwargs))
    actual = _run(ops, case, args, kwargs)
    _assert_same(actual, expected, dtype=dtype if case.keeps_dtype else None, **_tol(dtype, case.tol))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case_id", CASE_IDS)
def test_numpy_ops_equals_ops(numpy_ops, ref_ops, case_id, dtype):
    case = CASE_BY_ID[case_id]
    args, kwargs = case.make(np.random.default_rng(2), dtype)
    _assert_same(_run(numpy_ops, case, args, kwargs), _run(ref_ops, case, args, kwargs), **_tol(dtype, case.tol))


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_inputs_not_mutated(ops, case_id):
    case = CASE_BY_ID[case_id]
    args, kwargs = case.make(np.random.default_rng(3), "float32")
    dev_args = _dev(ops, list(args))
    before = _norm(ops, [a for a in dev_args if hasattr(a, "shape") or isinstance(a, list)])
    before = [np.array(b, copy=True) if isinstance(b, np.ndarray) else [np.array(x, copy=True) for x in b] for b in before]
    getattr(ops, case.method)(*dev_args, **kwargs)
    after = _norm(ops, [a for a in dev_args if hasattr(a, "shape") or isinstance(a, list)])
    for i, (b, a) in enumerate(zip(before, after)):
        if isinstance(b, list):
            for x, y in zip(b, a):
                np.testing.assert_array_equal(y, x, err_msg=f"{case.method} mutated list argument {i}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{case.method} mutated argument {i}")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case_id", INPLACE_IDS)
def test_inplace_writes_into_input(ops, case_id, dtype):
    # NOTE: Thinc 8.3 ignores inplace=True in softmax, softmax_sequences,
    # backprop_hard_sigmoid and backprop_hard_tanh; plait honours it everywhere.
    case = CASE_BY_ID[case_id]
    args, kwargs = case.make(np.random.default_rng(4), dtype)
    expected = case.formula(*args, **kwargs)
    dev_args = _dev(ops, list(args))
    result = getattr(ops, case.method)(*dev_args, inplace=True, **kwargs)
    xp = ops.xp
    written = [
        dev_args[t] for t in case.inplace_targets if result is dev_args[t] or xp.shares_memory(result, dev_args[t])
    ]
    assert written, (
        f"{case.method}(..., inplace=True) returned a new array instead of writing into "
        f"argument {case.inplace_targets}"
    )
    tol = _tol(dtype, case.tol)
    assert_allclose(to_np(ops, result).astype("float64"), expected, **tol)
    assert_allclose(to_np(ops, written[0]).astype("float64"), expected, **tol)


def test_relu_k_accepts_k_alias(ops):
    X = ops.asarray(np.linspace(-2, 8, 11, dtype="float32"))
    dY = ops.asarray(np.ones(11, dtype="float32"))
    assert_allclose(to_np(ops, ops.relu_k(X, k=3.0)), np.clip(to_np(ops, X), 0, 3))
    assert_allclose(to_np(ops, ops.relu_k(X, k=3.0)), to_np(ops, ops.relu_k(X, n=3.0)))
    assert_allclose(to_np(ops, ops.backprop_relu_k(dY, X, k=3.0)), to_np(ops, ops.backprop_relu_k(dY, X, n=3.0)))


# --- ops that mutate by design -------------------------------------------------------------


def test_gemm_out(ops):
    rng = np.random.default_rng(5)
    x, y = rng.uniform(-1, 1, (4, 3)).astype("f"), rng.uniform(-1, 1, (3, 2)).astype("f")
    out = ops.alloc2f(4, 2)
    result = ops.gemm(ops.asarray(x), ops.asarray(y), out=out)
    assert result is out or ops.xp.shares_memory(result, out)
    assert_allclose(to_np(ops, out), x @ y, rtol=1e-5, atol=1e-6)


def test_scatter_add(ops):
    rng = np.random.default_rng(6)
    table = rng.uniform(-1, 1, (5, 3)).astype("f")
    indices = np.array([0, 3, 3, 1, 0, 4], dtype="int32")
    values = rng.uniform(-1, 1, (6, 3)).astype("f")
    expected = table.astype("float64").copy()
    np.add.at(expected, indices, values)
    dev_table = ops.asarray(table.copy())
    result = ops.scatter_add(dev_table, ops.asarray(indices), ops.asarray(values))
    # Thinc returns None; returning the table is also fine. Either way it is updated.
    assert result is None or result is dev_table or ops.xp.shares_memory(result, dev_table)
    assert_allclose(to_np(ops, dev_table), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("t", [0, 5, 10**6])
def test_update_averages(ops, t):
    ema = np.linspace(-1, 1, 7).astype("f")
    weights = np.linspace(2, 0, 7).astype("f")
    decay = min((1.0 + t) / (10.0 + t), 0.9999)
    expected = ema - (1 - decay) * (ema - weights)
    dev_ema = ops.asarray(ema.copy())
    assert ops.update_averages(dev_ema, ops.asarray(weights), t) is None
    assert_allclose(to_np(ops, dev_ema), expected, rtol=1e-6, atol=1e-7)


def test_update_averages_max_decay(ops):
    ema = np.ones(3, dtype="f")
    weights = np.zeros(3, dtype="f")
    dev_ema = ops.asarray(ema.copy())
    ops.update_averages(dev_ema, ops.asarray(weights), 10**6, max_decay=0.5)
    assert_allclose(to_np(ops, dev_ema), 0.5)


def _adam_reference(w, g, m1, m2, beta1, beta2, eps, lr, mod_rate=1.0):
    m1 = beta1 * m1 + (1 - beta1) * g
    m2 = beta2 * m2 + (1 - beta2) * g * g
    w = w - lr * m1 / (mod_rate * np.sqrt(m2) + eps)
    return w, m1, m2


def _adam_inputs(n=70):
    rng = np.random.default_rng(7)
    w = rng.uniform(-1, 1, n).astype("f")
    g = rng.uniform(-1, 1, n).astype("f")
    m1 = rng.uniform(-0.1, 0.1, n).astype("f")
    m2 = rng.uniform(0, 0.1, n).astype("f")
    return w, g, m1, m2


def test_adam_formula(ops):
    w, g, m1, m2 = _adam_inputs()
    hp = (0.9, 0.999, 1e-8, 0.01)
    exp_w, exp_m1, exp_m2 = _adam_reference(*(a.astype("float64") for a in (w, g, m1, m2)), *hp)
    dev = [ops.asarray(a.copy()) for a in (w, g, m1, m2)]
    out = ops.adam(*dev, *hp)
    assert len(out) == 4
    # The updates happen in place; the returned arrays hold the same values.
    for returned, arg in zip(out, dev):
        assert_allclose(to_np(ops, returned), to_np(ops, arg))
    assert_allclose(to_np(ops, dev[0]), exp_w, rtol=1e-5, atol=1e-6)
    assert_allclose(to_np(ops, dev[2]), exp_m1, rtol=1e-5, atol=1e-7)
    assert_allclose(to_np(ops, dev[3]), exp_m2, rtol=1e-5, atol=1e-7)


def test_adam_matches_thinc(ops):
    pytest.importorskip("thinc")
    from thinc.backends.numpy_ops import NumpyOps as ThincNumpyOps

    # NOTE: Thinc's NumpyOps.adam (and CupyOps') zeroes the gradient in place, its
    # reference Ops.adam does not. plait makes every backend behave like the compiled
    # ones, so all are compared with Thinc's NumpyOps (whose adam is float32 only).
    peer = ThincNumpyOps()
    hp = (0.9, 0.999, 1e-8, 0.01)
    expected = [np.array(a) for a in peer.adam(*(a.copy() for a in _adam_inputs()), *hp)]
    actual = [to_np(ops, a) for a in ops.adam(*(ops.asarray(a.copy()) for a in _adam_inputs()), *hp)]
    for name, a, e in zip(("weights", "gradient", "mom1", "mom2"), actual, expected):
        assert_allclose(a, e, rtol=1e-5, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("threshold", [0.5, 100.0])
def test_clip_gradient(ops, threshold):
    g = np.array([3.0, -4.0, 12.0], dtype="f")  # norm 13
    dev = ops.asarray(g.copy())
    result = ops.clip_gradient(dev, threshold)
    expected = g * threshold / 13.0 if threshold <= 13.0 else g
    assert_allclose(to_np(ops, result), expected, rtol=1e-6)
    # Clipping scales the gradient in place.
    assert_allclose(to_np(ops, dev), expected, rtol=1e-6)


@pytest.mark.parametrize("N,D,period", [(6, 8, 10000), (4, 5, 10), (3, 1, 10000), (0, 4, 10000), (5, 2, 100)])
def test_position_encode(ops, N, D, period):
    out = to_np(ops, ops.position_encode(N, D, period))
    assert out.shape == (N, D)
    assert out.dtype == np.float32
    assert_allclose(out, _position_encode(N, D, period), rtol=1e-5, atol=1e-5)


def test_position_encode_into_out(ops):
    out = ops.alloc2f(5, 6)
    result = ops.position_encode(5, 6, out=out)
    assert result is out or ops.xp.shares_memory(result, out)
    assert_allclose(to_np(ops, out), _position_encode(5, 6), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("N,D,period", [(6, 8, 10000), (4, 5, 10), (3, 1, 10000)])
def test_position_encode_matches_thinc(ops, thinc_ops, N, D, period):
    assert_allclose(to_np(ops, ops.position_encode(N, D, period)), thinc_ops.position_encode(N, D, period), atol=1e-6)


# --- sequences: flatten / unflatten / pad / unpad / padded -----------------------------------


@pytest.mark.parametrize("pad", [0, 1, 3])
@pytest.mark.parametrize("lengths", [[2, 3], [1], [2, 0, 1], [0, 2]])
def test_flatten_unflatten(ops, thinc_ops, pad, lengths):
    rng = np.random.default_rng(8)
    Xs = [rng.uniform(-1, 1, (n, 3)).astype("f") for n in lengths]
    flat = to_np(ops, ops.flatten(_dev(ops, Xs), pad=pad))
    pieces = [np.zeros((pad, 3), "f")]
    for x in Xs:
        if len(x):
            pieces.extend([x, np.zeros((pad, 3), "f")])
    assert_allclose(flat, np.concatenate(pieces))
    assert_allclose(flat, thinc_ops.flatten([x.copy() for x in Xs], pad=pad))
    back = ops.unflatten(ops.asarray(flat), ops.asarray1i(lengths), pad=pad)
    assert len(back) == len(lengths)
    for b, x in zip(back, Xs):
        assert_allclose(to_np(ops, b), x)


def test_flatten_dtype_and_empty(ops):
    flat = ops.flatten(_dev(ops, [np.ones((2, 2), "i"), np.ones((1, 2), "i")]), dtype="f")
    assert to_np(ops, flat).dtype == np.float32
    for ndim in (1, 2, 3):
        empty = to_np(ops, ops.flatten([], ndim_if_empty=ndim))
        assert empty.shape == (0,) * ndim
    assert to_np(ops, ops.flatten(None)).shape == (0, 0)
    # Only empty arrays: the result keeps their trailing shape.
    assert to_np(ops, ops.flatten(_dev(ops, [np.zeros((0, 4), "f")]))).shape == (0, 4)
    ints = to_np(ops, ops.flatten(_dev(ops, [np.arange(3, dtype="i"), np.arange(2, dtype="i")])))
    np.testing.assert_array_equal(ints, [0, 1, 2, 0, 1])
    assert ints.dtype.kind == "i"


def test_flatten_joins_the_arrays_where_they_are():
    """As Thinc's Ops: arrays of another module than the Ops' (numpy ones given to CupyOps) are
    joined with their own module, padding included; checked without a GPU through an Ops whose
    array module is not numpy."""
    pieces = [np.ones((2, 3), "f"), np.full((1, 3), 2.0, "f")]
    flat = other_module_ops().flatten(pieces, pad=1)
    assert type(flat) is np.ndarray
    np.testing.assert_array_equal(flat[:, 0], [0, 1, 1, 0, 2, 0])


@pytest.mark.parametrize("round_to", [1, 2, 4])
def test_pad_unpad(ops, thinc_ops, round_to):
    rng = np.random.default_rng(9)
    lengths = [3, 1, 0, 2]
    Xs = [rng.uniform(-1, 1, (n, 2)).astype("f") for n in lengths]
    padded = to_np(ops, ops.pad(_dev(ops, Xs), round_to=round_to))
    max_len = 3 + (-3 % round_to)
    expected = np.zeros((4, max_len, 2), "f")
    for i, x in enumerate(Xs):
        expected[i, : len(x)] = x
    assert_allclose(padded, expected)
    assert padded.dtype == np.float32
    assert_allclose(padded, thinc_ops.pad([x.copy() for x in Xs], round_to=round_to))
    back = ops.unpad(ops.asarray(padded), lengths)
    for b, x in zip(back, Xs):
        assert_allclose(to_np(ops, b), x)


def test_pad_ints_keeps_dtype(ops):
    padded = to_np(ops, ops.pad(_dev(ops, [np.ones((2, 1), "i"), np.ones((1, 1), "i")])))
    assert padded.dtype == np.int32
    np.testing.assert_array_equal(padded[:, :, 0], [[1, 1], [1, 0]])


@pytest.mark.parametrize("lengths", [[3, 1, 4, 1], [2], [0, 2], [2, 2, 1]])
def test_list2padded_padded2list(ops, thinc_ops, lengths):
    rng = np.random.default_rng(10)
    Xs = [rng.uniform(-1, 1, (n, 3)).astype("f") for n in lengths]
    padded = ops.list2padded(_dev(ops, Xs))
    expected = thinc_ops.list2padded([x.copy() for x in Xs])
    _assert_same(_norm(ops, padded), _norm(thinc_ops, expected), rtol=0, atol=0)
    data = to_np(ops, padded.data)
    order = to_np(ops, padded.indices)
    plengths = to_np(ops, padded.lengths)
    # Sorted by decreasing length, time-major, indices map back to the input order.
    assert list(plengths) == sorted(lengths, reverse=True)
    assert sorted(order.tolist()) == list(range(len(lengths)))
    for b, i in enumerate(order):
        assert_allclose(data[: lengths[i], b], Xs[i])
        assert_allclose(data[lengths[i] :, b], 0.0)
    size_at_t = to_np(ops, padded.size_at_t)
    assert list(size_at_t) == [sum(n > t for n in lengths) for t in range(max(lengths))]
    back = ops.padded2list(padded)
    assert len(back) == len(Xs)
    for b, x in zip(back, Xs):
        assert_allclose(to_np(ops, b), x)


def test_padded_order_is_list2padded_order():
    # Longest first, ties by descending index (Thinc's order), empty sequences last; the LSTM
    # packs its rows by the same order without a Padded batch.
    from plait.backends import NumpyOps
    from plait.backends.ops import padded_order

    order, size_at_t = padded_order([2, 0, 2, 3, 0])
    assert order.tolist() == [3, 2, 0, 4, 1]
    assert size_at_t.tolist() == [3, 3, 1]
    order, size_at_t = padded_order([])
    assert order.tolist() == [] and size_at_t.tolist() == []
    lengths = [5, 1, 5, 0, 3, 1]
    padded = NumpyOps().list2padded([np.zeros((n, 2), "f") for n in lengths])
    order, size_at_t = padded_order(lengths)
    assert padded.indices.tolist() == order.tolist()
    assert padded.size_at_t.tolist() == size_at_t.tolist()


# --- allocation, reshaping, conversion -----------------------------------------------------


ALLOC_F = [("alloc1f", (4,)), ("alloc2f", (2, 3)), ("alloc3f", (2, 1, 3)), ("alloc4f", (1, 2, 1, 3))]
ALLOC_I = [("alloc1i", (4,)), ("alloc2i", (2, 3)), ("alloc3i", (2, 1, 3)), ("alloc4i", (1, 2, 1, 3))]


@pytest.mark.parametrize("method,shape", ALLOC_F + ALLOC_I)
def test_alloc_typed(ops, method, shape):
    default = "float32" if method.endswith("f") else "int32"
    other = "float64" if method.endswith("f") else "int64"
    arr = to_np(ops, getattr(ops, method)(*shape))
    assert arr.shape == shape and arr.dtype == np.dtype(default)
    assert not arr.any()
    arr = to_np(ops, getattr(ops, method)(*shape, dtype=other))
    assert arr.dtype == np.dtype(other)
    arr = to_np(ops, getattr(ops, method)(*shape, zeros=False))
    assert arr.shape == shape and arr.dtype == np.dtype(default)


def test_alloc_generic(ops):
    assert to_np(ops, ops.alloc((2, 3))).dtype == np.float32
    assert to_np(ops, ops.alloc(5)).shape == (5,)
    assert to_np(ops, ops.alloc((2,), dtype="i")).dtype == np.int32
    assert to_np(ops, ops.alloc((2, 2), dtype="float16")).dtype == np.float16
    assert to_np(ops, ops.alloc((0, 3))).shape == (0, 3)
    assert to_np(ops, ops.alloc_f((2, 3))).dtype == np.float32
    assert to_np(ops, ops.alloc_f((2, 3), dtype="float64")).dtype == np.float64
    assert to_np(ops, ops.alloc_i((2, 3))).dtype == np.int32
    assert to_np(ops, ops.alloc_i((2, 3), dtype="uint64")).dtype == np.uint64
    assert not to_np(ops, ops.alloc((3, 3))).any()


RESHAPES = [
    ("reshape1", (6,)),
    ("reshape2", (2, 3)),
    ("reshape3", (1, 2, 3)),
    ("reshape4", (1, 2, 1, 3)),
    ("reshape1f", (6,)),
    ("reshape2f", (3, 2)),
    ("reshape3f", (3, 1, 2)),
    ("reshape4f", (3, 1, 2, 1)),
    ("reshape1i", (6,)),
    ("reshape2i", (3, 2)),
    ("reshape3i", (3, 1, 2)),
    ("reshape4i", (3, 1, 2, 1)),
]


@pytest.mark.parametrize("method,shape", RESHAPES)
def test_reshape_typed(ops, method, shape):
    dtype = "int32" if method.endswith("i") else "float32"
    data = np.arange(6).astype(dtype).reshape(2, 3)
    out = getattr(ops, method)(ops.asarray(data), *shape)
    np.testing.assert_array_equal(to_np(ops, out), data.reshape(shape))
    # Reshaping does not change the dtype (not even the typed variants).
    assert to_np(ops, out).dtype == np.dtype(dtype)
    # -1 infers one dimension.
    inferred = getattr(ops, method)(ops.asarray(data), *shape[:-1], -1)
    assert to_np(ops, inferred).shape == shape


def test_reshape_generic(ops):
    data = ops.asarray(np.arange(6, dtype="f"))
    assert to_np(ops, ops.reshape(data, (2, 3))).shape == (2, 3)
    assert to_np(ops, ops.reshape(data, 6)).shape == (6,)
    assert to_np(ops, ops.reshape_f(data, (3, 2))).shape == (3, 2)
    ints = ops.asarray(np.arange(6, dtype="i"))
    assert to_np(ops, ops.reshape_i(ints, (3, 2))).dtype == np.int32
    # The typed float variants do not cast ints.
    assert to_np(ops, ops.reshape2f(ints, 2, 3)).dtype == np.int32


ASARRAY = [
    ("asarray1f", [1, 2], np.float32, (2,)),
    ("asarray2f", [[1, 2]], np.float32, (1, 2)),
    ("asarray3f", [[[1], [2]]], np.float32, (1, 2, 1)),
    ("asarray4f", [[[[1]]]], np.float32, (1, 1, 1, 1)),
    ("asarray_f", [[1, 2]], np.float32, (1, 2)),
    ("asarray1i", [1, 2], np.int32, (2,)),
    ("asarray2i", [[1, 2]], np.int32, (1, 2)),
    ("asarray3i", [[[1], [2]]], np.int32, (1, 2, 1)),
    ("asarray4i", [[[[1]]]], np.int32, (1, 1, 1, 1)),
    ("asarray_i", [[1, 2]], np.int32, (1, 2)),
]


@pytest.mark.parametrize("method,data,dtype,shape", ASARRAY)
def test_asarray_typed(ops, method, data, dtype, shape):
    out = to_np(ops, getattr(ops, method)(data))
    assert out.shape == shape and out.dtype == dtype
    # Converting an array of another dtype casts it.
    other = np.asarray(data, dtype="float64" if dtype == np.int32 else "int64")
    cast = to_np(ops, getattr(ops, method)(ops.asarray(other)))
    assert cast.dtype == dtype
    np.testing.assert_array_equal(cast, np.asarray(data, dtype=dtype))
    explicit = "float64" if dtype == np.float32 else "int64"
    assert to_np(ops, getattr(ops, method)(data, dtype=explicit)).dtype == np.dtype(explicit)


def test_asarray_generic(ops):
    arr = ops.asarray(np.ones((2, 2), dtype="f"))
    # An array of the right kind and dtype is returned as is.
    assert ops.asarray(arr) is arr
    assert ops.asarray(arr, dtype="float32") is arr
    assert to_np(ops, ops.asarray(arr, dtype="float64")).dtype == np.float64
    assert to_np(ops, ops.asarray([1, 2])).dtype.kind == "i"
    assert to_np(ops, ops.asarray([1.0, 2.0])).dtype == np.float64
    assert to_np(ops, ops.asarray([1, 2], dtype="f")).dtype == np.float32
    nested = ops.asarray([np.ones(2, "f"), np.zeros(2, "f")])
    assert to_np(ops, nested).shape == (2, 2)


def test_as_contig(ops):
    arr = ops.asarray(np.arange(6, dtype="f").reshape(2, 3))
    # Already contiguous with the same dtype: no copy needed.
    assert ops.as_contig(arr) is arr
    transposed = arr.T
    contig = ops.as_contig(transposed)
    assert contig.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(to_np(ops, contig), to_np(ops, transposed))
    cast = ops.as_contig(arr, dtype="float64")
    assert cast.dtype == np.float64 and cast.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(to_np(ops, cast), to_np(ops, arr))


def test_unzip(ops):
    if not hasattr(ops, "unzip"):
        pytest.skip("unzip is documented but not part of Thinc 8.3's Ops")
    # As in Thinc 7 (8.3 dropped the method): a sequence of (x, y) pairs -> (X, Y).
    a, b = ops.unzip([(1, [3.0]), (2, [4.0]), (5, [6.0])])
    np.testing.assert_array_equal(to_np(ops, a), [1, 2, 5])
    np.testing.assert_array_equal(to_np(ops, b), [[3.0], [4.0], [6.0]])
    assert isinstance(a, ops.xp.ndarray) and isinstance(b, ops.xp.ndarray)


@pytest.mark.parametrize("byte_order", [None, ">", "<", "="])
def test_to_numpy_byte_order(ops, byte_order):
    data = ops.asarray(np.arange(4, dtype="float32"))
    out = ops.to_numpy(data, byte_order=byte_order)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, np.arange(4, dtype="float32"))
    if byte_order == ">":
        assert out.dtype.byteorder == ">"
    elif byte_order == "<":
        assert out.dtype.byteorder in "<="  # native little-endian is reported as "="
    if byte_order is not None:
        assert out.dtype == np.dtype("float32").newbyteorder(byte_order)


@pytest.mark.parametrize("drop", [None, 0.0, -0.5])
def test_dropout_mask_no_drop(ops, drop):
    mask = to_np(ops, ops.get_dropout_mask((3, 4), drop))
    assert mask.shape == (3, 4) and mask.dtype == np.float32
    assert np.all(mask == 1.0)


@pytest.mark.parametrize("drop", [1.0, 1.5])
def test_dropout_mask_drop_all(ops, drop):
    mask = to_np(ops, ops.get_dropout_mask((3, 4), drop))
    assert mask.shape == (3, 4) and mask.dtype == np.float32
    assert np.all(mask == 0.0)


@pytest.mark.parametrize("drop", [0.2, 0.5])
def test_dropout_mask_rate(ops, drop):
    mask = to_np(ops, ops.get_dropout_mask((200, 50), drop))
    assert mask.dtype == np.float32
    kept = mask != 0
    # Kept units are rescaled so that the expected value of the mask is 1.
    assert_allclose(mask[kept], 1.0 / (1.0 - drop), rtol=1e-6)
    assert abs((~kept).mean() - drop) < 0.03  # 10k draws: the std of the rate is ~0.005


def test_tile_matches_numpy(ops):
    X = np.arange(6, dtype="f").reshape(2, 3)
    for reps in (1, 2, 4):
        np.testing.assert_array_equal(to_np(ops, ops.tile(ops.asarray(X), reps)), np.tile(X, reps))


@pytest.mark.parametrize("dtype", FLOATS)
def test_erf_and_sechsq_match_thinc(ops, thinc_ops, dtype):
    X = np.linspace(-6, 6, 49).astype(dtype)
    for method in ("erf", "sechsq"):
        actual = to_np(ops, getattr(ops, method)(ops.asarray(X.copy())))
        expected = getattr(thinc_ops, method)(X.copy())
        assert actual.dtype == np.dtype(dtype)
        # Thinc's erf is a rational approximation (error < 1.5e-7); an exact erf passes too.
        assert_allclose(actual, expected, rtol=1e-5, atol=5e-7)


# --- minibatch / multibatch ----------------------------------------------------------------


def _batches_equal(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        if isinstance(e, (list, tuple)):
            assert type(a) is type(e)
            assert list(a) == list(e)
        else:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(e))


@pytest.mark.parametrize("kind", ["list", "tuple", "array"])
@pytest.mark.parametrize("size,n", [(3, 10), (4, 8), (20, 5), (1, 3), (3, 0)])
def test_minibatch_sequences(ops, kind, size, n):
    data = list(range(n))
    seq = {"list": data, "tuple": tuple(data), "array": ops.asarray(np.arange(n, dtype="i"))}[kind]
    batches = ops.minibatch(size, seq)
    assert len(batches) == math.ceil(n / size)
    got = list(batches)
    assert len(got) == len(batches)
    expected = [data[i : i + size] for i in range(0, n, size)]
    for batch, exp in zip(got, expected):
        if kind == "list":
            assert isinstance(batch, list) and batch == exp
        elif kind == "tuple":
            assert isinstance(batch, tuple) and list(batch) == exp
        else:
            assert isinstance(batch, ops.xp.ndarray) and batch.flags["C_CONTIGUOUS"]
            np.testing.assert_array_equal(to_np(ops, batch), exp)
    # A SizedGenerator can be iterated again.
    assert len(list(batches)) == len(got)


def test_minibatch_buffer_does_not_change_batches(ops):
    data = list(range(17))
    plain = list(ops.minibatch(3, data))
    for buffer in (2, 4, 100):
        batches = ops.minibatch(3, data, buffer=buffer)
        assert len(batches) == len(plain)
        assert list(batches) == plain


def test_minibatch_shuffle(ops):
    data = list(range(50))
    batches = ops.minibatch(7, data, shuffle=True)
    assert len(batches) == 8
    first = list(batches)
    assert [len(b) for b in first] == [7] * 7 + [1]
    flat = [x for b in first for x in b]
    assert sorted(flat) == data
    assert flat != data  # 50! orders: the identity is (practically) impossible
    # Every pass reshuffles.
    second = [x for b in batches for x in b]
    assert sorted(second) == data and second != flat
    # The input is not reordered.
    assert data == list(range(50))


def test_minibatch_size_generator(ops):
    def sizes():
        for s in itertools.cycle([2, 3]):
            yield s

    batches = ops.minibatch(sizes(), list(range(10)))
    assert len(batches) == 4
    assert list(batches) == [[0, 1], [2, 3, 4], [5, 6], [7, 8, 9]]
    # The sizes are drawn once, when the generator is made: every pass is the same.
    assert list(batches) == [[0, 1], [2, 3, 4], [5, 6], [7, 8, 9]]


def test_minibatch_ragged(ops):
    from plait.types import Ragged

    lengths = np.array([2, 1, 3, 1, 2], dtype="i")
    data = np.arange(18, dtype="f").reshape(9, 2)
    ragged = Ragged(ops.asarray(data), ops.asarray(lengths))
    batches = list(ops.minibatch(2, ragged))
    assert len(batches) == 3
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for k, batch in enumerate(batches):
        assert isinstance(batch, Ragged)
        idx = list(range(2 * k, min(2 * k + 2, 5)))
        np.testing.assert_array_equal(to_np(ops, batch.lengths), lengths[idx])
        rows = np.concatenate([data[starts[i] : starts[i + 1]] for i in idx])
        np.testing.assert_array_equal(to_np(ops, batch.data), rows)


def test_minibatch_padded_delegates_to_indexing(ops):
    from plait.types import Padded

    # As many time steps as sequences: Thinc indexes Padded.data along both axes.
    Xs = [np.full((n, 2), i, dtype="f") for i, n in enumerate([4, 1, 2, 3])]
    padded = ops.list2padded(_dev(ops, Xs))
    assert isinstance(padded, Padded)
    batches = list(ops.minibatch(3, padded))
    assert len(batches) == 2
    for k, batch in enumerate(batches):
        assert isinstance(batch, Padded)
        expected = padded[np.arange(3 * k, min(3 * k + 3, 4))]
        _assert_same(_norm(ops, batch), _norm(ops, expected), rtol=0, atol=0)


def test_minibatch_pairs(ops):
    from plait.types import Pairs

    X = ops.asarray(np.arange(10, dtype="f"))
    Y = ops.asarray(np.arange(100, 110, dtype="i"))
    batches = list(ops.minibatch(4, Pairs(X, Y), shuffle=True))
    assert len(batches) == 3
    for batch in batches:
        assert isinstance(batch, Pairs)
        # Shuffled pairs stay aligned.
        assert_allclose(to_np(ops, batch.one) + 100, to_np(ops, batch.two))


def test_multibatch(ops):
    X = ops.asarray(np.arange(11, dtype="i"))
    Y = [x * 10 for x in range(11)]
    Z = tuple(str(x) for x in range(11))
    batches = ops.multibatch(3, X, Y, Z, shuffle=True)
    assert len(batches) == 4
    seen = []
    for bx, by, bz in batches:
        bx = to_np(ops, bx).tolist()
        assert isinstance(by, list) and isinstance(bz, tuple)
        assert by == [x * 10 for x in bx]
        assert list(bz) == [str(x) for x in bx]
        seen.extend(bx)
    assert sorted(seen) == list(range(11))
    plain = list(ops.multibatch(5, list(range(7)), list(range(7)), buffer=3))
    assert plain == [[[0, 1, 2, 3, 4], [0, 1, 2, 3, 4]], [[5, 6], [5, 6]]]


def test_minibatch_matches_thinc(ops, thinc_ops):
    data = list(range(13))
    for size in (1, 4, 13, 20):
        assert list(ops.minibatch(size, data)) == list(thinc_ops.minibatch(size, data))
        assert len(ops.minibatch(size, data)) == len(thinc_ops.minibatch(size, data))
        assert list(ops.multibatch(size, data, data)) == list(thinc_ops.multibatch(size, data, data))
