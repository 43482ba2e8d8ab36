"""NumpyOps.cblas() gives a usable BLAS table, from Python and from nogil Cython; other backends refuse."""
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy
import pytest

from plait.backends import CupyOps, NumpyOps, Ops


def test_cblas_only_on_numpy_ops():
    with pytest.raises(NotImplementedError, match="NumpyOps"):
        Ops().cblas()
    # CupyOps refuses without needing a GPU: the method is looked up on the class.
    with pytest.raises(NotImplementedError):
        CupyOps.cblas(object.__new__(CupyOps))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("trans1,trans2", [(False, False), (True, False), (False, True), (True, True)])
def test_cblas_gemm_matches_numpy(dtype, trans1, trans2):
    rng = numpy.random.default_rng(0)
    A = rng.normal(size=(5, 3)).astype(dtype)
    B = rng.normal(size=(3, 4)).astype(dtype)
    A_in = numpy.ascontiguousarray(A.T) if trans1 else A
    B_in = numpy.ascontiguousarray(B.T) if trans2 else B
    cblas = NumpyOps().cblas()
    out = cblas.gemm(A_in, B_in, trans1=trans1, trans2=trans2)
    numpy.testing.assert_allclose(out, A @ B, rtol=1e-5)
    C = numpy.ones((5, 4), dtype=dtype)
    cblas.gemm(A, B, out=C, alpha=2.0, beta=0.5)
    numpy.testing.assert_allclose(C, 2 * (A @ B) + 0.5, rtol=1e-5)


def test_cblas_products_below_serial_work_run_on_one_blas_thread():
    """The table's gemm holds its BLAS to one thread for a small product and gives the count
    back (plait/backends/_threads.py, SERIAL_WORK); a big one keeps the BLAS's count. Observed
    through stand-in thread-count functions installed where SciPy's OpenBLAS's go."""
    import ctypes

    from plait.backends import cblas as cblas_module

    calls = []

    def get():
        calls.append("get")
        return 4

    GET = ctypes.CFUNCTYPE(ctypes.c_int)(get)
    SET = ctypes.CFUNCTYPE(None, ctypes.c_int)(lambda n: calls.append(("set", n)))
    address = lambda f: ctypes.cast(f, ctypes.c_void_p).value  # noqa: E731
    table = NumpyOps().cblas()
    cblas_module._set_serial_guard(address(GET), address(SET), 0, 0, 1000.0)
    try:
        small = numpy.ones((5, 6), "float64")
        assert (table.gemm(small, small, trans2=True) == 6).all()  # 5 * 6 * 5 = 150 multiply-adds
        assert calls == ["get", ("set", 1), ("set", 4)]
        calls.clear()
        big = numpy.ones((20, 20), "float64")
        assert (table.gemm(big, big) == 20).all()  # 8000 >= 1000
        assert calls == []
    finally:
        cblas_module._set_serial_guard(0, 0, 0, 0, 0.0)
        cblas_module._followed["guard"] = None


def test_cblas_axpy_and_errors():
    cblas = NumpyOps().cblas()
    Y = numpy.ones(4, dtype="f")
    cblas.axpy(2.0, numpy.arange(4, dtype="f"), Y)
    assert Y.tolist() == [1.0, 3.0, 5.0, 7.0]
    with pytest.raises(ValueError, match="inner dimensions"):
        cblas.gemm(numpy.ones((2, 3), "f"), numpy.ones((2, 3), "f"))
    with pytest.raises(TypeError, match="float32"):
        cblas.gemm(numpy.ones((2, 3), "f"), numpy.ones((3, 3), "f8"))


def test_cblas_from_nogil_cython(tmp_path):
    """Compile a tiny extension that cimports plait.backends.cblas and calls sgemm without the GIL."""
    pytest.importorskip("Cython")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    (tmp_path / "use_cblas.pyx").write_text(textwrap.dedent('''
        # cython: language_level=3
        from plait.backends.cblas cimport CBlas, sgemm

        def matmul(CBlas cblas, float[:, ::1] A, float[:, ::1] B, float[:, ::1] C):
            cdef int M = A.shape[0], N = B.shape[1], K = A.shape[1]
            with nogil:
                sgemm(cblas)(False, False, M, N, K, 1.0, &A[0, 0], K, &B[0, 0], N, 0.0, &C[0, 0], N)
    '''))
    # An editable install keeps the .pxd files in the source tree, off sys.path: point Cython at it.
    import plait

    root = str(Path(plait.__file__).resolve().parents[1])
    (tmp_path / "setup.py").write_text(textwrap.dedent(f'''
        from setuptools import setup
        from Cython.Build import cythonize
        setup(ext_modules=cythonize("use_cblas.pyx", quiet=True, include_path=[{root!r}]))
    '''))
    build = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace", "-q"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    check = subprocess.run(
        [sys.executable, "-c", textwrap.dedent('''
            import numpy, use_cblas
            from plait.backends import NumpyOps
            A = numpy.arange(6, dtype="f").reshape(2, 3); B = numpy.arange(12, dtype="f").reshape(3, 4)
            C = numpy.zeros((2, 4), dtype="f")
            use_cblas.matmul(NumpyOps().cblas(), A, B, C)
            assert numpy.allclose(C, A @ B), C
            print("ok")
        ''')],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert check.returncode == 0 and "ok" in check.stdout, check.stderr[-3000:]


@pytest.fixture(params=["numpy", "scipy"])
def routine_source(request):
    """The table's routines from numpy's OpenBLAS (ILP64 CBLAS), then from SciPy's (Fortran)."""
    from plait.backends import cblas as cblas_module

    if request.param == "numpy" and cblas_module._numpy_blas() is None:
        pytest.skip("numpy's BLAS exports no ILP64 CBLAS routines in this build of numpy")
    before = cblas_module._resolve_routines()
    cblas_module._resolve_routines(request.param)
    try:
        yield request.param
    finally:
        cblas_module._resolve_routines(before)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cblas_routines_agree_whichever_blas_serves_them(routine_source, dtype):
    from plait.backends import cblas as cblas_module

    assert cblas_module._routines["source"] == routine_source
    rng = numpy.random.default_rng(1)
    table = NumpyOps().cblas()
    A = rng.normal(size=(7, 5)).astype(dtype)
    B = rng.normal(size=(5, 3)).astype(dtype)
    for trans1, trans2 in [(False, False), (True, False), (False, True), (True, True)]:
        A_in = numpy.ascontiguousarray(A.T) if trans1 else A
        B_in = numpy.ascontiguousarray(B.T) if trans2 else B
        C = numpy.full((7, 3), 2.0, dtype=dtype)
        table.gemm(A_in, B_in, out=C, trans1=trans1, trans2=trans2, alpha=0.5, beta=-1.0)
        numpy.testing.assert_allclose(C, 0.5 * (A @ B) - 2.0, rtol=1e-5, atol=1e-6)
    Y = numpy.arange(6, dtype=dtype)
    table.axpy(-2.0, numpy.ones(6, dtype=dtype), Y)
    assert Y.tolist() == [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]


def test_an_unknown_routine_source_is_refused_and_changes_nothing():
    from plait.backends import cblas as cblas_module

    before = cblas_module._resolve_routines()
    with pytest.raises(ValueError, match="'numpy', 'scipy' or None.*'mkl'"):
        cblas_module._resolve_routines("mkl")
    assert cblas_module._routines["source"] == before
    assert (NumpyOps().cblas().gemm(numpy.ones((2, 3), "f"), numpy.ones((3, 2), "f")) == 3).all()


def test_importing_the_table_module_loads_no_scipy():
    """spaCy imports thinc.backends.cblas at `import spacy`: with numpy's BLAS serving the
    routines, neither that import nor a table brings SciPy (about 100 ms and 150 modules)."""
    from plait.backends import cblas as cblas_module

    if cblas_module._numpy_blas() is None:
        pytest.skip("numpy's BLAS exports no ILP64 CBLAS routines in this build of numpy")
    code = textwrap.dedent('''
        import sys
        import numpy
        import plait.backends.cblas as cblas
        from plait.backends import NumpyOps
        table = NumpyOps().cblas()
        A = numpy.ones((2, 3), "f")
        assert (table.gemm(A, A, trans2=True) == 3).all()
        print(cblas._routines["source"], sorted(m for m in sys.modules if m.split(".")[0] == "scipy"))
    ''')
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["numpy", "[]"], proc.stdout
