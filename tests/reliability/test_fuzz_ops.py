"""Hypothesis fuzzing of Ops methods (issue 17, "What it must show" point 2): random shapes,
dtypes, layouts, lengths and indices, valid and invalid, on NumpyOps (compiled kernels) against
the reference Ops. Every call must give the reference's result, or the same refusal as a clean
exception (TypeError/ValueError/IndexError... with a message), never a crash or a hang.

Hypothesis draws a batch of calls per example; each batch runs in a child process
(tests/reliability/_ops_child.py), so a crash fails the test with the call that caused it.
Bounded: max_examples below keep the file under a minute on two cores.
"""
import os

import numpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _ops_child import describe_case, run_cases

FLOATS = ["float32", "float64"]
ODD_DTYPES = ["float16", "int32", "int64", "bool", "uint8", "complex64"]
LAYOUTS = ["c"] * 8 + ["strided", "fortran", "ro", "list", "none", "scalar", "obj"]


@st.composite
def values(draw, shape, dtype=None, lo=-4.0, hi=4.0):
    """An array recipe of `shape`: mostly a C-contiguous float array, sometimes anything else."""
    if dtype is None:
        dtype = draw(st.sampled_from(FLOATS * 4 + ODD_DTYPES))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = numpy.random.RandomState(seed)
    base = rng.uniform(lo, hi, size=shape)
    if draw(st.integers(0, 9)) == 0:
        base.reshape(-1)[: max(1, base.size // 4)] = draw(st.sampled_from([numpy.nan, numpy.inf, -numpy.inf, 0.0, 1e30]))
    with numpy.errstate(all="ignore"):
        base = base.astype(dtype)
    return ("arr", base, draw(st.sampled_from(LAYOUTS)))


@st.composite
def ints(draw, shape, lo, hi, dtype=None):
    dtype = dtype or draw(st.sampled_from(["int32", "int64", "int32", "int64", "uint32", "int8", "float32"]))
    seed = draw(st.integers(0, 2**31 - 1))
    if dtype.startswith("u"):
        lo = max(lo, 0)  # -1 would wrap to a huge row count: a memory bomb, not a kernel test
    base = numpy.random.RandomState(seed).randint(lo, max(hi, lo + 1), size=shape)
    with numpy.errstate(all="ignore"):
        base = base.astype(dtype)
    return ("arr", base, draw(st.sampled_from(LAYOUTS)))


def shapes(min_dims=1, max_dims=3, max_side=6):
    return st.lists(st.integers(0, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


UNARY = ["relu", "sigmoid", "swish", "mish", "gelu", "gelu_approx", "dish", "hard_swish",
         "hard_swish_mobilenet", "clipped_linear", "hard_sigmoid", "hard_tanh", "relu_k", "erf",
         "dsigmoid", "dtanh", "softmax"]
BINARY = ["backprop_relu", "backprop_sigmoid", "backprop_mish", "backprop_gelu", "backprop_gelu_approx",
          "backprop_dish", "backprop_hard_swish", "backprop_hard_swish_mobilenet", "backprop_clipped_linear",
          "backprop_hard_sigmoid", "backprop_hard_tanh", "backprop_relu_k", "backprop_softmax"]


@st.composite
def elementwise_case(draw):
    shape = draw(shapes())
    inplace = draw(st.booleans())
    if draw(st.booleans()):
        method = draw(st.sampled_from(UNARY))
        args = [draw(values(shape))]
    else:
        method = draw(st.sampled_from(BINARY + ["backprop_swish"]))
        n = 3 if method == "backprop_swish" else 2
        # a second shape that sometimes broadcasts and sometimes does not
        other = draw(st.sampled_from([shape, shape, shape[1:], (1,) + shape[1:], draw(shapes())]))
        args = [draw(values(shape))] + [draw(values(other if i == 1 else shape)) for i in range(1, n)]
        if draw(st.integers(0, 4)) == 0:  # an argument overlapping the first one's memory
            args[1] = ("overlap", args[1][1], 0, draw(st.integers(0, 16)) * 4)
    kwargs = {}
    if method not in ("erf", "backprop_softmax"):
        kwargs["inplace"] = ("lit", inplace)
    if method in ("softmax", "backprop_softmax"):
        kwargs["axis"] = ("lit", draw(st.sampled_from([-1, 0, 1, 5])))
        kwargs["temperature"] = ("lit", draw(st.sampled_from([1.0, 0.5, 2, 0.0, -1.0])))
        if method == "backprop_softmax":
            kwargs.pop("inplace", None)
    if method in ("clipped_linear", "backprop_clipped_linear"):
        kwargs["min_val"] = ("lit", draw(st.sampled_from([0.0, -1.0, 2.0])))
        kwargs["max_val"] = ("lit", draw(st.sampled_from([1.0, 6.0, -2.0])))
    return {"method": method, "args": args, "kwargs": kwargs}


@st.composite
def lengths_for(draw, n_rows):
    """Lengths that sum to n_rows (mostly), or not: negative, too long, empty, wrong dtype."""
    mode = draw(st.integers(0, 5))
    if mode <= 2 and n_rows > 0:
        cuts = sorted(draw(st.lists(st.integers(0, n_rows), max_size=4)))
        bounds = [0] + cuts + [n_rows]
        lens = [b - a for a, b in zip(bounds, bounds[1:])]
    elif mode == 5:  # values whose int64 running sum wraps around
        lens = draw(st.lists(st.sampled_from([0, 1, n_rows, 2**31 - 1, 2**62, 2**63 - 1]), max_size=5))
    else:
        lens = draw(st.lists(st.integers(-2, n_rows + 2), max_size=5))
    dtype = draw(st.sampled_from(["int32", "int32", "int64", "uint64", "float32"]))
    with numpy.errstate(all="ignore"):
        base = numpy.array(lens, dtype="int64").astype(dtype)
    return ("arr", base, draw(st.sampled_from(LAYOUTS)))


@st.composite
def sequence_case(draw):
    n, nO = draw(st.integers(0, 7)), draw(st.integers(0, 4))
    method = draw(st.sampled_from([
        "reduce_sum", "reduce_mean", "reduce_max", "reduce_first", "reduce_last", "seq2col",
        "backprop_seq2col", "backprop_reduce_sum", "backprop_reduce_mean", "backprop_reduce_first",
        "backprop_reduce_last", "backprop_reduce_max", "maxout", "backprop_maxout", "unflatten",
        "flatten", "list2padded",
    ]))
    X = draw(values((n, nO)))
    L = draw(lengths_for(n))
    if method.startswith("reduce_"):
        return {"method": method, "args": [X, L]}
    if method in ("seq2col", "backprop_seq2col"):
        nW = draw(st.integers(-1, 3))
        width = nO * (2 * nW + 1) if method == "backprop_seq2col" and nW >= 0 else nO
        X = draw(values((n, width)))
        kw = {"lengths": L} if draw(st.booleans()) else {}
        return {"method": method, "args": [X, ("lit", nW)], "kwargs": kw}
    nB = draw(st.integers(0, 4))
    if method in ("backprop_reduce_sum", "backprop_reduce_mean"):
        return {"method": method, "args": [draw(values((nB, nO))), draw(lengths_for(n))]}
    if method == "backprop_reduce_first":
        return {"method": method, "args": [draw(values((nB, nO))), draw(ints((nB + 1,), -1, n + 2))]}
    if method == "backprop_reduce_last":
        return {"method": method, "args": [draw(values((nB, nO))), draw(ints((nB,), -1, n + 2))]}
    if method == "backprop_reduce_max":
        return {"method": method, "args": [draw(values((nB, nO))), draw(ints((nB, nO), -1, 4)), L]}
    if method == "maxout":
        return {"method": method, "args": [draw(values((n, nO, draw(st.integers(0, 3)))))]}
    if method == "backprop_maxout":
        P = draw(st.integers(0, 3))
        return {"method": method, "args": [draw(values((n, nO))), draw(ints((n, nO), -1, P + 1)), ("lit", P)]}
    if method == "unflatten":
        kw = {"pad": ("lit", draw(st.integers(0, 2)))} if draw(st.booleans()) else {}
        return {"method": method, "args": [X, L], "kwargs": kw}
    seqs = ("list", [draw(values((draw(st.integers(0, 4)), nO))) for _ in range(draw(st.integers(0, 3)))])
    return {"method": method, "args": [seqs]}


@st.composite
def gather_case(draw):
    T, O, B, K = (draw(st.integers(0, 5)) for _ in range(4))
    method = draw(st.sampled_from(["gather_add", "scatter_add", "scatter_add", "adam", "layer_norm",
                                   "backprop_layer_norm"]))
    if method == "gather_add":
        return {"method": method, "args": [draw(values((T, O))), draw(ints((B, K), -T - 1, T + 1))]}
    if method == "scatter_add":
        idx_shape = draw(st.sampled_from([(B,), (B, K)]))
        vshape = idx_shape + (O,) if draw(st.integers(0, 5)) else (B, 1, O)
        table = draw(values((T, O)))
        idx = draw(ints(idx_shape, -T - 1, T + 1))
        vals = draw(values(vshape))
        if draw(st.integers(0, 3)) == 0:  # indices or values in the table's memory
            which = draw(st.sampled_from([1, 2]))
            rec = idx if which == 1 else vals
            new = ("overlap", rec[1], 0, draw(st.integers(0, 4)) * 4)
            idx, vals = (new, vals) if which == 1 else (idx, new)
        return {"method": method, "args": [table, idx, vals]}
    if method == "adam":
        n = draw(st.integers(0, 8))
        arrs = [draw(values((n,))) for _ in range(4)]
        if draw(st.integers(0, 3)) == 0:
            j = draw(st.integers(1, 3))
            arrs[j] = ("overlap", arrs[j][1], draw(st.integers(0, j - 1)), draw(st.integers(0, 2)) * 4)
        hp = [("lit", v) for v in (0.9, 0.999, 1e-8, 0.01)]
        return {"method": method, "args": arrs + hp}
    n = draw(st.integers(0, 5))
    if method == "layer_norm":
        return {"method": method, "args": [draw(values((n, O))), draw(values((O,))), draw(values((O,)))]}
    return {"method": method, "args": [draw(values((n, O))), draw(values((n, O))), draw(values((O,))),
                                        draw(values((n, 1), lo=-1, hi=1)), draw(values((n, 1), lo=0.1, hi=2))]}


@st.composite
def pool_conv_case(draw):
    nB, C, H, W = draw(st.integers(0, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    method = draw(st.sampled_from(["max_pool_nd", "avg_pool_nd", "backprop_max_pool_nd", "conv_nd",
                                   "backprop_conv_nd", "gemm", "unpool_nd", "backprop_avg_pool_nd",
                                   "backprop_unpool_nd", "deconv_nd"]))
    k = draw(st.integers(1, 3))
    stride = draw(st.sampled_from([None, 1, 2, 3]))
    pad = draw(st.integers(0, 2))
    cover_all = ("lit", draw(st.booleans()))
    if method in ("max_pool_nd", "avg_pool_nd", "unpool_nd"):
        return {"method": method, "args": [draw(values((nB, C, H, W))), ("lit", k), ("lit", stride), ("lit", pad)],
                "kwargs": {"cover_all": cover_all}}
    if method in ("backprop_avg_pool_nd", "backprop_unpool_nd"):
        return {"method": method, "args": [draw(values((nB, C, H, W))), ("lit", (nB, C, H + 1, W + 2)), ("lit", k),
                                            ("lit", stride), ("lit", pad)], "kwargs": {"cover_all": cover_all}}
    if method == "deconv_nd":
        O = draw(st.integers(1, 3))
        return {"method": method, "args": [draw(values((nB, O, H, W))), draw(values((O, C, k, k))), draw(values((C,))),
                                            ("lit", stride), ("lit", pad), ("lit", draw(st.integers(1, 2)))]}
    if method == "backprop_max_pool_nd":
        s = stride or k
        oh = max(1, (H + 2 * pad - k + s - 1) // s + 1)
        ow = max(1, (W + 2 * pad - k + s - 1) // s + 1)
        return {"method": method, "args": [draw(values((nB, C, oh, ow))), draw(ints((nB, C, oh, ow), -1, k * k + 1)),
                                            ("lit", (nB, C, H, W)), ("lit", k), ("lit", stride), ("lit", pad)]}
    if method == "conv_nd":
        G = draw(st.sampled_from([1, 1, 2, 3]))
        O = draw(st.integers(1, 3)) * G
        return {"method": method, "args": [draw(values((nB, C * G, H, W))), draw(values((O, C, k, k))),
                                            draw(values((O,))), ("lit", stride), ("lit", pad),
                                            ("lit", draw(st.sampled_from([1, 1, 2, 3]))), ("lit", G), cover_all]}
    if method == "backprop_conv_nd":
        O = draw(st.integers(1, 3))
        s = stride or 1
        oh, ow = max(1, (H + 2 * pad - k) // s + 1), max(1, (W + 2 * pad - k) // s + 1)
        return {"method": method, "args": [draw(values((nB, O, oh, ow))), draw(values((nB, C, H, W))),
                                            draw(values((O, C, k, k))), ("lit", stride), ("lit", pad)]}
    M, K, N = draw(st.integers(0, 5)), draw(st.integers(0, 5)), draw(st.integers(0, 5))
    t1, t2 = draw(st.booleans()), draw(st.booleans())
    x = draw(values((K, M) if t1 else (M, K)))
    y = draw(values((N, K) if t2 else (K, draw(st.sampled_from([N, N, N + 1])))))
    kw = {"trans1": ("lit", t1), "trans2": ("lit", t2)}
    if draw(st.booleans()):
        kw["out"] = draw(values((M, N)))
    return {"method": method, "args": [x, y], "kwargs": kw}


@st.composite
def lstm_case(draw):
    depth, dirs, nO, nI = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    n_params = 0
    for layer in range(depth):
        inp = nI if layer == 0 else nO * dirs
        n_params += dirs * (4 * nO * inp + 4 * nO + 4 * nO * nO + 4 * nO)
    n_params += draw(st.sampled_from([0, 0, 0, 1, -1]))
    sizes = sorted(draw(st.lists(st.integers(1, 3), max_size=4)), reverse=True)
    if draw(st.integers(0, 4)) == 0:
        sizes = draw(st.lists(st.integers(-1, 3), max_size=4))
    N = sum(max(s, 0) for s in sizes)
    dtype = draw(st.sampled_from(["float32", "float64"]))
    method = draw(st.sampled_from(["lstm_forward_training", "lstm_forward_inference"]))
    args = [draw(values((max(n_params, 0),), dtype, -0.5, 0.5)), draw(values((depth, dirs, nO), dtype)),
            draw(values((depth, dirs, nO), dtype)), draw(values((N, nI), dtype)),
            ("arr", numpy.array(sizes, dtype="int32"), draw(st.sampled_from(LAYOUTS)))]
    return {"method": method, "args": args}


@st.composite
def hash_case(draw):
    n = draw(st.integers(0, 6))
    if draw(st.booleans()):
        return {"method": "hash", "args": [draw(ints((n,), 0, 2**31, draw(st.sampled_from(["uint64", "int64", "uint32", "float32"])))),
                                           ("lit", draw(st.sampled_from([0, 1, -1, 2**32, 2**40])))]}
    return {"method": "ngrams", "args": [("lit", draw(st.integers(-1, 4))),
                                         draw(ints((n,), 0, 2**31, draw(st.sampled_from(["uint64", "int64", "int32", "float64"]))))]}


@st.composite
def misc_case(draw):
    """padded2list with tampered indices/lengths, pad/unpad, unflatten with huge lengths,
    backprop_maxout_affine, get_dropout_mask."""
    method = draw(st.sampled_from(["padded2list", "padded2list", "pad", "unpad", "unflatten",
                                   "backprop_maxout_affine", "get_dropout_mask"]))
    nB, nL, nO = draw(st.integers(0, 4)), draw(st.integers(0, 4)), draw(st.integers(0, 3))
    if method == "padded2list":
        lengths = sorted(draw(st.lists(st.integers(0, nL), min_size=nB, max_size=nB)), reverse=True)
        indices = draw(st.permutations(list(range(nB))))
        if draw(st.booleans()):
            indices = draw(st.lists(st.integers(-1, nB), min_size=nB, max_size=nB + 1))
        if draw(st.integers(0, 3)) == 0:
            lengths = draw(st.lists(st.integers(-1, nL + 2), min_size=nB, max_size=nB))
        size_at_t = [sum(1 for n in lengths if n > t) for t in range(nL)]
        parts = [draw(values((nL, nB, nO))), ("lit", numpy.array(size_at_t, dtype="int32")),
                 ("arr", numpy.array(lengths, dtype="int32"), "c"), ("arr", numpy.array(indices, dtype="int32"), "c")]
        return {"method": method, "args": [("padded", parts)]}
    if method == "pad":
        seqs = ("list", [draw(values((draw(st.integers(0, 4)), nO))) for _ in range(draw(st.integers(0, 3)))])
        return {"method": method, "args": [seqs], "kwargs": {"round_to": ("lit", draw(st.integers(-1, 3)))}}
    if method == "unpad":
        return {"method": method, "args": [draw(values((nB, nL, nO))), ("lit", draw(st.lists(st.integers(-1, nL + 1), max_size=5)))]}
    if method == "unflatten":
        big = draw(st.lists(st.sampled_from([0, 1, 2, 2**31, 2**62, 2**63 - 1, -(2**62)]), max_size=5))
        return {"method": method, "args": [draw(values((nL, nO))), ("arr", numpy.array(big, dtype="int64"), "c")]}
    if method == "backprop_maxout_affine":
        P, nI = draw(st.integers(1, 9)), draw(st.integers(0, 3))
        return {"method": method, "args": [draw(values((nB, nO))), draw(ints((nB, nO), -1, P + 1)),
                                            draw(values((nB, nI))), draw(values((nO, P, nI)))]}
    shape = draw(st.sampled_from([(nB, nO), nB, (nB,), [nB, nO], (-1,), (2.5,)]))
    return {"method": method, "args": [("lit", shape), ("lit", draw(st.sampled_from([0.0, 0.1, 0.5, 1.0, None, -0.1])))],
            "loose": True}


def _check(cases, tmp_path):
    results = run_cases(cases, tmp_path, timeout=120)
    bad = [f"{describe_case(c)}: {r['fail']}" if r else f"{describe_case(c)}: no result"
           for c, r in zip(cases, results) if r is None or "fail" in r]
    assert not bad, "\n".join(bad[:20])


# Derandomized, so CI runs the same examples every time; PLAIT_FUZZ_EXAMPLES=N (a multiplier)
# and PLAIT_FUZZ_RANDOM=1 run more, and other, examples locally.
_SCALE = int(os.environ.get("PLAIT_FUZZ_EXAMPLES", "1"))
SETTINGS = dict(deadline=None, derandomize=not os.environ.get("PLAIT_FUZZ_RANDOM"), database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])


@settings(max_examples=30 * _SCALE, **SETTINGS)
@given(st.lists(elementwise_case(), min_size=20, max_size=40))
def test_fuzz_elementwise(tmp_path, cases):
    _check(cases, tmp_path)


@settings(max_examples=30 * _SCALE, **SETTINGS)
@given(st.lists(sequence_case(), min_size=20, max_size=40))
def test_fuzz_sequences(tmp_path, cases):
    _check(cases, tmp_path)


@settings(max_examples=25 * _SCALE, **SETTINGS)
@given(st.lists(gather_case(), min_size=20, max_size=40))
def test_fuzz_gather_scatter_optim_norm(tmp_path, cases):
    _check(cases, tmp_path)


@settings(max_examples=25 * _SCALE, **SETTINGS)
@given(st.lists(pool_conv_case(), min_size=15, max_size=30))
def test_fuzz_pool_conv_gemm(tmp_path, cases):
    _check(cases, tmp_path)


@settings(max_examples=15 * _SCALE, **SETTINGS)
@given(st.lists(st.one_of(lstm_case(), hash_case(), misc_case()), min_size=10, max_size=25))
def test_fuzz_lstm_hash(tmp_path, cases):
    _check(cases, tmp_path)


# --- every public Ops method, with whatever comes to hand -------------------------------------

_RNG = numpy.random.RandomState(5)
JUNK = [
    ("lit", None), ("lit", []), ("lit", 1), ("lit", -1), ("lit", 0), ("lit", 2**40), ("lit", 0.5),
    ("lit", (2, 3)), ("lit", "x"), ("lit", [[1.0, 2.0]]),
    ("arr", _RNG.rand(3, 4).astype("f"), "c"), ("arr", _RNG.rand(3).astype("f"), "c"),
    ("arr", _RNG.rand(2, 3, 4).astype("f"), "c"), ("arr", _RNG.rand(2, 2, 2, 2).astype("f"), "c"),
    ("arr", numpy.array([1, 2], "int32"), "c"), ("arr", numpy.array([[0, 1]], "int64"), "c"),
    ("arr", numpy.zeros((0, 3), "f"), "c"), ("arr", numpy.array([2**62, 2**62], "int64"), "c"),
    ("arr", _RNG.rand(3, 4), "strided"), ("arr", _RNG.rand(3, 4).astype("f"), "ro"),
    ("arr", numpy.array([1, 2], "uint64"), "c"), ("arr", numpy.ones((2, 2), bool), "c"),
]
RANDOM_METHODS = ("get_dropout_mask",)
_SKIP = {"cblas", "device_type", "device_id", "use_blis"}


def _public_methods():
    import inspect

    from plait.backends import NumpyOps

    ops = NumpyOps()
    out = []
    for name, fn in inspect.getmembers(ops, callable):
        if name.startswith("_") or name in _SKIP:
            continue
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            continue
        positional = [p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(positional) <= 5:
            out.append((name, len(positional)))
    return out


PUBLIC_METHODS = _public_methods()


@st.composite
def junk_case(draw):
    name, n = draw(st.sampled_from(PUBLIC_METHODS))
    case = {"method": name, "args": [draw(st.sampled_from(JUNK)) for _ in range(n)]}
    if name in RANDOM_METHODS:
        case["loose"] = True
    return case


@settings(max_examples=20 * _SCALE, **SETTINGS)
@given(st.lists(junk_case(), min_size=40, max_size=80))
def test_fuzz_every_method_with_junk(tmp_path, cases):
    _check(cases, tmp_path)


def test_public_methods_found():
    names = {n for n, _ in PUBLIC_METHODS}
    assert {"relu", "scatter_add", "conv_nd", "padded2list", "lstm_forward_training"} <= names
    assert len(names) > 100
