"""NumpyOps' compiled sequence kernels (seq2col, maxout, ragged reductions) against the Ops reference.

Results must equal Ops(numpy) bit for bit, with one OpenMP thread and with two (the threshold for
using threads is lowered to 0 there, so that small inputs take the threaded paths too). Inputs
outside the fast case must take the reference path, and invalid ones must fail as Ops fails.
"""
import contextlib

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.backends import NumpyOps, Ops

seq = pytest.importorskip("plait.backends._kernels_cpu.seq", reason="compiled kernels not built")
threadpoolctl = pytest.importorskip("threadpoolctl")

THREADS = [pytest.param(1, id="1thread"), pytest.param(2, id="2threads")]
FLOATS = ["float32", "float64"]
SETTINGS = settings(max_examples=40, deadline=None)


@contextlib.contextmanager
def n_threads(n):
    """Run with n OpenMP threads; with more than one, every op uses them whatever its size."""
    old = seq.set_parallel_min_work(0 if n > 1 else 1 << 62)
    try:
        with threadpoolctl.threadpool_limits(limits=n, user_api="openmp"):
            yield
    finally:
        seq.set_parallel_min_work(old)


def assert_same(got, want):
    """Same type, dtype, shape and bytes: bit-identical, -0.0 included."""
    assert isinstance(got, numpy.ndarray), type(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.tobytes() == want.tobytes(), (got, want)


def assert_same_nan(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    numpy.testing.assert_array_equal(got, want)


def values(rng, shape, dtype, ties):
    """Normal values, or (ties=True) a few levels with many exact ties, -0.0 among the zeros."""
    if ties:
        X = rng.integers(-2, 3, size=shape).astype(dtype) * 0.5
        X[(X == 0) & (rng.random(shape) < 0.5)] = -0.0
        return X
    return rng.standard_normal(shape).astype(dtype)


lengths_st = st.lists(st.integers(0, 7), min_size=0, max_size=7)
pos_lengths_st = st.lists(st.integers(1, 7), min_size=0, max_size=7)
common = dict(
    nO=st.integers(0, 9),
    dtype=st.sampled_from(FLOATS),
    ldtype=st.sampled_from(["int32", "int64"]),
    ties=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)


@pytest.fixture(scope="module")
def P():
    return NumpyOps()


@pytest.fixture(scope="module")
def R():
    return Ops()


# --- the kernels run: each fast case returns an array instead of handing over to Ops -------------


def test_fast_cases_run_compiled():
    X2 = numpy.ones((3, 2), "float32")
    L = numpy.array([1, 2], "int32")
    assert seq.seq2col(X2, 1, L) is not None
    assert seq.seq2col(X2, 1, None) is not None
    assert seq.backprop_seq2col(numpy.ones((3, 6), "float64"), 1, L) is not None
    assert seq.maxout(numpy.ones((2, 3, 4), "float32")) is not None
    assert seq.backprop_maxout(X2, numpy.zeros((3, 2), "int64"), 2) is not None
    for name in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_first", "reduce_last"):
        assert getattr(seq, name)(X2, L) is not None, name
    dS = numpy.ones((2, 2), "float32")
    assert seq.backprop_reduce_sum(dS, L) is not None
    assert seq.backprop_reduce_mean(dS, L) is not None
    assert seq.backprop_reduce_max(dS, numpy.zeros((2, 2), "int32"), L) is not None
    assert seq.backprop_reduce_first(dS, numpy.array([0, 1, 3], "int32")) is not None
    assert seq.backprop_reduce_last(dS, numpy.array([0, 2], "int64")) is not None
    # Thinc's reductions ignore rows past the last sequence (and gradient rows past the last length).
    X_more, dS_more = numpy.ones((5, 2), "float32"), numpy.ones((3, 2), "float32")
    for name in ("reduce_sum", "reduce_mean", "reduce_max"):
        assert getattr(seq, name)(X_more, L) is not None, name
    assert seq.backprop_reduce_sum(dS_more, L) is not None
    assert seq.backprop_reduce_mean(dS_more, L) is not None
    assert seq.backprop_reduce_max(dS_more, numpy.zeros((3, 2), "int32"), L) is not None


# --- seq2col ---------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", THREADS)
@SETTINGS
@given(lengths=lengths_st, nW=st.integers(0, 3), with_lengths=st.booleans(), **common)
def test_seq2col_equals_reference(P, R, threads, lengths, nW, with_lengths, nO, dtype, ldtype, ties, seed):
    rng = numpy.random.default_rng(seed)
    nM = sum(lengths)
    X = values(rng, (nM, nO), dtype, ties)
    L = numpy.asarray(lengths, dtype=ldtype) if with_lengths else None
    dY = values(rng, (nM, (2 * nW + 1) * nO), dtype, ties)
    X0, dY0 = X.copy(), dY.copy()
    with n_threads(threads):
        Y = P.seq2col(X, nW, lengths=L)
        dX = P.backprop_seq2col(dY, nW, lengths=L)
    assert_same(Y, R.seq2col(X, nW, lengths=L))
    assert_same(dX, R.backprop_seq2col(dY, nW, lengths=L))
    assert_same(X, X0)
    assert_same(dY, dY0)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("nW", [1, 2])
@pytest.mark.parametrize("nF", [7, 64, 131])
def test_seq2col_many_row_blocks(P, R, threads, dtype, nW, nF):
    """Hundreds of rows: work items of whole row blocks, sequences crossing their borders.

    nF of 64 and more takes backprop_seq2col's 64-wide chunks (131: two and a tail)."""
    rng = numpy.random.default_rng(nW)
    L = rng.integers(0, 40, size=40).astype("int32")
    X = values(rng, (int(L.sum()), nF), dtype, False)
    dY = values(rng, (int(L.sum()), nF * (2 * nW + 1)), dtype, False)
    with n_threads(threads):
        Y = P.seq2col(X, nW, lengths=L)
        dX = P.backprop_seq2col(dY, nW, lengths=L)
        Y_one = P.seq2col(X, nW)
    assert_same(Y, R.seq2col(X, nW, lengths=L))
    assert_same(dX, R.backprop_seq2col(dY, nW, lengths=L))
    assert_same(Y_one, R.seq2col(X, nW))
    negative_zeros = numpy.full_like(dY, -0.0)
    assert_same(P.backprop_seq2col(negative_zeros, nW, lengths=L), R.backprop_seq2col(negative_zeros, nW, lengths=L))


def test_seq2col_window_wider_than_sequences(P, R):
    X = numpy.arange(12, dtype="float32").reshape(4, 3)
    L = numpy.array([1, 0, 3], "int32")
    assert_same(P.seq2col(X, 5, lengths=L), R.seq2col(X, 5, lengths=L))
    dY = numpy.ones((4, 33), "float32")
    assert_same(P.backprop_seq2col(dY, 5, lengths=L), R.backprop_seq2col(dY, 5, lengths=L))


# --- maxout ----------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", THREADS)
@SETTINGS
@given(
    nB=st.integers(0, 6), nO=st.integers(0, 6), nP=st.integers(1, 6), dtype=st.sampled_from(FLOATS),
    wdtype=st.sampled_from(["int32", "int64"]), ties=st.booleans(), seed=st.integers(0, 2**31 - 1),
)
def test_maxout_equals_reference(P, R, threads, nB, nO, nP, dtype, wdtype, ties, seed):
    rng = numpy.random.default_rng(seed)
    X = values(rng, (nB, nO, nP), dtype, ties)
    dY = values(rng, (nB, nO), dtype, ties)
    X0 = X.copy()
    with n_threads(threads):
        best, which = P.maxout(X)
        dX = P.backprop_maxout(dY, which.astype(wdtype), nP)
    ref_best, ref_which = R.maxout(X)
    assert_same(best, ref_best)
    assert_same(which, ref_which)
    assert_same(dX, R.backprop_maxout(dY, ref_which.astype(wdtype), nP))
    assert_same(X, X0)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("nP", [1, 2, 3, 4, 7, 16, 17])
def test_maxout_many_cell_blocks(P, R, threads, dtype, nP):
    """Thousands of cells: whole cell blocks, and (float32, nP <= 16) the 16-cell vector path."""
    rng = numpy.random.default_rng(nP)
    X = values(rng, (61, 97, nP), dtype, nP == 3)
    dY = values(rng, (61, 97), dtype, nP in (3, 16))
    with n_threads(threads):
        best, which = P.maxout(X)
        dX = P.backprop_maxout(dY, which, nP)
    ref_best, ref_which = R.maxout(X)
    assert_same(best, ref_best)
    assert_same(which, ref_which)
    assert_same(dX, R.backprop_maxout(dY, ref_which, nP))


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("nP", [2, 3, 5])
def test_maxout_nan_wins_like_argmax(P, R, threads, dtype, nP):
    """numpy's argmax picks the first NaN; so must the kernel, in any piece, among many cells."""
    rng = numpy.random.default_rng(0)
    X = values(rng, (40, 60, nP), dtype, False)
    X[0, 0, 0] = numpy.nan
    X[1, 1, nP - 1] = numpy.nan
    X[2, 2, :] = numpy.nan
    X[3, 3, 1:] = numpy.nan
    X[4, 4, 0] = numpy.inf
    X[4, 4, nP - 1] = numpy.nan
    X[5, 5, :] = -numpy.inf
    with n_threads(threads):
        best, which = P.maxout(X)
    ref_best, ref_which = R.maxout(X)
    assert_same(which, ref_which)
    assert_same_nan(best, ref_best)
    assert which[1, 1] == nP - 1 and which[2, 2] == 0 and which[3, 3] == 1 and which[4, 4] == nP - 1


# --- reduce_sum / reduce_mean ----------------------------------------------------------------


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("reduction", ["sum", "mean"])
@SETTINGS
@given(lengths=lengths_st, extra=st.integers(0, 3), **common)
def test_reduce_sum_mean_equal_reference(P, R, threads, reduction, lengths, extra, nO, dtype, ldtype, ties, seed):
    # `extra` rows past the sequences, which Thinc's reductions (and so both backends) ignore.
    rng = numpy.random.default_rng(seed)
    L = numpy.asarray(lengths, dtype=ldtype)
    X = values(rng, (int(L.sum()) + extra, nO), dtype, ties)
    dS = values(rng, (len(lengths) + extra, nO), dtype, ties)
    X0 = X.copy()
    with n_threads(threads):
        Y = getattr(P, f"reduce_{reduction}")(X, L)
        dX = getattr(P, f"backprop_reduce_{reduction}")(dS, L)
    assert_same(Y, getattr(R, f"reduce_{reduction}")(X, L))
    assert_same(dX, getattr(R, f"backprop_reduce_{reduction}")(dS, L))
    assert_same(X, X0)


@pytest.mark.parametrize("threads", THREADS)
def test_reduce_sum_of_negative_zeros_is_positive_zero(P, R, threads):
    X = numpy.full((5, 3), -0.0, "float32")
    L = numpy.array([2, 3], "int32")
    with n_threads(threads):
        Y = P.reduce_sum(X, L)
    assert not numpy.signbit(Y).any()
    assert_same(Y, R.reduce_sum(X, L))


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("nO", [16, 67, 128])
def test_reduce_sum_mean_wide_rows_equal_reference(P, R, threads, dtype, nO):
    """Rows wide enough for the vector copies of the row sums, -0.0 included."""
    rng = numpy.random.default_rng(nO)
    L = rng.integers(0, 23, size=30).astype("int32")
    X = values(rng, (int(L.sum()), nO), dtype, False)
    X[::7] = -0.0
    with n_threads(threads):
        got_sum, got_mean = P.reduce_sum(X, L), P.reduce_mean(X, L)
    assert_same(got_sum, R.reduce_sum(X, L))
    assert_same(got_mean, R.reduce_mean(X, L))


# --- reduce_max ------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", THREADS)
@SETTINGS
@given(lengths=pos_lengths_st, extra=st.integers(0, 3), wdtype=st.sampled_from(["int32", "int64"]), **common)
def test_reduce_max_equals_reference(P, R, threads, lengths, extra, wdtype, nO, dtype, ldtype, ties, seed):
    # `extra` rows past the sequences, which Thinc's reductions (and so both backends) ignore.
    rng = numpy.random.default_rng(seed)
    L = numpy.asarray(lengths, dtype=ldtype)
    X = values(rng, (int(L.sum()) + extra, nO), dtype, ties)
    dS = values(rng, (len(lengths) + extra, nO), dtype, ties)
    with n_threads(threads):
        Y, which = P.reduce_max(X, L)
        which_more = numpy.concatenate([which, numpy.zeros((extra, nO), which.dtype)]).astype(wdtype)
        dX = P.backprop_reduce_max(dS, which_more, L)
    ref_Y, ref_which = R.reduce_max(X, L)
    assert_same(Y, ref_Y)
    assert_same(which, ref_which)
    assert_same(dX, R.backprop_reduce_max(dS, which_more, L))


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_reduce_max_nan_wins_like_argmax(P, R, threads, dtype):
    rng = numpy.random.default_rng(1)
    L = numpy.array([1, 4, 5, 3], "int32")
    X = values(rng, (13, 6), dtype, True)
    X[0, 0] = numpy.nan  # a one-row sequence
    X[2, 1] = X[4, 1] = numpy.nan  # the first NaN of a column wins
    X[5:10, 2] = numpy.nan  # all NaN
    X[10, 3] = numpy.inf
    X[12, 3] = numpy.nan  # NaN after inf
    X[10:13, 4] = -numpy.inf
    with n_threads(threads):
        Y, which = P.reduce_max(X, L)
    ref_Y, ref_which = R.reduce_max(X, L)
    assert_same(which, ref_which)
    assert_same_nan(Y, ref_Y)
    assert which[1, 1] == 1 and which[2, 2] == 0 and which[3, 3] == 2


# --- reduce_first / reduce_last --------------------------------------------------------------


@pytest.mark.parametrize("threads", THREADS)
@SETTINGS
@given(lengths=pos_lengths_st, idtype=st.sampled_from(["int32", "int64"]), **common)
def test_reduce_first_last_equal_reference(P, R, threads, lengths, idtype, nO, dtype, ldtype, ties, seed):
    rng = numpy.random.default_rng(seed)
    L = numpy.asarray(lengths, dtype=ldtype)
    X = values(rng, (int(L.sum()), nO), dtype, ties)
    dS = values(rng, (len(lengths), nO), dtype, ties)
    for name in ("first", "last"):
        with n_threads(threads):
            Y, idx = getattr(P, f"reduce_{name}")(X, L)
            dX = getattr(P, f"backprop_reduce_{name}")(dS, idx.astype(idtype))
        ref_Y, ref_idx = getattr(R, f"reduce_{name}")(X, L)
        assert_same(Y, ref_Y)
        assert_same(idx, ref_idx)
        assert_same(dX, getattr(R, f"backprop_reduce_{name}")(dS, ref_idx.astype(idtype)))


@pytest.mark.parametrize("name", ["first", "last"])
def test_backprop_first_last_with_odd_indices_follow_numpy(P, R, name):
    """Indices that reduce_* never makes (repeats, negatives numpy wraps) give numpy's answer."""
    dS = numpy.arange(6, dtype="float32").reshape(3, 2)
    odd = [numpy.array([0, 0, 2, 4], "int32"), numpy.array([-1, 1, 2, 4], "int64")]
    if name == "last":
        odd = [numpy.array([1, 1, 3], "int32"), numpy.array([-2, 0, 3], "int64")]
    for idx in odd:
        fn = f"backprop_reduce_{name}"
        assert_same(getattr(P, fn)(dS, idx), getattr(R, fn)(dS, idx))


# --- empty batches and zero-length sequences -------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_empty_batches(P, R, dtype):
    X = numpy.zeros((0, 4), dtype)
    L = numpy.zeros((0,), "int32")
    dS = numpy.zeros((0, 4), dtype)
    for name in ("sum", "mean"):
        assert_same(getattr(P, f"reduce_{name}")(X, L), getattr(R, f"reduce_{name}")(X, L))
        assert_same(getattr(P, f"backprop_reduce_{name}")(dS, L), getattr(R, f"backprop_reduce_{name}")(dS, L))
    for name in ("max", "first", "last"):
        got, ref = getattr(P, f"reduce_{name}")(X, L), getattr(R, f"reduce_{name}")(X, L)
        assert_same(got[0], ref[0])
        assert_same(got[1], ref[1])
    assert_same(P.backprop_reduce_max(dS, numpy.zeros((0, 4), "int32"), L), R.backprop_reduce_max(dS, numpy.zeros((0, 4), "int32"), L))
    assert_same(P.backprop_reduce_first(dS, numpy.zeros((1,), "int32")), R.backprop_reduce_first(dS, numpy.zeros((1,), "int32")))
    assert_same(P.backprop_reduce_last(dS, numpy.zeros((0,), "int32")), R.backprop_reduce_last(dS, numpy.zeros((0,), "int32")))
    assert_same(P.seq2col(X, 2), R.seq2col(X, 2))
    assert_same(P.seq2col(X, 1, lengths=L), R.seq2col(X, 1, lengths=L))
    assert_same(P.backprop_seq2col(numpy.zeros((0, 12), dtype), 1), R.backprop_seq2col(numpy.zeros((0, 12), dtype), 1))
    for shape in [(0, 3, 2), (3, 0, 2)]:
        X3 = numpy.zeros(shape, dtype)
        got, ref = P.maxout(X3), R.maxout(X3)
        assert_same(got[0], ref[0])
        assert_same(got[1], ref[1])
        dY = numpy.zeros(shape[:2], dtype)
        w = numpy.zeros(shape[:2], "int32")
        assert_same(P.backprop_maxout(dY, w, 2), R.backprop_maxout(dY, w, 2))


def test_all_sequences_empty(P, R):
    X = numpy.zeros((0, 3), "float32")
    L = numpy.zeros((4,), "int64")
    assert_same(P.reduce_sum(X, L), R.reduce_sum(X, L))
    assert_same(P.reduce_mean(X, L), R.reduce_mean(X, L))
    dS = numpy.ones((4, 3), "float32")
    assert_same(P.backprop_reduce_mean(dS, L), R.backprop_reduce_mean(dS, L))
    assert_same(P.seq2col(X, 1, lengths=L), R.seq2col(X, 1, lengths=L))


# --- inputs outside the fast case take the reference path --------------------------------------


def _odd_inputs():
    rng = numpy.random.default_rng(3)
    X = rng.standard_normal((6, 8)).astype("float32")
    L = numpy.array([2, 0, 4], "int32")
    L1 = numpy.array([2, 1, 3], "int32")
    X3 = rng.standard_normal((3, 4, 3)).astype("float32")
    yield "strided rows", "reduce_sum", (X[::1, ::2], L), {}
    yield "fortran order", "reduce_max", (numpy.asfortranarray(X), L1), {}
    yield "float16", "reduce_mean", (X.astype("float16"), L), {}
    yield "big-endian", "reduce_sum", (X.astype(">f4"), L), {}
    yield "uint32 lengths", "reduce_sum", (X, L.astype("uint32")), {}
    yield "int16 lengths", "reduce_first", (X, L1.astype("int16")), {}
    yield "strided lengths", "reduce_last", (X, numpy.array([2, 9, 1, 9, 3, 9], "int32")[::2]), {}
    yield "numpy int nW", "seq2col", (X, numpy.int64(1)), {"lengths": L}
    yield "int seq", "seq2col", (numpy.arange(12).reshape(6, 2), 1), {}
    yield "non-contiguous maxout", "maxout", (X3[:, ::2],), {}
    yield "int16 which", "backprop_maxout", (X3[:, :, 0].copy(), numpy.zeros((3, 4), "int16"), 3), {}
    yield "numpy int P", "backprop_maxout", (X3[:, :, 0].copy(), numpy.zeros((3, 4), "int32"), numpy.int32(3)), {}
    yield "ndarray subclass", "reduce_sum", (X.view(numpy.matrix), L), {}


@pytest.mark.parametrize("label,name,args,kwargs", list(_odd_inputs()), ids=[c[0] for c in _odd_inputs()])
def test_odd_inputs_follow_reference(P, R, label, name, args, kwargs):
    if label == "ndarray subclass":
        # numpy.matrix breaks the reference too; the point is that the kernel declines it.
        assert seq.reduce_sum(*args) is None
        return
    got, ref = getattr(P, name)(*args, **kwargs), getattr(R, name)(*args, **kwargs)
    for g, r in zip(got if isinstance(got, tuple) else [got], ref if isinstance(ref, tuple) else [ref]):
        assert_same(g, r)


# --- invalid arguments fail as the reference fails -------------------------------------------


@pytest.mark.parametrize("position", [0, 15, 16, 1000, 61 * 97 - 1])
def test_backprop_maxout_bad_winner_anywhere_raises_like_reference(P, R, position):
    which = numpy.zeros((61, 97), "int32")
    which.flat[position] = 3
    dY = numpy.ones((61, 97), "float32")
    with pytest.raises(Exception) as ours:
        P.backprop_maxout(dY, which, 3)
    with pytest.raises(Exception) as theirs:
        R.backprop_maxout(dY, which, 3)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)


def _bad_calls():
    X = numpy.ones((5, 3), "float32")
    X3 = numpy.ones((2, 3, 4), "float32")
    dS = numpy.ones((2, 3), "float32")
    L = numpy.array([2, 3], "int32")
    yield "seq2col lengths sum", "seq2col", (X, 1), {"lengths": numpy.array([2, 2], "int32")}
    yield "seq2col negative length", "seq2col", (X, 1), {"lengths": numpy.array([6, -1], "int64")}
    yield "seq2col negative nW", "seq2col", (X, -1), {}
    yield "seq2col bool nW", "seq2col", (X, True), {}
    yield "backprop_seq2col width", "backprop_seq2col", (numpy.ones((5, 7), "float32"), 1), {}
    yield "maxout no pieces", "maxout", (numpy.ones((2, 3, 0), "float32"),), {}
    yield "backprop_maxout which >= P", "backprop_maxout", (dS, numpy.full((2, 3), 3, "int32"), 3), {}
    yield "backprop_maxout which < 0", "backprop_maxout", (dS, numpy.full((2, 3), -1, "int64"), 3), {}
    yield "backprop_maxout shapes", "backprop_maxout", (dS, numpy.zeros((3, 2), "int32"), 3), {}
    yield "backprop_maxout P", "backprop_maxout", (dS, numpy.zeros((2, 3), "int32"), 0), {}
    yield "reduce_sum lengths past X", "reduce_sum", (X, numpy.array([3, 3], "int32")), {}
    yield "reduce_max lengths past X", "reduce_max", (X, numpy.array([6], "int64")), {}
    yield "reduce_first lengths short of X", "reduce_first", (X, numpy.array([1, 3], "int32")), {}
    yield "backprop_reduce_mean more lengths than rows", "backprop_reduce_mean", (dS, numpy.array([1, 2, 2], "int64")), {}
    yield "backprop_reduce_max which rows", "backprop_reduce_max", (dS, numpy.zeros((1, 3), "int32"), L), {}
    yield "backprop_reduce_max which columns", "backprop_reduce_max", (dS, numpy.zeros((2, 2), "int32"), L), {}
    yield "reduce_mean negative", "reduce_mean", (X, numpy.array([6, -1], "int32")), {}
    yield "reduce_max zero length", "reduce_max", (X, numpy.array([5, 0], "int32")), {}
    yield "reduce_first zero length", "reduce_first", (X, numpy.array([0, 5], "int64")), {}
    yield "reduce_last zero length", "reduce_last", (X, numpy.array([0, 5], "int32")), {}
    yield "backprop_reduce_sum count", "backprop_reduce_sum", (dS, numpy.array([1, 2, 2], "int32")), {}
    yield "backprop_reduce_mean negative", "backprop_reduce_mean", (dS, numpy.array([1, -2], "int32")), {}
    yield "backprop_reduce_max which", "backprop_reduce_max", (dS, numpy.full((2, 3), 2, "int32"), L), {}
    yield "backprop_reduce_max zero", "backprop_reduce_max", (dS, numpy.zeros((2, 3), "int32"), numpy.array([0, 5], "int32")), {}
    yield "backprop_reduce_first count", "backprop_reduce_first", (dS, numpy.array([0, 2], "int32")), {}
    yield "backprop_reduce_first out of range", "backprop_reduce_first", (dS, numpy.array([0, 9, 5], "int32")), {}
    yield "backprop_reduce_last count", "backprop_reduce_last", (dS, numpy.array([1], "int32")), {}
    yield "backprop_reduce_last out of range", "backprop_reduce_last", (dS, numpy.array([7, 4], "int32")), {}
    yield "maxout no pieces", "maxout", (X3[..., :0],), {}
    yield "reduce_sum float lengths", "reduce_sum", (X, L.astype("float32")), {}


@pytest.mark.parametrize("label,name,args,kwargs", list(_bad_calls()), ids=[c[0] for c in _bad_calls()])
def test_invalid_arguments_fail_like_reference(P, R, label, name, args, kwargs):
    with pytest.raises(Exception) as ref_err:
        getattr(R, name)(*args, **kwargs)
    with pytest.raises(type(ref_err.value)) as got_err:
        getattr(P, name)(*args, **kwargs)
    assert str(got_err.value) == str(ref_err.value)


# --- thinc 8.3 gives the same answers ---------------------------------------------------------


def test_same_as_thinc(P):
    thinc_api = pytest.importorskip("thinc.api")
    T = thinc_api.NumpyOps()
    rng = numpy.random.default_rng(7)
    L = numpy.array([3, 1, 5, 2], "int32")
    X = rng.standard_normal((11, 6)).astype("float32")
    dS = rng.standard_normal((4, 6)).astype("float32")
    for name in ("reduce_sum", "reduce_mean"):
        numpy.testing.assert_allclose(getattr(P, name)(X, L), getattr(T, name)(X, L), rtol=1e-6)
    Y, which = P.reduce_max(X, L)
    tY, twhich = T.reduce_max(X, L)
    assert_same(Y, tY)
    assert_same(which, twhich)
    assert_same(P.backprop_reduce_max(dS, which, L), T.backprop_reduce_max(dS, twhich, L))
    numpy.testing.assert_allclose(P.backprop_reduce_mean(dS, L), T.backprop_reduce_mean(dS, L), rtol=1e-6)
    assert_same(P.backprop_reduce_sum(dS, L), T.backprop_reduce_sum(dS, L))
    assert_same(P.seq2col(X, 2, lengths=L), T.seq2col(X, 2, lengths=L))
    dY = rng.standard_normal((11, 30)).astype("float32")
    numpy.testing.assert_allclose(P.backprop_seq2col(dY, 2, lengths=L), T.backprop_seq2col(dY, 2, lengths=L), rtol=1e-6)
    X3 = rng.standard_normal((5, 4, 3)).astype("float32")
    best, w = P.maxout(X3)
    tbest, tw = T.maxout(X3)
    assert_same(best, tbest)
    assert_same(w, tw)
    dB = rng.standard_normal((5, 4)).astype("float32")
    assert_same(P.backprop_maxout(dB, w, 3), T.backprop_maxout(dB, tw, 3))
