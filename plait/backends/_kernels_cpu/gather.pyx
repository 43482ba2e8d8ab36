# cython: language_level=3
"""CPU kernels for Ops.gather_add and Ops.scatter_add.

Each entry point checks that its arrays suit the kernel (dtypes, shapes, C-contiguity, index
values) and otherwise declines, so that the caller hands the case to the Ops reference, which
handles it or raises the reference's error. Every output value is a sum taken in the order of
the indices, the same order as the numpy reference, so results are bit-identical to it and do
not depend on the thread count or the instruction set. gather_add splits rows between threads
for large inputs; scatter_add runs on one thread.
"""
cimport numpy as cnp
from ._arrays cimport _any_index_outside, _shares
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t

cnp.import_array()

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>

    /* The row loops are memory-bound adds that AVX2 does in half the instructions; they are
       compiled for AVX2 in the builds that allow it (plait_isa.h). Adds are adds in any width,
       so every build gives the same bits. */
    #include "plait_isa.h"
    #define PLAIT_CLONES PLAIT_UPTO_AVX2

    /* Rows b0..b1-1 of out = 0 + table[idx[b, 0]] + table[idx[b, 1]] + ..., two table rows
       per sweep ((y + a) + c rounds as two sweeps would). Returns 1 at an index out of range.
       NOTE: the sum starts from +0, as the reference's does, so rows of -0.0 give +0.0. */
    #define PLAIT_DEFINE_GATHER(T, I, SUF)                                                       \\
    static PLAIT_CLONES int plait_gather_rows_##SUF(                                             \\
            T *out, const T *table, const I *idx, Py_ssize_t b0, Py_ssize_t b1, Py_ssize_t K,    \\
            Py_ssize_t O, Py_ssize_t nT) {                                                       \\
        const T zero = (T)0;                                                                     \\
        for (Py_ssize_t b = b0; b < b1; ++b) {                                                   \\
            T *y = out + b * O;                                                                  \\
            const I *row_idx = idx + b * K;                                                      \\
            for (Py_ssize_t k = 0; k < K; ++k)                                                   \\
                if ((uint64_t)(int64_t)row_idx[k] >= (uint64_t)nT) return 1;                     \\
            Py_ssize_t k = 0;                                                                    \\
            if (K == 0) {                                                                        \\
                for (Py_ssize_t j = 0; j < O; ++j) y[j] = zero;                                  \\
            } else if (K == 1) {                                                                 \\
                const T *a = table + (Py_ssize_t)row_idx[0] * O;                                 \\
                for (Py_ssize_t j = 0; j < O; ++j) y[j] = zero + a[j];                           \\
                k = 1;                                                                           \\
            } else {                                                                             \\
                const T *a = table + (Py_ssize_t)row_idx[0] * O;                                 \\
                const T *c = table + (Py_ssize_t)row_idx[1] * O;                                 \\
                for (Py_ssize_t j = 0; j < O; ++j) y[j] = (zero + a[j]) + c[j];                  \\
                k = 2;                                                                           \\
            }                                                                                    \\
            for (; k + 1 < K; k += 2) {                                                          \\
                const T *a = table + (Py_ssize_t)row_idx[k] * O;                                 \\
                const T *c = table + (Py_ssize_t)row_idx[k + 1] * O;                             \\
                for (Py_ssize_t j = 0; j < O; ++j) y[j] = (y[j] + a[j]) + c[j];                  \\
            }                                                                                    \\
            if (k < K) {                                                                         \\
                const T *a = table + (Py_ssize_t)row_idx[k] * O;                                 \\
                for (Py_ssize_t j = 0; j < O; ++j) y[j] = y[j] + a[j];                           \\
            }                                                                                    \\
        }                                                                                        \\
        return 0;                                                                                \\
    }

    /* table[idx[i]] += values[i / vdiv] for i in order (negative indices count from the end):
       vdiv = 1 is one value row per index; vdiv = K is values broadcast over the last index
       axis of (B, K) indices. The caller has checked every index. */
    #define PLAIT_DEFINE_SCATTER(T, I, SUF)                                                      \\
    static PLAIT_CLONES void plait_scatter_rows_##SUF(                                           \\
            T *table, const I *idx, const T *values, Py_ssize_t N, Py_ssize_t O, Py_ssize_t nT,  \\
            Py_ssize_t vdiv) {                                                                   \\
        for (Py_ssize_t i = 0; i < N; ++i) {                                                     \\
            Py_ssize_t r = (Py_ssize_t)idx[i];                                                   \\
            if (r < 0) r += nT;                                                                  \\
            T *dst = table + r * O;                                                              \\
            const T *src = values + (vdiv == 1 ? i : i / vdiv) * O;                              \\
            for (Py_ssize_t j = 0; j < O; ++j) dst[j] = dst[j] + src[j];                         \\
        }                                                                                        \\
    }

    PLAIT_DEFINE_GATHER(float, int32_t, f32_i32)
    PLAIT_DEFINE_GATHER(float, int64_t, f32_i64)
    PLAIT_DEFINE_GATHER(double, int32_t, f64_i32)
    PLAIT_DEFINE_GATHER(double, int64_t, f64_i64)
    PLAIT_DEFINE_SCATTER(float, int32_t, f32_i32)
    PLAIT_DEFINE_SCATTER(float, int64_t, f32_i64)
    PLAIT_DEFINE_SCATTER(double, int32_t, f64_i32)
    PLAIT_DEFINE_SCATTER(double, int64_t, f64_i64)
    """
    int plait_gather_rows_f32_i32(float*, const float*, const int32_t*, Py_ssize_t, Py_ssize_t,
                                  Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    int plait_gather_rows_f32_i64(float*, const float*, const int64_t*, Py_ssize_t, Py_ssize_t,
                                  Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    int plait_gather_rows_f64_i32(double*, const double*, const int32_t*, Py_ssize_t, Py_ssize_t,
                                  Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    int plait_gather_rows_f64_i64(double*, const double*, const int64_t*, Py_ssize_t, Py_ssize_t,
                                  Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    void plait_scatter_rows_f32_i32(float*, const int32_t*, const float*, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t, Py_ssize_t) nogil
    void plait_scatter_rows_f32_i64(float*, const int64_t*, const float*, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t, Py_ssize_t) nogil
    void plait_scatter_rows_f64_i32(double*, const int32_t*, const double*, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t, Py_ssize_t) nogil
    void plait_scatter_rows_f64_i64(double*, const int64_t*, const double*, Py_ssize_t, Py_ssize_t,
                                    Py_ssize_t, Py_ssize_t) nogil

ctypedef fused real_t:
    float
    double

ctypedef fused index_t:
    int32_t
    int64_t

cdef enum:
    # Below this many values added (~100 us of work) the kernels run on one thread: a parallel
    # region costs microseconds when a core is free, and far more on a busy machine when the
    # second thread is not scheduled at once.
    _PARALLEL_MIN_WORK = 1 << 18
    # Rows per task of the gather loop.
    _ROW_BLOCK = 16


cdef inline int _gather_rows(
    real_t* out, const real_t* table, const index_t* idx, Py_ssize_t b0, Py_ssize_t b1,
    Py_ssize_t K, Py_ssize_t O, Py_ssize_t nT
) noexcept nogil:
    if real_t is float and index_t is int32_t:
        return plait_gather_rows_f32_i32(out, table, idx, b0, b1, K, O, nT)
    elif real_t is float:
        return plait_gather_rows_f32_i64(out, table, idx, b0, b1, K, O, nT)
    elif index_t is int32_t:
        return plait_gather_rows_f64_i32(out, table, idx, b0, b1, K, O, nT)
    else:
        return plait_gather_rows_f64_i64(out, table, idx, b0, b1, K, O, nT)


cdef Py_ssize_t _gather_add(
    real_t* out, const real_t* table, const index_t* idx, Py_ssize_t B, Py_ssize_t K, Py_ssize_t O,
    Py_ssize_t nT
) noexcept nogil:
    cdef Py_ssize_t blk, n_bad = 0, n_blocks = (B + _ROW_BLOCK - 1) // _ROW_BLOCK
    if B * K * O < _PARALLEL_MIN_WORK or n_blocks < 2:
        return _gather_rows(out, table, idx, 0, B, K, O, nT)
    # Each row is summed by one thread, in index order: the bits do not depend on the threads.
    for blk in prange(n_blocks, schedule="static"):
        n_bad += _gather_rows(out, table, idx, blk * _ROW_BLOCK, min((blk + 1) * _ROW_BLOCK, B), K, O, nT)
    return n_bad


cdef inline bint _is_floats(object X, bint writeable):
    """A C-contiguous, aligned, native float32/float64 array (writeable if asked)."""
    if not isinstance(X, cnp.ndarray):
        return False
    cdef cnp.ndarray A = <cnp.ndarray>X
    return (
        cnp.PyArray_ISFLOAT(A)
        and (cnp.PyArray_ITEMSIZE(A) == 4 or cnp.PyArray_ITEMSIZE(A) == 8)
        and (cnp.PyArray_ISCARRAY(A) if writeable else cnp.PyArray_ISCARRAY_RO(A))
        and cnp.PyArray_ISNOTSWAPPED(A)
    )


cdef inline bint _is_indices(object X):
    """A C-contiguous, aligned, native int32/int64 array."""
    if not isinstance(X, cnp.ndarray):
        return False
    cdef cnp.ndarray A = <cnp.ndarray>X
    return (
        cnp.PyArray_ISSIGNED(A)
        and (cnp.PyArray_ITEMSIZE(A) == 4 or cnp.PyArray_ITEMSIZE(A) == 8)
        and cnp.PyArray_ISCARRAY_RO(A)
        and cnp.PyArray_ISNOTSWAPPED(A)
    )


def gather_add(object table, object indices):
    """out[b] = sum of table[indices[b, k]] over k: (T, O), (B, K) -> (B, O).

    Returns None, for the reference to handle, unless both arrays suit the kernel (2d,
    C-contiguous, float32/float64 and int32/int64) and every index lies in 0..T-1.
    """
    if not (_is_floats(table, False) and _is_indices(indices)):
        return None
    cdef cnp.ndarray E_arr = <cnp.ndarray>table, I_arr = <cnp.ndarray>indices
    if cnp.PyArray_NDIM(E_arr) != 2 or cnp.PyArray_NDIM(I_arr) != 2:
        return None
    cdef Py_ssize_t nT = E_arr.shape[0], O = E_arr.shape[1]
    cdef Py_ssize_t B = I_arr.shape[0], K = I_arr.shape[1]
    cdef Py_ssize_t n_bad = 0
    cdef bint f32 = cnp.PyArray_ITEMSIZE(E_arr) == 4, i32 = cnp.PyArray_ITEMSIZE(I_arr) == 4
    cdef cnp.npy_intp[2] dims
    dims[0] = B
    dims[1] = O
    cdef cnp.ndarray out = cnp.PyArray_EMPTY(2, dims, cnp.NPY_FLOAT32 if f32 else cnp.NPY_FLOAT64, 0)
    cdef void* Y = cnp.PyArray_DATA(out)
    cdef void* E = cnp.PyArray_DATA(E_arr)
    cdef void* I = cnp.PyArray_DATA(I_arr)
    with nogil:
        if f32 and i32:
            n_bad = _gather_add(<float*>Y, <const float*>E, <const int32_t*>I, B, K, O, nT)
        elif f32:
            n_bad = _gather_add(<float*>Y, <const float*>E, <const int64_t*>I, B, K, O, nT)
        elif i32:
            n_bad = _gather_add(<double*>Y, <const double*>E, <const int32_t*>I, B, K, O, nT)
        else:
            n_bad = _gather_add(<double*>Y, <const double*>E, <const int64_t*>I, B, K, O, nT)
    return out if n_bad == 0 else None


cdef bint _scatter_add(
    real_t* table, const index_t* idx, const real_t* values, Py_ssize_t N, Py_ssize_t O, Py_ssize_t nT,
    Py_ssize_t vdiv,
) noexcept nogil:
    """Check every index, then add; returns False (nothing written) at an index outside -T..T-1."""
    if _any_index_outside(idx, index_t is int32_t, N, -nT, nT):
        return False
    # One thread: the adds wait on memory (random rows); splitting the columns between two
    # threads showed no reliable gain on 2 cores, and a large loss whenever the machine was busy.
    if real_t is float and index_t is int32_t:
        plait_scatter_rows_f32_i32(table, idx, values, N, O, nT, vdiv)
    elif real_t is float:
        plait_scatter_rows_f32_i64(table, idx, values, N, O, nT, vdiv)
    elif index_t is int32_t:
        plait_scatter_rows_f64_i32(table, idx, values, N, O, nT, vdiv)
    else:
        plait_scatter_rows_f64_i64(table, idx, values, N, O, nT, vdiv)
    return True


cdef bint _overlap(cnp.ndarray A, cnp.ndarray B):
    cdef char* a = <char*>cnp.PyArray_DATA(A)
    cdef char* b = <char*>cnp.PyArray_DATA(B)
    return a < b + cnp.PyArray_NBYTES(B) and b < a + cnp.PyArray_NBYTES(A)


def scatter_add(object table, object indices, object values) -> bool:
    """table[indices[i]] += values[i] in index order, in place; negative indices count from the end.

    Shapes: table (T, ...), indices any shape (N values), values indices.shape + table.shape[1:],
    or with a 1 for the last axis of indices (broadcast over it, as numpy.add.at does).
    Returns False, leaving `table` untouched for the reference to handle, unless the arrays suit
    the kernel (C-contiguous, one float dtype, int32/int64 indices, no overlap) and every index
    lies in -T..T-1.
    """
    if not (_is_floats(table, True) and _is_floats(values, False) and _is_indices(indices)):
        return False
    cdef cnp.ndarray E_arr = <cnp.ndarray>table, I_arr = <cnp.ndarray>indices, V_arr = <cnp.ndarray>values
    cdef int t_nd = cnp.PyArray_NDIM(E_arr), i_nd = cnp.PyArray_NDIM(I_arr), d
    if (
        t_nd < 1
        or cnp.PyArray_ITEMSIZE(V_arr) != cnp.PyArray_ITEMSIZE(E_arr)
        or cnp.PyArray_NDIM(V_arr) != i_nd + t_nd - 1
        or _overlap(E_arr, V_arr)
        # indices read from the table's own memory would change under the adds and send them
        # out of bounds (issue 17): the reference's numpy.add.at copies them first.
        or _shares(E_arr, I_arr)
    ):
        return False
    # values may leave out (size 1) the last index axis: each value row then goes to all the
    # indices of that axis, e.g. HashEmbed's (nN, 1, nO) gradient for its (nN, nK) keys.
    cdef Py_ssize_t vdiv = 1
    for d in range(i_nd):
        if V_arr.shape[d] != I_arr.shape[d]:
            if d == i_nd - 1 and V_arr.shape[d] == 1 and I_arr.shape[d] > 0:
                vdiv = I_arr.shape[d]
            else:
                return False
    for d in range(1, t_nd):
        if V_arr.shape[i_nd + d - 1] != E_arr.shape[d]:
            return False
    cdef Py_ssize_t nT = E_arr.shape[0], N = cnp.PyArray_SIZE(I_arr), O = 1
    for d in range(1, t_nd):
        O *= E_arr.shape[d]
    cdef void* E = cnp.PyArray_DATA(E_arr)
    cdef void* I = cnp.PyArray_DATA(I_arr)
    cdef void* V = cnp.PyArray_DATA(V_arr)
    cdef bint f32 = cnp.PyArray_ITEMSIZE(E_arr) == 4, i32 = cnp.PyArray_ITEMSIZE(I_arr) == 4
    cdef bint ok
    with nogil:
        if f32 and i32:
            ok = _scatter_add(<float*>E, <const int32_t*>I, <const float*>V, N, O, nT, vdiv)
        elif f32:
            ok = _scatter_add(<float*>E, <const int64_t*>I, <const float*>V, N, O, nT, vdiv)
        elif i32:
            ok = _scatter_add(<double*>E, <const int32_t*>I, <const double*>V, N, O, nT, vdiv)
        else:
            ok = _scatter_add(<double*>E, <const int64_t*>I, <const double*>V, N, O, nT, vdiv)
    return ok
