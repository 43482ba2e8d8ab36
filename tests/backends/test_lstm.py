"""LSTM kernels: Thinc 8.3's packed stacked LSTM and the single-layer `recurrent_lstm` pair.

Ground truth is (1) a per-sequence loop reference written here, (2) float64 central
differences, and (3) Thinc 8.3's NumpyOps for the forward pass. Thinc 8.3's
`backprop_lstm` is only exact in part (it skips the gate gradients of every step that
read the initial state, uses the current rather than the previous hidden state for the
recurrent weight gradient, and adds the weights to the returned gradient), so the
differential backward test compares dX only on the rows it gets right.
"""
import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.backends import _lstm

from _gradcheck import other_module_ops


class _XpOps:
    """The only thing the kernels use from an Ops."""

    xp = numpy


@pytest.fixture(params=["xp", "NumpyOps"])
def lstm_ops(request):
    if request.param == "xp":
        return _XpOps()
    try:
        from plait.backends import NumpyOps
    except ImportError:
        pytest.skip("plait.backends.NumpyOps is not available yet")
    return NumpyOps()


# --- helpers -----------------------------------------------------------------------


def n_params(depth, dirs, nO, nI):
    total = 0
    for i in range(depth):
        nI_layer = nI if i == 0 else dirs * nO
        total += dirs * (4 * nO * nI_layer + 4 * nO + 4 * nO * nO + 4 * nO)
    return total


def make_case(seed, depth, dirs, nO, nI, sizes, dtype="float64", init_scale=1.0):
    rng = numpy.random.default_rng(seed)
    sizes = numpy.asarray(sizes, dtype="int32")
    N = int(sizes.sum())
    params = (rng.normal(size=n_params(depth, dirs, nO, nI)) * 0.5).astype(dtype)
    H0 = (rng.normal(size=(depth, dirs, nO)) * init_scale).astype(dtype)
    C0 = (rng.normal(size=(depth, dirs, nO)) * init_scale).astype(dtype)
    X = rng.normal(size=(N, nI)).astype(dtype)
    return params, H0, C0, X, sizes


def sizes_from_lengths(lengths):
    lengths = sorted(lengths, reverse=True)
    return [sum(1 for n in lengths if n > t) for t in range(lengths[0])] if lengths else []


def _sigmoid(x):
    return 1.0 / (1.0 + numpy.exp(-x))


def naive_lstm(params, H0, C0, X, sizes):
    """One sequence and one time step at a time, straight from the LSTM equations.

    Thinc's convention: the second argument holds the initial cells, the third the
    initial hiddens.
    """
    depth, dirs, nO = H0.shape
    N, nI = X.shape
    starts = numpy.concatenate([[0], numpy.cumsum(sizes)[:-1]]).astype(int)
    nB = int(sizes[0]) if len(sizes) else 0
    rows_of = [[starts[t] + b for t in range(len(sizes)) if sizes[t] > b] for b in range(nB)]
    layer_in = X.astype("float64")
    offset = 0
    for i in range(depth):
        nI_layer = layer_in.shape[1]
        out = numpy.zeros((N, dirs, nO))
        for d in range(dirs):
            Wx = params[offset : offset + 4 * nO * nI_layer].reshape(4 * nO, nI_layer)
            offset += 4 * nO * nI_layer
            bx = params[offset : offset + 4 * nO]
            offset += 4 * nO
            Wh = params[offset : offset + 4 * nO * nO].reshape(4 * nO, nO)
            offset += 4 * nO * nO
            bh = params[offset : offset + 4 * nO]
            offset += 4 * nO
            for rows in rows_of:
                c = H0[i, d].astype("float64")
                h = C0[i, d].astype("float64")
                for r in rows if d == 0 else rows[::-1]:
                    a = Wx @ layer_in[r] + bx + Wh @ h + bh
                    f, g_in, o, cand = (a[k * nO : (k + 1) * nO] for k in range(4))
                    c = _sigmoid(f) * c + _sigmoid(g_in) * numpy.tanh(cand)
                    h = _sigmoid(o) * numpy.tanh(c)
                    out[r, d] = h
        layer_in = out.reshape(N, dirs * nO)
    return layer_in


def naive_recurrent_lstm(W, b, h_init, c_init, inputs):
    nL, nB, nI = inputs.shape
    nO = h_init.shape[0]
    Y = numpy.zeros((nL, nB, nO))
    for j in range(nB):
        h, c = h_init.astype("float64"), c_init.astype("float64")
        for t in range(nL):
            a = W @ numpy.concatenate([inputs[t, j], h]) + b
            f, g_in, o, cand = (a[k * nO : (k + 1) * nO] for k in range(4))
            c = _sigmoid(f) * c + _sigmoid(g_in) * numpy.tanh(cand)
            h = _sigmoid(o) * numpy.tanh(c)
            Y[t, j] = h
    return Y


def numeric_grad(f, x, eps=1e-6):
    grad = numpy.zeros_like(x)
    for k in range(x.size):
        plus = x.copy()
        plus.flat[k] += eps
        minus = x.copy()
        minus.flat[k] -= eps
        grad.flat[k] = (f(plus) - f(minus)) / (2 * eps)
    return grad


CONFIGS = [
    # depth, dirs, nO, nI, size_at_t
    (1, 1, 3, 2, [3, 2, 1]),
    (1, 2, 3, 4, [4, 4, 2, 1, 1]),
    (2, 1, 2, 3, [3, 3, 3]),
    (2, 2, 3, 2, [3, 2, 2, 1]),
]


# --- forward -----------------------------------------------------------------------


@pytest.mark.parametrize("depth,dirs,nO,nI,sizes", CONFIGS)
def test_forward_matches_naive_reference(lstm_ops, depth, dirs, nO, nI, sizes):
    params, H0, C0, X, size_at_t = make_case(0, depth, dirs, nO, nI, sizes)
    Y, state = _lstm.lstm_forward_training(lstm_ops, params, H0, C0, X, size_at_t)
    assert Y.shape == (X.shape[0], dirs * nO)
    numpy.testing.assert_allclose(Y, naive_lstm(params, H0, C0, X, size_at_t), rtol=1e-10, atol=1e-12)
    Y_inf = _lstm.lstm_forward_inference(lstm_ops, params, H0, C0, X, size_at_t)
    numpy.testing.assert_array_equal(Y_inf, Y)
    Y4, G4, C4, X_saved, _, _ = state
    assert Y4.shape == C4.shape == (depth, dirs, X.shape[0], nO)
    assert G4.shape == (depth, dirs, X.shape[0], 4 * nO)
    assert X_saved is X
    # The last layer's saved hiddens are the output, directions side by side.
    numpy.testing.assert_array_equal(Y4[-1].transpose(1, 0, 2).reshape(Y.shape), Y)


def test_second_argument_initialises_cells_third_hiddens():
    depth, dirs, nO, nI = 1, 1, 2, 2
    params, _, _, X, sizes = make_case(1, depth, dirs, nO, nI, [1])
    cells = numpy.full((1, 1, nO), 0.7)
    hiddens = numpy.full((1, 1, nO), -0.3)
    Y = _lstm.lstm_forward_inference(_XpOps(), params, cells, hiddens, X, sizes)
    Wx = params[: 4 * nO * nI].reshape(4 * nO, nI)
    b = params[4 * nO * nI : 4 * nO * nI + 4 * nO]
    Wh = params[4 * nO * (nI + 1) : 4 * nO * (nI + 1 + nO)].reshape(4 * nO, nO)
    b = b + params[4 * nO * (nI + 1 + nO) :]
    a = Wx @ X[0] + Wh @ hiddens[0, 0] + b
    c = _sigmoid(a[:nO]) * cells[0, 0] + _sigmoid(a[nO : 2 * nO]) * numpy.tanh(a[3 * nO :])
    expected = _sigmoid(a[2 * nO : 3 * nO]) * numpy.tanh(c)
    numpy.testing.assert_allclose(Y[0], expected, rtol=1e-12)


@pytest.mark.parametrize("depth,dirs,nO,nI,sizes", CONFIGS)
def test_forward_matches_thinc(depth, dirs, nO, nI, sizes):
    pytest.importorskip("thinc")
    from thinc.api import NumpyOps

    params, H0, C0, X, size_at_t = make_case(2, depth, dirs, nO, nI, sizes, dtype="float32")
    Y_t, state_t = NumpyOps().lstm_forward_training(params, H0, C0, X, size_at_t)
    Y, state = _lstm.lstm_forward_training(_XpOps(), params, H0, C0, X, size_at_t)
    assert Y.dtype == numpy.float32
    numpy.testing.assert_allclose(Y, Y_t, rtol=1e-5, atol=1e-6)
    # The saved hiddens, gates and cells have Thinc's layout too.
    for mine, theirs in zip(state[:3], state_t[:3]):
        assert mine.shape == theirs.shape
        numpy.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-6)
    Y_inf_t = NumpyOps().lstm_forward_inference(params, H0, C0, X, size_at_t)
    Y_inf = _lstm.lstm_forward_inference(_XpOps(), params, H0, C0, X, size_at_t)
    numpy.testing.assert_allclose(Y_inf, Y_inf_t, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "depth,dirs,nO,nI,sizes",
    [(1, 1, 3, 2, [3, 2, 1]), (2, 1, 3, 2, [4, 3, 3, 1]), (1, 2, 3, 2, [3, 3, 2, 1])],
)
def test_backward_dX_matches_thinc_where_thinc_is_exact(depth, dirs, nO, nI, sizes):
    pytest.importorskip("thinc")
    from thinc.api import NumpyOps

    thinc_ops = NumpyOps()
    params, H0, C0, X, size_at_t = make_case(3, depth, dirs, nO, nI, sizes, dtype="float32")
    dY = numpy.random.default_rng(4).normal(size=(X.shape[0], dirs * nO)).astype("float32")
    _, state_t = thinc_ops.lstm_forward_training(params, H0, C0, X, size_at_t)
    dX_t, _ = thinc_ops.backprop_lstm(dY.copy(), size_at_t, params, state_t)
    _, state = _lstm.lstm_forward_training(_XpOps(), params, H0, C0, X, size_at_t)
    dX, _ = _lstm.backprop_lstm(_XpOps(), dY, size_at_t, params, state)
    assert dX.dtype == numpy.float32
    # Rows whose step read a computed state in every direction are the ones Thinc gets right.
    starts = numpy.concatenate([[0], numpy.cumsum(sizes)[:-1]])
    rows = [
        starts[t] + b
        for t in range(1, len(sizes))
        for b in range(sizes[t])
        if dirs == 1 or (t + 1 < len(sizes) and b < sizes[t + 1])
    ]
    assert rows
    numpy.testing.assert_allclose(dX[rows], dX_t[rows], rtol=1e-4, atol=1e-6)


# --- backward ----------------------------------------------------------------------


GRAD_CONFIGS = [
    (1, 1, 2, 3, [2, 1]),
    (1, 2, 2, 2, [3, 3, 1]),
    (2, 2, 2, 3, [3, 2, 2, 1]),
    (2, 1, 2, 2, [2, 2, 2]),
]


@pytest.mark.parametrize("depth,dirs,nO,nI,sizes", GRAD_CONFIGS)
def test_backprop_lstm_gradcheck(depth, dirs, nO, nI, sizes):
    ops = _XpOps()
    params, H0, C0, X, size_at_t = make_case(5, depth, dirs, nO, nI, sizes)
    dY = numpy.random.default_rng(6).normal(size=(X.shape[0], dirs * nO))
    _, state = _lstm.lstm_forward_training(ops, params, H0, C0, X, size_at_t)
    dX, d_params = _lstm.backprop_lstm(ops, dY, size_at_t, params, state)

    def loss_of_X(X_):
        return float((_lstm.lstm_forward_inference(ops, params, H0, C0, X_, size_at_t) * dY).sum())

    def loss_of_params(p):
        return float((_lstm.lstm_forward_inference(ops, p, H0, C0, X, size_at_t) * dY).sum())

    numpy.testing.assert_allclose(dX, numeric_grad(loss_of_X, X), rtol=1e-5, atol=1e-7)
    numpy.testing.assert_allclose(d_params, numeric_grad(loss_of_params, params), rtol=1e-5, atol=1e-7)


def test_backprop_lstm_bias_gradients_are_equal():
    depth, dirs, nO, nI = 2, 2, 3, 2
    params, H0, C0, X, sizes = make_case(7, depth, dirs, nO, nI, [3, 2, 1])
    Y, state = _lstm.lstm_forward_training(_XpOps(), params, H0, C0, X, sizes)
    _, d_params = _lstm.backprop_lstm(_XpOps(), numpy.ones_like(Y), sizes, params, state)
    offset = 0
    for i in range(depth):
        nI_layer = nI if i == 0 else dirs * nO
        for _ in range(dirs):
            bx = offset + 4 * nO * nI_layer
            bh = bx + 4 * nO + 4 * nO * nO
            assert numpy.abs(d_params[bx : bx + 4 * nO]).max() > 0
            numpy.testing.assert_array_equal(d_params[bx : bx + 4 * nO], d_params[bh : bh + 4 * nO])
            offset = bh + 4 * nO
    assert offset == params.size


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lstm_dtype_preserved(lstm_ops, dtype):
    params, H0, C0, X, sizes = make_case(8, 2, 2, 3, 2, [2, 2, 1], dtype=dtype)
    Y, state = _lstm.lstm_forward_training(lstm_ops, params, H0, C0, X, sizes)
    assert Y.dtype == dtype
    assert all(a.dtype == dtype for a in state[:3])
    assert _lstm.lstm_forward_inference(lstm_ops, params, H0, C0, X, sizes).dtype == dtype
    dX, d_params = _lstm.backprop_lstm(lstm_ops, numpy.ones_like(Y), sizes, params, state)
    assert dX.dtype == dtype and d_params.dtype == dtype
    assert dX.shape == X.shape and d_params.shape == params.shape


def test_lstm_inputs_not_mutated(lstm_ops):
    params, H0, C0, X, sizes = make_case(9, 2, 2, 3, 2, [3, 2, 1])
    dY = numpy.random.default_rng(10).normal(size=(X.shape[0], 6))
    originals = [a.copy() for a in (params, H0, C0, X, sizes, dY)]
    Y, state = _lstm.lstm_forward_training(lstm_ops, params, H0, C0, X, sizes)
    saved = [a.copy() for a in state[:3]]
    Y_copy = Y.copy()
    _lstm.backprop_lstm(lstm_ops, dY, sizes, params, state)
    for before, after in zip(originals, (params, H0, C0, X, sizes, dY)):
        numpy.testing.assert_array_equal(before, after)
    for before, after in zip(saved, state[:3]):
        numpy.testing.assert_array_equal(before, after)
    numpy.testing.assert_array_equal(Y, Y_copy)


def test_lstm_output_does_not_alias_state():
    params, H0, C0, X, sizes = make_case(11, 1, 1, 2, 2, [2, 1])
    Y, state = _lstm.lstm_forward_training(_XpOps(), params, H0, C0, X, sizes)
    Y[...] = 123.0
    assert not numpy.any(state[0] == 123.0)


# --- edge cases --------------------------------------------------------------------


@pytest.mark.parametrize(
    "sizes",
    [[1, 1, 1, 1], [4], [1], [3, 3]],
    ids=["one-sequence", "all-length-1", "single-row", "equal-lengths"],
)
@pytest.mark.parametrize("dirs", [1, 2])
def test_lstm_edge_batches(sizes, dirs):
    ops = _XpOps()
    params, H0, C0, X, size_at_t = make_case(12, 2, dirs, 2, 3, sizes)
    Y, state = _lstm.lstm_forward_training(ops, params, H0, C0, X, size_at_t)
    numpy.testing.assert_allclose(Y, naive_lstm(params, H0, C0, X, size_at_t), rtol=1e-10, atol=1e-12)
    dY = numpy.random.default_rng(13).normal(size=Y.shape)
    dX, d_params = _lstm.backprop_lstm(ops, dY, size_at_t, params, state)

    def loss_of_X(X_):
        return float((_lstm.lstm_forward_inference(ops, params, H0, C0, X_, size_at_t) * dY).sum())

    numpy.testing.assert_allclose(dX, numeric_grad(loss_of_X, X), rtol=1e-5, atol=1e-7)
    assert numpy.abs(d_params).max() > 0


def test_lstm_one_sequence_equals_batch_row():
    # A sequence's output must not depend on what else is in the batch.
    params, H0, C0, X, sizes = make_case(14, 2, 2, 3, 2, [3, 2, 1])
    Y = _lstm.lstm_forward_inference(_XpOps(), params, H0, C0, X, sizes)
    rows_of_first = [0, 3, 5]
    Y_alone = _lstm.lstm_forward_inference(_XpOps(), params, H0, C0, X[rows_of_first], [1, 1, 1])
    numpy.testing.assert_allclose(Y_alone, Y[rows_of_first], rtol=1e-12)


def test_lstm_empty_input():
    ops = _XpOps()
    params, H0, C0, _, _ = make_case(15, 1, 2, 3, 2, [1])
    X = numpy.zeros((0, 2))
    Y, state = _lstm.lstm_forward_training(ops, params, H0, C0, X, numpy.zeros((0,), dtype="int32"))
    assert Y.shape == (0, 6)
    dX, d_params = _lstm.backprop_lstm(ops, Y, numpy.zeros((0,), dtype="int32"), params, state)
    assert dX.shape == (0, 2)
    assert not d_params.any()


@given(
    lengths=st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=4),
    dirs=st.sampled_from([1, 2]),
    depth=st.sampled_from([1, 2]),
)
@settings(max_examples=20, deadline=None)
def test_lstm_ragged_lengths_match_naive(lengths, dirs, depth):
    sizes = sizes_from_lengths(lengths)
    params, H0, C0, X, size_at_t = make_case(len(lengths), depth, dirs, 2, 2, sizes)
    Y = _lstm.lstm_forward_inference(_XpOps(), params, H0, C0, X, size_at_t)
    numpy.testing.assert_allclose(Y, naive_lstm(params, H0, C0, X, size_at_t), rtol=1e-10, atol=1e-12)


def _bad_calls():
    params, H0, C0, X, sizes = make_case(16, 2, 2, 3, 2, [2, 2, 1])
    fwd = _lstm.lstm_forward_training
    return [
        ("params", lambda ops: fwd(ops, params[:-1], H0, C0, X, sizes)),
        ("expected", lambda ops: fwd(ops, params, H0, C0, X[:, :1], sizes)),
        ("C0", lambda ops: fwd(ops, params, H0, C0[:1], X, sizes)),
        ("H0", lambda ops: fwd(ops, params, H0[:, :1, :][:, [0, 0, 0]], C0[:, [0, 1, 1]], X, sizes)),
        ("size_at_t", lambda ops: fwd(ops, params, H0, C0, X, [2, 2, 2])),
        ("size_at_t", lambda ops: fwd(ops, params, H0, C0, X, [1, 2, 2])),
        ("size_at_t", lambda ops: fwd(ops, params, H0, C0, X, [6, -1])),
        ("X", lambda ops: fwd(ops, params, H0, C0, X[None], sizes)),
        ("params", lambda ops: fwd(ops, params[None], H0, C0, X, sizes)),
    ]


@pytest.mark.parametrize("k", range(len(_bad_calls())))
def test_lstm_bad_shapes_raise_value_error(k):
    name, call = _bad_calls()[k]
    with pytest.raises(ValueError, match=name):
        call(_XpOps())


def test_lstm_params_size_error_names_expected_size():
    params, H0, C0, X, sizes = make_case(17, 2, 2, 3, 2, [2, 1])
    expected = n_params(2, 2, 3, 2)
    message = f"size {expected - 1}, expected {expected} for depth=2, dirs=2, nO=3, nI=2"
    with pytest.raises(ValueError, match=message):
        _lstm.lstm_forward_training(_XpOps(), params[:-1], H0, C0, X, sizes)


def test_backprop_lstm_bad_arguments():
    ops = _XpOps()
    params, H0, C0, X, sizes = make_case(18, 1, 2, 3, 2, [2, 1])
    Y, state = _lstm.lstm_forward_training(ops, params, H0, C0, X, sizes)
    with pytest.raises(ValueError, match="dY"):
        _lstm.backprop_lstm(ops, Y[:, :3], sizes, params, state)
    with pytest.raises(ValueError, match="lengths"):
        _lstm.backprop_lstm(ops, Y, [1, 1], params, state)
    with pytest.raises(ValueError, match="fwd_state"):
        _lstm.backprop_lstm(ops, Y, sizes, params, state[:4])
    with pytest.raises(ValueError, match="params"):
        _lstm.backprop_lstm(ops, Y, sizes, params[:-2], state)


def test_lstm_computes_in_the_dtype_of_its_weights():
    # Thinc's own tests pass float64 X, H0 and C0 with float32 weights.
    ops = _XpOps()
    params, H0, C0, X, sizes = make_case(19, 1, 1, 2, 2, [2, 1])
    fwd = _lstm.lstm_forward_training
    p32 = params.astype("float32")
    Y, state = fwd(ops, p32, H0, C0, X, sizes)
    Y32, _ = fwd(ops, p32, H0.astype("float32"), C0.astype("float32"), X.astype("float32"), sizes)
    assert Y.dtype == numpy.float32 and state[3].dtype == numpy.float32
    numpy.testing.assert_array_equal(Y, Y32)
    Y16, _ = fwd(ops, params, H0, C0, X.astype("float16"), sizes)
    assert Y16.dtype == params.dtype


def test_lstm_bad_dtypes():
    ops = _XpOps()
    params, H0, C0, X, sizes = make_case(19, 1, 1, 2, 2, [2, 1])
    fwd = _lstm.lstm_forward_training
    with pytest.raises(TypeError, match="'X'"):
        fwd(ops, params, H0, C0, X.astype("int64"), sizes)
    with pytest.raises(TypeError, match="size_at_t"):
        fwd(ops, params, H0, C0, X, numpy.asarray([2.0, 1.0]))
    with pytest.raises(NotImplementedError, match="float16"):
        fwd(ops, params.astype("float16"), H0, C0, X, sizes)
    with pytest.raises(TypeError, match="'params'"):
        fwd(ops, list(params), H0, C0, X, sizes)


# --- recurrent_lstm ----------------------------------------------------------------


def make_recurrent_case(seed, nL, nB, nI, nO, dtype="float64"):
    rng = numpy.random.default_rng(seed)
    W = (rng.normal(size=(4 * nO, nI + nO)) * 0.5).astype(dtype)
    b = (rng.normal(size=(4 * nO,)) * 0.5).astype(dtype)
    h_init = rng.normal(size=(nO,)).astype(dtype)
    c_init = rng.normal(size=(nO,)).astype(dtype)
    inputs = rng.normal(size=(nL, nB, nI)).astype(dtype)
    return W, b, h_init, c_init, inputs


@pytest.mark.parametrize("nL,nB,nI,nO", [(4, 3, 2, 3), (1, 1, 3, 2), (3, 1, 1, 4)])
def test_recurrent_lstm_matches_naive(lstm_ops, nL, nB, nI, nO):
    W, b, h_init, c_init, inputs = make_recurrent_case(20, nL, nB, nI, nO)
    Y, (G, C, S) = _lstm.recurrent_lstm(lstm_ops, W, b, h_init, c_init, inputs)
    expected = naive_recurrent_lstm(W, b, h_init, c_init, inputs)
    numpy.testing.assert_allclose(Y, expected, rtol=1e-10, atol=1e-12)
    assert G.shape == (nL, nB, 4 * nO)
    assert C.shape == (nL + 1, nB, nO)
    assert S.shape == (nL, nB, nI + nO)
    numpy.testing.assert_array_equal(C[0], numpy.broadcast_to(c_init, (nB, nO)))
    numpy.testing.assert_array_equal(S[:, :, :nI], inputs)
    numpy.testing.assert_array_equal(S[0, :, nI:], numpy.broadcast_to(h_init, (nB, nO)))
    numpy.testing.assert_array_equal(S[1:, :, nI:], Y[:-1])
    # Gates are post-activation: sigmoids in (0, 1), the candidate in (-1, 1).
    assert (G[..., : 3 * nO] > 0).all() and (G[..., : 3 * nO] < 1).all()
    assert (numpy.abs(G[..., 3 * nO :]) < 1).all()


def test_recurrent_lstm_agrees_with_packed_lstm():
    nL, nB, nI, nO = 3, 2, 2, 3
    W, b, h_init, c_init, inputs = make_recurrent_case(21, nL, nB, nI, nO)
    Y, _ = _lstm.recurrent_lstm(_XpOps(), W, b, h_init, c_init, inputs)
    params = numpy.concatenate([W[:, :nI].ravel(), b, W[:, nI:].ravel(), numpy.zeros(4 * nO)])
    # The packed family's argument-order quirk: cells second, hiddens third.
    Y_packed = _lstm.lstm_forward_inference(
        _XpOps(), params, c_init.reshape(1, 1, nO), h_init.reshape(1, 1, nO),
        inputs.reshape(nL * nB, nI), [nB] * nL,
    )
    numpy.testing.assert_allclose(Y_packed, Y.reshape(nL * nB, nO), rtol=1e-12)


@pytest.mark.parametrize("nL,nB,nI,nO", [(3, 2, 2, 2), (1, 1, 2, 3)])
def test_backprop_recurrent_lstm_gradcheck(nL, nB, nI, nO):
    ops = _XpOps()
    W, b, h_init, c_init, inputs = make_recurrent_case(22, nL, nB, nI, nO)
    dY = numpy.random.default_rng(23).normal(size=(nL, nB, nO))
    _, state = _lstm.recurrent_lstm(ops, W, b, h_init, c_init, inputs)
    dX, (dW, db, d_h, d_c) = _lstm.backprop_recurrent_lstm(ops, dY, state, (W, b))

    def loss(W_=W, b_=b, h_=h_init, c_=c_init, x_=inputs):
        return float((_lstm.recurrent_lstm(ops, W_, b_, h_, c_, x_)[0] * dY).sum())

    check = dict(rtol=1e-5, atol=1e-7)
    numpy.testing.assert_allclose(dX, numeric_grad(lambda x: loss(x_=x), inputs), **check)
    numpy.testing.assert_allclose(dW, numeric_grad(lambda w: loss(W_=w), W), **check)
    numpy.testing.assert_allclose(db, numeric_grad(lambda v: loss(b_=v), b), **check)
    numpy.testing.assert_allclose(d_h, numeric_grad(lambda v: loss(h_=v), h_init), **check)
    numpy.testing.assert_allclose(d_c, numeric_grad(lambda v: loss(c_=v), c_init), **check)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_recurrent_lstm_dtype_and_no_mutation(lstm_ops, dtype):
    args = make_recurrent_case(24, 3, 2, 2, 3, dtype=dtype)
    originals = [a.copy() for a in args]
    Y, state = _lstm.recurrent_lstm(lstm_ops, *args, is_train=False)
    assert Y.dtype == dtype and all(a.dtype == dtype for a in state)
    dY = numpy.ones_like(Y)
    saved = [a.copy() for a in state]
    dX, grads = _lstm.backprop_recurrent_lstm(lstm_ops, dY, state, (args[0], args[1]))
    assert dX.dtype == dtype and all(g.dtype == dtype for g in grads)
    assert [g.shape for g in grads] == [args[0].shape, args[1].shape, args[2].shape, args[3].shape]
    for before, after in zip(originals + saved + [numpy.ones_like(Y)], list(args) + list(state) + [dY]):
        numpy.testing.assert_array_equal(before, after)


def test_recurrent_lstm_bad_shapes():
    ops = _XpOps()
    W, b, h_init, c_init, inputs = make_recurrent_case(25, 3, 2, 2, 3)
    with pytest.raises(ValueError, match="'W'"):
        _lstm.recurrent_lstm(ops, W[:, :-1], b, h_init, c_init, inputs)
    with pytest.raises(ValueError, match="'b'"):
        _lstm.recurrent_lstm(ops, W, b[:-1], h_init, c_init, inputs)
    with pytest.raises(ValueError, match="'c_init'"):
        _lstm.recurrent_lstm(ops, W, b, h_init, c_init[:-1], inputs)
    with pytest.raises(ValueError, match="'inputs'"):
        _lstm.recurrent_lstm(ops, W, b, h_init, c_init, inputs[0])
    with pytest.raises(ValueError, match="'W'"):
        _lstm.recurrent_lstm(ops, W, b, h_init, c_init, inputs[:, :, :1])
    Y, state = _lstm.recurrent_lstm(ops, W, b, h_init, c_init, inputs)
    with pytest.raises(ValueError, match="gates"):
        _lstm.backprop_recurrent_lstm(ops, Y[:2], state, (W, b))
    with pytest.raises(ValueError, match="fwd_state"):
        _lstm.backprop_recurrent_lstm(ops, Y, state[:2], (W, b))
    with pytest.raises(ValueError, match="'b'"):
        _lstm.backprop_recurrent_lstm(ops, Y, state, (W, b[:-1]))


# --- where the LSTM runs: with its weights, as Thinc's Ops does ----------------------------


def test_an_ops_given_weights_of_another_array_module_runs_the_lstm_where_they_are():
    from plait.backends import NumpyOps

    params, H0, C0, X, sizes = make_case(3, 2, 2, 3, 4, [3, 2, 1], dtype="float32")
    size_at_t = numpy.asarray(sizes, dtype="int32")
    ref = NumpyOps()
    Y_ref, state_ref = ref.lstm_forward_training(params, H0, C0, X, size_at_t)
    other = other_module_ops()
    Y, state = other.lstm_forward_training(params, H0, C0, X, size_at_t)
    assert type(Y) is numpy.ndarray
    numpy.testing.assert_array_equal(Y, Y_ref)
    numpy.testing.assert_array_equal(other.lstm_forward_inference(params, H0, C0, X, size_at_t), Y_ref)
    dY = numpy.ones_like(Y)
    for got, want in zip(other.backprop_lstm(dY, size_at_t, params, state),
                         ref.backprop_lstm(dY, size_at_t, params, state_ref)):
        numpy.testing.assert_array_equal(got, want)


@pytest.mark.gpu
def test_cupy_ops_given_numpy_weights_returns_numpy_arrays():
    from _env import HAS_GPU

    if not HAS_GPU:
        pytest.skip("needs cupy and a CUDA device")
    from plait.backends import CupyOps, NumpyOps

    params, H0, C0, X, sizes = make_case(4, 1, 2, 2, 3, [2, 2, 1], dtype="float32")
    size_at_t = numpy.asarray(sizes, dtype="int32")
    Y, _ = CupyOps().lstm_forward_training(params, H0, C0, X, size_at_t)
    assert type(Y) is numpy.ndarray
    numpy.testing.assert_array_equal(Y, NumpyOps().lstm_forward_training(params, H0, C0, X, size_at_t)[0])
