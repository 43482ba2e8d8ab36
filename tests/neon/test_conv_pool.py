"""The Neon face's convolution, deconvolution and pooling (plait.neon._layers) against direct
numpy loops in float64, in neon's batch-last layouts: I (C, D, H, W, N), F (C, T, R, S, K),
O (K, M, P, Q, N), each flattened to 2-D (rows, N).

Tolerances: float64 results within 1e-10 (relative to the largest magnitude) of the oracle;
float32 within 2e-5 relative, float16 tensors (computed in float32, stored in float16) within
2e-3 relative.
"""
import itertools

import numpy as np
import pytest

from plait.neon import _layers as L

RTOL = {np.float64: 1e-10, np.float32: 2e-5, np.float16: 2e-3}


class Lib:
    """The two backend methods the layer objects read (neon's Backend.output_dim, caffe flag)."""

    def __init__(self, caffe=False):
        self.caffe = caffe

    def check_caffe_compat(self):
        return self.caffe

    def output_dim(self, X, S, padding, strides, pooling=False, dilation=1):
        return L.output_dim(X, S, padding, strides, pooling, dilation, caffe=self.caffe)


LIB = Lib()


def close(got, want, dtype):
    got = np.asarray(got, dtype=np.float64)
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    err = float(np.abs(got - want).max()) / scale if want.size else 0.0
    assert err <= RTOL[dtype], f"max relative error {err:.3g} > {RTOL[dtype]:.1g}"


# ------------------------------------------------------------------------------ the oracle


def taps(layer):
    """(m, p, q, t, r, s, z, y, x): every output position, filter tap and input cell it reads."""
    (D, H, W), (T, R, S), (M, P, Q) = layer.DHW, layer.TRS, layer.MPQ
    (pd, ph, pw), (sd, sh, sw), (dd, dh, dw) = layer.padding, layer.strides, layer.dilation
    for m, p, q in itertools.product(range(M), range(P), range(Q)):
        for t, r, s in itertools.product(range(T), range(R), range(S)):
            z, y, x = m * sd - pd + t * dd, p * sh - ph + r * dh, q * sw - pw + s * dw
            if 0 <= z < D and 0 <= y < H and 0 <= x < W:
                yield m, p, q, t, r, s, z, y, x


def conv_ref(layer, I, F):
    I, F = I.reshape(layer.dimI), F.reshape(layer.dimF)
    O = np.zeros(layer.dimO)
    for m, p, q, t, r, s, z, y, x in taps(layer):
        O[:, m, p, q, :] += F[:, t, r, s, :].T @ I[:, z, y, x, :]
    return O.reshape(layer.dimO2)


def bprop_ref(layer, F, E):
    F, E = F.reshape(layer.dimF), E.reshape(layer.dimO)
    G = np.zeros(layer.dimI)
    for m, p, q, t, r, s, z, y, x in taps(layer):
        G[:, z, y, x, :] += F[:, t, r, s, :] @ E[:, m, p, q, :]
    return G.reshape(layer.dimI2)


def update_ref(layer, I, E):
    I, E = I.reshape(layer.dimI), E.reshape(layer.dimO)
    U = np.zeros(layer.dimF)
    for m, p, q, t, r, s, z, y, x in taps(layer):
        U[:, t, r, s, :] += I[:, z, y, x, :] @ E[:, m, p, q, :].T
    return U.reshape(layer.dimF2)


def windows(layer):
    """((k, m, p, q), slices of I's first four axes): every pooling window clipped to the image."""
    sizes = (layer.C,) + layer.DHW
    outs = (layer.K,) + layer.MPQ
    for pos in itertools.product(*[range(o) for o in outs]):
        sl = []
        for a in range(4):
            start = pos[a] * layer.strides[a] - layer.padding[a]
            sl.append(slice(max(start, 0), min(start + layer.JTRS[a], sizes[a])))
        yield pos, tuple(sl)


def pool_ref(layer, I):
    I = I.reshape(layer.dimI)
    N = I.shape[-1]
    O = np.zeros(layer.dimO)
    A = np.zeros(layer.dimO, dtype=np.int64)
    for pos, sl in windows(layer):
        v = I[sl].reshape(-1, N)
        if layer.op == "max":
            O[pos] = v.max(axis=0)
            A[pos] = v.argmax(axis=0)
        elif layer.op == "avg":
            O[pos] = v.mean(axis=0)
        else:
            O[pos] = np.sqrt((v * v).sum(axis=0))
    return O.reshape(layer.dimO2), A.reshape(layer.dimO2)


def pool_bprop_ref(layer, I, E):
    I, E = I.reshape(layer.dimI), E.reshape(layer.dimO)
    N = I.shape[-1]
    G = np.zeros(layer.dimI)
    Y, _ = pool_ref(layer, I)
    Y = Y.reshape(layer.dimO)
    for pos, sl in windows(layer):
        v = I[sl].reshape(-1, N)
        g = np.zeros_like(v)
        if layer.op == "max":
            g[v.argmax(axis=0), np.arange(N)] = E[pos]
        elif layer.op == "avg":
            g[:] = E[pos] / v.shape[0]
        else:
            g[:] = v * np.where(Y[pos] > 0, E[pos] / np.where(Y[pos] > 0, Y[pos], 1), 0)
        G[sl] += g.reshape(G[sl].shape)
    return G.reshape(layer.dimI2)


# ------------------------------------------------------------------------------ convolution

CONV_CASES = {
    # name: conv_layer keywords (N, C, K and the geometry)
    "1d": dict(N=3, C=4, K=5, W=11, S=3, pad_w=1, str_w=2),
    "1d-dilated": dict(N=2, C=3, K=4, W=12, S=3, dil_w=2, pad_w=2),
    "2d": dict(N=4, C=3, K=6, H=7, W=8, R=3, S=3, pad_h=1, pad_w=1),
    "2d-stride-dilation": dict(N=3, C=5, K=4, H=9, W=10, R=3, S=2, pad_h=2, pad_w=0, str_h=2,
                               str_w=3, dil_h=2, dil_w=1),
    "2d-big-pad": dict(N=2, C=2, K=3, H=4, W=5, R=3, S=3, pad_h=3, pad_w=2),
    "3d": dict(N=2, C=3, K=4, D=5, H=6, W=5, T=3, R=2, S=3, pad_d=1, pad_h=1, pad_w=1),
    "3d-stride-dilation": dict(N=3, C=2, K=3, D=7, H=6, W=6, T=2, R=3, S=2, pad_d=1, pad_h=0,
                               pad_w=1, str_d=2, str_h=1, str_w=2, dil_d=2, dil_h=2),
    "3d-depth-pad-only": dict(N=2, C=3, K=2, D=1, H=5, W=5, T=1, R=3, S=3, pad_d=1, pad_h=1, pad_w=1),
    "1x1": dict(N=5, C=6, K=7, H=4, W=3),
    # batch-last filter-gradient variants: whole-vector batches (dot products of runs in place),
    # few output maps (the transposed product), many maps (window copies)
    "2d-batch16": dict(N=16, C=8, K=12, H=6, W=7, R=3, S=3, pad_h=1, pad_w=2, dil_w=2),
    "2d-batch16-row-stride": dict(N=16, C=5, K=7, H=9, W=6, R=3, S=2, str_h=2, pad_h=1, pad_w=1),
    "2d-few-maps": dict(N=3, C=9, K=5, H=6, W=6, R=3, S=3, pad_h=1, str_h=2),
    "2d-many-maps": dict(N=2, C=3, K=70, H=5, W=5, R=2, S=2),
    "2d-large-output": dict(N=2, C=8, K=70, H=56, W=56, R=3, S=3, pad_h=1, pad_w=1),
    "1x1-3d": dict(N=2, C=3, K=4, D=2, H=3, W=3),
}


def make(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_fprop_bprop_update(case, dtype):
    rng = np.random.default_rng(len(case))
    layer = L.conv_layer(LIB, dtype, **CONV_CASES[case])
    I, F, E = make(rng, layer.dimI2, dtype), make(rng, layer.dimF2, dtype), make(rng, layer.dimO2, dtype)
    O = np.zeros(layer.dimO2, dtype)
    L.fprop_conv(layer, I, F, O)
    close(O, conv_ref(layer, I.astype(float), F.astype(float)), dtype)
    G = np.zeros(layer.dimI2, dtype)
    L.bprop_conv(layer, F, E, G)
    close(G, bprop_ref(layer, F.astype(float), E.astype(float)), dtype)
    U = np.zeros(layer.dimF2, dtype)
    L.update_conv(layer, I, E, U)
    close(U, update_ref(layer, I.astype(float), E.astype(float)), dtype)


def test_conv_layer_attributes_match_neon():
    layer = L.conv_layer(LIB, np.float32, 8, 3, 16, D=1, H=32, W=30, T=1, R=5, S=3, pad_h=2,
                         pad_w=1, str_h=2, str_w=1, dil_w=2)
    assert layer.MPQ == (1, 16, 28)
    assert layer.dimI == (3, 1, 32, 30, 8) and layer.dimF == (3, 1, 5, 3, 16)
    assert layer.dimO == (16, 1, 16, 28, 8) and layer.dimS == (16, 1)
    assert layer.dimI2 == (3 * 32 * 30, 8) and layer.dimF2 == (45, 16) and layer.dimO2 == (16 * 16 * 28, 8)
    assert layer.nOut == 16 * 16 * 28 and layer.sizeF == 3 * 5 * 3 * 16
    assert layer.NCK == (8, 3, 16) and layer.padding == (0, 2, 1) and layer.strides == (1, 2, 1)
    assert layer.dilation == (1, 1, 2) and not layer.dot
    assert L.conv_layer(LIB, np.float32, 2, 3, 4, H=5, W=5).dot


def test_deconv_layer_is_the_adjoint_convolution():
    rng = np.random.default_rng(7)
    layer = L.deconv_layer(LIB, np.float32, N=3, C=4, K=5, M=1, P=4, Q=5, R=3, S=2, pad_h=1,
                           str_h=2, str_w=2, dil_h=1)
    # neon's sizes: H = (P - 1) * str_h - 2 * pad_h + R, nOut over the deconvolution's output
    assert layer.DHW == (1, 7, 10) and layer.nOut == 7 * 10 * 4
    assert layer.dimI == (4, 1, 7, 10, 3) and layer.dimO == (5, 1, 4, 5, 3)
    X = make(rng, layer.dimO2, np.float64)
    F = make(rng, layer.dimF2, np.float64)
    Y = np.zeros(layer.dimI2)
    L.bprop_conv(layer, F, X, Y)  # neon's Deconvolution.fprop
    close(Y, bprop_ref(layer, F, X), np.float64)
    dY = make(rng, layer.dimI2, np.float64)
    dX = np.zeros(layer.dimO2)
    L.fprop_conv(layer, dY, F, dX)  # its bprop
    close(dX, conv_ref(layer, dY, F), np.float64)
    U = np.zeros(layer.dimF2)
    L.update_conv(layer, dY, X, U)
    close(U, update_ref(layer, dY, X), np.float64)
    # 3-D deconvolution with dilation
    layer3 = L.deconv_layer(LIB, np.float64, 2, 3, 2, 3, 3, 2, T=2, R=2, S=3, str_d=2, dil_w=2, pad_w=1)
    assert layer3.DHW == (6, 4, 4)
    X3, F3 = make(rng, layer3.dimO2, np.float64), make(rng, layer3.dimF2, np.float64)
    Y3 = np.zeros(layer3.dimI2)
    L.bprop_conv(layer3, F3, X3, Y3)
    close(Y3, bprop_ref(layer3, F3, X3), np.float64)


def test_conv_compound_options():
    rng = np.random.default_rng(3)
    dt = np.float64
    layer = L.conv_layer(LIB, dt, N=3, C=3, K=4, H=6, W=6, R=3, S=3, pad_h=1, pad_w=1)
    I, F = make(rng, layer.dimI2, dt), make(rng, layer.dimF2, dt)
    ref = conv_ref(layer, I, F)
    K = layer.K
    per_map = lambda a: a.reshape(K, -1)  # noqa: E731
    bias = make(rng, (K, 1), dt)
    with_bias = (per_map(ref) + bias).reshape(ref.shape)

    O = np.zeros(layer.dimO2)
    bsum = np.zeros((K, 1))
    L.fprop_conv(layer, I, F, O, bias=bias, bsum=bsum)
    close(O, with_bias, dt)
    close(bsum, per_map(with_bias).sum(axis=1, keepdims=True), dt)

    L.fprop_conv(layer, I, F, O, bias=bias, relu=True)
    close(O, np.maximum(with_bias, 0), dt)
    L.fprop_conv(layer, I, F, O, bias=bias, relu=True, slope=0.1)
    close(O, np.maximum(with_bias, 0) + 0.1 * np.minimum(with_bias, 0), dt)

    X = make(rng, layer.dimO2, dt)
    L.fprop_conv(layer, I, F, O, X=X, brelu=True, slope=0.2)
    close(O, ref * ((X > 0) + 0.2 * (X < 0)), dt)

    old = make(rng, layer.dimO2, dt)
    O[:] = old
    L.fprop_conv(layer, I, F, O, alpha=2.0, beta=0.5)
    close(O, 2.0 * ref + 0.5 * old, dt)
    L.fprop_conv(layer, I, F, O, X=X, alpha=0.5, beta=-1.0)
    close(O, 0.5 * ref - X, dt)

    O[:] = old
    L.fprop_conv(layer, I, F, O, beta=1.0, repeat=3)  # the accumulation, three times
    close(O, 3 * ref + old, dt)

    # bprop_conv: the same options over the C input maps
    E = make(rng, layer.dimO2, dt)
    gref = bprop_ref(layer, F, E)
    G = make(rng, layer.dimI2, dt)
    G0 = G.copy()
    gsum = np.zeros((layer.C, 1))
    L.bprop_conv(layer, F, E, G, alpha=0.5, beta=2.0, bsum=gsum)
    close(G, 0.5 * gref + 2.0 * G0, dt)
    close(gsum, G.reshape(layer.C, -1).sum(axis=1, keepdims=True), dt)
    Xi = make(rng, layer.dimI2, dt)
    L.bprop_conv(layer, F, E, G, X=Xi, brelu=True)
    close(G, gref * (Xi > 0), dt)

    # update_conv: alpha, beta, grad_bias
    uref = update_ref(layer, I, E)
    U = make(rng, layer.dimF2, dt)
    U0 = U.copy()
    gb = np.zeros((K, 1))
    L.update_conv(layer, I, E, U, alpha=0.25, beta=1.0, grad_bias=gb)
    close(U, 0.25 * uref + U0, dt)
    close(gb, E.reshape(K, -1).sum(axis=1, keepdims=True), dt)


def test_compound_options_on_the_1x1_product():
    rng = np.random.default_rng(4)
    dt = np.float32
    layer = L.conv_layer(LIB, dt, N=4, C=5, K=3, H=3, W=2)
    assert layer.dot
    I, F = make(rng, layer.dimI2, dt), make(rng, layer.dimF2, dt)
    ref = conv_ref(layer, I.astype(float), F.astype(float))
    O = np.ones(layer.dimO2, dt)
    bias = make(rng, (3, 1), dt)
    L.fprop_conv(layer, I, F, O, alpha=2.0, beta=1.0, bias=bias, relu=True)
    want = np.maximum((2 * ref + 1).reshape(3, -1) + bias, 0).reshape(ref.shape)
    close(O, want, dt)


def test_float16_tensors():
    rng = np.random.default_rng(5)
    layer = L.conv_layer(LIB, np.float16, N=2, C=3, K=4, H=5, W=5, R=3, S=3, pad_h=1, pad_w=1)
    I, F = make(rng, layer.dimI2, np.float16), make(rng, layer.dimF2, np.float16)
    O = np.zeros(layer.dimO2, np.float16)
    L.fprop_conv(layer, I, F, O)
    assert O.dtype == np.float16
    close(O, conv_ref(layer, I.astype(float), F.astype(float)), np.float16)
    pool = L.pool_layer(LIB, np.float16, "avg", 2, 3, H=5, W=5, R=2, S=2)
    P = np.zeros(pool.dimO2, np.float16)
    L.fprop_pool(pool, I, P)
    close(P, pool_ref(pool, I.astype(float))[0], np.float16)


def test_conv_runs_on_the_backend_kernels(monkeypatch, request):
    """One kernel per op across faces: the products are the backend's. float32 2-D layers run
    conv_gemm's batch-last products (the register-blocked kernel NumpyOps' convolutions use);
    others (float64, 3-D) NumpyOps' own products on batch-first copies, 1x1 float64 its gemm."""
    ops = L._ops()
    calls = []
    level = L._conv_gemm._set_isa(0)
    if level < 3:
        # Below AVX2 (PLAIT_ISA=portable, an older CPU) the products are left to numpy's BLAS
        # unless forced; force the build's own level, so the routing is what is tested.
        L._conv_gemm._set_isa(level)
        request.addfinalizer(lambda: L._conv_gemm._set_isa(0))

    def watch(owner, name):
        orig = getattr(owner, name)

        def spy(*a, _orig=orig, _name=name, **k):
            calls.append(_name)
            return _orig(*a, **k)

        monkeypatch.setattr(owner, name, spy)

    for name in ("_conv_forward", "_conv_backward_data", "_conv_backward_filter", "gemm", "_im2col",
                 "_col2im", "backprop_max_pool_nd"):
        watch(ops, name)
    for name in ("forward_bl", "backward_data_bl", "backward_filter_bl"):
        watch(L._conv_gemm, name)
    rng = np.random.default_rng(0)

    def run(layer, dt):
        I, F, E = make(rng, layer.dimI2, dt), make(rng, layer.dimF2, dt), make(rng, layer.dimO2, dt)
        L.fprop_conv(layer, I, F, np.zeros(layer.dimO2, dt))
        L.bprop_conv(layer, F, E, np.zeros(layer.dimI2, dt))
        L.update_conv(layer, I, E, np.zeros(layer.dimF2, dt))
        out = list(calls)
        calls.clear()
        return out

    assert run(L.conv_layer(LIB, np.float32, 2, 3, 4, H=5, W=5, R=3, S=3), np.float32) == [
        "forward_bl", "backward_data_bl", "backward_filter_bl"]
    assert run(L.conv_layer(LIB, np.float32, 2, 3, 4, H=5, W=5), np.float32) == [
        "forward_bl", "backward_data_bl", "backward_filter_bl"]
    assert run(L.conv_layer(LIB, np.float64, 2, 3, 4, H=5, W=5, R=3, S=3), np.float64) == [
        "_conv_forward", "_conv_backward_data", "_conv_backward_filter"]
    assert run(L.conv_layer(LIB, np.float32, 2, 3, 4, D=3, H=5, W=5, T=2, R=3, S=3), np.float32) == [
        "_conv_forward", "_conv_backward_data", "_conv_backward_filter"]
    assert run(L.conv_layer(LIB, np.float64, 2, 3, 4, H=5, W=5), np.float64) == ["gemm"] * 3
    pool = L.pool_layer(LIB, np.float32, "max", 2, 3, H=5, W=5, R=2, S=2)
    I = make(rng, pool.dimI2, np.float32)
    arg = np.zeros(pool.dimO2, np.uint8)
    L.fprop_pool(pool, I, np.zeros(pool.dimO2, np.float32), arg)
    L.bprop_pool(pool, make(rng, pool.dimO2, np.float32), np.zeros(pool.dimI2, np.float32), arg)
    assert calls == ["_im2col", "backprop_max_pool_nd"]


@pytest.mark.parametrize("isa", [1, 3])
def test_batch_last_products_at_lower_instruction_sets(isa):
    """The batch-last products as compiled for AVX2 and for the baseline (forced)."""
    cg = L._conv_gemm
    if cg._set_isa(0) < isa:
        pytest.skip("the processor lacks this instruction set")
    try:
        cg._set_isa(isa)
        for case in ("2d-stride-dilation", "2d-big-pad", "1d", "2d-batch16", "2d-batch16-row-stride",
                     "2d-few-maps"):
            test_conv_fprop_bprop_update(case, np.float32)
        rng = np.random.default_rng(1)
        layer = L.conv_layer(LIB, np.float32, N=7, C=5, K=9, H=6, W=7, R=3, S=2, pad_h=1, str_w=2)
        I, F, E = make(rng, layer.dimI2, np.float32), make(rng, layer.dimF2, np.float32), make(rng, layer.dimO2, np.float32)
        O, G, U = np.zeros(layer.dimO2, np.float32), np.zeros(layer.dimI2, np.float32), np.zeros(layer.dimF2, np.float32)
        L.fprop_conv(layer, I, F, O)
        L.bprop_conv(layer, F, E, G)
        L.update_conv(layer, I, E, U)
        close(O, conv_ref(layer, I.astype(float), F.astype(float)), np.float32)
        close(G, bprop_ref(layer, F.astype(float), E.astype(float)), np.float32)
        close(U, update_ref(layer, I.astype(float), E.astype(float)), np.float32)
    finally:
        cg._set_isa(0)


def test_batch_last_products_into_float16_and_strided_outputs():
    rng = np.random.default_rng(12)
    layer = L.conv_layer(LIB, np.float32, N=3, C=4, K=5, H=6, W=6, R=3, S=3, pad_h=1, pad_w=1)
    I, F = make(rng, layer.dimI2, np.float32), make(rng, layer.dimF2, np.float32)
    ref = conv_ref(layer, I.astype(float), F.astype(float))
    wide = np.zeros((layer.dimO2[0], 2 * layer.N), np.float32)
    O = wide[:, ::2]  # a strided (non-contiguous) view: written through, the rest untouched
    L.fprop_conv(layer, I, F, O, beta=1.0)
    close(O, ref, np.float32)
    assert not wide[:, 1::2].any()
    O16 = np.zeros(layer.dimO2, np.float16)
    L.fprop_conv(layer, I, F, O16)
    close(O16, ref, np.float16)


# ---------------------------------------------------------------------------------- pooling

POOL_CASES = {
    "1d": dict(N=3, C=2, W=9, S=3, str_w=2),
    "1d-pad": dict(N=2, C=3, W=7, S=3, pad_w=1),
    "2d": dict(N=3, C=4, H=6, W=6, R=2, S=2),
    "2d-overlap-pad": dict(N=2, C=3, H=7, W=8, R=3, S=3, pad_h=1, pad_w=1, str_h=2, str_w=2),
    "2d-stride-1": dict(N=2, C=2, H=5, W=6, R=3, S=2, str_h=1, str_w=1, pad_h=2),
    "3d": dict(N=2, C=2, D=5, H=4, W=5, T=2, R=2, S=3, pad_d=1, str_d=2, str_w=2),
    "fm": dict(N=4, C=12, J=3),  # maxout across feature maps (fc layer)
    "fm-pad-overlap": dict(N=3, C=7, H=3, W=3, J=3, pad_j=1, str_j=2),
    "fm-and-space": dict(N=2, C=6, H=6, W=5, J=2, R=2, S=2, str_w=1, pad_w=1),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["max", "avg", "l2"])
@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_pool_fprop_bprop(case, op, dtype):
    rng = np.random.default_rng(11)
    layer = L.pool_layer(LIB, dtype, op, **POOL_CASES[case])
    I = make(rng, layer.dimI2, dtype)
    E = make(rng, layer.dimO2, dtype)
    want, want_arg = pool_ref(layer, I.astype(float))
    O = np.zeros(layer.dimO2, dtype)
    arg = np.zeros(layer.dimO2, np.uint8) if op == "max" else None
    L.fprop_pool(layer, I, O, arg)
    close(O, want, dtype)
    if op == "max":
        np.testing.assert_array_equal(arg, want_arg)
    G = np.zeros(layer.dimI2, dtype)
    L.bprop_pool(layer, E, G, arg)
    close(G, pool_bprop_ref(layer, I.astype(float), E.astype(float)), dtype)


def test_pool_alpha_beta_and_inputs_left_alone():
    rng = np.random.default_rng(2)
    layer = L.pool_layer(LIB, np.float64, "max", 2, 3, H=4, W=4, R=2, S=2, pad_h=1, str_h=1)
    I = make(rng, layer.dimI2, np.float64)
    O0 = make(rng, layer.dimO2, np.float64)
    O = O0.copy()
    arg = np.zeros(layer.dimO2, np.int32)
    L.fprop_pool(layer, I, O, arg, beta=0.5)
    close(O, pool_ref(layer, I)[0] + 0.5 * O0, np.float64)
    E = make(rng, layer.dimO2, np.float64)
    E0 = E.copy()
    G0 = make(rng, layer.dimI2, np.float64)
    G = G0.copy()
    L.bprop_pool(layer, E, G, arg, alpha=2.0, beta=-1.0)
    close(G, 2.0 * pool_bprop_ref(layer, I, E0) - G0, np.float64)
    np.testing.assert_array_equal(E, E0)  # neon's CPU code scaled E in place; not here


def test_pool_layer_attributes_and_neon_names():
    layer = L.pool_layer(LIB, np.float32, "avg", 8, 12, H=9, W=9, J=2, R=3, S=3, pad_c=0, str_c=2)
    assert layer.JTRS == (2, 1, 3, 3) and layer.strides == (2, 1, 3, 3)
    assert (layer.K, layer.M, layer.P, layer.Q) == (6, 1, 3, 3)
    assert layer.dimI == (12, 1, 9, 9, 8) and layer.dimO == (6, 1, 3, 3, 8) and layer.dimF2 is None
    assert layer.nOut == 6 * 9 and layer.overlap == 0.0
    over = L.pool_layer(LIB, np.float32, "max", 2, 3, H=5, W=5, R=3, S=3, str_h=2, str_w=2)
    assert over.overlap == 4
    assert over.pSlice[1] == (slice(2, 5), 3)


def test_caffe_output_sizes():
    # neon: caffe mode rounds pooling sizes up, dropping a last window that starts in the padding
    assert L.output_dim(6, 3, 0, 2, pooling=True) == 2
    assert L.output_dim(6, 3, 0, 2, pooling=True, caffe=True) == 3
    assert L.output_dim(5, 2, 1, 2, pooling=True, caffe=True) == 3
    assert L.output_dim(6, 3, 0, 2, pooling=False, caffe=True) == 2  # convolutions unchanged
    assert L.output_dim(10, 3, 1, 1, dilation=2) == 8
    with pytest.raises(ValueError, match="Padding dim 3 incompatible with filter size 3"):
        L.output_dim(6, 3, 3, 1, pooling=True)
    caffe = Lib(caffe=True)
    layer = L.pool_layer(caffe, np.float64, "avg", 2, 2, H=6, W=6, R=3, S=3, str_h=2, str_w=2)
    assert layer.MPQ == (1, 3, 3)
    rng = np.random.default_rng(1)
    I, E = make(rng, layer.dimI2, np.float64), make(rng, layer.dimO2, np.float64)
    O = np.zeros(layer.dimO2)
    L.fprop_pool(layer, I, O)
    close(O, pool_ref(layer, I)[0], np.float64)  # the last window is clipped: mean of 2 x 3, 2 x 2
    G = np.zeros(layer.dimI2)
    L.bprop_pool(layer, E, G)
    close(G, pool_bprop_ref(layer, I, E), np.float64)
    mx = L.pool_layer(caffe, np.float64, "max", 2, 2, H=6, W=6, R=3, S=3, str_h=2, str_w=2)
    arg = np.zeros(mx.dimO2, np.uint8)
    L.fprop_pool(mx, I, O, arg)
    want, want_arg = pool_ref(mx, I)
    close(O, want, np.float64)
    np.testing.assert_array_equal(arg, want_arg)
    L.bprop_pool(mx, E, G, arg)
    close(G, pool_bprop_ref(mx, I, E), np.float64)


# ---------------------------------------------------------------------------------- errors


def test_bad_shapes_name_the_operands():
    layer = L.conv_layer(LIB, np.float32, 2, 3, 4, H=5, W=5, R=3, S=3)
    I = np.zeros(layer.dimI2, np.float32)
    F = np.zeros(layer.dimF2, np.float32)
    O = np.zeros(layer.dimO2, np.float32)
    with pytest.raises(ValueError, match=r"fprop_conv: I has shape \(74, 2\).*dimI is \(3, 1, 5, 5, 2\)"):
        L.fprop_conv(layer, np.zeros((74, 2), np.float32), F, O)
    with pytest.raises(ValueError, match=r"fprop_conv: F has shape \(27, 5\).*dimF"):
        L.fprop_conv(layer, I, np.zeros((27, 5), np.float32), O)
    with pytest.raises(ValueError, match=r"fprop_conv: O has shape"):
        L.fprop_conv(layer, I, F, np.zeros((36, 3), np.float32))
    with pytest.raises(ValueError, match=r"bprop_conv: E has shape"):
        L.bprop_conv(layer, F, I, I.copy())
    with pytest.raises(ValueError, match=r"update_conv: grad_F has shape"):
        L.update_conv(layer, I, O, np.zeros((3, 3), np.float32))
    with pytest.raises(ValueError, match=r"fprop_conv: bias must hold one value per output feature map, \(4, 1\)"):
        L.fprop_conv(layer, I, F, O, bias=np.zeros((3, 1), np.float32))
    with pytest.raises(ValueError, match=r"fprop_conv: O of strides .* cannot be viewed"):
        L.fprop_conv(layer, I, F, np.zeros((6, 7, 2), np.float32)[:, :6])
    with pytest.raises(TypeError, match="fprop_conv: layer must be a ConvLayer"):
        L.fprop_conv(object(), I, F, O)
    with pytest.raises(ValueError, match="repeat must be an int >= 1"):
        L.fprop_conv(layer, I, F, O, repeat=0)
    pool = L.pool_layer(LIB, np.float32, "max", 2, 3, H=5, W=5, R=2, S=2)
    with pytest.raises(ValueError, match="bprop_pool: max pooling needs the argmax buffer"):
        L.bprop_pool(pool, np.zeros(pool.dimO2, np.float32), I.copy())
    with pytest.raises(ValueError, match=r"fprop_pool: argmax has shape \(1, 1\)"):
        L.fprop_pool(pool, I, np.zeros(pool.dimO2, np.float32), np.zeros((1, 1), np.uint8))
    with pytest.raises(ValueError, match=r"bprop_pool: I has shape"):
        L.bprop_pool(pool, I, I.copy(), np.zeros(pool.dimO2))
    l2 = L.pool_layer(LIB, np.float32, "l2", 2, 3, H=5, W=5, R=2, S=2)
    with pytest.raises(ValueError, match="l2 pooling's backprop needs"):
        L.bprop_pool(l2, np.zeros(l2.dimO2, np.float32), I.copy())


def test_bad_geometry_errors():
    with pytest.raises(ValueError, match=r"conv_layer: input D, H, W = \(1, 2, 5\) is too small for filter"):
        L.conv_layer(LIB, np.float32, 2, 3, 4, H=2, W=5, R=3, S=3)
    with pytest.raises(ValueError, match="conv_layer: str_h must be >= 1"):
        L.conv_layer(LIB, np.float32, 2, 3, 4, H=5, W=5, str_h=0)
    with pytest.raises(TypeError, match="conv_layer: K must be an int"):
        L.conv_layer(LIB, np.float32, 2, 3, 4.5, H=5, W=5)
    with pytest.raises(ValueError, match="conv_layer: pad_w must be >= 0"):
        L.conv_layer(LIB, np.float32, 2, 3, 4, H=5, W=5, pad_w=-1)
    with pytest.raises(ValueError, match="deconv_layer: input M, P, Q"):
        L.deconv_layer(LIB, np.float32, 2, 3, 4, 1, 2, 2, R=1, S=1, pad_h=2)
    with pytest.raises(ValueError, match='pool_layer: op must be "max", "avg" or "l2"'):
        L.pool_layer(LIB, np.float32, "sum", 2, 3, H=4, W=4, R=2, S=2)
    with pytest.raises(ValueError, match="Padding dim 2 incompatible"):
        L.pool_layer(LIB, np.float32, "max", 2, 3, H=4, W=4, R=2, S=2, pad_h=2)
    with pytest.raises(TypeError, match="give pad_j or pad_c"):
        L.pool_layer(LIB, np.float32, "max", 2, 4, J=2, pad_j=1, pad_c=1)


def test_factories_take_neon_backend_call_forms():
    """(lib, dtype, ...) as neon's layer classes, or (dtype, ...) as its Backend methods."""
    a = L.conv_layer(LIB, np.float32, 2, 3, 4, H=6, W=6, R=3, S=3)
    b = L.conv_layer(np.float32, 2, 3, 4, 1, 6, 6, 1, 3, 3)
    assert (a.dimI, a.dimF, a.dimO) == (b.dimI, b.dimF, b.dimO)
    d = L.deconv_layer("float32", 2, 3, 4, 1, 3, 3, 1, 2, 2, str_h=2, str_w=2)
    assert d.DHW == (1, 6, 6)
    # the spec page's form, without M: (dtype, N, C, K, P, Q, R=1, S=1, ...)
    e = L.deconv_layer(np.float32, 2, 3, 4, 3, 3, R=2, S=2, str_h=2, str_w=2)
    assert e.DHW == (1, 6, 6) and e.MPQ == (1, 3, 3)
    p = L.pool_layer(np.float32, "max", 2, 3, H=6, W=6, R=2, S=2)
    q = L.pool_layer(Lib(caffe=True), "float32", "max", 2, 3, H=5, W=5, R=2, S=2)
    assert p.MPQ == (1, 3, 3) and q.MPQ == (1, 3, 3)
    assert L.pool_layer(np.float32, "max", 2, 3, H=5, W=5, R=2, S=2).MPQ == (1, 2, 2)


def test_deconv_entry_points():
    rng = np.random.default_rng(9)
    layer = L.deconv_layer(LIB, np.float64, N=2, C=3, K=4, M=1, P=3, Q=4, R=3, S=3, str_h=2, pad_w=1)
    X, F = make(rng, layer.dimO2, np.float64), make(rng, layer.dimF2, np.float64)
    Y = np.zeros(layer.dimI2)
    L.fprop_deconv(layer, X, F, Y)
    close(Y, bprop_ref(layer, F, X), np.float64)
    dY = make(rng, layer.dimI2, np.float64)
    dX = np.zeros(layer.dimO2)
    L.bprop_deconv(layer, F, dY, dX)
    close(dX, conv_ref(layer, dY, F), np.float64)
    U = np.zeros(layer.dimF2)
    L.update_deconv(layer, X, dY, U)
    close(U, update_ref(layer, dY, X), np.float64)


@pytest.mark.parametrize("op", ["max", "avg", "l2"])
def test_bprop_pool_in_the_spec_page_form(op):
    """bprop_pool(layer, I, E, grad_I) as the spec page documents it (I: the forward input)."""
    rng = np.random.default_rng(21)
    for kw in (dict(N=3, C=4, H=6, W=5, R=3, S=2, pad_h=1, str_h=2), dict(N=2, C=6, J=2, H=3, W=3, R=2, S=2, str_h=1, str_w=1)):
        layer = L.pool_layer(LIB, np.float64, op, **kw)
        I, E = make(rng, layer.dimI2, np.float64), make(rng, layer.dimO2, np.float64)
        G = np.zeros(layer.dimI2)
        L.fprop_pool(layer, I, np.zeros(layer.dimO2))  # argmax left out: the spec form's fprop
        layer._last = None  # the spec form needs nothing from fprop
        L.bprop_pool(layer, I, E, G)
        close(G, pool_bprop_ref(layer, I, E), np.float64)


def test_conv_spec_page_positional_forms():
    """fprop_conv(layer, I, F, O, alpha, relu, repeat) and bprop_conv(layer, F, E, grad_I, alpha,
    repeat) as the spec page writes them, besides neon 2.6's (..., X, bias, bsum, alpha, beta...)."""
    rng = np.random.default_rng(8)
    layer = L.conv_layer(LIB, np.float64, 2, 3, 4, H=5, W=5, R=3, S=3, pad_h=1, pad_w=1)
    I, F, E = make(rng, layer.dimI2, np.float64), make(rng, layer.dimF2, np.float64), make(rng, layer.dimO2, np.float64)
    O = np.zeros(layer.dimO2)
    L.fprop_conv(layer, I, F, O, 2.0, True, 1)
    close(O, np.maximum(2.0 * conv_ref(layer, I, F), 0), np.float64)
    G = np.zeros(layer.dimI2)
    L.bprop_conv(layer, F, E, G, 0.5, 2)
    close(G, 0.5 * bprop_ref(layer, F, E), np.float64)
