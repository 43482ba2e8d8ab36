"""plait's own float32 products (plait/backends/_kernels_cpu/dense_gemm.pyx) against float64 numpy.

The kernels run only where the build and the CPU have AVX-512; elsewhere every test that needs
them skips, and the one that checks the decline runs.
"""
import os
import threading

import numpy
import pytest

from plait.backends import NumpyOps, _blas
from plait.backends._kernels_cpu import dense_gemm

needs_kernels = pytest.mark.skipif(not dense_gemm.available(), reason="no AVX2/AVX-512 build or CPU here")


@pytest.fixture
def mode():
    """Set the kernels' mode for one test, then restore the process's BLAS configuration."""
    yield dense_gemm.set_mode
    _blas.configure(os.environ.get(_blas.VARIABLE, "auto").strip().lower() or "auto")


def _operand(rng, rows, cols, layout):
    if layout == "C":
        return rng.standard_normal((rows, cols), dtype="float32")
    if layout == "F":
        return numpy.asfortranarray(rng.standard_normal((rows, cols), dtype="float32"))
    if layout == "padded":  # rows of a wider buffer
        return rng.standard_normal((rows, cols + 3), dtype="float32")[:, 1 : cols + 1]
    if layout == "padded_T":  # columns of a taller buffer, seen transposed
        return rng.standard_normal((cols, rows + 5), dtype="float32")[:, 2 : rows + 2].T
    raise AssertionError(layout)


def _reference(x, y, trans1, trans2, base=None):
    got = (x.T if trans1 else x).astype("float64") @ (y.T if trans2 else y).astype("float64")
    return got if base is None else got + base


def _assert_close(got, expected, K):
    # Each entry is a float32 sum of K products: allow a few roundings per term's scale.
    scale = numpy.abs(expected).max() + 1.0
    assert numpy.abs(got - expected).max() <= 8 * numpy.finfo("float32").eps * numpy.sqrt(K) * scale


# Edges of the AVX-512 tile (8 rows, 16-lane vectors, 48-column panels), of its K blocks (512)
# and row blocks (128); of the AVX2 tile (6 rows, 8-lane vectors, 16-column panels), its K
# blocks (256) and row blocks (120, with a transposed A copied when N >= 64); the shapes of an
# MLP's products; and operands copied into panels whose last one is partly empty (N or M of
# 1,491), or of 3,072 rows (spaCy's parser); operands with rows 4 KiB apart, which the AVX2
# tile copies into panels rather than read in place (N or M of 1,024, with 130 rows).
SHAPES = [(1, 1, 1), (3, 5, 7), (8, 16, 48), (9, 17, 49), (15, 31, 33), (17, 513, 95),
          (130, 100, 20), (77, 300, 101), (128, 784, 512), (10, 128, 512), (128, 512, 10),
          (300, 1030, 64), (6, 8, 16), (7, 257, 17), (121, 256, 63), (125, 600, 72),
          (13, 96, 1491), (1491, 33, 20), (7, 129, 3072), (130, 70, 1024), (1024, 70, 130)]


@needs_kernels
@pytest.mark.parametrize("M,K,N", SHAPES)
@pytest.mark.parametrize("trans1,trans2", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("accumulate", [False, True])
def test_products_match_float64_numpy(mode, M, K, N, trans1, trans2, accumulate):
    mode(2)
    rng = numpy.random.default_rng(M * 10007 + K * 101 + N + 7 * trans1 + 3 * trans2)
    x = _operand(rng, *((K, M) if trans1 else (M, K)), "C")
    y = _operand(rng, *((N, K) if trans2 else (K, N)), "C")
    x0, y0 = x.copy(), y.copy()
    out = rng.standard_normal((M, N), dtype="float32")
    base = out.astype("float64")
    assert dense_gemm.gemm(x, y, out, trans1, trans2, accumulate) is out
    _assert_close(out, _reference(x, y, trans1, trans2, base if accumulate else None), K)
    numpy.testing.assert_array_equal(x, x0)
    numpy.testing.assert_array_equal(y, y0)
    if not accumulate:
        fresh = dense_gemm.gemm(x, y, None, trans1, trans2, False)
        assert fresh.dtype == numpy.float32 and fresh.shape == (M, N) and fresh.flags.c_contiguous
        numpy.testing.assert_array_equal(fresh, out)


@needs_kernels
@pytest.mark.parametrize("layout_x", ["C", "F", "padded", "padded_T"])
@pytest.mark.parametrize("layout_y", ["C", "F", "padded", "padded_T"])
@pytest.mark.parametrize("trans1,trans2", [(False, False), (False, True), (True, False), (True, True)])
def test_every_memory_layout(mode, layout_x, layout_y, trans1, trans2):
    mode(2)
    rng = numpy.random.default_rng(hash((layout_x, layout_y, trans1, trans2)) % 2**32)
    M, K, N = 37, 61, 53
    x = _operand(rng, *((K, M) if trans1 else (M, K)), layout_x)
    y = _operand(rng, *((N, K) if trans2 else (K, N)), layout_y)
    got = dense_gemm.gemm(x, y, None, trans1, trans2, False)
    assert got is not None
    _assert_close(got, _reference(x, y, trans1, trans2), K)


@needs_kernels
@pytest.mark.parametrize("trans1", [False, True])
def test_operands_with_rows_4_kib_apart_and_a_partial_last_panel(mode, trans1):
    # y's rows 1,024 floats apart but 1,000 of them used: the AVX2 tile copies it into panels
    # of 16 columns, the last one half empty; x, seen transposed, likewise where it is B.
    mode(2)
    rng = numpy.random.default_rng(5 + trans1)
    M, K, N = 200, 90, 1000
    y = rng.standard_normal((K, 1024), dtype="float32")[:, :N]
    x = (rng.standard_normal((K, 2048), dtype="float32")[:, :M] if trans1
         else rng.standard_normal((M, K), dtype="float32"))
    got = dense_gemm.gemm(x, y, None, trans1, False, False)
    _assert_close(got, _reference(x, y, trans1, False), K)
    if trans1:  # x itself (K x M, rows 2,048 apart) as the right operand: y.T @ x
        yt = numpy.ascontiguousarray(y.T)
        got = dense_gemm.gemm(yt, x, None, False, False, False)
        _assert_close(got, _reference(yt, x, False, False), K)


@needs_kernels
def test_what_it_declines(mode):
    mode(2)
    rng = numpy.random.default_rng(0)
    x = rng.standard_normal((20, 30), dtype="float32")
    y = rng.standard_normal((30, 40), dtype="float32")
    assert dense_gemm.gemm(x.astype("float64"), y.astype("float64"), None, False, False, False) is None
    assert dense_gemm.gemm(x, y.astype("float64"), None, False, False, False) is None
    assert dense_gemm.gemm(rng.standard_normal((20, 60), dtype="float32")[:, ::2], y, None, False, False, False) is None
    assert dense_gemm.gemm(x, y, numpy.zeros((20, 40), "float64"), False, False, False) is None
    assert dense_gemm.gemm(x, y, numpy.zeros((40, 20), "float32").T, False, False, False) is None
    readonly = numpy.zeros((20, 40), "float32")
    readonly.flags.writeable = False
    assert dense_gemm.gemm(x, y, readonly, False, False, False) is None
    assert dense_gemm.gemm(x, y, numpy.zeros((20, 41), "float32"), False, False, False) is None
    assert dense_gemm.gemm(x, y[:29], None, False, False, False) is None  # inner sizes differ
    assert dense_gemm.gemm(x[:, :0], y[:0], None, False, False, False) is None  # K == 0
    assert dense_gemm.gemm(x, y, None, False, False, True) is None  # nothing to add to
    assert dense_gemm.gemm(x.astype(">f4" if numpy.little_endian else "<f4"), y, None, False, False, False) is None
    assert dense_gemm.gemm(x, y, numpy.zeros((20, 40), ">f4" if numpy.little_endian else "<f4"), False, False, False) is None
    buf = numpy.zeros((20, 70), "float32")
    assert dense_gemm.gemm(buf[:, :30], y, buf[:, 30:], False, False, False) is None  # out not contiguous
    square = rng.standard_normal((30, 30), dtype="float32")
    assert dense_gemm.gemm(square, square, square, False, False, False) is None  # out is an input
    numpy.testing.assert_array_equal(readonly, 0)


@needs_kernels
def test_modes(mode):
    rng = numpy.random.default_rng(1)
    x = rng.standard_normal((128, 64), dtype="float32")
    y = rng.standard_normal((64, 96), dtype="float32")
    tiny_x = rng.standard_normal((16, 64), dtype="float32")
    tiny_y = rng.standard_normal((10, 64), dtype="float32")  # tiny_x @ tiny_y.T
    mode(0)
    assert dense_gemm.get_mode() == 0
    assert dense_gemm.gemm(x, y, None, False, False, False) is None
    mode(1)
    assert dense_gemm.wanted(128, 64, 96) and dense_gemm.gemm(x, y, None, False, False, False) is not None
    # A tiny x @ y.T copies an operand either way: the BLAS's; the same output untransposed is taken.
    assert not dense_gemm.wanted(16, 64, 10, False, True)
    assert dense_gemm.gemm(tiny_x, tiny_y, None, False, True, False) is None
    assert dense_gemm.wanted(16, 64, 10) and dense_gemm.gemm(tiny_x, tiny_y.T.copy(), None, False, False, False) is not None
    assert dense_gemm.wanted(128, 512, 10, False, True)  # an MLP's output layer
    assert not dense_gemm.wanted(1024, 1024, 1024)  # 2**30 multiply-adds: the BLAS's packed blocks win
    mode(2)
    got = dense_gemm.gemm(tiny_x, tiny_y, None, False, True, False)
    _assert_close(got, tiny_x.astype("f8") @ tiny_y.T, 64)
    # Mode 3: the rule with the thin bounds, whichever build runs.
    mode(3)
    assert dense_gemm.get_mode() == 3
    wide_x, wide_y = x.repeat(2, axis=0), numpy.tile(y, (1, 2))  # 256 x 64 @ 64 x 192: K thin
    assert dense_gemm.gemm(wide_x, wide_y, None, False, False, False) is not None
    big_x = rng.standard_normal((256, 512), dtype="float32")
    big_y = rng.standard_normal((512, 256), dtype="float32")
    assert not dense_gemm.wanted(256, 512, 256, thin=True) and dense_gemm.wanted(256, 512, 256, thin=False)
    assert dense_gemm.gemm(big_x, big_y, None, False, False, False) is None
    with pytest.raises(ValueError, match="mode must be 0, 1, 2 or 3"):
        dense_gemm.set_mode(4)


@needs_kernels
def test_threads_each_get_their_own_scratch_copy(mode):
    # X @ W.T copies X transposed into a buffer per thread; products on several threads at once
    # must not read each other's copies.
    mode(2)
    rng = numpy.random.default_rng(2)
    cases = []
    for i in range(4):
        M = 40 + 17 * i
        x = rng.standard_normal((M, 200 + i), dtype="float32")
        w = rng.standard_normal((300, 200 + i), dtype="float32")
        cases.append((x, w, _reference(x, w, False, True)))
    failures = []

    def work(x, w, expected):
        for _ in range(30):
            got = dense_gemm.gemm(x, w, None, False, True, False)
            if numpy.abs(got - expected).max() > 1e-3 * (numpy.abs(expected).max() + 1):
                failures.append(x.shape)
                return

    threads = [threading.Thread(target=work, args=case) for case in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


@needs_kernels
@pytest.mark.parametrize("trans1,trans2", [(False, False), (False, True), (True, False)])
def test_numpy_ops_route_products_and_accumulations_through_them(mode, trans1, trans2):
    _blas.configure("plait")
    assert _blas.own_kernels and _blas.info()["own_kernels"] == "every float32 product"
    ops = NumpyOps()
    rng = numpy.random.default_rng(3)
    M, K, N = 64, 96, 80
    x = rng.standard_normal((K, M) if trans1 else (M, K), dtype="float32")
    y = rng.standard_normal((N, K) if trans2 else (K, N), dtype="float32")
    expected = _reference(x, y, trans1, trans2)
    _assert_close(ops.gemm(x, y, trans1=trans1, trans2=trans2), expected, K)
    acc = numpy.ones((M, N), "float32")
    assert ops._gemm_accumulate(x, y, acc, trans1=trans1, trans2=trans2)
    _assert_close(acc, expected + 1.0, K)
    # float64 still goes to the BLAS, with its own checks and errors.
    numpy.testing.assert_allclose(ops.gemm(x.astype("f8"), y.astype("f8"), trans1=trans1, trans2=trans2), expected)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        ops.gemm(x, y[:-1] if not trans2 else y[:, :-1], trans1=trans1, trans2=trans2)


def test_switched_off_under_the_pure_blas_modes(mode):
    for chosen in ("numpy", "openblas"):
        _blas.configure(chosen)
        assert not _blas.own_kernels and _blas.info()["own_kernels"] == "off"
        assert dense_gemm.get_mode() == 0
    _blas.configure("plait")
    assert _blas.own_kernels == dense_gemm.available()


def test_auto_takes_the_avx2_build_anywhere_and_the_avx512_build_on_measured_processors(mode, monkeypatch):
    monkeypatch.setattr(dense_gemm, "available", lambda: True)
    monkeypatch.setattr(_blas, "thin_own_kernels_cpu", lambda cpuinfo=None: None)
    for cpu in ("Emerald Rapids", None):
        monkeypatch.setattr(_blas, "own_kernels_cpu", lambda cpuinfo=None, cpu=cpu: cpu)
        monkeypatch.setattr(dense_gemm, "level", lambda: 3)
        _blas.configure("auto")
        assert _blas.own_kernels and dense_gemm.get_mode() == 1
        _blas.configure("plait")
        assert _blas.own_kernels and dense_gemm.get_mode() == 2
        monkeypatch.setattr(dense_gemm, "level", lambda: 4)
        _blas.configure("auto")
        assert _blas.own_kernels == (cpu is not None) and dense_gemm.get_mode() == (1 if cpu else 0)
    assert _blas.info()["own_kernels"] == "off"
    # Zen 4: the AVX-512 build for the thin products only.
    monkeypatch.setattr(_blas, "thin_own_kernels_cpu", lambda cpuinfo=None: "Zen 4")
    _blas.configure("auto")
    assert _blas.own_kernels and dense_gemm.get_mode() == 3
    assert _blas.info()["own_kernels"] == "thin dense-layer shapes"
    monkeypatch.setattr(dense_gemm, "level", lambda: 3)
    _blas.configure("auto")
    assert dense_gemm.get_mode() == 1  # the AVX2 build's rule is thin already


@needs_kernels
def test_the_avx2_rule_takes_only_thin_products():
    # (M, K, N): thin whatever the layout; thin unless x is transposed; thin for none.
    thin = [(16, 784, 512), (256, 128, 784), (1024, 96, 1491), (512, 784, 10)]
    thin_unless_tx = [(512, 784, 64), (256, 2048, 32)]
    wide = [(128, 784, 512), (256, 512, 512), (256, 256, 784)]
    for M, K, N in thin + thin_unless_tx + wide:
        for t1, t2 in ((False, False), (False, True), (True, False)):
            got = dense_gemm.wanted(M, K, N, t1, t2)
            if dense_gemm.level() == 3:
                expected = (M, K, N) in thin or ((M, K, N) in thin_unless_tx and not t1)
                assert got == expected, (M, K, N, t1, t2)
            else:
                assert got  # AVX-512: every one of these is under 2**28 multiply-adds


@pytest.mark.skipif(dense_gemm.available(), reason="the kernels run here")
def test_without_avx2_every_product_is_declined(mode):
    mode(2)
    x = numpy.ones((64, 64), "float32")
    assert dense_gemm.gemm(x, x, None, False, False, False) is None
    numpy.testing.assert_array_equal(NumpyOps().gemm(x, x), 64)


@needs_kernels
def test_cblas_table_offers_float32_products_to_them(mode):
    """spaCy's parsers multiply through ops.cblas(): the table's sgemm tries these kernels first
    and leaves to the BLAS what they cannot compute exactly as asked."""
    _blas.configure("plait")
    table = NumpyOps().cblas()
    rng = numpy.random.default_rng(11)

    def run(M, K, N, trans1, trans2, alpha=1.0, beta=0.0):
        x = rng.standard_normal((K, M) if trans1 else (M, K), dtype="float32")
        y = rng.standard_normal((N, K) if trans2 else (K, N), dtype="float32")
        out = rng.standard_normal((M, N), dtype="float32")
        expected = alpha * _reference(x, y, trans1, trans2) + beta * out.astype("float64")
        before = dense_gemm.table_products()
        table.gemm(x, y, out=out, trans1=trans1, trans2=trans2, alpha=alpha, beta=beta)
        _assert_close(out, expected, K)
        return dense_gemm.table_products() - before

    # A parser's step (states x hidden @ classes x hidden ^T) and the other layouts, both betas.
    for trans1, trans2 in [(False, True), (False, False), (True, False), (True, True)]:
        for beta in (0.0, 1.0):
            assert run(37, 64, 93, trans1, trans2, beta=beta) == 1
    # Scaled products stay with the BLAS.
    assert run(37, 64, 93, False, True, alpha=2.0) == 0
    assert run(37, 64, 93, False, True, beta=0.5) == 0
    # The default rule: dense-layer shapes yes, a product past its bound and a tiny x @ y.T no.
    mode(1)
    assert run(37, 64, 93, False, True) == 1
    assert run(700, 700, 700, False, False) == 0
    assert run(8, 128, 10, False, True) == 0
    # Switched off: every product goes to the BLAS.
    mode(0)
    assert run(37, 64, 93, False, True) == 0
    # float64 never reaches them.
    x = rng.standard_normal((5, 4))
    before = dense_gemm.table_products()
    numpy.testing.assert_allclose(table.gemm(x, x, trans2=True), x @ x.T)
    assert dense_gemm.table_products() == before
