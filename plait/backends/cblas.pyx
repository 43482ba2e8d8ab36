# cython: language_level=3
"""A table of BLAS routines callable from `cdef nogil` code (thinc.backends.cblas's interface).

The table holds row-major (C order) gemm/axpy/scal pointers. plait's Cython code does
`from plait.backends.cblas cimport CBlas, sgemm` and calls `sgemm(cblas)(...)` without the GIL;
Python code can use `CBlas.gemm` / `CBlas.axpy` for the same routines.

The routines are those of the OpenBLAS numpy ships (its wheels export an ILP64 CBLAS), so that
they compute what NumpyOps.gemm computes and importing this module (which spaCy does at `import
spacy`) loads nothing else; where numpy's BLAS exports no such routines (another numpy build),
those of the BLAS that SciPy ships (Fortran interface, called with swapped operands), imported
at the first table. Float32 products go to plait's private OpenBLAS once _blas.py has loaded it,
where NumpyOps.gemm sends them. Every BLAS obeys plait's thread count (_threads.py).

Code compiled against thinc (spaCy) reaches the same table through `__pyx_capi__`, whose
capsules carry thinc's signature strings (see the end of this file and
../shared/spec/spacy-c-abi.md, 3.1).
"""
import threading

import numpy
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer, PyCapsule_New
from libc.stdint cimport int64_t, uintptr_t
from libc.string cimport memset


# numpy's OpenBLAS: the CBLAS interface with 64-bit sizes (scipy_cblas_*64_).
ctypedef void (*_n_sgemm_t)(int order, int transA, int transB, int64_t M, int64_t N, int64_t K,
                            float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                            float beta, float* C, int64_t ldc) noexcept nogil
ctypedef void (*_n_dgemm_t)(int order, int transA, int transB, int64_t M, int64_t N, int64_t K,
                            double alpha, const double* A, int64_t lda, const double* B,
                            int64_t ldb, double beta, double* C, int64_t ldc) noexcept nogil
ctypedef void (*_n_saxpy_t)(int64_t N, float alpha, const float* X, int64_t incX, float* Y,
                            int64_t incY) noexcept nogil
ctypedef void (*_n_daxpy_t)(int64_t N, double alpha, const double* X, int64_t incX, double* Y,
                            int64_t incY) noexcept nogil
ctypedef void (*_n_sscal_t)(int64_t N, float alpha, float* X, int64_t incX) noexcept nogil
ctypedef void (*_n_dscal_t)(int64_t N, double alpha, double* X, int64_t incX) noexcept nogil

# SciPy's BLAS (scipy.linalg.cython_blas): the Fortran interface, every argument by pointer.
ctypedef void (*_f_sgemm_t)(char* transa, char* transb, int* m, int* n, int* k, float* alpha,
                            float* a, int* lda, float* b, int* ldb, float* beta, float* c,
                            int* ldc) noexcept nogil
ctypedef void (*_f_dgemm_t)(char* transa, char* transb, int* m, int* n, int* k, double* alpha,
                            double* a, int* lda, double* b, int* ldb, double* beta, double* c,
                            int* ldc) noexcept nogil
ctypedef void (*_f_saxpy_t)(int* n, float* alpha, float* x, int* incx, float* y, int* incy) noexcept nogil
ctypedef void (*_f_daxpy_t)(int* n, double* alpha, double* x, int* incx, double* y, int* incy) noexcept nogil
ctypedef void (*_f_sscal_t)(int* n, float* alpha, float* x, int* incx) noexcept nogil
ctypedef void (*_f_dscal_t)(int* n, double* alpha, double* x, int* incx) noexcept nogil

# The two families of routines. _resolve_routines() fills one at the first table, before any
# routine can be called; the other stays all NULL.
cdef struct _NumpyRoutines:
    _n_sgemm_t sgemm
    _n_dgemm_t dgemm
    _n_saxpy_t saxpy
    _n_daxpy_t daxpy
    _n_sscal_t sscal
    _n_dscal_t dscal


cdef struct _FortranRoutines:
    _f_sgemm_t sgemm
    _f_dgemm_t dgemm
    _f_saxpy_t saxpy
    _f_daxpy_t daxpy
    _f_sscal_t sscal
    _f_dscal_t dscal


cdef _NumpyRoutines _n
cdef _FortranRoutines _f
memset(&_n, 0, sizeof(_n))
memset(&_f, 0, sizeof(_f))
cdef bint _resolved = False
_resolve_lock = threading.Lock()
# Which BLAS the tables use ("numpy" or "scipy") and its ctypes library (for the thread guard).
_routines = {"source": None, "library": None}

_NUMPY_SYMBOLS = ("sgemm", "dgemm", "saxpy", "daxpy", "sscal", "dscal")


cdef void* _capi_pointer(dict capi, str name) except NULL:
    capsule = capi[name]
    return PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule))


def _numpy_blas():
    """numpy's OpenBLAS as a ctypes library when it exports the ILP64 CBLAS routines, else None."""
    from plait.backends import _threads

    lib = _threads._openblas_of(numpy)
    if lib is None:
        return None
    try:
        for name in _NUMPY_SYMBOLS:
            getattr(lib, f"scipy_cblas_{name}64_")
    except AttributeError:
        return None
    return lib


def _resolve_routines(source=None):
    """Fill the routine pointers from numpy's OpenBLAS, else from SciPy's BLAS (once).

    `source` ("numpy" or "scipy") forces one, for tests; None picks numpy's where it can.
    """
    global _resolved, _n, _f
    import ctypes

    cdef dict capi
    if source not in (None, "numpy", "scipy"):
        raise ValueError(
            f"plait.backends.cblas: the routines' source must be 'numpy', 'scipy' or None "
            f"(numpy's where it can), got {source!r}."
        )
    with _resolve_lock:
        if _resolved and source in (None, _routines["source"]):
            return _routines["source"]
        lib = _numpy_blas() if source in (None, "numpy") else None
        if lib is None and source == "numpy":
            raise RuntimeError("plait.backends.cblas: numpy's BLAS exports no ILP64 CBLAS routines here.")
        # Both families are set before _resolved: a routine never sees a half-filled set.
        if lib is not None:
            address = lambda name: ctypes.cast(getattr(lib, f"scipy_cblas_{name}64_"), ctypes.c_void_p).value
            _n.sgemm = <_n_sgemm_t><uintptr_t>address("sgemm")
            _n.dgemm = <_n_dgemm_t><uintptr_t>address("dgemm")
            _n.saxpy = <_n_saxpy_t><uintptr_t>address("saxpy")
            _n.daxpy = <_n_daxpy_t><uintptr_t>address("daxpy")
            _n.sscal = <_n_sscal_t><uintptr_t>address("sscal")
            _n.dscal = <_n_dscal_t><uintptr_t>address("dscal")
            _routines.update(source="numpy", library=lib)
        else:
            try:
                from scipy.linalg import cython_blas
            except ImportError as err:
                raise ImportError(
                    "plait.backends.cblas: numpy's BLAS exports no CBLAS routines plait can call, "
                    f"and SciPy's BLAS cannot be imported ({err}). Install SciPy: pip install scipy"
                ) from err
            capi = cython_blas.__pyx_capi__
            _f.sgemm = <_f_sgemm_t>_capi_pointer(capi, "sgemm")
            _f.dgemm = <_f_dgemm_t>_capi_pointer(capi, "dgemm")
            _f.saxpy = <_f_saxpy_t>_capi_pointer(capi, "saxpy")
            _f.daxpy = <_f_daxpy_t>_capi_pointer(capi, "daxpy")
            _f.sscal = <_f_sscal_t>_capi_pointer(capi, "sscal")
            _f.dscal = <_f_dscal_t>_capi_pointer(capi, "dscal")
            memset(&_n, 0, sizeof(_n))
            from plait.backends import _threads
            import scipy

            _routines.update(source="scipy", library=_threads._openblas_of(scipy))
        _resolved = True
        _followed["guard"] = None  # the thread guard follows the routines' library
        return _routines["source"]


# A row-major product C = A @ B is the column-major product C.T = B.T @ A.T, so the Fortran
# routine is called with the operands swapped and M/N exchanged.
cdef void _sgemm_fortran(bint transA, bint transB, int M, int N, int K,
                         float alpha, const float* A, int lda, const float* B, int ldb,
                         float beta, float* C, int ldc) noexcept nogil:
    cdef char ta = b'T' if transA else b'N'
    cdef char tb = b'T' if transB else b'N'
    _f.sgemm(&tb, &ta, &N, &M, &K, &alpha, <float*>B, &ldb, <float*>A, &lda, &beta, C, &ldc)


# cblas_sgemm of plait's private OpenBLAS (row-major interface), once _blas.py has loaded it.
ctypedef void (*_cblas_sgemm_t)(int, int, int, int, int, int, float, const float*, int,
                                const float*, int, float, float*, int) noexcept nogil
cdef _cblas_sgemm_t _private_sgemm = NULL


# plait's own float32 products (_kernels_cpu/dense_gemm, the build of this processor's ISA), once
# _follow_plait_blas has found them: it takes a product (1) or leaves it to the BLAS (0), and
# checks its mode on each call, so `PLAIT_BLAS` and _blas.configure switch it without this module.
ctypedef int (*_own_sgemm_t)(bint, bint, int, int, int, float, const float*, int, const float*,
                             int, float, float*, int) noexcept nogil
cdef _own_sgemm_t _own_sgemm = NULL


# A product below SERIAL_WORK multiply-adds runs on one BLAS thread (_threads.py): spaCy's
# parsers call these routines at every step, and OpenBLAS's workers would spin after each. The
# thread-count functions of the BLAS behind each routine are set by _follow_plait_blas while
# plait plans more than one thread (NULL: no cost).
ctypedef int (*_get_threads_t)() noexcept nogil
ctypedef void (*_set_threads_t)(int) noexcept nogil
cdef _get_threads_t _table_get = NULL
cdef _set_threads_t _table_set = NULL
cdef _get_threads_t _private_get = NULL
cdef _set_threads_t _private_set = NULL
cdef double _serial_work = 0.0


cdef inline int _serial_begin(_get_threads_t get, _set_threads_t set_, int M, int N, int K) noexcept nogil:
    # The thread count to give back after the product, or 0 when nothing was changed.
    cdef int n
    if set_ == NULL or <double>M * <double>N * <double>K >= _serial_work:
        return 0
    n = get()
    if n <= 1:
        return 0
    set_(1)
    return n


# CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112
cdef void _sgemm_rowmajor(bint transA, bint transB, int M, int N, int K,
                          float alpha, const float* A, int lda, const float* B, int ldb,
                          float beta, float* C, int ldc) noexcept nogil:
    cdef _cblas_sgemm_t routine = _private_sgemm
    cdef _own_sgemm_t own = _own_sgemm
    cdef int restore
    if own != NULL and own(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc):
        return
    if routine != NULL:
        restore = _serial_begin(_private_get, _private_set, M, N, K)
        routine(101, 112 if transA else 111, 112 if transB else 111, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc)
        if restore:
            _private_set(restore)
        return
    restore = _serial_begin(_table_get, _table_set, M, N, K)
    if _n.sgemm != NULL:
        _n.sgemm(101, 112 if transA else 111, 112 if transB else 111, M, N, K,
                 alpha, A, lda, B, ldb, beta, C, ldc)
    else:
        _sgemm_fortran(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
    if restore:
        _table_set(restore)


cdef void _dgemm_rowmajor(bint transA, bint transB, int M, int N, int K,
                          double alpha, const double* A, int lda, const double* B, int ldb,
                          double beta, double* C, int ldc) noexcept nogil:
    cdef char ta = b'T' if transA else b'N'
    cdef char tb = b'T' if transB else b'N'
    cdef int restore = _serial_begin(_table_get, _table_set, M, N, K)
    if _n.dgemm != NULL:
        _n.dgemm(101, 112 if transA else 111, 112 if transB else 111, M, N, K,
                 alpha, A, lda, B, ldb, beta, C, ldc)
    else:
        _f.dgemm(&tb, &ta, &N, &M, &K, &alpha, <double*>B, &ldb, <double*>A, &lda, &beta, C, &ldc)
    if restore:
        _table_set(restore)


cdef void _saxpy(int N, float alpha, const float* X, int incX, float* Y, int incY) noexcept nogil:
    if _n.saxpy != NULL:
        _n.saxpy(N, alpha, X, incX, Y, incY)
    else:
        _f.saxpy(&N, &alpha, <float*>X, &incX, Y, &incY)


cdef void _daxpy(int N, double alpha, const double* X, int incX, double* Y, int incY) noexcept nogil:
    if _n.daxpy != NULL:
        _n.daxpy(N, alpha, X, incX, Y, incY)
    else:
        _f.daxpy(&N, &alpha, <double*>X, &incX, Y, &incY)


cdef void _sscal(int N, float alpha, float* X, int incX) noexcept nogil:
    if _n.sscal != NULL:
        _n.sscal(N, alpha, X, incX)
    else:
        _f.sscal(&N, &alpha, X, &incX)


cdef void _dscal(int N, double alpha, double* X, int incX) noexcept nogil:
    if _n.dscal != NULL:
        _n.dscal(N, alpha, X, incX)
    else:
        _f.dscal(&N, &alpha, X, &incX)


def _use_private_sgemm(uintptr_t address):
    """Send float32 products of every table to this cblas_sgemm address (0: back to the table's BLAS)."""
    global _private_sgemm
    _private_sgemm = <_cblas_sgemm_t>address


def _use_own_sgemm(uintptr_t address):
    """Offer float32 products of every table to plait's own kernels first (0: never)."""
    global _own_sgemm
    _own_sgemm = <_own_sgemm_t>address


def _set_serial_guard(uintptr_t table_get, uintptr_t table_set, uintptr_t private_get,
                      uintptr_t private_set, double work):
    """Install the thread-count functions the routines switch for small products (0: none):
    those of the tables' BLAS (numpy's or SciPy's) and of plait's private OpenBLAS."""
    global _table_get, _table_set, _private_get, _private_set, _serial_work
    _serial_work = work
    _table_get = <_get_threads_t>table_get
    _table_set = <_set_threads_t>table_set if table_get else NULL
    _private_get = <_get_threads_t>private_get
    _private_set = <_set_threads_t>private_set if private_get else NULL


_followed = {"handle": None, "limited": False, "guard": None, "own": False}


def _sgemm_rowmajor_address():
    """The address of the tables' float32 routine, for compiled code of plait's that calls it
    without a CBlas (the LSTM kernels): (transA, transB, M, N, K, alpha, A, lda, B, ldb, beta,
    C, ldc), row-major, going to the BLAS that _follow_plait_blas set up."""
    if not _resolved:
        _resolve_routines()
    return <uintptr_t>_sgemm_rowmajor


def _follow_plait_blas():
    """Point the tables at the BLAS NumpyOps.gemm uses, under plait's thread count (NumpyOps.cblas)."""
    # Absolute: under the thinc alias this module's __spec__ is named thinc.backends.cblas, and a
    # relative import would warn (ImportWarning: __package__ != __spec__.parent).
    from plait.backends import _blas, _threads

    _resolve_routines()
    if not _followed["limited"]:
        # SciPy's BLAS may have loaded (for the routines) after NumpyOps set the thread limit,
        # and would then run a thread per core; this holds it to plait's count, once.
        _followed["limited"] = True
        _threads._limit_blas(_threads.plan_threads(), only_lower=True)
    # A caller of the table multiplies without telling plait the sizes, so the private BLAS
    # that `auto` chose (Zen 4) loads now rather than at the first large NumpyOps product.
    if _blas.pending:
        _blas.load_pending()
    if not _followed["own"]:
        # Where the kernels run, the table offers them its float32 products; whether they take
        # one is their mode's (_blas sets it: the rule, every product, or none).
        from plait.backends._kernels_cpu import dense_gemm

        _followed["own"] = True
        _use_own_sgemm(dense_gemm.table_sgemm_address())
    handle = _blas._handle if _blas.info()["library"] else None
    if handle is not _followed["handle"]:
        import ctypes

        _followed["handle"] = handle
        _use_private_sgemm(0 if handle is None else
                           ctypes.cast(handle.scipy_cblas_sgemm, ctypes.c_void_p).value)
    guard = (_threads.plan_threads() > 1, handle)
    if guard != _followed["guard"]:
        _followed["guard"] = guard
        addresses = (_threads.serial_guard_addresses(handle, table=_routines["library"])
                     if guard[0] else (0, 0, 0, 0))
        _set_serial_guard(*addresses, float(_threads.SERIAL_WORK))


cdef class CBlas:
    """Function pointers to row-major BLAS routines (float32 and float64)."""

    def __cinit__(self):
        # In __cinit__, not __init__: the table must be valid as soon as the object exists.
        if not _resolved:
            _resolve_routines()
        self.funcs = <BlasFuncs*>PyMem_Malloc(sizeof(BlasFuncs))
        if self.funcs == NULL:
            raise MemoryError("CBlas: could not allocate its function table.")
        self.funcs.sgemm = _sgemm_rowmajor
        self.funcs.dgemm = _dgemm_rowmajor
        self.funcs.saxpy = _saxpy
        self.funcs.daxpy = _daxpy
        self.funcs.sscal = _sscal
        self.funcs.dscal = _dscal
        self._reserved = NULL

    def __dealloc__(self):
        PyMem_Free(self.funcs)
        self.funcs = NULL

    def gemm(self, A, B, out=None, *, bint trans1=False, bint trans2=False, alpha=1.0, beta=0.0):
        """out = alpha * op(A) @ op(B) + beta * out through the table's gemm (C-contiguous float arrays)."""
        if A.dtype != B.dtype or A.dtype not in (numpy.float32, numpy.float64):
            raise TypeError(f"CBlas.gemm: A and B must both be float32 or both float64, got {A.dtype} and {B.dtype}.")
        if A.ndim != 2 or B.ndim != 2:
            raise ValueError(f"CBlas.gemm: A and B must be 2d, got shapes {A.shape} and {B.shape}.")
        A = numpy.ascontiguousarray(A)
        B = numpy.ascontiguousarray(B)
        cdef int M = A.shape[1] if trans1 else A.shape[0]
        cdef int K = A.shape[0] if trans1 else A.shape[1]
        cdef int K2 = B.shape[1] if trans2 else B.shape[0]
        cdef int N = B.shape[0] if trans2 else B.shape[1]
        if K != K2:
            raise ValueError(f"CBlas.gemm: inner dimensions differ: {K} vs {K2} (A {A.shape}, B {B.shape}).")
        if out is None:
            out = numpy.zeros((M, N), dtype=A.dtype)
        elif out.shape != (M, N) or out.dtype != A.dtype or not out.flags["C_CONTIGUOUS"]:
            raise ValueError(f"CBlas.gemm: 'out' must be C-contiguous {A.dtype} of shape {(M, N)}, got {out.dtype} {out.shape}.")
        cdef float[:, ::1] sA, sB, sC
        cdef double[:, ::1] dA, dB, dC
        cdef float s_alpha = alpha, s_beta = beta
        cdef double d_alpha = alpha, d_beta = beta
        if M == 0 or N == 0:
            return out
        if K == 0:
            out *= beta
            return out
        if A.dtype == numpy.float32:
            sA, sB, sC = A, B, out
            with nogil:
                self.funcs.sgemm(trans1, trans2, M, N, K, s_alpha, &sA[0, 0], sA.shape[1],
                                 &sB[0, 0], sB.shape[1], s_beta, &sC[0, 0], N)
        else:
            dA, dB, dC = A, B, out
            with nogil:
                self.funcs.dgemm(trans1, trans2, M, N, K, d_alpha, &dA[0, 0], dA.shape[1],
                                 &dB[0, 0], dB.shape[1], d_beta, &dC[0, 0], N)
        return out

    def axpy(self, alpha, X, Y):
        """Y += alpha * X in place through the table's axpy (1d contiguous float arrays)."""
        if X.shape != Y.shape or X.dtype != Y.dtype or not Y.flags["C_CONTIGUOUS"]:
            raise ValueError(f"CBlas.axpy: X and Y must match in shape and dtype and Y be contiguous, got {X.dtype}{X.shape}, {Y.dtype}{Y.shape}.")
        X = numpy.ascontiguousarray(X).ravel()
        flatY = Y.reshape(-1)
        cdef float[::1] sX, sY
        cdef double[::1] dX, dY
        cdef float s_alpha = alpha
        cdef double d_alpha = alpha
        if X.shape[0] == 0:
            return Y
        if X.dtype == numpy.float32:
            sX, sY = X, flatY
            with nogil:
                self.funcs.saxpy(sX.shape[0], s_alpha, &sX[0], 1, &sY[0], 1)
        elif X.dtype == numpy.float64:
            dX, dY = X, flatY
            with nogil:
                self.funcs.daxpy(dX.shape[0], d_alpha, &dX[0], 1, &dY[0], 1)
        else:
            raise TypeError(f"CBlas.axpy: float32 or float64 arrays expected, got {X.dtype}.")
        return Y


# The C functions of thinc.backends.cblas's __pyx_capi__. Cython would export them under
# signature strings derived from this module's path (plait...), which spaCy rejects ("wrong
# signature"); the capsules are made here instead, with thinc's strings. PyCapsule keeps the
# name pointer, so the strings are static.
cdef extern from *:
    """
    static const char plait_cblas_sig_saxpy[] = "__pyx_t_5thinc_8backends_5cblas_saxpy_ptr (struct __pyx_obj_5thinc_8backends_5cblas_CBlas *)";
    static const char plait_cblas_sig_sgemm[] = "__pyx_t_5thinc_8backends_5cblas_sgemm_ptr (struct __pyx_obj_5thinc_8backends_5cblas_CBlas *)";
    static const char plait_cblas_sig_daxpy[] = "__pyx_t_5thinc_8backends_5cblas_daxpy_ptr (struct __pyx_obj_5thinc_8backends_5cblas_CBlas *)";
    static const char plait_cblas_sig_set_saxpy[] = "void (struct __pyx_obj_5thinc_8backends_5cblas_CBlas *, __pyx_t_5thinc_8backends_5cblas_saxpy_ptr)";
    static const char plait_cblas_sig_set_sgemm[] = "void (struct __pyx_obj_5thinc_8backends_5cblas_CBlas *, __pyx_t_5thinc_8backends_5cblas_sgemm_ptr)";
    static const char plait_cblas_sig_set_daxpy[] = "void (struct __pyx_obj_5thinc_8backends_5cblas_CBlas *, __pyx_t_5thinc_8backends_5cblas_daxpy_ptr)";
    """
    const char* plait_cblas_sig_saxpy
    const char* plait_cblas_sig_sgemm
    const char* plait_cblas_sig_daxpy
    const char* plait_cblas_sig_set_saxpy
    const char* plait_cblas_sig_set_sgemm
    const char* plait_cblas_sig_set_daxpy


cdef saxpy_ptr _capi_saxpy(CBlas cblas) noexcept nogil:
    return saxpy(cblas)

cdef sgemm_ptr _capi_sgemm(CBlas cblas) noexcept nogil:
    return sgemm(cblas)

cdef daxpy_ptr _capi_daxpy(CBlas cblas) noexcept nogil:
    return daxpy(cblas)

cdef void _capi_set_saxpy(CBlas cblas, saxpy_ptr f) noexcept nogil:
    set_saxpy(cblas, f)

cdef void _capi_set_sgemm(CBlas cblas, sgemm_ptr f) noexcept nogil:
    set_sgemm(cblas, f)

cdef void _capi_set_daxpy(CBlas cblas, daxpy_ptr f) noexcept nogil:
    set_daxpy(cblas, f)


globals()["__pyx_capi__"] = {
    "saxpy": PyCapsule_New(<void*>_capi_saxpy, plait_cblas_sig_saxpy, NULL),
    "sgemm": PyCapsule_New(<void*>_capi_sgemm, plait_cblas_sig_sgemm, NULL),
    "daxpy": PyCapsule_New(<void*>_capi_daxpy, plait_cblas_sig_daxpy, NULL),
    "set_saxpy": PyCapsule_New(<void*>_capi_set_saxpy, plait_cblas_sig_set_saxpy, NULL),
    "set_sgemm": PyCapsule_New(<void*>_capi_set_sgemm, plait_cblas_sig_set_sgemm, NULL),
    "set_daxpy": PyCapsule_New(<void*>_capi_set_daxpy, plait_cblas_sig_set_daxpy, NULL),
}
