"""NumpyOps' compiled gather_add, scatter_add, get_dropout_mask, adam and adam_step against the Ops reference.

Every kernel result is compared with `Ops(numpy)` (the `ref_ops` fixture) on random shapes, with
1 and 2 OpenMP threads. gather/scatter and adam must be bit-identical to the reference; adam_step
too, except that with clipping its global norm is summed in float64 (numpy sums float32 squares
in float32), so clipped results agree to float32 rounding. Dropout masks follow the reference's
law but not its stream, so they are checked for values, rates, seeding and thread independence.
"""
import contextlib
import math
import platform

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from plait.backends import NumpyOps, Ops
from plait.backends import _numpy_gather
from plait.backends._kernels_cpu import openmp_info
from plait.util import fix_random_seed

THREADS = [1, 2]
FLOATS = ["float32", "float64"]
INDEX_TYPES = ["int32", "int64"]
# Sizes above the kernels' thresholds for going parallel (see the .pyx files).
BIG_GATHER = dict(T=300, O=70, B=1300, K=3)  # B * K * O = 273000 values added
BIG_ADAM = 8 * (1 << 15) + 5  # eight blocks and a tail


@contextlib.contextmanager
def omp_threads(n):
    with threadpool_limits(limits=n, user_api="openmp"):
        if openmp_info.has_openmp():
            assert openmp_info.openmp_max_threads() == n, "threadpoolctl did not reach the kernels' OpenMP"
        yield


def bits(X):
    """The array's bytes as integers, so that -0.0 != 0.0 and NaN == NaN in comparisons."""
    X = numpy.ascontiguousarray(X)
    return X.view(numpy.uint32 if X.dtype == numpy.float32 else numpy.uint64)


def assert_same_bits(A, B):
    assert A.dtype == B.dtype and A.shape == B.shape, (A.dtype, A.shape, B.dtype, B.shape)
    numpy.testing.assert_array_equal(bits(A), bits(B))


def spread(rng, shape, dtype):
    """Values over many magnitudes, so that any change in summation order shows in the bits."""
    return (rng.normal(size=shape) * numpy.exp(rng.normal(size=shape) * 3)).astype(dtype)


def test_kernels_are_built():
    # Without the extensions every method silently falls back to the (slow) reference.
    for module in ("_gather", "_optim", "_random"):
        assert getattr(_numpy_gather, module) is not None, f"plait.backends._kernels_cpu {module} not built"


# ---------------------------------------------------------------------------- gather_add


@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 12),
    O=st.integers(0, 19),
    B=st.integers(0, 9),
    K=st.integers(0, 7),
    dtype=st.sampled_from(FLOATS),
    itype=st.sampled_from(INDEX_TYPES),
    seed=st.integers(0, 2**16),
)
def test_gather_add_equals_reference(T, O, B, K, dtype, itype, seed):
    rng = numpy.random.default_rng(seed)
    table = spread(rng, (T, O), dtype)
    indices = rng.integers(0, T, size=(B, K)).astype(itype)
    expected = Ops().gather_add(table, indices)
    for n in THREADS:
        with omp_threads(n):
            assert_same_bits(NumpyOps().gather_add(table, indices), expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("itype", INDEX_TYPES)
def test_gather_add_parallel_path_is_thread_independent(ref_ops, dtype, itype):
    rng = numpy.random.default_rng(0)
    table = spread(rng, (BIG_GATHER["T"], BIG_GATHER["O"]), dtype)
    indices = rng.integers(0, BIG_GATHER["T"], size=(BIG_GATHER["B"], BIG_GATHER["K"])).astype(itype)
    expected = ref_ops.gather_add(table, indices)
    for n in THREADS:
        with omp_threads(n):
            assert_same_bits(NumpyOps().gather_add(table, indices), expected)


def test_gather_add_sums_from_positive_zero(ref_ops, numpy_ops):
    table = numpy.full((2, 3), -0.0, dtype="f")
    indices = numpy.asarray([[0, 1], [1, 1]], dtype="i")
    assert_same_bits(numpy_ops.gather_add(table, indices), ref_ops.gather_add(table, indices))
    assert not numpy.signbit(numpy_ops.gather_add(table, indices)).any()


@pytest.mark.parametrize("bad", [-1, 5, 2**31 - 1])
@pytest.mark.parametrize("big", [False, True])
def test_gather_add_bad_index_raises_like_reference(ref_ops, numpy_ops, bad, big):
    table = numpy.ones((5, 70 if big else 3), dtype="f")
    indices = numpy.zeros((1300 if big else 4, 3), dtype="i")
    indices[-1, 1] = bad
    with pytest.raises(IndexError) as ours:
        numpy_ops.gather_add(table, indices)
    with pytest.raises(IndexError) as theirs:
        ref_ops.gather_add(table, indices)
    assert str(ours.value) == str(theirs.value)


def test_gather_add_bad_index_with_no_columns_still_raises(numpy_ops):
    with pytest.raises(IndexError):
        numpy_ops.gather_add(numpy.ones((3, 0), dtype="f"), numpy.asarray([[0, 3]], dtype="i"))


@pytest.mark.parametrize(
    "make",
    [
        lambda rng: (spread(rng, (6, 8), "f")[:, ::2], rng.integers(0, 6, (4, 3)).astype("i")),
        lambda rng: (spread(rng, (6, 4), "f"), rng.integers(0, 6, (4, 3)).astype("uint32")),
        lambda rng: (spread(rng, (6, 4), "float16"), rng.integers(0, 6, (4, 3)).astype("i")),
        lambda rng: (spread(rng, (6, 4), "f"), rng.integers(0, 6, (3, 4)).astype("i").T),
        lambda rng: (spread(rng, (6, 4), ">f4"), rng.integers(0, 6, (4, 3)).astype("i")),
    ],
    ids=["strided-table", "uint32-indices", "float16", "transposed-indices", "big-endian"],
)
def test_gather_add_other_layouts_fall_back(ref_ops, numpy_ops, make):
    table, indices = make(numpy.random.default_rng(1))
    numpy.testing.assert_array_equal(numpy_ops.gather_add(table, indices), ref_ops.gather_add(table, indices))


def test_gather_add_errors_come_from_the_reference(numpy_ops):
    with pytest.raises(TypeError, match="Ops.gather_add: argument 'indices' must hold integers"):
        numpy_ops.gather_add(numpy.ones((3, 2), dtype="f"), numpy.zeros((2, 2), dtype="f"))
    with pytest.raises(ValueError, match="'table' needs at least 1 dimensions"):
        numpy_ops.gather_add(numpy.float32(1.0), numpy.zeros((2, 2), dtype="i"))
    # A 1-d table and integer tables take the reference's path (numpy's answer, as in Thinc).
    numpy.testing.assert_array_equal(
        numpy_ops.gather_add(numpy.arange(3, dtype="f"), numpy.array([[0, 2], [1, 1]], dtype="i")), [2.0, 2.0]
    )
    assert numpy_ops.gather_add(numpy.ones((3, 2), dtype="int32"), numpy.zeros((2, 2), dtype="i")).dtype.kind == "i"


# ---------------------------------------------------------------------------- scatter_add


@settings(max_examples=60, deadline=None)
@given(
    T=st.integers(1, 9),
    cols=st.sampled_from([(), (1,), (5,), (17,), (2, 3)]),
    index_shape=st.sampled_from([(0,), (1,), (7,), (20,), (3, 4), ()]),
    dtype=st.sampled_from(FLOATS),
    itype=st.sampled_from(INDEX_TYPES),
    seed=st.integers(0, 2**16),
)
def test_scatter_add_equals_reference(T, cols, index_shape, dtype, itype, seed):
    rng = numpy.random.default_rng(seed)
    table = spread(rng, (T,) + cols, dtype)
    # Negative indices count from the end, as in numpy.add.at; repeats accumulate in order.
    indices = numpy.asarray(rng.integers(-T, T, size=index_shape), dtype=itype)
    values = spread(rng, index_shape + cols, dtype)
    expected = Ops().scatter_add(table.copy(), indices, values)
    for n in THREADS:
        with omp_threads(n):
            ours = table.copy()
            assert NumpyOps().scatter_add(ours, indices, values) is ours
            assert_same_bits(ours, expected)


@settings(max_examples=40, deadline=None)
@given(
    T=st.integers(1, 9),
    O=st.sampled_from([1, 5, 17, 64]),
    B=st.integers(1, 12),
    K=st.integers(1, 5),
    dtype=st.sampled_from(FLOATS),
    itype=st.sampled_from(INDEX_TYPES),
    seed=st.integers(0, 2**16),
)
def test_scatter_add_broadcast_over_last_index_axis_equals_reference(T, O, B, K, dtype, itype, seed):
    # HashEmbed's backprop: one (1, O) value row per token, added to each of its K rows.
    rng = numpy.random.default_rng(seed)
    table = spread(rng, (T, O), dtype)
    indices = numpy.asarray(rng.integers(-T, T, size=(B, K)), dtype=itype)
    values = spread(rng, (B, 1, O), dtype)
    expected = Ops().scatter_add(table.copy(), indices, values)
    spelled_out = Ops().scatter_add(table.copy(), indices, numpy.repeat(values, K, axis=1))
    assert_same_bits(expected, spelled_out)
    for n in THREADS:
        with omp_threads(n):
            ours = table.copy()
            assert NumpyOps().scatter_add(ours, indices, values) is ours
            assert_same_bits(ours, expected)


def test_scatter_add_broadcast_of_other_axes_falls_back(ref_ops, numpy_ops):
    # Only the last index axis may be broadcast by the kernel; anything else is the reference's.
    rng = numpy.random.default_rng(3)
    table = spread(rng, (6, 4), "float32")
    indices = rng.integers(0, 6, size=(3, 2)).astype("int64")
    values = spread(rng, (1, 2, 4), "float32")
    expected = ref_ops.scatter_add(table.copy(), indices, values)
    ours = numpy_ops.scatter_add(table.copy(), indices, values)
    assert_same_bits(ours, expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("O", [70, 300])
def test_scatter_add_large_with_repeats_equals_reference(ref_ops, dtype, O):
    rng = numpy.random.default_rng(2)
    table = spread(rng, (40, O), dtype)
    indices = rng.integers(0, 40, size=4000).astype("i")  # many repeats of each row
    values = spread(rng, (4000, O), dtype)
    expected = ref_ops.scatter_add(table.copy(), indices, values)
    for n in THREADS:
        with omp_threads(n):
            ours = table.copy()
            NumpyOps().scatter_add(ours, indices, values)
            assert_same_bits(ours, expected)


@pytest.mark.parametrize("itype", ["i", "q"])
@pytest.mark.parametrize("bad", [-5, 4, 10**9, -(2**31), 2**31 - 1])
def test_scatter_add_bad_index_raises_and_leaves_table_unchanged(ref_ops, numpy_ops, bad, itype):
    table = numpy.zeros((4, 3), dtype="f")
    indices = numpy.asarray([0, 1, bad, 2], dtype=itype)
    values = numpy.ones((4, 3), dtype="f")
    with pytest.raises(IndexError) as ours:
        numpy_ops.scatter_add(table, indices, values)
    assert not table.any(), "rows before the bad index were written"
    with pytest.raises(IndexError) as theirs:
        ref_ops.scatter_add(table, indices, values)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("itype", ["i", "q"])
def test_scatter_add_takes_every_index_of_the_table_negative_ones_too(ref_ops, numpy_ops, itype):
    # The range check runs over -T..T-1 (the reference wraps negative rows): the ends included.
    table = numpy.zeros((4, 3), dtype="f")
    indices = numpy.asarray([-4, -1, 0, 3, 3, -4, 2, 1, -2], dtype=itype)
    values = numpy.arange(27, dtype="f").reshape((9, 3))
    want = ref_ops.scatter_add(table.copy(), indices, values)
    got = table.copy()
    numpy_ops.scatter_add(got, indices, values)
    assert_same_bits(got, want)


@pytest.mark.parametrize(
    "make",
    [
        # values of another dtype, broadcast values, a strided table, a read-only table stays an error
        lambda rng: (spread(rng, (5, 4), "f"), numpy.asarray([0, 4, 0], "i"), spread(rng, (3, 4), "d")),
        lambda rng: (spread(rng, (5, 4), "f"), numpy.asarray([0, 4, 0], "i"), spread(rng, (4,), "f")),
        lambda rng: (spread(rng, (5, 8), "f")[:, ::2], numpy.asarray([1, 1], "i"), spread(rng, (2, 4), "f")),
        lambda rng: (spread(rng, (5, 4), "d"), numpy.asarray([1, 2], "uint8"), spread(rng, (2, 4), "d")),
    ],
    ids=["float64-values", "broadcast-values", "strided-table", "uint8-indices"],
)
def test_scatter_add_other_layouts_fall_back(ref_ops, numpy_ops, make):
    table, indices, values = make(numpy.random.default_rng(3))
    expected = ref_ops.scatter_add(table.copy(), indices, values)
    numpy.testing.assert_array_equal(numpy_ops.scatter_add(table, indices, values), expected)


def test_scatter_add_values_overlapping_the_table(ref_ops, numpy_ops):
    base = numpy.arange(12, dtype="f").reshape(4, 3)
    ours, theirs = base.copy(), base.copy()
    numpy_ops.scatter_add(ours, numpy.asarray([0, 0], "i"), ours[2:])
    ref_ops.scatter_add(theirs, numpy.asarray([0, 0], "i"), theirs[2:])
    numpy.testing.assert_array_equal(ours, theirs)


# ---------------------------------------------------------------------------- get_dropout_mask


@pytest.mark.parametrize("drop", [0.1, 0.5, 0.9])
def test_dropout_mask_values_and_rate(numpy_ops, drop):
    n = 400_000
    mask = numpy_ops.get_dropout_mask((n,), drop)
    assert mask.dtype == numpy.float32 and mask.shape == (n,)
    kept = numpy.float32(1.0 / (1.0 - drop))
    assert set(numpy.unique(mask).tolist()) == {0.0, float(kept)}
    # Binomial rate within 6 standard deviations.
    sigma = math.sqrt(drop * (1 - drop) / n)
    assert abs((mask == 0).mean() - drop) < 6 * sigma
    # Neighbours (the two halves of one draw, and consecutive draws) are independent.
    zero = mask == 0
    for lag in (1, 2, 3):
        both = (zero[:-lag] & zero[lag:]).mean()
        assert abs(both - drop * drop) < 6 * math.sqrt(drop * drop * (1 - drop * drop) / n)


def test_dropout_mask_rate_is_uniform_along_the_mask(numpy_ops):
    # Every block of the mask (threads fill blocks) has the same rate.
    mask = numpy_ops.get_dropout_mask((64, 4096), 0.3)
    rates = (mask == 0).mean(axis=1)
    sigma = math.sqrt(0.3 * 0.7 / 4096)
    assert numpy.all(numpy.abs(rates - 0.3) < 6 * sigma)


@pytest.mark.parametrize("drop", [0.25, numpy.float32(0.3), numpy.float64(0.7), 1e-9, 1 - 1e-9])
def test_dropout_mask_kept_value_is_rounded_like_the_reference(ref_ops, numpy_ops, drop):
    shape = (2000,)
    ours = numpy_ops.get_dropout_mask(shape, drop)
    theirs = ref_ops.get_dropout_mask(shape, drop)
    assert ours.dtype == theirs.dtype == numpy.float32
    expected = numpy.float32(True / (1.0 - drop))
    for mask in (ours, theirs):
        assert set(numpy.unique(mask).tolist()) <= {0.0, float(expected)}


@pytest.mark.parametrize("shape", [0, 7, (0,), (3, 0, 2), (5, 1), [2, 3], (numpy.int64(4),), (2, 3, 5)])
def test_dropout_mask_shapes(ref_ops, numpy_ops, shape):
    ours = numpy_ops.get_dropout_mask(shape, 0.5)
    theirs = ref_ops.get_dropout_mask(shape, 0.5)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype


@pytest.mark.parametrize("drop", [None, 0, 0.0, -0.5, 1.0, 1, 3.0])
def test_dropout_mask_trivial_rates_are_the_reference(ref_ops, numpy_ops, drop):
    ours = numpy_ops.get_dropout_mask((3, 4), drop)
    theirs = ref_ops.get_dropout_mask((3, 4), drop)
    assert_same_bits(ours, theirs)


def test_dropout_mask_bad_shape_raises_like_reference(ref_ops, numpy_ops):
    with pytest.raises(ValueError, match="must be >= 0"):
        numpy_ops.get_dropout_mask((3, -1), 0.5)


def test_dropout_mask_is_seeded_by_fix_random_seed(numpy_ops):
    def masks(seed):
        fix_random_seed(seed)
        return [numpy_ops.get_dropout_mask((5, 77), 0.5) for _ in range(3)]

    first, again, other = masks(1), masks(1), masks(2)
    for a, b in zip(first, again):
        assert_same_bits(a, b)
    assert not numpy.array_equal(first[0], first[1]), "consecutive masks repeat"
    assert not numpy.array_equal(first[0], other[0]), "different seeds give the same mask"


def test_dropout_mask_is_seeded_by_numpy_random_seed_too(numpy_ops):
    numpy.random.seed(123)
    a = numpy_ops.get_dropout_mask((1000,), 0.4)
    numpy.random.seed(123)
    b = numpy_ops.get_dropout_mask((1000,), 0.4)
    assert_same_bits(a, b)


@pytest.mark.parametrize("n", [300_001, 1 << 18])
def test_dropout_mask_is_thread_count_independent(n):
    results = []
    for threads in THREADS:
        with omp_threads(threads):
            fix_random_seed(7)
            results.append(NumpyOps().get_dropout_mask((n,), 0.35))
    assert_same_bits(results[0], results[1])
    # The last value of an odd-sized mask is filled too (the mask is from numpy.empty).
    assert set(numpy.unique(results[0][-3:]).tolist()) <= {0.0, float(numpy.float32(1 / 0.65))}


def test_dropout_mask_prefix_is_stable_across_sizes(numpy_ops):
    # Value i depends on the key and i only: a longer mask from the same key extends a shorter one.
    fix_random_seed(3)
    short = numpy_ops.get_dropout_mask((101,), 0.5)
    fix_random_seed(3)
    long = numpy_ops.get_dropout_mask((5000,), 0.5)
    assert_same_bits(short, long[:101])


# ---------------------------------------------------------------------------- adam


def adam_arrays(rng, n, dtype):
    W = spread(rng, (n,), dtype)
    G = spread(rng, (n,), dtype)
    M1 = spread(rng, (n,), dtype) * dtype_type(dtype)(0.1)
    M2 = numpy.abs(spread(rng, (n,), dtype))
    return W, G, M1, M2


def dtype_type(dtype):
    return numpy.dtype(dtype).type


ADAM_HYPER = st.tuples(
    st.floats(0.0, 0.999), st.floats(0.0, 0.9999), st.sampled_from([1e-8, 1e-3, 1.0]),
    st.floats(1e-5, 0.5), st.sampled_from([1.0, 0.0, 0.5]),
)


@settings(max_examples=50, deadline=None)
@given(n=st.integers(0, 70), dtype=st.sampled_from(FLOATS), hyper=ADAM_HYPER, seed=st.integers(0, 2**16))
def test_adam_equals_reference(n, dtype, hyper, seed):
    arrays = adam_arrays(numpy.random.default_rng(seed), n, dtype)
    expected = [X.copy() for X in arrays]
    Ops().adam(*expected, *hyper)
    for threads in THREADS:
        with omp_threads(threads):
            ours = [X.copy() for X in arrays]
            out = NumpyOps().adam(*ours, *hyper)
            assert all(a is b for a, b in zip(out, ours))
            for a, b in zip(ours, expected):
                assert_same_bits(a, b)
            assert not ours[1].any(), "gradient not zeroed"


@pytest.mark.parametrize("n", [0, 7, 70, BIG_ADAM])
@pytest.mark.parametrize("dtype", FLOATS)
def test_adam_keep_gradient_leaves_it_and_updates_the_same(n, dtype):
    arrays = adam_arrays(numpy.random.default_rng(n), n, dtype)
    expected = [X.copy() for X in arrays]
    Ops().adam(*expected, 0.9, 0.999, 1e-8, 0.01, 0.5)
    ref_kept = [X.copy() for X in arrays]
    Ops().adam(*ref_kept, 0.9, 0.999, 1e-8, 0.01, 0.5, keep_gradient=True)
    assert_same_bits(ref_kept[1], arrays[1])
    for threads in THREADS:
        with omp_threads(threads):
            ours = [X.copy() for X in arrays]
            NumpyOps().adam(*ours, 0.9, 0.999, 1e-8, 0.01, 0.5, keep_gradient=True)
        assert_same_bits(ours[1], arrays[1])
        for i in (0, 2, 3):
            assert_same_bits(ours[i], expected[i])
            assert_same_bits(ref_kept[i], expected[i])


@pytest.mark.parametrize("dtype", FLOATS)
def test_adam_parallel_path_is_thread_independent(dtype):
    arrays = adam_arrays(numpy.random.default_rng(4), BIG_ADAM, dtype)
    expected = [X.copy() for X in arrays]
    Ops().adam(*expected, 0.9, 0.999, 1e-8, 0.01)
    for threads in THREADS:
        with omp_threads(threads):
            ours = [X.copy() for X in arrays]
            NumpyOps().adam(*ours, 0.9, 0.999, 1e-8, 0.01)
            for a, b in zip(ours, expected):
                assert_same_bits(a, b)


@pytest.mark.parametrize(
    "change",
    [
        lambda A, h: ([X[::2] if i == 0 else X[:10] for i, X in enumerate(A)], h),
        lambda A, h: ([X.astype("float64") if i == 1 else X for i, X in enumerate(A)], h),
        lambda A, h: (A, (numpy.float64(0.9),) + h[1:]),
        lambda A, h: ([X.reshape(4, 5) for X in A], h),
    ],
    ids=["strided", "mixed-dtypes", "numpy-scalar", "2d"],
)
def test_adam_other_inputs_equal_reference(change):
    arrays = adam_arrays(numpy.random.default_rng(5), 20, "float32")
    hyper = (0.9, 0.999, 1e-8, 0.01, 1.0)
    arrays, hyper = change(arrays, hyper)
    ours = [numpy.array(X, copy=True) for X in arrays]
    theirs = [numpy.array(X, copy=True) for X in arrays]
    NumpyOps().adam(*ours, *hyper)
    Ops().adam(*theirs, *hyper)
    for a, b in zip(ours, theirs):
        numpy.testing.assert_array_equal(a, b)


def test_adam_shape_mismatch_raises_like_reference(numpy_ops):
    W = numpy.zeros(4, "f")
    with pytest.raises(ValueError, match="Ops.adam: arguments 'weights' and 'mom2' must have the same shape"):
        numpy_ops.adam(W, W.copy(), W.copy(), numpy.zeros(5, "f"), 0.9, 0.999, 1e-8, 0.1)


x86_only = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"),
    reason="the subnormal flush uses the x86 MXCSR",
)


@x86_only
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("threads", THREADS)
def test_adam_flushes_subnormal_moments_and_changes_nothing_else(dtype, threads):
    # A weight whose gradient stays zero: its first moment decays by beta1 every step and turns
    # subnormal. The kernel flushes it to zero (x86 would take a microcode assist per operation
    # on it); every other value keeps the reference's bits, and the weights are unchanged.
    tiny = numpy.finfo(dtype).tiny
    n = BIG_ADAM  # the parallel path too
    rng = numpy.random.default_rng(11)
    W, G, M1, M2 = adam_arrays(rng, n, dtype)
    sub = numpy.arange(n) % 3 == 0
    G[sub] = 0
    M1[sub] = numpy.asarray(tiny * 1.05, dtype)  # times beta1 = 0.9: subnormal after the step
    M2[sub] = numpy.asarray(tiny * 0.25, dtype)  # already subnormal on entry
    expected = [X.copy() for X in (W, G, M1, M2)]
    Ops().adam(*expected, 0.9, 0.999, 1e-8, 0.01)
    assert (expected[2][sub] != 0).all() and (numpy.abs(expected[2][sub]) < tiny).all()
    with omp_threads(threads):
        ours = [X.copy() for X in (W, G, M1, M2)]
        NumpyOps().adam(*ours, 0.9, 0.999, 1e-8, 0.01)
    assert not ours[2][sub].any() and not ours[3][sub].any(), "subnormal moments kept"
    assert_same_bits(ours[0], expected[0])
    for ours_X, want in zip(ours[2:], expected[2:]):
        assert_same_bits(ours_X[~sub], want[~sub])
    # The caller's floating-point state is restored: numpy makes subnormals again.
    assert numpy.asarray(tiny, dtype) * numpy.asarray(0.5, dtype) != 0
    with omp_threads(threads):
        ours = [X.copy() for X in (W, G, M1, M2)]
        NumpyOps().adam_step(*ours, beta1=0.9, beta2=0.999, eps=1e-8, learn_rate=0.01)
    assert not ours[2][sub].any()
    assert_same_bits(ours[0], expected[0])
    assert numpy.asarray(tiny, dtype) * numpy.asarray(0.5, dtype) != 0


# ---------------------------------------------------------------------------- adam_step


def multipass(W, G, M1, M2, A, *, L2, weight_decay, grad_clip, nr_update, **adam_args):
    """What Optimizer did before adam_step: one Ops call (or numpy statement) per stage."""
    ops = Ops()
    if L2:
        G += L2 * W
    if grad_clip:
        ops.clip_gradient(G, grad_clip)
    ops.adam(W, G, M1, M2, adam_args["beta1"], adam_args["beta2"], adam_args["eps"],
             adam_args["learn_rate"], adam_args.get("mod_rate", 1.0))
    if weight_decay:
        W -= weight_decay * W
    if A is not None:
        ops.update_averages(A, W, nr_update)


STEP_OPTIONS = st.fixed_dictionaries(
    {
        "beta1": st.sampled_from([0.9, 0.5]),
        "beta2": st.sampled_from([0.999, 0.9]),
        "eps": st.sampled_from([1e-8, 1.0]),
        "learn_rate": st.floats(1e-4, 0.1),
        "mod_rate": st.sampled_from([1.0, 0.0]),
        "L2": st.sampled_from([0.0, 0.01]),
        "weight_decay": st.sampled_from([0.0, 1e-4]),
        "nr_update": st.integers(1, 20_000),
    }
)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 40),
    dtype=st.sampled_from(FLOATS),
    options=STEP_OPTIONS,
    with_averages=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_adam_step_without_clipping_equals_reference_bits(n, dtype, options, with_averages, seed):
    rng = numpy.random.default_rng(seed)
    arrays = list(adam_arrays(rng, n, dtype)) + [spread(rng, (n,), dtype) if with_averages else None]
    expected = [None if X is None else X.copy() for X in arrays]
    Ops().adam_step(*expected, grad_clip=0.0, **options)
    multi = [None if X is None else X.copy() for X in arrays]
    multipass(*multi, grad_clip=0.0, **options)
    for threads in THREADS:
        with omp_threads(threads):
            ours = [None if X is None else X.copy() for X in arrays]
            NumpyOps().adam_step(*ours, grad_clip=0.0, **options)
            for a, b, c in zip(ours, expected, multi):
                if a is not None:
                    assert_same_bits(a, b)
                    assert_same_bits(a, c)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [37, BIG_ADAM])
@pytest.mark.parametrize("clip", [0.5, 1e9])
def test_adam_step_with_clipping_equals_reference(dtype, n, clip):
    rng = numpy.random.default_rng(6)
    arrays = list(adam_arrays(rng, n, dtype)) + [spread(rng, (n,), dtype)]
    options = dict(beta1=0.9, beta2=0.999, eps=1e-8, learn_rate=0.01, nr_update=3)
    L2 = 0.01
    results = []
    for threads in THREADS:
        with omp_threads(threads):
            ours = [X.copy() for X in arrays]
            NumpyOps().adam_step(*ours, L2=L2, grad_clip=clip, **options)
            results.append(ours)
    # The norm's partial sums are added in block order whatever the thread count.
    for a, b in zip(results[0], results[1]):
        assert_same_bits(a, b)
    # The reference with its gradient clipped by hand, by the exact norm of G + L2 * W.
    W, G, M1, M2, A = (X.copy() for X in arrays)
    G += L2 * W
    norm = math.sqrt(math.fsum(float(g) ** 2 for g in G.tolist()))
    if norm >= clip:
        G *= clip / norm
    Ops().adam_step(W, G, M1, M2, A, grad_clip=0.0, **options)
    for a, b in zip(results[0], (W, G, M1, M2, A)):
        if dtype == "float32":
            assert_same_bits(a, b)
        else:
            numpy.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    # And the plain reference, whose float32 norm is summed in float32: equal to float32 rounding
    # (a weight that nearly cancels can lose a few more digits, hence the atol).
    expected = [X.copy() for X in arrays]
    Ops().adam_step(*expected, L2=L2, grad_clip=clip, **options)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for a, b in zip(results[0], expected):
        numpy.testing.assert_allclose(a, b, rtol=tol, atol=tol * 1e-2)


def test_adam_step_clips_to_the_threshold(numpy_ops):
    # With beta1 = beta2 = 0, eps = 0 the step is lr * g / |g|, so the clipped
    # gradient is visible in mom1 = (1 - beta1) * g.
    G = numpy.asarray([3.0, 4.0], dtype="f")
    W, M1, M2 = (numpy.zeros(2, "f") for _ in range(3))
    numpy_ops.adam_step(W, G, M1, M2, beta1=0.0, beta2=0.0, eps=0.0, learn_rate=1.0, grad_clip=1.0)
    numpy.testing.assert_allclose(M1, [0.6, 0.8], rtol=1e-6)
    numpy.testing.assert_allclose(W, [-1.0, -1.0], rtol=1e-6)
    assert not G.any()


def test_adam_step_other_inputs_equal_reference():
    rng = numpy.random.default_rng(8)
    W, G, M1, M2 = adam_arrays(rng, 12, "float32")
    cases = [
        (W.reshape(3, 4), G.reshape(3, 4), M1.reshape(3, 4), M2.reshape(3, 4), None),  # 2d: fast too
        (W, G.astype("float64"), M1, M2, None),  # mixed dtypes: reference
        (W, G, M1, M2, numpy.zeros(24, "f")[::2]),  # strided averages: reference
    ]
    for case in cases:
        ours = [None if X is None else numpy.array(X, copy=True) for X in case]
        theirs = [None if X is None else numpy.array(X, copy=True) for X in case]
        options = dict(beta1=0.9, beta2=0.999, eps=1e-8, learn_rate=0.01, L2=0.1, grad_clip=0.5)
        NumpyOps().adam_step(*ours, **options)
        Ops().adam_step(*theirs, **options)
        for a, b in zip(ours, theirs):
            if a is not None:
                numpy.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-9)


@pytest.mark.parametrize("ops", [Ops(), NumpyOps()], ids=["Ops", "NumpyOps"])
def test_adam_step_errors(ops):
    W = numpy.zeros(4, "f")
    with pytest.raises(ValueError, match="'weights' and 'averages' must have the same shape"):
        ops.adam_step(W, W.copy(), W.copy(), W.copy(), numpy.zeros(3, "f"), beta1=0.9, beta2=0.999,
                      eps=1e-8, learn_rate=0.1)
    with pytest.raises(TypeError, match="'mom1' must hold floats"):
        ops.adam_step(W, W.copy(), numpy.zeros(4, "i"), W.copy(), beta1=0.9, beta2=0.999, eps=1e-8,
                      learn_rate=0.1)
    with pytest.raises(ValueError, match="'grad_clip' must be >= 0"):
        ops.adam_step(W, W.copy(), W.copy(), W.copy(), beta1=0.9, beta2=0.999, eps=1e-8,
                      learn_rate=0.1, grad_clip=-1.0)


@pytest.mark.parametrize("L2_is_weight_decay", [True, False])
@pytest.mark.parametrize("use_radam", [False, True])
def test_optimizer_step_equals_the_multipass_reference(L2_is_weight_decay, use_radam):
    """Optimizer (now one adam_step per parameter) against the separate-pass path it replaced."""
    from plait.optimizers import Optimizer

    rng = numpy.random.default_rng(9)
    opt = Optimizer(0.01, L2=0.01, grad_clip=0.5, L2_is_weight_decay=L2_is_weight_decay,
                    use_radam=use_radam)
    W = spread(rng, (6, 7), "float32")
    W_ref = W.reshape(-1).copy()
    M1, M2, A = (numpy.zeros(42, "f") for _ in range(3))
    for t in range(1, 15):
        G = rng.normal(size=(6, 7)).astype("f")
        W, G_out = opt((0, "W"), W, G.copy())
        assert not G_out.any()
        b1, b2, eps, lr, mod_rate = (
            opt._radam_rates(0.01, t) if use_radam else opt._adam_rates(W, 1.0, t)
        )
        multipass(
            W_ref, G.reshape(-1).copy(), M1, M2, A, beta1=b1, beta2=b2, eps=eps, learn_rate=lr,
            mod_rate=mod_rate, L2=0.0 if L2_is_weight_decay else 0.01,
            weight_decay=0.01 * 0.01 if L2_is_weight_decay else 0.0, grad_clip=0.5, nr_update=t,
        )
    numpy.testing.assert_allclose(W.reshape(-1), W_ref, rtol=1e-5, atol=1e-7)
    numpy.testing.assert_allclose(opt.averages[(0, "W")].reshape(-1), A, rtol=1e-5, atol=1e-7)
    numpy.testing.assert_allclose(opt.mom2[(0, "W")], M2, rtol=1e-5, atol=1e-9)


def test_optimizer_runs_one_adam_step_per_parameter(monkeypatch):
    from plait.optimizers import Adam, RAdam

    calls = []
    original = NumpyOps.adam_step

    def spy(self, *args, **kwargs):
        calls.append(kwargs["grad_clip"])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(NumpyOps, "adam_step", spy)
    for make in (Adam, RAdam):
        W = numpy.ones((3, 4), dtype="f")
        make(0.1, grad_clip=2.0)((0, "W"), W, numpy.ones((3, 4), dtype="f"))
    assert calls == [2.0, 2.0]


def test_optimizer_zeroes_a_strided_gradient():
    from plait.optimizers import Adam

    W = numpy.ones((4, 3), dtype="f")
    G = numpy.ones((4, 6), dtype="f")[:, ::2]
    W_out, G_out = Adam(0.1, grad_clip=0.0)((0, "W"), W, G)
    assert G_out is G and not G.any()
    numpy.testing.assert_allclose(W_out, 0.9, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["uint32", "uint64"])
def test_unsigned_indices_take_the_compiled_path(monkeypatch, ref_ops, dtype):
    # Hashed row keys come as uint32: the backend, not each layer, turns them into row numbers.
    rng = numpy.random.default_rng(7)
    table = rng.standard_normal((50, 6)).astype("float32")
    indices = rng.integers(0, 50, (40, 3)).astype(dtype)
    values = rng.standard_normal((40, 3, 6)).astype("float32")
    want_gather = ref_ops.gather_add(table, indices.astype("int64"))
    want_scatter = ref_ops.scatter_add(table.copy(), indices.astype("int64"), values)

    def refuse(*args, **kwargs):
        raise AssertionError("fell back to the Ops reference")

    monkeypatch.setattr(Ops, "gather_add", refuse)
    monkeypatch.setattr(Ops, "scatter_add", refuse)
    ops = NumpyOps()
    assert_same_bits(ops.gather_add(table, indices), want_gather)
    assert_same_bits(ops.scatter_add(table.copy(), indices, values), want_scatter)


def test_unsigned_indices_out_of_range_still_raise(ref_ops):
    table = numpy.zeros((4, 2), "float32")
    with pytest.raises(IndexError):
        NumpyOps().gather_add(table, numpy.array([[2**63 + 1]], dtype="uint64"))
    with pytest.raises(IndexError):
        NumpyOps().gather_add(table, numpy.array([[7]], dtype="uint32"))
