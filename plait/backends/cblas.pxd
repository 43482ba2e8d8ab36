# C-level BLAS table for Cython code: row-major gemm and axpy function pointers (see cblas.pyx).

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
    cdef BlasFuncs funcs


cdef sgemm_ptr sgemm(CBlas cblas) noexcept nogil
cdef dgemm_ptr dgemm(CBlas cblas) noexcept nogil
cdef saxpy_ptr saxpy(CBlas cblas) noexcept nogil
cdef daxpy_ptr daxpy(CBlas cblas) noexcept nogil
cdef sscal_ptr sscal(CBlas cblas) noexcept nogil
cdef dscal_ptr dscal(CBlas cblas) noexcept nogil
cdef void set_sgemm(CBlas cblas, sgemm_ptr f) noexcept nogil
cdef void set_dgemm(CBlas cblas, dgemm_ptr f) noexcept nogil
cdef void set_saxpy(CBlas cblas, saxpy_ptr f) noexcept nogil
cdef void set_daxpy(CBlas cblas, daxpy_ptr f) noexcept nogil
