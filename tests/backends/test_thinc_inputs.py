"""The odd inputs that Thinc 8.3 accepts, accepted here too, with Thinc's answers and error types.

Its ops are numpy formulas, so they take integers (promoted to float64 where the op makes
floats), operands that broadcast (a (1, nO) bias, a (1, n) Y), 1-d operands in gemm and data of
any rank in the asarray helpers, and ignore softmax_sequences' axis. test_thinc_probe.py checks
all of Thinc's Ops methods this way against the real thinc.

Thinc's ragged reductions read the first sum(lengths) rows and ignore the rest, its backprops
take one length per leading gradient row, and it raises IndexError (not ValueError) for lengths
or indices that run past an array. Its own tests match some of its messages, so those phrases
must appear in ours. Where Thinc's compiled kernels read or write out of bounds (negative
winners, more lengths than gradient rows) plait raises IndexError instead.

The last part runs the same inputs through the real thinc, when it is installed.
"""
import numpy
import pytest

from plait.backends import NumpyOps, Ops

try:
    from ._gradcheck import to_np
except ImportError:  # tests/ is not a package: pytest puts this folder on sys.path
    from _gradcheck import to_np  # type: ignore[no-redef]

FLOATS = ["float32", "float64"]


def _f(*shape, dtype="float32"):
    n = int(numpy.prod(shape)) if shape else 1
    return (numpy.arange(n, dtype="float64").reshape(shape) * 0.37 - 1.1).astype(dtype)


def _i(values, dtype="int32"):
    return numpy.asarray(values, dtype=dtype)


def _np(ops, X):
    return to_np(ops, X)


# --- ragged reductions: rows past the sequences are ignored -------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["reduce_sum", "reduce_mean", "reduce_max"])
def test_reductions_ignore_rows_past_the_lengths(ops, name, dtype):
    X = ops.asarray(_f(7, 3, dtype=dtype))
    L = ops.asarray1i([2, 0, 3] if name != "reduce_max" else [2, 3])
    got = getattr(ops, name)(X, L)
    want = getattr(ops, name)(ops.asarray(_f(7, 3, dtype=dtype)[:5]), L)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert g.dtype == w.dtype and g.shape == w.shape
        numpy.testing.assert_array_equal(_np(ops, g), _np(ops, w))


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_mean", "reduce_max"])
def test_reductions_of_no_sequences_are_empty(ops, name):
    got = getattr(ops, name)(ops.asarray(_f(4, 3)), ops.alloc1i(0))
    for g in got if isinstance(got, tuple) else (got,):
        assert g.shape == (0, 3)


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_first", "reduce_last"])
@pytest.mark.parametrize("lengths", [[3, 3], [6, 1]])
def test_lengths_past_the_rows_are_an_index_error(ops, name, lengths):
    X = ops.asarray(_f(5, 2))
    with pytest.raises(IndexError, match="lengths must sum up to the number of rows") as info:
        getattr(ops, name)(X, ops.asarray1i(lengths))
    assert f"{name}" in str(info.value) and "'X' (5)" in str(info.value)
    numpy.testing.assert_array_equal(_np(ops, X), _f(5, 2))


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_mean", "reduce_max"])
def test_lengths_are_read_in_order_as_thinc_does(ops, name):
    X = ops.asarray(_f(5, 2))
    # A negative length before the overflow is a ValueError; after it, the overflow wins.
    with pytest.raises(ValueError, match="lengths must be"):
        getattr(ops, name)(X, ops.asarray1i([-1, 10]))
    with pytest.raises(IndexError, match="lengths must sum up to the number of rows"):
        getattr(ops, name)(X, ops.asarray1i([10, -1]))


@pytest.mark.parametrize("name", ["reduce_first", "reduce_last"])
def test_first_and_last_need_lengths_that_cover_x(ops, name):
    X = ops.asarray(_f(5, 2))
    with pytest.raises(IndexError, match="lengths must sum up to the number of rows"):
        getattr(ops, name)(X, ops.asarray1i([2, 2]))
    with pytest.raises(ValueError, match="all sequence lengths must be > 0"):
        getattr(ops, name)(X, ops.asarray1i([3, 0, 2]))


@pytest.mark.parametrize("name", ["first", "last"])
@pytest.mark.parametrize("n_rows", [0, 4])
def test_first_and_last_of_no_sequences(ops, name, n_rows):
    Y, idx = getattr(ops, f"reduce_{name}")(ops.asarray(_f(n_rows, 3)), ops.alloc1i(0))
    assert Y.shape == (0, 3) and idx.shape == (0,)
    dX = getattr(ops, f"backprop_reduce_{name}")(ops.alloc2f(0, 3), idx)
    assert dX.shape == (0, 3)


@pytest.mark.parametrize("name, idx", [("first", [0, 2, 5]), ("last", [1, 4])])
def test_backprop_first_last_broadcast_one_row_as_numpy(ops, name, idx):
    dY = ops.asarray(_f(1, 2))
    dX = _np(ops, getattr(ops, f"backprop_reduce_{name}")(dY, ops.asarray1i(idx)))
    rows = idx[:-1] if name == "first" else idx
    want = numpy.zeros((idx[-1] + (name == "last"), 2), "float32")
    want[rows] = _f(1, 2)
    numpy.testing.assert_array_equal(dX, want)


# --- backprops: gradient rows past the lengths are ignored ---------------------------------------


@pytest.mark.parametrize("name", ["backprop_reduce_sum", "backprop_reduce_mean"])
def test_backprops_ignore_gradient_rows_past_the_lengths(ops, name):
    L = ops.asarray1i([3, 2])
    got = getattr(ops, name)(ops.asarray(_f(4, 3)), L)
    want = getattr(ops, name)(ops.asarray(_f(2, 3)), L)
    numpy.testing.assert_array_equal(_np(ops, got), _np(ops, want))


def test_backprop_reduce_max_ignores_rows_past_the_lengths(ops):
    L = ops.asarray1i([3, 2])
    which = _i([[2, 1, 0], [1, 0, 1], [7, 7, 7]])
    got = ops.backprop_reduce_max(ops.asarray(_f(3, 3)), ops.asarray(which), L)
    want = ops.backprop_reduce_max(ops.asarray(_f(2, 3)), ops.asarray(which[:2]), L)
    numpy.testing.assert_array_equal(_np(ops, got), _np(ops, want))


@pytest.mark.parametrize("name", ["backprop_reduce_sum", "backprop_reduce_mean"])
def test_more_lengths_than_gradient_rows_is_an_index_error(ops, name):
    # Thinc's Ops raises IndexError here; its NumpyOps reads past the gradient.
    with pytest.raises(IndexError, match="3 sequences"):
        getattr(ops, name)(ops.asarray(_f(2, 3)), ops.asarray1i([1, 1, 1]))


@pytest.mark.parametrize("bad", [3, -1])
def test_backprop_reduce_max_offsets_outside_their_sequence(ops, bad):
    which = ops.asarray(_i([[2, bad, 0], [1, 0, 1]]))
    d_maxes = ops.asarray(_f(2, 3))
    with pytest.raises(IndexError) as info:
        ops.backprop_reduce_max(d_maxes, which, ops.asarray1i([3, 2]))
    assert f"index {bad} in 'which' (row 0, column 1)" in str(info.value)
    assert "length 3" in str(info.value)
    numpy.testing.assert_array_equal(_np(ops, which), _i([[2, bad, 0], [1, 0, 1]]))


def test_backprop_reduce_negative_lengths(ops):
    for name in ("backprop_reduce_sum", "backprop_reduce_mean"):
        with pytest.raises(ValueError, match="lengths must be"):
            getattr(ops, name)(ops.asarray(_f(2, 3)), ops.asarray1i([-1, 2]))


# --- maxout ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_backprop_maxout_winner_past_the_pieces_is_an_index_error(ops, dtype):
    dY = ops.asarray(_f(2, 2, dtype=dtype))
    dX = ops.backprop_maxout(dY, ops.asarray(_i([[1, 0], [2, 1]])), 3)
    assert dX.dtype == dtype
    with pytest.raises(IndexError, match=r"index 3 in 'which' \(at \[1, 0\]\).*P=3"):
        ops.backprop_maxout(dY, ops.asarray(_i([[1, 0], [3, 1]])), 3)


def test_backprop_maxout_with_no_pieces(ops):
    assert ops.backprop_maxout(ops.alloc2f(0, 2), ops.alloc2i(0, 2), 0).shape == (0, 2, 0)
    with pytest.raises(IndexError):
        ops.backprop_maxout(ops.asarray(_f(1, 2)), ops.alloc2i(1, 2), 0)


# --- unflatten and unpad: cut where the lengths say, as Thinc does -----------------------------


@pytest.mark.parametrize("pad", [0, 1])
def test_unflatten_cuts_at_the_running_sums_of_the_lengths(ops, pad):
    X = ops.asarray(_f(9, 2))
    whole = _f(9, 2)
    for lengths in ([2, 2], [3, 0, 9], []):
        pieces = ops.unflatten(X, ops.asarray1i(lengths), pad=pad)
        assert len(pieces) == len(lengths)
        start = 0
        for length, piece in zip(lengths, pieces):
            if pad and length:
                start += pad
            numpy.testing.assert_array_equal(_np(ops, piece), whole[start : start + length])
            start += length


def test_unpad_slices_each_row_as_python_does(ops):
    padded = ops.asarray(_f(3, 4, 2))
    pieces = ops.unpad(padded, [2, 6])
    assert [p.shape for p in pieces] == [(2, 2), (4, 2)]
    with pytest.raises(IndexError, match="4 lengths for a batch of 3"):
        ops.unpad(padded, [1, 1, 1, 1])


# --- allocation and padding --------------------------------------------------------------------


def test_alloc_takes_any_dtype_as_thinc(ops):
    assert ops.alloc1f(3, dtype="uint64").dtype == numpy.uint64
    assert ops.alloc2i(2, 2, dtype="float32").dtype == numpy.float32
    assert ops.alloc_f((2,), dtype=None).dtype == numpy.float64  # numpy's default, as in Thinc
    keys = ops.hash(ops.alloc1f(5, dtype="uint64"), 0)
    assert keys.shape == (5, 4) and keys.dtype == numpy.uint32 and (_np(ops, keys) != 0).all()


def test_pad_round_to_message_has_thincs_words(ops):
    with pytest.raises(ValueError, match="Rounding for padding must at least be 1"):
        ops.pad([ops.asarray(_f(2, 2))], round_to=0)


# --- integers, broadcasting, other ranks: numpy's rules, as in Thinc's formulas -----------------

FLOAT_ACTIVATIONS = [
    "sigmoid", "swish", "gelu", "dish", "hard_swish", "hard_swish_mobilenet", "hard_sigmoid",
    "hard_tanh", "relu_k", "clipped_linear", "mish", "sechsq", "softmax",
]


@pytest.mark.parametrize("name", FLOAT_ACTIVATIONS)
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_activations_of_integers_compute_in_float64(ops, name, dtype):
    X = _i([[-3, -1, 0], [1, 2, 25]], dtype)
    got = getattr(ops, name)(ops.asarray(X))
    assert got.dtype == numpy.float64 and got.shape == X.shape
    want = getattr(ops, name)(ops.asarray(X.astype("float64")))
    numpy.testing.assert_allclose(_np(ops, got), _np(ops, want), rtol=1e-12)
    numpy.testing.assert_array_equal(X, _i([[-3, -1, 0], [1, 2, 25]], dtype))


@pytest.mark.parametrize("name", [n for n in FLOAT_ACTIVATIONS if n not in ("softmax", "sechsq")] + ["gelu_approx", "dtanh"])
def test_activations_cannot_write_floats_into_integers(ops, name):
    # Thinc raises here too (numpy's same-kind casting), except in mish and gelu_approx, where
    # it truncates the results silently.
    X = ops.asarray(_i([[-3, -1, 0], [1, 2, 25]]))
    with pytest.raises(TypeError, match="int32"):
        getattr(ops, name)(X, inplace=True)
    numpy.testing.assert_array_equal(_np(ops, X), [[-3, -1, 0], [1, 2, 25]])


def test_ops_exact_on_integers_keep_them(ops):
    X = ops.asarray(_i([[-3, -1, 0], [1, 2, 5]]))
    for got in (ops.relu(X), ops.dtanh(X), ops.backprop_relu(X, X), ops.dsigmoid(X.copy(), inplace=True)):
        assert got.dtype == numpy.int32
    numpy.testing.assert_array_equal(_np(ops, ops.relu(X)), [[0, 0, 0], [1, 2, 5]])
    numpy.testing.assert_array_equal(_np(ops, ops.dtanh(X)), [[-8, 0, 1], [0, -3, -24]])
    Y = X.copy()
    assert ops.relu(Y, inplace=True) is Y
    # Out of place, dsigmoid makes floats (Y * (1.0 - Y)), as in Thinc.
    assert ops.dsigmoid(X).dtype == numpy.float64


def test_softmax_of_integers_in_place_is_a_new_float_array(ops):
    # Thinc's softmax ignores inplace; plait writes in place only where that changes nothing.
    X = ops.asarray(_i([[1, 2, 3]]))
    Y = ops.softmax(X, inplace=True)
    assert Y.dtype == numpy.float64 and Y is not X
    numpy.testing.assert_array_equal(_np(ops, X), [[1, 2, 3]])


@pytest.mark.parametrize("name", ["backprop_relu", "backprop_sigmoid", "backprop_gelu", "backprop_dish",
                                  "backprop_hard_swish", "backprop_hard_sigmoid", "backprop_clipped_linear",
                                  "backprop_relu_k", "backprop_gelu_approx"])
def test_backprops_broadcast_a_row(ops, name):
    X = _f(4, 3)
    dY = _f(4, 3) + 0.5
    for args in ((dY, X[:1]), (dY[:1], X), (dY, X[0]), (dY[0], X)):
        got = getattr(ops, name)(*[ops.asarray(a) for a in args])
        full = [numpy.broadcast_to(a, (4, 3)).copy() for a in args]
        want = getattr(ops, name)(*[ops.asarray(a) for a in full])
        assert got.shape == (4, 3)
        # The broadcast and the full inputs may take different paths (kernel, reference), whose
        # results are sums of terms of order 1: an ulp of those (atol) on top of rtol.
        numpy.testing.assert_allclose(_np(ops, got), _np(ops, want), rtol=1e-6, atol=1.2e-7)


def test_backprop_relu_in_place_broadcasts_Y_into_dY(ops):
    dY, Y = ops.asarray(_f(4, 3)), ops.asarray(_f(1, 3))
    want = _f(4, 3) * (_f(1, 3) > 0)
    assert ops.backprop_relu(dY, Y, inplace=True) is dY
    numpy.testing.assert_array_equal(_np(ops, dY), want)


def test_backprop_sigmoid_in_place_writes_into_Y(ops):
    dY, Y = ops.asarray(_f(4, 3)), ops.asarray(_f(4, 3, dtype="float64") * 0.1 + 0.5)
    want = _f(4, 3) * (_np(ops, Y) * (1 - _np(ops, Y)))
    dX = ops.backprop_sigmoid(dY, Y, inplace=True)
    assert dX is Y
    numpy.testing.assert_allclose(_np(ops, Y), want, rtol=1e-6)
    numpy.testing.assert_array_equal(_np(ops, dY), _f(4, 3))


def test_mixed_float_dtypes_widen_as_numpy(ops):
    dY16, X32 = ops.asarray(_f(4, 3, dtype="float16")), ops.asarray(_f(4, 3))
    assert ops.backprop_gelu(dY16, X32).dtype == numpy.float32
    assert ops.backprop_relu(dY16, X32).dtype == numpy.float16  # Y only masks
    assert ops.backprop_hard_sigmoid(ops.asarray(_f(4, 3)), ops.asarray(_f(4, 3, dtype="float64"))).dtype == numpy.float64
    # In place the gradient keeps dY's dtype.
    dY = ops.asarray(_f(4, 3))
    assert ops.backprop_gelu(dY, ops.asarray(_f(4, 3, dtype="float64")), inplace=True) is dY


def test_affine_takes_a_bias_row(ops):
    X, W, b = _f(4, 3), _f(2, 3) + 1, _f(2) + 2
    want = X @ W.T + b
    for bias in (b[None, :], b):
        got = ops.affine(ops.asarray(X), ops.asarray(W), ops.asarray(bias))
        numpy.testing.assert_allclose(_np(ops, got), want, rtol=1e-6)
        assert got.shape == (4, 2)


def test_gemm_takes_vectors_as_numpy_dot(ops):
    x, y = _f(3), _f(3, 2) + 1
    numpy.testing.assert_allclose(_np(ops, ops.gemm(ops.asarray(x), ops.asarray(y))), x @ y, rtol=1e-6)
    numpy.testing.assert_allclose(_np(ops, ops.gemm(ops.asarray(y), ops.asarray(x[:2]))), y @ x[:2], rtol=1e-6)
    numpy.testing.assert_allclose(_np(ops, ops.gemm(ops.asarray(x[None]), ops.asarray(y.T), trans2=True)), x[None] @ y, rtol=1e-6)
    with pytest.raises(ValueError, match="gemm"):
        ops.gemm(ops.asarray(_f(4)), ops.asarray(y))
    got = ops.gemm(ops.asarray(_i([[1, 2]])), ops.asarray(_i([[3], [4]])))
    assert got.dtype == numpy.int32 and _np(ops, got).tolist() == [[11]]


@pytest.mark.parametrize("name, data", [("asarray2f", [1.0, 2.0]), ("asarray1f", [[1.0], [2.0]]),
                                        ("asarray3i", [1, 2]), ("asarray2i", 5), ("asarray4f", [[1.0]])])
def test_asarray_helpers_take_any_rank_as_thinc(ops, name, data):
    got = getattr(ops, name)(data)
    assert got.shape == numpy.asarray(data).shape
    assert got.dtype == (numpy.float32 if name.endswith("f") else numpy.int32)


@pytest.mark.parametrize("axis", [0, 1, -1, 5])
def test_softmax_sequences_ignores_axis_as_thinc(ops, axis):
    Xs, L = ops.asarray(_f(5, 3)), ops.asarray1i([2, 3])
    numpy.testing.assert_array_equal(
        _np(ops, ops.softmax_sequences(Xs, L, axis=axis)), _np(ops, ops.softmax_sequences(Xs, L))
    )


def test_reductions_of_integers_and_float16_as_thinc(ops):
    X = ops.asarray(_i([[1, 2], [3, 4], [5, 6]]))
    L = ops.asarray1i([1, 2])
    assert ops.reduce_sum(X, L).dtype == numpy.float32  # Thinc sums into float32
    assert ops.reduce_mean(ops.asarray(_f(3, 2, dtype="float16")), L).dtype == numpy.float32
    maxes, which = ops.reduce_max(X, L)
    assert maxes.dtype == numpy.int32 and _np(ops, maxes).tolist() == [[1, 2], [5, 6]]
    # reduce_last's indices are the cumulative sum's dtype (int64 for int32 lengths).
    assert ops.reduce_last(X, L)[1].dtype == numpy.int64


# --- the real thinc gives the same answers ----------------------------------------------------

_CASES = [
    *[(f"{r}-{label}-{dt}", f"reduce_{r}", (_f(5, 2, dtype=dt), _i(L)))
      for r in ("sum", "mean", "max", "first", "last")
      for label, L in [("exact", [3, 2]), ("short", [2, 2]), ("past", [3, 3]), ("past-first", [6, -1]),
                       ("negative", [-1, 6]), ("zero", [3, 0, 2]), ("none", [])]
      for dt in FLOATS],
    *[(f"bp-{r}-{label}", f"backprop_reduce_{r}", (_f(n, 3), _i(L)))
      for r in ("sum", "mean")
      for label, n, L in [("exact", 2, [3, 2]), ("fewer-lengths", 3, [3, 2]), ("negative", 2, [-1, 2])]],
    ("bp-max-exact", "backprop_reduce_max", (_f(2, 3), _i([[2, 1, 0], [1, 0, 1]]), _i([3, 2]))),
    ("bp-max-fewer-lengths", "backprop_reduce_max", (_f(3, 3), _i([[2, 1, 0], [1, 0, 1], [0, 0, 0]]), _i([3, 2]))),
    ("bp-max-past", "backprop_reduce_max", (_f(2, 3), _i([[2, 3, 0], [1, 0, 1]]), _i([3, 2]))),
    ("bp-max-zero", "backprop_reduce_max", (_f(3, 3), _i([[2, 1, 0], [1, 0, 1], [1, 0, 1]]), _i([3, 0, 2]))),
    ("bp-first", "backprop_reduce_first", (_f(2, 2), _i([0, 3, 5]))),
    ("bp-first-none", "backprop_reduce_first", (_f(0, 2), _i([]))),
    ("bp-first-broadcast", "backprop_reduce_first", (_f(1, 2), _i([0, 3, 5]))),
    ("bp-last-broadcast", "backprop_reduce_last", (_f(1, 2), _i([2, 4]))),
    *[(f"bp-maxout-{dt}", "backprop_maxout", (_f(2, 2, dtype=dt), _i([[1, 0], [2, 1]]), 3)) for dt in FLOATS],
    ("bp-maxout-past", "backprop_maxout", (_f(2, 2), _i([[1, 0], [3, 1]]), 3)),
    ("pad-round-0", "pad", ([_f(2, 2), _f(3, 2)], 0)),
    *[(f"unflatten-{label}-pad{pad}", "unflatten", (_f(7, 2), _i(L), pad))
      for label, L in [("exact", [3, 0, 4]), ("short", [2, 2]), ("past", [3, 6]), ("negative", [3, -1, 2])]
      for pad in (0, 1)],
    *[(f"unpad-{label}", "unpad", (_f(3, 4, 2), L))
      for label, L in [("exact", [2, 4, 1]), ("fewer", [2, 2]), ("longer", [2, 6]), ("negative", [2, -1]),
                       ("more", [1, 1, 1, 1])]],
    ("alloc1f-uint64", "alloc1f", (3,), {"dtype": "uint64"}),
    ("alloc1i-float32", "alloc1i", (3,), {"dtype": "float32"}),
    ("alloc-None", "alloc", ((2,),), {"dtype": None}),
]


def _run(ops, name, args, kwargs):
    args = [a.copy() if isinstance(a, numpy.ndarray) else a for a in args]
    try:
        out = getattr(ops, name)(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - the outcome is compared
        return err
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


@pytest.mark.parametrize("backend", ["Ops", "NumpyOps"])
@pytest.mark.parametrize("case", _CASES, ids=[c[0] for c in _CASES])
def test_same_outcome_as_thinc(backend, case):
    thinc_api = pytest.importorskip("thinc.api")
    case_id, name, args, *rest = case
    kwargs = rest[0] if rest else {}
    theirs = _run(getattr(thinc_api, backend)(), name, args, kwargs)
    ours = _run({"Ops": Ops, "NumpyOps": NumpyOps}[backend](), name, args, kwargs)
    if isinstance(theirs, Exception):
        assert type(ours) is type(theirs), (ours, theirs)
        return
    assert not isinstance(ours, Exception), ours
    assert len(ours) == len(theirs)
    for mine, their in zip(ours, theirs):
        assert mine.shape == their.shape
        assert mine.dtype.kind == their.dtype.kind
        # NOTE: Thinc's Ops sums and averages float64 into float32 (its NumpyOps does not), and
        # allocates empty float32 results whatever X's dtype; plait keeps X's dtype throughout.
        if backend == "NumpyOps" and mine.dtype.kind == "f" and mine.size:
            assert mine.dtype == their.dtype
        numpy.testing.assert_allclose(mine, their, rtol=1e-6, atol=1e-6)
