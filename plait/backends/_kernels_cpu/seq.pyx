# cython: language_level=3
"""CPU kernels for NumpyOps: seq2col, maxout and the ragged reductions, with their backprops.

Each entry point takes the arguments of the Ops method as they came and returns None when they
fall outside its fast case (not an exact, aligned, native-order, C-contiguous ndarray of the
expected rank and dtype) or are invalid; the mixin (plait.backends._numpy_seq) then calls the
Ops reference, which computes the odd cases and raises the errors. Otherwise it returns the result.

Bit-identical to Ops(numpy) whatever the thread count: threads split independent outputs (row
blocks, maxout cells, whole sequences) and every sum is accumulated by one thread in the
reference's order (rows in sequence order; seq2col window slots from the leftmost).

The kernels take raw pointers into arrays validated here rather than typed memoryviews: taking a
memoryview costs about 0.2 us per argument and an OpenMP region about 1 us, more than the whole
op on one sentence, so small calls run serially on pointers and only large ones open a region.
"""
cimport numpy as cnp

from ._arrays cimport _data, _dim, _float_kind, _index_kind
from cython cimport floating
from cython.parallel cimport prange
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy, memset

cnp.import_array()

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int plait_seq_max_threads(void) { return omp_get_max_threads(); }
    #else
    static int plait_seq_max_threads(void) { return 1; }
    #endif
    """
    int plait_seq_max_threads() nogil
    void __builtin_prefetch(const void* addr) nogil

cdef extern from *:
    """
    #include <stdint.h>

    /* backprop_seq2col's row loop is adds over short contiguous pieces: wider vectors halve
       its instructions. It is compiled for AVX-512, AVX2 or the baseline, as the build allows
       (plait_isa.h); adds are adds at any width, so every build gives the same bits. */
    #include "plait_isa.h"
    #define PLAIT_SEQ_CLONES PLAIT_UPTO_V4_AVX2
    #define PLAIT_BPS2C_CHUNK 64

    /* Rows r0..r1-1 of dX from dY (nM, (2 nW + 1) nF); j is the sequence holding row r0.
       Slot k of row i holds row i + k - nW, so row r receives slot k of row r + nW - k for
       the k that keep that row inside r's sequence, summed from the lowest k, starting at
       +0 (the reference's order and its 0 + x, which turns -0.0 into 0.0). Each piece of
       the output is summed in a local chunk and stored once. */
    #define PLAIT_DEFINE_BPS2C(T, SUF)                                                           \
    static PLAIT_SEQ_CLONES void plait_bps2c_rows_##SUF(                                         \
            const T *restrict dY, T *restrict dX, const int64_t *offs, Py_ssize_t nF,            \
            Py_ssize_t nW, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t j, Py_ssize_t end,           \
            Py_ssize_t prefetch_rows) {                                                          \
        const Py_ssize_t width = (2 * nW + 1) * nF;                                              \
        for (Py_ssize_t r = r0; r < r1; ++r) {                                                   \
            while (offs[j + 1] <= r) ++j;                                                        \
            /* The reads step back and forth over 2 nW + 1 rows, which defeats the hardware     \
               prefetcher: fetch the row later outputs start on ahead of time. */                \
            Py_ssize_t ahead = r + nW + prefetch_rows;                                           \
            if (ahead < end) {                                                                   \
                const char *line = (const char *)(dY + ahead * width);                           \
                for (Py_ssize_t b = 0; b < width * (Py_ssize_t)sizeof(T); b += 64)               \
                    __builtin_prefetch(line + b);                                                \
            }                                                                                    \
            const Py_ssize_t k0 = r + nW >= offs[j + 1] ? r + nW - offs[j + 1] + 1 : 0;          \
            const Py_ssize_t k1 = r - nW < offs[j] ? r + nW - offs[j] : 2 * nW;                  \
            T *dst = dX + r * nF;                                                                \
            Py_ssize_t f0 = 0;                                                                   \
            for (; f0 + PLAIT_BPS2C_CHUNK <= nF; f0 += PLAIT_BPS2C_CHUNK) {                      \
                T acc[PLAIT_BPS2C_CHUNK];                                                        \
                const T *src = dY + (r + nW - k0) * width + k0 * nF + f0;                        \
                for (int f = 0; f < PLAIT_BPS2C_CHUNK; ++f) acc[f] = (T)0 + src[f];              \
                for (Py_ssize_t k = k0 + 1; k <= k1; ++k) {                                      \
                    src = dY + (r + nW - k) * width + k * nF + f0;                               \
                    for (int f = 0; f < PLAIT_BPS2C_CHUNK; ++f) acc[f] += src[f];                \
                }                                                                                \
                for (int f = 0; f < PLAIT_BPS2C_CHUNK; ++f) dst[f0 + f] = acc[f];                \
            }                                                                                    \
            if (f0 < nF) {                                                                       \
                const Py_ssize_t n = nF - f0;                                                    \
                const T *src = dY + (r + nW - k0) * width + k0 * nF + f0;                        \
                for (Py_ssize_t f = 0; f < n; ++f) dst[f0 + f] = (T)0 + src[f];                  \
                for (Py_ssize_t k = k0 + 1; k <= k1; ++k) {                                      \
                    src = dY + (r + nW - k) * width + k * nF + f0;                               \
                    for (Py_ssize_t f = 0; f < n; ++f) dst[f0 + f] += src[f];                    \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }
    PLAIT_DEFINE_BPS2C(float, f)
    PLAIT_DEFINE_BPS2C(double, d)

    /* y = 0 + x[0] + x[1] + ... over n >= 1 rows of nO, in row order (the reference's add.at
       order; 0 + x turns -0.0 into 0.0). Four rows per sweep: (((y + a) + b) + c) + d rounds
       as four sweeps would, with a quarter of y's loads and stores. */
    #define PLAIT_DEFINE_SUMSEQ(T, SUF)                                                          \
    static PLAIT_SEQ_CLONES void plait_sum_rows_##SUF(                                           \
            const T *restrict x, T *restrict y, Py_ssize_t n, Py_ssize_t nO) {                   \
        for (Py_ssize_t o = 0; o < nO; ++o) y[o] = (T)0 + x[o];                                  \
        Py_ssize_t r = 1;                                                                        \
        for (; r + 3 < n; r += 4) {                                                              \
            const T *a = x + r * nO, *b = a + nO, *c = b + nO, *d = c + nO;                      \
            for (Py_ssize_t o = 0; o < nO; ++o) y[o] = (((y[o] + a[o]) + b[o]) + c[o]) + d[o];   \
        }                                                                                        \
        for (; r < n; ++r) {                                                                     \
            const T *a = x + r * nO;                                                             \
            for (Py_ssize_t o = 0; o < nO; ++o) y[o] += a[o];                                    \
        }                                                                                        \
    }
    PLAIT_DEFINE_SUMSEQ(float, f)
    PLAIT_DEFINE_SUMSEQ(double, d)

    /* backprop_maxout for float32 gradients and int32 winners, 16 cells at a time with
       AVX-512: the 16 * nP output floats of 16 cells are nP vectors, and lane e of vector j
       is piece (16 j + e) % nP of cell (16 j + e) / nP, so each vector is the cells'
       gradients and winners permuted into place, kept where the winner is that piece and
       zero elsewhere: nP full stores instead of a zero fill and 16 scattered ones. Copies
       bits, so it agrees with the scalar path exactly. Handles cells 0..m-1 in whole groups
       of 16 (nP <= 16) and returns how many it did; *bad counts winners outside 0..nP-1. */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
    #include <immintrin.h>
    #define PLAIT_BPMAXOUT_AVX512 1
    /* Output float q of a group of `lanes` cells belongs to cell q / nP and is piece q % nP. */
    static void plait_bpmaxout_layout(int32_t *cell, int32_t *piece, int lanes, Py_ssize_t nP) {
        for (int q = 0; q < lanes * (int)nP; ++q) {
            cell[q] = q / (int)nP;
            piece[q] = q % (int)nP;
        }
    }
    __attribute__((target("avx512f")))
    static Py_ssize_t plait_bpmaxout_f32_i32_avx512(const float *dY, const int32_t *which,
                                                    float *dX, Py_ssize_t m, Py_ssize_t nP,
                                                    Py_ssize_t *bad) {
        int32_t cell[256], piece[256];
        plait_bpmaxout_layout(cell, piece, 16, nP);
        const __m512i limit = _mm512_set1_epi32((int)nP);
        Py_ssize_t c = 0, n_bad = 0;
        for (; c + 16 <= m; c += 16) {
            const __m512 g = _mm512_loadu_ps(dY + c);
            const __m512i w = _mm512_loadu_si512((const void *)(which + c));
            n_bad += __builtin_popcount((unsigned)_mm512_cmpge_epu32_mask(w, limit));
            float *out = dX + c * nP;
            for (Py_ssize_t j = 0; j < nP; ++j) {
                const __m512i ci = _mm512_loadu_si512((const void *)(cell + 16 * j));
                const __m512i pc = _mm512_loadu_si512((const void *)(piece + 16 * j));
                const __mmask16 keep = _mm512_cmpeq_epi32_mask(_mm512_permutexvar_epi32(ci, w), pc);
                _mm512_storeu_ps(out + 16 * j, _mm512_maskz_mov_ps(keep, _mm512_permutexvar_ps(ci, g)));
            }
        }
        *bad = n_bad;
        return c;
    }
    /* The same with AVX2, 8 cells at a time: vpermps/vpermd move the cells' gradients and
       winners into place within a 256-bit vector, and an AND with the compare keeps the
       winners' bits (the others are +0.0, as the scalar path's zero fill). A winner is valid
       when 0 <= w < nP, tested with two signed compares (AVX2 has no unsigned one). */
    __attribute__((target("avx2")))
    static Py_ssize_t plait_bpmaxout_f32_i32_avx2(const float *dY, const int32_t *which,
                                                  float *dX, Py_ssize_t m, Py_ssize_t nP,
                                                  Py_ssize_t *bad) {
        int32_t cell[128], piece[128];
        plait_bpmaxout_layout(cell, piece, 8, nP);
        const __m256i limit = _mm256_set1_epi32((int)nP);
        const __m256i below = _mm256_set1_epi32(-1);
        Py_ssize_t c = 0, n_bad = 0;
        for (; c + 8 <= m; c += 8) {
            const __m256 g = _mm256_loadu_ps(dY + c);
            const __m256i w = _mm256_loadu_si256((const __m256i *)(which + c));
            const __m256i ok = _mm256_and_si256(_mm256_cmpgt_epi32(limit, w), _mm256_cmpgt_epi32(w, below));
            n_bad += 8 - __builtin_popcount((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(ok)));
            float *out = dX + c * nP;
            for (Py_ssize_t j = 0; j < nP; ++j) {
                const __m256i ci = _mm256_loadu_si256((const __m256i *)(cell + 8 * j));
                const __m256i pc = _mm256_loadu_si256((const __m256i *)(piece + 8 * j));
                const __m256i keep = _mm256_cmpeq_epi32(_mm256_permutevar8x32_epi32(w, ci), pc);
                _mm256_storeu_ps(out + 8 * j, _mm256_and_ps(_mm256_castsi256_ps(keep),
                                                            _mm256_permutevar8x32_ps(g, ci)));
            }
        }
        *bad = n_bad;
        return c;
    }
    /* The vector width of the maxout backprop this build and CPU run: 16, 8 or 0 (scalar). */
    static int plait_bpmaxout_lanes(void) {
        static int known = -1;
        if (known < 0) {
            __builtin_cpu_init();
            known = (PLAIT_ISA_ALLOWS(4) && __builtin_cpu_supports("avx512f")) ? 16
                    : ((PLAIT_ISA_ALLOWS(3) && __builtin_cpu_supports("avx2")) ? 8 : 0);
        }
        return known;
    }
    #else
    #define PLAIT_BPMAXOUT_AVX512 0
    static Py_ssize_t plait_bpmaxout_f32_i32_avx512(const float *dY, const int32_t *which,
                                                    float *dX, Py_ssize_t m, Py_ssize_t nP,
                                                    Py_ssize_t *bad) { *bad = 0; return 0; }
    static Py_ssize_t plait_bpmaxout_f32_i32_avx2(const float *dY, const int32_t *which,
                                                  float *dX, Py_ssize_t m, Py_ssize_t nP,
                                                  Py_ssize_t *bad) { *bad = 0; return 0; }
    static int plait_bpmaxout_lanes(void) { return 0; }
    #endif
    """
    void plait_bps2c_rows_f(const float* dY, float* dX, const int64_t* offs, Py_ssize_t nF,
                            Py_ssize_t nW, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t j,
                            Py_ssize_t end, Py_ssize_t prefetch_rows) nogil
    Py_ssize_t plait_bpmaxout_f32_i32_avx512(const float* dY, const int32_t* which, float* dX,
                                             Py_ssize_t m, Py_ssize_t nP, Py_ssize_t* bad) nogil
    Py_ssize_t plait_bpmaxout_f32_i32_avx2(const float* dY, const int32_t* which, float* dX,
                                           Py_ssize_t m, Py_ssize_t nP, Py_ssize_t* bad) nogil
    int plait_bpmaxout_lanes() nogil
    void plait_sum_rows_f(const float* x, float* y, Py_ssize_t n, Py_ssize_t nO) nogil
    void plait_sum_rows_d(const double* x, double* y, Py_ssize_t n, Py_ssize_t nO) nogil
    void plait_bps2c_rows_d(const double* dY, double* dX, const int64_t* offs, Py_ssize_t nF,
                            Py_ssize_t nW, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t j,
                            Py_ssize_t end, Py_ssize_t prefetch_rows) nogil

ctypedef fused index_t:
    int32_t
    int64_t

cdef enum:
    # Rows per seq2col work item: enough to amortise finding the first row's sequence.
    _ROW_BLOCK = 64
    # maxout cells per work item; also the span re-done when a NaN turns up.
    _CELL_BLOCK = 2048
    # How far ahead backprop_seq2col fetches rows of dY.
    _PREFETCH_ROWS = 4
    _INT32_MAX = 2147483647


# Below this many elements touched, a parallel region costs more than it saves.
cdef Py_ssize_t _parallel_min_work = 1 << 22


def set_parallel_min_work(Py_ssize_t n):
    """Set the work (elements touched) from which an op uses threads; returns the old value.

    For tests, which set 0 to run the threaded paths on small inputs.
    """
    global _parallel_min_work
    old = _parallel_min_work
    _parallel_min_work = max(n, 0)
    return old


cdef inline int _threads(Py_ssize_t work) noexcept:
    # NOTE: prange's num_threads overrides omp_set_num_threads, so the current OpenMP limit
    # (threadpoolctl's) is read here rather than hard-coded.
    if work < _parallel_min_work:
        return 1
    return plait_seq_max_threads()


cdef inline cnp.ndarray _new2(Py_ssize_t d0, Py_ssize_t d1, int typenum, bint zeros):
    cdef cnp.npy_intp dims[2]
    dims[0] = d0
    dims[1] = d1
    if zeros:
        return cnp.PyArray_ZEROS(2, dims, typenum, 0)
    return cnp.PyArray_EMPTY(2, dims, typenum, 0)


cdef inline cnp.ndarray _new1(Py_ssize_t d0, int typenum):
    cdef cnp.npy_intp dims[1]
    dims[0] = d0
    return cnp.PyArray_EMPTY(1, dims, typenum, 0)


# ---------------------------------------------------------------- sequence offsets

cdef int64_t _fill_offsets(
    const index_t* lengths, Py_ssize_t n, int64_t* offs, bint allow_zero
) noexcept nogil:
    """offs[j] = start of sequence j, offs[n] = total; -1 for a negative (or forbidden zero) length."""
    cdef Py_ssize_t j
    cdef int64_t total = 0, v
    offs[0] = 0
    for j in range(n):
        v = lengths[j]
        # A total past PY_SSIZE_T_MAX cannot match any array either; -1 sends it to the reference.
        if v < 0 or (v == 0 and not allow_zero) or v > PY_SSIZE_T_MAX - total:
            return -1
        total += v
        offs[j + 1] = total
    return total


cdef object _offsets(object lengths, Py_ssize_t n_rows, bint allow_zero, bint exact=True):
    """int64 offsets (len(lengths) + 1) of valid lengths summing to n_rows (at most n_rows when
    not exact; any sum if n_rows < 0).

    None when lengths is not an int32/int64 vector we can read in place, or holds invalid values.
    """
    cdef int ik = _index_kind(lengths, 1)
    if ik == 0:
        return None
    cdef Py_ssize_t n = _dim(lengths, 0)
    cdef cnp.ndarray offs = _new1(n + 1, cnp.NPY_INT64)
    cdef int64_t total
    if ik == 4:
        total = _fill_offsets(<const int32_t*>_data(lengths), n, <int64_t*>_data(offs), allow_zero)
    else:
        total = _fill_offsets(<const int64_t*>_data(lengths), n, <int64_t*>_data(offs), allow_zero)
    if total < 0 or (n_rows >= 0 and (total > n_rows or (exact and total != n_rows))):
        return None
    return offs


cdef inline Py_ssize_t _seq_of_row(const int64_t* offs, Py_ssize_t nS, Py_ssize_t row) noexcept nogil:
    """The last j < nS with offs[j] <= row: the sequence holding row, given 0 <= row < offs[nS]."""
    cdef Py_ssize_t lo = 0, hi = nS, mid
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offs[mid] <= row:
            lo = mid
        else:
            hi = mid
    return lo


# ---------------------------------------------------------------- seq2col

cdef void _seq2col_rows(
    const floating* X, floating* Y, const int64_t* offs, Py_ssize_t nS, Py_ssize_t nF,
    Py_ssize_t nW, Py_ssize_t r0, Py_ssize_t r1,
) noexcept nogil:
    cdef Py_ssize_t width = (2 * nW + 1) * nF, r, lo, hi, n_lead, n_mid
    cdef Py_ssize_t j = _seq_of_row(offs, nS, r0)
    cdef floating* dst
    for r in range(r0, r1):
        while offs[j + 1] <= r:
            j += 1
        # The window's rows inside the sequence are consecutive in X and in the output row,
        # so the whole window is one copy between two zero fills.
        lo = r - nW if r - nW > offs[j] else offs[j]
        hi = r + nW + 1 if r + nW + 1 < offs[j + 1] else offs[j + 1]
        dst = Y + r * width
        n_lead = (lo - (r - nW)) * nF
        n_mid = (hi - lo) * nF
        if n_lead:
            memset(dst, 0, n_lead * sizeof(floating))
        memcpy(dst + n_lead, X + lo * nF, n_mid * sizeof(floating))
        if width - n_lead - n_mid:
            memset(dst + n_lead + n_mid, 0, (width - n_lead - n_mid) * sizeof(floating))


cdef void _seq2col_run(
    const floating* X, floating* Y, const int64_t* offs, Py_ssize_t nS, Py_ssize_t nM, Py_ssize_t nF,
    Py_ssize_t nW, int n_threads,
) noexcept nogil:
    cdef Py_ssize_t b
    if n_threads == 1:
        _seq2col_rows(X, Y, offs, nS, nF, nW, 0, nM)
        return
    for b in prange((nM + _ROW_BLOCK - 1) // _ROW_BLOCK, num_threads=n_threads, schedule="static"):
        _seq2col_rows(X, Y, offs, nS, nF, nW, b * _ROW_BLOCK, min((b + 1) * _ROW_BLOCK, nM))


cdef inline void _backprop_seq2col_rows(
    const floating* dY, floating* dX, const int64_t* offs, Py_ssize_t nS, Py_ssize_t nF,
    Py_ssize_t nW, Py_ssize_t r0, Py_ssize_t r1,
) noexcept nogil:
    cdef Py_ssize_t j = _seq_of_row(offs, nS, r0)
    if floating is float:
        plait_bps2c_rows_f(dY, dX, offs, nF, nW, r0, r1, j, offs[nS], _PREFETCH_ROWS)
    else:
        plait_bps2c_rows_d(dY, dX, offs, nF, nW, r0, r1, j, offs[nS], _PREFETCH_ROWS)


cdef void _backprop_seq2col_run(
    const floating* dY, floating* dX, const int64_t* offs, Py_ssize_t nS, Py_ssize_t nM,
    Py_ssize_t nF, Py_ssize_t nW, int n_threads,
) noexcept nogil:
    cdef Py_ssize_t b
    if n_threads == 1:
        _backprop_seq2col_rows(dY, dX, offs, nS, nF, nW, 0, nM)
        return
    for b in prange((nM + _ROW_BLOCK - 1) // _ROW_BLOCK, num_threads=n_threads, schedule="static"):
        _backprop_seq2col_rows(dY, dX, offs, nS, nF, nW, b * _ROW_BLOCK, min((b + 1) * _ROW_BLOCK, nM))


cdef object _window_offsets(object lengths, Py_ssize_t nM, object nW):
    if type(nW) is not int or nW < 0 or nW > _INT32_MAX:
        return None
    if lengths is None:
        offs = _new1(2, cnp.NPY_INT64)
        (<int64_t*>_data(offs))[0] = 0
        (<int64_t*>_data(offs))[1] = nM
        return offs
    return _offsets(lengths, nM, True)


def seq2col(seq, nW, lengths):
    """(nM, nF) -> (nM, (2 * nW + 1) * nF); None outside the fast case."""
    cdef int fk = _float_kind(seq, 2)
    if fk == 0:
        return None
    cdef Py_ssize_t nM = _dim(seq, 0), nF = _dim(seq, 1)
    offs = _window_offsets(lengths, nM, nW)
    if offs is None:
        return None
    cdef Py_ssize_t w = nW, nS = _dim(offs, 0) - 1
    Y = _new2(nM, (2 * w + 1) * nF, cnp.PyArray_TYPE(<cnp.ndarray>seq), False)
    if nM == 0 or nF == 0:
        return Y
    cdef int n_threads = _threads(nM * (2 * w + 1) * nF)
    cdef const void* x = _data(seq)
    cdef void* y = _data(Y)
    cdef const int64_t* o = <const int64_t*>_data(offs)
    with nogil:
        if fk == 4:
            _seq2col_run(<const float*>x, <float*>y, o, nS, nM, nF, w, n_threads)
        else:
            _seq2col_run(<const double*>x, <double*>y, o, nS, nM, nF, w, n_threads)
    return Y


def backprop_seq2col(dY, nW, lengths):
    """(nM, (2 * nW + 1) * nF) -> (nM, nF); None outside the fast case."""
    cdef int fk = _float_kind(dY, 2)
    if fk == 0:
        return None
    cdef Py_ssize_t nM = _dim(dY, 0), width = _dim(dY, 1)
    offs = _window_offsets(lengths, nM, nW)
    if offs is None:
        return None
    cdef Py_ssize_t w = nW, nS = _dim(offs, 0) - 1
    if width % (2 * w + 1):
        return None
    cdef Py_ssize_t nF = width // (2 * w + 1)
    dX = _new2(nM, nF, cnp.PyArray_TYPE(<cnp.ndarray>dY), False)
    if nM == 0 or nF == 0:
        return dX
    cdef int n_threads = _threads(nM * width)
    cdef const void* g = _data(dY)
    cdef void* d = _data(dX)
    cdef const int64_t* o = <const int64_t*>_data(offs)
    with nogil:
        if fk == 4:
            _backprop_seq2col_run(<const float*>g, <float*>d, o, nS, nM, nF, w, n_threads)
        else:
            _backprop_seq2col_run(<const double*>g, <double*>d, o, nS, nM, nF, w, n_threads)
    return dX


# ---------------------------------------------------------------- maxout

cdef inline bint _maxout_cells(
    const floating* X, floating* best, int32_t* which, Py_ssize_t n, Py_ssize_t nP
) noexcept nogil:
    """Max and argmax of n cells by plain comparisons; True when a NaN may have changed the answer."""
    # Inlined with a literal nP, the compiler makes this branch-free and vectorises it over
    # cells, as long as the body stays a compare and two selects (no short-circuit NaN logic).
    cdef Py_ssize_t c, p
    cdef floating v, bv
    cdef int32_t bi, t
    cdef bint nan = False
    for c in range(n):
        bv = X[c * nP]
        bi = 0
        for p in range(1, nP):
            v = X[c * nP + p]
            nan |= v != v
            if floating is float:
                if v > bv:
                    bv = v
                    bi = <int32_t>p
            else:
                # Doubles beside an int32 index do not vectorise; this at least keeps them
                # branch-free: the index moves by a mask, the value by a max.
                t = v > bv
                bi = bi ^ ((bi ^ <int32_t>p) & -t)
                bv = v if v > bv else bv
        best[c] = bv
        which[c] = bi
    return nan


cdef inline void _maxout_cells_nan(
    const floating* X, floating* best, int32_t* which, Py_ssize_t n, Py_ssize_t nP
) noexcept nogil:
    """_maxout_cells with numpy's argmax rule that the first NaN wins over everything after it."""
    cdef Py_ssize_t c, p
    cdef floating v, bv
    cdef int32_t bi
    for c in range(n):
        bv = X[c * nP]
        bi = 0
        for p in range(1, nP):
            v = X[c * nP + p]
            if v > bv or (v != v and bv == bv):
                bv = v
                bi = <int32_t>p
        best[c] = bv
        which[c] = bi


cdef void _maxout_block(
    const floating* X, floating* best, int32_t* which, Py_ssize_t n, Py_ssize_t nP, Py_ssize_t k
) noexcept nogil:
    cdef Py_ssize_t c0 = k * _CELL_BLOCK
    cdef Py_ssize_t m = min(_CELL_BLOCK, n - c0)
    cdef bint nan
    X += c0 * nP
    best += c0
    which += c0
    if nP == 2:
        nan = _maxout_cells(X, best, which, m, 2)
    elif nP == 3:
        nan = _maxout_cells(X, best, which, m, 3)
    elif nP == 4:
        nan = _maxout_cells(X, best, which, m, 4)
    else:
        nan = _maxout_cells(X, best, which, m, nP)
    if nan:
        _maxout_cells_nan(X, best, which, m, nP)


cdef void _maxout_run(
    const floating* X, floating* best, int32_t* which, Py_ssize_t n, Py_ssize_t nP, int n_threads
) noexcept nogil:
    cdef Py_ssize_t k, n_blocks = (n + _CELL_BLOCK - 1) // _CELL_BLOCK
    if n_threads == 1:
        for k in range(n_blocks):
            _maxout_block(X, best, which, n, nP, k)
        return
    for k in prange(n_blocks, num_threads=n_threads, schedule="static"):
        _maxout_block(X, best, which, n, nP, k)


def maxout(X):
    """(nB, nO, nP) -> (nB, nO) maxima and (nB, nO) int32 winners; None outside the fast case."""
    cdef int fk = _float_kind(X, 3)
    if fk == 0:
        return None
    cdef Py_ssize_t nB = _dim(X, 0), nO = _dim(X, 1), nP = _dim(X, 2)
    if nP == 0 or nP > _INT32_MAX:
        return None
    best = _new2(nB, nO, cnp.PyArray_TYPE(<cnp.ndarray>X), False)
    which = _new2(nB, nO, cnp.NPY_INT32, False)
    if nB == 0 or nO == 0:
        return best, which
    cdef int n_threads = _threads(nB * nO * nP)
    cdef const void* x = _data(X)
    cdef void* y = _data(best)
    cdef int32_t* w = <int32_t*>_data(which)
    with nogil:
        if fk == 4:
            _maxout_run(<const float*>x, <float*>y, w, nB * nO, nP, n_threads)
        else:
            _maxout_run(<const double*>x, <double*>y, w, nB * nO, nP, n_threads)
    return best, which


cdef Py_ssize_t _backprop_maxout_block(
    const floating* dY, const index_t* which, floating* dX, Py_ssize_t n, Py_ssize_t nP, Py_ssize_t k
) noexcept nogil:
    """Zero a block of cells of dX and put each gradient on its winner.

    Returns how many winners fall outside 0..nP-1.
    """
    cdef Py_ssize_t c, c0 = k * _CELL_BLOCK, bad = 0, done
    cdef Py_ssize_t m = min(_CELL_BLOCK, n - c0)
    cdef index_t w
    dY += c0
    which += c0
    dX += c0 * nP
    if floating is float and index_t is int32_t:
        done = 0
        if nP <= 16 and plait_bpmaxout_lanes() == 16:
            done = plait_bpmaxout_f32_i32_avx512(dY, which, dX, m, nP, &bad)
        elif nP <= 16 and plait_bpmaxout_lanes() == 8:
            done = plait_bpmaxout_f32_i32_avx2(dY, which, dX, m, nP, &bad)
        if done:
            dY += done
            which += done
            dX += done * nP
            m -= done
    # The block is zeroed here, where it is about to be written (it fits in L1/L2), rather
    # than by a calloc of the whole array: recycled heap memory would be zeroed in one pass
    # over memory and the winners stored in a second. Then one store per cell: writing every
    # piece through a select compiles to unpredictable branches or several times the work.
    memset(dX, 0, m * nP * sizeof(floating))
    for c in range(m):
        w = which[c]
        # One unsigned compare covers w < 0 too.
        if <size_t>w >= <size_t>nP:
            bad += 1
        else:
            dX[w] = dY[c]
        dX += nP
    return bad


cdef Py_ssize_t _backprop_maxout_run(
    const floating* dY, const index_t* which, floating* dX, Py_ssize_t n, Py_ssize_t nP, int n_threads
) noexcept nogil:
    """Returns how many winners fall outside 0..nP-1 (dX is then garbage)."""
    cdef Py_ssize_t k, bad = 0, n_blocks = (n + _CELL_BLOCK - 1) // _CELL_BLOCK
    if n_threads == 1:
        for k in range(n_blocks):
            bad += _backprop_maxout_block(dY, which, dX, n, nP, k)
        return bad
    for k in prange(n_blocks, num_threads=n_threads, schedule="static"):
        bad += _backprop_maxout_block(dY, which, dX, n, nP, k)
    return bad


def backprop_maxout(dY, which, P):
    """(nB, nO) gradients and winners -> (nB, nO, P); None outside the fast case."""
    cdef int fk = _float_kind(dY, 2)
    cdef int ik = _index_kind(which, 2)
    if fk == 0 or ik == 0 or type(P) is not int or P < 1 or P > _INT32_MAX:
        return None
    cdef Py_ssize_t nB = _dim(dY, 0), nO = _dim(dY, 1), nP = P
    if _dim(which, 0) != nB or _dim(which, 1) != nO:
        return None
    cdef cnp.npy_intp dims[3]
    dims[0] = nB
    dims[1] = nO
    dims[2] = nP
    dX = cnp.PyArray_EMPTY(3, dims, cnp.PyArray_TYPE(<cnp.ndarray>dY), 0)
    if nB == 0 or nO == 0:
        return dX
    cdef int n_threads = _threads(nB * nO * nP)
    cdef Py_ssize_t bad
    cdef const void* g = _data(dY)
    cdef const void* w = _data(which)
    cdef void* d = _data(dX)
    cdef Py_ssize_t n = nB * nO
    with nogil:
        if fk == 4 and ik == 4:
            bad = _backprop_maxout_run(<const float*>g, <const int32_t*>w, <float*>d, n, nP, n_threads)
        elif fk == 4:
            bad = _backprop_maxout_run(<const float*>g, <const int64_t*>w, <float*>d, n, nP, n_threads)
        elif ik == 4:
            bad = _backprop_maxout_run(<const double*>g, <const int32_t*>w, <double*>d, n, nP, n_threads)
        else:
            bad = _backprop_maxout_run(<const double*>g, <const int64_t*>w, <double*>d, n, nP, n_threads)
    return None if bad else dX


# ---------------------------------------------------------------- reduce_sum / reduce_mean

cdef void _divide(floating* y, Py_ssize_t nO, Py_ssize_t n) noexcept nogil:
    """y /= n, rounded as the reference's division."""
    cdef Py_ssize_t o
    cdef floating d
    # Multiplying by the reciprocal rounds as dividing only when the reciprocal is exact
    # (n a power of two); division is several times slower, and dividing by 1 changes nothing.
    if n == 1:
        return
    if n & (n - 1) == 0:
        d = 1 / <floating>n
        for o in range(nO):
            y[o] *= d
    else:
        d = <floating>n
        for o in range(nO):
            y[o] /= d


cdef void _sum_seq(
    const floating* X, const int64_t* offs, floating* Y, Py_ssize_t nO, bint mean, Py_ssize_t j
) noexcept nogil:
    cdef Py_ssize_t r, o, n = offs[j + 1] - offs[j]
    cdef floating* y = Y + j * nO
    cdef const floating* x = X + offs[j] * nO
    if n == 0:
        for o in range(nO):
            y[o] = 0
        return
    # Rows are added in order to zeros, as the reference's add.at does (plait_sum_rows_*).
    if floating is float:
        plait_sum_rows_f(x, y, n, nO)
    else:
        plait_sum_rows_d(x, y, n, nO)
    if mean:
        _divide(y, nO, n)


cdef void _sum_run(
    const floating* X, const int64_t* offs, floating* Y, Py_ssize_t nS, Py_ssize_t nO, bint mean,
    int n_threads,
) noexcept nogil:
    cdef Py_ssize_t j
    if n_threads == 1:
        for j in range(nS):
            _sum_seq(X, offs, Y, nO, mean, j)
        return
    for j in prange(nS, num_threads=n_threads, schedule="guided"):
        _sum_seq(X, offs, Y, nO, mean, j)


cdef object _reduce_sum_or_mean(object X, object lengths, bint mean):
    cdef int fk = _float_kind(X, 2)
    if fk == 0:
        return None
    cdef Py_ssize_t nN = _dim(X, 0), nO = _dim(X, 1)
    # As in Thinc, rows past the last sequence are ignored.
    offs = _offsets(lengths, nN, True, False)
    if offs is None:
        return None
    cdef Py_ssize_t nS = _dim(offs, 0) - 1
    Y = _new2(nS, nO, cnp.PyArray_TYPE(<cnp.ndarray>X), False)
    if nS == 0 or nO == 0:
        return Y
    cdef int n_threads = _threads((nN + nS) * nO) if nS > 1 else 1
    cdef const void* x = _data(X)
    cdef void* y = _data(Y)
    cdef const int64_t* o = <const int64_t*>_data(offs)
    with nogil:
        if fk == 4:
            _sum_run(<const float*>x, o, <float*>y, nS, nO, mean, n_threads)
        else:
            _sum_run(<const double*>x, o, <double*>y, nS, nO, mean, n_threads)
    return Y


def reduce_sum(X, lengths):
    """(nN, nO) -> (len(lengths), nO); None outside the fast case."""
    return _reduce_sum_or_mean(X, lengths, False)


def reduce_mean(X, lengths):
    """(nN, nO) -> (len(lengths), nO); None outside the fast case."""
    return _reduce_sum_or_mean(X, lengths, True)


cdef void _spread_seq(
    const floating* dY, const int64_t* offs, floating* dX, Py_ssize_t nO, bint mean, Py_ssize_t j
) noexcept nogil:
    cdef Py_ssize_t r, o, n = offs[j + 1] - offs[j]
    cdef floating* first = dX + offs[j] * nO
    cdef const floating* src = dY + j * nO
    cdef floating scale
    if n == 0:
        return
    if mean:
        # The reference rounds 1 / length to the array's dtype first, then multiplies.
        scale = <floating>(1.0 / <double>n)
        for o in range(nO):
            first[o] = src[o] * scale
    else:
        memcpy(first, src, nO * sizeof(floating))
    for r in range(1, n):
        memcpy(first + r * nO, first, nO * sizeof(floating))


cdef void _spread_run(
    const floating* dY, const int64_t* offs, floating* dX, Py_ssize_t nS, Py_ssize_t nO, bint mean,
    int n_threads,
) noexcept nogil:
    cdef Py_ssize_t j
    if n_threads == 1:
        for j in range(nS):
            _spread_seq(dY, offs, dX, nO, mean, j)
        return
    for j in prange(nS, num_threads=n_threads, schedule="guided"):
        _spread_seq(dY, offs, dX, nO, mean, j)


cdef object _backprop_reduce_sum_or_mean(object dY, object lengths, bint mean):
    cdef int fk = _float_kind(dY, 2)
    if fk == 0:
        return None
    cdef Py_ssize_t nS = _dim(dY, 0), nO = _dim(dY, 1)
    offs = _offsets(lengths, -1, True)
    # As in Thinc, rows of dY past the last sequence are ignored.
    if offs is None or _dim(offs, 0) - 1 > nS:
        return None
    nS = _dim(offs, 0) - 1
    cdef const int64_t* o = <const int64_t*>_data(offs)
    cdef Py_ssize_t nN = o[nS]
    dX = _new2(nN, nO, cnp.PyArray_TYPE(<cnp.ndarray>dY), False)
    if nN == 0 or nO == 0:
        return dX
    cdef int n_threads = _threads(nN * nO) if nS > 1 else 1
    cdef const void* g = _data(dY)
    cdef void* d = _data(dX)
    with nogil:
        if fk == 4:
            _spread_run(<const float*>g, o, <float*>d, nS, nO, mean, n_threads)
        else:
            _spread_run(<const double*>g, o, <double*>d, nS, nO, mean, n_threads)
    return dX


def backprop_reduce_sum(d_sums, lengths):
    """(len(lengths), nO) -> (sum(lengths), nO); None outside the fast case."""
    return _backprop_reduce_sum_or_mean(d_sums, lengths, False)


def backprop_reduce_mean(d_means, lengths):
    """(len(lengths), nO) -> (sum(lengths), nO); None outside the fast case."""
    return _backprop_reduce_sum_or_mean(d_means, lengths, True)


# ---------------------------------------------------------------- reduce_max

cdef inline bint _max_rows(
    const floating* X, Py_ssize_t nR, Py_ssize_t nO, floating* y, index_t* w
) noexcept nogil:
    """Column max and argmax of nR rows by plain comparisons; True when a NaN may have changed the answer."""
    cdef Py_ssize_t r, o
    cdef const floating* x
    cdef floating v, yo
    cdef index_t wo
    cdef bint nan = False
    memcpy(y, X, nO * sizeof(floating))
    memset(w, 0, nO * sizeof(index_t))
    for r in range(1, nR):
        x = X + r * nO
        # Unconditional loads and stores around compares and selects: vectorised over columns
        # as long as the index is as wide as the value.
        for o in range(nO):
            v = x[o]
            yo = y[o]
            wo = w[o]
            if floating is float:
                nan |= v != v
                if v > yo:
                    yo = v
                    wo = <index_t>r
            else:
                # A flag reduced from double compares does not vectorise on SSE2; instead a
                # NaN sticks in y (nothing compares greater than it), to be looked for below.
                if v > yo:
                    wo = <index_t>r
                if v > yo:
                    yo = v
                if v != v:
                    yo = v
            y[o] = yo
            w[o] = wo
    if floating is double:
        for o in range(nO):
            nan |= y[o] != y[o]
    return nan


cdef inline void _max_rows_nan(
    const floating* X, Py_ssize_t nR, Py_ssize_t nO, floating* y, index_t* w
) noexcept nogil:
    """_max_rows with numpy's argmax rule that the first NaN wins over everything after it."""
    cdef Py_ssize_t r, o
    cdef floating v
    memcpy(y, X, nO * sizeof(floating))
    memset(w, 0, nO * sizeof(index_t))
    for r in range(1, nR):
        for o in range(nO):
            v = X[r * nO + o]
            if v > y[o] or (v != v and y[o] == y[o]):
                y[o] = v
                w[o] = <index_t>r


cdef void _max_seq(
    const floating* X, const int64_t* offs, floating* Y, index_t* which, Py_ssize_t nO, Py_ssize_t j
) noexcept nogil:
    cdef const floating* x = X + offs[j] * nO
    cdef Py_ssize_t n = offs[j + 1] - offs[j]
    if _max_rows(x, n, nO, Y + j * nO, which + j * nO):
        _max_rows_nan(x, n, nO, Y + j * nO, which + j * nO)


cdef void _max_run(
    const floating* X, const int64_t* offs, floating* Y, index_t* which, Py_ssize_t nS, Py_ssize_t nO,
    int n_threads,
) noexcept nogil:
    cdef Py_ssize_t j
    if n_threads == 1:
        for j in range(nS):
            _max_seq(X, offs, Y, which, nO, j)
        return
    for j in prange(nS, num_threads=n_threads, schedule="guided"):
        _max_seq(X, offs, Y, which, nO, j)


def reduce_max(X, lengths):
    """(nN, nO) -> (len(lengths), nO) maxima and int32 offsets of the winners; None outside the fast case."""
    cdef int fk = _float_kind(X, 2)
    if fk == 0:
        return None
    cdef Py_ssize_t nN = _dim(X, 0), nO = _dim(X, 1)
    if nN > _INT32_MAX:
        return None
    # As in Thinc, rows past the last sequence are ignored.
    offs = _offsets(lengths, nN, False, False)
    if offs is None:
        return None
    cdef Py_ssize_t nS = _dim(offs, 0) - 1
    Y = _new2(nS, nO, cnp.PyArray_TYPE(<cnp.ndarray>X), False)
    which = _new2(nS, nO, cnp.NPY_INT32, False)
    if nS == 0 or nO == 0:
        return Y, which
    cdef int n_threads = _threads(nN * nO) if nS > 1 else 1
    cdef const void* x = _data(X)
    cdef void* y = _data(Y)
    cdef const int64_t* o = <const int64_t*>_data(offs)
    cdef int32_t* w32 = <int32_t*>_data(which)
    if fk == 4:
        with nogil:
            _max_run(<const float*>x, o, <float*>y, w32, nS, nO, n_threads)
        return Y, which
    # float64 runs with int64 winners, which vectorise beside the values, then narrows them.
    which64 = _new2(nS, nO, cnp.NPY_INT64, False)
    cdef int64_t* w64 = <int64_t*>_data(which64)
    cdef Py_ssize_t i
    with nogil:
        _max_run(<const double*>x, o, <double*>y, w64, nS, nO, n_threads)
        for i in range(nS * nO):
            w32[i] = <int32_t>w64[i]
    return Y, which


cdef Py_ssize_t _unmax_seq(
    const floating* dY, const index_t* which, const int64_t* offs, floating* dX, Py_ssize_t nO,
    Py_ssize_t j,
) noexcept nogil:
    """Returns how many of sequence j's winners fall outside it."""
    cdef Py_ssize_t o, bad = 0, n = offs[j + 1] - offs[j]
    cdef floating* d = dX + offs[j] * nO
    cdef index_t w
    memset(d, 0, n * nO * sizeof(floating))
    dY += j * nO
    which += j * nO
    for o in range(nO):
        w = which[o]
        # One unsigned compare covers w < 0 too.
        if <size_t>w >= <size_t>n:
            bad += 1
        else:
            d[w * nO + o] = dY[o]
    return bad


cdef Py_ssize_t _unmax_run(
    const floating* dY, const index_t* which, const int64_t* offs, floating* dX, Py_ssize_t nS,
    Py_ssize_t nO, int n_threads,
) noexcept nogil:
    """Returns how many winners fall outside their sequences (dX is then garbage)."""
    cdef Py_ssize_t j, bad = 0
    if n_threads == 1:
        for j in range(nS):
            bad += _unmax_seq(dY, which, offs, dX, nO, j)
        return bad
    for j in prange(nS, num_threads=n_threads, schedule="guided"):
        bad += _unmax_seq(dY, which, offs, dX, nO, j)
    return bad


def backprop_reduce_max(d_maxes, which, lengths):
    """(len(lengths), nO) gradients and winners -> (sum(lengths), nO); None outside the fast case."""
    cdef int fk = _float_kind(d_maxes, 2)
    cdef int ik = _index_kind(which, 2)
    if fk == 0 or ik == 0:
        return None
    cdef Py_ssize_t nS = _dim(d_maxes, 0), nO = _dim(d_maxes, 1)
    if _dim(which, 1) != nO:
        return None
    offs = _offsets(lengths, -1, False)
    # As in Thinc, rows of d_maxes and which past the last sequence are ignored.
    if offs is None or _dim(offs, 0) - 1 > nS or _dim(offs, 0) - 1 > _dim(which, 0):
        return None
    nS = _dim(offs, 0) - 1
    cdef const int64_t* o = <const int64_t*>_data(offs)
    cdef Py_ssize_t nN = o[nS]
    dX = _new2(nN, nO, cnp.PyArray_TYPE(<cnp.ndarray>d_maxes), False)
    if nN == 0 or nO == 0:
        return dX
    cdef int n_threads = _threads(nN * nO) if nS > 1 else 1
    cdef Py_ssize_t bad
    cdef const void* g = _data(d_maxes)
    cdef const void* w = _data(which)
    cdef void* d = _data(dX)
    with nogil:
        if fk == 4 and ik == 4:
            bad = _unmax_run(<const float*>g, <const int32_t*>w, o, <float*>d, nS, nO, n_threads)
        elif fk == 4:
            bad = _unmax_run(<const float*>g, <const int64_t*>w, o, <float*>d, nS, nO, n_threads)
        elif ik == 4:
            bad = _unmax_run(<const double*>g, <const int32_t*>w, o, <double*>d, nS, nO, n_threads)
        else:
            bad = _unmax_run(<const double*>g, <const int64_t*>w, o, <double*>d, nS, nO, n_threads)
    return None if bad else dX


# ---------------------------------------------------------------- reduce_first / reduce_last

cdef void _take_rows(
    const floating* X, const int64_t* offs, floating* Y, int32_t* rows, Py_ssize_t nS, Py_ssize_t nO,
    bint last, int n_threads,
) noexcept nogil:
    """Y[j] = the first (or last) row of sequence j; rows[j] = its index."""
    cdef Py_ssize_t j, r
    if n_threads == 1:
        for j in range(nS):
            r = offs[j + 1] - 1 if last else offs[j]
            rows[j] = <int32_t>r
            memcpy(Y + j * nO, X + r * nO, nO * sizeof(floating))
        return
    for j in prange(nS, num_threads=n_threads, schedule="static"):
        r = offs[j + 1] - 1 if last else offs[j]
        rows[j] = <int32_t>r
        memcpy(Y + j * nO, X + r * nO, nO * sizeof(floating))


cdef object _reduce_first_or_last(object X, object lengths, bint last):
    cdef int fk = _float_kind(X, 2)
    if fk == 0:
        return None
    cdef Py_ssize_t nN = _dim(X, 0), nO = _dim(X, 1)
    if nN > _INT32_MAX:
        return None
    offs = _offsets(lengths, nN, False)
    if offs is None:
        return None
    cdef Py_ssize_t nS = _dim(offs, 0) - 1
    Y = _new2(nS, nO, cnp.PyArray_TYPE(<cnp.ndarray>X), False)
    if nS == 0:
        # No sequences: no offsets either, as in Thinc.
        return Y, _new1(0, cnp.NPY_INT32)
    # reduce_first returns every start and the end of the last sequence: nS + 1 offsets.
    rows = _new1(nS + 1 - last, cnp.NPY_INT32)
    cdef int32_t* r = <int32_t*>_data(rows)
    if not last:
        r[nS] = <int32_t>nN
    cdef int n_threads = _threads(nS * nO)
    cdef const void* x = _data(X)
    cdef void* y = _data(Y)
    cdef const int64_t* o = <const int64_t*>_data(offs)
    with nogil:
        if fk == 4:
            _take_rows(<const float*>x, o, <float*>y, r, nS, nO, last, n_threads)
        else:
            _take_rows(<const double*>x, o, <double*>y, r, nS, nO, last, n_threads)
    return Y, rows


def reduce_first(X, lengths):
    """(nN, nO) -> first rows (len(lengths), nO) and int32 start/end offsets; None outside the fast case."""
    return _reduce_first_or_last(X, lengths, False)


def reduce_last(X, lengths):
    """(nN, nO) -> last rows (len(lengths), nO) and their int32 indices; None outside the fast case."""
    return _reduce_first_or_last(X, lengths, True)


cdef bint _strictly_rising(const index_t* idx, Py_ssize_t n, int64_t stop) noexcept nogil:
    """True when idx[:n] rises strictly inside [0, stop)."""
    cdef Py_ssize_t j
    cdef int64_t prev = -1
    for j in range(n):
        if idx[j] <= prev or idx[j] >= stop:
            return False
        prev = idx[j]
    return True


cdef void _put_rows(
    const floating* dY, const index_t* idx, floating* dX, Py_ssize_t nS, Py_ssize_t nO, int n_threads
) noexcept nogil:
    cdef Py_ssize_t j
    if n_threads == 1:
        for j in range(nS):
            memcpy(dX + <Py_ssize_t>idx[j] * nO, dY + j * nO, nO * sizeof(floating))
        return
    for j in prange(nS, num_threads=n_threads, schedule="static"):
        memcpy(dX + <Py_ssize_t>idx[j] * nO, dY + j * nO, nO * sizeof(floating))


cdef object _backprop_first_or_last(object dY, object idx, bint last):
    cdef int fk = _float_kind(dY, 2)
    cdef int ik = _index_kind(idx, 1)
    if fk == 0 or ik == 0:
        return None
    cdef Py_ssize_t nS = _dim(dY, 0), nO = _dim(dY, 1)
    if _dim(idx, 0) != nS + 1 - last:
        return None
    cdef const void* ix = _data(idx)
    cdef int64_t nN
    if last:
        if nS == 0:
            nN = 0
        elif ik == 4:
            nN = (<const int32_t*>ix)[nS - 1] + 1
        else:
            nN = (<const int64_t*>ix)[nS - 1] + 1
    else:
        nN = (<const int32_t*>ix)[nS] if ik == 4 else (<const int64_t*>ix)[nS]
    # Indices that do not rise strictly inside the output (negatives that numpy wraps, repeats)
    # take the reference path, which gives numpy's fancy-indexing result or its error.
    cdef bint ok
    if ik == 4:
        ok = _strictly_rising(<const int32_t*>ix, nS, nN)
    else:
        ok = _strictly_rising(<const int64_t*>ix, nS, nN)
    if not ok or nN < 0:
        return None
    dX = _new2(nN, nO, cnp.PyArray_TYPE(<cnp.ndarray>dY), True)
    if nS == 0 or nO == 0:
        return dX
    cdef int n_threads = _threads(nS * nO)
    cdef const void* g = _data(dY)
    cdef void* d = _data(dX)
    with nogil:
        if fk == 4 and ik == 4:
            _put_rows(<const float*>g, <const int32_t*>ix, <float*>d, nS, nO, n_threads)
        elif fk == 4:
            _put_rows(<const float*>g, <const int64_t*>ix, <float*>d, nS, nO, n_threads)
        elif ik == 4:
            _put_rows(<const double*>g, <const int32_t*>ix, <double*>d, nS, nO, n_threads)
        else:
            _put_rows(<const double*>g, <const int64_t*>ix, <double*>d, nS, nO, n_threads)
    return dX


def backprop_reduce_first(d_firsts, starts_ends):
    """(nS, nO) and nS + 1 offsets -> (starts_ends[-1], nO); None outside the fast case."""
    return _backprop_first_or_last(d_firsts, starts_ends, False)


def backprop_reduce_last(d_lasts, lasts):
    """(nS, nO) and nS row indices -> (lasts[-1] + 1, nO); None outside the fast case."""
    return _backprop_first_or_last(d_lasts, lasts, True)
