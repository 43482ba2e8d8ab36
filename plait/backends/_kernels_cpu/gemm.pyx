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


cdef inline bint _layout(cnp.ndarray a, bint trans, int* flag, int* ld):
    # A row-major BLAS operand needs unit stride along its rows, or along its columns (then it
    # is the transpose of a row-major matrix). Returns 0 for any other layout.
    cdef Py_ssize_t item = a.itemsize
    cdef Py_ssize_t s0 = a.strides[0], s1 = a.strides[1]
    cdef Py_ssize_t n0 = a.shape[0], n1 = a.shape[1]
    if (s1 == item or n1 == 1) and s0 >= max(n1, 1) * item and s0 % item == 0:
        flag[0] = TRANS if trans else NO_TRANS
        ld[0] = <int>(s0 // item)
        return 1
    if (s0 == item or n0 == 1) and s1 >= max(n0, 1) * item and s1 % item == 0:
        flag[0] = NO_TRANS if trans else TRANS
        ld[0] = <int>(s1 // item)
        return 1
    return 0


def gemm(x_obj, y_obj, out, bint trans1, bint trans2):
    """out = op(x) @ op(y) through the loaded BLAS, or None to decline (see module docstring)."""
    if _sgemm == NULL and _dgemm == NULL:
        return None
    if not isinstance(x_obj, cnp.ndarray) or not isinstance(y_obj, cnp.ndarray):
        return None
    cdef cnp.ndarray x = <cnp.ndarray>x_obj
    cdef cnp.ndarray y = <cnp.ndarray>y_obj
    if x.ndim != 2 or y.ndim != 2:
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
    cdef Py_ssize_t M = x.shape[1] if trans1 else x.shape[0]
    cdef Py_ssize_t K = x.shape[0] if trans1 else x.shape[1]
    cdef Py_ssize_t K2 = y.shape[1] if trans2 else y.shape[0]
    cdef Py_ssize_t N = y.shape[0] if trans2 else y.shape[1]
    if K != K2 or M == 0 or N == 0 or K == 0:
        return None
    if M > 0x7fffffff or N > 0x7fffffff or K > 0x7fffffff:
        return None
    # The leading dimensions must fit the BLAS's int too.
    if x.strides[0] > 0x7fffffff or x.strides[1] > 0x7fffffff:
        return None
    if y.strides[0] > 0x7fffffff or y.strides[1] > 0x7fffffff:
        return None
    cdef int ta, tb, lda, ldb
    if not _layout(x, trans1, &ta, &lda) or not _layout(y, trans2, &tb, &ldb):
        return None
    cdef cnp.ndarray c
    if out is None:
        c = cnp.PyArray_EMPTY(2, [M, N], typenum, 0)
    else:
        if not isinstance(out, cnp.ndarray):
            return None
        c = <cnp.ndarray>out
        if (cnp.PyArray_TYPE(c) != typenum or c.ndim != 2 or c.shape[0] != M or c.shape[1] != N
                or not cnp.PyArray_IS_C_CONTIGUOUS(c) or not cnp.PyArray_ISWRITEABLE(c)):
            return None
        # numpy.matmul buffers an output that overlaps an input; the BLAS would read what it wrote.
        if _overlaps(c, x) or _overlaps(c, y):
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


cdef bint _overlaps(cnp.ndarray a, cnp.ndarray b):
    # Byte ranges spanned by two arrays with non-negative strides (the only ones taken here).
    cdef char* a0 = <char*>cnp.PyArray_DATA(a)
    cdef char* b0 = <char*>cnp.PyArray_DATA(b)
    cdef Py_ssize_t a_span = (a.shape[0] - 1) * a.strides[0] + (a.shape[1] - 1) * a.strides[1] + a.itemsize
    cdef Py_ssize_t b_span = (b.shape[0] - 1) * b.strides[0] + (b.shape[1] - 1) * b.strides[1] + b.itemsize
    return a0 < b0 + b_span and b0 < a0 + a_span
