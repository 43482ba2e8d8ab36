"""Float64 central-difference checks of every forward/backward pair of the Ops.

Each test computes the numerical gradient of `sum(forward(X) * dY)` and compares
it with the op's own backprop, on hypothesis-drawn shapes and ragged lengths,
including empty batches, zero-length and one-row sequences.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

try:
    from ._gradcheck import (
        GRAD_SETTINGS,
        away_from_kinks,
        concat_rows,
        distinct_along,
        numeric_grad,
        numeric_vjp,
        ragged_lengths,
        seeds,
        small_shapes,
        split_rows,
        to_np,
    )
except ImportError:  # tests/ is not a package: pytest puts this folder on sys.path
    from _gradcheck import (  # type: ignore[no-redef]
        GRAD_SETTINGS,
        away_from_kinks,
        concat_rows,
        distinct_along,
        numeric_grad,
        numeric_vjp,
        ragged_lengths,
        seeds,
        small_shapes,
        split_rows,
        to_np,
    )

EPS = 1e-6
RTOL = 1e-5
ATOL = 1e-6


def _lengths(ops, lengths):
    return ops.asarray1i(np.asarray(lengths, dtype="int32"))


def _check(ops, forward, backward, X, dY=None, *, rtol=RTOL, atol=ATOL, seed=0):
    """Compare backward(dY) with the numerical vector-Jacobian product at X.

    forward: numpy float64 array -> backend array; backward: numpy dY -> backend dX.
    """
    Y = to_np(ops, forward(X))
    if dY is None:
        dY = np.random.default_rng(seed + 1).uniform(-1.0, 1.0, size=Y.shape)
    dX = to_np(ops, backward(dY))
    expected = numeric_vjp(lambda Z: to_np(ops, forward(Z)), X, dY, EPS)
    assert dX.shape == X.shape, f"backprop returned shape {dX.shape}, input was {X.shape}"
    assert_allclose(dX, expected, rtol=rtol, atol=atol)
    return Y, dY, dX


# --- elementwise activations -----------------------------------------------------------
#
# Each case: forward(ops, X) and backward(ops, dY, X, Y), the kinks to stay away from,
# and the range the inputs are drawn from.


def _clipped_kinks(slope, offset, min_val, max_val):
    return [(min_val - offset) / slope, (max_val - offset) / slope]


CLIPPED_PARAMS = [
    dict(slope=1.0, offset=0.0, min_val=0.0, max_val=1.0),
    dict(slope=0.5, offset=0.25, min_val=-0.5, max_val=2.0),
    dict(slope=2.0, offset=-1.0, min_val=-3.0, max_val=0.5),
    dict(slope=0.2, offset=0.5, min_val=0.0, max_val=1.0),
]

ELEMENTWISE = {
    "relu": (
        lambda ops, X: ops.relu(X),
        lambda ops, dY, X, Y: ops.backprop_relu(dY, Y),
        [0.0],
        (-3, 3),
    ),
    "mish": (
        lambda ops, X: ops.mish(X),
        lambda ops, dY, X, Y: ops.backprop_mish(dY, X),
        [],
        (-5, 5),
    ),
    "mish_threshold_1": (
        lambda ops, X: ops.mish(X, threshold=1.0),
        lambda ops, dY, X, Y: ops.backprop_mish(dY, X, threshold=1.0),
        [1.0],
        (-3, 3),
    ),
    "swish": (
        lambda ops, X: ops.swish(X),
        lambda ops, dY, X, Y: ops.backprop_swish(dY, X, Y),
        [],
        (-6, 6),
    ),
    "dish": (
        lambda ops, X: ops.dish(X),
        lambda ops, dY, X, Y: ops.backprop_dish(dY, X),
        [],
        (-6, 6),
    ),
    "gelu": (
        lambda ops, X: ops.gelu(X),
        lambda ops, dY, X, Y: ops.backprop_gelu(dY, X),
        [],
        (-5, 5),
    ),
    "gelu_approx": (
        lambda ops, X: ops.gelu_approx(X),
        lambda ops, dY, X, Y: ops.backprop_gelu_approx(dY, X),
        [],
        (-5, 5),
    ),
    "relu_k_default": (
        lambda ops, X: ops.relu_k(X),
        lambda ops, dY, X, Y: ops.backprop_relu_k(dY, X),
        [0.0, 6.0],
        (-2, 9),
    ),
    "relu_k_n3": (
        lambda ops, X: ops.relu_k(X, n=3.0),
        lambda ops, dY, X, Y: ops.backprop_relu_k(dY, X, n=3.0),
        [0.0, 3.0],
        (-2, 5),
    ),
    "hard_sigmoid": (
        lambda ops, X: ops.hard_sigmoid(X),
        lambda ops, dY, X, Y: ops.backprop_hard_sigmoid(dY, X),
        [-2.5, 2.5],
        (-4, 4),
    ),
    "hard_tanh": (
        lambda ops, X: ops.hard_tanh(X),
        lambda ops, dY, X, Y: ops.backprop_hard_tanh(dY, X),
        [-1.0, 1.0],
        (-2, 2),
    ),
    "hard_swish": (
        lambda ops, X: ops.hard_swish(X),
        lambda ops, dY, X, Y: ops.backprop_hard_swish(dY, X),
        [-2.5, 2.5],
        (-4, 4),
    ),
    "hard_swish_mobilenet": (
        lambda ops, X: ops.hard_swish_mobilenet(X),
        lambda ops, dY, X, Y: ops.backprop_hard_swish_mobilenet(dY, X),
        [-3.0, 3.0],
        (-5, 5),
    ),
    "sigmoid": (
        lambda ops, X: ops.sigmoid(X),
        lambda ops, dY, X, Y: ops.backprop_sigmoid(dY, Y),
        [],
        (-8, 8),
    ),
}
for _i, _p in enumerate(CLIPPED_PARAMS):
    ELEMENTWISE[f"clipped_linear_{_i}"] = (
        (lambda p: lambda ops, X: ops.clipped_linear(X, **p))(_p),
        (lambda p: lambda ops, dY, X, Y: ops.backprop_clipped_linear(dY, X, **p))(_p),
        _clipped_kinks(**_p),
        (-5, 5),
    )


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
@GRAD_SETTINGS
@given(shape=small_shapes(min_dims=1, max_dims=3, max_side=4), seed=seeds)
def test_elementwise_gradient(ops, name, shape, seed):
    forward, backward, kinks, (lo, hi) = ELEMENTWISE[name]
    rng = np.random.default_rng(seed)
    X = away_from_kinks(rng.uniform(lo, hi, size=shape), kinks, margin=1e-3)
    dY = rng.uniform(-1.0, 1.0, size=shape)
    Y = forward(ops, ops.asarray(X.copy()))
    dX = backward(ops, ops.asarray(dY.copy()), ops.asarray(X.copy()), Y)
    dX = to_np(ops, dX)
    expected = numeric_vjp(lambda Z: to_np(ops, forward(ops, ops.asarray(Z))), X, dY, EPS)
    assert dX.shape == X.shape
    assert dX.dtype == np.float64, f"{name} backprop returned {dX.dtype} for float64 input"
    assert_allclose(dX, expected, rtol=RTOL, atol=1e-5 if name.startswith("gelu") else ATOL)


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_gradient_empty(ops, name):
    forward, backward, _, _ = ELEMENTWISE[name]
    X = np.zeros((0, 3), dtype="float64")
    Y = forward(ops, ops.asarray(X.copy()))
    assert to_np(ops, Y).shape == (0, 3)
    dX = to_np(ops, backward(ops, ops.asarray(X.copy()), ops.asarray(X.copy()), Y))
    assert dX.shape == (0, 3)


def test_mish_above_threshold_passes_gradient_through(ops):
    X = np.array([[-1.0, 0.5, 20.0, 25.0, 100.0]])
    dY = np.array([[0.3, -0.7, 1.5, -2.0, 4.0]])
    Y = to_np(ops, ops.mish(ops.asarray(X.copy())))
    dX = to_np(ops, ops.backprop_mish(ops.asarray(dY.copy()), ops.asarray(X.copy())))
    assert_allclose(Y[0, 2:], X[0, 2:])
    assert_allclose(dX[0, 2:], dY[0, 2:])


@GRAD_SETTINGS
@given(shape=small_shapes(min_dims=1, max_dims=3, max_side=4), seed=seeds)
def test_dsigmoid_is_derivative_of_sigmoid(ops, shape, seed):
    X = np.random.default_rng(seed).uniform(-6, 6, size=shape)
    Y = ops.sigmoid(ops.asarray(X.copy()))
    dX = to_np(ops, ops.dsigmoid(Y))
    expected = numeric_grad(lambda Z: np.sum(to_np(ops, ops.sigmoid(ops.asarray(Z)))), X, EPS)
    assert_allclose(dX, expected, rtol=RTOL, atol=ATOL)


@GRAD_SETTINGS
@given(shape=small_shapes(min_dims=1, max_dims=3, max_side=4), seed=seeds)
def test_dtanh_is_derivative_of_tanh(ops, shape, seed):
    X = np.random.default_rng(seed).uniform(-3, 3, size=shape)
    dX = to_np(ops, ops.dtanh(ops.asarray(np.tanh(X))))
    # tanh itself is not an Ops method: differentiate numpy's, an independent reference.
    expected = numeric_grad(lambda Z: np.sum(np.tanh(Z)), X, EPS)
    assert_allclose(dX, expected, rtol=RTOL, atol=ATOL)


# --- softmax -------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@GRAD_SETTINGS
@given(shape=small_shapes(min_dims=2, max_dims=3, min_side=1, max_side=4), seed=seeds)
def test_softmax_gradient(ops, axis, temperature, shape, seed):
    X = np.random.default_rng(seed).uniform(-3, 3, size=shape)

    def forward(Z):
        return ops.softmax(ops.asarray(Z), axis=axis, temperature=temperature)

    Y = forward(X.copy())

    def backward(dY):
        return ops.backprop_softmax(Y, ops.asarray(dY), axis=axis, temperature=temperature)

    _check(ops, forward, backward, X, seed=seed)


@GRAD_SETTINGS
@given(lengths=ragged_lengths(min_len=0, max_len=4, max_seqs=5), nO=st.integers(1, 3), seed=seeds)
def test_softmax_sequences_gradient(ops, lengths, nO, seed):
    X = np.random.default_rng(seed).uniform(-3, 3, size=(sum(lengths), nO))
    L = _lengths(ops, lengths)

    def forward(Z):
        return ops.softmax_sequences(ops.asarray(Z), L)

    Y = forward(X.copy())
    _check(ops, forward, lambda dY: ops.backprop_softmax_sequences(ops.asarray(dY), Y, L), X, seed=seed)


# --- seq2col -------------------------------------------------------------------------------


@pytest.mark.parametrize("nW", [1, 2, 3])
@GRAD_SETTINGS
@given(lengths=ragged_lengths(min_len=0, max_len=5, max_seqs=4), nI=st.integers(1, 3), seed=seeds)
def test_seq2col_gradient_with_lengths(ops, nW, lengths, nI, seed):
    X = np.random.default_rng(seed).uniform(-1, 1, size=(sum(lengths), nI))
    L = _lengths(ops, lengths)

    def forward(Z):
        return ops.seq2col(ops.asarray(Z), nW, lengths=L)

    Y, _, _ = _check(ops, forward, lambda dY: ops.backprop_seq2col(ops.asarray(dY), nW, lengths=L), X, seed=seed)
    assert Y.shape == (X.shape[0], nI * (2 * nW + 1))


@pytest.mark.parametrize("nW", [1, 2, 3])
@GRAD_SETTINGS
@given(nB=st.integers(0, 7), nI=st.integers(1, 3), seed=seeds)
def test_seq2col_gradient_without_lengths(ops, nW, nB, nI, seed):
    X = np.random.default_rng(seed).uniform(-1, 1, size=(nB, nI))

    def forward(Z):
        return ops.seq2col(ops.asarray(Z), nW)

    Y, _, _ = _check(ops, forward, lambda dY: ops.backprop_seq2col(ops.asarray(dY), nW), X, seed=seed)
    assert Y.shape == (nB, nI * (2 * nW + 1))


@pytest.mark.parametrize("nW", [1, 2])
@pytest.mark.parametrize("lengths", [[], [0], [0, 0], [1], [1, 1, 1], [0, 1, 0, 2]])
def test_seq2col_edge_lengths(ops, nW, lengths):
    X = np.random.default_rng(0).uniform(-1, 1, size=(sum(lengths), 2))
    L = _lengths(ops, lengths)
    Y, _, _ = _check(
        ops,
        lambda Z: ops.seq2col(ops.asarray(Z), nW, lengths=L),
        lambda dY: ops.backprop_seq2col(ops.asarray(dY), nW, lengths=L),
        X,
    )
    assert Y.shape == (sum(lengths), 2 * (2 * nW + 1))
    if lengths and max(lengths) == 1:
        # One-row sequences see no neighbours: only the centre block is filled.
        centre = Y[:, nW * 2 : (nW + 1) * 2]
        assert_allclose(centre, X)
        assert np.count_nonzero(Y) == np.count_nonzero(X)


# --- maxout --------------------------------------------------------------------------------


@GRAD_SETTINGS
@given(nB=st.integers(0, 4), nO=st.integers(1, 3), nP=st.integers(1, 4), seed=seeds)
def test_maxout_gradient(ops, nB, nO, nP, seed):
    rng = np.random.default_rng(seed)
    X = np.moveaxis(distinct_along(rng, nP, (nB, nO)), 0, -1).copy()  # (nB, nO, nP)
    Y, which = ops.maxout(ops.asarray(X.copy()))
    assert to_np(ops, which).shape == (nB, nO)

    def backward(dY):
        return ops.backprop_maxout(ops.asarray(dY), which, nP)

    _check(ops, lambda Z: ops.maxout(ops.asarray(Z))[0], backward, X, seed=seed)


# --- reductions ------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@GRAD_SETTINGS
@given(lengths=ragged_lengths(min_len=0, max_len=4, max_seqs=5), nO=st.integers(1, 3), seed=seeds)
def test_reduce_sum_mean_gradient(ops, reduction, lengths, nO, seed):
    X = np.random.default_rng(seed).uniform(-2, 2, size=(sum(lengths), nO))
    L = _lengths(ops, lengths)
    reduce = getattr(ops, f"reduce_{reduction}")
    backprop = getattr(ops, f"backprop_reduce_{reduction}")
    Y, _, _ = _check(ops, lambda Z: reduce(ops.asarray(Z), L), lambda dY: backprop(ops.asarray(dY), L), X, seed=seed)
    assert Y.shape == (len(lengths), nO)
    for i, n in enumerate(lengths):
        if n == 0:
            assert_allclose(Y[i], 0.0)


@pytest.mark.parametrize("reduction", ["first", "last"])
@GRAD_SETTINGS
@given(lengths=ragged_lengths(min_len=1, max_len=4, max_seqs=5), nO=st.integers(1, 3), seed=seeds)
def test_reduce_first_last_gradient(ops, reduction, lengths, nO, seed):
    X = np.random.default_rng(seed).uniform(-2, 2, size=(sum(lengths), nO))
    L = _lengths(ops, lengths)
    reduce = getattr(ops, f"reduce_{reduction}")
    backprop = getattr(ops, f"backprop_reduce_{reduction}")
    _, aux = reduce(ops.asarray(X.copy()), L)
    Y, _, _ = _check(ops, lambda Z: reduce(ops.asarray(Z), L)[0], lambda dY: backprop(ops.asarray(dY), aux), X, seed=seed)
    assert Y.shape == (len(lengths), nO)


@GRAD_SETTINGS
@given(lengths=ragged_lengths(min_len=1, max_len=4, max_seqs=5), nO=st.integers(1, 3), seed=seeds)
def test_reduce_max_gradient(ops, lengths, nO, seed):
    rng = np.random.default_rng(seed)
    X = concat_rows([distinct_along(rng, n, (nO,)) for n in lengths], nO)
    L = _lengths(ops, lengths)
    _, which = ops.reduce_max(ops.asarray(X.copy()), L)

    def backward(dY):
        return ops.backprop_reduce_max(ops.asarray(dY), which, L)

    Y, _, _ = _check(ops, lambda Z: ops.reduce_max(ops.asarray(Z), L)[0], backward, X, seed=seed)
    assert Y.shape == (len(lengths), nO)


@pytest.mark.parametrize("reduction", ["first", "last", "max"])
def test_reduce_one_row_sequences_are_identity(ops, reduction):
    X = np.random.default_rng(3).uniform(-1, 1, size=(4, 3))
    L = _lengths(ops, [1, 1, 1, 1])
    reduce = getattr(ops, f"reduce_{reduction}")
    Y, aux = reduce(ops.asarray(X.copy()), L)
    assert_allclose(to_np(ops, Y), X)
    dY = np.random.default_rng(4).uniform(-1, 1, size=(4, 3))
    if reduction == "max":
        dX = ops.backprop_reduce_max(ops.asarray(dY), aux, L)
    else:
        dX = getattr(ops, f"backprop_reduce_{reduction}")(ops.asarray(dY), aux)
    assert_allclose(to_np(ops, dX), dY)


@pytest.mark.parametrize("reduction", ["sum", "mean", "first", "last", "max"])
def test_reduce_empty_batch(ops, reduction):
    X = ops.asarray(np.zeros((0, 3), dtype="float64"))
    L = _lengths(ops, [])
    reduce = getattr(ops, f"reduce_{reduction}")
    backprop = getattr(ops, f"backprop_reduce_{reduction}")
    out = reduce(X, L)
    dY = ops.asarray(np.zeros((0, 3), dtype="float64"))
    if reduction in ("sum", "mean"):
        assert to_np(ops, out).shape == (0, 3)
        dX = backprop(dY, L)
    elif reduction == "max":
        assert to_np(ops, out[0]).shape == (0, 3)
        dX = backprop(dY, out[1], L)
    else:
        assert to_np(ops, out[0]).shape == (0, 3)
        dX = backprop(dY, out[1])
    assert to_np(ops, dX).shape == (0, 3)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_reduce_sum_mean_zero_length_gives_zeros(ops, reduction):
    X = np.arange(1.0, 7.0).reshape(3, 2)
    L = _lengths(ops, [0, 2, 0, 1, 0])
    Y = to_np(ops, getattr(ops, f"reduce_{reduction}")(ops.asarray(X), L))
    assert Y.shape == (5, 2)
    assert_allclose(Y[[0, 2, 4]], 0.0)
    assert np.all(np.isfinite(Y))
    dX = to_np(ops, getattr(ops, f"backprop_reduce_{reduction}")(ops.asarray(np.ones((5, 2))), L))
    assert dX.shape == (3, 2)
    assert np.all(np.isfinite(dX))


@pytest.mark.parametrize("reduction", ["first", "last", "max"])
@pytest.mark.parametrize("lengths", [[0], [2, 0], [0, 1, 1]])
def test_reduce_zero_length_raises(ops, reduction, lengths):
    X = ops.asarray(np.ones((sum(lengths), 2)))
    with pytest.raises(ValueError):
        getattr(ops, f"reduce_{reduction}")(X, _lengths(ops, lengths))


# --- flatten / pad / padded ------------------------------------------------------------------


@pytest.mark.parametrize("pad", [0, 1, 2])
@GRAD_SETTINGS
@given(lengths=ragged_lengths(min_len=0, max_len=4, max_seqs=5), nO=st.integers(1, 3), seed=seeds)
def test_flatten_unflatten_are_adjoint(ops, pad, lengths, nO, seed):
    X = np.random.default_rng(seed).uniform(-1, 1, size=(sum(lengths), nO))
    L = _lengths(ops, lengths)

    def forward(Z):
        return ops.flatten([ops.asarray(z) for z in split_rows(Z, lengths)], pad=pad)

    def backward(dY):
        return concat_rows([to_np(ops, d) for d in ops.unflatten(ops.asarray(dY), L, pad=pad)], nO)

    if not lengths:
        # No sequences at all: flatten gives an empty 2d array and unflatten no pieces.
        assert to_np(ops, forward(X)).size == 0
        assert ops.unflatten(ops.asarray(np.zeros((0, nO))), L, pad=pad) == []
        return
    Y, _, _ = _check(ops, forward, backward, X, seed=seed)
    n_nonempty = sum(1 for n in lengths if n > 0)
    expected_rows = sum(lengths) + (pad * (n_nonempty + 1) if n_nonempty else 0)
    assert Y.shape == (expected_rows, nO)


@pytest.mark.parametrize("round_to", [1, 3])
@GRAD_SETTINGS
@given(lengths=ragged_lengths(min_len=0, max_len=4, min_seqs=1, max_seqs=5), nO=st.integers(1, 3), seed=seeds)
def test_pad_unpad_are_adjoint(ops, round_to, lengths, nO, seed):
    X = np.random.default_rng(seed).uniform(-1, 1, size=(sum(lengths), nO))

    def forward(Z):
        return ops.pad([ops.asarray(z) for z in split_rows(Z, lengths)], round_to=round_to)

    def backward(dY):
        return concat_rows([to_np(ops, d) for d in ops.unpad(ops.asarray(dY), lengths)], nO)

    Y, _, _ = _check(ops, forward, backward, X, seed=seed)
    max_len = max(lengths)
    assert Y.shape == (len(lengths), max_len + (-max_len % round_to), nO)


@GRAD_SETTINGS
@given(lengths=ragged_lengths(min_len=0, max_len=4, min_seqs=1, max_seqs=5), nO=st.integers(1, 3), seed=seeds)
def test_list2padded_padded2list_are_adjoint(ops, lengths, nO, seed):
    X = np.random.default_rng(seed).uniform(-1, 1, size=(sum(lengths), nO))
    template = ops.list2padded([ops.asarray(z) for z in split_rows(X, lengths)])

    def forward(Z):
        return ops.list2padded([ops.asarray(z) for z in split_rows(Z, lengths)]).data

    def backward(dY):
        padded = type(template)(ops.asarray(dY), template.size_at_t, template.lengths, template.indices)
        pieces = ops.padded2list(padded)
        assert [len(p) for p in pieces] == list(lengths)
        return concat_rows([to_np(ops, p) for p in pieces], nO)

    Y, _, _ = _check(ops, forward, backward, X, seed=seed)
    assert Y.shape == (max(lengths), len(lengths), nO)


def test_list2padded_empty_list(ops):
    padded = ops.list2padded([])
    assert to_np(ops, padded.data).size == 0
    assert to_np(ops, padded.lengths).shape == (0,)
    assert ops.padded2list(padded) == []


# --- gather_add / scatter_add ----------------------------------------------------------------


@GRAD_SETTINGS
@given(
    nT=st.integers(1, 5), nB=st.integers(1, 4), nK=st.integers(1, 3), nO=st.integers(1, 3), seed=seeds
)
def test_gather_add_scatter_add_are_adjoint(ops, nT, nB, nK, nO, seed):
    rng = np.random.default_rng(seed)
    table = rng.uniform(-1, 1, size=(nT, nO))
    indices = ops.asarray2i(rng.integers(0, nT, size=(nB, nK)).astype("int32"))

    def backward(dY):
        d_table = ops.alloc2f(nT, nO, dtype="float64")
        values = np.repeat(np.asarray(dY, dtype="float64"), nK, axis=0)  # (nB*nK, nO)
        flat = ops.reshape1i(ops.as_contig(indices), nB * nK)
        out = ops.scatter_add(d_table, flat, ops.asarray(values))
        # Thinc returns None from scatter_add; either way the table holds the sum.
        assert out is None or to_np(ops, out).shape == (nT, nO)
        return d_table

    _check(ops, lambda Z: ops.gather_add(ops.asarray(Z), indices), backward, table, seed=seed)


def test_gather_add_empty_batch(ops):
    table = ops.asarray(np.ones((3, 2)))
    indices = ops.asarray2i(np.zeros((0, 2), dtype="int32"))
    out = to_np(ops, ops.gather_add(table, indices))
    assert out.shape == (0, 2)


# --- affine / gemm -------------------------------------------------------------------------


@GRAD_SETTINGS
@given(nB=st.integers(0, 4), nI=st.integers(1, 4), nO=st.integers(1, 4), seed=seeds)
def test_affine_gradients_via_gemm(ops, nB, nI, nO, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(nB, nI))
    W = rng.uniform(-1, 1, size=(nO, nI))
    b = rng.uniform(-1, 1, size=(nO,))
    dY = rng.uniform(-1, 1, size=(nB, nO))
    Xb, Wb, bb, dYb = (ops.asarray(a.copy()) for a in (X, W, b, dY))
    Y = to_np(ops, ops.affine(Xb, Wb, bb))
    assert Y.shape == (nB, nO)

    dX = to_np(ops, ops.gemm(dYb, Wb))
    dW = to_np(ops, ops.gemm(dYb, Xb, trans1=True))
    db = dY.sum(axis=0)
    num_dX = numeric_vjp(lambda Z: to_np(ops, ops.affine(ops.asarray(Z), Wb, bb)), X, dY, EPS)
    num_dW = numeric_vjp(lambda Z: to_np(ops, ops.affine(Xb, ops.asarray(Z), bb)), W, dY, EPS)
    num_db = numeric_vjp(lambda Z: to_np(ops, ops.affine(Xb, Wb, ops.asarray(Z))), b, dY, EPS)
    assert_allclose(dX, num_dX, rtol=RTOL, atol=ATOL)
    assert_allclose(dW, num_dW, rtol=RTOL, atol=ATOL)
    assert_allclose(db, num_db, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("trans1", [False, True])
@pytest.mark.parametrize("trans2", [False, True])
@GRAD_SETTINGS
@given(M=st.integers(0, 4), K=st.integers(1, 4), N=st.integers(1, 4), seed=seeds)
def test_gemm_gradients_with_trans_flags(ops, trans1, trans2, M, K, N, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(K, M) if trans1 else (M, K))
    y = rng.uniform(-1, 1, size=(N, K) if trans2 else (K, N))
    dC = rng.uniform(-1, 1, size=(M, N))
    xb, yb, dCb = (ops.asarray(a.copy()) for a in (x, y, dC))
    C = to_np(ops, ops.gemm(xb, yb, trans1=trans1, trans2=trans2))
    assert C.shape == (M, N)
    assert_allclose(C, (x.T if trans1 else x) @ (y.T if trans2 else y), rtol=1e-12, atol=1e-12)

    # dA = dC @ B.T and dB = A.T @ dC, expressed with gemm's own flags.
    dA = to_np(ops, ops.gemm(dCb, yb, trans2=not trans2))
    dB = to_np(ops, ops.gemm(xb, dCb, trans1=not trans1))
    dx = dA.T if trans1 else dA
    dy = dB.T if trans2 else dB
    num_dx = numeric_vjp(lambda Z: to_np(ops, ops.gemm(ops.asarray(Z), yb, trans1=trans1, trans2=trans2)), x, dC, EPS)
    num_dy = numeric_vjp(lambda Z: to_np(ops, ops.gemm(xb, ops.asarray(Z), trans1=trans1, trans2=trans2)), y, dC, EPS)
    assert_allclose(dx, num_dx, rtol=RTOL, atol=ATOL)
    assert_allclose(dy, num_dy, rtol=RTOL, atol=ATOL)
