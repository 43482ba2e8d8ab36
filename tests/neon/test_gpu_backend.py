"""plait.neon.nervanagpu: the GPU backend, end to end against the CPU backend.

Every end-to-end test runs twice:

* ``emulated``: NervanaGPU with numpy arrays and plait.neon._cuda_emu.HostEmulator as its kernel
  launcher. The backend's own code (tensors, splitting at dot, the fused executor, the
  reference-evaluator fallback, compound products, RNG) and the generated CUDA sources (built
  for the host) run here, without a GPU;
* ``cuda`` (``gpu``-marked, skipped without CuPy and a CUDA device): gen_backend('gpu') itself,
  cupy arrays, kernels compiled by NVRTC and run on the device, cuBLAS products.

The oracle is NervanaCPU on the same inputs (itself tested against numpy in test_neon_ops.py).
Tolerances: float32 rtol 1e-5 (2e-4 after a matrix product), float16 rtol 2e-3.
Plus, without a GPU: gen_backend('gpu') fails naming what is missing, and importing the face
does not import cupy.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from _env import HAS_GPU
from plait.neon import Backend, NervanaCPU, gen_backend
from plait.neon import _fuse_cuda
from plait.neon._cuda_emu import host_compiler, shared_emulator
from plait.neon.nervanagpu import GPUTensor, GPUUnavailableError, NervanaGPU, gpu_unavailable_reason

needs_cxx = pytest.mark.skipif(host_compiler() is None, reason="needs a host C++ compiler")


@pytest.fixture(scope="module")
def emulator():
    if host_compiler() is None:
        pytest.skip("needs a host C++ compiler for the kernel emulation")
    # one emulator for the session; its libraries are cached on disk as the CPU kernels are
    return shared_emulator()


@pytest.fixture(params=["emulated", pytest.param("cuda", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")])])
def gbe(request):
    """A GPU backend: emulated on the host, or the real one."""
    if request.param == "emulated":
        em = request.getfixturevalue("emulator")
        return NervanaGPU(rng_seed=0, _xp=np, _launcher=em)
    be = gen_backend("gpu", rng_seed=0)
    assert isinstance(be, NervanaGPU)
    return be


@pytest.fixture
def cbe():
    return NervanaCPU(rng_seed=0)


def _both(gbe, cbe, host):
    return gbe.array(host), cbe.array(host)


# ---------------------------------------------------------------------------------------
# Without a GPU
# ---------------------------------------------------------------------------------------

def test_importing_the_face_does_not_import_cupy():
    code = ("import sys\n"
            "import plait.neon, plait.neon.nervanagpu, plait.neon._fuse_cuda, plait.neon.backends.nervanagpu\n"
            "print('cupy' in sys.modules, sorted(plait.neon.Backend.backends))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["False", "['cpu',", "'gpu']"]


@pytest.mark.skipif(HAS_GPU, reason="checks the error given without a GPU")
def test_gen_backend_gpu_says_what_is_missing():
    reason = gpu_unavailable_reason()
    assert reason and ("CuPy" in reason or "CUDA" in reason)
    with pytest.raises(GPUUnavailableError, match=r"gen_backend\('gpu'\).*(CuPy|CUDA).*backend='cpu'"):
        gen_backend("gpu")
    with pytest.raises(GPUUnavailableError, match="CuPy|CUDA"):
        NervanaGPU()
    with pytest.raises(GPUUnavailableError):
        Backend.allocate_backend("gpu")


def test_gpu_is_registered():
    assert Backend.backends["gpu"] is NervanaGPU
    assert "gpu" in Backend.backend_choices()


# ---------------------------------------------------------------------------------------
# End to end, against the CPU backend
# ---------------------------------------------------------------------------------------

def test_allocation_set_get_and_views(gbe):
    a = gbe.zeros((4, 6))
    assert isinstance(a, GPUTensor) and a.shape == (4, 6) and a.dtype == np.float32
    host = np.arange(24, dtype=np.float32).reshape(4, 6)
    a.set(host)
    assert_array_equal(a.get(), host)
    assert isinstance(a.get(), np.ndarray)
    assert_array_equal(np.asarray(a[1:3, 2:]), host[1:3, 2:])
    a[1:3, 2:] = 7.0
    ref = host.copy()
    ref[1:3, 2:] = 7.0
    assert_array_equal(a.get(), ref)
    assert_array_equal(gbe.ones((2, 3), dtype=np.float16).get(), np.ones((2, 3), np.float16))
    gbe.bsz = 8
    io = gbe.iobuf(5)
    assert isinstance(io, GPUTensor) and io.shape == (5, 8)
    assert_array_equal(io.get(), np.zeros((5, 8), np.float32))
    assert_array_equal(a.reshape(6, 4).get(), ref.reshape(6, 4))
    assert_array_equal(a.T.get(), ref.T)
    assert_array_equal(a.take([0, 2], axis=1).get(), ref[:, [0, 2]])


def _trees(be, x, y, b, s):
    """Expressions on tensors x (m, n), y (m, n), b (m, 1) and row s (1, n)."""
    return [
        be.sig(x * 2.0 + b) - y,
        be.tanh(x) * be.exp(-be.square(y)) + s,
        be.maximum(x, y) / (be.absolute(s) + 1.0),
        be.sqrt(be.absolute(x)) ** 1.7 + be.log(be.absolute(y) + 1e-3),
        (x > y) + (x <= 0.5) * 2.0,
        be.exp(x - be.max(x, axis=0)) / be.sum(be.exp(x - be.max(x, axis=0)), axis=0),
        x - be.mean(x, axis=1),
        be.var(x, axis=0) + 0.0 * s,
        be.clip(x, -0.5, 0.5) * be.sgn(y),
        be.dot(be.sig(x), y.T) * 0.5 + b,        # (m, m): the dot split off, the rest fused
    ]


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "evaluator"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_op_trees_match_the_cpu_backend(gbe, cbe, dtype, fused, monkeypatch):
    if not fused:   # the reference evaluator on the backend's array module, no kernels
        monkeypatch.setenv("PLAIT_NEON_FUSE", "0")
        before = _fuse_cuda.stats()["passes"]
    rs = np.random.RandomState(0)
    m, n = 6, 40
    hx, hy = rs.randn(m, n), rs.randn(m, n)
    hb, hs = rs.randn(m, 1), rs.randn(1, n)
    gt = [gbe.array(h, dtype=dtype) for h in (hx, hy, hb, hs)]
    ct = [cbe.array(h, dtype=dtype) for h in (hx, hy, hb, hs)]
    tol = dict(rtol=2e-3, atol=2e-3) if dtype == np.float16 else dict(rtol=2e-4, atol=1e-5)
    for k, (gtree, ctree) in enumerate(zip(_trees(gbe, *gt), _trees(cbe, *ct))):
        gout = gbe.empty(gtree.shape, dtype=dtype)
        cout = cbe.empty(ctree.shape, dtype=dtype)
        gout[:] = gtree
        cout[:] = ctree
        assert gout.get().dtype == dtype
        assert_allclose(gout.get().astype(np.float64), cout.get().astype(np.float64), err_msg=str(k), **tol)
    if not fused:
        assert _fuse_cuda.stats()["passes"] == before


def test_reductions_and_their_methods(gbe, cbe):
    h = np.random.RandomState(1).randn(9, 17).astype(np.float32)
    g, c = _both(gbe, cbe, h)
    # (every reduction op and axis against numpy: test_gpu_fuse.py; here the backend's methods)
    for name, axes in (("sum", (0, 1, None)), ("max", (0, None)), ("min", (1,)), ("argmax", (0, 1)),
                       ("argmin", (1,)), ("mean", (0, 1)), ("var", (1, None)), ("std", (0,))):
        for axis in axes:
            cr = getattr(cbe, name)(c, axis=axis).astensor().get()
            out = gbe.empty(cr.shape)
            getattr(gbe, name)(g, axis=axis, out=out)
            assert_allclose(out.get(), cr, rtol=1e-5, atol=1e-6, err_msg=f"{name} axis={axis}")


def test_tensors_cross_between_the_cpu_and_gpu_backends(gbe, cbe):
    h = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = gbe.empty((2, 3))
    g[:] = cbe.array(h)                      # CPU tensor -> GPU
    assert_array_equal(g.get(), h)
    c = cbe.empty((2, 3))
    c[:] = g                                 # GPU tensor -> CPU (through a host copy)
    assert_array_equal(c.get(), h)
    assert_array_equal(gbe.array(g).get(), h)


def test_slice_assignment_writes_only_the_slice(gbe):
    x = gbe.array(np.arange(20, dtype=np.float32).reshape(4, 5))
    x[1:3] = x[1:3] * 10 + x[0:1]
    ref = np.arange(20, dtype=np.float32).reshape(4, 5)
    ref[1:3] = ref[1:3] * 10 + ref[0:1]
    assert_array_equal(x.get(), ref)
    x[:] = x - x[0:1]          # an operand overlapping the output
    assert_array_equal(x.get(), ref - ref[0:1])


def test_products_match_the_cpu_backend(gbe, cbe):
    rs = np.random.RandomState(2)
    A, B, C0 = rs.randn(8, 12), rs.randn(12, 5), rs.randn(8, 5)
    (gA, cA), (gB, cB) = _both(gbe, cbe, A), _both(gbe, cbe, B)
    (gC, cC) = _both(gbe, cbe, C0)
    gbe.compound_dot(gA, gB, gC, alpha=0.5, beta=2.0, relu=True)
    cbe.compound_dot(cA, cB, cC, alpha=0.5, beta=2.0, relu=True)
    assert_allclose(gC.get(), cC.get(), rtol=2e-5, atol=1e-5)
    gD, cD = gbe.empty((12, 5)), cbe.empty((12, 5))
    gbe.compound_dot(gA.T, gbe.array(C0), gD)
    cbe.compound_dot(cA.T, cbe.array(C0), cD)
    assert_allclose(gD.get(), cD.get(), rtol=2e-5, atol=1e-5)
    gE = gbe.empty((8, 5))
    gE[:] = gbe.dot(gA, gB)
    assert_allclose(gE.get(), A.astype(np.float32) @ B.astype(np.float32), rtol=2e-5, atol=1e-5)
    gE[:] = gbe.dot(gA, gB) * 2 + 1
    assert_allclose(gE.get(), 2 * (A.astype(np.float32) @ B.astype(np.float32)) + 1, rtol=2e-5, atol=1e-5)
    X = rs.randn(3, 12, 5)
    gO, cO = gbe.empty((3, 8, 5)), cbe.empty((3, 8, 5))
    gbe.batched_dot(gA, gbe.array(X), gO)
    cbe.batched_dot(cA, cbe.array(X), cO)
    assert_allclose(gO.get(), cO.get(), rtol=2e-5, atol=1e-5)


def test_rand_binarize_and_rng_state(gbe):
    out = gbe.empty((32, 40))
    state = gbe.rng_get_state()
    out[:] = gbe.rand()
    first = out.get()
    assert 0.0 <= first.min() and first.max() < 1.0 and abs(first.mean() - 0.5) < 0.03
    gbe.rng_set_state(state)
    out[:] = gbe.rand()
    assert_array_equal(out.get(), first)
    out[:] = gbe.rand()
    assert not np.array_equal(out.get(), first)
    gbe.rng_reset()
    out[:] = gbe.rand()
    assert_array_equal(out.get(), first)
    x = gbe.array(np.random.RandomState(3).uniform(-2, 2, (32, 40)))
    out[:] = gbe.binarize(x, stochastic=True)
    assert set(np.unique(out.get())) <= {-1.0, 1.0}
    gbe.make_binary_mask(out, keepthresh=0.3)
    assert set(np.unique(out.get())) <= {0.0, 1.0} and abs(out.get().mean() - 0.3) < 0.05
    gbe.fill_normal(out, mean=1.0, stdv=2.0)
    assert abs(out.get().mean() - 1.0) < 0.2 and abs(out.get().std() - 2.0) < 0.2


def test_unfusable_trees_fall_back_to_the_reference_evaluator(gbe, cbe):
    h = np.random.RandomState(4).randn(5, 7).astype(np.float32)
    g, c = _both(gbe, cbe, h)
    gout, cout = gbe.empty((1, 1)), cbe.empty((1, 1))
    gout[:] = gbe.argmax(g, axis=None)             # declined by the fused kernels
    cout[:] = cbe.argmax(c, axis=None)
    assert_array_equal(gout.get(), cout.get())
    idx = gbe.array(np.array([[2, 0, 4]]), dtype=np.int32)
    oh = gbe.empty((5, 3))
    oh[:] = gbe.onehot(idx, axis=0)
    assert_array_equal(oh.get(), np.eye(5, dtype=np.float32)[:, [2, 0, 4]])
    iout = gbe.empty((5, 7), dtype=np.int32)
    iout[:] = g * 10
    assert_array_equal(iout.get(), np.rint(h * 10).astype(np.int32))


def test_an_mlp_step_matches_the_cpu_backend(gbe, cbe):
    rs = np.random.RandomState(5)
    W1, W2 = rs.randn(16, 12) * 0.3, rs.randn(4, 16) * 0.3
    X, Y = rs.randn(12, 8), np.eye(4)[:, rs.randint(0, 4, 8)]
    results = []
    for be in (gbe, cbe):
        w1, w2, x, y = (be.array(a) for a in (W1, W2, X, Y))
        h, o, d2, d1 = be.empty((16, 8)), be.empty((4, 8)), be.empty((4, 8)), be.empty((16, 8))
        for _ in range(3):
            be.compound_dot(w1, x, h)
            h[:] = be.sig(h)
            be.compound_dot(w2, h, o)
            o[:] = be.exp(o - be.max(o, axis=0)) / be.sum(be.exp(o - be.max(o, axis=0)), axis=0)
            d2[:] = (o - y) / 8.0
            be.compound_dot(w2.T, d2, d1)
            d1[:] = d1 * h * (1.0 - h)
            gw2 = be.empty((4, 16))
            be.compound_dot(d2, h.T, gw2)
            w2[:] = w2 - 0.5 * gw2
            gw1 = be.empty((16, 12))
            be.compound_dot(d1, x.T, gw1)
            w1[:] = w1 - 0.5 * gw1
        results.append((w1.get(), w2.get()))
    assert_allclose(results[0][0], results[1][0], rtol=1e-4, atol=1e-6)
    assert_allclose(results[0][1], results[1][1], rtol=1e-4, atol=1e-6)


def test_batchnorm_and_layer_helpers_match_the_cpu_backend(gbe, cbe):
    rs = np.random.RandomState(6)
    hx = rs.randn(6, 32)
    res = []
    for be in (gbe, cbe):
        x = be.array(hx)
        xsum, xvar, gmean, gvar = (be.zeros((6, 1)) for _ in range(4))
        gamma, beta, y = be.ones((6, 1)) * 1.0, be.zeros((6, 1)), be.empty((6, 32))
        g = be.array(np.full((6, 1), 1.5))
        be.compound_fprop_bn(x, xsum, xvar, gmean, gvar, g, beta, y, 1e-5, 0.9, True)
        res.append((y.get(), xsum.get(), xvar.get()))
        del gamma
    for a, b in zip(*res):
        assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_cpu_only_layers_raise_naming_the_method(gbe):
    for name in ("conv_layer", "fprop_conv", "pool_layer", "bprop_pool", "deconv_layer", "fprop_lrn",
                 "roipooling_fprop", "compound_bprop_lut"):
        with pytest.raises(NotImplementedError, match=name):
            getattr(gbe, name)(None, None, None, None)


def test_the_fused_kernels_run_on_assignment(gbe):
    before = _fuse_cuda.stats()["passes"]
    x = gbe.array(np.ones((3, 4)))
    tree = gbe.exp(x) * 2 + 1
    assert _fuse_cuda.stats()["passes"] == before      # nothing before assignment
    out = gbe.empty((3, 4))
    out[:] = tree
    assert _fuse_cuda.stats()["passes"] == before + 1
    assert_allclose(out.get(), np.exp(1.0) * 2 + 1, rtol=1e-6)
