# cython: language_level=3
"""Matrix products through a BLAS that plait loads itself (see plait/backends/_blas.py).

`gemm` takes 2-d float32/float64 arrays whose rows or columns are contiguous (a transposed
view is handed to the BLAS as a transpose flag, never copied) and writes `A @ B` into a
C-contiguous `out`. It declines (returns None) whatever it does not handle: no routine loaded
for the dtype, mixed dtypes, other strides, an `out` that overlaps an input, dimensions past the
BLAS's 32-bit integers. The caller then hands the case to numpy.matmul.
"""
cimport numpy as cnp
from libc.stdint cimport uintptr_t

from ._arrays cimport _product_dims, _product_operand, _row_major, _shares

cnp.import_array()

cdef enum:
    ROW_MAJOR = 101
    NO_TRANS = 111
    TRANS = 112

ctypedef void (*sgemm_t)(int, int, int, int, int, int, float, const float*, int,
                         const float*, int, float, float*, int) noexcept nogil
ctypedef void (*dgemm_t)(int, int, int, int, int, int, double, const double*, int,
                         const double*, int, double, double*, int) noexcept nogil

cdef sgemm_t _sgemm = NULL
cdef dgemm_t _dgemm = NULL


def set_routines(uintptr_t sgemm_address, uintptr_t dgemm_address):
    """Install the cblas_sgemm / cblas_dgemm addresses to call (0: none for that dtype)."""
    global _sgemm, _dgemm
    _sgemm = <sgemm_t>sgemm_address
    _dgemm = <dgemm_t>dgemm_address


def gemm(x_obj, y_obj, out, bint trans1, bint trans2):
    """out = op(x) @ op(y) through the loaded BLAS, or None to decline (see module docstring)."""
    if _sgemm == NULL and _dgemm == NULL:
        return None
    if not isinstance(x_obj, cnp.ndarray) or not isinstance(y_obj, cnp.ndarray):
        return None
    cdef cnp.ndarray x = <cnp.ndarray>x_obj
    cdef cnp.ndarray y = <cnp.ndarray>y_obj
    if not _product_operand(x) or not _product_operand(y):
        return None
    cdef int typenum = cnp.PyArray_TYPE(x)
    if cnp.PyArray_TYPE(y) != typenum:
        return None
    if typenum == cnp.NPY_FLOAT32:
        if _sgemm == NULL:
            return None
    elif typenum == cnp.NPY_FLOAT64:
        if _dgemm == NULL:
            return None
    else:
        return None
    cdef Py_ssize_t M, K, N
    if not _product_dims(x, y, trans1, trans2, &M, &K, &N):
        return None
    if M > 0x7fffffff or N > 0x7fffffff or K > 0x7fffffff:
        return None
    cdef bint tx, ty
    cdef Py_ssize_t ldx, ldy
    if not _row_major(x, trans1, &tx, &ldx) or not _row_major(y, trans2, &ty, &ldy):
        return None
    # The leading dimensions must fit the BLAS's int too.
    if ldx > 0x7fffffff or ldy > 0x7fffffff:
        return None
    cdef int ta = TRANS if tx else NO_TRANS, tb = TRANS if ty else NO_TRANS
    cdef int lda = <int>ldx, ldb = <int>ldy
    cdef cnp.ndarray c
    if out is None:
        c = cnp.PyArray_EMPTY(2, [M, N], typenum, 0)
    else:
        if not isinstance(out, cnp.ndarray):
            return None
        c = <cnp.ndarray>out
        if (cnp.PyArray_TYPE(c) != typenum or not _product_operand(c) or c.shape[0] != M
                or c.shape[1] != N or not cnp.PyArray_IS_C_CONTIGUOUS(c) or not cnp.PyArray_ISWRITEABLE(c)):
            return None
        # numpy.matmul buffers an output that overlaps an input; the BLAS would read what it wrote.
        if _shares(c, x) or _shares(c, y):
            return None
    cdef int m = <int>M, n = <int>N, k = <int>K
    cdef const float* fa
    cdef const float* fb
    cdef const double* da
    cdef const double* db
    if typenum == cnp.NPY_FLOAT32:
        fa = <const float*>cnp.PyArray_DATA(x)
        fb = <const float*>cnp.PyArray_DATA(y)
        with nogil:
            _sgemm(ROW_MAJOR, ta, tb, m, n, k, 1.0, fa, lda, fb, ldb, 0.0,
                   <float*>cnp.PyArray_DATA(c), n)
    else:
        da = <const double*>cnp.PyArray_DATA(x)
        db = <const double*>cnp.PyArray_DATA(y)
        with nogil:
            _dgemm(ROW_MAJOR, ta, tb, m, n, k, 1.0, da, lda, db, ldb, 0.0,
                   <double*>cnp.PyArray_DATA(c), n)
    return c
