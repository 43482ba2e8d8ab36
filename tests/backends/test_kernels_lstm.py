"""NumpyOps' compiled LSTM (lstm_forward_training/_inference, backprop_lstm) and activations
(sigmoid, dsigmoid, backprop_sigmoid, dtanh) against the Ops reference.

The LSTM kernels are compared with `Ops(numpy)` (the `ref_ops` fixture) on random shapes and
ragged batches: float64 to ~1e-12, float32 to float32 tolerance (its gates use a polynomial
exp). The saved state must have the reference's layout, so either backward pass accepts
either forward state. Results must not change with the OpenMP or BLAS thread count (a
bidirectional layer may run its two directions on two threads; nothing is summed across
them). The derivative kernels are bit-identical to the reference; the float32 sigmoid
agrees to ~1e-7.
"""
import contextlib

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from plait.backends import NumpyOps, Ops
from plait.backends import _numpy_lstm
from plait.backends._kernels_cpu import openmp_info

FLOATS = ["float32", "float64"]
TOL = {"float32": dict(rtol=2e-4, atol=2e-5), "float64": dict(rtol=1e-10, atol=1e-12)}


# --- helpers -----------------------------------------------------------------------


def n_params(depth, dirs, nO, nI):
    total = 0
    for i in range(depth):
        nI_layer = nI if i == 0 else dirs * nO
        total += dirs * 4 * nO * (nI_layer + nO + 2)
    return total


def sizes_from_lengths(lengths):
    lengths = sorted(lengths, reverse=True)
    return [sum(1 for n in lengths if n > t) for t in range(lengths[0])] if lengths else []


def make_case(seed, depth, dirs, nO, nI, sizes, dtype="float32", scale=0.5):
    rng = numpy.random.default_rng(seed)
    sizes = numpy.asarray(sizes, dtype="int32")
    N = int(sizes.sum())
    params = (rng.normal(size=n_params(depth, dirs, nO, nI)) * scale).astype(dtype)
    H0 = rng.normal(size=(depth, dirs, nO)).astype(dtype)
    C0 = rng.normal(size=(depth, dirs, nO)).astype(dtype)
    X = rng.normal(size=(N, nI)).astype(dtype)
    dY = rng.normal(size=(N, dirs * nO)).astype(dtype)
    return params, H0, C0, X, sizes, dY


def assert_close(actual, desired, dtype):
    assert actual.dtype == desired.dtype == numpy.dtype(dtype)
    assert actual.shape == desired.shape
    numpy.testing.assert_allclose(actual, desired, **TOL[dtype])


def assert_same(actual, desired):
    assert actual.dtype == desired.dtype and actual.shape == desired.shape
    numpy.testing.assert_array_equal(actual, desired)


def check_against_reference(ref_ops, params, H0, C0, X, sizes, dY, dtype):
    ops = NumpyOps()
    Y_ref, state_ref = ref_ops.lstm_forward_training(params, H0, C0, X, sizes)
    Y, state = ops.lstm_forward_training(params, H0, C0, X, sizes)
    assert_close(Y, Y_ref, dtype)
    for mine, theirs in zip(state[:3], state_ref[:3]):
        assert_close(mine, theirs, dtype)
    assert state[3] is X and state[4] is H0 and state[5] is C0
    Y_inf = ops.lstm_forward_inference(params, H0, C0, X, sizes)
    assert_close(Y_inf, Y_ref, dtype)
    dX_ref, dp_ref = ref_ops.backprop_lstm(dY, sizes, params, state_ref)
    dX, dp = ops.backprop_lstm(dY, sizes, params, state)
    assert_close(dX, dX_ref, dtype)
    assert_close(dp, dp_ref, dtype)
    return Y, state, dX, dp


@contextlib.contextmanager
def threads(n):
    with threadpool_limits(limits=n):
        yield


# --- the compiled path is there and taken ------------------------------------------


def test_lstm_kernels_are_built():
    # Without the extension every method silently falls back to the (slow) reference.
    assert _numpy_lstm._compiled is not None, "plait.backends._kernels_cpu.lstm is not built"


def test_numpy_ops_takes_the_compiled_path(monkeypatch):
    params, H0, C0, X, sizes, dY = make_case(0, 1, 2, 3, 2, [2, 1])

    def refuse(*args, **kwargs):
        raise AssertionError("fell back to the reference")

    monkeypatch.setattr(Ops, "lstm_forward_training", refuse)
    monkeypatch.setattr(Ops, "lstm_forward_inference", refuse)
    monkeypatch.setattr(Ops, "backprop_lstm", refuse)
    for name in ("sigmoid", "dsigmoid", "backprop_sigmoid", "dtanh"):
        monkeypatch.setattr(Ops, name, refuse)
    ops = NumpyOps()
    Y, state = ops.lstm_forward_training(params, H0, C0, X, sizes)
    ops.lstm_forward_inference(params, H0, C0, X, sizes)
    ops.backprop_lstm(dY, sizes, params, state)
    big = numpy.full((80, 80), 0.25, dtype="float32")
    ops.sigmoid(big)
    ops.dsigmoid(big)
    ops.backprop_sigmoid(big, big)
    ops.dtanh(big)


# --- forward and backward against the reference --------------------------------------


CONFIGS = [
    # depth, dirs, nO, nI, size_at_t
    (1, 1, 3, 2, [3, 2, 1]),
    (1, 2, 5, 4, [4, 4, 2, 1, 1]),
    (2, 1, 8, 3, [5, 5, 5]),
    (2, 2, 17, 7, [9, 3, 3, 1]),
    (3, 2, 4, 6, [2, 2, 1]),
    # Wider than the step kernel's vector panels (16 and 32 lanes), batches not a multiple of 4.
    (1, 2, 40, 33, [7, 6, 6, 5, 2]),
    (2, 1, 64, 20, [13, 9, 1]),
    (1, 2, 12, 5, [40] * 8),  # over 256 rows: the products run over chunks of rows and of K
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("depth,dirs,nO,nI,sizes", CONFIGS)
def test_lstm_matches_reference(ref_ops, dtype, depth, dirs, nO, nI, sizes):
    args = make_case(1, depth, dirs, nO, nI, sizes, dtype)
    check_against_reference(ref_ops, *args, dtype)


@pytest.mark.parametrize("level", [1, 3, 4])
@pytest.mark.parametrize("dtype", FLOATS)
def test_lstm_matches_reference_at_every_instruction_set(ref_ops, dtype, level):
    # x86-64 builds carry the products for AVX-512 (4), AVX2 (3) and SSE2 (1); the CPU picks
    # one, so the others are checked by capping the level (capped at what the CPU has).
    kernels = _numpy_lstm._compiled
    try:
        in_use = kernels._gemm_isa(level)
        assert in_use <= level
        for depth, dirs, nO, nI, sizes in CONFIGS[3:]:
            args = make_case(15, depth, dirs, nO, nI, sizes, dtype)
            check_against_reference(ref_ops, *args, dtype)
    finally:
        kernels._gemm_isa(0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_lstm_matches_reference_with_long_step_products(ref_ops, dtype):
    # nO > 256 makes the step products run over several slices of their inner dimension.
    args = make_case(2, 1, 1, 260, 3, [3, 2, 2], dtype, scale=0.05)
    check_against_reference(ref_ops, *args, dtype)


def _zero_hiddens(C0, which):
    """C0 (Thinc's third argument: the initial hiddens) with the (layer, direction) pairs in
    `which` set to zeros, as the LSTM layer's untrained initial state is."""
    C0 = C0.copy()
    for layer, direction in which:
        C0[layer, direction] = 0
    return C0


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("depth,dirs,nO,nI,sizes", CONFIGS + [(2, 2, 3, 4, [5]), (1, 1, 6, 2, [2])])
def test_lstm_with_zero_initial_hiddens_matches_reference(ref_ops, dtype, depth, dirs, nO, nI, sizes):
    # The rows that read the initial hidden state skip their share of the step products and,
    # where it is zeros, of dWh (with one step only, all of it): all pairs zero, and only the
    # first one zero.
    params, H0, C0, X, sizes, dY = make_case(21, depth, dirs, nO, nI, sizes, dtype)
    pairs = [(i, d) for i in range(depth) for d in range(dirs)]
    for zeroed in (pairs, pairs[:1]):
        check_against_reference(ref_ops, params, H0, _zero_hiddens(C0, zeroed), X, sizes, dY, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_lstm_nan_and_inf_reach_the_same_results_with_zero_initial_hiddens(ref_ops, dtype):
    # Zero initial hiddens times an inf recurrent weight is NaN, and a NaN gradient at the
    # first step times those zeros is NaN in dWh: skipping those rows' products must not
    # lose either. Where the reference has NaN, so must the kernels, and nowhere else.
    depth, dirs, nO, nI = 1, 2, 4, 3
    params, H0, C0, X, sizes, dY = make_case(22, depth, dirs, nO, nI, [3, 3, 2, 1], dtype)
    C0 = _zero_hiddens(C0, [(0, 0), (0, 1)])
    ops = NumpyOps()
    Wh_start = 4 * nO * nI + 4 * nO  # direction 0: Wx, bx, then Wh (4nO, nO)
    with_inf = params.copy()
    with_inf[Wh_start + 5] = numpy.inf
    Y_ref = ref_ops.lstm_forward_inference(with_inf, H0, C0, X, sizes)
    Y = ops.lstm_forward_inference(with_inf, H0, C0, X, sizes)
    assert numpy.isnan(Y_ref).any()
    numpy.testing.assert_array_equal(numpy.isnan(Y), numpy.isnan(Y_ref))
    dY_nan = dY.copy()
    dY_nan[0, 1] = numpy.nan  # a row of the first step, direction 0
    _, state_ref = ref_ops.lstm_forward_training(params, H0, C0, X, sizes)
    _, state = ops.lstm_forward_training(params, H0, C0, X, sizes)
    _, dp_ref = ref_ops.backprop_lstm(dY_nan, sizes, params, state_ref)
    _, dp = ops.backprop_lstm(dY_nan, sizes, params, state)
    dWh = slice(Wh_start, Wh_start + 4 * nO * nO)
    assert numpy.isnan(dp_ref[dWh]).any()
    numpy.testing.assert_array_equal(numpy.isnan(dp), numpy.isnan(dp_ref))
    finite = numpy.isfinite(dp_ref)
    numpy.testing.assert_allclose(dp[finite], dp_ref[finite], **TOL[dtype])


@given(
    lengths=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=7),
    depth=st.integers(min_value=1, max_value=3),
    dirs=st.sampled_from([1, 2]),
    nO=st.integers(min_value=1, max_value=20),
    nI=st.integers(min_value=1, max_value=9),
    dtype=st.sampled_from(FLOATS),
    seed=st.integers(min_value=0, max_value=2**16),
)
@settings(max_examples=40, deadline=None)
def test_lstm_ragged_batches_match_reference(lengths, depth, dirs, nO, nI, dtype, seed):
    args = make_case(seed, depth, dirs, nO, nI, sizes_from_lengths(lengths), dtype)
    check_against_reference(Ops(), *args, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_lstm_saturated_gates_match_reference(ref_ops, dtype):
    # Large weights push the gates into the flat ends of sigmoid and tanh (and exp to its clamp).
    args = make_case(3, 2, 2, 6, 5, [4, 3, 1], dtype, scale=40.0)
    Y, state, dX, dp = check_against_reference(ref_ops, *args, dtype)
    G = state[1]
    sigmoids = numpy.stack([G[..., k::4] for k in range(3)])
    assert (sigmoids >= 0).all() and (sigmoids <= 1).all()
    assert (numpy.abs(G[..., 3::4]) <= 1).all()
    assert numpy.isfinite(dX).all() and numpy.isfinite(dp).all()


@pytest.mark.parametrize("dtype", FLOATS)
def test_backward_accepts_either_forward_state(ref_ops, dtype):
    params, H0, C0, X, sizes, dY = make_case(4, 2, 2, 5, 3, [3, 3, 2, 1], dtype)
    ops = NumpyOps()
    _, state_ref = ref_ops.lstm_forward_training(params, H0, C0, X, sizes)
    _, state = ops.lstm_forward_training(params, H0, C0, X, sizes)
    dX_ref, dp_ref = ref_ops.backprop_lstm(dY, sizes, params, state_ref)
    dX_a, dp_a = ops.backprop_lstm(dY, sizes, params, state_ref)
    dX_b, dp_b = ref_ops.backprop_lstm(dY, sizes, params, state)
    for dX, dp in ((dX_a, dp_a), (dX_b, dp_b)):
        assert_close(dX, dX_ref, dtype)
        assert_close(dp, dp_ref, dtype)


def test_backprop_lstm_gradcheck_float64():
    ops = NumpyOps()
    params, H0, C0, X, sizes, dY = make_case(5, 2, 2, 3, 2, [3, 2, 2, 1], "float64")
    _, state = ops.lstm_forward_training(params, H0, C0, X, sizes)
    dX, dp = ops.backprop_lstm(dY, sizes, params, state)

    def loss(p, x):
        return float((ops.lstm_forward_inference(p, H0, C0, x, sizes) * dY).sum())

    eps = 1e-6
    for arr, grad, other in ((X, dX, params), (params, dp, X)):
        numeric = numpy.zeros_like(arr)
        for k in range(arr.size):
            plus, minus = arr.copy(), arr.copy()
            plus.flat[k] += eps
            minus.flat[k] -= eps
            if arr is X:
                numeric.flat[k] = (loss(params, plus) - loss(params, minus)) / (2 * eps)
            else:
                numeric.flat[k] = (loss(plus, X) - loss(minus, X)) / (2 * eps)
        numpy.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-7)


def test_lstm_forward_matches_thinc():
    # Thinc 8.3's compiled LSTM is float32 only.
    thinc_api = pytest.importorskip("thinc.api")
    params, H0, C0, X, sizes, _ = make_case(6, 2, 2, 6, 4, [4, 3, 3, 1], "float32")
    Y_t, state_t = thinc_api.NumpyOps().lstm_forward_training(params, H0, C0, X, sizes)
    Y, state = NumpyOps().lstm_forward_training(params, H0, C0, X, sizes)
    numpy.testing.assert_allclose(Y, Y_t, rtol=2e-4, atol=2e-5)
    for mine, theirs in zip(state[:3], state_t[:3]):
        assert mine.shape == theirs.shape
        numpy.testing.assert_allclose(mine, theirs, rtol=2e-4, atol=2e-5)


# --- edge cases ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dirs", [1, 2])
def test_lstm_empty_batch(ref_ops, dtype, dirs):
    params, H0, C0, _, _, _ = make_case(7, 2, dirs, 3, 2, [1], dtype)
    X = numpy.zeros((0, 2), dtype=dtype)
    ops = NumpyOps()
    for sizes in (numpy.zeros((0,), dtype="int32"), numpy.zeros((2,), dtype="int32")):
        Y, state = ops.lstm_forward_training(params, H0, C0, X, sizes)
        Y_ref, state_ref = ref_ops.lstm_forward_training(params, H0, C0, X, sizes)
        assert_same(Y, Y_ref)
        for mine, theirs in zip(state[:3], state_ref[:3]):
            assert mine.shape == theirs.shape and mine.dtype == theirs.dtype
        assert ops.lstm_forward_inference(params, H0, C0, X, sizes).shape == (0, dirs * 3)
        dX, dp = ops.backprop_lstm(Y, sizes, params, state)
        assert dX.shape == (0, 2) and dX.dtype == dtype
        assert dp.shape == params.shape and not dp.any()


@pytest.mark.parametrize("dtype", FLOATS)
def test_lstm_trailing_zero_length_steps(ref_ops, dtype):
    # size_at_t may end in empty steps (all sequences over); they change nothing.
    args = make_case(8, 2, 2, 4, 3, [3, 2, 0, 0], dtype)
    check_against_reference(ref_ops, *args, dtype)


@pytest.mark.parametrize("sizes", [[1], [5], [1, 1, 1, 1], [4, 4]], ids=["one-row", "one-step", "one-seq", "equal"])
def test_lstm_degenerate_batches(ref_ops, sizes):
    args = make_case(9, 2, 2, 3, 2, sizes, "float64")
    check_against_reference(ref_ops, *args, "float64")


def test_lstm_inputs_not_mutated_and_output_not_aliased():
    ops = NumpyOps()
    for dirs in (1, 2):
        params, H0, C0, X, sizes, dY = make_case(10, 2, dirs, 3, 2, [3, 2, 1])
        originals = [a.copy() for a in (params, H0, C0, X, sizes, dY)]
        Y, state = ops.lstm_forward_training(params, H0, C0, X, sizes)
        saved = [a.copy() for a in state[:3]]
        ops.backprop_lstm(dY, sizes, params, state)
        for before, after in zip(originals, (params, H0, C0, X, sizes, dY)):
            assert_same(after, before)
        for before, after in zip(saved, state[:3]):
            assert_same(after, before)
        Y[...] = 123.0
        assert not any((a == 123.0).any() for a in state[:3])


class _NanEmpty:
    """numpy, but whose `empty` float arrays start as NaN: an unwritten element shows."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def empty(self, shape, dtype=float, **kwargs):
        out = self._real.empty(shape, dtype=dtype, **kwargs)
        if self._real.dtype(dtype).kind == "f":
            out.fill(self._real.nan)
        return out


@pytest.mark.parametrize("level", [1, 3, 4])
@pytest.mark.parametrize("dtype", FLOATS)
def test_lstm_reads_only_what_it_wrote(monkeypatch, dtype, level):
    """The compiled LSTM takes its outputs, gradients and scratch from numpy.empty (a reused
    block keeps whatever was there): with those NaN-filled, the results are unchanged."""
    kernels = _numpy_lstm._compiled
    ops = NumpyOps()
    try:
        kernels._gemm_isa(level)
        for seed, (depth, dirs, nO, nI, sizes) in enumerate(
            [(1, 2, 3, 5, [3, 2, 2, 1]), (2, 2, 4, 7, [3, 2, 2, 2, 2, 1]), (2, 1, 8, 3, [1, 1, 1]),
             (1, 2, 96, 64, [14, 14, 14, 5, 5, 5, 5, 5])]
        ):
            params, H0, C0, X, sizes_, dY = make_case(seed, depth, dirs, nO, nI, sizes, dtype)
            clean_Y, clean_state = ops.lstm_forward_training(params, H0, C0, X, sizes_)
            clean = (clean_Y, *ops.backprop_lstm(dY, sizes_, params, clean_state))
            monkeypatch.setattr(kernels, "numpy", _NanEmpty(numpy))
            Y, state = ops.lstm_forward_training(params, H0, C0, X, sizes_)
            poisoned = (Y, *ops.backprop_lstm(dY, sizes_, params, state))
            monkeypatch.undo()
            for a, b in zip(clean, poisoned):
                assert numpy.isfinite(b).all()
                assert_same(b, a)
    finally:
        kernels._gemm_isa(0)


def test_lstm_accepts_list_and_int64_sizes_and_strided_inits(ref_ops):
    params, H0, C0, X, sizes, dY = make_case(11, 1, 2, 3, 2, [3, 2, 1])
    Y_ref, _ = ref_ops.lstm_forward_training(params, H0, C0, X, sizes)
    ops = NumpyOps()
    for s in (list(sizes.tolist()), sizes.astype("int64")):
        assert_close(ops.lstm_forward_training(params, H0, C0, X, s)[0], Y_ref, "float32")
    # Non-contiguous initial states are copied, not refused.
    H0_wide = numpy.repeat(H0, 2, axis=2)[:, :, ::2]
    assert not H0_wide.flags.c_contiguous
    assert_close(ops.lstm_forward_inference(params, H0_wide, C0, X, sizes), Y_ref, "float32")


def test_lstm_falls_back_outside_the_fast_path(ref_ops):
    params, H0, C0, X, sizes, dY = make_case(12, 1, 2, 3, 4, [3, 2, 1], "float64")
    ops = NumpyOps()
    X_strided = numpy.asfortranarray(X)
    Y_ref, state_ref = ref_ops.lstm_forward_training(params, H0, C0, X, sizes)
    Y, state = ops.lstm_forward_training(params, H0, C0, X_strided, sizes)
    assert_close(Y, Y_ref, "float64")
    dY_strided = numpy.asfortranarray(dY)
    dX, dp = ops.backprop_lstm(dY_strided, sizes, params, state)
    dX_ref, dp_ref = ref_ops.backprop_lstm(dY, sizes, params, state_ref)
    assert_close(dX, dX_ref, "float64")
    assert_close(dp, dp_ref, "float64")


def _bad_lstm_calls():
    params, H0, C0, X, sizes, dY = make_case(13, 2, 2, 3, 2, [2, 2, 1], "float64")
    return [
        lambda o: o.lstm_forward_training(params[:-1], H0, C0, X, sizes),
        lambda o: o.lstm_forward_training(params, H0, C0, X[:, :1], sizes),
        lambda o: o.lstm_forward_training(params, H0, C0[:1], X, sizes),
        lambda o: o.lstm_forward_training(params, H0, C0, X, [2, 2, 2]),
        lambda o: o.lstm_forward_training(params, H0, C0, X, [1, 2, 2]),
        lambda o: o.lstm_forward_training(params, H0, C0, X, numpy.asarray([2.0, 2.0, 1.0])),
        lambda o: o.lstm_forward_inference(params, H0, C0, X.astype("int64"), sizes),
        lambda o: o.lstm_forward_inference(params, H0, C0, X[None], sizes),
        lambda o: o.backprop_lstm(dY[:, :3], sizes, params, o.lstm_forward_training(params, H0, C0, X, sizes)[1]),
        lambda o: o.backprop_lstm(dY, [2, 2], params, o.lstm_forward_training(params, H0, C0, X, sizes)[1]),
        lambda o: o.backprop_lstm(dY, sizes, params, o.lstm_forward_training(params, H0, C0, X, sizes)[1][:4]),
        lambda o: o.backprop_lstm(dY, sizes, params[:-2], o.lstm_forward_training(params, H0, C0, X, sizes)[1]),
    ]


@pytest.mark.parametrize("pdtype", ["float32", "float64"])
def test_lstm_inputs_of_another_dtype_are_cast_to_the_weights(ref_ops, pdtype):
    """Thinc takes X, H0, C0 (and dY) of any float dtype; both backends compute in params' dtype."""
    params, H0, C0, X, sizes, dY = make_case(17, 2, 2, 3, 2, [2, 2, 1], pdtype)
    other = "float64" if pdtype == "float32" else "float32"
    ops = NumpyOps()
    _, state_want = ops.lstm_forward_training(params, H0, C0, X, sizes)
    dX_want, dp_want = ops.backprop_lstm(dY, sizes, params, state_want)
    for backend in (ops, ref_ops):
        for cast in ("X", "H0", "C0"):
            args = dict(H0=H0, C0=C0, X=X)
            args[cast] = args[cast].astype(other if cast != "X" else "float16")
            Y, state = backend.lstm_forward_training(params, args["H0"], args["C0"], args["X"], sizes)
            assert Y.dtype == numpy.dtype(pdtype) and state[3].dtype == numpy.dtype(pdtype)
            # The same values in params' dtype (the narrower casts lose some precision first).
            same = {k: v.astype(pdtype) for k, v in args.items()}
            Y_want_here = ops.lstm_forward_training(params, same["H0"], same["C0"], same["X"], sizes)[0]
            assert_close(Y, Y_want_here, pdtype)
            assert_close(
                backend.lstm_forward_inference(params, args["H0"], args["C0"], args["X"], sizes), Y_want_here, pdtype
            )
        dX, dp = backend.backprop_lstm(dY.astype(other), sizes, params, state_want)
        assert dX.dtype == dp.dtype == numpy.dtype(pdtype)
        numpy.testing.assert_allclose(dX, dX_want, **TOL["float32"])
        numpy.testing.assert_allclose(dp, dp_want, **TOL["float32"])


@pytest.mark.parametrize("k", range(len(_bad_lstm_calls())))
def test_lstm_errors_match_reference(ref_ops, k):
    call = _bad_lstm_calls()[k]
    with pytest.raises(Exception) as expected:
        call(ref_ops)
    with pytest.raises(type(expected.value)) as got:
        call(NumpyOps())
    assert str(got.value) == str(expected.value)


# --- thread counts -----------------------------------------------------------------------


@pytest.mark.parametrize("level", [0, 3])
@pytest.mark.parametrize("dtype", FLOATS)
def test_lstm_results_do_not_depend_on_thread_counts(dtype, level):
    # Big enough for the two directions to go to two threads when OpenMP gives two. Level 3
    # (AVX2, where the CPU has it) sends the whole-sequence products to the BLAS, whose
    # thread count changes too.
    params, H0, C0, X, sizes, dY = make_case(14, 2, 2, 48, 40, sizes_from_lengths([30, 25, 25, 9, 3] * 8), dtype)
    ops = NumpyOps()
    kernels = _numpy_lstm._compiled
    results = []
    try:
        kernels._gemm_isa(level)
        for n in (1, 2):
            with threads(n):
                if openmp_info.has_openmp():
                    assert kernels._split_directions(H0, X) == (n == 2)
                Y, state = ops.lstm_forward_training(params, H0, C0, X, sizes)
                Y_inf = ops.lstm_forward_inference(params, H0, C0, X, sizes)
                dX, dp = ops.backprop_lstm(dY, sizes, params, state)
                results.append((Y, Y_inf, *state[:3], dX, dp))
    finally:
        kernels._gemm_isa(0)
    for one, two in zip(*results):
        assert_same(one, two)


def _blas_threads():
    from plait.backends import _threads

    _threads.hold_serial_blas()  # probes the libraries once; nothing held when it returns None
    return [lib.get() for lib in _threads._serial_libs or []]


@pytest.mark.parametrize("level", [1, 3, 4])
def test_whole_sequence_products_through_the_blas(ref_ops, level):
    # float32: the input projection and the weight and input gradients go to the BLAS of
    # NumpyOps' products, all of them below AVX-512, with AVX-512 from the size measured for
    # this processor (none where it was not); the steps' products stay in the kernels. Results
    # within the float tolerance of the reference and of the kernels' own products, and the
    # BLAS's thread count as it was.
    from plait.backends import cblas

    kernels = _numpy_lstm._compiled
    args = make_case(21, 2, 2, 24, 36, sizes_from_lengths([19, 17, 12, 12, 5, 1] * 6), "float32")
    try:
        if kernels._gemm_isa(level) != level:
            pytest.skip(f"this CPU cannot run level {level}")
        before = _blas_threads()
        check_against_reference(ref_ops, *args, "float32")
        assert _blas_threads() == before
        assert _numpy_lstm._blas_tables not in (None, False), "no BLAS was installed for the LSTM"
        expected = (0, 0) if level < 4 else _numpy_lstm._avx512_work()
        assert (kernels.blas_min_work(), kernels.blas_min_work(weight_gradients=True)) == expected
        # Every whole-sequence product through the BLAS, then none: both near the reference
        # and near each other; without the BLAS, the kernels' own products bit for bit.
        runs = []
        for address, work, expected in ((cblas._sgemm_rowmajor_address(), 0, 0), (0, 0, -1)):
            kernels.set_blas_sgemm(address, work)
            assert kernels.blas_min_work() == kernels.blas_min_work(weight_gradients=True) == expected
            Y, state, dX, dp = check_against_reference(ref_ops, *args, "float32")
            runs.append((Y, *state[:3], dX, dp))
        for through_blas, own in zip(*runs):
            assert_close(through_blas, own, "float32")
        params, H0, C0, X, sizes, dY = args
        sizes = sizes.astype("int64")
        starts = _numpy_lstm._starts(sizes)
        Y, Y4, G4, C4 = kernels.lstm_forward(params, H0, C0, X, sizes, starts, True)
        assert_same(Y, runs[1][0])
        assert_same(kernels.lstm_backward(dY, params, H0, C0, X, Y4, G4, C4, sizes, starts)[1], runs[1][-1])
    finally:
        kernels._gemm_isa(0)
        _numpy_lstm._blas_tables = None  # the next call installs the routine and the rule again


def test_with_avx512_the_two_kinds_of_products_follow_their_own_sizes(ref_ops):
    # With AVX-512 the weight gradients (A transposed) and the other whole-sequence products
    # have separate sizes: sending only the weight gradients to the BLAS leaves the output and
    # the input gradient bit for bit as the kernels' own products make them. (Whether a routed
    # product's bits change depends on the BLAS: plait's dense kernels, which the table uses
    # for these sizes on some processors, sum in the same order as the LSTM's.)
    from plait.backends import cblas

    kernels = _numpy_lstm._compiled
    params, H0, C0, X, sizes, dY = make_case(23, 1, 2, 20, 30, sizes_from_lengths([15, 11, 11, 4] * 5), "float32")
    sizes = sizes.astype("int64")
    starts = _numpy_lstm._starts(sizes)
    address = cblas._sgemm_rowmajor_address()

    def run(work, work_t):
        kernels.set_blas_sgemm(address, work, work_t)
        Y, Y4, G4, C4 = kernels.lstm_forward(params, H0, C0, X, sizes, starts, True)
        return (Y, *kernels.lstm_backward(dY, params, H0, C0, X, Y4, G4, C4, sizes, starts))

    try:
        if kernels._gemm_isa(4) != 4:
            pytest.skip("needs a CPU with AVX-512")
        own, grads_only, others_only = run(-1, -1), run(-1, 0), run(0, -1)
        assert kernels.blas_min_work() == 0 and kernels.blas_min_work(weight_gradients=True) == -1
        assert_same(grads_only[0], own[0])  # Y: the input projection stayed in the kernels
        assert_same(grads_only[1], own[1])  # dX: so did the input gradient
        for result in (grads_only, others_only):
            for mine, theirs in zip(result, own):
                assert_close(mine, theirs, "float32")
    finally:
        kernels._gemm_isa(0)
        _numpy_lstm._blas_tables = None


@pytest.mark.parametrize("cpu,work", [
    (("GenuineIntel", 6, 207), (1 << 29, 1 << 28)),  # Emerald Rapids: measured
    (("GenuineIntel", 6, 143), (-1, -1)),  # Sapphire Rapids: not measured
    (("AuthenticAMD", 25, 17), (-1, 1 << 23)),  # Zen 4 (every model): the weight gradients only
    (("AuthenticAMD", 25, 97), (-1, 1 << 23)),
    (("AuthenticAMD", 26, 17), (-1, -1)),  # Zen 5: not measured, the kernels keep their products
    (None, (-1, -1)),  # no AVX-512
])
def test_blas_size_with_avx512_follows_the_measured_processors(monkeypatch, cpu, work):
    from plait.backends import _blas

    monkeypatch.setattr(_blas, "avx512_cpu", lambda cpuinfo=None: cpu)
    assert _numpy_lstm._avx512_work() == work
    # A whole family's entry (model None) covers its every model, as in OWN_KERNEL_CPUS; a
    # model's own entry comes first.
    if cpu is not None:
        monkeypatch.setitem(_numpy_lstm.BLAS_AVX512_WORK, (cpu[0], cpu[1], None), (7, 8))
        own_model = (cpu[0], cpu[1], cpu[2]) in _numpy_lstm.BLAS_AVX512_WORK
        assert _numpy_lstm._avx512_work() == (work if own_model else (7, 8))


def test_lstm_products_without_a_blas_routine(monkeypatch, ref_ops):
    # Where no BLAS routine can be resolved, the kernels keep their own products.
    from plait.backends import cblas

    kernels = _numpy_lstm._compiled

    def unavailable():
        raise ImportError("no BLAS here")

    monkeypatch.setattr(cblas, "_sgemm_rowmajor_address", unavailable)
    monkeypatch.setattr(_numpy_lstm, "_blas_tables", None)
    kernels.set_blas_sgemm(0)
    try:
        kernels._gemm_isa(3)
        check_against_reference(ref_ops, *make_case(22, 1, 2, 16, 8, [6, 5, 5, 2]), "float32")
        assert _numpy_lstm._blas_tables is False and not kernels.blas_products()
    finally:
        kernels._gemm_isa(0)
        monkeypatch.setattr(_numpy_lstm, "_blas_tables", None)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("depth,dirs", [(1, 2), (3, 2), (2, 1)])
def test_lstm_directions_on_one_or_two_threads_agree(dtype, depth, dirs):
    kernels = _numpy_lstm._compiled
    params, H0, C0, X, sizes, dY = make_case(16, depth, dirs, 6, 5, [5, 4, 4, 2], dtype)
    sizes = sizes.astype("int64")
    starts = numpy.concatenate([[0], numpy.cumsum(sizes)[:-1]]).astype("int64")
    runs = []
    for par in (False, True):
        Y, Y4, G4, C4 = kernels.lstm_forward(params, H0, C0, X, sizes, starts, True, par)
        Y_inf = kernels.lstm_forward(params, H0, C0, X, sizes, starts, False, par)[0]
        dX, dp = kernels.lstm_backward(dY, params, H0, C0, X, Y4, G4, C4, sizes, starts, par)
        runs.append((Y, Y_inf, Y4, G4, C4, dX, dp))
    for one, two in zip(*runs):
        assert_same(one, two)


# --- activations -------------------------------------------------------------------------


def activation_input(shape, dtype, seed=0):
    rng = numpy.random.default_rng(seed)
    X = numpy.asarray(rng.normal(size=shape) * 8, dtype=dtype)
    if X.size:
        X.flat[0] = 50.0  # beyond the clip at 20
        X.flat[-1] = -90.0
    return X


# (70, 90) is over the size from which dsigmoid and dtanh take the compiled path.
SHAPES = [(), (0,), (1,), (7,), (3, 5), (33, 17), (2, 3, 130), (70, 90)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_sigmoid_matches_reference(ref_ops, dtype, shape):
    X = activation_input(shape, dtype)
    expected = ref_ops.sigmoid(X)
    got = NumpyOps().sigmoid(X)
    assert got.dtype == X.dtype and got.shape == X.shape
    numpy.testing.assert_allclose(got, expected, rtol=3e-7 if dtype == "float32" else 1e-15, atol=0)
    # inplace writes into X and returns it
    X2 = X.copy()
    out = NumpyOps().sigmoid(X2, inplace=True)
    assert out is X2
    assert_same(out, got)


def test_sigmoid_float32_is_monotone_bounded_and_keeps_nan():
    X = numpy.linspace(-30, 30, 20001, dtype="float32")
    Y = NumpyOps().sigmoid(X)
    assert (numpy.diff(Y) >= 0).all()
    assert (Y > 0).all() and (Y <= 1).all()
    assert abs(float(NumpyOps().sigmoid(numpy.zeros(8, dtype="float32"))[3]) - 0.5) < 1e-7
    Z = NumpyOps().sigmoid(numpy.asarray([numpy.nan, 1.0, -numpy.inf, numpy.inf], dtype="float32"))
    assert numpy.isnan(Z[0])
    numpy.testing.assert_allclose(Z[1:], Ops().sigmoid(numpy.asarray([1.0, -numpy.inf, numpy.inf], dtype="float32")), rtol=3e-7)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_sigmoid_derivatives_bit_identical_to_reference(ref_ops, dtype, shape):
    ops = NumpyOps()
    Y = ref_ops.sigmoid(activation_input(shape, dtype, 1))
    T = numpy.asarray(numpy.tanh(activation_input(shape, dtype, 2)))
    dY = activation_input(shape, dtype, 3)
    assert_same(ops.dsigmoid(Y), ref_ops.dsigmoid(Y))
    assert_same(ops.backprop_sigmoid(dY, Y), ref_ops.backprop_sigmoid(dY, Y))
    assert_same(ops.dtanh(T), ref_ops.dtanh(T))
    # inplace variants write into their first argument, except backprop_sigmoid, which
    # writes into Y (its second), as Thinc's does
    for method, args, ref_args, target in (
        ("dsigmoid", (Y.copy(),), (Y.copy(),), 0),
        ("backprop_sigmoid", (dY.copy(), Y.copy()), (dY.copy(), Y.copy()), 1),
        ("dtanh", (T.copy(),), (T.copy(),), 0),
    ):
        out = getattr(ops, method)(*args, inplace=True)
        assert out is args[target]
        assert_same(out, getattr(ref_ops, method)(*ref_args, inplace=True))


def test_activations_leave_inputs_alone_and_fall_back():
    ops, ref = NumpyOps(), Ops()
    X = activation_input((6, 10), "float32")
    before = X.copy()
    ops.sigmoid(X)
    ops.dsigmoid(X)
    ops.dtanh(X)
    ops.backprop_sigmoid(X, X)
    assert_same(X, before)
    # Strided views, other float dtypes and read-only inputs take the reference path.
    strided = X[:, ::2]
    assert_same(ops.sigmoid(strided), ref.sigmoid(strided))
    assert_same(ops.dtanh(strided), ref.dtanh(strided))
    half = (X / 10).astype("float16")
    assert_same(ops.sigmoid(half), ref.sigmoid(half))
    readonly = X.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError):
        ops.dsigmoid(readonly, inplace=True)
    with pytest.raises(ValueError):
        ops.backprop_sigmoid(X[:2], X)
    # Lists are converted (Thinc's sigmoid takes them too); None is refused.
    assert_same(ops.sigmoid([1.0, 2.0]), ref.sigmoid(numpy.asarray([1.0, 2.0])))
    with pytest.raises(TypeError):
        ops.sigmoid(None)


# --- the product kernel on its own ---------------------------------------------------------


# M, N, K: around the register blocks (8/6/4 rows, 16-64 columns), the 128-row chunks, the
# 256-long K slices and the 64-column panels; K = 0 leaves C = 0 (or as it was, with acc).
PRODUCT_SHAPES = [(1, 1, 1), (3, 5, 7), (4, 64, 3), (7, 65, 256), (8, 16, 257), (15, 33, 0),
                  (16, 130, 300), (17, 100, 40), (40, 256, 64), (129, 70, 513), (300, 24, 20)]


def _product_case(seed, M, N, K, ta, dtype):
    rng = numpy.random.default_rng(seed)
    A = rng.normal(size=(K, M) if ta else (M, K)).astype(dtype)
    B = rng.normal(size=(K, N)).astype(dtype)
    C0 = rng.normal(size=(M, N)).astype(dtype)
    return A, B, C0


@pytest.mark.parametrize("level", [1, 3, 4])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ta", [False, True], ids=["A", "A.T"])
def test_product_kernel_matches_numpy_with_or_without_panels_and_copies(dtype, ta, level):
    # The LSTM multiplies by its weights in panels and copies blocks of a transposed A into
    # scratch. Neither may change a single bit: each entry is the same sum in the same order.
    kernels = _numpy_lstm._compiled
    try:
        kernels._gemm_isa(level)
        for seed, (M, N, K) in enumerate(PRODUCT_SHAPES):
            A, B, C0 = _product_case(seed, M, N, K, ta, dtype)
            op_a = (A.T if ta else A).astype("float64")
            for acc in (False, True):
                want = op_a @ B.astype("float64") + (C0 if acc else 0)
                results = []
                for panels in (False, True):
                    for scratch in (False, True):
                        C = C0.copy()
                        kernels._product(ta, A, B, C, acc, panels, scratch)
                        results.append(C)
                numpy.testing.assert_allclose(results[0], want, rtol=1e-4 if dtype == "float32" else 1e-12,
                                              atol=(1e-4 if dtype == "float32" else 1e-12) * max(1, K) ** 0.5)
                for other in results[1:]:
                    assert_same(other, results[0])
    finally:
        kernels._gemm_isa(0)


def test_product_kernel_refuses_shapes_that_do_not_match():
    A = numpy.zeros((3, 4), dtype="float32")
    with pytest.raises(ValueError, match="shapes do not match"):
        _numpy_lstm._compiled._product(False, A, numpy.zeros((5, 2), "float32"),
                                       numpy.zeros((3, 2), "float32"), False, True, True)
