"""NumpyOps' compiled 2-D convolution and pooling kernels against the Ops reference.

im2col and col2im must equal the reference's bit for bit (strides, padding, dilation, pad
values, -0.0), and so must conv_nd / deconv_nd and their backprops, which are built on them.
Max pooling's Y and winners must equal the reference's exactly (NaN, -inf, ties, padding and
cover_all included); its backprop exactly where windows do not overlap, and to rounding where
they do (the sums are added in another order). All with one OpenMP thread and with two.
"""
import contextlib

import numpy
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from plait.backends import NumpyOps, Ops
from plait.backends._conv import col2im_nd, conv_outsize, im2col_nd_out

kernels = pytest.importorskip("plait.backends._kernels_cpu.conv", reason="compiled kernels not built")
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
    Yc = P.conv_nd(X, W)
    assert Yc.tobytes() == R.conv_nd(X, W).tobytes()
    dYc = rng.standard_normal(Yc.shape).astype("float32")
    dYc.flags.writeable = False
    for got, want in zip(P.backprop_conv_nd(dYc, X, W), R.backprop_conv_nd(dYc, X, W)):
        assert got.tobytes() == want.tobytes()


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


@settings(max_examples=60, deadline=None)
@given(
    nB=st.integers(1, 3), C=st.integers(1, 4), O=st.integers(1, 4), H=st.integers(3, 8),
    k=st.integers(1, 3), s=st.integers(1, 2), p=st.integers(0, 2), d=st.integers(1, 2),
    cover_all=st.booleans(), dtype=st.sampled_from(["float32", "float64"]), seed=st.integers(0, 2**31 - 1),
)
def test_conv_and_deconv_equal_the_reference(nB, C, O, H, k, s, p, d, cover_all, dtype, seed):
    rng = numpy.random.default_rng(seed)
    X = _values(rng, (nB, C, H, H + 1), dtype, "normal")
    W = _values(rng, (O, C, k, k), dtype, "normal")
    b = _values(rng, (O,), dtype, "normal")
    kw = dict(stride=s, pad=p, dilation=d)
    try:
        Yr = R.conv_nd(X, W, b, cover_all=cover_all, **kw)
    except ValueError:
        return
    assert P.conv_nd(X, W, b, cover_all=cover_all, **kw).tobytes() == Yr.tobytes()
    dY = _values(rng, Yr.shape, dtype, "normal")
    for got, want in zip(P.backprop_conv_nd(dY, X, W, cover_all=cover_all, **kw),
                         R.backprop_conv_nd(dY, X, W, cover_all=cover_all, **kw)):
        assert got.tobytes() == want.tobytes()
    Wd = _values(rng, (O, C, k, k), dtype, "normal")
    Zr = R.deconv_nd(dY, Wd, None, outsize=X.shape[2:], **kw)
    assert P.deconv_nd(dY, Wd, None, outsize=X.shape[2:], **kw).tobytes() == Zr.tobytes()


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
