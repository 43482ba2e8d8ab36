# cython: language_level=3
"""CPU kernel for Ops.backprop_maxout_affine: Maxout's weight, bias and input gradients.

Only the winning piece of each output has a gradient, so the (nB, nO * nP) matrix of piece
gradients that the reference builds is nP - 1 parts zeros, and its two dense products (dX and
dW) spend that fraction of their multiply-adds on zeros. The kernel does only the live ones:

* dX[n] = sum over o of dY[n, o] * W[o, which[n, o]]: a gathered product, a block of dX
  columns kept in registers while o runs.
* dW[o, p] = sum over the rows n where which[n, o] == p of dY[n, o] * X[n]: the rows are first
  grouped by piece (a stable counting sort), then each group is summed in row order.
* db[o, p] = the same sums of dY[n, o] alone.

Every output value is summed by one thread in a fixed order, so the results do not depend on the
thread count; they differ from the reference's BLAS products only by rounding (other summation
order, fused multiply-adds where the CPU has them).

Entry points return None, for the reference to handle, unless the arrays are C-contiguous, of
one float dtype (float32 or float64), int32/int64 `which`, consistent shapes and every `which`
in 0..nP-1.
"""
cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t

from ._arrays cimport _data, _dim, _float_kind, _index_kind

cnp.import_array()

cdef extern from *:
    """
    #include <stdint.h>
    #include <stdlib.h>
    #include <string.h>

    /* The inner loops are fixed-width blocks that GCC keeps in vector registers; an AVX2+FMA
       copy and a baseline copy are built and one is picked when the module loads. */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
    #define PLAIT_MX_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
    #else
    #define PLAIT_MX_CLONES
    #endif

    /* 256-bit vectors in GCC's vector extension: the AVX2 copy keeps them in ymm registers
       (and fuses a * w + acc), the baseline copy splits each into two SSE2 halves. The
       aligned(sizeof(T)) types make every load and store an unaligned one. */
    typedef float plait_vf __attribute__((vector_size(32), aligned(4)));
    typedef double plait_vd __attribute__((vector_size(32), aligned(8)));

    /* Column blocks. An FMA takes 4 cycles and two can start per cycle, so a block keeps 8
       independent accumulators: 8 vectors of columns, or (for the last < 8 vectors) one vector
       of columns with the terms dealt round-robin to 8 partial sums. `TERMS(k, a, src)` walks
       the terms of one output block: for k = 0, 1, ..., a scalar weight `a` and a row `src`. */
    #define PLAIT_MX_BLOCK8(T, VT, L, out, COUNT, TERM)                                          \\
        {                                                                                        \\
            VT c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0}, c4 = {0}, c5 = {0}, c6 = {0}, c7 = {0};  \\
            for (Py_ssize_t k = 0; k < (COUNT); ++k) {                                           \\
                T a; const T *src;                                                               \\
                TERM(k, a, src)                                                                  \\
                const VT *v = (const VT *)(src + j0);                                            \\
                c0 += a * v[0]; c1 += a * v[1]; c2 += a * v[2]; c3 += a * v[3];                  \\
                c4 += a * v[4]; c5 += a * v[5]; c6 += a * v[6]; c7 += a * v[7];                  \\
            }                                                                                    \\
            VT *d = (VT *)((out) + j0);                                                          \\
            d[0] = c0; d[1] = c1; d[2] = c2; d[3] = c3;                                          \\
            d[4] = c4; d[5] = c5; d[6] = c6; d[7] = c7;                                          \\
        }
    #define PLAIT_MX_BLOCK1(T, VT, L, out, COUNT, TERM)                                          \\
        {                                                                                        \\
            VT c[8] = {{0}};                                                                     \\
            for (Py_ssize_t k = 0; k < (COUNT); ++k) {                                           \\
                T a; const T *src;                                                               \\
                TERM(k, a, src)                                                                  \\
                c[k & 7] += a * *(const VT *)(src + j0);                                         \\
            }                                                                                    \\
            *(VT *)((out) + j0) = ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7])); \\
        }
    #define PLAIT_MX_SCALAR(T, out, COUNT, TERM)                                                 \\
        {                                                                                        \\
            T c = (T)0;                                                                          \\
            for (Py_ssize_t k = 0; k < (COUNT); ++k) {                                           \\
                T a; const T *src;                                                               \\
                TERM(k, a, src)                                                                  \\
                c += a * src[j0];                                                                \\
            }                                                                                    \\
            (out)[j0] = c;                                                                       \\
        }
    #define PLAIT_MX_ROW(T, VT, L, out, COUNT, TERM)                                             \\
        {                                                                                        \\
            Py_ssize_t j0 = 0;                                                                   \\
            for (; j0 + 8 * L <= nI; j0 += 8 * L) PLAIT_MX_BLOCK8(T, VT, L, out, COUNT, TERM)    \\
            for (; j0 + L <= nI; j0 += L) PLAIT_MX_BLOCK1(T, VT, L, out, COUNT, TERM)            \\
            for (; j0 < nI; ++j0) PLAIT_MX_SCALAR(T, out, COUNT, TERM)                           \\
        }

    /* dX row n: terms o = 0..nO-1, weight dY[n, o], row W[o, which[n, o]]. */
    #define PLAIT_MX_DX_TERM(k, a, src)                                                          \\
        a = dy[k]; src = W + ((k) * nP + (Py_ssize_t)wh[k]) * nI;

    #define PLAIT_DEFINE_MX_DX(T, VT, I, SUF, L)                                                 \\
    static PLAIT_MX_CLONES void plait_mx_dx_##SUF(                                               \\
            const T *dY, const I *which, const T *W, T *dX, Py_ssize_t n0, Py_ssize_t n1,        \\
            Py_ssize_t nO, Py_ssize_t nP, Py_ssize_t nI) {                                       \\
        for (Py_ssize_t n = n0; n < n1; ++n) {                                                   \\
            const T *dy = dY + n * nO;                                                           \\
            const I *wh = which + n * nO;                                                        \\
            T *dx = dX + n * nI;                                                                 \\
            PLAIT_MX_ROW(T, VT, L, dx, nO, PLAIT_MX_DX_TERM)                                     \\
        }                                                                                        \\
    }

    /* dW[o, p] (one chunk of rows): terms k over the chunk's rows of group p, weight wts[k],
       row X[rows[k]]. The block accumulates onto what earlier chunks left in dW. */
    #define PLAIT_MX_DW_TERM(k, a, src)                                                          \\
        { a = wts[k]; src = X + rows[k] * nI; }
    #define PLAIT_MX_BLOCK8_ACC(T, VT, L, out, COUNT, TERM)                                      \\
        {                                                                                        \\
            VT *d = (VT *)((out) + j0);                                                          \\
            VT c0 = d[0], c1 = d[1], c2 = d[2], c3 = d[3], c4 = d[4], c5 = d[5], c6 = d[6],      \\
               c7 = d[7];                                                                        \\
            for (Py_ssize_t k = 0; k < (COUNT); ++k) {                                           \\
                T a; const T *src;                                                               \\
                TERM(k, a, src)                                                                  \\
                const VT *v = (const VT *)(src + j0);                                            \\
                c0 += a * v[0]; c1 += a * v[1]; c2 += a * v[2]; c3 += a * v[3];                  \\
                c4 += a * v[4]; c5 += a * v[5]; c6 += a * v[6]; c7 += a * v[7];                  \\
            }                                                                                    \\
            d[0] = c0; d[1] = c1; d[2] = c2; d[3] = c3;                                          \\
            d[4] = c4; d[5] = c5; d[6] = c6; d[7] = c7;                                          \\
        }
    #define PLAIT_MX_BLOCK1_ACC(T, VT, L, out, COUNT, TERM)                                      \\
        {                                                                                        \\
            VT c = *(VT *)((out) + j0);                                                          \\
            for (Py_ssize_t k = 0; k < (COUNT); ++k) {                                           \\
                T a; const T *src;                                                               \\
                TERM(k, a, src)                                                                  \\
                c += a * *(const VT *)(src + j0);                                                \\
            }                                                                                    \\
            *(VT *)((out) + j0) = c;                                                             \\
        }
    #define PLAIT_MX_SCALAR_ACC(T, out, COUNT, TERM)                                             \\
        {                                                                                        \\
            T c = (out)[j0];                                                                     \\
            for (Py_ssize_t k = 0; k < (COUNT); ++k) {                                           \\
                T a; const T *src;                                                               \\
                TERM(k, a, src)                                                                  \\
                c += a * src[j0];                                                                \\
            }                                                                                    \\
            (out)[j0] = c;                                                                       \\
        }

    /* Outputs o0..o1-1 of dW and db (zeroed here), rows taken PLAIT_MX_CHUNK at a time so
       that a chunk of X stays in L1 while every output reads it. `rows` and `wts` (nB values
       each; only a chunk's worth is used) and `start` (nP + 1) are scratch: the chunk's rows
       grouped by winning piece, in row order, with their dY weights. */
    #define PLAIT_MX_CHUNK 32
    #define PLAIT_DEFINE_MX_DW(T, VT, I, SUF, L)                                                 \\
    static PLAIT_MX_CLONES void plait_mx_dw_##SUF(                                               \\
            const T *dY, const I *which, const T *X, T *dW, T *db, Py_ssize_t o0, Py_ssize_t o1, \\
            Py_ssize_t nB, Py_ssize_t nO, Py_ssize_t nP, Py_ssize_t nI,                          \\
            Py_ssize_t *rows, Py_ssize_t *start, T *wts) {                                       \\
        memset(dW + o0 * nP * nI, 0, (size_t)((o1 - o0) * nP * nI) * sizeof(T));                 \\
        memset(db + o0 * nP, 0, (size_t)((o1 - o0) * nP) * sizeof(T));                           \\
        for (Py_ssize_t n0 = 0; n0 < nB; n0 += PLAIT_MX_CHUNK) {                                 \\
            const Py_ssize_t n1 = n0 + PLAIT_MX_CHUNK < nB ? n0 + PLAIT_MX_CHUNK : nB;           \\
            for (Py_ssize_t o = o0; o < o1; ++o) {                                               \\
                for (Py_ssize_t p = 0; p <= nP; ++p) start[p] = 0;                               \\
                for (Py_ssize_t n = n0; n < n1; ++n)                                             \\
                    start[(Py_ssize_t)which[n * nO + o] + 1] += 1;                               \\
                for (Py_ssize_t p = 0; p < nP; ++p) start[p + 1] += start[p];                    \\
                for (Py_ssize_t n = n0; n < n1; ++n) {                                           \\
                    const Py_ssize_t p = (Py_ssize_t)which[n * nO + o];                          \\
                    rows[start[p]] = n;                                                          \\
                    wts[start[p]] = dY[n * nO + o];                                              \\
                    start[p] += 1;                                                               \\
                }                                                                                \\
                /* start[p] now holds the end of group p: shift back to the starts. */           \\
                for (Py_ssize_t p = nP; p > 0; --p) start[p] = start[p - 1];                     \\
                start[0] = 0;                                                                    \\
                for (Py_ssize_t p = 0; p < nP; ++p) {                                            \\
                    const Py_ssize_t count = start[p + 1] - start[p];                            \\
                    if (count == 0) continue;                                                    \\
                    const Py_ssize_t *rows_p = rows + start[p];                                  \\
                    const T *wts_p = wts + start[p];                                             \\
                    T *dw = dW + (o * nP + p) * nI;                                              \\
                    T bsum = db[o * nP + p];                                                     \\
                    for (Py_ssize_t k = 0; k < count; ++k) bsum += wts_p[k];                     \\
                    db[o * nP + p] = bsum;                                                       \\
                    {                                                                            \\
                        const Py_ssize_t *rows_ = rows_p; const T *wts_ = wts_p;                 \\
                        PLAIT_MX_DW_ROW(T, VT, L, dw, count)                                     \\
                    }                                                                            \\
                }                                                                                \\
            }                                                                                    \\
        }                                                                                        \\
    }
    #define PLAIT_MX_DW_TERM2(k, a, src)                                                         \\
        { a = wts_[k]; src = X + rows_[k] * nI; }
    #define PLAIT_MX_DW_ROW(T, VT, L, out, COUNT)                                                \\
        {                                                                                        \\
            Py_ssize_t j0 = 0;                                                                   \\
            for (; j0 + 8 * L <= nI; j0 += 8 * L)                                                \\
                PLAIT_MX_BLOCK8_ACC(T, VT, L, out, COUNT, PLAIT_MX_DW_TERM2)                     \\
            for (; j0 + L <= nI; j0 += L) PLAIT_MX_BLOCK1_ACC(T, VT, L, out, COUNT, PLAIT_MX_DW_TERM2) \\
            for (; j0 < nI; ++j0) PLAIT_MX_SCALAR_ACC(T, out, COUNT, PLAIT_MX_DW_TERM2)          \\
        }

    /* L: values per 256-bit vector. */
    PLAIT_DEFINE_MX_DX(float, plait_vf, int32_t, f32_i32, 8)
    PLAIT_DEFINE_MX_DX(float, plait_vf, int64_t, f32_i64, 8)
    PLAIT_DEFINE_MX_DX(double, plait_vd, int32_t, f64_i32, 4)
    PLAIT_DEFINE_MX_DX(double, plait_vd, int64_t, f64_i64, 4)
    PLAIT_DEFINE_MX_DW(float, plait_vf, int32_t, f32_i32, 8)
    PLAIT_DEFINE_MX_DW(float, plait_vf, int64_t, f32_i64, 8)
    PLAIT_DEFINE_MX_DW(double, plait_vd, int32_t, f64_i32, 4)
    PLAIT_DEFINE_MX_DW(double, plait_vd, int64_t, f64_i64, 4)
    """
    void plait_mx_dx_f32_i32(const float*, const int32_t*, const float*, float*, Py_ssize_t,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    void plait_mx_dx_f32_i64(const float*, const int64_t*, const float*, float*, Py_ssize_t,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    void plait_mx_dx_f64_i32(const double*, const int32_t*, const double*, double*, Py_ssize_t,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    void plait_mx_dx_f64_i64(const double*, const int64_t*, const double*, double*, Py_ssize_t,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    void plait_mx_dw_f32_i32(const float*, const int32_t*, const float*, float*, float*,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                             Py_ssize_t*, Py_ssize_t*, void*) nogil
    void plait_mx_dw_f32_i64(const float*, const int64_t*, const float*, float*, float*,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                             Py_ssize_t*, Py_ssize_t*, void*) nogil
    void plait_mx_dw_f64_i32(const double*, const int32_t*, const double*, double*, double*,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                             Py_ssize_t*, Py_ssize_t*, void*) nogil
    void plait_mx_dw_f64_i64(const double*, const int64_t*, const double*, double*, double*,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                             Py_ssize_t*, Py_ssize_t*, void*) nogil
    void* malloc(size_t) nogil
    void free(void*) nogil

cdef enum:
    # Rows per dX block: the unit handed to threads.
    _ROWS = 64
    # Rows per chunk of the dW kernel (PLAIT_MX_CHUNK in the C code).
    _CHUNK = 32
    # Below this many multiply-adds (about 0.3 ms of work) everything runs on one thread.
    _PARALLEL_MIN = 1 << 22

cdef Py_ssize_t _parallel_min = _PARALLEL_MIN


def set_parallel_min_work(Py_ssize_t work):
    """Set the multiply-adds below which the kernel stays on one thread; returns the old value.

    For tests: 0 sends every call down the threaded path.
    """
    global _parallel_min
    old = _parallel_min
    _parallel_min = work
    return old


cdef inline cnp.ndarray _new(int nd, Py_ssize_t d0, Py_ssize_t d1, Py_ssize_t d2, int typenum):
    cdef cnp.npy_intp dims[3]
    dims[0] = d0
    dims[1] = d1
    dims[2] = d2
    return cnp.PyArray_EMPTY(nd, dims, typenum, 0)


cdef Py_ssize_t _count_bad(const void* which, bint i32, Py_ssize_t n, Py_ssize_t nP) noexcept nogil:
    cdef Py_ssize_t i, bad = 0
    cdef const int32_t* w32 = <const int32_t*>which
    cdef const int64_t* w64 = <const int64_t*>which
    if i32:
        for i in range(n):
            bad += (w32[i] < 0) | (w32[i] >= nP)
    else:
        for i in range(n):
            bad += (w64[i] < 0) | (w64[i] >= nP)
    return bad


cdef void _dx(bint f32, bint i32, const void* dY, const void* which, const void* W, void* dX,
              Py_ssize_t n0, Py_ssize_t n1, Py_ssize_t nO, Py_ssize_t nP, Py_ssize_t nI) noexcept nogil:
    if f32 and i32:
        plait_mx_dx_f32_i32(<const float*>dY, <const int32_t*>which, <const float*>W, <float*>dX,
                            n0, n1, nO, nP, nI)
    elif f32:
        plait_mx_dx_f32_i64(<const float*>dY, <const int64_t*>which, <const float*>W, <float*>dX,
                            n0, n1, nO, nP, nI)
    elif i32:
        plait_mx_dx_f64_i32(<const double*>dY, <const int32_t*>which, <const double*>W,
                            <double*>dX, n0, n1, nO, nP, nI)
    else:
        plait_mx_dx_f64_i64(<const double*>dY, <const int64_t*>which, <const double*>W,
                            <double*>dX, n0, n1, nO, nP, nI)


cdef bint _dw(bint f32, bint i32, const void* dY, const void* which, const void* X, void* dW,
              void* db, Py_ssize_t o0, Py_ssize_t o1, Py_ssize_t nB, Py_ssize_t nO, Py_ssize_t nP,
              Py_ssize_t nI) noexcept nogil:
    """False if the scratch memory could not be had (nothing is then reported as done)."""
    # rows and their weights for one chunk of rows, then the group starts
    cdef Py_ssize_t* rows = <Py_ssize_t*>malloc((2 * _CHUNK + nP + 1) * sizeof(Py_ssize_t) + _CHUNK * 8)
    if rows == NULL:
        return False
    cdef Py_ssize_t* start = rows + _CHUNK
    cdef void* wts = <void*>(rows + 2 * _CHUNK + nP + 1)
    if f32 and i32:
        plait_mx_dw_f32_i32(<const float*>dY, <const int32_t*>which, <const float*>X, <float*>dW,
                            <float*>db, o0, o1, nB, nO, nP, nI, rows, start, wts)
    elif f32:
        plait_mx_dw_f32_i64(<const float*>dY, <const int64_t*>which, <const float*>X, <float*>dW,
                            <float*>db, o0, o1, nB, nO, nP, nI, rows, start, wts)
    elif i32:
        plait_mx_dw_f64_i32(<const double*>dY, <const int32_t*>which, <const double*>X,
                            <double*>dW, <double*>db, o0, o1, nB, nO, nP, nI, rows, start, wts)
    else:
        plait_mx_dw_f64_i64(<const double*>dY, <const int64_t*>which, <const double*>X,
                            <double*>dW, <double*>db, o0, o1, nB, nO, nP, nI, rows, start, wts)
    free(rows)
    return True


def backprop_maxout_affine(object dY, object which, object X, object W):
    """(dX, dW, db) for Ops.backprop_maxout_affine, or None outside the fast case.

    Shapes: dY (nB, nO), which (nB, nO), X (nB, nI), W (nO, nP, nI) ->
    dX (nB, nI), dW (nO, nP, nI), db (nO, nP).
    """
    cdef int k = _float_kind(dY, 2)
    cdef int ik = _index_kind(which, 2)
    if k == 0 or ik == 0 or _float_kind(X, 2) != k or _float_kind(W, 3) != k:
        return None
    cdef Py_ssize_t nB = _dim(dY, 0), nO = _dim(dY, 1), nP = _dim(W, 1), nI = _dim(W, 2)
    if (
        _dim(which, 0) != nB or _dim(which, 1) != nO or _dim(X, 0) != nB or _dim(X, 1) != nI
        or _dim(W, 0) != nO or nP < 1
    ):
        return None
    cdef bint f32 = k == 4, i32 = ik == 4
    cdef const void* pw = _data(which)
    cdef Py_ssize_t bad
    with nogil:
        bad = _count_bad(pw, i32, nB * nO, nP)
    if bad:
        return None
    cdef int t = cnp.NPY_FLOAT32 if f32 else cnp.NPY_FLOAT64
    cdef cnp.ndarray dX = _new(2, nB, nI, 0, t)
    cdef cnp.ndarray dW = _new(3, nO, nP, nI, t)
    cdef cnp.ndarray db = _new(2, nO, nP, 0, t)
    cdef const void* pdY = _data(dY)
    cdef const void* pX = _data(X)
    cdef const void* pW = _data(W)
    cdef void* pdX = _data(dX)
    cdef void* pdW = _data(dW)
    cdef void* pdb = _data(db)
    cdef Py_ssize_t blk, n_row_blocks = (nB + _ROWS - 1) // _ROWS
    cdef Py_ssize_t o, failed = 0
    cdef bint parallel = nB * nO * nI >= _parallel_min
    with nogil:
        if parallel:
            for blk in prange(n_row_blocks, schedule="static"):
                _dx(f32, i32, pdY, pw, pW, pdX, blk * _ROWS, min((blk + 1) * _ROWS, nB), nO, nP, nI)
            for o in prange(nO, schedule="static"):
                failed += not _dw(f32, i32, pdY, pw, pX, pdW, pdb, o, o + 1, nB, nO, nP, nI)
        else:
            _dx(f32, i32, pdY, pw, pW, pdX, 0, nB, nO, nP, nI)
            failed = not _dw(f32, i32, pdY, pw, pX, pdW, pdb, 0, nO, nB, nO, nP, nI)
    if failed:
        raise MemoryError(
            f"maxout.backprop_maxout_affine: could not allocate {3 * _CHUNK + nP + 1} words of scratch."
        )
    return dX, dW, db
