# cython: language_level=3
"""CPU kernels for Ops.backprop_maxout_affine: Maxout's dX, dW and db.

Only the winning piece of each output has a gradient, so the (nB, nO * nP) matrix of piece
gradients that the reference multiplies by W and by X is nP - 1 parts zeros. The kernels do only
the live multiply-adds:

* dX[n] = sum over o of dY[n, o] * W[o, which[n, o]]: a gathered product, 3 rows x 4 vectors of
  columns in registers while o runs (2 rows x 6 vectors for float32/int32 in the AVX2 build),
  over W's columns packed block by block into a 64-byte aligned buffer (AVX2 copies of 8-float
  vectors; on AVX-512, float32 with 16-float vectors).
* dW[o, which[n, o]] += dY[n, o] * X[n] (and db likewise), three kernels:
  - float32/int32 with 3 pieces on AVX-512: outputs two at a time, all six of a pair's sums in
    registers over 64 columns while each row of a chunk is read once for both outputs (the rows
    sorted into 9 lists by their two winners, each list a loop with fixed destinations);
    1.2-1.6x the speed of the next kernel at the text CNN's shapes (Zen 4), and faster than the
    BLAS's dense product at every width measured (to 1024).
  - float32/int32 otherwise in the AVX2 and AVX-512 builds: rows in chunks whose block of X
    fills three quarters of the L1 data cache (64 AVX2 / 32 AVX-512 rows with 32 KiB), each
    output's rows grouped by winning piece (keeping row order); then, for each block of
    12 vectors of columns, X's block copied into a 64-byte aligned buffer and each (o, p)
    summed over its rows in 12 registers and added to dW once per chunk. The columns go in
    passes whose part of dW stays in L2 while every chunk adds to it. It beats the BLAS's
    dense product from 3 pieces on (with AVX-512 while dW is at most 12 MiB).
  - otherwise: 8 outputs at a time, their sums for a block of columns in L1 while each row of
    X (copied chunk by chunk into a buffer of ours) is read once per group. Bound by one store
    per multiply-add, it beats the BLAS from 3 pieces on.
  NumpyOps asks `sparse_dw_wanted()` whether one beats the BLAS at its shape. An earlier
  register-sum version read X in place: its 512-bit loads mostly straddled two cache lines
  (numpy aligns to 16 bytes) and it lost everywhere; one that read X and wrote dW in place
  swung 2x with where the arrays happened to lie in memory.

Every value is summed by one thread in a fixed order (dX over o, dW and db over the rows), so
the results do not depend on the thread count; they differ from the reference's BLAS products
only by rounding (summation order, fused multiply-adds where the CPU has them).

The entry points return None, for the reference to handle, unless the arrays are C-contiguous,
of one float dtype (float32 or float64), int32/int64 `which`, consistent shapes and every
`which` in 0..nP-1.
"""
cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t

from ._arrays cimport _any_index_outside, _data, _dim, _float_kind, _index_kind

cnp.import_array()

cdef extern from *:
    """
    #include <stdint.h>
    #include <stdlib.h>
    #include <string.h>
    #if defined(__unix__) || defined(__APPLE__)
    #include <unistd.h>  /* sysconf: the L1 size, where the C library knows it */
    #endif

    /* The inner loops are fixed-width blocks that GCC keeps in vector registers, compiled
       for AVX2+FMA in the builds that allow it (plait_isa.h). */
    #ifdef _OPENMP
    #include <omp.h>
    static int plait_mx_max_threads(void) { return omp_get_max_threads(); }
    #else
    static int plait_mx_max_threads(void) { return 1; }
    #endif

    #include "plait_isa.h"
    #define PLAIT_MX_CLONES PLAIT_UPTO_V3
    #define PLAIT_MX_TAIL_ATTR

    /* 256-bit vectors in GCC's vector extension: the AVX2 copy keeps them in ymm registers
       (and fuses a * w + acc), the baseline copy splits each into two SSE2 halves. The
       aligned(sizeof(T)) types make every load and store an unaligned one. */
    typedef float plait_vf __attribute__((vector_size(32), aligned(4)));
    typedef double plait_vd __attribute__((vector_size(32), aligned(8)));

    /* dX[n] = sum over o of dY[n, o] * W[o, which[n, o]], for rows n0..n1-1.

       The main columns go V vectors at a time for R rows at once (3 x 4 or 2 x 6: 12
       independent accumulators; an FMA takes 4 cycles and two can start per cycle), and the
       rows' W rows for one o lie in the same W[o] block, so most loads hit L1. Every column of
       every row sums its terms in o order, one fused multiply-add each, whichever path the row
       takes (R-row block or single row), so the result of a row never depends on its
       neighbours or on how rows are split between threads (nor, in these columns, on R and V).
       The last < V vectors of columns: one vector at a time with the terms dealt round-robin to
       8 partial sums, then single columns. */
    #define PLAIT_MX_WROW(n, o) (W + ((o) * nP + (Py_ssize_t)which[(n) * nO + (o)]) * nI + j0)
    #define PLAIT_MX_PROW(n, o) (Wp + ((o) * nP + (Py_ssize_t)which[(n) * nO + (o)]) * ld)

    /* Within a chunk (below), rows go PLAIT_MX_DX_ROWS at a time and outputs in blocks whose
       packed W rows fill about PLAIT_MX_DX_L1 bytes: the block stays in L1 while the chunk's
       rows read it, and each row's partial sums wait in dX (also in L1) between blocks. All of
       W's packed columns (nO * nP rows of 4 vectors) lie in L2, but a row reads them at
       random by its winners, and from L2 the loads held the 3-row block to ~40 of the AVX2
       core's 85 GFLOP/s (~53 with the blocks, width 256-512, same bits). */
    #define PLAIT_MX_DX_ROWS 192
    /* Rows go in chunks whose dY and `which` (rows x nO values each) fill about this many
       bytes (whole PLAIT_MX_DX_ROWS at least): a chunk's are read again for every block of
       columns and stay in L2 meanwhile. 256 KiB and 2 MiB measured alike at widths 64-512
       (Zen 4, 2026-11-28). */
    #define PLAIT_MX_DX_CHUNK_BYTES (768 << 10)
    #define PLAIT_MX_DX_L1 24576
    #define PLAIT_MX_PACK_AHEAD 16
    /* R rows x V vectors of sums (a[R][V]) from the rows' dX blocks p[i], or zeros for the
       first block of outputs; and back. */
    #define PLAIT_MX_DX_LOAD(R, V)                                                               \\
        _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i)                                      \\
            _Pragma("GCC unroll 16") for (int v = 0; v < V; ++v) a[i][v] = o0 == 0 ? zero : p[i][v];
    #define PLAIT_MX_DX_STORE(R, V)                                                              \\
        _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i)                                      \\
            _Pragma("GCC unroll 16") for (int v = 0; v < V; ++v) p[i][v] = a[i][v];
    /* The terms of output o for R rows from row n: one fused multiply-add per vector. */
    #define PLAIT_MX_DX_TERMS(T, VT, R, V)                                                       \\
        _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i) {                                    \\
            const VT *u = (const VT *)PLAIT_MX_PROW(n + i, o);                                   \\
            const T x = dY[(n + i) * nO + o];                                                    \\
            _Pragma("GCC unroll 16") for (int v = 0; v < V; ++v) a[i][v] += x * u[v];            \\
        }
    #define PLAIT_DEFINE_MX_DX(T, VT, I, SUF, L, R, V)                                           \\
    static PLAIT_MX_CLONES Py_ssize_t plait_mx_dx_cols_##SUF(                                    \\
            const T *dY, const I *which, const T *W, T *dX, Py_ssize_t n0, Py_ssize_t n1,        \\
            Py_ssize_t nO, Py_ssize_t nP, Py_ssize_t nI, Py_ssize_t jstart, int tail) {          \\
        const Py_ssize_t JM = nI - nI % (V * L);                                                 \\
        /* W's columns are packed block by block into one contiguous buffer (each block nO * nP  \\
           rows of V vectors; read in place, rows nI apart fell into too few cache sets), then   \\
           the rows go a chunk at a time across every block: the chunk's dY and `which` stay in  \\
           L2 while the blocks pass. Blocks outside and all rows inside instead read dY and      \\
           `which` once per block, from memory at the text CNN's batch 256 (5600 rows, width     \\
           256: 11 MiB a pass, 12 passes) and ran at half the rate of 1400 rows: chunked, it takes\\
           0.50-0.54 of that time there, 0.58-0.69 at width 512 from 1400 rows (AVX-512, Zen 4,  \\
           bench/maxout_kernels.py), and the same time at 350 rows or width 64. */               \\
        /* 64-byte aligned, so no vector load of it straddles two cache lines. */                \\
        const Py_ssize_t ld = V * L, NBK = (JM - jstart) / ld, blk = nO * nP * ld;               \\
        T *pack = NBK > 0 ? (T *)aligned_alloc(64, (size_t)(NBK * blk) * sizeof(T)) : NULL;      \\
        Py_ssize_t OB = PLAIT_MX_DX_L1 / (nP * ld * (Py_ssize_t)sizeof(T));                      \\
        if (OB < 8) OB = 8;                                                                      \\
        Py_ssize_t RW = PLAIT_MX_DX_CHUNK_BYTES / (nO * (Py_ssize_t)(sizeof(T) + sizeof(I)));    \\
        RW = RW / PLAIT_MX_DX_ROWS * PLAIT_MX_DX_ROWS;                                           \\
        if (RW < PLAIT_MX_DX_ROWS) RW = PLAIT_MX_DX_ROWS;                                        \\
        const VT zero = {0};                                                                     \\
        for (Py_ssize_t s0 = n0; pack != NULL && s0 < n1; s0 += RW) {                            \\
         const Py_ssize_t s1 = s0 + RW < n1 ? s0 + RW : n1;                                      \\
         for (Py_ssize_t b = 0; b < NBK; ++b) {                                                  \\
          const Py_ssize_t j0 = jstart + b * ld;                                                 \\
          const T *Wp = pack + b * blk;                                                          \\
          /* Packed as the first chunk needs it, while it is in L2. W's rows lie nI apart (a     \\
             new page every row or two at the text CNN's widths), where the hardware does not    \\
             fetch ahead: the rows PLAIT_MX_PACK_AHEAD on are asked for while a row is copied    \\
             (without, the copies waited on memory: ~14% of the AVX2 dX at width 512, 350 rows). */\\
          if (s0 == n0)                                                                          \\
            for (Py_ssize_t r = 0; r < nO * nP; ++r) {                                           \\
              if (r + PLAIT_MX_PACK_AHEAD < nO * nP)                                             \\
                for (Py_ssize_t q = 0; q < ld * (Py_ssize_t)sizeof(T); q += 64)                  \\
                  __builtin_prefetch((const char *)(W + (r + PLAIT_MX_PACK_AHEAD) * nI + j0) + q); \\
              memcpy(pack + b * blk + r * ld, W + r * nI + j0, (size_t)ld * sizeof(T));          \\
            }                                                                                    \\
          for (Py_ssize_t k0 = s0; k0 < s1; k0 += PLAIT_MX_DX_ROWS) {                            \\
            const Py_ssize_t k1 = k0 + PLAIT_MX_DX_ROWS < s1 ? k0 + PLAIT_MX_DX_ROWS : s1;       \\
            const Py_ssize_t kR = k0 + (k1 - k0) / R * R;                                        \\
            for (Py_ssize_t o0 = 0; o0 < nO; o0 += OB) {                                         \\
              const Py_ssize_t o1 = o0 + OB < nO ? o0 + OB : nO;                                 \\
              for (Py_ssize_t n = k0; n < kR; n += R) {                                          \\
                VT a[R][V], *p[R];                                                               \\
                _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i)                              \\
                    p[i] = (VT *)(dX + (n + i) * nI + j0);                                       \\
                PLAIT_MX_DX_LOAD(R, V)                                                           \\
                for (Py_ssize_t o = o0; o < o1; ++o) { PLAIT_MX_DX_TERMS(T, VT, R, V) }          \\
                PLAIT_MX_DX_STORE(R, V)                                                          \\
              }                                                                                  \\
              for (Py_ssize_t n = kR; n < k1; ++n) {                                             \\
                VT a[1][V], *p[1] = {(VT *)(dX + n * nI + j0)};                                  \\
                PLAIT_MX_DX_LOAD(1, V)                                                           \\
                for (Py_ssize_t o = o0; o < o1; ++o) { PLAIT_MX_DX_TERMS(T, VT, 1, V) }          \\
                PLAIT_MX_DX_STORE(1, V)                                                          \\
              }                                                                                  \\
            }                                                                                    \\
          }                                                                                      \\
        }                                                                                        \\
         }                                                                                       \\
        free(pack);                                                                              \\
        /* Without the buffer (out of memory) every column takes the per-row path below. */      \\
        const Py_ssize_t done = pack != NULL ? JM : jstart;                                      \\
        if (tail && done < nI)                                                                   \\
            for (Py_ssize_t n = n0; n < n1; ++n)                                                 \\
                plait_mx_dx_tail_##SUF(dY, which, W, dX, n, nO, nP, nI, done);                   \\
        return done;                                                                             \\
    }                                                                                            \\
    /* All columns of rows n0..n1-1. */                                                          \\
    static inline void plait_mx_dx_##SUF(const T *dY, const I *which, const T *W, T *dX,         \\
                                         Py_ssize_t n0, Py_ssize_t n1, Py_ssize_t nO,            \\
                                         Py_ssize_t nP, Py_ssize_t nI) {                         \\
        plait_mx_dx_cols_##SUF(dY, which, W, dX, n0, n1, nO, nP, nI, 0, 1);                      \\
    }

    /* Columns JM..nI-1 of row n. */
    #define PLAIT_DEFINE_MX_DX_TAIL(T, VT, I, SUF, L)                                            \\
    static inline __attribute__((always_inline)) PLAIT_MX_TAIL_ATTR void plait_mx_dx_tail_##SUF( \\
            const T *dY, const I *which, const T *W, T *dX, Py_ssize_t n, Py_ssize_t nO,         \\
            Py_ssize_t nP, Py_ssize_t nI, Py_ssize_t JM) {                                       \\
        const T *dy = dY + n * nO;                                                               \\
        T *dx = dX + n * nI;                                                                     \\
        Py_ssize_t j0 = JM;                                                                      \\
        for (; j0 + L <= nI; j0 += L) {                                                          \\
            VT c[8] = {{0}};                                                                     \\
            for (Py_ssize_t o = 0; o < nO; ++o) c[o & 7] += dy[o] * *(const VT *)PLAIT_MX_WROW(n, o);\\
            *(VT *)(dx + j0) = ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]));\\
        }                                                                                        \\
        for (; j0 < nI; ++j0) {                                                                  \\
            T c = (T)0;                                                                          \\
            for (Py_ssize_t o = 0; o < nO; ++o) c += dy[o] * *PLAIT_MX_WROW(n, o);               \\
            dx[j0] = c;                                                                          \\
        }                                                                                        \\
    }

    /* dW[o, p] = sum of dY[n, o] * X[n] and db[o, p] = sum of dY[n, o] over the rows n with
       which[n, o] = p, in row order, for outputs o0..o1-1.

       Rows go PLAIT_MX_CHUNK at a time, copied first into `xbuf` (row stride ldx); outputs go 8
       at a time within a chunk, their 8 * nP rows of sums in `acc` (row stride lda, all the
       outputs' rows: (o1 - o0) * nP * lda values). Each X vector loaded then feeds 8 fused
       multiply-adds into rows that stay in L1, where the dense product does nP times the work.
       Both buffers are ours, with strides padded off powers of two and `acc` placed half a
       page after `xbuf`, so the stores into `acc` and the loads from `xbuf` do not collide
       4 KiB apart (reading X and writing dW in place ran up to twice as slow for some array
       placements). */
    #define PLAIT_MX_OB 8
    #define PLAIT_MX_CHUNK 128
    /* Bytes of sums one group of outputs keeps in L1 per block of columns: at width 512
       (nI 1536, 3 pieces) the group's whole rows were 147 KiB and the kernel did half as many
       multiply-adds a second as at width 64, where they fit. */
    #define PLAIT_MX_L1_SUMS 24576
    #define PLAIT_DEFINE_MX_DW(T, VT, I, SUF, L)                                                 \\
    static PLAIT_MX_CLONES void plait_mx_dw_##SUF(                                               \\
            const T *dY, const I *which, const T *X, T *dW, T *db, Py_ssize_t o0, Py_ssize_t o1, \\
            Py_ssize_t nB, Py_ssize_t nO, Py_ssize_t nP, Py_ssize_t nI, T *xbuf, Py_ssize_t ldx, \\
            T *acc, Py_ssize_t lda) {                                                            \\
        const Py_ssize_t JV = nI - nI % L;                                                       \\
        /* Columns in blocks whose sums for a group of outputs (OB x nP rows) fit in L1. */      \\
        const Py_ssize_t JB0 = PLAIT_MX_L1_SUMS / (PLAIT_MX_OB * nP * (Py_ssize_t)sizeof(T)) / L * L;\\
        const Py_ssize_t JB = JB0 > L ? JB0 : L;                                                 \\
        memset(acc, 0, (size_t)((o1 - o0) * nP * lda) * sizeof(T));                              \\
        for (Py_ssize_t r = o0 * nP; r < o1 * nP; ++r) db[r] = (T)0;                             \\
        for (Py_ssize_t c0 = 0; c0 < nB; c0 += PLAIT_MX_CHUNK) {                                 \\
          const Py_ssize_t c1 = c0 + PLAIT_MX_CHUNK < nB ? c0 + PLAIT_MX_CHUNK : nB;             \\
          for (Py_ssize_t n = c0; n < c1; ++n)                                                   \\
              memcpy(xbuf + (n - c0) * ldx, X + n * nI, (size_t)nI * sizeof(T));                 \\
          for (Py_ssize_t ob = o0; ob < o1; ob += PLAIT_MX_OB) {                                 \\
            const int nb = (int)(o1 - ob < PLAIT_MX_OB ? o1 - ob : PLAIT_MX_OB);                 \\
            T *acco = acc + (ob - o0) * nP * lda;                                                \\
           for (Py_ssize_t j0 = 0; j0 < nI; j0 += JB) {                                          \\
            const Py_ssize_t j1 = nI - j0 > JB ? j0 + JB : nI;                                   \\
            const Py_ssize_t jv = j1 < JV ? j1 : JV;                                             \\
            for (Py_ssize_t n = c0; n < c1; ++n) {                                               \\
                const T *x = xbuf + (n - c0) * ldx;                                              \\
                const T *dy = dY + n * nO + ob;                                                  \\
                const I *wh = which + n * nO + ob;                                               \\
                T a[PLAIT_MX_OB];                                                                \\
                T *row[PLAIT_MX_OB];                                                             \\
                for (int k = 0; k < nb; ++k) {                                                   \\
                    const Py_ssize_t r = (Py_ssize_t)k * nP + (Py_ssize_t)wh[k];                 \\
                    a[k] = dy[k];                                                                \\
                    row[k] = acco + r * lda;                                                     \\
                    if (j0 == 0) db[ob * nP + r] += dy[k];                                       \\
                }                                                                                \\
                if (nb == PLAIT_MX_OB) {                                                         \\
                    for (Py_ssize_t j = j0; j < jv; j += L) {                                    \\
                        const VT xv = *(const VT *)(x + j);                                      \\
                        *(VT *)(row[0] + j) += a[0] * xv; *(VT *)(row[1] + j) += a[1] * xv;      \\
                        *(VT *)(row[2] + j) += a[2] * xv; *(VT *)(row[3] + j) += a[3] * xv;      \\
                        *(VT *)(row[4] + j) += a[4] * xv; *(VT *)(row[5] + j) += a[5] * xv;      \\
                        *(VT *)(row[6] + j) += a[6] * xv; *(VT *)(row[7] + j) += a[7] * xv;      \\
                    }                                                                            \\
                } else {                                                                         \\
                    for (Py_ssize_t j = j0; j < jv; j += L) {                                    \\
                        const VT xv = *(const VT *)(x + j);                                      \\
                        for (int k = 0; k < nb; ++k) *(VT *)(row[k] + j) += a[k] * xv;           \\
                    }                                                                            \\
                }                                                                                \\
                for (Py_ssize_t j = jv > j0 ? jv : j0; j < j1; ++j)                              \\
                    for (int k = 0; k < nb; ++k) row[k][j] += a[k] * x[j];                       \\
            }                                                                                    \\
           }                                                                                     \\
          }                                                                                      \\
        }                                                                                        \\
        for (Py_ssize_t r = 0; r < (o1 - o0) * nP; ++r)                                          \\
            memcpy(dW + (o0 * nP + r) * nI, acc + r * lda, (size_t)nI * sizeof(T));              \\
    }
    PLAIT_DEFINE_MX_DW(float, plait_vf, int32_t, f32_i32, 8)
    PLAIT_DEFINE_MX_DW(float, plait_vf, int64_t, f32_i64, 8)
    PLAIT_DEFINE_MX_DW(double, plait_vd, int32_t, f64_i32, 4)
    PLAIT_DEFINE_MX_DW(double, plait_vd, int64_t, f64_i64, 4)

    /* L: values per 256-bit vector. */
    PLAIT_DEFINE_MX_DX_TAIL(float, plait_vf, int32_t, f32_i32, 8)
    PLAIT_DEFINE_MX_DX_TAIL(float, plait_vf, int64_t, f32_i64, 8)
    PLAIT_DEFINE_MX_DX_TAIL(double, plait_vd, int32_t, f64_i32, 4)
    PLAIT_DEFINE_MX_DX_TAIL(double, plait_vd, int64_t, f64_i64, 4)
    /* Register blocks: R rows x V vectors. The AVX2 build takes float32 / int32 (the text CNN's
       Maxout) in 2 x 6 (48 columns): 0-15% less time than 3 x 4 at widths 64-512 and 350-5,600
       rows, 6% the median (Zen 4, 2026-11-28, bench/maxout_kernels.py, two runs). With
       AVX-512, 2 x 6, 3 x 6, 2 x 8 and 4 x 4 blocks of 16-float vectors all ran within the
       noise of 3 x 4, which stays; that build also keeps 3 x 4 here, for the columns its
       64-column blocks leave (spaCy's tok2vec: 288 = 256 + 32). The baseline build (each vector
       two SSE2 halves) keeps 3 x 4 too: not measured against other blocks. */
    #if PLAIT_ISA_LEVEL == 3
    PLAIT_DEFINE_MX_DX(float, plait_vf, int32_t, f32_i32, 8, 2, 6)
    #else
    PLAIT_DEFINE_MX_DX(float, plait_vf, int32_t, f32_i32, 8, 3, 4)
    #endif
    PLAIT_DEFINE_MX_DX(float, plait_vf, int64_t, f32_i64, 8, 3, 4)
    PLAIT_DEFINE_MX_DX(double, plait_vd, int32_t, f64_i32, 4, 3, 4)
    PLAIT_DEFINE_MX_DX(double, plait_vd, int64_t, f64_i64, 4, 3, 4)

    /* dW and db for float32 / int32 with the sums held in registers (AVX2 and AVX-512).

       Rows go plait_mx_rchunk(L) at a time. Within a chunk each output's rows are grouped by
       their winner p (a counting sort that keeps row order), with their dY values beside
       them. Then, block of 12 vectors of columns by block, for every (o, p): the block's sums
       start at zero in 12 registers, take one fused multiply-add per row that chose p (no
       store), and are added to dW[o, p] at the end. The chunk's X columns of the block, copied
       into a 64-byte aligned buffer (read in place, most vector loads straddled two cache
       lines), stay in L1 meanwhile.

       Every chunk adds to every (o, p) row of dW, so the loops keep that traffic in L2: the
       columns go in passes of whole blocks whose dW columns fit in PLAIT_MX_DW_L2 bytes, and
       within a pass every chunk of a group of rows (as many chunks as have lists within
       PLAIT_MX_LIST_BYTES; each chunk's lists are made once per group) adds into the same
       pass of dW. Taking each chunk across all columns at once instead read and wrote all of
       dW per chunk: at width 512 (nO 512, nI 1536, dW 9 MiB) that went to L3 30 times a batch
       and the kernel ran at 34 GFLOP/s of the AVX2 core's 85. When a pass holds fewer columns
       than a row, its sums go to a buffer of their own, rows side by side, and are copied to
       dW once per pass and group: in dW the pass's rows lie nI floats apart, and at nI = 1536
       (6 KiB, 96 cache lines) they fell into one set of L2 in 32, which held a third of
       them. With the buffer the width-512 dW took 0.78-0.84 of the time (Emerald Rapids,
       2026-11-29, AVX2 and AVX-512, 350 and 1,400 rows, bench/maxout_kernels.py), the same
       bits (the buffer starts from dW's values of the earlier groups, so every sum is taken in
       the same order); narrower widths, whose passes take whole rows, sum in dW itself.

       The store-per-multiply-add kernel above is bound by its stores; this one by its loads
       and multiply-adds: 2026-11-27 on Emerald Rapids, the text CNN's Maxout (3 pieces, 1400
       rows), AVX2 at widths 128 / 256: 3.3 / 14.5 ms against 4.3 / 17.0 for the store-bound
       kernel and 5.5 / 22.0 for the BLAS's product (before the passes). Each (o, p) sum
       depends only on its own rows, taken chunk by chunk in row order, so neither the split
       of outputs between threads nor the passes change a bit. Returns 0 when its buffers
       cannot be allocated. */
    /* Rows per chunk for vectors of L floats: as many as keep the chunk's X columns of one
       block (12 vectors a row) within three quarters of this core's L1 data cache. On Emerald
       Rapids (48 KiB) that is 36 KiB, 96 rows with AVX2 and 48 with AVX-512: longer lists than
       48 rows (16 a list on average with 3 pieces) made the AVX2 kernel 5-12% faster at widths
       256-512, and with AVX-512 96 rows spilled the block out of L1 (w256 15.0 ms against the
       BLAS's 11.0). On Zen 4 (32 KiB) the 96 AVX2 rows spilled too: 64 made the AVX2 dW 6-19%
       faster at widths 64-512 (bench/README.md, "On Zen 4"). The rows of a chunk sum apart
       before they join dW, so the last bits of dW follow the L1 size. A row's index in its
       chunk is kept in one byte: at most 256 rows. */
    static Py_ssize_t plait_mx_l1_bytes = 0;
    static Py_ssize_t plait_mx_rchunk(Py_ssize_t L) {
        Py_ssize_t l1 = plait_mx_l1_bytes;
        if (l1 == 0) {
            long got = -1;
    #ifdef _SC_LEVEL1_DCACHE_SIZE
            got = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    #endif
            /* Unknown or implausible: the smallest L1 of current x86-64 cores. */
            l1 = got >= (16 << 10) && got <= (1 << 20) ? (Py_ssize_t)got : (32 << 10);
            plait_mx_l1_bytes = l1;  /* every thread finds the same value */
        }
        Py_ssize_t rows = l1 * 3 / 4 / (12 * L * (Py_ssize_t)sizeof(float));
        return rows < 8 ? 8 : rows > 256 ? 256 : rows;
    }
    /* Rows per chunk of the AVX-512 kernel for 3 pieces below (64 columns a row): within three
       quarters of L1 too, at most 255 (a row's index in its chunk is one byte). */
    static Py_ssize_t plait_mx_p3_rows(void) {
        (void)plait_mx_rchunk(16);  /* reads the L1 size once */
        Py_ssize_t rows = plait_mx_l1_bytes * 3 / 4 / (64 * (Py_ssize_t)sizeof(float));
        return rows < 8 ? 8 : rows > 255 ? 255 : rows;
    }
    #define PLAIT_MX_DW_L2 (768 << 10)
    #define PLAIT_MX_LIST_BYTES (4 << 20)
    /* The (o, p) lists of one chunk of rows [c0, c1) for plait_mx_dw2: list l = (o - o0) * nP + p
       from st[l] to st[l + 1] (st[0] = base), each entry a row (its index in the chunk) and its
       dY value, in row order. dbp (nP x (o1 - o0), piece-major) gets the bias sums, in row
       order. cnt and pos: nL values of scratch each. The counts and sums run piece by piece over
       a row's outputs, on vectors; only the entries are placed one at a time. A function of its
       own so that its few values stay in registers (inlined into the kernel, GCC kept them on
       the stack: a quarter of the AVX2 dW's time at width 128, bench/README.md). Returns the
       end of the chunk's entries. */
    static PLAIT_MX_CLONES __attribute__((noinline)) int32_t plait_mx_dw2_lists(
            const float *restrict dY, const int32_t *restrict which, float *restrict dbp,
            Py_ssize_t c0, Py_ssize_t c1, Py_ssize_t o0, Py_ssize_t o1, Py_ssize_t nO,
            Py_ssize_t nP, int32_t *restrict st, int32_t *restrict cnt, int32_t *restrict pos,
            int32_t base, uint8_t *restrict rows_of, float *restrict g_of) {
        const Py_ssize_t nOut = o1 - o0, nL = nOut * nP;
        for (Py_ssize_t l = 0; l < nL; ++l) cnt[l] = 0;
        for (Py_ssize_t n = c0; n < c1; ++n) {
            const int32_t *restrict w = which + n * nO + o0;
            const float *restrict g = dY + n * nO + o0;
            for (Py_ssize_t p = 0; p < nP; ++p) {
                int32_t *restrict cp = cnt + p * nOut;
                float *restrict dp = dbp + p * nOut;
                for (Py_ssize_t q = 0; q < nOut; ++q) {
                    const int hit = w[q] == (int32_t)p;
                    cp[q] += hit;
                    dp[q] += hit ? g[q] : 0.0f;
                }
            }
        }
        int32_t e = base;
        for (Py_ssize_t q = 0; q < nOut; ++q)
            for (Py_ssize_t p = 0; p < nP; ++p) {
                st[q * nP + p] = pos[q * nP + p] = e;
                e += cnt[p * nOut + q];
            }
        st[nL] = e;
        /* Output by output (16 at a time share the cache lines of `which` and dY), each
           writing its nP lists in turn: row by row across all outputs instead wrote nL lists
           at once, a cache line each, and the placing took ~16% of the AVX2 dW's time at width
           256. With 3 pieces the three list ends stay in registers. */
        for (Py_ssize_t q0 = 0; q0 < nOut; q0 += 16) {
            const Py_ssize_t q1 = q0 + 16 < nOut ? q0 + 16 : nOut;
            for (Py_ssize_t q = q0; q < q1; ++q) {
                const int32_t *restrict w = which + c0 * nO + o0 + q;
                const float *restrict g = dY + c0 * nO + o0 + q;
                if (nP == 3) {
                    int32_t a0 = pos[q * 3], a1 = pos[q * 3 + 1], a2 = pos[q * 3 + 2];
                    for (Py_ssize_t n = 0; n < c1 - c0; ++n) {
                        const int32_t p = w[n * nO];
                        /* Selected without a branch: the winners are data, not a pattern. */
                        const int32_t at = (p == 0) * a0 + (p == 1) * a1 + (p == 2) * a2;
                        rows_of[at] = (uint8_t)n;
                        g_of[at] = g[n * nO];
                        a0 += p == 0;
                        a1 += p == 1;
                        a2 += p == 2;
                    }
                } else {
                    int32_t *restrict pq = pos + q * nP;
                    for (Py_ssize_t n = 0; n < c1 - c0; ++n) {
                        const int32_t at = pq[w[n * nO]]++;
                        rows_of[at] = (uint8_t)n;
                        g_of[at] = g[n * nO];
                    }
                }
            }
        }
        return e;
    }
    /* The pass buffer of the register-sum dW kernels below: `rows` rows of dW (nI floats apart)
       over the pass's columns [jp0, jp1), side by side in acc (lda floats apart). Loaded as
       zeros for the first group of chunks, from dW for the others, so that every sum goes on in
       the order it would in dW itself; stored back after each pass. */
    static void plait_mx_pass_load(float *acc, const float *dW, Py_ssize_t rows, Py_ssize_t nI,
                                   Py_ssize_t lda, Py_ssize_t jp0, Py_ssize_t jp1, int first) {
        if (first) {
            memset(acc, 0, (size_t)(rows * lda) * sizeof(float));
            return;
        }
        for (Py_ssize_t r = 0; r < rows; ++r)
            memcpy(acc + r * lda, dW + r * nI + jp0, (size_t)(jp1 - jp0) * sizeof(float));
    }
    static void plait_mx_pass_store(float *dW, const float *acc, Py_ssize_t rows, Py_ssize_t nI,
                                    Py_ssize_t lda, Py_ssize_t jp0, Py_ssize_t jp1) {
        for (Py_ssize_t r = 0; r < rows; ++r)
            memcpy(dW + r * nI + jp0, acc + r * lda, (size_t)(jp1 - jp0) * sizeof(float));
    }
    #define PLAIT_MX_DW2_BLOCK(VT, L, NV)                                                        \\
        for (; j + NV * L <= j1; j += NV * L) {                                                  \\
            VT s[NV];                                                                            \\
            _Pragma("GCC unroll 16") for (int v = 0; v < NV; ++v) s[v] = (VT){0};                \\
            for (int t = 0; t < cnt; ++t) {                                                      \\
                const float a = gs[t];                                                           \\
                const VT *x = (const VT *)(xb + rows[t] * ldx + (j - jp0));                      \\
                _Pragma("GCC unroll 16") for (int v = 0; v < NV; ++v) s[v] += a * x[v];          \\
            }                                                                                    \\
            VT *d = (VT *)(dw + (j - jp0));                                                      \\
            _Pragma("GCC unroll 16") for (int v = 0; v < NV; ++v) d[v] += s[v];                  \\
        }
    #define PLAIT_DEFINE_MX_DW2(VT, L, SUF, ATTR)                                                \\
    ATTR static int plait_mx_dw2_##SUF(const float *dY, const int32_t *which, const float *X,    \\
                                       float *dW, float *db, Py_ssize_t o0, Py_ssize_t o1,       \\
                                       Py_ssize_t nB, Py_ssize_t nO, Py_ssize_t nP,              \\
                                       Py_ssize_t nI) {                                          \\
        const Py_ssize_t nL = (o1 - o0) * nP, JB = 12 * L, RC = plait_mx_rchunk(L);              \\
        /* Columns per pass: whole blocks, as many as keep the pass's dW in L2 (at least one). */\\
        const Py_ssize_t pass_row = (nL > 0 ? nL : 1) * JB * (Py_ssize_t)sizeof(float);          \\
        Py_ssize_t JP = PLAIT_MX_DW_L2 / pass_row * JB;                                          \\
        if (JP < JB) JP = JB;                                                                    \\
        if (JP > nI) JP = nI;                                                                    \\
        const Py_ssize_t ldx = (JP + L - 1) / L * L + L;                                         \\
        /* Chunks per group: as many as have their lists (a row byte and a dY value per output   \\
           and row) within PLAIT_MX_LIST_BYTES, and no more than the batch has. */               \\
        const Py_ssize_t per_chunk = RC * (o1 - o0);                                             \\
        Py_ssize_t GC = PLAIT_MX_LIST_BYTES / ((per_chunk > 0 ? per_chunk : 1) * 5);             \\
        const Py_ssize_t n_chunks = (nB + RC - 1) / RC;                                          \\
        if (GC > n_chunks) GC = n_chunks;                                                        \\
        if (GC < 1) GC = 1;                                                                      \\
        const Py_ssize_t nE = GC * per_chunk;                                                    \\
        float *xb = (float *)aligned_alloc(64, (size_t)(RC * ldx) * sizeof(float));              \\
        /* The group's (chunk, o, p) lists side by side: list l of chunk c from start[c][l] to   \\
           start[c][l + 1], each entry a row (its index in the chunk) and its dY value. */       \\
        int32_t *start = (int32_t *)malloc((size_t)(GC * (nL + 1) + 2 * nL) * sizeof(int32_t));  \\
        uint8_t *rows_of = (uint8_t *)malloc((size_t)(nE > 0 ? nE : 1));                         \\
        float *g_of = (float *)malloc((size_t)(nE > 0 ? nE : 1) * sizeof(float));                \\
        float *dbp = (float *)calloc((size_t)(nL > 0 ? nL : 1), sizeof(float));                  \\
        /* The pass's sums: nL rows of lda floats side by side (whole blocks), not dW's rows     \\
           nI floats apart, whose stride maps them onto a few of L2's sets. */                   \\
        const int direct = JP >= nI;  /* one pass: dW itself */                                 \\
        const Py_ssize_t lda = direct ? nI : (JP + JB - 1) / JB * JB;                            \\
        float *acc = direct ? dW + o0 * nP * nI                                                  \\
            : (float *)aligned_alloc(64, (size_t)((nL > 0 ? nL : 1) * lda) * sizeof(float));     \\
        if (start == NULL || rows_of == NULL || xb == NULL || g_of == NULL || dbp == NULL        \\
                || acc == NULL) {                                                                \\
            free(start); free(rows_of); free(xb); free(g_of); free(dbp);                         \\
            if (!direct) free(acc);                                                              \\
            return 0;                                                                            \\
        }                                                                                        \\
        int32_t *count = start + GC * (nL + 1), *pos = count + nL;                               \\
        if (direct || nB == 0) memset(dW + o0 * nP * nI, 0, (size_t)(nL * nI) * sizeof(float));  \\
        for (Py_ssize_t g0 = 0; g0 < nB; g0 += GC * RC) {                                        \\
            const Py_ssize_t g1 = g0 + GC * RC < nB ? g0 + GC * RC : nB;                         \\
            Py_ssize_t base = 0;                                                                 \\
            for (Py_ssize_t c0 = g0, ci = 0; c0 < g1; c0 += RC, ++ci) {                          \\
                const Py_ssize_t c1 = c0 + RC < g1 ? c0 + RC : g1;                               \\
                base = plait_mx_dw2_lists(dY, which, dbp, c0, c1, o0, o1, nO, nP,                \\
                                          start + ci * (nL + 1), count, pos, base, rows_of,      \\
                                          g_of);                                                 \\
            }                                                                                    \\
            for (Py_ssize_t jp0 = 0; jp0 < nI; jp0 += JP) {                                      \\
              const Py_ssize_t jp1 = jp0 + JP < nI ? jp0 + JP : nI;                              \\
              if (!direct)                                                                       \\
                  plait_mx_pass_load(acc, dW + o0 * nP * nI, nL, nI, lda, jp0, jp1, g0 == 0);    \\
              for (Py_ssize_t c0 = g0, ci = 0; c0 < g1; c0 += RC, ++ci) {                        \\
                const Py_ssize_t c1 = c0 + RC < g1 ? c0 + RC : g1;                               \\
                const int32_t *st = start + ci * (nL + 1);                                       \\
                for (Py_ssize_t n = c0; n < c1; ++n) {                                           \\
                    memcpy(xb + (n - c0) * ldx, X + n * nI + jp0,                                \\
                           (size_t)(jp1 - jp0) * sizeof(float));                                 \\
                    /* Zeros up to the next whole vector, which the last columns read. */        \\
                    for (Py_ssize_t q = jp1 - jp0; q < (jp1 - jp0 + L - 1) / L * L; ++q)         \\
                        xb[(n - c0) * ldx + q] = 0.0f;                                           \\
                }                                                                                \\
                for (Py_ssize_t j0 = jp0; j0 < jp1; j0 += JB) {                                  \\
                    const Py_ssize_t j1 = j0 + JB < jp1 ? j0 + JB : jp1;                         \\
                    for (Py_ssize_t l = 0; l < nL; ++l) {                                        \\
                        const int cnt = st[l + 1] - st[l];                                       \\
                        if (cnt == 0) continue;                                                  \\
                        const uint8_t *rows = rows_of + st[l];                                   \\
                        const float *gs = g_of + st[l];                                          \\
                        float *dw = acc + l * lda;                                               \\
                        Py_ssize_t j = j0;                                                       \\
                        PLAIT_MX_DW2_BLOCK(VT, L, 12)                                            \\
                        PLAIT_MX_DW2_BLOCK(VT, L, 4)                                             \\
                        PLAIT_MX_DW2_BLOCK(VT, L, 1)                                             \\
                        /* The last < L columns: one whole vector read from the buffer           \\
                           (its rows padded with zeros), only the real lanes stored. */          \\
                        if (j < j1) {                                                            \\
                            VT sv = (VT){0};                                                     \\
                            for (int t = 0; t < cnt; ++t)                                        \\
                                sv += gs[t] * *(const VT *)(xb + rows[t] * ldx + (j - jp0));     \\
                            for (Py_ssize_t q = 0; q < j1 - j; ++q) dw[j - jp0 + q] += sv[q];    \\
                        }                                                                        \\
                    }                                                                            \\
                }                                                                                \\
              }                                                                                  \\
              if (!direct) plait_mx_pass_store(dW + o0 * nP * nI, acc, nL, nI, lda, jp0, jp1);   \\
            }                                                                                    \\
        }                                                                                        \\
        for (Py_ssize_t q = 0; q < o1 - o0; ++q)                                                 \\
            for (Py_ssize_t p = 0; p < nP; ++p) db[(o0 + q) * nP + p] = dbp[p * (o1 - o0) + q];  \\
        if (!direct) free(acc);                                                                  \\
        free(dbp);                                                                               \\
        free(g_of);                                                                              \\
        free(rows_of);                                                                           \\
        free(start);                                                                             \\
        free(xb);                                                                                \\
        return 1;                                                                                \\
    }
    #if PLAIT_ISA_LEVEL >= 3
    PLAIT_DEFINE_MX_DW2(plait_vf, 8, f32_i32, PLAIT_MX_CLONES)
    static int plait_mx_has_dw2(void) { return 1; }
    #else
    /* The baseline build: 12 256-bit sums would not fit in SSE2's 16 registers. */
    static int plait_mx_dw2_f32_i32(const float *dY, const int32_t *which, const float *X,
                                    float *dW, float *db, Py_ssize_t o0, Py_ssize_t o1,
                                    Py_ssize_t nB, Py_ssize_t nO, Py_ssize_t nP, Py_ssize_t nI) {
        return 0;
    }
    static int plait_mx_has_dw2(void) { return 0; }
    #endif

    /* The float32 / int32 dX kernel once more with 512-bit vectors, for AVX-512 machines:
       the same sums in the same order (one fused multiply-add per term, in o order) over
       blocks of 64 columns, so half the address arithmetic and loads of `which` per
       multiply-add. Chosen at run time by plait_mx_dx_f32_i32_best. */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
    typedef float plait_vf16 __attribute__((vector_size(64), aligned(4)));
    #undef PLAIT_MX_CLONES
    #undef PLAIT_MX_TAIL_ATTR
    #define PLAIT_MX_CLONES __attribute__((target("arch=x86-64-v4")))
    #define PLAIT_MX_TAIL_ATTR __attribute__((target("arch=x86-64-v4")))
    PLAIT_DEFINE_MX_DX_TAIL(float, plait_vf16, int32_t, f32_i32_v4, 16)
    PLAIT_DEFINE_MX_DX(float, plait_vf16, int32_t, f32_i32_v4, 16, 3, 4)
    PLAIT_DEFINE_MX_DW2(plait_vf16, 16, f32_i32_v4, __attribute__((target("arch=x86-64-v4"))))

    /* dW and db for 3 pieces, float32 / int32, AVX-512: outputs two at a time.

       The kernel above sums each (o, p) in registers but loads a vector of X for every
       multiply-add, and its sums go back to dW after ~11 rows (its lists are short: 3 pieces
       share a chunk of rows that fits in L1). Here a pair of outputs (o, o + 1) keeps all six
       of its (o, p) sums in registers, 4 vectors (64 columns) each, 24 of the 32 registers:
       each row of the chunk is read once per pair and feeds two multiply-adds per vector, one
       into (o, which[n, o]) and one into (o + 1, which[n, o + 1]). The registers cannot be
       chosen at run time, so the chunk's rows are sorted per pair into 9 lists by their two
       winners, each list a loop of its own with its two destinations fixed. The six sums go
       to dW once per pair, chunk and block of 64 columns. Rows per chunk: as many as keep the
       chunk's 64 columns within three quarters of L1 (96 with 32 KiB). Measured alone (Zen 4,
       2026-11-28, the text CNN's shapes): 78-89 GFLOP/s of live multiply-adds against the
       kernel above's 49-62. With AVX2's 16 registers the same scheme (2 vectors a sum) lost.

       Sums: each (o, p) over a chunk's rows in the order of the lists (by the partner's
       winner, then by row), then added to dW chunk by chunk; pairs are (o0, o0 + 1), ... from
       the first output of the call, whose caller starts every range at a multiple of 8, and a
       last odd output sums its 3 lists alone. So the bits depend neither on the threads nor on
       the passes. db: every (o, p) in row order, as the kernels above. Columns go in passes
       whose part of dW stays in L2 (as above). Returns 0 when its buffers cannot be
       allocated. */
    #define PLAIT_MX_P3_SUMS(o) plait_vf16 o##0a, o##0b, o##0c, o##0d, o##1a, o##1b, o##1c,    \\
        o##1d, o##2a, o##2b, o##2c, o##2d;
    #define PLAIT_MX_P3_ZERO(o) o##0a = z; o##0b = z; o##0c = z; o##0d = z; o##1a = z;           \\
        o##1b = z; o##1c = z; o##1d = z; o##2a = z; o##2b = z; o##2c = z; o##2d = z;
    #define PLAIT_MX_P3_FMA(o, p, g)                                                             \\
        o##p##a += g * x[0]; o##p##b += g * x[1]; o##p##c += g * x[2]; o##p##d += g * x[3];
    /* The rows of list P1 * 3 + P2: dY[., oa] to (oa, P1), dY[., oa + 1] to (oa + 1, P2). */
    #define PLAIT_MX_P3_PAIR(P1, P2)                                                             \\
        for (int t = st[P1 * 3 + P2]; t < st[P1 * 3 + P2 + 1]; ++t) {                            \\
            const int r = rw[t];                                                                 \\
            const plait_vf16 *x = (const plait_vf16 *)(xb + r * 64);                             \\
            const float g1 = dy[r * nO + oa], g2 = dy[r * nO + oa + 1];                          \\
            PLAIT_MX_P3_FMA(sa, P1, g1) PLAIT_MX_P3_FMA(sb, P2, g2)                              \\
        }
    #define PLAIT_MX_P3_ONE(P)                                                                   \\
        for (int t = st[P]; t < st[P + 1]; ++t) {                                                \\
            const int r = rw[t];                                                                 \\
            const plait_vf16 *x = (const plait_vf16 *)(xb + r * 64);                             \\
            const float g1 = dy[r * nO + oa];                                                    \\
            PLAIT_MX_P3_FMA(sa, P, g1)                                                           \\
        }
    /* Adds the 4 vectors of sum o##p to the pass's sums of row (o_index, p), columns j0 ..
       j0 + w - 1. */
    #define PLAIT_MX_P3_ADD(o, p, o_index)                                                       \\
        {                                                                                        \\
            float *d = acc + (((o_index) - o0) * 3 + p) * lda + (j0 - jp0);                      \\
            if (w == 64) {                                                                       \\
                plait_vf16 *q = (plait_vf16 *)d;                                                 \\
                q[0] += o##p##a; q[1] += o##p##b; q[2] += o##p##c; q[3] += o##p##d;              \\
            } else {                                                                             \\
                plait_vf16 tmp[4] = {o##p##a, o##p##b, o##p##c, o##p##d};                        \\
                const float *f = (const float *)tmp;                                             \\
                for (Py_ssize_t q = 0; q < w; ++q) d[q] += f[q];                                 \\
            }                                                                                    \\
        }
    __attribute__((target("arch=x86-64-v4")))
    static int plait_mx_dw3_f32_i32_v4(const float *dY, const int32_t *which, const float *X,
                                       float *dW, float *db, Py_ssize_t o0, Py_ssize_t o1,
                                       Py_ssize_t nB, Py_ssize_t nO, Py_ssize_t nI) {
        const Py_ssize_t nOut = o1 - o0, nPair = nOut / 2, nU = nPair + nOut % 2;
        const Py_ssize_t RC = plait_mx_p3_rows();
        /* Columns per pass: blocks of 64, as many as keep the pass's dW in L2 (at least one). */
        const Py_ssize_t pass_row = (nOut > 0 ? nOut : 1) * 3 * 64 * (Py_ssize_t)sizeof(float);
        Py_ssize_t JP = PLAIT_MX_DW_L2 / pass_row * 64;
        if (JP < 64) JP = 64;
        /* Chunks per group: as many as have their lists within PLAIT_MX_LIST_BYTES. */
        const Py_ssize_t per_chunk = (nU > 0 ? nU : 1) * (RC + 10 * (Py_ssize_t)sizeof(int32_t));
        const Py_ssize_t n_chunks = (nB + RC - 1) / RC;
        Py_ssize_t GC = PLAIT_MX_LIST_BYTES / per_chunk;
        if (GC > n_chunks) GC = n_chunks;
        if (GC < 1) GC = 1;
        float *xb = (float *)aligned_alloc(64, (size_t)(RC * 64) * sizeof(float));
        int32_t *starts = (int32_t *)malloc((size_t)(GC * (nU > 0 ? nU : 1) * 10) * sizeof(int32_t));
        uint8_t *rows_of = (uint8_t *)malloc((size_t)(GC * (nU > 0 ? nU : 1) * RC));
        /* The pass's sums: dW itself when one pass takes every column, else nOut * 3 rows of
           lda floats side by side (see plait_mx_dw2). */
        const int direct = JP >= nI;
        const Py_ssize_t lda = direct ? nI : JP;
        float *acc = direct ? dW + o0 * 3 * nI
            : (float *)aligned_alloc(64, (size_t)((nOut > 0 ? nOut : 1) * 3 * lda) * sizeof(float));
        if (xb == NULL || starts == NULL || rows_of == NULL || acc == NULL) {
            free(xb); free(starts); free(rows_of); if (!direct) free(acc); return 0;
        }
        if (direct || nB == 0) memset(dW + o0 * 3 * nI, 0, (size_t)(nOut * 3 * nI) * sizeof(float));
        for (Py_ssize_t r = o0 * 3; r < o1 * 3; ++r) db[r] = 0.0f;
        const plait_vf16 z = {0};
        for (Py_ssize_t g0 = 0; g0 < nB; g0 += GC * RC) {
            const Py_ssize_t g1 = g0 + GC * RC < nB ? g0 + GC * RC : nB;
            for (Py_ssize_t c0 = g0, ci = 0; c0 < g1; c0 += RC, ++ci) {
                const Py_ssize_t c1 = c0 + RC < g1 ? c0 + RC : g1;
                for (Py_ssize_t n = c0; n < c1; ++n) {  /* db in row order */
                    const int32_t *wn = which + n * nO;
                    const float *gn = dY + n * nO;
                    for (Py_ssize_t o = o0; o < o1; ++o) db[o * 3 + wn[o]] += gn[o];
                }
                for (Py_ssize_t u = 0; u < nU; ++u) {
                    const Py_ssize_t oa = o0 + 2 * u;
                    const int pair = u < nPair;
                    int32_t *st = starts + (ci * nU + u) * 10;
                    uint8_t *rw = rows_of + (ci * nU + u) * RC;
                    int cnt[9] = {0};
                    for (Py_ssize_t n = c0; n < c1; ++n) {
                        const int32_t *wn = which + n * nO + oa;
                        cnt[pair ? wn[0] * 3 + wn[1] : wn[0]]++;
                    }
                    st[0] = 0;
                    for (int c = 0; c < 9; ++c) { st[c + 1] = st[c] + cnt[c]; cnt[c] = 0; }
                    for (Py_ssize_t n = c0; n < c1; ++n) {
                        const int32_t *wn = which + n * nO + oa;
                        const int c = pair ? wn[0] * 3 + wn[1] : wn[0];
                        rw[st[c] + cnt[c]++] = (uint8_t)(n - c0);
                    }
                }
            }
            for (Py_ssize_t jp0 = 0; jp0 < nI; jp0 += JP) {
              const Py_ssize_t jp1 = jp0 + JP < nI ? jp0 + JP : nI;
              if (!direct)
                  plait_mx_pass_load(acc, dW + o0 * 3 * nI, nOut * 3, nI, lda, jp0, jp1, g0 == 0);
              for (Py_ssize_t c0 = g0, ci = 0; c0 < g1; c0 += RC, ++ci) {
                const Py_ssize_t c1 = c0 + RC < g1 ? c0 + RC : g1;
                const float *dy = dY + c0 * nO;
                for (Py_ssize_t j0 = jp0; j0 < jp1; j0 += 64) {
                    const Py_ssize_t w = jp1 - j0 < 64 ? jp1 - j0 : 64;
                    for (Py_ssize_t n = c0; n < c1; ++n) {
                        memcpy(xb + (n - c0) * 64, X + n * nI + j0, (size_t)w * sizeof(float));
                        for (Py_ssize_t q = w; q < 64; ++q) xb[(n - c0) * 64 + q] = 0.0f;
                    }
                    for (Py_ssize_t u = 0; u < nU; ++u) {
                        const Py_ssize_t oa = o0 + 2 * u;
                        const int32_t *st = starts + (ci * nU + u) * 10;
                        const uint8_t *rw = rows_of + (ci * nU + u) * RC;
                        PLAIT_MX_P3_SUMS(sa)
                        PLAIT_MX_P3_ZERO(sa)
                        if (u < nPair) {
                            PLAIT_MX_P3_SUMS(sb)
                            PLAIT_MX_P3_ZERO(sb)
                            PLAIT_MX_P3_PAIR(0, 0) PLAIT_MX_P3_PAIR(0, 1) PLAIT_MX_P3_PAIR(0, 2)
                            PLAIT_MX_P3_PAIR(1, 0) PLAIT_MX_P3_PAIR(1, 1) PLAIT_MX_P3_PAIR(1, 2)
                            PLAIT_MX_P3_PAIR(2, 0) PLAIT_MX_P3_PAIR(2, 1) PLAIT_MX_P3_PAIR(2, 2)
                            PLAIT_MX_P3_ADD(sb, 0, oa + 1) PLAIT_MX_P3_ADD(sb, 1, oa + 1)
                            PLAIT_MX_P3_ADD(sb, 2, oa + 1)
                        } else {
                            PLAIT_MX_P3_ONE(0) PLAIT_MX_P3_ONE(1) PLAIT_MX_P3_ONE(2)
                        }
                        PLAIT_MX_P3_ADD(sa, 0, oa) PLAIT_MX_P3_ADD(sa, 1, oa) PLAIT_MX_P3_ADD(sa, 2, oa)
                    }
                }
              }
              if (!direct) plait_mx_pass_store(dW + o0 * 3 * nI, acc, nOut * 3, nI, lda, jp0, jp1);
            }
        }
        if (!direct) free(acc);
        free(xb);
        free(starts);
        free(rows_of);
        return 1;
    }
    static int plait_mx_has_v4(void) {
        static int known = -1;
        if (known < 0) {
            __builtin_cpu_init();
            known = PLAIT_ISA_ALLOWS(4) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")
                    && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
        }
        return known;
    }
    #else
    #define plait_mx_dx_cols_f32_i32_v4 plait_mx_dx_cols_f32_i32
    static int plait_mx_has_v4(void) { return 0; }
    static int plait_mx_dw2_f32_i32_v4(const float *dY, const int32_t *which, const float *X,
                                       float *dW, float *db, Py_ssize_t o0, Py_ssize_t o1,
                                       Py_ssize_t nB, Py_ssize_t nO, Py_ssize_t nP, Py_ssize_t nI) {
        return 0;
    }
    static int plait_mx_dw3_f32_i32_v4(const float *dY, const int32_t *which, const float *X,
                                       float *dW, float *db, Py_ssize_t o0, Py_ssize_t o1,
                                       Py_ssize_t nB, Py_ssize_t nO, Py_ssize_t nI) {
        return 0;
    }
    #endif
    /* With AVX-512, the blocks of 64 columns, then the AVX2 kernel's blocks of 32 for the rest
       (spaCy's tok2vec Maxout has 288 inputs: 256 + 32) and its per-row path after those. */
    static void plait_mx_dx_f32_i32_best(const float *dY, const int32_t *which, const float *W,
                                         float *dX, Py_ssize_t n0, Py_ssize_t n1, Py_ssize_t nO,
                                         Py_ssize_t nP, Py_ssize_t nI) {
        Py_ssize_t done = 0;
        if (plait_mx_has_v4())
            done = plait_mx_dx_cols_f32_i32_v4(dY, which, W, dX, n0, n1, nO, nP, nI, 0, 0);
        plait_mx_dx_cols_f32_i32(dY, which, W, dX, n0, n1, nO, nP, nI, done, 1);
    }
    """
    int plait_mx_max_threads() nogil
    void plait_mx_dx_f32_i32(const float*, const int32_t*, const float*, float*, Py_ssize_t,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    int plait_mx_has_v4() nogil
    int plait_mx_has_dw2() nogil
    Py_ssize_t plait_mx_rchunk(Py_ssize_t) nogil
    Py_ssize_t plait_mx_p3_rows() nogil
    int plait_mx_dw2_f32_i32_v4(const float*, const int32_t*, const float*, float*, float*,
                                Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                Py_ssize_t) nogil
    int plait_mx_dw3_f32_i32_v4(const float*, const int32_t*, const float*, float*, float*,
                                Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    int plait_mx_dw2_f32_i32(const float*, const int32_t*, const float*, float*, float*,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                             Py_ssize_t) nogil
    void plait_mx_dx_f32_i32_best(const float*, const int32_t*, const float*, float*, Py_ssize_t,
                                  Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    void plait_mx_dx_f32_i64(const float*, const int64_t*, const float*, float*, Py_ssize_t,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    void plait_mx_dx_f64_i32(const double*, const int32_t*, const double*, double*, Py_ssize_t,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    void plait_mx_dx_f64_i64(const double*, const int64_t*, const double*, double*, Py_ssize_t,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) nogil
    void plait_mx_dw_f32_i32(const float*, const int32_t*, const float*, float*, float*, Py_ssize_t,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, void*,
                             Py_ssize_t, void*, Py_ssize_t) nogil
    void plait_mx_dw_f32_i64(const float*, const int64_t*, const float*, float*, float*, Py_ssize_t,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, void*,
                             Py_ssize_t, void*, Py_ssize_t) nogil
    void plait_mx_dw_f64_i32(const double*, const int32_t*, const double*, double*, double*,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                             void*, Py_ssize_t, void*, Py_ssize_t) nogil
    void plait_mx_dw_f64_i64(const double*, const int64_t*, const double*, double*, double*,
                             Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                             void*, Py_ssize_t, void*, Py_ssize_t) nogil

cdef enum:
    # At least this many rows per thread in the dX kernel (each thread packs W's columns once).
    _ROWS = 256
    # Rows per chunk of the dW kernel (PLAIT_MX_CHUNK in the C code).
    _DW_CHUNK = 128
    # Below this many multiply-adds (about 0.3 ms of work) everything runs on one thread.
    _PARALLEL_MIN = 1 << 22

cdef Py_ssize_t _parallel_min = _PARALLEL_MIN


cdef Py_ssize_t _parts(Py_ssize_t work, Py_ssize_t max_parts) noexcept nogil:
    """How many threads a call of this much work uses: 1 below the threshold, else up to
    OpenMP's count (and no more than max_parts). Results never depend on it."""
    if work < _parallel_min or max_parts <= 1:
        return 1
    cdef Py_ssize_t n = plait_mx_max_threads()
    return max(1, min(n, max_parts))


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


cdef void _dx(bint f32, bint i32, const void* dY, const void* which, const void* W, void* dX,
              Py_ssize_t n0, Py_ssize_t n1, Py_ssize_t nO, Py_ssize_t nP, Py_ssize_t nI) noexcept nogil:
    if f32 and i32:
        plait_mx_dx_f32_i32_best(<const float*>dY, <const int32_t*>which, <const float*>W, <float*>dX,
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


def backprop_maxout_dx(object dY, object which, object W):
    """dX of Ops.backprop_maxout_affine, or None outside the fast case.

    Shapes: dY (nB, nO), which (nB, nO), W (nO, nP, nI) -> dX (nB, nI).
    """
    cdef int k = _float_kind(dY, 2)
    cdef int ik = _index_kind(which, 2)
    if k == 0 or ik == 0 or _float_kind(W, 3) != k:
        return None
    cdef Py_ssize_t nB = _dim(dY, 0), nO = _dim(dY, 1), nP = _dim(W, 1), nI = _dim(W, 2)
    if _dim(which, 0) != nB or _dim(which, 1) != nO or _dim(W, 0) != nO or nP < 1:
        return None
    cdef bint f32 = k == 4, i32 = ik == 4
    cdef const void* pw = _data(which)
    cdef bint bad
    with nogil:
        bad = _any_index_outside(pw, i32, nB * nO, 0, nP)
    if bad:
        return None
    cdef cnp.ndarray dX = _new(2, nB, nI, 0, cnp.NPY_FLOAT32 if f32 else cnp.NPY_FLOAT64)
    cdef const void* pdY = _data(dY)
    cdef const void* pW = _data(W)
    cdef void* pdX = _data(dX)
    # One contiguous range of rows per thread (each call packs W's columns once).
    cdef Py_ssize_t part, n_parts = _parts(nB * nO * nI, (nB + _ROWS - 1) // _ROWS)
    cdef Py_ssize_t step = ((nB + n_parts - 1) // n_parts) if n_parts > 0 else nB
    with nogil:
        if n_parts > 1:
            for part in prange(n_parts, schedule="static", num_threads=n_parts):
                _dx(f32, i32, pdY, pw, pW, pdX, part * step, min((part + 1) * step, nB), nO, nP, nI)
        else:
            # One call: each call packs W's column blocks afresh. A row's bits do not depend on
            # which call or block it falls in (see the C code), so this equals the threaded path.
            _dx(f32, i32, pdY, pw, pW, pdX, 0, nB, nO, nP, nI)
    return dX


cdef extern from "stdlib.h":
    void* aligned_alloc(size_t, size_t) nogil
    void free(void*) nogil


cdef inline bint _pairs_kernel(bint f32, bint i32, Py_ssize_t nP) noexcept nogil:
    """Whether _dw sends float32 (f32) / int32 (i32) with nP pieces to the AVX-512 kernel that
    takes outputs in pairs (sparse_dw_wanted asks the same)."""
    return f32 and i32 and nP == 3 and plait_mx_has_v4()


cdef bint _dw(bint f32, bint i32, const void* dY, const void* which, const void* X, void* dW,
              void* db, Py_ssize_t o0, Py_ssize_t o1, Py_ssize_t nB, Py_ssize_t nO, Py_ssize_t nP,
              Py_ssize_t nI) noexcept nogil:
    """False when the buffers could not be allocated (nothing is then written)."""
    if _pairs_kernel(f32, i32, nP):
        return plait_mx_dw3_f32_i32_v4(<const float*>dY, <const int32_t*>which, <const float*>X,
                                       <float*>dW, <float*>db, o0, o1, nB, nO, nI) != 0
    if f32 and i32 and plait_mx_has_v4():
        return plait_mx_dw2_f32_i32_v4(<const float*>dY, <const int32_t*>which, <const float*>X,
                                       <float*>dW, <float*>db, o0, o1, nB, nO, nP, nI) != 0
    if f32 and i32 and plait_mx_has_dw2():
        return plait_mx_dw2_f32_i32(<const float*>dY, <const int32_t*>which, <const float*>X,
                                    <float*>dW, <float*>db, o0, o1, nB, nO, nP, nI) != 0
    cdef Py_ssize_t size = 4 if f32 else 8, lanes = 8 if f32 else 4
    # Row strides: whole vectors plus one, never a power of two.
    cdef Py_ssize_t ld = (nI + lanes - 1) // lanes * lanes + lanes
    cdef Py_ssize_t xbytes = (_DW_CHUNK * ld * size + 4095) // 4096 * 4096
    cdef Py_ssize_t abytes = (o1 - o0) * nP * ld * size
    # One page-aligned block: xbuf at its start, acc half a page after the end of xbuf.
    cdef char* block = <char*>aligned_alloc(4096, <size_t>((xbytes + 2048 + abytes + 4095) // 4096 * 4096))
    if block == NULL:
        return False
    cdef void* xbuf = block
    cdef void* acc = block + xbytes + 2048
    if f32 and i32:
        plait_mx_dw_f32_i32(<const float*>dY, <const int32_t*>which, <const float*>X, <float*>dW,
                            <float*>db, o0, o1, nB, nO, nP, nI, xbuf, ld, acc, ld)
    elif f32:
        plait_mx_dw_f32_i64(<const float*>dY, <const int64_t*>which, <const float*>X, <float*>dW,
                            <float*>db, o0, o1, nB, nO, nP, nI, xbuf, ld, acc, ld)
    elif i32:
        plait_mx_dw_f64_i32(<const double*>dY, <const int32_t*>which, <const double*>X,
                            <double*>dW, <double*>db, o0, o1, nB, nO, nP, nI, xbuf, ld, acc, ld)
    else:
        plait_mx_dw_f64_i64(<const double*>dY, <const int64_t*>which, <const double*>X,
                            <double*>dW, <double*>db, o0, o1, nB, nO, nP, nI, xbuf, ld, acc, ld)
    free(block)
    return True


def dw_chunk_rows(Py_ssize_t vector_floats):
    """Rows per chunk of the register-sum dW kernel for vectors of `vector_floats` floats (8
    with AVX2, 16 with AVX-512): as many as keep a block of 12 vectors a row within three
    quarters of this core's L1 data cache (32 KiB assumed where the C library does not say),
    between 8 and 256."""
    if vector_floats < 1:
        raise ValueError(f"maxout.dw_chunk_rows: vector_floats must be at least 1, got {vector_floats}.")
    return plait_mx_rchunk(vector_floats)


def dw_pair_chunk_rows():
    """Rows per chunk of the AVX-512 dW kernel for 3 pieces that takes outputs in pairs: as many
    as keep 64 columns a row within three quarters of this core's L1 data cache (32 KiB assumed
    where the C library does not say), between 8 and 255."""
    return plait_mx_p3_rows()


def sparse_dw_min_pieces():
    """From how many pieces the sparse dW kernel beats the dense BLAS product (measured).

    With 2 pieces the sparse kernels do half the BLAS's multiply-adds at a lower rate, and they
    tied or lost (2026-11-27, Emerald Rapids, 1400 rows: AVX-512 at width 64 0.68 against 0.57
    ms, at 256 8.4 against 8.2; AVX2 at 256 13.0 against 14.6); from 3 they win (below).
    """
    return 3


# Measured on Emerald Rapids (2 MiB of L2 per core, 2026-11-27, text CNN shapes, 3 pieces).
# Before the register-sum kernels went over dW in passes that stay in L2 (minimum of 15
# alternating calls against the BLAS's product alone): with AVX-512 the sparse kernel won at
# width 128 (dW 576 KiB) 2.3 against 3.6 ms and 256 (2.3 MiB) 9.9 against 11.3, and tied at
# 512 (9 MiB) 44.9 against 44.9, hence a 4 MiB limit then; with AVX2 (16 registers of 8
# floats, half the rate) it won at every width. With the passes, the whole backward (dX + dW;
# the dense path also makes the piece gradients and db) with the sparse dW against the dense
# one (bench/maxout_kernels.py, two runs of 21 rounds, 350 / 1,400 rows): width 384 (dW
# 5 MiB) 0.89-0.90 / 0.86-0.89, 512 (9 MiB) 1.00-1.02 / 0.97, 576 (11 MiB) 1.03 / 0.94-0.95,
# 640 (14 MiB) 1.02-1.07 / 0.98-0.99, 1024 (36 MiB) 1.03 / 0.92-0.97. So AVX-512 leaves a dW
# past 12 MiB to the BLAS: a clear gain to width 384, about even from there to 12 MiB.
# The float32 kernel for 3 pieces that takes outputs in pairs has no such limit (Zen 4,
# 2026-11-28, bench/maxout_kernels.py, 5 rounds, 350 / 1,400 rows: the backward with it against
# the dense dW at width 768 (dW 21 MiB) 0.72 / 0.67, at 1024 (36 MiB) 0.76 / 0.71).
cdef Py_ssize_t _V4_SPARSE_DW_MAX_BYTES = 12 << 20


def sparse_dw_wanted(Py_ssize_t nO, Py_ssize_t nP, Py_ssize_t nI, Py_ssize_t itemsize,
                     Py_ssize_t index_itemsize=4):
    """Whether backprop_maxout_dw beats the dense BLAS product for a dW of (nO, nP, nI) values of
    `itemsize` bytes, with `which` of `index_itemsize` bytes: from sparse_dw_min_pieces() pieces,
    and on AVX-512 only while dW is at most 12 MiB unless it is float32 with 3 pieces and int32
    winners (the kernel that takes outputs in pairs; see above)."""
    if nP < sparse_dw_min_pieces():
        return False
    if plait_mx_has_v4() and not _pairs_kernel(itemsize == 4, index_itemsize == 4, nP) \
            and nO * nP * nI * itemsize > _V4_SPARSE_DW_MAX_BYTES:
        return False
    return True


def backprop_maxout_dw(object dY, object which, object X, Py_ssize_t nP, bint check=True):
    """(dW, db) of Ops.backprop_maxout_affine, or None outside the fast case.

    Shapes: dY (nB, nO), which (nB, nO), X (nB, nI) -> dW (nO, nP, nI), db (nO, nP).
    check=False skips the scan of `which` for values outside 0..nP-1: only for a caller that
    has just made it (backprop_maxout_dx returned an array for the same `which` and nP).
    """
    cdef int k = _float_kind(dY, 2)
    cdef int ik = _index_kind(which, 2)
    if k == 0 or ik == 0 or _float_kind(X, 2) != k or nP < 1:
        return None
    cdef Py_ssize_t nB = _dim(dY, 0), nO = _dim(dY, 1), nI = _dim(X, 1)
    if _dim(which, 0) != nB or _dim(which, 1) != nO or _dim(X, 0) != nB:
        return None
    cdef bint f32 = k == 4, i32 = ik == 4
    cdef const void* pw = _data(which)
    cdef bint bad = 0
    if check:
        with nogil:
            bad = _any_index_outside(pw, i32, nB * nO, 0, nP)
    if bad:
        return None
    cdef int t = cnp.NPY_FLOAT32 if f32 else cnp.NPY_FLOAT64
    cdef cnp.ndarray dW = _new(3, nO, nP, nI, t)
    cdef cnp.ndarray db = _new(2, nO, nP, 0, t)
    cdef const void* pdY = _data(dY)
    cdef const void* pX = _data(X)
    cdef void* pdW = _data(dW)
    cdef void* pdb = _data(db)
    # One contiguous range of outputs (whole groups of 8) per thread: each call copies X once.
    cdef Py_ssize_t part, n_parts = _parts(nB * nO * nI, (nO + 7) // 8), failed = 0
    cdef Py_ssize_t step = (((nO + 7) // 8 + n_parts - 1) // n_parts * 8) if n_parts > 0 else nO
    with nogil:
        if n_parts > 1:
            for part in prange(n_parts, schedule="static", num_threads=n_parts):
                failed += not _dw(f32, i32, pdY, pw, pX, pdW, pdb, min(part * step, nO),
                                  min((part + 1) * step, nO), nB, nO, nP, nI)
        else:
            failed = not _dw(f32, i32, pdY, pw, pX, pdW, pdb, 0, nO, nB, nO, nP, nI)
    if failed:
        return None  # out of memory for the buffers: the reference path
    return dW, db
