"""NumpyOps.gemm through plait's own OpenBLAS (plait/backends/_blas.py) against numpy.matmul."""
import json
import os
import subprocess
import sys

import numpy
import pytest

from plait.backends import NumpyOps, Ops, _blas
from plait.backends._kernels_cpu import gemm as gemm_kernel

try:
    _blas._private_library_path()
    HAVE_PRIVATE = True
except ImportError:
    HAVE_PRIVATE = False

needs_private = pytest.mark.skipif(not HAVE_PRIVATE, reason="scipy-openblas32 is not installed")


@pytest.fixture
def mode():
    """Switch the BLAS mode for one test, then go back to the process's configuration."""
    yield _blas.configure
    _blas.configure(os.environ.get(_blas.VARIABLE, "auto").strip().lower() or "auto")


def _operand(rng, rows, cols, dtype, layout):
    """A (rows, cols) array whose memory layout is `layout`."""
    if layout == "C":
        return rng.standard_normal((rows, cols)).astype(dtype)
    if layout == "F":
        return numpy.asfortranarray(rng.standard_normal((rows, cols)).astype(dtype))
    if layout == "padded":  # rows of a wider buffer: leading dimension > cols
        return rng.standard_normal((rows, cols + 3)).astype(dtype)[:, 1 : cols + 1]
    if layout == "padded_T":  # columns of a taller buffer, seen transposed
        return rng.standard_normal((cols, rows + 5)).astype(dtype)[:, 2 : rows + 2].T
    if layout == "strided":  # every other column: no unit stride, the kernel must decline
        return rng.standard_normal((rows, 2 * cols)).astype(dtype)[:, ::2]
    raise AssertionError(layout)


LAYOUTS = ["C", "F", "padded", "padded_T", "strided"]


@needs_private
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout_x", LAYOUTS)
@pytest.mark.parametrize("layout_y", LAYOUTS)
@pytest.mark.parametrize("trans1,trans2", [(False, False), (False, True), (True, False), (True, True)])
def test_gemm_matches_numpy_for_every_layout(mode, dtype, layout_x, layout_y, trans1, trans2):
    mode("openblas")
    rng = numpy.random.default_rng(hash((dtype, layout_x, layout_y, trans1, trans2)) % 2**32)
    M, K, N = 7, 13, 5
    x = _operand(rng, *((K, M) if trans1 else (M, K)), dtype, layout_x)
    y = _operand(rng, *((N, K) if trans2 else (K, N)), dtype, layout_y)
    x_before, y_before = x.copy(), y.copy()
    expected = (x.T if trans1 else x).astype("float64") @ (y.T if trans2 else y).astype("float64")
    ops = NumpyOps()
    got = ops.gemm(x, y, trans1=trans1, trans2=trans2)
    assert got.dtype == numpy.dtype(dtype) and got.shape == (M, N)
    tol = 1e-5 if dtype == "float32" else 1e-12
    numpy.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    out = numpy.full((M, N), numpy.nan, dtype=dtype)
    assert ops.gemm(x, y, out=out, trans1=trans1, trans2=trans2) is out
    numpy.testing.assert_allclose(out, expected, rtol=tol, atol=tol)
    numpy.testing.assert_array_equal(x, x_before)
    numpy.testing.assert_array_equal(y, y_before)


@needs_private
@pytest.mark.parametrize("seed", range(12))
def test_gemm_random_shapes_agree_with_reference(mode, seed):
    mode("openblas")
    rng = numpy.random.default_rng(seed)
    M, K, N = (int(v) for v in rng.integers(1, 300, size=3))
    trans1, trans2 = bool(rng.integers(2)), bool(rng.integers(2))
    x = rng.standard_normal((K, M) if trans1 else (M, K)).astype("float32")
    y = rng.standard_normal((N, K) if trans2 else (K, N)).astype("float32")
    got = NumpyOps().gemm(x, y, trans1=trans1, trans2=trans2)
    ref = Ops().gemm(x, y, trans1=trans1, trans2=trans2)
    numpy.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-4 * numpy.sqrt(K))


@needs_private
def test_kernel_declines_what_it_does_not_take(mode):
    mode("openblas")
    rng = numpy.random.default_rng(0)
    a = rng.standard_normal((4, 6)).astype("float32")
    b = rng.standard_normal((6, 3)).astype("float32")
    assert gemm_kernel.gemm(a, b, None, False, False) is not None
    assert gemm_kernel.gemm(a, b.astype("float64"), None, False, False) is None  # mixed dtypes
    assert gemm_kernel.gemm(a.astype("float16"), b.astype("float16"), None, False, False) is None
    assert gemm_kernel.gemm(a, b[:5], None, False, False) is None  # inner dimensions differ
    assert gemm_kernel.gemm(a.tolist(), b, None, False, False) is None  # not arrays
    assert gemm_kernel.gemm(a[None], b, None, False, False) is None  # 3-d
    assert gemm_kernel.gemm(a[:, ::-1], b, None, False, False) is None  # negative stride
    assert gemm_kernel.gemm(a, b, numpy.empty((4, 3), "float64"), False, False) is None
    assert gemm_kernel.gemm(a, b, numpy.empty((3, 4), "float32").T, False, False) is None
    readonly = numpy.empty((4, 3), "float32")
    readonly.flags.writeable = False
    assert gemm_kernel.gemm(a, b, readonly, False, False) is None


@needs_private
def test_output_overlapping_an_input_still_gives_the_product(mode):
    mode("openblas")
    rng = numpy.random.default_rng(1)
    buf = rng.standard_normal((8, 8)).astype("float32")
    x = buf.copy()
    expected = x @ x
    assert gemm_kernel.gemm(buf, buf, buf, False, False) is None
    got = NumpyOps().gemm(buf, buf, out=buf)
    numpy.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("chosen", ["numpy", "auto", "openblas"])
def test_invalid_calls_raise_the_reference_errors(mode, chosen):
    mode(chosen)
    ops = NumpyOps()
    x = numpy.ones((3, 4), "float32")
    with pytest.raises(ValueError, match="inner dimensions differ"):
        ops.gemm(x, numpy.ones((5, 2), "float32"))
    with pytest.raises(ValueError, match="'out' must have shape"):
        ops.gemm(x, numpy.ones((4, 2), "float32"), out=numpy.empty((2, 3), "float32"))
    with pytest.raises(ValueError, match="gemm"):
        ops.gemm(numpy.ones(3, "float32"), numpy.ones((4, 2), "float32"))
    # Integer operands take the reference's path: numpy's product, as in Thinc.
    assert ops.gemm(x, numpy.ones((4, 2), "int32")).dtype == numpy.float64


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("trans1,trans2", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("M,K,N", [(384, 1, 1024), (1, 1, 6), (5, 1, 1), (7, 13, 5), (1, 53, 128), (0, 3, 4), (3, 1, 0)])
@pytest.mark.parametrize("with_out", [False, True])
def test_numpy_route_equals_the_reference(mode, dtype, trans1, trans2, M, K, N, with_out):
    """Without plait's own BLAS, NumpyOps.gemm is numpy.matmul, or a broadcast multiply for an
    inner dimension of 1 (numpy.matmul makes that product in a plain loop, 8x slower): the
    reference's values either way, and an `out` of the wrong kind still meets its checks."""
    mode("numpy")
    rng = numpy.random.default_rng(M * 1000 + K * 10 + N)
    x = rng.standard_normal((K, M) if trans1 else (M, K)).astype(dtype)
    y = rng.standard_normal((N, K) if trans2 else (K, N)).astype(dtype)
    expected = Ops().gemm(x, y, trans1=trans1, trans2=trans2)
    out = numpy.full((M, N), numpy.nan, dtype=dtype) if with_out else None
    got = NumpyOps().gemm(x, y, out=out, trans1=trans1, trans2=trans2)
    assert got.dtype == expected.dtype and got.shape == (M, N)
    numpy.testing.assert_array_equal(got, expected)
    if with_out:
        assert got is out
        with pytest.raises(ValueError, match="'out' must have shape"):
            NumpyOps().gemm(x, y, out=numpy.empty((M + 1, N), dtype), trans1=trans1, trans2=trans2)


def test_numpy_mode_installs_nothing(mode):
    got = mode("numpy")
    assert got["library"] is None and "PLAIT_BLAS=numpy" in got["reason"]
    a = numpy.ones((2, 2), "float32")
    assert gemm_kernel.gemm(a, a, None, False, False) is None
    numpy.testing.assert_array_equal(NumpyOps().gemm(a, a), a @ a)


def test_unknown_mode_is_refused(mode, monkeypatch):
    with pytest.raises(ValueError, match="'fastest'.*auto, numpy, openblas"):
        mode("fastest")
    monkeypatch.setenv("PLAIT_BLAS", "mkl")
    with pytest.raises(ValueError, match="PLAIT_BLAS='mkl'.*auto, numpy, openblas"):
        _blas._mode()


ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
flags\t\t: fpu sse2 avx2 fma avx512f avx512bw

processor\t: 1
vendor_id\t: AuthenticAMD
"""


def test_zen4_and_zen5_detection():
    assert _blas.is_zen4(ZEN4) and not _blas.is_zen5(ZEN4)
    assert not _blas.is_zen4(ZEN4.replace("avx512f ", ""))  # Zen 3: OpenBLAS already picks AVX2
    zen5 = ZEN4.replace(": 25", ": 26")
    assert _blas.is_zen5(zen5) and not _blas.is_zen4(zen5)
    assert not _blas.is_zen5(zen5.replace("avx512f ", ""))
    for other in (ZEN4.replace("AuthenticAMD", "GenuineIntel"), "", ZEN4.replace(": 25", ": x")):
        assert not _blas.is_zen4(other) and not _blas.is_zen5(other)


EMERALD_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 207
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse2 avx2 fma avx512f avx512bw avx512_fp16
"""


def test_own_kernel_processors_are_the_measured_ones():
    """`auto` uses plait's own products only on processors where they were measured to win."""
    zen5 = ZEN4.replace(": 25", ": 26")
    assert _blas.avx512_cpu(zen5) == ("AuthenticAMD", 26, 17)
    assert _blas.own_kernels_cpu(zen5) == "Zen 5"
    assert _blas.own_kernels_cpu(zen5.replace(": 17", ": 68")) == "Zen 5"  # every Zen 5 model
    assert _blas.own_kernels_cpu(EMERALD_RAPIDS) == "Emerald Rapids"
    # Zen 4 takes them for thin products only; not measured: Sapphire Rapids (model 143), Ice
    # Lake (106); without AVX-512 nothing.
    assert _blas.own_kernels_cpu(ZEN4) is None
    assert _blas.thin_own_kernels_cpu(ZEN4) == "Zen 4"
    assert _blas.thin_own_kernels_cpu(ZEN4.replace(": 17", ": 97")) == "Zen 4"  # every Zen 4 model
    assert _blas.thin_own_kernels_cpu(zen5) is None and _blas.thin_own_kernels_cpu(EMERALD_RAPIDS) is None
    assert _blas.thin_own_kernels_cpu(ZEN4.replace("avx512f ", "")) is None
    assert _blas.own_kernels_cpu(EMERALD_RAPIDS.replace(": 207", ": 143")) is None
    assert _blas.own_kernels_cpu(EMERALD_RAPIDS.replace(": 207", ": 106")) is None
    assert _blas.own_kernels_cpu(EMERALD_RAPIDS.replace("avx512f ", "")) is None
    assert _blas.avx512_cpu(EMERALD_RAPIDS.replace(": 207", ": x")) is None
    assert _blas.avx512_cpu("") is None
    # Intel processors keep numpy's OpenBLAS: the private copy was no faster there.
    assert not _blas.is_zen4(EMERALD_RAPIDS) and not _blas.is_zen5(EMERALD_RAPIDS)


@needs_private
def test_auto_mode_on_zen4_loads_avx2_kernels_at_the_first_big_float32_product():
    """In a fresh process: what `auto` picks here, when it loads, and the threads it gets."""
    code = r"""
import json, numpy, threadpoolctl
from plait.backends import NumpyOps, _blas
from plait.backends._kernels_cpu import dense_gemm
ops = NumpyOps()
def libs():
    return [(i["filepath"], i["num_threads"]) for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
before = _blas.info()
a64 = numpy.ones((8, 8))
ops.gemm(a64, a64)
after_f64 = _blas.info()
small = numpy.ones((8, 8), "float32")
ok = bool((ops.gemm(small, small) == 8).all())
after_small = _blas.info()
with threadpoolctl.threadpool_limits(1, user_api="blas"):
    # Past the size plait's own kernels take on Zen 5 (2**28 multiply-adds): a BLAS product.
    a32 = numpy.ones((700, 700), "float32")
    ok = ok and bool((ops.gemm(a32, a32) == 700).all())
print(json.dumps({"before": before, "after_f64": after_f64, "after_small": after_small,
                  "info": _blas.info(), "ok": ok,
                  "zen4": _blas.is_zen4(), "zen5": _blas.is_zen5(), "libs": libs(),
                  "own_cpu": _blas.own_kernels_cpu(), "thin_cpu": _blas.thin_own_kernels_cpu(),
                  "level": dense_gemm.level()}))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PLAIT_BLAS", "OPENBLAS_CORETYPE")}
    env["PLAIT_NUM_THREADS"] = "2"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ok"]
    assert got["before"]["library"] is None and got["after_f64"]["library"] is None
    # An 8 x 8 x 8 product is not worth loading it for; a 700^3 one is.
    assert got["after_small"]["library"] is None
    # plait's own products: with the AVX-512 build on the measured processors (only the thin
    # products on some), with the AVX2 build on any (its rule takes thin products only).
    own = got["level"] == 3 or (got["level"] == 4 and got["own_cpu"])
    thin = not own and got["level"] == 4 and got["thin_cpu"]
    assert got["info"]["own_kernels"] == ("dense-layer shapes" if own else
                                          "thin dense-layer shapes" if thin else "off")
    if got["zen4"] or got["zen5"]:
        assert "first float32 product" in got["before"]["reason"]
        assert got["info"]["library"] and got["info"]["float64"] is False
        if got["zen4"]:
            assert got["info"]["corename"] == "Haswell"  # the AVX2 kernels
        else:
            assert got["info"]["corename"] != "Haswell"  # OpenBLAS's own (AVX-512) choice
        private = [n for path, n in got["libs"] if path == got["info"]["library"]]
        # Loaded inside a 1-thread block, it starts with 1 thread.
        assert private == [1]
    else:
        assert got["info"]["library"] is None


@needs_private
def test_user_coretype_is_respected():
    code = "from plait.backends import NumpyOps, _blas; NumpyOps(); import json; print(json.dumps(_blas.info()))"
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell")
    env.pop("PLAIT_BLAS", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["library"] is None or not (_blas.is_zen4() or _blas.is_zen5())
    if _blas.is_zen4() or _blas.is_zen5():
        assert "OPENBLAS_CORETYPE=Haswell" in got["reason"]


def _misaligned(a):
    """A copy of `a` whose data starts one byte past an aligned address (numpy's aligned flag off)."""
    buf = numpy.zeros(a.nbytes + 1, dtype="uint8")
    out = numpy.frombuffer(buf.data, dtype=a.dtype, count=a.size, offset=1).reshape(a.shape)
    out[...] = a
    assert not out.flags.aligned
    return out


@pytest.mark.parametrize("chosen", ["auto", "numpy", "openblas", "plait"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("form", ["byteswapped", "misaligned"])
def test_byteswapped_and_misaligned_arrays_give_the_product(mode, chosen, dtype, form):
    # The BLAS and plait's kernels read raw machine floats: a big-endian or misaligned operand
    # must go to numpy.matmul (it gave zeros through the BLAS until the kernels checked).
    if chosen in ("openblas", "plait") and not HAVE_PRIVATE:
        pytest.skip("scipy-openblas32 is not installed")
    mode(chosen)
    rng = numpy.random.default_rng(5)
    x = rng.standard_normal((40, 30)).astype(dtype)
    y = rng.standard_normal((30, 20)).astype(dtype)
    expected = x.astype("float64") @ y.astype("float64")
    swap = (lambda a: a.astype(a.dtype.newbyteorder(">" if numpy.little_endian else "<"))) if form == "byteswapped" else _misaligned
    ops = NumpyOps()
    tol = 1e-4 if dtype == "float32" else 1e-10
    for a, b in ((swap(x), y), (x, swap(y)), (swap(x), swap(y))):
        numpy.testing.assert_allclose(ops.gemm(a, b), expected, rtol=tol, atol=tol)
    out = swap(numpy.zeros((40, 20), dtype))
    ops.gemm(x, y, out=out)
    numpy.testing.assert_allclose(out, expected, rtol=tol, atol=tol)
    acc = swap(numpy.ones((40, 20), dtype))
    if not ops._gemm_accumulate(x, y, acc):
        acc += ops.gemm(x, y)
    numpy.testing.assert_allclose(acc, expected + 1, rtol=tol, atol=tol)
