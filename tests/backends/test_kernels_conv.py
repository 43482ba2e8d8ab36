"""NumpyOps' compiled 2-D convolution and pooling kernels against the Ops reference.

im2col and col2im must equal the reference's bit for bit (strides, padding, dilation, pad
values, -0.0). Max pooling's Y and winners must equal the reference's exactly (NaN, -inf, ties,
padding and cover_all included); its backprop exactly where windows do not overlap, and to
rounding where they do (the sums are added in another order). All with one OpenMP thread and
with two.

conv_nd / deconv_nd and their backprops run on blocked products (_kernels_cpu/conv_gemm.pyx)
that add each output's terms in another order than numpy.matmul, so they are compared with the
reference to rounding (the bias gradients too, summed on vectors): every entry within a few
K * eps of the sum of its terms' absolute values (K terms), the bound a reordered sum obeys; a
wrong, missing or misplaced term is off by a whole term, far outside it. Their results must not depend on the thread count (bit for bit)
nor on the instruction set beyond that bound, and the data gradient must be the same bits as
deconv_nd's (a deferred input gradient is computed by deconv_nd).
"""
import contextlib

import numpy
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from plait.backends import NumpyOps, Ops
from plait.backends._conv import col2im_nd, conv_outsize, im2col_nd_out

kernels = pytest.importorskip("plait.backends._kernels_cpu.conv", reason="compiled kernels not built")
conv_gemm = pytest.importorskip("plait.backends._kernels_cpu.conv_gemm", reason="compiled kernels not built")
threadpoolctl = pytest.importorskip("threadpoolctl")

P = NumpyOps()
R = Ops()


@contextlib.contextmanager
def n_threads(n):
    with threadpoolctl.threadpool_limits(limits=n, user_api="openmp"):
        yield


def _values(rng, shape, dtype, kind):
    X = rng.standard_normal(shape).astype(dtype)
    if kind == "ties":
        X = rng.integers(-2, 3, size=shape).astype(dtype) * 0.5
        X[(X == 0) & (rng.random(shape) < 0.5)] = -0.0
    elif kind == "special":
        r = rng.random(shape)
        X[r < 0.1] = numpy.nan
        X[(r >= 0.1) & (r < 0.3)] = -numpy.inf
        X[(r >= 0.3) & (r < 0.35)] = numpy.inf
    return X


def test_the_fast_case_runs_compiled():
    X = numpy.ones((1, 1, 4, 4), "float32")
    col = kernels.im2col_2d(X, 2, 2, 1, 1, 0, 0, 1, 1, 3, 3, 0.0)
    assert col is not None and col.shape == (1, 1, 2, 2, 3, 3)
    assert kernels.im2col_2d(numpy.ones((2, 3, 4, 4), "f"), 2, 2, 1, 1, 0, 0, 1, 1, 3, 3, 0.0, True).shape == (3, 2, 2, 2, 3, 3)
    assert kernels.col2im_2d(col, 4, 4, 1, 1, 0, 0, 1, 1) is not None
    assert kernels.im2col_2d(X.astype("int64"), 2, 2, 1, 1, 0, 0, 1, 1, 3, 3, 0.0) is None
    assert kernels.col2im_2d(numpy.broadcast_to(col, col.shape), 4, 4, 1, 1, 0, 0, 1, 1) is not None
    assert kernels.col2im_2d(col[..., ::2], 4, 4, 1, 1, 0, 0, 1, 1) is None
    assert kernels.max_pool_2d(X, 2, 2, 2, 2, 0, 0, 2, 2) is not None
    Y, which = kernels.max_pool_2d(X, 2, 2, 2, 2, 0, 0, 2, 2)
    assert kernels.backprop_max_pool_2d(Y, which, 4, 4, 2, 2, 2, 2, 0, 0) is not None
    # Outside it: other dtypes and ranks, non-contiguous arrays, winners out of the window.
    assert kernels.max_pool_2d(X.astype("int32"), 2, 2, 2, 2, 0, 0, 2, 2) is None
    assert kernels.max_pool_2d(numpy.ones((4, 4), "float32"), 2, 2, 2, 2, 0, 0, 2, 2) is None
    assert kernels.max_pool_2d(numpy.ones((1, 1, 4, 8), "f")[..., ::2], 2, 2, 2, 2, 0, 0, 2, 2) is None
    assert kernels.backprop_max_pool_2d(Y, which + 4, 4, 4, 2, 2, 2, 2, 0, 0) is None
    assert kernels.backprop_max_pool_2d(Y, which.astype("int64"), 4, 4, 2, 2, 2, 2, 0, 0) is None


@settings(max_examples=150, deadline=None)
@given(
    nB=st.integers(0, 3), C=st.integers(0, 3), H=st.integers(1, 9), W=st.integers(1, 9),
    kh=st.integers(1, 4), kw=st.integers(1, 4), sy=st.integers(1, 4), sx=st.integers(1, 4),
    ph=st.integers(0, 3), pw=st.integers(0, 3), cover_all=st.booleans(),
    dtype=st.sampled_from(["float32", "float64"]), kind=st.sampled_from(["normal", "ties", "special"]),
    threads=st.sampled_from([1, 2]), seed=st.integers(0, 2**31 - 1),
)
def test_max_pool_2d_equals_reference(nB, C, H, W, kh, kw, sy, sx, ph, pw, cover_all, dtype, kind, threads, seed):
    rng = numpy.random.default_rng(seed)
    X = _values(rng, (nB, C, H, W), dtype, kind)
    args = ((kh, kw), (sy, sx), (ph, pw), cover_all)
    try:
        Yr, wr = R.max_pool_nd(X, *args)
    except ValueError:
        with pytest.raises(ValueError):
            P.max_pool_nd(X, *args)
        return
    X0 = X.copy()
    with n_threads(threads):
        Y, which = P.max_pool_nd(X, *args)
    assert Y.dtype == Yr.dtype and which.dtype == wr.dtype == numpy.int32
    assert Y.tobytes() == Yr.tobytes() and which.tobytes() == wr.tobytes()
    assert X.tobytes() == X0.tobytes()

    dY = _values(rng, Y.shape, dtype, "normal")
    with n_threads(threads):
        dX = P.backprop_max_pool_nd(dY, which, X.shape, *args)
    dXr = R.backprop_max_pool_nd(dY, wr, X.shape, *args)
    assert dX.dtype == dXr.dtype and dX.shape == dXr.shape
    if sy >= kh and sx >= kw:
        assert dX.tobytes() == dXr.tobytes()
    else:
        tol = 1e-5 if dtype == "float32" else 1e-12
        numpy.testing.assert_allclose(dX, dXr, rtol=tol, atol=tol)


@settings(max_examples=80, deadline=None)
@given(
    nB=st.integers(1, 2), C=st.integers(1, 3), H=st.integers(1, 12), W=st.integers(8, 40),
    kh=st.integers(1, 3), kw=st.integers(1, 3), sy=st.integers(1, 3), sx=st.integers(1, 2),
    ph=st.integers(0, 2), pw=st.integers(0, 2), cover_all=st.booleans(),
    kind=st.sampled_from(["normal", "ties", "special"]), threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**31 - 1),
)
def test_max_pool_2d_on_wide_rows_equals_reference(nB, C, H, W, kh, kw, sy, sx, ph, pw, cover_all, kind,
                                                   threads, seed):
    # Rows wide enough for float32's 8- and 4-lane windows (strides 1 and 2), and their edges.
    rng = numpy.random.default_rng(seed)
    X = _values(rng, (nB, C, H, W), "float32", kind)
    args = ((kh, kw), (sy, sx), (ph, pw), cover_all)
    try:
        Yr, wr = R.max_pool_nd(X, *args)
    except ValueError:
        return
    with n_threads(threads):
        Y, which = P.max_pool_nd(X, *args)
    assert Y.tobytes() == Yr.tobytes() and which.tobytes() == wr.tobytes()


@pytest.mark.parametrize("kh", [1, 2, 3])
@pytest.mark.parametrize("shape", [(3, 4, 24, 24), (2, 5, 8, 8), (1, 2, 6, 26), (2, 1, 4, 2)])
def test_max_pool_backprop_of_tiling_windows_equals_reference(shape, kh):
    # (kh, 2) windows with strides (kh, 2) tiling the image: each pixel is written once.
    rng = numpy.random.default_rng(kh)
    nB, C, H, W = shape
    X = _values(rng, (nB, C, (H // kh) * kh, W), "float32", "ties")
    args = ((kh, 2), (kh, 2), 0, False)
    Y, which = P.max_pool_nd(X, *args)
    Yr, wr = R.max_pool_nd(X, *args)
    assert Y.tobytes() == Yr.tobytes() and which.tobytes() == wr.tobytes()
    dY = _values(rng, Y.shape, "float32", "ties")  # -0.0 among them: 0 + -0.0 is +0.0
    for threads in (1, 2):
        with n_threads(threads):
            dX = P.backprop_max_pool_nd(dY, which, X.shape, *args)
        assert dX.tobytes() == R.backprop_max_pool_nd(dY, wr, X.shape, *args).tobytes()
    # A winner outside its window (first or last output): both refuse it (issue 17: it used to
    # drop that gradient silently).
    for flat, value in ((0, 2 * kh), (which.size - 1, -1)):
        bad = which.copy()
        bad.reshape(-1)[flat] = value
        for ops in (R, P):
            with pytest.raises(ValueError, match="which"):
                ops.backprop_max_pool_nd(dY, bad, X.shape, *args)


def test_read_only_inputs_are_read_in_place():
    rng = numpy.random.default_rng(7)
    X = rng.standard_normal((2, 3, 6, 5)).astype("float32")
    X.flags.writeable = False
    Y, which = P.max_pool_nd(X, 2)
    Yr, wr = R.max_pool_nd(X, 2)
    assert Y.tobytes() == Yr.tobytes() and which.tobytes() == wr.tobytes()
    dY = rng.standard_normal(Y.shape).astype("float32")
    dY.flags.writeable = False
    which.flags.writeable = False
    assert P.backprop_max_pool_nd(dY, which, X.shape, 2).tobytes() == R.backprop_max_pool_nd(dY, wr, X.shape, 2).tobytes()
    W = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    W.flags.writeable = False
    Yc = P.conv_nd(X, W)
    numpy.testing.assert_allclose(Yc, R.conv_nd(X, W), rtol=1e-5, atol=1e-5)
    dYc = rng.standard_normal(Yc.shape).astype("float32")
    dYc.flags.writeable = False
    for got, want in zip(P.backprop_conv_nd(dYc, X, W), R.backprop_conv_nd(dYc, X, W)):
        numpy.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_window_wholly_in_the_padding_gives_minus_inf_and_no_gradient():
    X = numpy.arange(4, dtype="float32").reshape(1, 1, 2, 2)
    # cover_all with stride 3 leaves the last windows over padding only.
    args = (2, 3, 1, True)
    Y, which = P.max_pool_nd(X, *args)
    Yr, wr = R.max_pool_nd(X, *args)
    numpy.testing.assert_array_equal(Y, Yr)
    numpy.testing.assert_array_equal(which, wr)
    dX = P.backprop_max_pool_nd(numpy.ones_like(Y), which, X.shape, *args)
    numpy.testing.assert_array_equal(dX, R.backprop_max_pool_nd(numpy.ones_like(Yr), wr, X.shape, *args))


def test_bad_calls_raise_the_reference_errors():
    X = numpy.ones((1, 1, 4, 4), "float32")
    for call in (
        lambda ops: ops.max_pool_nd(X, 0),
        lambda ops: ops.max_pool_nd(X, 2, 2, -1),
        lambda ops: ops.max_pool_nd(X, 9, 1, 0, False),
        lambda ops: ops.backprop_max_pool_nd(numpy.ones((1, 1, 2, 2), "f"), numpy.zeros((1, 1, 2, 2), "int32"), (1, 2, 4, 4), 2),
    ):
        with pytest.raises(ValueError) as want:
            call(R)
        with pytest.raises(ValueError) as got:
            call(P)
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize("shape", [(0, 3, 4, 4), (2, 0, 4, 4), (0, 0, 6)])
def test_an_empty_batch_pools_to_an_empty_batch(shape):
    X = numpy.ones(shape, "float32")
    for ops in (P, R):
        Y, which = ops.max_pool_nd(X, 2)
        assert Y.shape == which.shape == shape[:2] + tuple(s // 2 for s in shape[2:])
        assert ops.avg_pool_nd(X, 2).shape == Y.shape


@settings(max_examples=120, deadline=None)
@given(
    nB=st.integers(0, 3), C=st.integers(0, 3), H=st.integers(1, 9), W=st.integers(1, 9),
    kh=st.integers(1, 4), kw=st.integers(1, 4), sy=st.integers(1, 3), sx=st.integers(1, 3),
    ph=st.integers(0, 3), pw=st.integers(0, 3), dy=st.integers(1, 2), dx=st.integers(1, 2),
    extra=st.integers(0, 2), pad_value=st.sampled_from([0.0, -numpy.inf, 1.5]),
    dtype=st.sampled_from(["float32", "float64"]), threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**31 - 1),
)
def test_im2col_and_col2im_equal_the_reference(nB, C, H, W, kh, kw, sy, sx, ph, pw, dy, dx, extra,
                                               pad_value, dtype, threads, seed):
    rng = numpy.random.default_rng(seed)
    oh = conv_outsize(H, kh, sy, ph, False, dy) + extra  # extra: windows past the padded image
    ow = conv_outsize(W, kw, sx, pw, False, dx) + extra
    assume(oh >= 1 and ow >= 1)
    X = _values(rng, (nB, C, H, W), dtype, "ties")
    k, s, p, d = (kh, kw), (sy, sx), (ph, pw), (dy, dx)
    want = im2col_nd_out(numpy, X, k, s, p, d, (oh, ow), pad_value=pad_value)
    with n_threads(threads):
        got = P._im2col(X, k, s, p, d, (oh, ow), pad_value)
    assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous
    assert got.tobytes() == want.tobytes()
    want_cf = R._im2col_channels_first(X, k, s, p, d, (oh, ow))
    with n_threads(threads):
        got_cf = P._im2col_channels_first(X, k, s, p, d, (oh, ow))
    assert got_cf.shape == want_cf.shape == (C, kh, kw, nB, oh, ow) and got_cf.flags.c_contiguous
    assert got_cf.tobytes() == want_cf.tobytes()
    col = _values(rng, want.shape, dtype, "ties")
    want = col2im_nd(numpy, col, (H, W), s, p, d)
    with n_threads(threads):
        got = P._col2im(col, (H, W), s, p, d)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def _isa_levels():
    """The instruction-set levels conv_gemm can run here (1 baseline, 3 AVX2, 4 AVX-512)."""
    top = conv_gemm._set_isa(0)
    return sorted({conv_gemm._set_isa(level) for level in (1, 3, 4) if level <= top} | {top})


@contextlib.contextmanager
def isa(level):
    conv_gemm._set_isa(level)
    try:
        yield
    finally:
        conv_gemm._set_isa(0)


def _assert_reordered_sum(got, want, bound, n_terms, dtype):
    """got equals want up to the rounding of a sum of n_terms terms taken in another order:
    |got - want| <= 4 * n_terms * eps * (sum of the terms' absolute values)."""
    eps = numpy.finfo(dtype).eps
    assert got.dtype == numpy.dtype(dtype) and got.shape == want.shape
    err = numpy.abs(got.astype("float64") - want)
    tol = 4 * (n_terms + 2) * eps * bound + numpy.finfo(dtype).tiny
    worst = numpy.unravel_index(numpy.argmax(err - tol), err.shape) if err.size else ()
    assert numpy.all(err <= tol), f"off by {err[worst]} at {worst}, allowed {tol[worst]}"


def _check_conv(X, W, b, dY, Wd, kw, cover_all, dtype):
    """NumpyOps' conv_nd, backprop_conv_nd, deconv_nd and backprop_deconv_nd against the
    reference computed in float64, each entry within the rounding bound of its sum."""
    X64, W64, dY64, Wd64 = (a.astype("float64") for a in (X, W, dY, Wd))
    b64 = b.astype("float64")
    aX, aW, adY, aWd = (numpy.abs(a) for a in (X64, W64, dY64, Wd64))
    G = kw.get("groups", 1)
    K = W.shape[1] * W.shape[2] * W.shape[3]
    Y = P.conv_nd(X, W, b, cover_all=cover_all, **kw)
    _assert_reordered_sum(Y, R.conv_nd(X64, W64, b64, cover_all=cover_all, **kw),
                          R.conv_nd(aX, aW, numpy.abs(b64), cover_all=cover_all, **kw), K, dtype)
    dX, dW, db = P.backprop_conv_nd(dY, X, W, cover_all=cover_all, **kw)
    dXr, dWr, dbr = R.backprop_conv_nd(dY64, X64, W64, cover_all=cover_all, **kw)
    bX, _, _ = R.backprop_conv_nd(adY, X64, aW, cover_all=cover_all, **kw)
    _, bW, _ = R.backprop_conv_nd(adY, aX, W64, cover_all=cover_all, **kw)
    O = W.shape[0]
    _assert_reordered_sum(dX, dXr, bX, (O // G) * W.shape[2] * W.shape[3], dtype)
    _assert_reordered_sum(dW, dWr, bW, X.shape[0] * int(numpy.prod(dY.shape[2:])), dtype)
    L = dY.shape[0] * int(numpy.prod(dY.shape[2:]))
    _assert_reordered_sum(db, dbr, adY.sum(axis=(0, 2, 3)), L, dtype)
    # A deferred input gradient is deconv_nd's: the very same bits as the eager one.
    assert P.deconv_nd(dY, W, None, outsize=X.shape[2:], **kw).tobytes() == dX.tobytes()
    # deconv_nd of an input of dY's shape with other filters (layout (O, C // groups, *k)),
    # and its backprop with X as the output gradient.
    bd = (b64[:1] * numpy.arange(X.shape[1])).astype(dtype)
    bd64 = bd.astype("float64")
    Z = P.deconv_nd(dY, Wd, bd, outsize=X.shape[2:], **kw)
    _assert_reordered_sum(Z, R.deconv_nd(dY64, Wd64, bd64, outsize=X.shape[2:], **kw),
                          R.deconv_nd(adY, aWd, numpy.abs(bd64), outsize=X.shape[2:], **kw),
                          (O // G) * W.shape[2] * W.shape[3], dtype)
    gX, gW, gb = P.backprop_deconv_nd(X, dY, Wd, **kw)
    gXr, gWr, gbr = R.backprop_deconv_nd(X64, dY64, Wd64, **kw)
    _assert_reordered_sum(gb, gbr, aX.sum(axis=(0, 2, 3)), X.shape[0] * int(numpy.prod(X.shape[2:])), dtype)
    _assert_reordered_sum(gX, gXr, R.backprop_deconv_nd(aX, dY64, aWd, **kw)[0],
                          Wd.shape[1] * W.shape[2] * W.shape[3], dtype)
    _assert_reordered_sum(gW, gWr, R.backprop_deconv_nd(aX, adY, Wd64, **kw)[1],
                          X.shape[0] * int(numpy.prod(dY.shape[2:])), dtype)
    return Y, dX, dW, db, Z, gX, gW, gb


@settings(max_examples=60, deadline=None)
@given(
    nB=st.integers(1, 3), Cg=st.integers(1, 4), Og=st.integers(1, 4), G=st.integers(1, 2),
    H=st.integers(3, 8), extra_w=st.integers(0, 9), kh=st.integers(1, 3), kw_=st.integers(1, 3),
    s=st.tuples(st.integers(1, 2), st.integers(1, 3)), p=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    d=st.tuples(st.integers(1, 2), st.integers(1, 2)), cover_all=st.booleans(),
    dtype=st.sampled_from(["float32", "float64"]), seed=st.integers(0, 2**31 - 1),
)
def test_conv_and_deconv_equal_the_reference_to_rounding(nB, Cg, Og, G, H, extra_w, kh, kw_, s, p, d,
                                                          cover_all, dtype, seed):
    rng = numpy.random.default_rng(seed)
    X = _values(rng, (nB, Cg * G, H, H + extra_w), dtype, "normal")
    W = _values(rng, (Og * G, Cg, kh, kw_), dtype, "normal")
    b = _values(rng, (Og * G,), dtype, "normal")
    kw = dict(stride=s, pad=p, dilation=d, groups=G)
    try:
        Yr = R.conv_nd(X, W, b, cover_all=cover_all, **kw)
    except ValueError:
        return
    dY = _values(rng, Yr.shape, dtype, "normal")
    Wd = _values(rng, (Og * G, Cg, kh, kw_), dtype, "normal")
    results = {}
    for level in _isa_levels():
        with isa(level):
            for threads in (1, 2):
                with n_threads(threads):
                    got = _check_conv(X, W, b, dY, Wd, kw, cover_all, dtype)
                key = tuple(a.tobytes() for a in got)
                results.setdefault(level, key)
                assert key == results[level], f"the result depends on the thread count (level {level})"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "xs,ws,kw",
    [
        ((7, 1, 28, 28), (20, 1, 5, 5), {}),  # LeNet's first layer: 576 positions, K = 25
        ((5, 20, 12, 12), (50, 20, 5, 5), {}),  # its second: 64 positions, K = 500
        ((3, 6, 13, 11), (10, 3, 3, 3), dict(stride=(2, 1), pad=(1, 2), groups=2)),
        ((2, 3, 30, 7), (17, 3, 4, 2), dict(pad=3, dilation=(2, 3))),
        ((40, 2, 5, 5), (3, 2, 5, 5), dict(pad=0)),  # 1 position: the filter gradient's groups of images
    ],
)
def test_conv_products_on_network_sized_layers(xs, ws, kw, dtype):
    rng = numpy.random.default_rng(11)
    X = rng.standard_normal(xs).astype(dtype)
    W = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    dY = rng.standard_normal(R.conv_nd(X, W, **kw).shape).astype(dtype)
    for level in _isa_levels():
        with isa(level):
            _check_conv(X, W, b, dY, rng.standard_normal(ws).astype(dtype), kw, False, dtype)


def test_conv_products_take_the_fast_case_and_decline_the_rest():
    X = numpy.ones((2, 4, 6, 6), "float32")
    W = numpy.ones((6, 2, 3, 3), "float32")
    args = ((1, 1), (0, 0), (1, 1), 2)
    if conv_gemm._set_isa(0) < 3:
        # Below AVX2 (the baseline build, or an older CPU), products are left to numpy's BLAS.
        assert conv_gemm.forward(X, W, None, *args, (4, 4)) is None
    with isa(_isa_levels()[-1]):
        _fast_case_and_declines(X, W, args)


def _fast_case_and_declines(X, W, args):
    Y = conv_gemm.forward(X, W, None, *args, (4, 4))
    assert Y is not None and Y.shape == (2, 6, 4, 4) and numpy.all(Y == 18)
    assert conv_gemm.backward_data(Y, W, (6, 6), *args).shape == X.shape
    assert conv_gemm.backward_filter(Y, X, (3, 3), *args).shape == W.shape
    # Views are read as copies; other dtypes, mixed dtypes and ranks are declined.
    assert conv_gemm.forward(X[:, :, ::-1], W, None, *args, (4, 4)) is not None
    assert conv_gemm.forward(X.astype("int32"), W.astype("int32"), None, *args, (4, 4)) is None
    assert conv_gemm.forward(X, W.astype("float64"), None, *args, (4, 4)) is None
    assert conv_gemm.forward(X, W, numpy.ones(6, "float64"), *args, (4, 4)) is None
    assert conv_gemm.forward(X[0], W, None, *args, (4, 4)) is None
    assert conv_gemm.forward(X, W[:5], None, *args, (4, 4)) is None  # 5 filters in 2 groups
    # A bias of another dtype takes the reference, which adds it in the result type.
    Yb = P.conv_nd(X, W, numpy.ones(6, "float64"), groups=2)
    assert Yb.dtype == numpy.float32 and numpy.all(Yb == 19)


@pytest.mark.parametrize("shape", [(0, 2, 6, 6), (2, 2, 3, 3)])
def test_conv_products_on_empty_batches_and_single_positions(shape):
    rng = numpy.random.default_rng(5)
    X = rng.standard_normal(shape).astype("float32")
    W = rng.standard_normal((3, 2, 3, 3)).astype("float32")
    Y = P.conv_nd(X, W)
    Yr = R.conv_nd(X, W)
    assert Y.shape == Yr.shape
    numpy.testing.assert_allclose(Y, Yr, rtol=1e-5, atol=1e-5)
    dY = rng.standard_normal(Y.shape).astype("float32")
    for got, want in zip(P.backprop_conv_nd(dY, X, W), R.backprop_conv_nd(dY, X, W)):
        assert got.shape == want.shape
        numpy.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_avg_pool_and_unpool_backprops_take_the_reference_on_broadcast_columns():
    # Their columns are broadcast views (not C-contiguous): the kernel declines, the result stands.
    rng = numpy.random.default_rng(3)
    X = rng.standard_normal((2, 3, 6, 6)).astype("float32")
    Y = P.avg_pool_nd(X, 2)
    dY = rng.standard_normal(Y.shape).astype("float32")
    assert P.backprop_avg_pool_nd(dY, X.shape, 2).tobytes() == R.backprop_avg_pool_nd(dY, X.shape, 2).tobytes()
    assert P.unpool_nd(X, 2).tobytes() == R.unpool_nd(X, 2).tobytes()


@pytest.mark.parametrize("ops", [P, R], ids=["NumpyOps", "Ops"])
def test_image_blocks_change_no_result(monkeypatch, ops):
    from plait.backends import _conv_ops

    rng = numpy.random.default_rng(8)
    X = rng.standard_normal((5, 3, 7, 6)).astype("float32")
    W = rng.standard_normal((4, 3, 3, 2)).astype("float32")
    kw = dict(stride=(2, 1), pad=1)
    whole = ops.conv_nd(X, W, **kw)
    dY = rng.standard_normal(whole.shape).astype("float32")
    grads = ops.backprop_conv_nd(dY, X, W, **kw)
    de = ops.deconv_nd(dY, W, outsize=X.shape[2:], **kw)
    monkeypatch.setattr(_conv_ops, "_COL_BLOCK_BYTES", 1)  # one image per block
    assert ops.conv_nd(X, W, **kw).tobytes() == whole.tobytes()
    assert ops.backprop_conv_nd(dY, X, W, **kw)[0].tobytes() == grads[0].tobytes()
    assert ops.deconv_nd(dY, W, outsize=X.shape[2:], **kw).tobytes() == de.tobytes()
