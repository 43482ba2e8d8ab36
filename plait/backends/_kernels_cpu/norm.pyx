# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""CPU kernels for NumpyOps: layer normalisation and its backprop.

Each entry point takes the arguments of the Ops method as they came and returns None when they
fall outside its fast case (exact, aligned, native-order, C-contiguous float32/float64 ndarrays
of the expected ranks, one dtype, matching widths); the mixin (plait.backends._numpy_norm) then
calls the Ops reference, which computes the odd cases and raises the errors.

The forward's row statistics (mean, variance) are summed in double precision; the backprop
sums at the arrays' precision, as the reference does, in 8 independent lanes per row. Every sum
has a fixed order, so the results do not depend on the thread count; they agree with the
reference (numpy's float sums) to rounding.
The kernels run serially: a row is a few dozen values, and the column sums of the backprop
(dG, db) would otherwise need a reduction across threads.
"""
cimport numpy as cnp

from ._arrays cimport _data, _dim, _float_kind
from libc.math cimport sqrt

cnp.import_array()

cdef extern from *:
    """
    #include <math.h>

    /* The row loops are written as 8 independent lanes, which GCC vectorises, for AVX2+FMA in
       the builds that allow it (plait_isa.h). The sums keep a fixed order (lane j % 8, then
       the lanes pairwise), so the thread count never changes a result; the AVX2 and baseline
       builds may differ in the last bit (fused multiply-adds). */
    #include "plait_isa.h"
    #define PLAIT_LN_CLONES PLAIT_UPTO_V3

    #define PLAIT_LN_FOLD(a) ((((a)[0] + (a)[1]) + ((a)[2] + (a)[3])) + (((a)[4] + (a)[5]) + ((a)[6] + (a)[7])))

    #define PLAIT_DEFINE_LN(T, SUF)                                                              \\
    static PLAIT_LN_CLONES void plait_ln_forward_##SUF(                                          \\
            const T *X, const T *G, const T *b, T *Y, T *mean, T *var, Py_ssize_t nB,            \\
            Py_ssize_t nI, double eps) {                                                         \\
        const Py_ssize_t nV = nI - nI % 8;                                                       \\
        for (Py_ssize_t i = 0; i < nB; ++i) {                                                    \\
            const T *x = X + i * nI;                                                             \\
            T *y = Y + i * nI;                                                                   \\
            double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                            \\
            for (Py_ssize_t j = 0; j < nV; j += 8)                                               \\
                for (int l = 0; l < 8; ++l) acc[l] += (double)x[j + l];                          \\
            for (Py_ssize_t j = nV; j < nI; ++j) acc[j - nV] += (double)x[j];                    \\
            const double mu = PLAIT_LN_FOLD(acc) / (double)nI;                                   \\
            /* Two passes, as numpy's var: shifted squares do not cancel catastrophically. */    \\
            double sq[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                             \\
            for (Py_ssize_t j = 0; j < nV; j += 8)                                               \\
                for (int l = 0; l < 8; ++l) {                                                    \\
                    const double d = (double)x[j + l] - mu;                                      \\
                    sq[l] += d * d;                                                              \\
                }                                                                                \\
            for (Py_ssize_t j = nV; j < nI; ++j) {                                               \\
                const double d = (double)x[j] - mu;                                              \\
                sq[j - nV] += d * d;                                                             \\
            }                                                                                    \\
            const double v = PLAIT_LN_FOLD(sq) / (double)nI + eps;                               \\
            mean[i] = (T)mu;                                                                     \\
            var[i] = (T)v;                                                                       \\
            const T mu_t = (T)mu, inv_t = (T)(1.0 / sqrt(v));                                    \\
            for (Py_ssize_t j = 0; j < nI; ++j) y[j] = (x[j] - mu_t) * inv_t * G[j] + b[j];      \\
        }                                                                                        \\
    }                                                                                            \\
                                                                                                 \\
    /* dX rows, and the column sums dG (acc_g) and db (acc_b, both zeroed by the caller) added
       in row order, all at the arrays' precision as the reference computes them (float32 in
       8 independent lanes per row sum: numpy's own float32 sums are no more exact). */       \
    static PLAIT_LN_CLONES void plait_ln_backward_##SUF(                                         \\
            const T *dY, const T *X, const T *G, const T *mean, const T *var, T *dX,             \\
            T *__restrict__ acc_g, T *__restrict__ acc_b, Py_ssize_t nB, Py_ssize_t nI) {        \\
        const Py_ssize_t nV = nI - nI % 8;                                                       \\
        for (Py_ssize_t i = 0; i < nB; ++i) {                                                    \\
            const T *dy = dY + i * nI;                                                           \\
            const T *x = X + i * nI;                                                             \\
            T *dx = dX + i * nI;                                                                 \\
            const T mu = mean[i], v = var[i];                                                    \\
            const T inv = (T)(1.0 / sqrt((double)v));                                            \\
            T s1[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s2[8] = {0, 0, 0, 0, 0, 0, 0, 0};                \\
            for (Py_ssize_t j = 0; j < nV; j += 8)                                               \\
                for (int l = 0; l < 8; ++l) {                                                    \\
                    const T dxh = dy[j + l] * G[j + l];                                          \\
                    s1[l] += dxh;                                                                \\
                    s2[l] += dxh * (x[j + l] - mu);                                              \\
                }                                                                                \\
            for (Py_ssize_t j = nV; j < nI; ++j) {                                               \\
                const T dxh = dy[j] * G[j];                                                      \\
                s1[j - nV] += dxh;                                                               \\
                s2[j - nV] += dxh * (x[j] - mu);                                                 \\
            }                                                                                    \\
            const T t1 = PLAIT_LN_FOLD(s1), t2 = PLAIT_LN_FOLD(s2);                              \\
            /* dX = (nI * dXhat - sum(dXhat) - dist * sum(dXhat * dist) / var) * inv_std / nI */ \\
            const T scale = inv / (T)nI, corr = t2 / v, n_i = (T)nI;                             \\
            for (Py_ssize_t j = 0; j < nI; ++j) {                                                \\
                const T d = x[j] - mu;                                                           \\
                acc_b[j] += dy[j];                                                               \\
                acc_g[j] += dy[j] * (d * inv);                                                   \\
                dx[j] = (n_i * (dy[j] * G[j]) - t1 - d * corr) * scale;                          \\
            }                                                                                    \\
        }                                                                                        \\
    }

    PLAIT_DEFINE_LN(float, f32)
    PLAIT_DEFINE_LN(double, f64)
    """
    void plait_ln_forward_f32(const float*, const float*, const float*, float*, float*, float*,
                              Py_ssize_t, Py_ssize_t, double) nogil
    void plait_ln_forward_f64(const double*, const double*, const double*, double*, double*,
                              double*, Py_ssize_t, Py_ssize_t, double) nogil
    void plait_ln_backward_f32(const float*, const float*, const float*, const float*,
                               const float*, float*, float*, float*, Py_ssize_t, Py_ssize_t) nogil
    void plait_ln_backward_f64(const double*, const double*, const double*, const double*,
                               const double*, double*, double*, double*, Py_ssize_t, Py_ssize_t) nogil


cdef inline cnp.ndarray _new(int nd, Py_ssize_t d0, Py_ssize_t d1, int typenum):
    cdef cnp.npy_intp dims[2]
    dims[0] = d0
    dims[1] = d1
    return cnp.PyArray_EMPTY(nd, dims, typenum, 0)


def layer_norm(object X, object G, object b, double eps):
    """(Y, mean, var) for Ops.layer_norm, or None outside the fast case."""
    cdef int k = _float_kind(X, 2)
    if k == 0 or _float_kind(G, 1) != k or _float_kind(b, 1) != k:
        return None
    cdef Py_ssize_t nB = _dim(X, 0), nI = _dim(X, 1)
    if nI == 0 or _dim(G, 0) != nI or _dim(b, 0) != nI:
        return None
    cdef int t = cnp.NPY_FLOAT32 if k == 4 else cnp.NPY_FLOAT64
    cdef cnp.ndarray Y = _new(2, nB, nI, t)
    cdef cnp.ndarray mean = _new(1, nB, 0, t)
    cdef cnp.ndarray var = _new(1, nB, 0, t)
    cdef void* pX = _data(X)
    cdef void* pG = _data(G)
    cdef void* pb = _data(b)
    cdef void* pY = _data(Y)
    cdef void* pm = _data(mean)
    cdef void* pv = _data(var)
    with nogil:
        if k == 4:
            plait_ln_forward_f32(<const float*>pX, <const float*>pG, <const float*>pb, <float*>pY,
                                 <float*>pm, <float*>pv, nB, nI, eps)
        else:
            plait_ln_forward_f64(<const double*>pX, <const double*>pG, <const double*>pb,
                                 <double*>pY, <double*>pm, <double*>pv, nB, nI, eps)
    return Y, mean, var


def backprop_layer_norm(object dY, object X, object G, object mean, object var):
    """(dX, dG, db) for Ops.backprop_layer_norm, or None outside the fast case."""
    cdef int k = _float_kind(dY, 2)
    if (
        k == 0 or _float_kind(X, 2) != k or _float_kind(G, 1) != k
        or _float_kind(mean, 1) != k or _float_kind(var, 1) != k
    ):
        return None
    cdef Py_ssize_t nB = _dim(dY, 0), nI = _dim(dY, 1)
    if (
        nI == 0 or _dim(X, 0) != nB or _dim(X, 1) != nI or _dim(G, 0) != nI
        or _dim(mean, 0) != nB or _dim(var, 0) != nB
    ):
        return None
    cdef int t = cnp.NPY_FLOAT32 if k == 4 else cnp.NPY_FLOAT64
    cdef cnp.ndarray dX = _new(2, nB, nI, t)
    # dG and db are the kernel's column sums: they start at zero.
    cdef cnp.ndarray dG = cnp.PyArray_ZEROS(1, [nI], t, 0)
    cdef cnp.ndarray db = cnp.PyArray_ZEROS(1, [nI], t, 0)
    cdef void* pdY = _data(dY)
    cdef void* pX = _data(X)
    cdef void* pG = _data(G)
    cdef void* pm = _data(mean)
    cdef void* pv = _data(var)
    cdef void* pdX = _data(dX)
    cdef void* pdG = _data(dG)
    cdef void* pdb = _data(db)
    with nogil:
        if k == 4:
            plait_ln_backward_f32(<const float*>pdY, <const float*>pX, <const float*>pG,
                                  <const float*>pm, <const float*>pv, <float*>pdX, <float*>pdG,
                                  <float*>pdb, nB, nI)
        else:
            plait_ln_backward_f64(<const double*>pdY, <const double*>pX, <const double*>pG,
                                  <const double*>pm, <const double*>pv, <double*>pdX,
                                  <double*>pdG, <double*>pdb, nB, nI)
    return dX, dG, db
