# C-level BLAS table for Cython code: row-major gemm and axpy function pointers (see cblas.pyx).
#
# The module stands in for thinc.backends.cblas, whose binary interface spaCy's extensions
# check at import (../shared/spec/spacy-c-abi.md, 3.1): CBlas is 32 bytes, has no vtable, and
# the module's __pyx_capi__ exports saxpy/sgemm/daxpy and their setters under thinc's signature
# strings (built by hand in cblas.pyx). Cython code of plait's own uses the inline accessors below,
# which need no capsule: `from plait.backends.cblas cimport CBlas, sgemm`.

ctypedef void (*sgemm_ptr)(bint transA, bint transB, int M, int N, int K,
                           float alpha, const float* A, int lda, const float* B, int ldb,
                           float beta, float* C, int ldc) noexcept nogil
ctypedef void (*dgemm_ptr)(bint transA, bint transB, int M, int N, int K,
                           double alpha, const double* A, int lda, const double* B, int ldb,
                           double beta, double* C, int ldc) noexcept nogil
ctypedef void (*saxpy_ptr)(int N, float alpha, const float* X, int incX,
                           float* Y, int incY) noexcept nogil
ctypedef void (*daxpy_ptr)(int N, double alpha, const double* X, int incX,
                           double* Y, int incY) noexcept nogil
ctypedef void (*sscal_ptr)(int N, float alpha, float* X, int incX) noexcept nogil
ctypedef void (*dscal_ptr)(int N, double alpha, double* X, int incX) noexcept nogil


cdef struct BlasFuncs:
    sgemm_ptr sgemm
    dgemm_ptr dgemm
    saxpy_ptr saxpy
    daxpy_ptr daxpy
    sscal_ptr sscal
    dscal_ptr dscal


cdef class CBlas:
    # NOTE: exactly two pointers: the object must stay 32 bytes (tp_basicsize) for spaCy.
    cdef BlasFuncs* funcs
    cdef void* _reserved


# Never NULL for a live CBlas: the table is filled when the object is allocated.
cdef inline sgemm_ptr sgemm(CBlas cblas) noexcept nogil:
    return cblas.funcs.sgemm

cdef inline dgemm_ptr dgemm(CBlas cblas) noexcept nogil:
    return cblas.funcs.dgemm

cdef inline saxpy_ptr saxpy(CBlas cblas) noexcept nogil:
    return cblas.funcs.saxpy

cdef inline daxpy_ptr daxpy(CBlas cblas) noexcept nogil:
    return cblas.funcs.daxpy

cdef inline sscal_ptr sscal(CBlas cblas) noexcept nogil:
    return cblas.funcs.sscal

cdef inline dscal_ptr dscal(CBlas cblas) noexcept nogil:
    return cblas.funcs.dscal

# Replace one entry of this object's table (a NULL routine leaves the entry as it is, so the
# getters never return NULL).
cdef inline void set_sgemm(CBlas cblas, sgemm_ptr f) noexcept nogil:
    if f != NULL:
        cblas.funcs.sgemm = f

cdef inline void set_dgemm(CBlas cblas, dgemm_ptr f) noexcept nogil:
    if f != NULL:
        cblas.funcs.dgemm = f

cdef inline void set_saxpy(CBlas cblas, saxpy_ptr f) noexcept nogil:
    if f != NULL:
        cblas.funcs.saxpy = f

cdef inline void set_daxpy(CBlas cblas, daxpy_ptr f) noexcept nogil:
    if f != NULL:
        cblas.funcs.daxpy = f
