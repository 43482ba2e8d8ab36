"""Every compiled-kernel-backed NumpyOps method, each array argument in turn replaced by None, a
list, a scalar, a wrong dtype, a non-contiguous view, a Fortran-order copy, a read-only array,
an object array and a view overlapping another argument's memory (issue 17, class 1).

Each case runs in a child process (tests/reliability/_ops_child.py, many cases per process), so
a crash fails the test that caused it instead of killing pytest. The outcome must be the
reference Ops' (its result where it accepts the input, an exception where it raises), and an
exception must be a TypeError/ValueError-like one with a message.
"""
import numpy
import pytest

from _ops_child import describe_case, run_cases

from plait.backends import NumpyOps, Ops

rng = numpy.random.RandomState(17)


def F(*shape, lo=-3.0, hi=3.0, dtype="float32"):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def lit(v):
    return ("lit", v)


UNARY = [
    "relu", "sigmoid", "swish", "mish", "gelu", "gelu_approx", "dish", "hard_swish",
    "hard_swish_mobilenet", "clipped_linear", "hard_sigmoid", "hard_tanh", "relu_k",
]
BACKPROP_DX = [  # (dY, X)
    "backprop_mish", "backprop_gelu", "backprop_gelu_approx", "backprop_dish", "backprop_hard_swish",
    "backprop_hard_swish_mobilenet", "backprop_clipped_linear", "backprop_hard_sigmoid",
    "backprop_hard_tanh", "backprop_relu_k",
]


def _lstm_args():
    ops = Ops()
    p, H0, C0, X = F(56, lo=-0.5, hi=0.5), F(1, 1, 2), F(1, 1, 2), F(5, 3)
    sizes = numpy.array([2, 2, 1], dtype="int32")
    Y, state = ops.lstm_forward_training(p, H0, C0, X, sizes)
    return p, H0, C0, X, sizes, Y, state


def base_cases():
    """(method, [args], {kwargs}): arrays are the arguments varied; lit(...) stay as they are."""
    cases = []
    for m in UNARY:
        cases.append((m, [F(4, 6)], {}))
        cases.append((m, [F(4, 6)], {"inplace": lit(True)}))
    for m in ("erf", "dsigmoid", "dtanh"):
        cases.append((m, [F(4, 6, lo=0.01, hi=0.99)], {}))
    cases.append(("dsigmoid", [F(80, 64, lo=0.01, hi=0.99)], {}))  # past the fused kernel's size
    cases.append(("dtanh", [F(80, 64, lo=-0.99, hi=0.99)], {"inplace": lit(True)}))
    cases.append(("softmax", [F(4, 6)], {}))
    cases.append(("softmax", [F(4, 6)], {"inplace": lit(True)}))
    cases.append(("backprop_softmax", [F(4, 6, lo=0, hi=1), F(4, 6)], {}))
    for m in ("backprop_relu", "backprop_sigmoid") + tuple(BACKPROP_DX):
        cases.append((m, [F(4, 6), F(4, 6, lo=0.01, hi=0.99)], {}))
        cases.append((m, [F(4, 6), F(4, 6, lo=0.01, hi=0.99)], {"inplace": lit(True)}))
    cases.append(("backprop_swish", [F(4, 6), F(4, 6), F(4, 6)], {}))
    cases.append(("backprop_swish", [F(4, 6), F(4, 6), F(4, 6)], {"inplace": lit(True)}))
    # seq kernels
    lengths = numpy.array([2, 0, 3], dtype="int32")
    cases.append(("seq2col", [F(5, 3), lit(1)], {"lengths": lengths}))
    cases.append(("seq2col", [F(5, 3), lit(2)], {}))
    cases.append(("backprop_seq2col", [F(5, 9), lit(1)], {"lengths": lengths}))
    X3 = F(4, 3, 2)
    cases.append(("maxout", [X3], {}))
    which = Ops().maxout(X3)[1]
    cases.append(("backprop_maxout", [F(4, 3), which, lit(2)], {}))
    W = F(3, 2, 5)
    cases.append(("backprop_maxout_affine", [F(4, 3), which, F(4, 5), W], {}))
    W8 = F(3, 8, 5)
    which8 = rng.randint(0, 8, size=(4, 3)).astype("int32")
    cases.append(("backprop_maxout_affine", [F(4, 3), which8, F(4, 5), W8], {}))
    L = numpy.array([2, 3], dtype="int32")
    for m in ("reduce_first", "reduce_last", "reduce_sum", "reduce_mean", "reduce_max"):
        cases.append((m, [F(5, 3), L], {}))
    cases.append(("backprop_reduce_first", [F(2, 3), numpy.array([0, 2, 5], dtype="int32")], {}))
    cases.append(("backprop_reduce_last", [F(2, 3), numpy.array([1, 4], dtype="int32")], {}))
    cases.append(("backprop_reduce_sum", [F(2, 3), L], {}))
    cases.append(("backprop_reduce_mean", [F(2, 3), L], {}))
    cases.append(("backprop_reduce_max", [F(2, 3), numpy.array([[1, 0, 1], [0, 2, 1]], dtype="int32"), L], {}))
    # gather / optimizer
    table = F(6, 4)
    idx = numpy.array([[0, 5], [3, 3], [1, 2]], dtype="int32")
    cases.append(("gather_add", [table, idx], {}))
    cases.append(("scatter_add", [F(6, 4), numpy.array([0, 5, 3, 3], dtype="int64"), F(4, 4)], {}))
    cases.append(("scatter_add", [F(16, 4), numpy.array([0, 1, 2, 3], dtype="int64"), F(4, 4)], {}))
    adam_kw = dict(beta1=lit(0.9), beta2=lit(0.999), eps=lit(1e-8), learn_rate=lit(0.01))
    cases.append(("adam", [F(10), F(10), F(10, lo=0, hi=0.1), F(10, lo=0, hi=0.1),
                           lit(0.9), lit(0.999), lit(1e-8), lit(0.01)], {}))
    cases.append(("adam_step", [F(10), F(10), F(10, lo=0, hi=0.1), F(10, lo=0, hi=0.1), F(10)], adam_kw))
    # layer norm
    Xn = F(4, 6)
    _, mean, var = Ops().layer_norm(Xn, F(6), F(6))
    cases.append(("layer_norm", [Xn, F(6), F(6)], {}))
    cases.append(("backprop_layer_norm", [F(4, 6), Xn, F(6), mean, var], {}))
    # lstm
    p, H0, C0, X, sizes, Y, state = _lstm_args()
    cases.append(("lstm_forward_training", [p, H0, C0, X, sizes], {}))
    cases.append(("lstm_forward_inference", [p, H0, C0, X, sizes], {}))
    cases.append(("backprop_lstm", [Y, sizes, p, ("tuple", [("arr", s, "c") for s in state])], {}))
    # pooling and convolution (the compiled im2col / col2im / max pool / conv products)
    Xc = F(2, 3, 5, 5)
    cases.append(("max_pool_nd", [Xc, lit(2)], {}))
    Yp, wp = Ops().max_pool_nd(Xc, 2)
    cases.append(("backprop_max_pool_nd", [F(*Yp.shape), wp, lit(Xc.shape), lit(2)], {}))
    cases.append(("avg_pool_nd", [Xc, lit(2)], {}))
    cases.append(("conv_nd", [Xc, F(4, 3, 2, 2), F(4)], {}))
    cases.append(("backprop_conv_nd", [F(2, 4, 4, 4), Xc, F(4, 3, 2, 2)], {}))
    cases.append(("deconv_nd", [F(2, 4, 4, 4), F(4, 3, 2, 2), F(3)], {}))
    cases.append(("conv_nd", [F(1, 2, 3, 3, 3), F(2, 2, 2, 2, 2)], {}))
    # gemm, hashing
    cases.append(("gemm", [F(3, 4), F(4, 5)], {}))
    cases.append(("gemm", [F(3, 4), F(4, 5)], {"out": F(3, 5)}))
    cases.append(("gemm", [F(4, 3), F(5, 4)], {"trans1": lit(True), "trans2": lit(True)}))
    cases.append(("hash", [numpy.array([1, 5, 9], dtype="uint64"), lit(3)], {}))
    cases.append(("ngrams", [lit(2), numpy.array([1, 5, 9, 4], dtype="uint64")], {}))
    return cases


WRONG_DTYPE = {"f": ("int32", "float16", "complex64", "bool"), "iu": ("float32", "int8", "uint64")}


def variants(base):
    """The base case with each array argument replaced in turn by each bad form."""
    method, args, kwargs = base
    slots = [("a", i, v) for i, v in enumerate(args)] + [("k", k, v) for k, v in kwargs.items()]
    arrays = [(s, k, v) for s, k, v in slots if isinstance(v, numpy.ndarray)]

    def recipe(v, variant="c"):
        return v if isinstance(v, tuple) else ("arr", v, variant)

    def make(where, key, new):
        a = [recipe(v) for v in args]
        kw = {k: recipe(v) for k, v in kwargs.items()}
        if where == "a":
            a[key] = new
        else:
            kw[key] = new
        return {"method": method, "args": a, "kwargs": kw}

    out = [make("a", 0, recipe(args[0]))] if args else []
    for where, key, v in arrays:
        forms = ["none", "list", "scalar", "strided", "ro", "obj"]
        forms += [f"dtype:{d}" for d in WRONG_DTYPE["f" if v.dtype.kind == "f" else "iu"]]
        if v.ndim >= 2:
            forms.append("fortran")
        for form in forms:
            out.append(make(where, key, ("arr", v, form)))
        # overlapping memory: this argument as a view into an earlier positional array argument
        if where == "a":
            for j in range(key):
                if isinstance(args[j], numpy.ndarray):
                    for offset in (0, v.itemsize * max(1, v.size // 3)):
                        out.append(make("a", key, ("overlap", v, j, offset)))
    for c in out:
        if c["method"] in ("get_dropout_mask",):
            c["loose"] = True
    return out


def all_cases():
    cases = []
    for base in base_cases():
        cases.extend(variants(base))
    return cases


def _report(cases, results):
    lines = []
    for case, res in zip(cases, results):
        if res is None:
            lines.append(f"{describe_case(case)}: no result")
        elif "fail" in res:
            lines.append(f"{describe_case(case)}: {res['fail']}")
    return lines


def test_every_kernel_argument_form(tmp_path):
    cases = all_cases()
    assert len(cases) > 1000
    results = run_cases(cases, tmp_path)
    crashes = [describe_case(c) for c, r in zip(cases, results) if r and "crash" in r]
    failures = _report(cases, results)
    assert not crashes, f"{len(crashes)} crashes:\n" + "\n".join(crashes[:50])
    assert not failures, f"{len(failures)} of {len(cases)} cases differ from the reference:\n" + "\n".join(failures[:60])


# --- the issue's examples ---------------------------------------------------------------------


def _one(tmp_path, method, args, kwargs=None):
    case = {"method": method, "args": args, "kwargs": kwargs or {}}
    (res,) = run_cases([case], tmp_path)
    assert "crash" not in res, res["fail"]
    return res


@pytest.mark.parametrize("method", ["backprop_sigmoid", "backprop_relu", "backprop_gelu", "backprop_mish",
                                    "backprop_hard_swish", "backprop_clipped_linear", "backprop_relu_k"])
@pytest.mark.parametrize("position", [0, 1])
def test_backprop_with_none_raises_naming_the_argument(tmp_path, method, position):
    args = [("arr", numpy.ones((5, 6), dtype="f"), "c"), ("arr", numpy.ones((5, 6), dtype="f"), "c")]
    args[position] = ("lit", None)
    res = _one(tmp_path, method, args)
    assert "fail" not in res, res["fail"]
    assert res["np"] == "TypeError", res
    name = res["np_msg"].split("argument '")[1].split("'")[0]
    assert name in ("dY", "Y", "X"), res["np_msg"]
    # relu_k and hard_sigmoid are clipped_linear underneath, and say so
    assert method in res["np_msg"] or "clipped_linear" in res["np_msg"], res["np_msg"]


def test_backprop_sigmoid_none_is_the_issue_example(tmp_path):
    res = _one(tmp_path, "backprop_sigmoid", [("arr", numpy.ones((5, 6), dtype="f"), "c"), ("lit", None)])
    assert res["np"] == "TypeError" and "'Y'" in res["np_msg"], res


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("offset_rows", [0, 2, 5])
def test_scatter_add_indices_overlapping_the_table(tmp_path, dtype, offset_rows):
    """The indices live in the table's memory: the adds change them as they go. NumpyOps must
    give the reference's result (numpy.add.at reads the indices before adding), never write out
    of bounds."""
    table = numpy.zeros((16, 4), dtype="float32")
    indices = numpy.array([0, 1, 2, 3, 0, 1, 2, 3], dtype=dtype)
    values = numpy.full((8, 4), 1e9, dtype="float32")
    offset = offset_rows * 4 * 4
    res = _one(tmp_path, "scatter_add", [("arr", table, "c"), ("overlap", indices, 0, offset), ("arr", values, "c")])
    assert "fail" not in res, res["fail"]


def test_scatter_add_values_overlapping_the_table(tmp_path):
    res = _one(tmp_path, "scatter_add", [("arr", F(8, 4), "c"), ("lit", numpy.array([1, 2, 1], dtype="int32")),
                                         ("overlap", F(3, 4), 0, 16)])
    assert "fail" not in res, res["fail"]


@pytest.mark.parametrize("ops", [Ops(), NumpyOps()], ids=["Ops", "NumpyOps"])
def test_backprop_max_pool_nd_refuses_which_outside_the_window(ops):
    X = F(2, 3, 4, 4)
    Y, which = ops.max_pool_nd(X, 2)
    dY = numpy.ones_like(Y)
    ok = ops.backprop_max_pool_nd(dY, which, X.shape, 2)
    assert ok.sum() == dY.sum()
    for bad in (4, -1, 100):
        w = which.copy()
        w[0, 0, 0, 0] = bad
        with pytest.raises(ValueError, match="which"):
            ops.backprop_max_pool_nd(dY, w, X.shape, 2)
    with pytest.raises(TypeError, match="which"):
        ops.backprop_max_pool_nd(dY, which.astype("float32") + 0.5, X.shape, 2)
    with pytest.raises(TypeError, match="which"):
        ops.backprop_max_pool_nd(dY, None, X.shape, 2)


@pytest.mark.parametrize("ops", [Ops(), NumpyOps()], ids=["Ops", "NumpyOps"])
def test_unflatten_overflowing_lengths_raise(ops):
    X = F(5, 2)
    lengths = numpy.array([2**62, 2**62, 2**62, 2**62 + 5], dtype="int64")
    assert int(numpy.cumsum(lengths)[-1]) == 5  # the int64 sum wraps around to X's rows
    with pytest.raises(ValueError, match="lengths.*int64"):
        ops.unflatten(X, lengths)
    big = numpy.array([2**63 - 1, 2**63 - 1, 3], dtype="int64")
    with pytest.raises(ValueError):
        ops.unflatten(X, big)
    assert [x.shape[0] for x in ops.unflatten(X, numpy.array([2, 0, 3], dtype="int64"))] == [2, 0, 3]


@pytest.mark.parametrize("ops", [Ops(), NumpyOps()], ids=["Ops", "NumpyOps"])
def test_padded2list_refuses_duplicate_or_bad_indices(ops):
    from plait.types import Padded

    seqs = [F(3, 2), F(1, 2), F(2, 2)]
    padded = ops.list2padded(seqs)
    back = ops.padded2list(padded)
    assert all(numpy.array_equal(a, b) for a, b in zip(seqs, back))
    for bad in ([0, 0, 1], [0, 1, 3], [-1, 0, 1], [0, 1]):
        p = Padded(padded.data, padded.size_at_t, padded.lengths, numpy.array(bad, dtype="int32"))
        with pytest.raises(ValueError, match="indices"):
            ops.padded2list(p)
    p = Padded(padded.data, padded.size_at_t, numpy.array([3, 7, 1], dtype="int32"), padded.indices)
    with pytest.raises(ValueError, match="lengths"):
        ops.padded2list(p)


@pytest.mark.parametrize("ops", [Ops(), NumpyOps()], ids=["Ops", "NumpyOps"])
@pytest.mark.parametrize("method", ["conv_nd", "deconv_nd", "backprop_conv_nd", "backprop_deconv_nd"])
def test_convolution_stride_none_is_an_error(ops, method):
    X, W = F(1, 2, 5, 5), F(3, 2, 2, 2)
    if method == "conv_nd":
        call = lambda **kw: ops.conv_nd(X, W, **kw)  # noqa: E731
    elif method == "deconv_nd":
        call = lambda **kw: ops.deconv_nd(F(1, 3, 4, 4), W, **kw)  # noqa: E731
    elif method == "backprop_conv_nd":
        call = lambda **kw: ops.backprop_conv_nd(F(1, 3, 4, 4), X, W, **kw)  # noqa: E731
    else:
        call = lambda **kw: ops.backprop_deconv_nd(X, F(1, 3, 4, 4), W, **kw)  # noqa: E731
    call(stride=1)
    with pytest.raises(TypeError, match="stride"):
        call(stride=None)


def test_pooling_stride_none_still_means_the_window():
    ops = NumpyOps()
    X = F(1, 1, 4, 4)
    assert ops.max_pool_nd(X, 2)[0].shape == ops.max_pool_nd(X, 2, stride=None)[0].shape == (1, 1, 2, 2)


def _read_only(*arrays):
    out = []
    for a in arrays:
        a = a.copy()
        a.flags.writeable = False
        out.append(a)
    return out


def test_lstm_kernels_take_read_only_inputs():
    ref, fast = Ops(), NumpyOps()
    p, H0, C0, X, sizes, Y, state = _lstm_args()
    ro = _read_only(p, H0, C0, X, sizes)
    Y_ref, st_ref = ref.lstm_forward_training(*ro)
    Y_np, st_np = fast.lstm_forward_training(*ro)
    numpy.testing.assert_allclose(Y_np, Y_ref, rtol=1e-4, atol=1e-5)
    numpy.testing.assert_allclose(fast.lstm_forward_inference(*ro), Y_ref, rtol=1e-4, atol=1e-5)
    st_ro = tuple(_read_only(*st_np))
    dY = _read_only(F(*Y.shape))[0]
    for a, b in zip(fast.backprop_lstm(dY, ro[4], ro[0], st_ro), ref.backprop_lstm(dY, ro[4], ro[0], st_ro)):
        numpy.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    big = _read_only(F(80, 64, lo=0.01, hi=0.99))[0]
    numpy.testing.assert_allclose(fast.dsigmoid(big), ref.dsigmoid(big), rtol=1e-6)
    numpy.testing.assert_allclose(fast.dtanh(big), ref.dtanh(big), rtol=1e-6)


# --- extreme values: lengths whose int64 sum wraps, huge window/piece/kernel sizes ------------


def extreme_cases():
    """Scalars and lengths at the edges of the kernels' integer types (found crashing numpy's
    repeat in the reference backprops before lengths were summed exactly)."""
    X = numpy.random.rand(5, 3).astype('f')
    wrap = numpy.array([2**62, 2**62, 2**62, 2**62 + 5], 'int64')
    wrap2 = numpy.array([2**63 - 1, 2**63 - 1, 7], 'int64')
    neg = numpy.array([7, -2], 'int64')
    cases = []

    def A(a):
        return ("arr", a, "c")

    def L(v):
        return ("lit", v)

    for m in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_first", "reduce_last"):
        for lens in (wrap, wrap2, neg, wrap.astype('uint64')):
            cases.append({"method": m, "args": [A(X), A(lens)]})
    for m in ("backprop_reduce_sum", "backprop_reduce_mean"):
        for lens in (wrap, wrap2, neg):
            cases.append({"method": m, "args": [A(numpy.random.rand(len(lens), 3).astype('f')), A(lens)]})
    cases.append({"method": "backprop_reduce_max", "args": [A(numpy.random.rand(4, 3).astype('f')), A(numpy.zeros((4, 3), 'int32')), A(wrap)]})
    cases.append({"method": "backprop_reduce_first", "args": [A(numpy.random.rand(2, 3).astype('f')), A(numpy.array([0, 2**62, 5], 'int64'))]})
    cases.append({"method": "backprop_reduce_first", "args": [A(numpy.random.rand(2, 3).astype('f')), A(numpy.array([0, -3, 5], 'int64'))]})
    cases.append({"method": "backprop_reduce_last", "args": [A(numpy.random.rand(2, 3).astype('f')), A(numpy.array([2**62, 4], 'int64'))]})
    cases.append({"method": "backprop_reduce_last", "args": [A(numpy.random.rand(2, 3).astype('f')), A(numpy.array([-7, 4], 'int64'))]})
    for nW in (2**31, 2**40, 2**62, -5):
        cases.append({"method": "seq2col", "args": [A(X), L(nW)]})
        cases.append({"method": "seq2col", "args": [A(X), L(nW)], "kwargs": {"lengths": A(numpy.array([2, 3], 'int32'))}})
        cases.append({"method": "backprop_seq2col", "args": [A(X), L(nW)]})
    for lens in (wrap, wrap2, neg):
        cases.append({"method": "seq2col", "args": [A(X), L(1)], "kwargs": {"lengths": A(lens)}})
        cases.append({"method": "backprop_seq2col", "args": [A(numpy.random.rand(5, 9).astype('f')), L(1)], "kwargs": {"lengths": A(lens)}})
    for P in (2**31, 2**62, -1, 0):
        cases.append({"method": "backprop_maxout", "args": [A(X), A(numpy.zeros((5, 3), 'int32')), L(P)]})
    cases.append({"method": "backprop_maxout", "args": [A(X), A(numpy.full((5, 3), 2**31 - 1, 'int32')), L(2)]})
    cases.append({"method": "backprop_maxout", "args": [A(X), A(numpy.full((5, 3), -2**31, 'int32')), L(2)]})
    cases.append({"method": "backprop_maxout_affine", "args": [A(X), A(numpy.full((5, 3), 2**31 - 1, 'int32')), A(numpy.random.rand(5, 4).astype('f')), A(numpy.random.rand(3, 9, 4).astype('f'))]})
    cases.append({"method": "backprop_maxout_affine", "args": [A(X), A(numpy.full((5, 3), -1, 'int64')), A(numpy.random.rand(5, 4).astype('f')), A(numpy.random.rand(3, 9, 4).astype('f'))]})
    cases.append({"method": "backprop_reduce_max", "args": [A(numpy.random.rand(2, 3).astype('f')), A(numpy.full((2, 3), 2**31 - 1, 'int32')), A(numpy.array([2, 3], 'int32'))]})
    cases.append({"method": "backprop_reduce_max", "args": [A(numpy.random.rand(2, 3).astype('f')), A(numpy.full((2, 3), -1, 'int64')), A(numpy.array([2, 3], 'int32'))]})
    cases.append({"method": "gather_add", "args": [A(X), A(numpy.array([[2**40, -2**40]], 'int64'))]})
    cases.append({"method": "scatter_add", "args": [A(X), A(numpy.array([2**40, -2**40], 'int64')), A(numpy.ones((2, 3), 'f'))]})
    for ks in (2**31, 2**40, 0, -1):
        cases.append({"method": "max_pool_nd", "args": [A(numpy.random.rand(1, 1, 4, 4).astype('f')), L(ks)]})
        cases.append({"method": "max_pool_nd", "args": [A(numpy.random.rand(1, 1, 4, 4).astype('f')), L(2), L(ks)]})
        cases.append({"method": "max_pool_nd", "args": [A(numpy.random.rand(1, 1, 4, 4).astype('f')), L(2), L(2), L(ks)]})
        cases.append({"method": "conv_nd", "args": [A(numpy.random.rand(1, 1, 4, 4).astype('f')), A(numpy.random.rand(1, 1, 2, 2).astype('f')), L(None), L(ks)]})
        cases.append({"method": "conv_nd", "args": [A(numpy.random.rand(1, 1, 4, 4).astype('f')), A(numpy.random.rand(1, 1, 2, 2).astype('f')), L(None), L(1), L(ks)]})
        cases.append({"method": "conv_nd", "args": [A(numpy.random.rand(1, 1, 4, 4).astype('f')), A(numpy.random.rand(1, 1, 2, 2).astype('f')), L(None), L(1), L(0), L(ks)]})
    for sizes in (numpy.array([2**31, 1], 'int64'), numpy.array([3, -1, 3], 'int32'), numpy.array([6], 'int32'), numpy.array([1, 3, 1], 'int32')):
        p = numpy.random.rand(56).astype('f')
        cases.append({"method": "lstm_forward_training", "args": [A(p), A(numpy.zeros((1, 1, 2), 'f')), A(numpy.zeros((1, 1, 2), 'f')), A(numpy.random.rand(5, 3).astype('f')), A(sizes)]})
    cases.append({"method": "hash", "args": [A(numpy.array([1, 2], 'uint64')), L(2**64)]})
    cases.append({"method": "ngrams", "args": [L(2**31), A(numpy.array([1, 2], 'uint64'))]})
    cases.append({"method": "get_dropout_mask", "args": [L((2**40, 2**40)), L(0.5)], "loose": True})
    return cases


def test_extreme_lengths_and_sizes(tmp_path):
    cases = extreme_cases()
    results = run_cases(cases, tmp_path)
    failures = _report(cases, results)
    assert not failures, "\n".join(failures)
