"""plait.neon: LRN across feature maps and ROI pooling against direct loops (float64 oracle;
float32 rtol 1e-5 / atol 1e-6), LRN's backward pass against central differences."""
import numpy as np
import pytest

from plait.neon import NervanaCPU


@pytest.fixture
def be():
    b = NervanaCPU(rng_seed=0)
    b.bsz = 3
    return b


def _lrn_ref(x, J, ascale, bpower):
    C = x.shape[0]
    den = np.empty_like(x)
    for c in range(C):
        lo, hi = max(c - J // 2, 0), min(c + J // 2 + 1, C)
        den[c] = 1 + ascale / J * (x[lo:hi] ** 2).sum(axis=0)
    return x * den ** -bpower, den


@pytest.mark.parametrize("J", [1, 3, 5])
def test_lrn_forward_and_backward(be, J):
    C, H, W, N = 6, 2, 3, 3
    ascale, bpower = 0.3, 0.75
    layer = be.lrn_layer(np.float32, N, C, H=H, W=W, J=J)
    x = np.random.RandomState(1).randn(C, H, W, N)
    I = be.array(x.reshape(C * H * W, N))
    O, denom, E, delta = (be.empty((C * H * W, N)) for _ in range(4))
    be.fprop_lrn(layer, I, O, denom, ascale=ascale, bpower=bpower)
    xh = I.get().astype(np.float64).reshape(C, H, W, N)
    ref_o, ref_den = _lrn_ref(xh, J, ascale, bpower)
    np.testing.assert_allclose(O.get().reshape(C, H, W, N), ref_o, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(denom.get().reshape(C, H, W, N), ref_den, rtol=1e-5, atol=1e-6)

    e = np.random.RandomState(2).randn(C, H, W, N)
    E.set(e.reshape(C * H * W, N))
    be.bprop_lrn(layer, I, O, E, delta, denom, ascale=ascale, bpower=bpower)
    eh = E.get().astype(np.float64).reshape(C, H, W, N)
    num = np.zeros_like(xh)
    eps = 1e-6
    for idx in np.ndindex(*xh.shape):
        xp, xm = xh.copy(), xh.copy()
        xp[idx] += eps
        xm[idx] -= eps
        num[idx] = ((_lrn_ref(xp, J, ascale, bpower)[0] - _lrn_ref(xm, J, ascale, bpower)[0]) * eh).sum() / (2 * eps)
    np.testing.assert_allclose(delta.get().reshape(C, H, W, N), num, rtol=1e-4, atol=1e-5)


def test_lrn_errors(be):
    with pytest.raises(ValueError, match="odd"):
        be.lrn_layer(np.float32, 2, 4, J=2)
    layer = be.lrn_layer(np.float32, 2, 4, J=3)
    with pytest.raises(ValueError, match="fprop_lrn: I has 6 elements"):
        be.fprop_lrn(layer, be.ones((3, 2)), be.ones((4, 2)), be.ones((4, 2)))


def _roi_ref(fm, rois, ph, pw, scale):
    C, H, W, _ = fm.shape
    R = len(rois)
    out = np.zeros((C, ph, pw, R))
    am = -np.ones((C, ph, pw, R), dtype=np.int64)
    for r, (b, x1, y1, x2, y2) in enumerate(rois):
        x1, y1, x2, y2 = (int(round(v * scale)) for v in (x1, y1, x2, y2))
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        for i in range(ph):
            hs = min(max(int(np.floor(i * rh / ph)) + y1, 0), H)
            he = min(max(int(np.ceil((i + 1) * rh / ph)) + y1, 0), H)
            for j in range(pw):
                ws = min(max(int(np.floor(j * rw / pw)) + x1, 0), W)
                we = min(max(int(np.ceil((j + 1) * rw / pw)) + x1, 0), W)
                if he <= hs or we <= ws:
                    continue
                for c in range(C):
                    best, pos = -np.inf, -1
                    for h in range(hs, he):
                        for w in range(ws, we):
                            if fm[c, h, w, int(b)] > best:
                                best, pos = fm[c, h, w, int(b)], h * W + w
                    out[c, i, j, r], am[c, i, j, r] = best, pos
    return out, am


def test_roi_pooling_forward_and_backward(be):
    C, H, W, N = 2, 6, 7, 3
    ph, pw, scale = 2, 3, 0.5
    fm = np.random.RandomState(3).randn(C, H, W, N)
    rois = np.array([[0, 0, 0, 8, 6], [2, 2, 4, 13, 11], [1, 6, 6, 7, 7], [0, 20, 20, 30, 30]], float)
    R = len(rois)
    I = be.array(fm.reshape(C * H * W, N))
    O, argmax = be.empty((C * ph * pw, R)), be.empty((C * ph * pw, R), dtype=np.int32)
    be.roipooling_fprop(I, be.array(rois), O, argmax, R, C, H, W, ph, pw, scale)
    ref_out, ref_am = _roi_ref(I.get().astype(np.float64).reshape(C, H, W, N), rois, ph, pw, scale)
    np.testing.assert_allclose(O.get().reshape(C, ph, pw, R), ref_out, rtol=1e-6)
    np.testing.assert_array_equal(argmax.get().reshape(C, ph, pw, R), ref_am)
    assert (ref_am[..., 3] == -1).all()  # a region outside the map pools nothing

    err = np.random.RandomState(4).randn(C, ph, pw, R)
    E, delta = be.array(err.reshape(C * ph * pw, R)), be.empty((C * H * W, N))
    be.roipooling_bprop(E, be.array(rois), delta, argmax, R, C, H, W, ph, pw, scale)
    ref = np.zeros((C, H * W, N))
    eh = E.get().astype(np.float64).reshape(C, ph, pw, R)
    for c, i, j, r in np.ndindex(C, ph, pw, R):
        if ref_am[c, i, j, r] >= 0:
            ref[c, ref_am[c, i, j, r], int(rois[r, 0])] += eh[c, i, j, r]
    np.testing.assert_allclose(delta.get().reshape(C, H * W, N), ref, rtol=1e-6, atol=1e-7)


def test_roi_pooling_shape_errors(be):
    with pytest.raises(ValueError, match="rois must be"):
        be.roipooling_fprop(be.ones((2 * 4 * 4, 3)), be.ones((2, 4)), be.empty((2 * 4, 2)),
                            be.empty((2 * 4, 2)), 2, 2, 4, 4, 2, 2, 1.0)
    with pytest.raises(ValueError, match="feature map"):
        be.roipooling_fprop(be.ones((5, 3)), be.ones((2, 5)), be.empty((8, 2)), be.empty((8, 2)),
                            2, 2, 4, 4, 2, 2, 1.0)
