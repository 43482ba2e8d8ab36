"""The odd inputs that Thinc 8.3 accepts, accepted here too, with Thinc's answers and error types.

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
