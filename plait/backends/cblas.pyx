# cython: language_level=3
"""A table of BLAS routines callable from `cdef nogil` code, backed by the BLAS that SciPy ships.

The table holds row-major (C order) gemm/axpy/scal pointers. Cython code does
`from plait.backends.cblas cimport CBlas, sgemm` and calls `sgemm(cblas)(...)` without the GIL;
Python code can use `CBlas.gemm` / `CBlas.axpy` for the same routines.
"""
import numpy
from scipy.linalg.cython_blas cimport sgemm as f_sgemm, dgemm as f_dgemm
from scipy.linalg.cython_blas cimport saxpy as f_saxpy, daxpy as f_daxpy
from scipy.linalg.cython_blas cimport sscal as f_sscal, dscal as f_dscal


# A row-major product C = A @ B is the column-major product C.T = B.T @ A.T, so the Fortran
# routine is called with the operands swapped and M/N exchanged.
cdef void _sgemm_rowmajor(bint transA, bint transB, int M, int N, int K,
                          float alpha, const float* A, int lda, const float* B, int ldb,
                          float beta, float* C, int ldc) noexcept nogil:
    cdef char ta = b'T' if transA else b'N'
    cdef char tb = b'T' if transB else b'N'
    f_sgemm(&tb, &ta, &N, &M, &K, &alpha, <float*>B, &ldb, <float*>A, &lda, &beta, C, &ldc)


cdef void _dgemm_rowmajor(bint transA, bint transB, int M, int N, int K,
                          double alpha, const double* A, int lda, const double* B, int ldb,
                          double beta, double* C, int ldc) noexcept nogil:
    cdef char ta = b'T' if transA else b'N'
    cdef char tb = b'T' if transB else b'N'
    f_dgemm(&tb, &ta, &N, &M, &K, &alpha, <double*>B, &ldb, <double*>A, &lda, &beta, C, &ldc)


cdef void _saxpy(int N, float alpha, const float* X, int incX, float* Y, int incY) noexcept nogil:
    f_saxpy(&N, &alpha, <float*>X, &incX, Y, &incY)


cdef void _daxpy(int N, double alpha, const double* X, int incX, double* Y, int incY) noexcept nogil:
    f_daxpy(&N, &alpha, <double*>X, &incX, Y, &incY)


cdef void _sscal(int N, float alpha, float* X, int incX) noexcept nogil:
    f_sscal(&N, &alpha, X, &incX)


cdef void _dscal(int N, double alpha, double* X, int incX) noexcept nogil:
    f_dscal(&N, &alpha, X, &incX)


cdef class CBlas:
    """Function pointers to row-major BLAS routines (float32 and float64)."""

    def __init__(self):
        self.funcs.sgemm = _sgemm_rowmajor
        self.funcs.dgemm = _dgemm_rowmajor
        self.funcs.saxpy = _saxpy
        self.funcs.daxpy = _daxpy
        self.funcs.sscal = _sscal
        self.funcs.dscal = _dscal

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


cdef sgemm_ptr sgemm(CBlas cblas) noexcept nogil:
    return cblas.funcs.sgemm

cdef dgemm_ptr dgemm(CBlas cblas) noexcept nogil:
    return cblas.funcs.dgemm

cdef saxpy_ptr saxpy(CBlas cblas) noexcept nogil:
    return cblas.funcs.saxpy

cdef daxpy_ptr daxpy(CBlas cblas) noexcept nogil:
    return cblas.funcs.daxpy

cdef sscal_ptr sscal(CBlas cblas) noexcept nogil:
    return cblas.funcs.sscal

cdef dscal_ptr dscal(CBlas cblas) noexcept nogil:
    return cblas.funcs.dscal

cdef void set_sgemm(CBlas cblas, sgemm_ptr f) noexcept nogil:
    cblas.funcs.sgemm = f

cdef void set_dgemm(CBlas cblas, dgemm_ptr f) noexcept nogil:
    cblas.funcs.dgemm = f

cdef void set_saxpy(CBlas cblas, saxpy_ptr f) noexcept nogil:
    cblas.funcs.saxpy = f

cdef void set_daxpy(CBlas cblas, daxpy_ptr f) noexcept nogil:
    cblas.funcs.daxpy = f
