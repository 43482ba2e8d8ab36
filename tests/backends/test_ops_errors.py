"""Bad input to the Ops raises the documented error, says what was wrong, and changes nothing.

Every case names the exception type and the fragments the message must contain: the
argument's name and the offending shape or value. After the failed call the inputs
must hold exactly what they held before.
"""
from __future__ import annotations

import signal
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Sequence, Tuple, Type, Union

import numpy as np
import pytest
from _env import HAS_GPU

try:
    from ._gradcheck import to_np
except ImportError:  # tests/ is not a package: pytest puts this folder on sys.path
    from _gradcheck import to_np  # type: ignore[no-redef]


def _f(*shape, dtype="float32"):
    """Distinct, deterministic values, so that any mutation shows."""
    n = int(np.prod(shape)) if shape else 1
    return (np.arange(n, dtype="float64").reshape(shape) * 0.37 - 1.1).astype(dtype)


def _i(values):
    return np.asarray(values, dtype="int32")


@dataclass
class ErrCase:
    id: str
    method: str
    args: Callable[[], Tuple[tuple, dict]]
    exc: Union[Type[BaseException], Tuple[Type[BaseException], ...]]
    # Every fragment must appear in the message (case-insensitive).
    says: Sequence[str]


NOT_ARRAY = [[1.0, -2.0], [3.0, 4.0]]

CASES = [
    # --- sequence lengths ------------------------------------------------------------------
    ErrCase("seq2col_lengths_sum", "seq2col", lambda: ((_f(4, 2), 1), dict(lengths=_i([2, 3]))), ValueError, ["lengths", "5"]),
    ErrCase("seq2col_negative_length", "seq2col", lambda: ((_f(4, 2), 1), dict(lengths=_i([6, -2]))), ValueError, ["lengths", "-2"]),
    ErrCase("seq2col_3d", "seq2col", lambda: ((_f(4, 2, 1), 1), {}), ValueError, ["seq", "(4, 2, 1)"]),
    ErrCase("backprop_seq2col_lengths_sum", "backprop_seq2col", lambda: ((_f(4, 6), 1), dict(lengths=_i([1, 1]))), ValueError, ["lengths", "2"]),
    ErrCase("backprop_seq2col_1d", "backprop_seq2col", lambda: ((_f(6), 1), {}), ValueError, ["dY", "(6,)"]),
    *[
        # Thinc raises IndexError when the lengths run past X (its tests expect that type).
        ErrCase(f"reduce_{r}_lengths_too_long", f"reduce_{r}", lambda: ((_f(3, 2), _i([2, 2])), {}), IndexError, ["lengths", "4"])
        for r in ("sum", "mean", "max", "first", "last")
    ],
    *[
        ErrCase(f"reduce_{r}_negative_length", f"reduce_{r}", lambda: ((_f(3, 2), _i([1, -1])), {}), ValueError, ["lengths", "-1"])
        for r in ("sum", "mean", "max")
    ],
    *[
        ErrCase(f"reduce_{r}_zero_length", f"reduce_{r}", lambda: ((_f(3, 2), _i([1, 0, 2])), {}), ValueError, ["lengths", "0"])
        for r in ("max", "first", "last")
    ],
    *[
        ErrCase(f"reduce_{r}_first_is_zero", f"reduce_{r}", lambda: ((_f(2, 2), _i([0, 2])), {}), ValueError, ["lengths", "0"])
        for r in ("max", "first", "last")
    ],
    *[
        # Only first/last need lengths that cover X: sum, mean and max ignore the rows after them.
        ErrCase(f"reduce_{r}_lengths_too_short", f"reduce_{r}", lambda: ((_f(5, 2), _i([2, 2])), {}), IndexError, ["lengths", "4"])
        for r in ("first", "last")
    ],
    *[
        ErrCase(f"reduce_{r}_1d", f"reduce_{r}", lambda: ((_f(4), _i([2, 2])), {}), ValueError, ["X", "(4,)"])
        for r in ("sum", "mean", "max")
    ],
    *[
        ErrCase(
            f"backprop_reduce_{r}_negative_length",
            f"backprop_reduce_{r}",
            lambda: ((_f(2, 3), _i([3, -1])), {}),
            ValueError,
            ["lengths", "-1"],
        )
        for r in ("sum", "mean")
    ],
    ErrCase(
        "backprop_reduce_max_zero_length",
        "backprop_reduce_max",
        lambda: ((_f(2, 3), _i(np.zeros((2, 3))), _i([0, 2])), {}),
        ValueError,
        ["lengths", "0"],
    ),
    ErrCase(
        "backprop_reduce_first_starts_ends_size_1",
        "backprop_reduce_first",
        lambda: ((_f(2, 3), _i([0])), {}),
        ValueError,
        ["starts_ends"],
    ),
    ErrCase(
        "backprop_reduce_last_count",
        "backprop_reduce_last",
        lambda: ((_f(2, 3), _i([0, 1, 2])), {}),
        ValueError,
        ["lasts", "3"],
    ),
    ErrCase(
        "backprop_reduce_sum_rows",
        "backprop_reduce_sum",
        lambda: ((_f(2, 3), _i([1, 1, 1])), {}),
        IndexError,
        ["d_sums", "lengths", "3"],
    ),
    ErrCase(
        "backprop_reduce_mean_rows",
        "backprop_reduce_mean",
        lambda: ((_f(2, 3), _i([1, 1, 1])), {}),
        IndexError,
        ["d_means", "lengths", "3"],
    ),
    ErrCase(
        "backprop_reduce_max_which_columns",
        "backprop_reduce_max",
        lambda: ((_f(2, 3), _i(np.zeros((2, 2))), _i([1, 1])), {}),
        ValueError,
        ["which", "(2, 2)"],
    ),
    ErrCase(
        "backprop_reduce_max_which_rows",
        "backprop_reduce_max",
        lambda: ((_f(2, 3), _i(np.zeros((1, 3))), _i([1, 1])), {}),
        IndexError,
        ["which", "2 sequences"],
    ),
    ErrCase(
        "backprop_reduce_max_which_range",
        "backprop_reduce_max",
        lambda: ((_f(2, 3), _i(np.full((2, 3), 4)), _i([1, 1])), {}),
        IndexError,
        ["which", "4", "length 1"],
    ),
    ErrCase(
        "backprop_maxout_which_shape",
        "backprop_maxout",
        lambda: ((_f(2, 3), _i(np.zeros((3, 2))), 2), {}),
        ValueError,
        ["which", "(3, 2)"],
    ),
    ErrCase("seq2col_negative_nW", "seq2col", lambda: ((_f(4, 2), -1), {}), ValueError, ["nW", "-1"]),
    ErrCase("backprop_seq2col_width", "backprop_seq2col", lambda: ((_f(4, 5), 1), {}), ValueError, ["dY", "5"]),
    ErrCase(
        "reduce_sum_float_lengths",
        "reduce_sum",
        lambda: ((_f(2, 2), np.array([1.0, 1.0])), {}),
        (TypeError, ValueError),  # Thinc's NumpyOps: ValueError (buffer dtype mismatch)
        ["lengths"],
    ),
    ErrCase(
        "softmax_sequences_lengths_sum",
        "softmax_sequences",
        lambda: ((_f(3, 2), _i([4])), {}),
        ValueError,
        ["lengths", "4"],
    ),
    ErrCase(
        "softmax_sequences_3d",
        "softmax_sequences",
        lambda: ((_f(3, 2, 1), _i([3])), {}),
        (NotImplementedError, ValueError),
        ["(3, 2, 1)"],
    ),
    # --- mismatched shapes -----------------------------------------------------------------
    *[
        ErrCase(
            f"{m}_shape_mismatch",
            m,
            lambda: ((_f(2, 3), _f(3, 2)), {}),
            ValueError,
            ["(2, 3)", "(3, 2)"],
        )
        for m in (
            "backprop_relu",
            "backprop_mish",
            "backprop_sigmoid",
            "backprop_softmax",
            "backprop_gelu",
            "backprop_gelu_approx",
            "backprop_dish",
            "backprop_hard_swish",
            "backprop_hard_swish_mobilenet",
            "backprop_hard_sigmoid",
            "backprop_hard_tanh",
            "backprop_relu_k",
            "backprop_clipped_linear",
        )
    ],
    ErrCase("backprop_swish_shape_mismatch", "backprop_swish", lambda: ((_f(2, 3), _f(3, 2), _f(3, 2)), {}), ValueError, ["(2, 3)", "(3, 2)"]),
    ErrCase("maxout_0d", "maxout", lambda: ((np.float32(1.0),), {}), (TypeError, ValueError), ["X"]),
    ErrCase("gemm_1d_mismatch", "gemm", lambda: ((_f(4), _f(3, 2)), {}), ValueError, ["x", "(4,)", "(3, 2)"]),
    ErrCase("gemm_inner_mismatch", "gemm", lambda: ((_f(2, 3), _f(2, 2)), {}), ValueError, ["(2, 3)", "(2, 2)"]),
    ErrCase(
        "gemm_trans_mismatch", "gemm", lambda: ((_f(2, 3), _f(2, 2)), dict(trans2=True)), ValueError, ["(2, 3)", "(2, 2)"]
    ),
    ErrCase("affine_W_mismatch", "affine", lambda: ((_f(2, 3), _f(4, 2), _f(4)), {}), ValueError, ["W", "(2, 3)", "(4, 2)"]),
    ErrCase("affine_b_mismatch", "affine", lambda: ((_f(2, 3), _f(4, 3), _f(3)), {}), ValueError, ["b", "(3,)"]),
    ErrCase(
        "adam_shape_mismatch",
        "adam",
        lambda: ((_f(3), _f(2), _f(3), _f(3), 0.9, 0.999, 1e-8, 0.1), {}),
        ValueError,
        ["(3,)", "(2,)"],
    ),
    # --- padding and flattening ------------------------------------------------------------
    ErrCase("pad_round_to_0", "pad", lambda: (([_f(2, 3)],), dict(round_to=0)), ValueError, ["round_to", "0"]),
    ErrCase("pad_empty", "pad", lambda: (([],), {}), ValueError, ["empty"]),
    ErrCase("pad_ndims", "pad", lambda: (([_f(2, 3), _f(3)],), {}), ValueError, ["ndim"]),
    ErrCase("pad_dtypes", "pad", lambda: (([_f(2, 3), _f(2, 3, dtype="float64")],), {}), ValueError, ["dtype"]),
    ErrCase("pad_trailing_dims", "pad", lambda: (([_f(2, 3), _f(2, 4)],), {}), ValueError, ["(2, 3)", "(2, 4)"]),
    ErrCase("list2padded_trailing_dims", "list2padded", lambda: (([_f(2, 3), _f(2, 4)],), {}), ValueError, ["(2, 3)", "(2, 4)"]),
    # --- sizes -----------------------------------------------------------------------------
    ErrCase("alloc_negative", "alloc", lambda: (((2, -1),), {}), ValueError, ["-1"]),
    ErrCase("alloc2f_negative", "alloc2f", lambda: ((2, -1), {}), ValueError, ["-1"]),
    ErrCase("alloc1i_negative", "alloc1i", lambda: ((-3,), {}), ValueError, ["-3"]),
    ErrCase("get_dropout_mask_negative", "get_dropout_mask", lambda: (((2, -1), 0.5), {}), ValueError, ["-1"]),
    ErrCase("tile_negative", "tile", lambda: ((_f(2, 3), -1), {}), ValueError, ["reps", "-1"]),
    ErrCase("reshape_size", "reshape2f", lambda: ((_f(6), 4, 2), {}), ValueError, ["(4, 2)", "6"]),
    ErrCase("reshape_generic_size", "reshape", lambda: ((_f(2, 3), (4, 2)), {}), ValueError, ["(4, 2)"]),
    # --- wrong kinds: Thinc's NumpyOps raises TypeError for these -------------------------------
    # (The elementwise ops, gemm and affine convert lists as numpy does: see test_thinc_inputs.py.)
    ErrCase("relu_none", "relu", lambda: ((None,), {}), TypeError, ["X", "NoneType"]),
    ErrCase("backprop_relu_str", "backprop_relu", lambda: (("abc", _f(2, 2)), {}), TypeError, ["dY", "str"]),
    ErrCase("sigmoid_object", "sigmoid", lambda: ((np.array([object()]),), {}), TypeError, ["X", "object"]),
    ErrCase("seq2col_list", "seq2col", lambda: ((NOT_ARRAY, 1), {}), TypeError, ["seq", "list"]),
    ErrCase("backprop_seq2col_list", "backprop_seq2col", lambda: ((NOT_ARRAY, 1), {}), TypeError, ["dY", "list"]),
    # --- Thinc gets these silently wrong (truncates floats into integers) ----------------------
    ErrCase("sigmoid_int_inplace", "sigmoid", lambda: ((_i([[1, -2]]),), dict(inplace=True)), TypeError, ["X", "int32", "inplace"]),
    ErrCase("mish_int_inplace", "mish", lambda: ((_i([[1, -2]]),), dict(inplace=True)), TypeError, ["X", "int32", "inplace"]),
    ErrCase("erf_int", "erf", lambda: ((_i([[1, -2]]),), {}), TypeError, ["X", "int32"]),
    ErrCase("gelu_approx_int", "gelu_approx", lambda: ((_i([[1, -2]]),), {}), TypeError, ["X", "int32"]),
    ErrCase("backprop_mish_int_dY", "backprop_mish", lambda: ((_i([[1, -2]]), _f(1, 2)), {}), TypeError, ["dY", "int32"]),
    ErrCase("backprop_hard_sigmoid_int_X", "backprop_hard_sigmoid", lambda: ((_f(1, 2), _i([[1, -2]])), {}), TypeError, ["X", "slope"]),
    ErrCase("backprop_reduce_mean_int", "backprop_reduce_mean", lambda: ((_i([[1, 2]]), _i([2])), {}), TypeError, ["d_means", "int32"]),
    ErrCase("scatter_add_float_into_int", "scatter_add", lambda: ((_i([[1, 2]]), _i([0]), _f(1, 2)), {}), TypeError, ["values", "table"]),
    # --- in-place results that do not fit the array written into ------------------------------
    ErrCase("backprop_relu_inplace_broadcast", "backprop_relu", lambda: ((_f(1, 3), _f(4, 3)), dict(inplace=True)), ValueError, ["dY", "(4, 3)", "(1, 3)"]),
    ErrCase("update_averages_list", "update_averages", lambda: (([1.0, 2.0], _f(2), 1), {}), TypeError, ["ema", "list"]),
    ErrCase("update_averages_broadcast", "update_averages", lambda: ((_f(1, 2), _f(3, 2), 1), {}), ValueError, ["ema", "(3, 2)"]),
    ErrCase("affine_b_broadcast", "affine", lambda: ((_f(2, 3), _f(4, 3), _f(3, 4)), {}), ValueError, ["b", "(3, 4)", "(2, 4)"]),
    *[
        ErrCase(f"reduce_{r}_list", f"reduce_{r}", lambda: ((NOT_ARRAY, _i([1, 1])), {}), TypeError, ["X", "list"])
        for r in ("sum", "mean", "max")
    ],
    ErrCase("reduce_sum_lengths_list", "reduce_sum", lambda: ((_f(2, 2), [1, 1]), {}), TypeError, ["lengths", "list"]),
    ErrCase("maxout_list", "maxout", lambda: (([NOT_ARRAY],), {}), TypeError, ["X", "list"]),
]

CASE_IDS = [c.id for c in CASES]
CASE_BY_ID = {c.id: c for c in CASES}
assert len(CASE_BY_ID) == len(CASES), "duplicate case ids"


def _dev(ops, value):
    # Object arrays cannot live on a GPU: they reach the op as they are (CupyOps.asarray
    # refuses them, tested in test_cupy_asarray_refuses_object_arrays).
    if isinstance(value, np.ndarray) and value.dtype != object:
        return ops.asarray(value.copy())
    if isinstance(value, list):
        return [_dev(ops, v) for v in value]
    return value


def _snapshot(ops, values):
    out = []
    for v in values:
        if isinstance(v, list):
            out.append([_snapshot(ops, [x])[0] for x in v])
        elif hasattr(v, "shape"):
            out.append(np.array(to_np(ops, v), copy=True))
        else:
            out.append(v)
    return out


def _assert_unchanged(before, after, where):
    assert len(before) == len(after)
    for i, (b, a) in enumerate(zip(before, after)):
        if isinstance(b, list):
            _assert_unchanged(b, a, f"{where}[{i}]")
        elif isinstance(b, np.ndarray):
            assert a.shape == b.shape, f"{where}: argument {i} changed shape"
            np.testing.assert_array_equal(a, b, err_msg=f"{where}: argument {i} changed")
        else:
            assert a == b, f"{where}: argument {i} changed"


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_bad_input_raises(ops, case_id):
    case = CASE_BY_ID[case_id]
    args, kwargs = case.args()
    dev_args = _dev(ops, list(args))
    dev_kwargs = {k: _dev(ops, v) for k, v in kwargs.items()}
    before = _snapshot(ops, dev_args + list(dev_kwargs.values()))
    with pytest.raises(case.exc) as excinfo:
        getattr(ops, case.method)(*dev_args, **dev_kwargs)
    message = str(excinfo.value).lower()
    missing = [s for s in case.says if s.lower() not in message]
    assert not missing, f"{case.method}: message {str(excinfo.value)!r} does not mention {missing}"
    after = _snapshot(ops, dev_args + list(dev_kwargs.values()))
    _assert_unchanged(before, after, case.method)


@pytest.mark.parametrize("reduction", ["first", "last", "max"])
def test_zero_length_message_points_at_the_sequence(ops, reduction):
    X = ops.asarray(_f(5, 2))
    lengths = ops.asarray(_i([2, 1, 0, 2]))
    with pytest.raises(ValueError) as excinfo:
        getattr(ops, f"reduce_{reduction}")(X, lengths)
    assert "lengths" in str(excinfo.value)
    np.testing.assert_array_equal(to_np(ops, lengths), [2, 1, 0, 2])
    np.testing.assert_array_equal(to_np(ops, X), _f(5, 2))


@pytest.mark.parametrize("kind", ["iterator", "generator"])
def test_minibatch_needs_a_sized_sequence(ops, kind):
    data = iter([1, 2, 3]) if kind == "iterator" else (x for x in [1, 2, 3])
    with pytest.raises(ValueError) as excinfo:
        ops.minibatch(2, data)
    assert type(data).__name__ in str(excinfo.value)
    with pytest.raises(ValueError) as excinfo:
        ops.multibatch(2, [1, 2, 3], data)
    assert type(data).__name__ in str(excinfo.value)


@contextmanager
def _deadline(seconds):
    """Fail instead of hanging: Thinc loops forever on a batch size of 0."""

    def _timeout(signum, frame):
        raise TimeoutError(f"call did not return within {seconds}s")

    previous = signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("size", [0, -2])
def test_minibatch_rejects_non_positive_size(ops, size):
    with _deadline(5):
        with pytest.raises(ValueError) as excinfo:
            list(ops.minibatch(size, [1, 2, 3]))
    assert "size" in str(excinfo.value) and str(size) in str(excinfo.value)


def test_cblas_is_numpy_only(ref_ops):
    with pytest.raises(NotImplementedError):
        ref_ops.cblas()


def test_position_encode_wrong_out_shape(ops):
    out = ops.alloc2f(2, 4)
    with pytest.raises(ValueError) as excinfo:
        ops.position_encode(3, 4, out=out)
    assert "out" in str(excinfo.value) and "(2, 4)" in str(excinfo.value)
    assert not to_np(ops, out).any()


def test_unflatten_lengths_must_be_integers(ops):
    # Lengths that do not sum to the rows are Thinc's business (it cuts at their running sums).
    X = ops.asarray(_f(5, 2))
    with pytest.raises(TypeError) as excinfo:
        ops.unflatten(X, np.array([2.0, 3.0]))
    assert "lengths" in str(excinfo.value)
    np.testing.assert_array_equal(to_np(ops, X), _f(5, 2))


@pytest.mark.parametrize("which_value", [3, -1])
def test_backprop_maxout_which_out_of_range(ops, which_value):
    dY = ops.asarray(_f(2, 2))
    which = ops.asarray(_i(np.full((2, 2), which_value)))
    # Thinc raises IndexError for a winner >= P; a negative one its compiled kernel writes
    # outside the output, so plait refuses it the same way.
    with pytest.raises(IndexError) as excinfo:
        ops.backprop_maxout(dY, which, 3)
    assert "which" in str(excinfo.value) and str(which_value) in str(excinfo.value)
    np.testing.assert_array_equal(to_np(ops, dY), _f(2, 2))


def test_scatter_add_index_out_of_range(ops):
    # NOTE: Thinc's NumpyOps writes out of bounds here; plait must refuse.
    table = ops.asarray(_f(3, 2))
    with pytest.raises((ValueError, IndexError)) as excinfo:
        ops.scatter_add(table, ops.asarray(_i([0, 5])), ops.asarray(_f(2, 2)))
    assert "indices" in str(excinfo.value) and "5" in str(excinfo.value)
    np.testing.assert_array_equal(to_np(ops, table), _f(3, 2))


def test_gather_add_index_out_of_range(ops):
    table = ops.asarray(_f(3, 2))
    with pytest.raises((ValueError, IndexError)) as excinfo:
        ops.gather_add(table, ops.asarray(_i([[0, 5]])))
    assert "indices" in str(excinfo.value) and "5" in str(excinfo.value)
    np.testing.assert_array_equal(to_np(ops, table), _f(3, 2))


def test_multibatch_sequences_of_other_lengths(ops):
    # NOTE: Thinc pairs the first len(sequence) items silently and drops the rest.
    with pytest.raises(ValueError) as excinfo:
        ops.multibatch(2, [1, 2], [1, 2, 3])
    assert "2 items" in str(excinfo.value) and "3" in str(excinfo.value)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
def test_cupy_asarray_refuses_object_arrays():
    from plait.backends.cupy_ops import CupyOps

    with pytest.raises(TypeError, match="object"):
        CupyOps().asarray(np.array([object()]))
