"""NumpyOps' backprop_maxout_affine (Maxout's dX, dW, db) against the Ops reference.

Its kernels skip the zero piece-gradients that the reference's dense products multiply, so
their sums run in another order: it must agree with the reference to rounding, and give the same
bits with one thread and with two (the threshold for threads is lowered to 0 there).
"""
import contextlib

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.backends import NumpyOps, Ops

maxout = pytest.importorskip("plait.backends._kernels_cpu.maxout", reason="compiled kernels not built")
threadpoolctl = pytest.importorskip("threadpoolctl")

TOL = {"float32": dict(rtol=2e-5, atol=2e-5), "float64": dict(rtol=1e-12, atol=1e-12)}


@contextlib.contextmanager
def n_threads(n):
    old = maxout.set_parallel_min_work(0 if n > 1 else 1 << 62)
    try:
        with threadpoolctl.threadpool_limits(limits=n, user_api="openmp"):
            yield
    finally:
        maxout.set_parallel_min_work(old)


def make(rng, nB, nO, nP, nI, dtype, itype="int32"):
    dY = rng.standard_normal((nB, nO)).astype(dtype)
    which = rng.integers(0, nP, size=(nB, nO)).astype(itype)
    X = rng.standard_normal((nB, nI)).astype(dtype)
    W = rng.standard_normal((nO, nP, nI)).astype(dtype)
    return dY, which, X, W


def check_close(got, want, dtype):
    for g, w, name in zip(got, want, ("dX", "dW", "db")):
        assert isinstance(g, numpy.ndarray) and g.dtype == w.dtype and g.shape == w.shape, name
        numpy.testing.assert_allclose(g, w, err_msg=name, **TOL[dtype])


@settings(max_examples=60, deadline=None)
@given(
    nB=st.integers(0, 70),
    nO=st.integers(1, 20),
    nP=st.integers(1, 5),
    # widths around the 8-vector block (64 floats / 32 doubles), the 1-vector block and scalars
    nI=st.sampled_from([1, 3, 4, 7, 8, 9, 31, 32, 33, 64, 65, 72, 130, 192, 211]),
    dtype=st.sampled_from(["float32", "float64"]),
    itype=st.sampled_from(["int32", "int64"]),
    seed=st.integers(0, 2**16),
)
def test_equals_reference_and_is_thread_independent(nB, nO, nP, nI, dtype, itype, seed):
    args = make(numpy.random.default_rng(seed), nB, nO, nP, nI, dtype, itype)
    want = Ops().backprop_maxout_affine(*args)
    results = []
    for n in (1, 2):
        with n_threads(n):
            got = NumpyOps().backprop_maxout_affine(*args)
        check_close(got, want, dtype)
        results.append(got)
    for a, b in zip(*results):
        assert a.tobytes() == b.tobytes()


def test_pieces_that_never_win_get_zero_gradient():
    rng = numpy.random.default_rng(1)
    dY, which, X, W = make(rng, 50, 4, 3, 16, "float32")
    which[:] = 1  # piece 0 and 2 never win
    dX, dW, db = NumpyOps().backprop_maxout_affine(dY, which, X, W)
    assert not dW[:, 0].any() and not dW[:, 2].any() and not db[:, [0, 2]].any()
    numpy.testing.assert_allclose(dW[:, 1], dY.T @ X, rtol=1e-5, atol=1e-5)
    numpy.testing.assert_allclose(db[:, 1], dY.sum(axis=0), rtol=1e-5, atol=1e-5)
    numpy.testing.assert_allclose(dX, dY @ W[:, 1], rtol=1e-5, atol=1e-5)


def test_matches_the_layer_formula_it_replaces():
    # What plait's Maxout backprop computed before the fused op existed.
    ops = NumpyOps()
    dY, which, X, W = make(numpy.random.default_rng(2), 40, 6, 3, 20, "float64")
    nO, nP, nI = W.shape
    dZ = ops.backprop_maxout(dY, which, nP).reshape((40, nO * nP))
    dX, dW, db = ops.backprop_maxout_affine(dY, which, X, W)
    numpy.testing.assert_allclose(dX, dZ @ W.reshape((nO * nP, nI)), rtol=1e-12)
    numpy.testing.assert_allclose(dW, (dZ.T @ X).reshape((nO, nP, nI)), rtol=1e-12)
    numpy.testing.assert_allclose(db, dZ.reshape((40, nO, nP)).sum(axis=0), rtol=1e-12)


@pytest.mark.parametrize(
    "change",
    [
        lambda a: (a[0].astype("float16"), *a[1:]),  # dtype the kernel does not take
        lambda a: (numpy.asfortranarray(a[0]), *a[1:]),  # not C-contiguous
        lambda a: (a[0], a[1].astype("int16"), *a[2:]),
        lambda a: (*a[:3], a[3].astype("float64")),  # mixed float dtypes
    ],
)
def test_other_layouts_take_the_reference_path(change):
    args = change(make(numpy.random.default_rng(3), 9, 4, 2, 5, "float32"))
    assert maxout.backprop_maxout_dx(args[0], args[1], args[3]) is None or maxout.backprop_maxout_dw(
        args[0], args[1], args[2], args[3].shape[1]) is None
    want = Ops().backprop_maxout_affine(*args)
    got = NumpyOps().backprop_maxout_affine(*args)
    for g, w in zip(got, want):
        numpy.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    "change, error, match",
    [
        # Winners outside the pieces: IndexError, as Thinc's backprop_maxout raises.
        (lambda a: (a[0], a[1] + 5, *a[2:]), IndexError, "'which' .* out of bounds for maxout with P=2"),
        (lambda a: (a[0], -a[1] - 1, *a[2:]), IndexError, "'which' .* out of bounds for maxout with P=2"),
        (lambda a: (a[0][:, :3], a[1][:, :3], *a[2:]), ValueError, "'dY' has 3 columns .* nO=4"),
        (lambda a: (a[0], a[1], a[2][:, :4], a[3]), ValueError, r"'X' must have shape \(9, 5\)"),
        (lambda a: (a[0], a[1][:5], *a[2:]), ValueError, "dY.*which"),
        (lambda a: (a[0], a[1], a[2], a[3][0]), ValueError, "'W'"),
    ],
)
def test_bad_input_fails_like_the_reference(change, error, match):
    args = change(make(numpy.random.default_rng(4), 9, 4, 2, 5, "float32"))
    before = [numpy.array(a, copy=True) for a in args]
    with pytest.raises(error, match=match):
        Ops().backprop_maxout_affine(*args)
    with pytest.raises(error, match=match):
        NumpyOps().backprop_maxout_affine(*args)
    for a, b in zip(args, before):
        numpy.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("itype", ["int32", "int64"])
@pytest.mark.parametrize("where", [0, 37, 7 * 11 - 1])  # first, mid-vector, the last (a tail)
@pytest.mark.parametrize("bad", ["P", "-1", "min", "max"])
def test_one_winner_out_of_range_anywhere_is_caught(itype, where, bad):
    # The kernels' range check is an unsigned compare or-ed over a vector loop: a single bad
    # winner (negative, exactly nP, the integer type's extremes) at any position, including
    # the scalar tail past the last whole vector, must send the call to the reference path.
    dY, which, X, W = make(numpy.random.default_rng(5), 7, 11, 3, 6, "float32", itype)
    info = numpy.iinfo(itype)
    value = {"P": 3, "-1": -1, "min": info.min, "max": info.max}[bad]
    assert maxout.backprop_maxout_dx(dY, which, W) is not None
    which.reshape(-1)[where] = value
    assert maxout.backprop_maxout_dx(dY, which, W) is None
    assert maxout.backprop_maxout_dw(dY, which, X, 3) is None
    with pytest.raises(IndexError, match="out of bounds for maxout with P=3"):
        NumpyOps().backprop_maxout_affine(dY, which, X, W)


@settings(max_examples=40, deadline=None)
@given(
    nB=st.integers(0, 300),
    nO=st.integers(1, 20),
    nP=st.integers(1, 5),
    nI=st.sampled_from([1, 7, 8, 9, 33, 130, 192, 211]),
    dtype=st.sampled_from(["float32", "float64"]),
    itype=st.sampled_from(["int32", "int64"]),
    seed=st.integers(0, 2**16),
)
def test_sparse_dw_kernel_equals_the_dense_product(nB, nO, nP, nI, dtype, itype, seed):
    # Called directly: NumpyOps only picks it from 3 pieces up, where it is faster. Up to 300
    # rows, so that several row chunks (128) are summed in turn.
    dY, which, X, W = make(numpy.random.default_rng(seed), nB, nO, nP, nI, dtype, itype)
    _, dW_ref, db_ref = Ops().backprop_maxout_affine(dY, which, X, W)
    results = []
    for n in (1, 2):
        with n_threads(n):
            dW, db = maxout.backprop_maxout_dw(dY, which, X, nP)
        numpy.testing.assert_allclose(dW, dW_ref, **TOL[dtype])
        numpy.testing.assert_allclose(db, db_ref, **TOL[dtype])
        results.append((dW.tobytes(), db.tobytes()))
    assert results[0] == results[1]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("nP", [2, 3])
def test_sparse_dw_kernel_over_several_column_blocks(dtype, nP):
    # Wide inputs: the kernel sums a group of outputs over blocks of columns that fit in L1
    # (256 float32 columns with 3 pieces), the last block partial and with a scalar tail.
    dY, which, X, W = make(numpy.random.default_rng(11), 260, 11, nP, 1030, dtype, "int32")
    _, dW_ref, db_ref = Ops().backprop_maxout_affine(dY, which, X, W)
    dW, db = maxout.backprop_maxout_dw(dY, which, X, nP)
    numpy.testing.assert_allclose(dW, dW_ref, **TOL[dtype])
    numpy.testing.assert_allclose(db, db_ref, **TOL[dtype])


def test_sparse_dw_kernel_over_column_passes_and_row_groups():
    # 300 outputs x 3 pieces: the register-sum kernel (AVX2 / AVX-512 builds) keeps only part
    # of dW's columns in L2 at once, so 500 columns take several passes, the last one partial;
    # 3,000 rows are more than one group of chunks whose lists it makes at a time. Every sum
    # is still taken chunk by chunk in row order, so one and two threads agree to the bit.
    dY, which, X, W = make(numpy.random.default_rng(13), 3000, 300, 3, 500, "float32", "int32")
    _, dW_ref, db_ref = Ops().backprop_maxout_affine(dY, which, X, W)
    results = []
    for n in (1, 2):
        with n_threads(n):
            dW, db = maxout.backprop_maxout_dw(dY, which, X, 3)
        # Sums of ~1,000 terms: rounding scales with the largest sums, not with each one.
        numpy.testing.assert_allclose(dW, dW_ref, rtol=2e-5, atol=2e-6 * abs(dW_ref).max())
        numpy.testing.assert_allclose(db, db_ref, rtol=2e-5, atol=2e-6 * abs(db_ref).max())
        results.append((dW.tobytes(), db.tobytes()))
    assert results[0] == results[1]

def test_sparse_dw_chunks_follow_the_l1_cache():
    # Rows per chunk keep 12 vectors a row within 3/4 of L1: 48 KiB (Emerald Rapids) gives 96
    # AVX2 rows, 32 KiB (Zen 3/4) 64; twice the vector width, half the rows, within 8..256.
    avx2, avx512 = maxout.dw_chunk_rows(8), maxout.dw_chunk_rows(16)
    assert 8 <= avx512 <= avx2 <= 256 and avx2 in (2 * avx512, 2 * avx512 + 1)
    assert maxout.dw_chunk_rows(1) == 256 or maxout.dw_chunk_rows(1) >= 8 * avx2
    with pytest.raises(ValueError, match="vector_floats must be at least 1, got 0"):
        maxout.dw_chunk_rows(0)


def test_sparse_dw_outputs_in_pairs_over_groups_passes_and_an_odd_last_output():
    # The AVX-512 kernel for 3 float32 pieces takes outputs two at a time (an odd last one
    # alone), rows in chunks of dw_pair_chunk_rows(), 64 columns at a time (here 70: a partial
    # block), in passes of columns whose dW stays in L2 (2,001 outputs: one block a pass) and in
    # groups of chunks whose lists fit in 4 MiB (3,000 rows at 2,001 outputs: two groups).
    # Elsewhere the other kernels take the same call. Thread splits start at multiples of 8, so
    # the pairs and the bits are the same with one and two threads.
    rows = maxout.dw_pair_chunk_rows()
    assert 8 <= rows <= 255
    assert rows == min(255, 3 * maxout.dw_chunk_rows(16)) or maxout.dw_chunk_rows(16) in (8, 256)
    rng = numpy.random.default_rng(17)
    for nB, nO, nI in ((3000, 2001, 70), (rows * 2 + 5, 9, 64), (1, 3, 1), (0, 5, 65)):
        dY, which, X, W = make(rng, nB, nO, 3, nI, "float32", "int32")
        want_W, want_b = _dense_dw(dY, which, X, 3)
        results = []
        for n in (1, 2):
            with n_threads(n):
                dW, db = maxout.backprop_maxout_dw(dY, which, X, 3)
            scale = max(1.0, float(abs(want_W).max()))
            numpy.testing.assert_allclose(dW, want_W, rtol=2e-5, atol=2e-6 * scale)
            numpy.testing.assert_allclose(db, want_b, rtol=2e-5, atol=2e-6 * max(1.0, float(abs(want_b).max())))
            results.append((dW.tobytes(), db.tobytes()))
        assert results[0] == results[1], (nB, nO, nI)


def _dense_dw(dY, which, X, nP):
    """dW and db of Maxout's backward in float64, by the dense piece gradients."""
    nB, nO = dY.shape
    dZ = numpy.zeros((nB, nO, nP))
    numpy.put_along_axis(dZ, which[:, :, None].astype(numpy.int64), dY[:, :, None].astype(numpy.float64), axis=2)
    dZ = dZ.reshape((nB, nO * nP))
    return (dZ.T @ X.astype(numpy.float64)).reshape((nO, nP, -1)), dZ.sum(axis=0).reshape((nO, nP))


@pytest.mark.parametrize("dtype,itype", [("float32", "int32"), ("float32", "int64"), ("float64", "int32")])
@pytest.mark.parametrize("nP", [2, 5])
def test_dx_kernel_over_several_row_chunks_and_output_blocks(dtype, itype, nP):
    # 430 rows: two full chunks of 192 and a partial one (not a multiple of the 3-row block;
    # the AVX2 build's 2-row blocks meet odd counts in the next test's slices);
    # 150 outputs: several blocks of outputs whose partial sums wait in dX between blocks.
    # Each row sums its terms in output order however the rows are chunked, so the rows of a
    # slice of the batch come out with the same bits as in the whole batch.
    dY, which, X, W = make(numpy.random.default_rng(12), 430, 150, nP, 100, dtype, itype)
    dX_ref = Ops().backprop_maxout_affine(dY, which, X, W)[0]
    dX = maxout.backprop_maxout_dx(dY, which, W)
    numpy.testing.assert_allclose(dX, dX_ref, **TOL[dtype])
    part = maxout.backprop_maxout_dx(dY[101:317], which[101:317], W)
    assert part.tobytes() == dX[101:317].tobytes()


@pytest.mark.parametrize("dtype,itype", [("float32", "int32"), ("float64", "int64")])
def test_dx_kernel_over_chunks_of_rows_across_column_blocks(dtype, itype):
    # 520 outputs: dY and `which` of 192 rows fill the kernel's chunk (768 KiB), so 430 rows are
    # three chunks, each taken across every block of W's columns (200 inputs: several blocks
    # and a tail), W packed while the first chunk passes. Slices give the rows' bits again.
    dY, which, X, W = make(numpy.random.default_rng(13), 430, 520, 3, 200, dtype, itype)
    dX_ref = Ops().backprop_maxout_affine(dY, which, X, W)[0]
    dX = maxout.backprop_maxout_dx(dY, which, W)
    # Sums of 520 terms up to ~100 in size: the absolute tolerance scales with them.
    tol = TOL[dtype]["rtol"]
    numpy.testing.assert_allclose(dX, dX_ref, rtol=tol, atol=tol * float(numpy.abs(dX_ref).max()))
    for lo, hi in ((0, 191), (190, 430), (7, 400)):
        part = maxout.backprop_maxout_dx(dY[lo:hi], which[lo:hi], W)
        assert part.tobytes() == dX[lo:hi].tobytes()
    with n_threads(2):
        assert maxout.backprop_maxout_dx(dY, which, W).tobytes() == dX.tobytes()


def test_sparse_dw_rule_takes_few_pieces_to_the_blas_and_a_large_dw_too_on_avx512():
    from plait.backends import _kernels_cpu

    assert maxout.sparse_dw_min_pieces() == 3
    assert not maxout.sparse_dw_wanted(64, 1, 192, 4)
    assert not maxout.sparse_dw_wanted(64, 2, 192, 4)
    assert maxout.sparse_dw_wanted(64, 3, 192, 4)  # the text CNN at width 64: 144 KiB of dW
    assert maxout.sparse_dw_wanted(256, 3, 768, 4)  # width 256: 2.3 MiB
    assert maxout.sparse_dw_wanted(512, 3, 1536, 4)  # width 512: 9 MiB
    # Width 1024: 36 MiB of dW. The AVX-512 kernel for 3 float32 pieces (outputs in pairs) beats
    # the BLAS there too; other cases that large go to the BLAS with AVX-512 only.
    assert maxout.sparse_dw_wanted(1024, 3, 3072, 4)
    assert maxout.sparse_dw_wanted(1024, 4, 3072, 4) is (_kernels_cpu.ISA != "avx512")
    assert maxout.sparse_dw_wanted(1024, 3, 3072, 8) is (_kernels_cpu.ISA != "avx512")
    assert maxout.sparse_dw_wanted(1024, 3, 3072, 4, 8) is (_kernels_cpu.ISA != "avx512")
    assert maxout.sparse_dw_wanted(1024, 3, 3072, 4, 4)
