# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""CPU kernels for NumpyOps: layer normalisation and its backprop.

Each entry point takes the arguments of the Ops method as they came and returns None when they
fall outside its fast case (exact, aligned, native-order, C-contiguous float32/float64 ndarrays
of the expected ranks, one dtype, matching widths); the mixin (plait.backends._numpy_norm) then
calls the Ops reference, which computes the odd cases and raises the errors.

Row statistics are summed in double precision, one row at a time, so the results do not depend
on the thread count; they agree with the reference (numpy's pairwise float sums) to rounding.
The kernels run serially: a row is a few dozen values, and the column sums of the backprop
(dG, db) would otherwise need a reduction across threads.
"""
cimport numpy as cnp

from ._arrays cimport _data, _dim, _float_kind
from cython cimport floating
from libc.math cimport sqrt
from libc.stdlib cimport calloc, free

cnp.import_array()

cdef extern from *:
    # The column sums never alias the inputs: saying so lets the compiler vectorise their loop.
    ctypedef double* double_restrict "double* __restrict__"


cdef inline cnp.ndarray _new(int nd, Py_ssize_t d0, Py_ssize_t d1, int typenum):
    cdef cnp.npy_intp dims[2]
    dims[0] = d0
    dims[1] = d1
    return cnp.PyArray_EMPTY(nd, dims, typenum, 0)


cdef enum:
    # Independent partial sums per row: they let the compiler vectorise the row sums while
    # keeping a fixed summation order (lane j % _LANES, then the lanes pairwise).
    _LANES = 8


cdef inline double _fold(double* acc) noexcept nogil:
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))


cdef void _forward(
    const floating* X, const floating* G, const floating* b, floating* Y,
    floating* mean, floating* var, Py_ssize_t nB, Py_ssize_t nI, double eps,
) noexcept nogil:
    cdef Py_ssize_t i, j, jb, l, nV = nI - nI % _LANES
    cdef const floating* x
    cdef floating* y
    cdef double s, d, mu, v
    cdef double acc[_LANES]
    cdef floating mu_f, inv_f
    for i in range(nB):
        x = X + i * nI
        y = Y + i * nI
        for l in range(_LANES):
            acc[l] = 0.0
        for jb in range(nV // _LANES):
            j = jb * _LANES
            for l in range(_LANES):
                acc[l] += x[j + l]
        for j in range(nV, nI):
            acc[j - nV] += x[j]
        mu = _fold(acc) / nI
        # Two passes, as numpy's var does: the shifted squares do not cancel catastrophically.
        for l in range(_LANES):
            acc[l] = 0.0
        for jb in range(nV // _LANES):
            j = jb * _LANES
            for l in range(_LANES):
                d = x[j + l] - mu
                acc[l] += d * d
        for j in range(nV, nI):
            d = x[j] - mu
            acc[j - nV] += d * d
        v = _fold(acc) / nI + eps
        mean[i] = <floating>mu
        var[i] = <floating>v
        mu_f = <floating>mu
        inv_f = <floating>(1.0 / sqrt(v))
        for j in range(nI):
            y[j] = (x[j] - mu_f) * inv_f * G[j] + b[j]


cdef void _backward(
    const floating* dY, const floating* X, const floating* G, const floating* mean,
    const floating* var, floating* dX, double_restrict dG, double_restrict db, Py_ssize_t nB,
    Py_ssize_t nI,
) noexcept nogil:
    cdef Py_ssize_t i, j, jb, l, nV = nI - nI % _LANES
    cdef const floating* dy
    cdef const floating* x
    cdef floating* dx
    cdef double mu, v, inv, s1, s2, dist, dxh, scale, corr
    cdef double acc1[_LANES]
    cdef double acc2[_LANES]
    for i in range(nB):
        dy = dY + i * nI
        x = X + i * nI
        dx = dX + i * nI
        mu = mean[i]
        v = var[i]
        inv = 1.0 / sqrt(v)
        for l in range(_LANES):
            acc1[l] = 0.0
            acc2[l] = 0.0
        for jb in range(nV // _LANES):
            j = jb * _LANES
            for l in range(_LANES):
                dxh = <double>dy[j + l] * G[j + l]
                acc1[l] += dxh
                acc2[l] += dxh * (x[j + l] - mu)
        for j in range(nV, nI):
            dxh = <double>dy[j] * G[j]
            acc1[j - nV] += dxh
            acc2[j - nV] += dxh * (x[j] - mu)
        for j in range(nI):
            db[j] += dy[j]
            dG[j] += <double>dy[j] * ((x[j] - mu) * inv)
        s1 = _fold(acc1)
        s2 = _fold(acc2)
        # dX = (nI * dXhat - sum(dXhat) - dist * sum(dXhat * dist) / var) * inv_std / nI
        scale = inv / nI
        corr = s2 / v
        for j in range(nI):
            dx[j] = <floating>((nI * (<double>dy[j] * G[j]) - s1 - (x[j] - mu) * corr) * scale)


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
            _forward(<const float*>pX, <const float*>pG, <const float*>pb, <float*>pY,
                     <float*>pm, <float*>pv, nB, nI, eps)
        else:
            _forward(<const double*>pX, <const double*>pG, <const double*>pb, <double*>pY,
                     <double*>pm, <double*>pv, nB, nI, eps)
    return Y, mean, var


def backprop_layer_norm(object dY, object X, object G, object mean, object var):
    """(dX, dG, db) for Ops.backprop_layer_norm, or None outside the fast case."""
    cdef int k = _float_kind(dY, 2)
    if (
        k == 0 or _float_kind(X, 2) != k or _float_kind(G, 1) != k
        or _float_kind(mean, 1) != k or _float_kind(var, 1) != k
    ):
        return None
    cdef Py_ssize_t nB = _dim(dY, 0), nI = _dim(dY, 1), j
    if (
        nI == 0 or _dim(X, 0) != nB or _dim(X, 1) != nI or _dim(G, 0) != nI
        or _dim(mean, 0) != nB or _dim(var, 0) != nB
    ):
        return None
    cdef int t = cnp.NPY_FLOAT32 if k == 4 else cnp.NPY_FLOAT64
    cdef cnp.ndarray dX = _new(2, nB, nI, t)
    cdef cnp.ndarray dG = _new(1, nI, 0, t)
    cdef cnp.ndarray db = _new(1, nI, 0, t)
    cdef double* acc = <double*>calloc(2 * nI, sizeof(double))
    if acc == NULL:
        raise MemoryError("norm.backprop_layer_norm: could not allocate the column sums.")
    cdef void* pdY = _data(dY)
    cdef void* pX = _data(X)
    cdef void* pG = _data(G)
    cdef void* pm = _data(mean)
    cdef void* pv = _data(var)
    cdef void* pdX = _data(dX)
    cdef float* dG32 = <float*>_data(dG)
    cdef float* db32 = <float*>_data(db)
    cdef double* dG64 = <double*>_data(dG)
    cdef double* db64 = <double*>_data(db)
    with nogil:
        if k == 4:
            _backward(<const float*>pdY, <const float*>pX, <const float*>pG, <const float*>pm,
                      <const float*>pv, <float*>pdX, acc, acc + nI, nB, nI)
            for j in range(nI):
                dG32[j] = <float>acc[j]
                db32[j] = <float>acc[nI + j]
        else:
            _backward(<const double*>pdY, <const double*>pX, <const double*>pG, <const double*>pm,
                      <const double*>pv, <double*>pdX, acc, acc + nI, nB, nI)
            for j in range(nI):
                dG64[j] = acc[j]
                db64[j] = acc[nI + j]
    free(acc)
    return dX, dG, db
