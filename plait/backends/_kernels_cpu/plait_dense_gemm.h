/* float32 matrix products for the shapes of dense layers, on AVX-512 or AVX2 (see dense_gemm.pyx).

   C (M x N, row-major) = op(A) @ op(B) (+ C). A BLAS packs both operands into its own buffers
   before it multiplies; at the sizes of a dense layer's batch (M of a few hundred) that copy of
   the weight matrix costs as much as a tenth of the product. These kernels read the weights
   where they are:

   * The register tile is 8 rows x 48 columns of C (24 of the 32 vector registers). Each step
     along K loads three vectors of one row of the B operand and multiplies them by 8 values of
     the A operand, broadcast from memory. The A operand may have either stride (a row-major
     matrix or the transpose of one): its 8 rows are 8 pointers.
   * The B operand must have unit stride along the tile's vectors. The tile's vectors run along
     N (C = op(A) @ op(B)) or along M (C.T = op(B).T @ op(A).T, the tile written to C
     transposed); where neither operand has the stride one is copied transposed first, into
     panels of NR columns (each panel's K rows of NR values side by side). pdg_gemm estimates
     both ways and takes the cheaper.
   * Blocks: MC = 128 rows of A (MC x KC values stay in L2 across the B panels), KC = 512 steps
     along K, NR = 48 columns of B (a panel of KC x 48 values is reused by every row tile).

   * AVX2 (+FMA; where AVX-512 is absent or PLAIT_ISA=avx2): the same design on 16 registers
     of 8 lanes: a tile of 6 rows x 16 columns (12 registers), KC = 256, MC = 120; its
     transposed store goes through a copy of the tile on the stack.

   Each element of C is a sum over K in order, with one rounding per fused multiply-add, added
   to C (or to the previous K block) once per KC block: results differ from a BLAS's in the last
   bits, like any two BLAS builds.

   lstm.pyx's plait_gemm is the same kind of product (in place, blocked, op(A) either way, C
   added to or not), written for the LSTM's time steps: every instruction set and float64, and
   rows 4 or 1 at a time for a step's few sequences, where this tile would compute 8 rows and
   drop the rest; it has no transposed store, and it reads the LSTM's weights from panels made
   once per pass (its 6 x 64 AVX-512 tile reads one whole panel row per k). The two should
   become one kernel (this tile and store, its narrow-row, panel and float64 paths) once it
   pays: on an Emerald Rapids Xeon (2026-11-27) the BiLSTM's forward and backward with every
   float32 product here, or only the big ones, took no less time than with plait_gemm (then
   without panels; bench/README.md, "On an Intel Xeon"), so each module keeps its own for now.
   The transposed copy into panels is likewise twice: pdg_panels here (float32, 8 x 8 vector
   transposes) and lstm.pyx's _interleave_transpose (fused float32/float64, the gates'
   interleaving folded in); a merged kernel would take one with an optional row order. */
#ifndef PLAIT_DENSE_GEMM_H
#define PLAIT_DENSE_GEMM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "plait_isa.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define PDG_HAVE_X86 1
#define PDG_TARGET __attribute__((target("avx512f,avx512vl,fma")))
#define PDG_TARGET2 __attribute__((target("avx2,fma")))
#define PDG_INLINE inline __attribute__((always_inline))
#else
#define PDG_HAVE_X86 0
#endif

#define PDG_MR 8
#define PDG_NR 48
#define PDG_KC 512
#define PDG_MC 128
#define PDG2_MR 6
#define PDG2_NR 16
#define PDG2_KC 256
#define PDG2_MC 120

/* Which kernels this build may run on this CPU (once per process): 4 (AVX-512F, AVX-512VL and
   FMA), 3 (AVX2 and FMA) or 0 (none). */
static int pdg_level(void) {
#if PDG_HAVE_X86
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        if (PLAIT_ISA_ALLOWS(4) && __builtin_cpu_supports("avx512f")
                && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma"))
            known = 4;
        else if (PLAIT_ISA_ALLOWS(3) && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            known = 3;
        else
            known = 0;
    }
    return known;
#else
    return 0;
#endif
}

static int pdg_available(void) { return pdg_level() > 0; }

#if PDG_HAVE_X86

/* Rows 0..7 of eight 8-lane vectors, transposed in place: r[i] lane j <- r[j] lane i. */
PDG_TARGET2 static PDG_INLINE void pdg_tr8(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* The 8 x 16 block v[0..7] (row r, lane l) written as 16 rows of 8 at c (row l at c + l * ldc,
   lanes r < mr), rows l < rows; added to what is there when acc. */
PDG_TARGET static PDG_INLINE void pdg_store_t(const __m512 v[8], float* c, ptrdiff_t ldc,
                                              int mr, int rows, int acc) {
    const __mmask8 cm = (__mmask8)((1u << mr) - 1u);
    for (int half = 0; half < 2; half++) {
        __m256 r[8];
        for (int i = 0; i < 8; i++)
            r[i] = half ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v[i]), 1))
                        : _mm512_castps512_ps256(v[i]);
        pdg_tr8(r);
        for (int l = 0; l < 8; l++) {
            const int row = half * 8 + l;
            if (row >= rows) return;
            float* dst = c + row * ldc;
            __m256 x = r[l];
            if (acc) x = _mm256_add_ps(x, _mm256_maskz_loadu_ps(cm, dst));
            _mm256_mask_storeu_ps(dst, cm, x);
        }
    }
}

/* One register tile: C[8 x 16*NV] (+)= A[8 rows, kc] @ B[kc x 16*NV]. a[r]: row r of A at the
   tile's first k, consecutive k sak apart (rows past mr repeat a valid row; their sums are
   dropped). B rows ldb apart; nr columns valid (the last vector masked). TSTORE writes the tile
   transposed (row r of the tile to column r of C). */
#define PDG_KERNEL(NV, TSTORE)                                                                   \
PDG_TARGET static void pdg_kern_##NV##_##TSTORE(int kc, const float* const* a, ptrdiff_t sak,   \
        const float* b, ptrdiff_t ldb, float* c, ptrdiff_t ldc, int mr, int nr, int acc) {     \
    enum { nv_ = NV };                                                                           \
    const int last = nr - (NV - 1) * 16;                                                         \
    const __mmask16 lm = (__mmask16)(last >= 16 ? 0xFFFFu : ((1u << last) - 1u));               \
    /* Named variables, not arrays: in a build for the baseline target an array of 512-bit   \
       vectors stays in memory even inside an AVX-512 function. */                             \
    __m512 c0_0, c0_1, c0_2, c0_3, c0_4, c0_5, c0_6, c0_7;                                      \
    __m512 c1_0, c1_1, c1_2, c1_3, c1_4, c1_5, c1_6, c1_7;                                      \
    __m512 c2_0, c2_1, c2_2, c2_3, c2_4, c2_5, c2_6, c2_7;                                      \
    c0_0 = c0_1 = c0_2 = c0_3 = c0_4 = c0_5 = c0_6 = c0_7 = _mm512_setzero_ps();                \
    c1_0 = c1_1 = c1_2 = c1_3 = c1_4 = c1_5 = c1_6 = c1_7 = c0_0;                               \
    c2_0 = c2_1 = c2_2 = c2_3 = c2_4 = c2_5 = c2_6 = c2_7 = c0_0;                               \
    if (acc && !TSTORE)  /* the rows of C this tile adds to, while the products run */       \
        for (int r = 0; r < mr; r++)                                                             \
            for (int q = 0; q < NV; q++) _mm_prefetch((const char*)(c + r * ldc + 16 * q), _MM_HINT_T0); \
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];                                  \
    const float *a4 = a[4], *a5 = a[5], *a6 = a[6], *a7 = a[7];                                  \
    for (int k = 0; k < kc; k++) {                                                               \
        const ptrdiff_t o = k * sak;                                                             \
        const __m512 b0 = NV == 1 ? _mm512_maskz_loadu_ps(lm, b) : _mm512_loadu_ps(b);          \
        const __m512 b1 = NV == 2 ? _mm512_maskz_loadu_ps(lm, b + 16)                            \
                                  : (NV > 2 ? _mm512_loadu_ps(b + 16) : b0);                     \
        const __m512 b2 = NV == 3 ? _mm512_maskz_loadu_ps(lm, b + 32) : b0;                      \
        __m512 x;                                                                                \
        PDG_ROW(0, a0) PDG_ROW(1, a1) PDG_ROW(2, a2) PDG_ROW(3, a3)                              \
        PDG_ROW(4, a4) PDG_ROW(5, a5) PDG_ROW(6, a6) PDG_ROW(7, a7)                              \
        b += ldb;                                                                                \
    }                                                                                            \
    /* Copies: an array whose address is taken would not stay in registers in the loop. */   \
    const __m512 t0[8] = {c0_0, c0_1, c0_2, c0_3, c0_4, c0_5, c0_6, c0_7};                     \
    const __m512 t1[8] = {c1_0, c1_1, c1_2, c1_3, c1_4, c1_5, c1_6, c1_7};                     \
    const __m512 t2[8] = {c2_0, c2_1, c2_2, c2_3, c2_4, c2_5, c2_6, c2_7};                     \
    if (TSTORE) {                                                                                \
        pdg_store_t(t0, c, ldc, mr, NV == 1 ? last : 16, acc);                                   \
        if (NV > 1) pdg_store_t(t1, c + 16 * ldc, ldc, mr, NV == 2 ? last : 16, acc);            \
        if (NV > 2) pdg_store_t(t2, c + 32 * ldc, ldc, mr, last, acc);                           \
        return;                                                                                  \
    }                                                                                            \
    for (int r = 0; r < mr; r++) {                                                               \
        float* cr = c + r * ldc;                                                                 \
        PDG_STORE(t0[r], cr, NV == 1)                                                            \
        if (NV > 1) PDG_STORE(t1[r], cr + 16, NV == 2)                                           \
        if (NV > 2) PDG_STORE(t2[r], cr + 32, 1)                                                 \
    }                                                                                            \
}

#define PDG_ROW(R, AR)                                                                           \
    x = _mm512_set1_ps(AR[o]);                                                                   \
    c0_##R = _mm512_fmadd_ps(x, b0, c0_##R);                                                     \
    if (nv_ > 1) c1_##R = _mm512_fmadd_ps(x, b1, c1_##R);                                        \
    if (nv_ > 2) c2_##R = _mm512_fmadd_ps(x, b2, c2_##R);

#define PDG_STORE(V, P, MASKED)                                                                  \
    {                                                                                            \
        __m512 s_ = (V);                                                                         \
        if (MASKED) {                                                                            \
            if (acc) s_ = _mm512_add_ps(s_, _mm512_maskz_loadu_ps(lm, (P)));                     \
            _mm512_mask_storeu_ps((P), lm, s_);                                                  \
        } else {                                                                                 \
            if (acc) s_ = _mm512_add_ps(s_, _mm512_loadu_ps((P)));                               \
            _mm512_storeu_ps((P), s_);                                                           \
        }                                                                                        \
    }

PDG_KERNEL(1, 0)
PDG_KERNEL(2, 0)
PDG_KERNEL(3, 0)
PDG_KERNEL(1, 1)
PDG_KERNEL(2, 1)
PDG_KERNEL(3, 1)

/* C = op(A) @ B (+ C where beta): M x N, op(A)[i, k] at A + i * sai + k * sak, B (K x N) rows
   ldb apart (with `panel`: pdg_panels' copy, rows of PDG_NR floats, ldb ignored), C rows ldc
   apart; with tstore C is written transposed (element (i, j) at C + j * ldc + i). K > 0. */
PDG_TARGET static void pdg_run(int64_t M, int64_t N, int64_t K, const float* A, ptrdiff_t sai,
                               ptrdiff_t sak, const float* B, ptrdiff_t ldb, float* C,
                               ptrdiff_t ldc, int beta, int tstore, int panel) {
    for (int64_t m0 = 0; m0 < M; m0 += PDG_MC) {
        const int64_t m1 = M - m0 < PDG_MC ? M : m0 + PDG_MC;
        for (int64_t j0 = 0; j0 < N; j0 += PDG_NR) {
            const int nr = (int)(N - j0 < PDG_NR ? N - j0 : PDG_NR);
            const int nv = (nr + 15) / 16;
            for (int64_t k0 = 0; k0 < K; k0 += PDG_KC) {
                const int kc = (int)(K - k0 < PDG_KC ? K - k0 : PDG_KC);
                const int acc = beta || k0 > 0;
                const float* bp = panel ? B + j0 * K + k0 * PDG_NR : B + k0 * ldb + j0;
                const ptrdiff_t lb = panel ? PDG_NR : ldb;
                for (int64_t i0 = m0; i0 < m1; i0 += PDG_MR) {
                    const int mr = (int)(M - i0 < PDG_MR ? M - i0 : PDG_MR);
                    const float* ap[PDG_MR];
                    for (int r = 0; r < PDG_MR; r++)
                        ap[r] = A + (i0 + (r < mr ? r : mr - 1)) * sai + k0 * sak;
                    float* cp = tstore ? C + j0 * ldc + i0 : C + i0 * ldc + j0;
                    if (tstore) {
                        if (nv == 3) pdg_kern_3_1(kc, ap, sak, bp, lb, cp, ldc, mr, nr, acc);
                        else if (nv == 2) pdg_kern_2_1(kc, ap, sak, bp, lb, cp, ldc, mr, nr, acc);
                        else pdg_kern_1_1(kc, ap, sak, bp, lb, cp, ldc, mr, nr, acc);
                    } else {
                        if (nv == 3) pdg_kern_3_0(kc, ap, sak, bp, lb, cp, ldc, mr, nr, acc);
                        else if (nv == 2) pdg_kern_2_0(kc, ap, sak, bp, lb, cp, ldc, mr, nr, acc);
                        else pdg_kern_1_0(kc, ap, sak, bp, lb, cp, ldc, mr, nr, acc);
                    }
                }
            }
        }
    }
}

/* The AVX2 tile: C[6 x 8*NV] (+)= A[6 rows, kc] @ B[kc x 8*NV], as PDG_KERNEL; MASKED: the last
   vector has nr - 8 * (NV - 1) < 8 valid lanes (loaded and stored with a lane mask). */
#define PDG2_KERNEL(NV, TSTORE, MASKED)                                                          \
PDG_TARGET2 static void pdg2_kern_##NV##_##TSTORE##_##MASKED(int kc, const float* const* a,     \
        ptrdiff_t sak, const float* b, ptrdiff_t ldb, float* c, ptrdiff_t ldc, int mr, int nr,   \
        int acc) {                                                                               \
    enum { nv_ = NV };                                                                           \
    const int last = nr - (NV - 1) * 8;                                                          \
    const __m256i lm = _mm256_cmpgt_epi32(_mm256_set1_epi32(last),                               \
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));            \
    __m256 c0_0, c0_1, c0_2, c0_3, c0_4, c0_5, c1_0, c1_1, c1_2, c1_3, c1_4, c1_5;             \
    c0_0 = c0_1 = c0_2 = c0_3 = c0_4 = c0_5 = _mm256_setzero_ps();                              \
    c1_0 = c1_1 = c1_2 = c1_3 = c1_4 = c1_5 = c0_0;                                             \
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];         \
    for (int k = 0; k < kc; k++) {                                                               \
        const ptrdiff_t o = k * sak;                                                             \
        const __m256 b0 = (NV == 1 && MASKED) ? _mm256_maskload_ps(b, lm) : _mm256_loadu_ps(b);  \
        const __m256 b1 = NV == 1 ? b0 : (MASKED ? _mm256_maskload_ps(b + 8, lm)                 \
                                                 : _mm256_loadu_ps(b + 8));                      \
        __m256 x;                                                                                \
        PDG2_ROW(0, a0) PDG2_ROW(1, a1) PDG2_ROW(2, a2)                                          \
        PDG2_ROW(3, a3) PDG2_ROW(4, a4) PDG2_ROW(5, a5)                                          \
        b += ldb;                                                                                \
    }                                                                                            \
    const __m256 t0[6] = {c0_0, c0_1, c0_2, c0_3, c0_4, c0_5};                                  \
    const __m256 t1[6] = {c1_0, c1_1, c1_2, c1_3, c1_4, c1_5};                                  \
    if (TSTORE) { /* row r of the tile to column r of C: through a copy on the stack */          \
        float t[6][16];                                                                          \
        for (int r = 0; r < 6; r++) {                                                            \
            _mm256_storeu_ps(t[r], t0[r]);                                                       \
            _mm256_storeu_ps(t[r] + 8, t1[r]);                                                   \
        }                                                                                        \
        for (int q = 0; q < nr; q++) {                                                           \
            float* cq = c + q * ldc;                                                             \
            for (int r = 0; r < mr; r++) cq[r] = acc ? cq[r] + t[r][q] : t[r][q];                \
        }                                                                                        \
        return;                                                                                  \
    }                                                                                            \
    for (int r = 0; r < mr; r++) {                                                               \
        float* cr = c + r * ldc;                                                                 \
        PDG2_STORE(t0[r], cr, NV == 1 && MASKED)                                                 \
        if (NV > 1) PDG2_STORE(t1[r], cr + 8, MASKED)                                            \
    }                                                                                            \
}

#define PDG2_ROW(R, AR)                                                                          \
    x = _mm256_broadcast_ss(AR + o);                                                             \
    c0_##R = _mm256_fmadd_ps(x, b0, c0_##R);                                                     \
    if (nv_ > 1) c1_##R = _mm256_fmadd_ps(x, b1, c1_##R);

#define PDG2_STORE(V, P, M)                                                                      \
    {                                                                                            \
        __m256 s_ = (V);                                                                         \
        if (M) {                                                                                 \
            if (acc) s_ = _mm256_add_ps(s_, _mm256_maskload_ps((P), lm));                        \
            _mm256_maskstore_ps((P), lm, s_);                                                    \
        } else {                                                                                 \
            if (acc) s_ = _mm256_add_ps(s_, _mm256_loadu_ps((P)));                               \
            _mm256_storeu_ps((P), s_);                                                           \
        }                                                                                        \
    }

PDG2_KERNEL(1, 0, 0)
PDG2_KERNEL(1, 0, 1)
PDG2_KERNEL(2, 0, 0)
PDG2_KERNEL(2, 0, 1)
PDG2_KERNEL(1, 1, 0)
PDG2_KERNEL(1, 1, 1)
PDG2_KERNEL(2, 1, 0)
PDG2_KERNEL(2, 1, 1)

/* Floats of scratch pdg2_run copies a transposed A into: a block of MC rows x KC steps. */
#define PDG2_PACK ((size_t)PDG2_MC * PDG2_KC)

/* pdg_run for the AVX2 tile (the same arguments), except that a transposed A (sai == 1: the
   weight gradient's dY.T) is first copied block by block into `pack`, tile by tile with the
   tile's 6 values of one k side by side, when N spans at least 4 panels to reuse it: read in
   place, its rows for consecutive k lie a row of the matrix apart, at a multiple of 1 KB for the
   usual widths, and share a few sets of L1. On Emerald Rapids with AVX2 (2026-11-27, the MLP's
   weight gradients at batch 256): 55-62 GFLOP/s in place, 71-77 copied. Copying a B that
   needs no transposing into panels as well (an extra copy), or a plain A, lost there (forward
   products 75-77 -> 55-67). With `panel`, B is pdg_panels' copy (rows of 16 floats, one panel
   after another) and ldb is ignored. A copy changes no sum: each is over k in order, one KC block
   at a time. */
PDG_TARGET2 static void pdg2_run(int64_t M, int64_t N, int64_t K, const float* A, ptrdiff_t sai,
                                 ptrdiff_t sak, const float* B, ptrdiff_t ldb, float* C,
                                 ptrdiff_t ldc, int beta, int tstore, float* pack, int panel) {
    typedef void (*kern_t)(int, const float* const*, ptrdiff_t, const float*, ptrdiff_t, float*,
                           ptrdiff_t, int, int, int);
    static const kern_t kerns[2][2][2] = {  /* [tstore][nv - 1][masked] */
        {{pdg2_kern_1_0_0, pdg2_kern_1_0_1}, {pdg2_kern_2_0_0, pdg2_kern_2_0_1}},
        {{pdg2_kern_1_1_0, pdg2_kern_1_1_1}, {pdg2_kern_2_1_0, pdg2_kern_2_1_1}}};
    float* const Ap = pack;
    const int pack_a = sai == 1 && N >= 4 * PDG2_NR && pack != NULL;
    for (int64_t m0 = 0; m0 < M; m0 += PDG2_MC) {
        const int64_t m1 = M - m0 < PDG2_MC ? M : m0 + PDG2_MC;
        for (int64_t k0 = 0; k0 < K; k0 += PDG2_KC) {
            const int kc = (int)(K - k0 < PDG2_KC ? K - k0 : PDG2_KC);
            const int acc = beta || k0 > 0;
            if (pack_a)  /* A[i, k] at A + i + k * sak: each k's 6 values are adjacent */
                for (int64_t i0 = m0; i0 < m1; i0 += PDG2_MR) {
                    const int mr = (int)(M - i0 < PDG2_MR ? M - i0 : PDG2_MR);
                    float* dst = Ap + (i0 - m0) * kc;
                    const float* src = A + i0 + k0 * sak;
                    for (int k = 0; k < kc; k++)
                        for (int r = 0; r < PDG2_MR; r++)
                            dst[k * PDG2_MR + r] = src[k * sak + (r < mr ? r : mr - 1)];
                }
            for (int64_t j0 = 0; j0 < N; j0 += PDG2_NR) {
                const int nr = (int)(N - j0 < PDG2_NR ? N - j0 : PDG2_NR);
                const kern_t kern = kerns[tstore ? 1 : 0][nr > 8 ? 1 : 0][nr % 8 != 0 ? 1 : 0];
                const float* bp = panel ? B + j0 * K + k0 * PDG2_NR : B + k0 * ldb + j0;
                const ptrdiff_t lb = panel ? PDG2_NR : ldb;
                for (int64_t i0 = m0; i0 < m1; i0 += PDG2_MR) {
                    const int mr = (int)(M - i0 < PDG2_MR ? M - i0 : PDG2_MR);
                    const float* ap[PDG2_MR];
                    ptrdiff_t astep = sak;
                    for (int r = 0; r < PDG2_MR; r++)
                        ap[r] = pack_a ? Ap + (i0 - m0) * kc + r
                                       : A + (i0 + (r < mr ? r : mr - 1)) * sai + k0 * sak;
                    if (pack_a) astep = PDG2_MR;
                    float* cp = tstore ? C + j0 * ldc + i0 : C + i0 * ldc + j0;
                    kern(kc, ap, astep, bp, lb, cp, ldc, mr, nr, acc);
                }
            }
        }
    }
}

/* y (N x K, rows ldy apart) transposed into panels of W (16 or 48) of its rows: panel p holds K
   rows of W floats, float c of row k being y[W p + c, k]; a last panel's missing rows are 0.
   The copy used to be one K x N matrix, a tile reading its panel's rows N floats apart: for N
   a multiple of 1,024 (spaCy's parser: 3,072) all of them fall in one set of L1, and for other
   large N they still miss it more than a panel's contiguous rows do. Emerald Rapids, 1 thread,
   against numpy's OpenBLAS (time ratio): AVX-512 1000 x 96 @ (1491 x 96).T 1.89 -> 0.90,
   1000 x 128 @ (3072 x 128).T 1.36 -> 1.04; AVX2 17000 x 128 @ (3072 x 128).T 1.06 -> 0.84,
   910 x 288 @ (288 x 288).T 1.50 -> 1.00, the MLP's shapes unchanged. The sums are the same. */
PDG_TARGET2 static void pdg_panels(const float* y, int64_t N, int64_t K, ptrdiff_t ldy, float* d,
                                  int W) {
    for (int64_t n0 = 0; n0 < N; n0 += W) {
        float* dp = d + n0 * K;
        for (int g = 0; g < W; g += 16) {
            const int64_t base = n0 + g, nn = N - base < 16 ? (N - base > 0 ? N - base : 0) : 16;
            int64_t k0 = 0;
            if (nn == 16)
                for (; k0 + 8 <= K; k0 += 8)
                    for (int h = 0; h < 16; h += 8) {
                        __m256 r[8];
                        for (int q = 0; q < 8; q++) r[q] = _mm256_loadu_ps(y + (base + h + q) * ldy + k0);
                        pdg_tr8(r);
                        for (int q = 0; q < 8; q++) _mm256_storeu_ps(dp + (k0 + q) * W + g + h, r[q]);
                    }
            for (; k0 < K; k0++)
                for (int c = 0; c < 16; c++)
                    dp[k0 * W + g + c] = c < nn ? y[(base + c) * ldy + k0] : 0.0f;
        }
    }
}

/* b (K x N, rows ldb apart, read as it is) copied into panels of 16 columns for pdg2_run's
   `panel` mode: panel p holds K rows of 16 floats, float c of row k being b[k, 16 p + c]; a
   last panel's missing columns are 0. No sum changes. */
PDG_TARGET2 static void pdg2_copy_panels(const float* b, int64_t N, int64_t K, ptrdiff_t ldb,
                                         float* d) {
    for (int64_t j0 = 0; j0 < N; j0 += PDG2_NR) {
        const int64_t nn = N - j0 < PDG2_NR ? N - j0 : PDG2_NR;
        float* dp = d + j0 * K;
        for (int64_t k = 0; k < K; k++) {
            const float* src = b + k * ldb + j0;
            if (nn == PDG2_NR) {
                _mm256_storeu_ps(dp + k * PDG2_NR, _mm256_loadu_ps(src));
                _mm256_storeu_ps(dp + k * PDG2_NR + 8, _mm256_loadu_ps(src + 8));
            } else {
                for (int64_t c = 0; c < PDG2_NR; c++) dp[k * PDG2_NR + c] = c < nn ? src[c] : 0.0f;
            }
        }
    }
}

#endif /* PDG_HAVE_X86 */

/* Whether the AVX2 tile should read an operand it could read in place (K x N, rows ldb floats
   apart) from panels instead: the tile reads one 64-byte line of it per k, KC lines a panel,
   and every row tile of the block reads the same lines again. With rows a multiple of 4 KiB
   apart all those lines fall into one of L1's 64 sets, which holds 8 of them (12 on Emerald
   Rapids), and each row tile reads them from L2 again. On Zen 4 with AVX2 (2026-11-28,
   dense_gemm_grid.py) x @ y and x.T @ y with N = 3,072 ran at 45-67 GFLOP/s in place;
   copied, at 1.28-1.30x that at the median over 60 shapes of at least 128 rows (two runs; the
   lowest 0.88-0.99x) but down to 0.76x with 64 rows, where fewer row tiles repay the copy. Rows
   2 KiB apart (N = 512) gained 1.08x at the median, with losses to 0.78x: left in place. */
static int pdg2_panels_pay(int64_t rows, int64_t K, ptrdiff_t ldb) {
    return rows >= 128 && K >= 64 && ldb % 1024 == 0;
}

/* A growing buffer per thread for the transposed copy of an operand (freed with the thread),
   at most PDG_SCRATCH_MAX floats. */
typedef struct { float* p; size_t cap; } pdg_buf;
static pthread_key_t pdg_key;
static pthread_once_t pdg_once = PTHREAD_ONCE_INIT;
static int pdg_key_ok = 0;
static void pdg_free(void* v) {
    pdg_buf* b = (pdg_buf*)v;
    if (b) { free(b->p); free(b); }
}
static void pdg_make_key(void) { pdg_key_ok = pthread_key_create(&pdg_key, pdg_free) == 0; }
/* The most a thread keeps for the copy (64 MB): bigger products go to the BLAS instead. */
#define PDG_SCRATCH_MAX ((size_t)16 << 20)

static float* pdg_scratch(size_t n) {
    if (n > PDG_SCRATCH_MAX) return NULL;
    pthread_once(&pdg_once, pdg_make_key);
    if (!pdg_key_ok) return NULL;
    pdg_buf* b = (pdg_buf*)pthread_getspecific(pdg_key);
    if (b == NULL) {
        b = (pdg_buf*)calloc(1, sizeof(pdg_buf));
        if (b == NULL || pthread_setspecific(pdg_key, b) != 0) { free(b); return NULL; }
    }
    if (b->cap < n) {
        void* p = NULL;
        if (posix_memalign(&p, 64, n * sizeof(float)) != 0) return NULL;
        free(b->p);
        b->p = (float*)p;
        b->cap = n;
    }
    return b->p;
}

/* Estimated cycles of pdg_run with `v` values along the vectors and `r` along the tile rows:
   each tile step is 8 rows x the panel's vectors at two fused multiply-adds a cycle, slower for
   narrow panels (one vector: the broadcasts, not the arithmetic, are the limit), plus the
   stores of C per K block (a transposed store costs about four times a plain one). */
static double pdg_cycles(int64_t v, int64_t r, int64_t K, int tstore) {
    static const double per_vector[4] = {0.0, 0.7, 0.55, 0.5}; /* cycles per vector and step */
    const int64_t full = v / PDG_NR, rest = (v % PDG_NR + 15) / 16;
    const double panel_steps = (double)full * 3.0 * per_vector[3] + (rest ? (double)rest * per_vector[rest] : 0.0);
    const double rows = (double)((r + PDG_MR - 1) / PDG_MR * PDG_MR);
    const double blocks = (double)((K + PDG_KC - 1) / PDG_KC);
    return (double)K * rows * panel_steps + (tstore ? 0.4 : 0.1) * (double)v * (double)r * blocks;
}

/* pdg_cycles for the AVX2 tile: 6 rows x 2 vectors of 8 a step (one vector: broadcast-bound);
   its transposed store is scalar, about twice the AVX-512 one's cost a value. */
static double pdg2_cycles(int64_t v, int64_t r, int64_t K, int tstore) {
    static const double per_vector[3] = {0.0, 0.7, 0.5};
    const int64_t full = v / PDG2_NR, rest = (v % PDG2_NR + 7) / 8;
    const double panel_steps = (double)full * 2.0 * per_vector[2] + (rest ? (double)rest * per_vector[rest] : 0.0);
    const double rows = (double)((r + PDG2_MR - 1) / PDG2_MR * PDG2_MR);
    const double blocks = (double)((K + PDG2_KC - 1) / PDG2_KC);
    return (double)K * rows * panel_steps + (tstore ? 0.8 : 0.1) * (double)v * (double)r * blocks;
}

/* out (M x N, C-contiguous) = op(x) @ op(y) (+ out where beta). x and y are row-major with rows
   ldx and ldy apart: op(x) = x (M x K) or, with tx, x.T (x is K x M); op(y) = y (K x N) or, with
   ty, y.T (y is N x K).

   The kernel's vectors run along N (C = op(x) @ op(y): op(y) needs unit stride along N) or
   along M (C.T = op(y).T @ op(x).T, written transposed: op(x).T needs unit stride along M).
   An operand without that stride is copied transposed first (pdg_panels). Of the two ways, the one with the
   smaller estimated time is taken (pdg_cycles, plus about two cycles per copied value).

   Returns 0 without touching out when the kernels cannot run here or the copy cannot be
   allocated. */
static int pdg_gemm(int64_t M, int64_t N, int64_t K, const float* x, ptrdiff_t ldx, int tx,
                    const float* y, ptrdiff_t ldy, int ty, float* out, int beta) {
#if PDG_HAVE_X86
    const int level = pdg_level();
    if (level == 0 || M <= 0 || N <= 0 || K <= 0) return 0;
    double (*cycles)(int64_t, int64_t, int64_t, int) = level == 4 ? pdg_cycles : pdg2_cycles;
    /* The AVX2 path packs its operands into scratch after the transposed copy (if any). */
    const size_t packed = level == 4 ? 0 : PDG2_PACK;
    const int nr = level == 4 ? PDG_NR : PDG2_NR;  /* the width of a copied operand's panels */
    const double t_n = cycles(N, M, K, 0) + (ty ? 2.0 * (double)N * (double)K : 0.0);
    const double t_m = cycles(M, N, K, 1) + (tx ? 0.0 : 2.0 * (double)M * (double)K);
    if (t_n <= t_m) {
        /* Vectors along N: A = op(x), B = op(y) (K x N). */
        const float* b = y;
        ptrdiff_t ldb = ldy;
        /* The AVX2 tile also copies a B it could read in place where L1 would not hold it. */
        const int copy = !ty && level == 3 && pdg2_panels_pay(M, K, ldy);
        const size_t copied = ty || copy ? (size_t)K * (size_t)((N + nr - 1) / nr * nr) : 0;
        float* t = copied + packed ? pdg_scratch(copied + packed) : NULL;
        if (copied + packed && t == NULL) return 0;
        if (ty) {
            pdg_panels(y, N, K, ldy, t, nr);
            b = t;
        } else if (copy) {
            pdg2_copy_panels(y, N, K, ldy, t);
            b = t;
        }
        if (level == 4) pdg_run(M, N, K, x, tx ? 1 : ldx, tx ? ldx : 1, b, ldb, out, N, beta, 0, ty);
        else pdg2_run(M, N, K, x, tx ? 1 : ldx, tx ? ldx : 1, b, ldb, out, N, beta, 0, t + copied, ty || copy);
        return 1;
    }
    /* Vectors along M: A = op(y).T (N x K), B = op(x).T (K x M), C written transposed. */
    const float* b = x;
    ptrdiff_t ldb = ldx;
    const int copy = tx && level == 3 && pdg2_panels_pay(N, K, ldx);
    const size_t copied = !tx || copy ? (size_t)K * (size_t)((M + nr - 1) / nr * nr) : 0;
    float* t = copied + packed ? pdg_scratch(copied + packed) : NULL;
    if (copied + packed && t == NULL) return 0;
    if (!tx) {
        pdg_panels(x, M, K, ldx, t, nr);
        b = t;
    } else if (copy) {
        pdg2_copy_panels(x, M, K, ldx, t);
        b = t;
    }
    if (level == 4) pdg_run(N, M, K, y, ty ? ldy : 1, ty ? 1 : ldy, b, ldb, out, N, beta, 1, !tx);
    else pdg2_run(N, M, K, y, ty ? ldy : 1, ty ? 1 : ldy, b, ldb, out, N, beta, 1, t + copied, !tx || copy);
    return 1;
#else
    (void)M; (void)N; (void)K; (void)x; (void)ldx; (void)tx; (void)y; (void)ldy; (void)ty;
    (void)out; (void)beta;
    return 0;
#endif
}

#endif
