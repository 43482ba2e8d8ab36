# cython: language_level=3
"""Compiled LSTM kernels for NumpyOps: Thinc 8.3's packed, stacked, optionally bidirectional LSTM.

The layout of `params`, the argument-order quirk (second argument = initial cells) and the
forward state (Y4, G4, C4, X, H0, C0) are those of plait/backends/_lstm.py, the reference.
One direction of one layer runs on one thread: the time steps' matrix products in plait_gemm
(blocked, on vectors), the whole-sequence float32 products there or, where measured faster, in
the BLAS NumpyOps uses (see plait_lstm_blas_min_work), the gate activations and cell update
fused in one pass per row (float32: on vectors, with a polynomial exp). A bidirectional layer
runs its two directions on two OpenMP threads when there are two and the work pays for it;
nothing is summed across threads, so results never depend on thread counts. Between the time
steps no thread pool is woken (see plait_gemm for why not BLAS). Also here: the one-pass
derivatives dsigmoid and dtanh (Ops.sigmoid and backprop_sigmoid live with the activations,
act.pyx).
"""
import numpy

from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport exp, tanh
from libc.stdint cimport int64_t, uintptr_t
from libc.string cimport memcpy, memset



cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #ifdef _OPENMP
    #include <omp.h>
    static int plait_lstm_omp_threads(void) { return omp_get_max_threads(); }
    #else
    static int plait_lstm_omp_threads(void) { return 1; }
    #endif
    /* The float32 kernels are compiled for the widest instruction set of this build
       (plait_isa.h): x86-64-v4 (AVX-512), v3 (AVX2, FMA) or the baseline (measured: the fused
       step pass runs ~3x faster with AVX2 than with SSE2). The products below pick their
       register blocking at run time, up to what the build allows. */
    #include "plait_isa.h"
    #if PLAIT_ISA_LEVEL > 0
    #define PLAIT_X86_DISPATCH 1
    #endif
    #define PLAIT_CLONES PLAIT_UPTO_V4
    /* Helpers must be inlined into each clone to be compiled for its instruction set. */
    #if defined(__GNUC__)
    #define PLAIT_INLINE __attribute__((always_inline))
    #else
    #define PLAIT_INLINE
    #endif

    /* The products' blocking (see plait_gemm below): rows, K and the columns of a panel of B. */
    #define PLAIT_GEMM_MC 128
    #define PLAIT_GEMM_KC 256
    #define PLAIT_GEMM_PW 64
    /* The copy of A leaves PLAIT_GEMM_APAD values after each block of MR rows: the blocks'
       starts then fall in different L1 sets (KC x MR floats apart they would share two), and
       a whole-vector store of a block's last k has room to spill. */
    #define PLAIT_GEMM_APAD 16
    /* How many rows ahead the copy of a transposed A prefetches. */
    #define PLAIT_GEMM_PF 4
    /* Values of scratch a product with A transposed may use: a block of A (MR is at least 4). */
    #define PLAIT_GEMM_SCRATCH (PLAIT_GEMM_MC * PLAIT_GEMM_KC + (PLAIT_GEMM_MC / 4 + 1) * PLAIT_GEMM_APAD)

    #if defined(__GNUC__) || defined(__clang__)
    /* float32 math on 8-lane vectors (GCC/Clang vector extensions: one AVX register, two SSE
       or NEON ones), so that the transcendental passes run without libm calls or branches. */
    typedef float plait_vf __attribute__((vector_size(32)));
    typedef int32_t plait_vi __attribute__((vector_size(32)));
    typedef uint32_t plait_vu __attribute__((vector_size(32)));
    #define PLAIT_VW 8

    static inline PLAIT_INLINE plait_vf plait_vload(const float* p) { plait_vf v; memcpy(&v, p, sizeof(v)); return v; }
    static inline PLAIT_INLINE void plait_vstore(float* p, plait_vf v) { memcpy(p, &v, sizeof(v)); }
    static inline PLAIT_INLINE plait_vf plait_vsplat(float a) { plait_vf v = {a, a, a, a, a, a, a, a}; return v; }
    /* m ? a : b, lane by lane, for a comparison mask m. */
    static inline PLAIT_INLINE plait_vf plait_vselect(plait_vi m, plait_vf a, plait_vf b) {
        return (plait_vf)(((plait_vi)a & m) | ((plait_vi)b & ~m));
    }

    /* exp: x = n*ln2 + r with |r| <= ln2/2 (ln2 in two parts, the first exact for any n in
       range), e**r from its degree-7 Taylor polynomial (error below 1e-8 there), 2**n written
       straight into the exponent bits. The clamp keeps 2**n a normal float; NaN fails both
       comparisons and comes out as NaN. */
    static inline PLAIT_INLINE plait_vf plait_vexp(plait_vf x) {
        const plait_vf lo = plait_vsplat(-87.0f), hi = plait_vsplat(88.0f);
        const plait_vf shift = plait_vsplat(12582912.0f);  /* 1.5 * 2**23: adding it rounds */
        plait_vf t, n, r, p;
        plait_vu bits;
        x = plait_vselect(x < lo, lo, x);
        x = plait_vselect(x > hi, hi, x);
        t = x * 1.4426950408889634f + shift;
        n = t - shift;
        bits = ((plait_vu)t - 0x4B400000u + 127u) << 23;
        r = x - n * 0.693115234375f;
        r = r - n * 3.1946183e-05f;
        p = plait_vsplat(1.0f / 5040.0f);
        p = p * r + 1.0f / 720.0f;
        p = p * r + 1.0f / 120.0f;
        p = p * r + 1.0f / 24.0f;
        p = p * r + 1.0f / 6.0f;
        p = p * r + 0.5f;
        p = p * r + 1.0f;
        p = p * r + 1.0f;
        return p * (plait_vf)bits;
    }

    /* k / (1 + exp(-k*x)) - (k - 1): the logistic function for k = 1 and, as
       2*sigmoid(2x) - 1, tanh for k = 2 (absolute error ~1e-7, which float32 cannot tell
       from libm's; relative precision for tiny |x| is what it gives up). */
    static inline PLAIT_INLINE plait_vf plait_vact(plait_vf x, plait_vf k) {
        return k / (1.0f + plait_vexp(-(k * x))) - (k - 1.0f);
    }

    /* Y = k-activation of X + B over n floats; n a multiple of 4 and k repeating its first
       four lanes. The tail runs through a padded vector so that every element takes the
       same arithmetic. */
    static inline PLAIT_INLINE void plait_act_f(float* Y, const float* X, const float* B, int n, plait_vf k) {
        int j = 0, rest;
        float buf[PLAIT_VW], bb[PLAIT_VW];
        plait_vf x;
        for (; j + PLAIT_VW <= n; j += PLAIT_VW) {
            x = plait_vload(X + j);
            if (B) x = x + plait_vload(B + j);
            plait_vstore(Y + j, plait_vact(x, k));
        }
        rest = n - j;
        if (rest > 0) {
            memset(buf, 0, sizeof(buf));
            memset(bb, 0, sizeof(bb));
            memcpy(buf, X + j, rest * sizeof(float));
            if (B) memcpy(bb, B + j, rest * sizeof(float));
            x = plait_vload(buf) + plait_vload(bb);
            plait_vstore(buf, plait_vact(x, k));
            memcpy(Y + j, buf, rest * sizeof(float));
        }
    }

    /* Y = tanh(X), or Y *= tanh(X) when scale is set, over n floats (any n). */
    static inline PLAIT_INLINE void plait_tanh_f(float* Y, const float* X, int n, int scale) {
        int j = 0, rest;
        float bx[PLAIT_VW], by[PLAIT_VW];
        const plait_vf two = plait_vsplat(2.0f);
        plait_vf t;
        for (; j + PLAIT_VW <= n; j += PLAIT_VW) {
            t = plait_vact(plait_vload(X + j), two);
            plait_vstore(Y + j, scale ? plait_vload(Y + j) * t : t);
        }
        rest = n - j;
        if (rest > 0) {
            memset(bx, 0, sizeof(bx));
            memset(by, 0, sizeof(by));
            memcpy(bx, X + j, rest * sizeof(float));
            memcpy(by, Y + j, rest * sizeof(float));
            t = plait_vact(plait_vload(bx), two);
            plait_vstore(by, scale ? plait_vload(by) * t : t);
            memcpy(Y + j, by, rest * sizeof(float));
        }
    }

    /* One row of one forward step (float32): g holds the 4*nO pre-activations with each
       unit's gates adjacent (forget, input, output, candidate); h and c the carried state,
       overwritten with the new one. */
    PLAIT_CLONES static void plait_lstm_fwd_row_f(float* g, const float* bias, float* h, float* c, int nO) {
        const plait_vf k = {1.0f, 1.0f, 1.0f, 2.0f, 1.0f, 1.0f, 1.0f, 2.0f};
        /* 64-bit indices: with int ones and -fwrapv (how Python extensions build) GCC left
           these loops scalar, 4u's possible wrap-around in its way. */
        int64_t u, n = nO;
        plait_act_f(g, g, bias, 4 * nO, k);
        for (u = 0; u < n; u++) {
            c[u] = g[4 * u] * c[u] + g[4 * u + 1] * g[4 * u + 3];
            h[u] = g[4 * u + 2];
        }
        plait_tanh_f(h, c, nO, 1);
    }

    /* One row of one backward step (float32). g: the saved activated gates (interleaved),
       c: this step's cells, c_prev: the cells it read, dH: the gradient of its hiddens,
       dh_carry/dc_carry: gradients flowing back from the next step (dc_carry is replaced by
       the one for the previous step), dG: gate gradients in gate blocks, tc: nO scratch. */
    PLAIT_CLONES static void plait_lstm_bwd_row_f(const float* restrict g, const float* restrict c,
                                     const float* restrict c_prev, const float* restrict dH,
                                     const float* restrict dh_carry, float* restrict dc_carry,
                                     float* restrict dG, float* restrict tc, int nO) {
        int64_t u, n = nO;
        float f, i, o, cand, t, dh, dc;
        float* restrict dGf = dG;
        float* restrict dGi = dG + n;
        float* restrict dGo = dG + 2 * n;
        float* restrict dGc = dG + 3 * n;
        plait_tanh_f(tc, c, nO, 0);
        for (u = 0; u < n; u++) {
            f = g[4 * u];
            i = g[4 * u + 1];
            o = g[4 * u + 2];
            cand = g[4 * u + 3];
            t = tc[u];
            dh = dH[u] + dh_carry[u];
            dc = dc_carry[u] + dh * o * (1.0f - t * t);
            dGf[u] = dc * c_prev[u] * f * (1.0f - f);
            dGi[u] = dc * cand * i * (1.0f - i);
            dGo[u] = dh * t * o * (1.0f - o);
            dGc[u] = dc * i * (1.0f - cand * cand);
            dc_carry[u] = dc * f;
        }
    }

    /* Matrix products, on the calling thread: C (M, N) = op(A) (M, K) @ B (K, N), or C += it
       when acc is set; row-major, op(A) = A (M, K, rows lda apart) or, with ta, the transpose
       of A (K, M). B is row-major with rows ldb apart (bk == 0) or stored in column panels
       (bk > 0): panels of PLAIT_GEMM_PW columns, each bk rows of PW values (the last panel
       padded to PW), so that element (k, j) is at B[(j / PW) * PW * bk + k * PW + j % PW]; B
       may point at a later row of such a layout (then K < bk). The LSTM keeps its weights in
       panels, made once per pass, because its steps multiply by them again and again.

       Why: a register block reads, for each k, a short run of B's row k (and, with ta, of A's);
       with rows 4 KiB apart (a layer of 256 units) those runs all fall in the same few L1 sets
       and push each other out. Measured on an Emerald Rapids Xeon (2026-11-27, one core, the
       best of 15 alternating rounds): the input projection of widths 256 and 512 ran 1.06-1.25x
       faster with B in panels, the weight gradients (A transposed) 1.37-1.39x faster with each
       block of A (MC x KC, each MR rows' values side by side) copied once into the caller's
       scratch; copying B into panels inside every product did not pay for dX (0.93-0.94x), so
       the LSTM makes its weights' panels once per pass and reads other B operands in place.

       Measured on the 2-core development machine: as fast as single-threaded OpenBLAS on the
       LSTM's shapes, while calling a multi-threaded BLAS between the time steps made whole
       passes 2-8x slower (its idle workers spin against the step loop). Blocking: rows in
       chunks of 128 whose slice of A stays in L2, K in slices of 256 whose panel of B stays in
       L1, blocks of C in registers of MR rows x NV vectors (float32 with AVX-512: 6 x 64, 24 of
       its 32 registers, one whole row of a panel per k; measured against 8 x 32 on the LSTM's
       products of width 512 on Emerald Rapids: 1.0-1.16x, most for the steps of 4-16 rows;
       with AVX2: 6 x 16, 12 of its 16 registers, measured 1.28x faster than 4 x 16 on the LSTM
       of width 256), then 4-row blocks, and the last rows 1 x 4 vectors. NV vectors must divide
       a panel. Each entry is a sum in k order, copies or not, so results depend on nothing but
       the inputs. */
    /* One register block of C: rows [i, i + MR), columns [j, j + NV vectors) of the panel. */
    /* The k loop walks pointers (A's by AIDX##_KS values, B's by bs) rather than computing
       each k's addresses: built with -fwrapv, as Python extensions are, GCC cannot turn int
       index arithmetic into pointer steps and spent a multiply and three more instructions
       a k on it. */
    #define PLAIT_GEMM_BLOCK(NAME, T, MR, NV, AIDX)                                                \
        {                                                                                            \
            NAME##_v c[MR][NV];                                                                      \
            int q, r;                                                                                \
            const T* ak_ = &AIDX(i, 0, k0);                                                          \
            const T* bk_ = Bs + j;                                                                   \
            const int64_t ars_ = AIDX##_RS, aks_ = AIDX##_KS;                                        \
            memset(c, 0, sizeof(c));                                                                 \
            for (k = k0; k < k1; k++, ak_ += aks_, bk_ += bs) {                                      \
                NAME##_v bv[NV];                                                                     \
                for (q = 0; q < NV; q++) bv[q] = NAME##_ld(bk_ + q * NAME##_W);                       \
                for (r = 0; r < MR; r++)                                                             \
                    for (q = 0; q < NV; q++) c[r][q] += ak_[r * ars_] * bv[q];                       \
            }                                                                                        \
            for (r = 0; r < MR; r++) {                                                               \
                T* cr = C + (int64_t)(i + r) * ldc + jp + j;                                         \
                for (q = 0; q < NV; q++) {                                                           \
                    if (add) c[r][q] += NAME##_ld(cr + q * NAME##_W);                                \
                    NAME##_st(cr + q * NAME##_W, c[r][q]);                                           \
                }                                                                                    \
            }                                                                                        \
        }

    #define PLAIT_GEMM_SCALAR(T, AIDX)                                                             \
        {                                                                                            \
            T s = 0;                                                                                 \
            for (k = k0; k < k1; k++) s += AIDX(i, 0, k) * Bs[(int64_t)(k - k0) * bs + j];           \
            C[(int64_t)i * ldc + jp + j] = add ? C[(int64_t)i * ldc + jp + j] + s : s;               \
        }

    /* Rows [i0, i1) over the w columns of one panel, for one slice of K; AFULL reads A in the
       MR-row blocks, AREST in the rest. */
    #define PLAIT_GEMM_PANEL(NAME, T, VW, MR, NV, AFULL, AREST)                                        \
        for (j = 0; j + NV * VW <= w; j += NV * VW) {                                                \
            for (i = i0; i < iM; i += MR) PLAIT_GEMM_BLOCK(NAME, T, MR, NV, AFULL)                   \
            for (; i < i4; i += 4) PLAIT_GEMM_BLOCK(NAME, T, 4, NV, AREST)                           \
        }                                                                                            \
        for (; j + VW <= w; j += VW) {                                                               \
            for (i = i0; i < iM; i += MR) PLAIT_GEMM_BLOCK(NAME, T, MR, 1, AFULL)                    \
            for (; i < i4; i += 4) PLAIT_GEMM_BLOCK(NAME, T, 4, 1, AREST)                            \
        }                                                                                            \
        for (; j < w; j++)                                                                           \
            for (i = i0; i < i4; i++) PLAIT_GEMM_SCALAR(T, AREST)                                    \
        /* The chunk's last rows one at a time, with wider blocks to keep the FMA units busy. */   \
        for (i = i4; i < i1; i++) {                                                                  \
            for (j = 0; j + 4 * VW <= w; j += 4 * VW) PLAIT_GEMM_BLOCK(NAME, T, 1, 4, AREST)         \
            for (; j + VW <= w; j += VW) PLAIT_GEMM_BLOCK(NAME, T, 1, 1, AREST)                      \
            for (; j < w; j++) PLAIT_GEMM_SCALAR(T, AREST)                                           \
        }

    #define PLAIT_A_N(i, r, k) A[(int64_t)((i) + (r)) * lda + (k)]
    #define PLAIT_A_T(i, r, k) A[(int64_t)(k) * lda + (i) + (r)]
    /* How far apart each layout's values are for the next r (_RS) and the next k (_KS). */
    #define PLAIT_A_N_RS ((int64_t)lda)
    #define PLAIT_A_N_KS 1
    #define PLAIT_A_T_RS 1
    #define PLAIT_A_T_KS ((int64_t)lda)
    #define PLAIT_A_P_RS 1
    #define PLAIT_A_P_KS mr
    /* The copy of A: each block of MR rows holds, for k = k0..k1, its MR values side by side;
       blocks are astr values apart. */
    #define PLAIT_A_P(i, r, k) Ap[(int64_t)(((i) - i0) / mr) * astr + (int64_t)((k) - k0) * mr + (r)]

    /* One product kernel on VW-lane vectors, compiled with ATTR (an instruction set). VW must
       be the register width: wider vectors make GCC spill the block to memory (measured
       50x slower). */
    #define PLAIT_DEFINE_GEMM(NAME, T, VW, MR, NV, ATTR)                                               \
    typedef T NAME##_v __attribute__((vector_size(VW * sizeof(T))));                               \
    enum { NAME##_W = VW };                                                                          \
    static inline PLAIT_INLINE NAME##_v NAME##_ld(const T* p) { NAME##_v v; memcpy(&v, p, sizeof(v)); return v; } \
    static inline PLAIT_INLINE void NAME##_st(T* p, NAME##_v v) { memcpy(p, &v, sizeof(v)); }     \
    ATTR static void NAME(int ta, int M, int N, int K, const T* A, int lda, const T* B, int ldb,   \
                          int bk, T* C, int ldc, int acc, T* scratch) {                              \
        int i, j, k, k0, k1, kcb, add, i0, i1, iM, i4, jp, w, r, pack_a, kb, kend, kspan;           \
        int64_t bs, astr;                                                                            \
        const int mr = MR;                                                                           \
        const T* Bs;                                                                                 \
        const T* src;                                                                                \
        T* dst;                                                                                      \
        T* Ap = scratch;                                                                             \
        /* With A transposed, one slice of K at a time for all rows, so that a slice's rows of A */ \
        /* (and of B) are read whole, once, while they are in cache; otherwise all of K at once. */ \
        kspan = ta ? PLAIT_GEMM_KC : (K > 0 ? K : 1);                                                \
        for (kb = 0; kb == 0 || kb < K; kb += kspan) {                                               \
          kend = K - kb > kspan ? kb + kspan : K;                                                    \
          for (i0 = 0; i0 < M; i0 = i1) {                                                            \
            i1 = M - i0 > PLAIT_GEMM_MC ? i0 + PLAIT_GEMM_MC : M;                                    \
            iM = i1 - (i1 - i0) % MR;  /* rows [i0, iM) in blocks of MR, [iM, i4) of 4 */            \
            i4 = i1 - (i1 - iM) % 4;                                                                 \
            for (k0 = kb; k0 == kb || k0 < kend; k0 += PLAIT_GEMM_KC) {                              \
                k1 = kend - k0 > PLAIT_GEMM_KC ? k0 + PLAIT_GEMM_KC : kend;                          \
                kcb = k1 - k0;                                                                       \
                astr = (int64_t)kcb * MR + PLAIT_GEMM_APAD;                                          \
                add = acc || k0 > 0;                                                                 \
                /* A transposed: its MR values for one k are 4 KiB and more from the next k's. */   \
                pack_a = ta && Ap != NULL && iM - i0 >= 2 * MR;                                      \
                /* Row by row, a whole vector per block where the row has VW values left (the */   \
                /* lanes past MR land in the next k's place or the padding), the rows PLAIT_GEMM_PF */ \
                /* ahead prefetched: measured 59 -> 66 GFLOP/s for the LSTM's weight gradients */  \
                /* with AVX2 (Emerald Rapids, 4nO = 512, nI = 128, 4,319 rows). */                  \
                if (pack_a)                                                                          \
                    for (k = k0; k < k1; k++) {                                                      \
                        src = A + (int64_t)k * lda + i0;                                             \
                        dst = Ap + (int64_t)(k - k0) * MR;                                           \
                        if (k + PLAIT_GEMM_PF < k1)                                                  \
                            for (r = 0; r < (iM - i0) * (int)sizeof(T); r += 64)                     \
                                __builtin_prefetch((const char*)(src + (int64_t)PLAIT_GEMM_PF * lda) + r); \
                        for (i = i0; i < iM; i += MR, src += MR, dst += astr) {                      \
                            if (VW >= MR && i + VW <= M) NAME##_st(dst, NAME##_ld(src));             \
                            else for (r = 0; r < MR; r++) dst[r] = src[r];                           \
                        }                                                                            \
                    }                                                                                \
                for (jp = 0; jp < N; jp += PLAIT_GEMM_PW) {                                          \
                    w = N - jp > PLAIT_GEMM_PW ? PLAIT_GEMM_PW : N - jp;                             \
                    if (bk > 0) {                                                                    \
                        Bs = B + (int64_t)jp * bk + (int64_t)k0 * PLAIT_GEMM_PW;                     \
                        bs = PLAIT_GEMM_PW;                                                          \
                    } else {                                                                         \
                        Bs = B + (int64_t)k0 * ldb + jp;                                             \
                        bs = ldb;                                                                    \
                    }                                                                                \
                    if (pack_a) { PLAIT_GEMM_PANEL(NAME, T, VW, MR, NV, PLAIT_A_P, PLAIT_A_T) }      \
                    else if (ta) { PLAIT_GEMM_PANEL(NAME, T, VW, MR, NV, PLAIT_A_T, PLAIT_A_T) }     \
                    else { PLAIT_GEMM_PANEL(NAME, T, VW, MR, NV, PLAIT_A_N, PLAIT_A_N) }             \
                }                                                                                    \
                if (K == 0) break;                                                                   \
            }                                                                                        \
          }                                                                                          \
          if (K == 0) break;                                                                         \
        }                                                                                            \
    }

    #ifdef PLAIT_X86_DISPATCH
    /* Compiled for AVX-512, AVX2+FMA and baseline SSE2; picked once, from what the CPU has. */
    PLAIT_DEFINE_GEMM(plait_gemm_f_v4, float, 16, 6, 4, __attribute__((target("arch=x86-64-v4"))))
    PLAIT_DEFINE_GEMM(plait_gemm_f_v3, float, 8, 6, 2, __attribute__((target("arch=x86-64-v3"))))
    PLAIT_DEFINE_GEMM(plait_gemm_f_v1, float, 4, 4, 2, )
    PLAIT_DEFINE_GEMM(plait_gemm_d_v4, double, 8, 8, 2, __attribute__((target("arch=x86-64-v4"))))
    PLAIT_DEFINE_GEMM(plait_gemm_d_v3, double, 4, 4, 2, __attribute__((target("arch=x86-64-v3"))))
    PLAIT_DEFINE_GEMM(plait_gemm_d_v1, double, 2, 4, 2, )
    static volatile int plait_isa_detected = 0, plait_isa_forced = 0;
    static int plait_isa_level(void) {
        if (plait_isa_detected == 0) {  /* benign race: every thread computes the same value */
            __builtin_cpu_init();
            plait_isa_detected = (PLAIT_ISA_ALLOWS(4) && __builtin_cpu_supports("x86-64-v4")) ? 4
                                 : ((PLAIT_ISA_ALLOWS(3) && __builtin_cpu_supports("x86-64-v3")) ? 3 : 1);
        }
        return plait_isa_forced && plait_isa_forced < plait_isa_detected ? plait_isa_forced : plait_isa_detected;
    }
    /* For tests: run the products at a lower level than the CPU's (0: the CPU's own). */
    static int plait_gemm_isa(int force) { plait_isa_forced = force; return plait_isa_level(); }
    #define PLAIT_DISPATCH_GEMM(NAME, T)                                                           \
    static void NAME(int ta, int M, int N, int K, const T* A, int lda, const T* B, int ldb, int bk, \
                     T* C, int ldc, int acc, T* scratch) {                                          \
        int level = plait_isa_level();                                                              \
        if (level == 4) NAME##_v4(ta, M, N, K, A, lda, B, ldb, bk, C, ldc, acc, scratch);           \
        else if (level == 3) NAME##_v3(ta, M, N, K, A, lda, B, ldb, bk, C, ldc, acc, scratch);      \
        else NAME##_v1(ta, M, N, K, A, lda, B, ldb, bk, C, ldc, acc, scratch);                      \
    }
    PLAIT_DISPATCH_GEMM(plait_gemm_f, float)
    PLAIT_DISPATCH_GEMM(plait_gemm_d, double)
    #else
    /* 128-bit vectors: SSE, NEON and the like. */
    PLAIT_DEFINE_GEMM(plait_gemm_f, float, 4, 4, 2, )
    PLAIT_DEFINE_GEMM(plait_gemm_d, double, 2, 4, 2, )
    static int plait_gemm_isa(int force) { (void)force; return 0; }
    #endif

    #else
    /* Compilers without GCC/Clang vector extensions (MSVC): the same kernels, scalar, on libm. */
    #include <math.h>
    static float plait_sigmoid1(float x) { return 1.0f / (1.0f + expf(-x)); }
    static void plait_lstm_fwd_row_f(float* g, const float* bias, float* h, float* c, int nO) {
        int u;
        for (u = 0; u < nO; u++) {
            float f = plait_sigmoid1(g[4 * u] + bias[4 * u]);
            float i = plait_sigmoid1(g[4 * u + 1] + bias[4 * u + 1]);
            float o = plait_sigmoid1(g[4 * u + 2] + bias[4 * u + 2]);
            float cand = tanhf(g[4 * u + 3] + bias[4 * u + 3]);
            g[4 * u] = f; g[4 * u + 1] = i; g[4 * u + 2] = o; g[4 * u + 3] = cand;
            c[u] = f * c[u] + i * cand;
            h[u] = o * tanhf(c[u]);
        }
    }
    static void plait_lstm_bwd_row_f(const float* g, const float* c, const float* c_prev, const float* dH,
                                     const float* dh_carry, float* dc_carry, float* dG, float* tc, int nO) {
        int u;
        for (u = 0; u < nO; u++) {
            float f = g[4 * u], i = g[4 * u + 1], o = g[4 * u + 2], cand = g[4 * u + 3];
            float t = tanhf(c[u]);
            float dh = dH[u] + dh_carry[u];
            float dc = dc_carry[u] + dh * o * (1.0f - t * t);
            dG[u] = dc * c_prev[u] * f * (1.0f - f);
            dG[nO + u] = dc * cand * i * (1.0f - i);
            dG[2 * nO + u] = dh * t * o * (1.0f - o);
            dG[3 * nO + u] = dc * i * (1.0f - cand * cand);
            dc_carry[u] = dc * f;
        }
        (void)tc;
    }
    #define PLAIT_DEFINE_GEMM(NAME, T)                                                             \
    static void NAME(int ta, int M, int N, int K, const T* A, int lda, const T* B, int ldb,        \
                     int bk, T* C, int ldc, int acc, T* scratch) {                                  \
        int i, j, k;                                                                                \
        (void)scratch;                                                                              \
        for (i = 0; i < M; i++) {                                                                   \
            T* cr = C + (int64_t)i * ldc;                                                           \
            if (!acc) for (j = 0; j < N; j++) cr[j] = 0;                                            \
            for (k = 0; k < K; k++) {                                                               \
                T a = ta ? A[(int64_t)k * lda + i] : A[(int64_t)i * lda + k];                       \
                for (j = 0; j < N; j++)                                                             \
                    cr[j] += a * (bk > 0 ? B[(int64_t)(j / PLAIT_GEMM_PW) * PLAIT_GEMM_PW * bk       \
                                             + (int64_t)k * PLAIT_GEMM_PW + j % PLAIT_GEMM_PW]       \
                                         : B[(int64_t)k * ldb + j]);                                \
            }                                                                                       \
        }                                                                                           \
    }
    PLAIT_DEFINE_GEMM(plait_gemm_f, float)
    PLAIT_DEFINE_GEMM(plait_gemm_d, double)
    static int plait_gemm_isa(int force) { (void)force; return 0; }
    #endif

    /* The whole-sequence products through a BLAS (float32 only): the input projection
       X @ Wx.T forward, and backward dG.T @ X, dG.T @ Hprev and dG @ Wx. Python installs the
       row-major routine of plait.backends.cblas (the BLAS NumpyOps' products use) and holds
       that BLAS to one thread around the call, since the two directions may call it at once
       from two threads. Measured on an Emerald Rapids Xeon (bench/README.md, "The BiLSTM's
       whole-sequence products through the BLAS"): with AVX2 forced, OpenBLAS's Haswell kernel
       ran every one of them faster than plait_gemm's 6 x 16 blocks (~20% at width 512), and the
       steps' small products were as fast in either (they stay here: no BLAS call between the
       time steps); with AVX-512, NumpyOps' table (OpenBLAS from 2**28 multiply-adds, plait's
       dense kernels below) won the weight gradients (A transposed) in every shape from 2**28,
       and the others from about 2**29-2**30, losing or tying below. So the BLAS takes them all
       without AVX-512, and with it those of at least plait_lstm_v4_work[ta] multiply-adds
       (ta: 1 for the weight gradients, 0 for the others), which Python sets per processor
       where it was measured (-1 elsewhere: plait_gemm). */
    typedef void (*plait_lstm_sgemm_t)(int ta, int tb, int M, int N, int K, float alpha, const float* A,
                                       int lda, const float* B, int ldb, float beta, float* C, int ldc);
    static plait_lstm_sgemm_t plait_lstm_sgemm = NULL;
    static int64_t plait_lstm_v4_work[2] = {-1, -1};
    static void plait_lstm_set_sgemm(uintptr_t address, int64_t v4_work, int64_t v4_work_t) {
        plait_lstm_sgemm = (plait_lstm_sgemm_t)address;
        plait_lstm_v4_work[0] = v4_work;
        plait_lstm_v4_work[1] = v4_work_t;
    }
    /* The fewest multiply-adds of a whole-sequence product that goes to the BLAS now (-1: none);
       ta: the weight gradients (A transposed) rather than the others. */
    static int64_t plait_lstm_blas_min_work(int ta) {
    #if defined(PLAIT_X86_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
        int level = plait_isa_level();
        if (plait_lstm_sgemm == NULL) return -1;
        if (level == 1 || level == 3) return 0;
        if (level == 4) return plait_lstm_v4_work[ta != 0];
    #endif
        (void)ta;
        return -1;  /* other processors: plait_gemm, as measured before (no BLAS comparison yet) */
    }
    static void plait_lstm_blas_sgemm(int ta, int tb, int M, int N, int K, const float* A, int lda,
                                      const float* B, int ldb, float beta, float* C, int ldc) {
        plait_lstm_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    }
    """
    int plait_gemm_isa(int force) noexcept nogil
    int plait_lstm_omp_threads() noexcept nogil
    void plait_lstm_set_sgemm(uintptr_t address, int64_t v4_work, int64_t v4_work_t) noexcept nogil
    int64_t plait_lstm_blas_min_work(int ta) noexcept nogil
    void plait_lstm_blas_sgemm(int ta, int tb, int M, int N, int K, const float* A, int lda,
                               const float* B, int ldb, float beta, float* C, int ldc) noexcept nogil
    enum: PLAIT_GEMM_PW
    enum: PLAIT_GEMM_SCRATCH
    void plait_gemm_f(int ta, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                      int bk, float* C, int ldc, int acc, float* scratch) noexcept nogil
    void plait_gemm_d(int ta, int M, int N, int K, const double* A, int lda, const double* B, int ldb,
                      int bk, double* C, int ldc, int acc, double* scratch) noexcept nogil
    void plait_lstm_fwd_row_f(float* g, const float* bias, float* h, float* c, int nO) noexcept nogil
    void plait_lstm_bwd_row_f(const float* g, const float* c, const float* c_prev, const float* dH,
                              const float* dh_carry, float* dc_carry, float* dG, float* tc, int nO) noexcept nogil


# float64 rows use libm; float32 rows go to the vectorised C kernels above.
cdef inline floating _sigmoid(floating x) noexcept nogil:
    return 1.0 / (1.0 + exp(-x))


cdef inline void _gemm(bint ta, int M, int N, int K, const floating* A, int lda, const floating* B,
                       int ldb, int bk, floating* C, int ldc, bint acc, floating* scratch) noexcept nogil:
    """C (M, N) = op(A) @ B, or C += it with acc; op(A) is A (M, K) or, with ta, A.T for A (K, M).

    B is row-major (bk 0, rows ldb apart) or in panels of bk rows (see plait_gemm); scratch is
    NULL or PLAIT_GEMM_SCRATCH values for the copies a big product makes.
    """
    if floating is float:
        plait_gemm_f(ta, M, N, K, A, lda, B, ldb, bk, C, ldc, acc, scratch)
    else:
        plait_gemm_d(ta, M, N, K, A, lda, B, ldb, bk, C, ldc, acc, scratch)


cdef inline bint _to_blas(const int64_t* blas_min, bint ta, int M, int N, int K) noexcept nogil:
    """Whether a whole-sequence product of M x N x K goes to the BLAS (blas_min[ta]: the least
    multiply-adds that do, from plait_lstm_blas_min_work(ta); -1 for none)."""
    cdef int64_t least = blas_min[1 if ta else 0]
    return least >= 0 and M > 0 and N > 0 and K > 0 and <int64_t>M * N * K >= least


cdef inline void _whole(const int64_t* blas_min, bint ta, int M, int N, int K, const floating* A, int lda,
                        const floating* B, int ldb, floating* C, int ldc, bint acc,
                        floating* scratch) noexcept nogil:
    """A whole-sequence product with B row-major, as _gemm: through the BLAS where _to_blas says
    so (float32 only), else through plait_gemm."""
    if floating is float:
        if _to_blas(blas_min, ta, M, N, K):
            plait_lstm_blas_sgemm(ta, 0, M, N, K, A, lda, B, ldb, 1.0 if acc else 0.0, C, ldc)
            return
    _gemm(ta, M, N, K, A, lda, B, ldb, 0, C, ldc, acc, scratch)


cdef inline int64_t _panel_cols(int ncol) noexcept nogil:
    """Columns of a matrix in panels: ncol rounded up to whole panels."""
    return (<int64_t>ncol + PLAIT_GEMM_PW - 1) // PLAIT_GEMM_PW * PLAIT_GEMM_PW


cdef void _to_panels(const floating* B, int nrow, int ncol, floating* P) noexcept nogil:
    """B (nrow, ncol), row-major -> P in panels of nrow rows (the layout plait_gemm reads with bk = nrow)."""
    cdef int k, w
    cdef int jp = 0
    while jp < ncol:
        w = min(<int>PLAIT_GEMM_PW, ncol - jp)
        for k in range(nrow):
            memcpy(&P[<int64_t>jp * nrow + <int64_t>k * PLAIT_GEMM_PW], &B[<int64_t>k * ncol + jp],
                   w * sizeof(floating))
        jp += PLAIT_GEMM_PW


cdef int64_t _layer_size(int nI_l, int nO, int dirs) noexcept nogil:
    """Parameters of one layer, all directions: Wx (4nO, nI_l), bx, Wh (4nO, nO), bh each."""
    return <int64_t>dirs * 4 * nO * (nI_l + nO + 2)


cdef void _interleave_transpose(const floating* W, floating* WT, int nO, int ncol) noexcept nogil:
    """W (4nO, ncol), rows in gate blocks (gate, unit) -> WT (ncol, 4nO), columns (unit, gate),
    stored in panels of ncol rows (see plait_gemm).

    Interleaved columns put every unit's four gates side by side in the products, which is
    how the saved gates are laid out. The copy runs in tiles of one panel by 64 rows of WT,
    whose source rows and targets stay in L1 (column by column over all of W, the writes 4 KiB
    apart took 2.5 ms a pass for a layer of 256 units on an Emerald Rapids Xeon).
    """
    cdef int c, j, j0, j1, w
    cdef int four = 4 * nO
    cdef int jp = 0
    cdef const floating* row
    cdef floating* panel
    while jp < four:
        w = min(<int>PLAIT_GEMM_PW, four - jp)
        panel = WT + <int64_t>jp * ncol
        for j0 in range(0, ncol, 64):
            j1 = min(j0 + 64, ncol)
            for c in range(w):
                # Column jp + c of WT is unit (jp + c) // 4, gate (jp + c) % 4: row g*nO + u of W.
                row = W + <int64_t>(((jp + c) % 4) * nO + (jp + c) // 4) * ncol
                for j in range(j0, j1):
                    panel[<int64_t>j * PLAIT_GEMM_PW + c] = row[j]
        jp += PLAIT_GEMM_PW


cdef void _interleave_rows(const floating* W, floating* WI, int nO, int ncol) noexcept nogil:
    """W (4nO, ncol), rows in gate blocks (gate, unit) -> WI (4nO, ncol), rows (unit, gate):
    WI.T is the input projection's right operand for a BLAS, with the gates interleaved."""
    cdef int u, g
    for u in range(nO):
        for g in range(4):
            memcpy(&WI[<int64_t>(4 * u + g) * ncol], &W[<int64_t>(g * nO + u) * ncol], ncol * sizeof(floating))


cdef int64_t _fwd_work(int nI_l, int nO, int nB) noexcept nogil:
    """Work values for one direction of a forward layer: WxT and WhT in panels, the bias,
    the carried hiddens and cells, and the initial hidden state's recurrent product."""
    return _panel_cols(4 * nO) * (nI_l + nO) + 8 * nO + 2 * <int64_t>nB * nO


cdef int64_t _bwd_work(int N, int nO, int nB) noexcept nogil:
    """Work values for one direction of a backward layer: dG, Hprev, the carried gradients, a
    row of tanh(c), Wh in panels and the products' scratch."""
    return (<int64_t>N * 5 * nO + 2 * <int64_t>nB * nO + nO + _panel_cols(nO) * 4 * nO
            + PLAIT_GEMM_SCRATCH)


# --- forward -----------------------------------------------------------------------


cdef inline void _fwd_row(floating* g, const floating* bias, floating* h, floating* c, int nO) noexcept nogil:
    """One row of one step: activate the interleaved gates in place, update cell and hidden."""
    cdef int u
    cdef floating cell
    if floating is float:
        plait_lstm_fwd_row_f(g, bias, h, c, nO)
    else:
        for u in range(nO):
            g[4 * u] = _sigmoid(g[4 * u] + bias[4 * u])
            g[4 * u + 1] = _sigmoid(g[4 * u + 1] + bias[4 * u + 1])
            g[4 * u + 2] = _sigmoid(g[4 * u + 2] + bias[4 * u + 2])
            g[4 * u + 3] = tanh(g[4 * u + 3] + bias[4 * u + 3])
        for u in range(nO):
            cell = g[4 * u] * c[u] + g[4 * u + 1] * g[4 * u + 3]
            c[u] = cell
            h[u] = g[4 * u + 2] * tanh(cell)


cdef void _fwd_direction(
    int N, int nO, int nB, int nI_l, int n_steps, bint reverse,
    const int64_t* sizes, const int64_t* starts,
    const floating* inp0, int ld0, const floating* inp1, int ld1, int w0,
    const floating* W, const floating* h_init, const floating* c_init, floating* work,
    floating* G, floating* Y, floating* C, floating* out, int ldo, const int64_t* blas_min,
) noexcept nogil:
    """One layer in one direction: gates G (N, 4nO) interleaved, hiddens Y and cells C (N, nO).

    W is the layer/direction's slice of params. The input is one block (inp0, nI_l wide) or
    two side by side (inp0 w0 wide, inp1 the rest: the directions of the layer below). C and
    out (the stack's output, row stride ldo) may be NULL. work: _fwd_work(nI_l, nO, nB) values.
    blas_min: the input projection through the BLAS if it is that big (see _to_blas).
    """
    cdef int four = 4 * nO
    cdef int k, j, u, g, b, live, q
    cdef int hrow_state = 0
    cdef int64_t t, s
    cdef const floating* bx = W + <int64_t>four * nI_l
    cdef const floating* Wh = bx + four
    cdef const floating* bh = Wh + <int64_t>four * nO
    cdef floating* WxT = work  # (nI_l, 4nO) and (nO, 4nO), in panels
    cdef floating* WhT = WxT + _panel_cols(four) * nI_l
    cdef floating* bias = WhT + _panel_cols(four) * nO
    cdef floating* hcar = bias + four
    cdef floating* ccar = hcar + <int64_t>nB * nO
    cdef floating* hrow = ccar + <int64_t>nB * nO  # h_init @ WhT (4nO), made when first needed
    _interleave_transpose(Wh, WhT, nO, nO)
    for u in range(nO):
        for g in range(4):
            bias[u * 4 + g] = bx[g * nO + u] + bh[g * nO + u]
    if floating is float and _to_blas(blas_min, False, N, four, nI_l):
        # WxT's space holds Wx with its rows interleaved instead (4nO x nI_l <= its panels).
        _interleave_rows(W, WxT, nO, nI_l)
        plait_lstm_blas_sgemm(False, True, N, four, w0, inp0, ld0, WxT, nI_l, 0, G, four)
        if inp1 != NULL:
            plait_lstm_blas_sgemm(False, True, N, four, nI_l - w0, inp1, ld1, WxT + w0, nI_l, 1, G, four)
    else:
        _interleave_transpose(W, WxT, nO, nI_l)
        _gemm(False, N, four, w0, inp0, ld0, WxT, 0, nI_l, G, four, False, NULL)
        if inp1 != NULL:
            _gemm(False, N, four, nI_l - w0, inp1, ld1, WxT + <int64_t>w0 * PLAIT_GEMM_PW, 0, nI_l, G, four,
                  True, NULL)
    # The carried state keeps the first step's width: right to left the batch grows, and
    # rows that have not started yet must still hold the initial state.
    for j in range(nB):
        memcpy(&hcar[<int64_t>j * nO], h_init, nO * sizeof(floating))
        memcpy(&ccar[<int64_t>j * nO], c_init, nO * sizeof(floating))
    for k in range(n_steps):
        t = (n_steps - 1 - k) if reverse else k
        b = <int>sizes[t]
        s = starts[t]
        # Rows from `live` on still carry the initial state (all of them at the first step;
        # right to left, the sentences that start here): their recurrent term is one row,
        # h_init @ WhT, made once and added (nothing to add where it is all zeros, as it is
        # for the layer's zero initial state; a NaN or inf it makes is added like any value).
        live = 0 if k == 0 else min(b, <int>sizes[(n_steps - k) if reverse else (k - 1)])
        if live > 0:
            _gemm(False, live, four, nO, hcar, nO, WhT, 0, nO, &G[s * four], four, True, NULL)
        if live < b:
            if hrow_state == 0:
                _gemm(False, 1, four, nO, h_init, nO, WhT, 0, nO, hrow, four, False, NULL)
                hrow_state = 1
                for q in range(four):
                    if hrow[q] != 0:
                        hrow_state = 2
                        break
            if hrow_state == 2:
                for j in range(live, b):
                    for q in range(four):
                        G[(s + j) * four + q] += hrow[q]
        for j in range(b):
            _fwd_row(&G[(s + j) * four], bias, &hcar[<int64_t>j * nO], &ccar[<int64_t>j * nO], nO)
        memcpy(&Y[s * nO], hcar, <int64_t>b * nO * sizeof(floating))
        if C != NULL:
            memcpy(&C[s * nO], ccar, <int64_t>b * nO * sizeof(floating))
        if out != NULL:
            for j in range(b):
                memcpy(&out[(s + j) * ldo], &hcar[<int64_t>j * nO], nO * sizeof(floating))


cdef void _fwd_stack(
    const floating* params, const floating* cell_init, const floating* hidden_init,
    const floating* X, int N, int nI, int depth, int dirs, int nO, int nB,
    int n_steps, const int64_t* sizes, const int64_t* starts,
    floating* Y4, floating* G4, floating* C4, bint keep_state, floating* work, int64_t n_work,
    floating* out, bint par, const int64_t* blas_min,
) noexcept nogil:
    """All layers and directions. Training fills Y4/G4/C4 (depth, dirs, N, *); inference
    uses Y4 (2, dirs, N, nO) and G4 (1, dirs, N, 4nO) as scratch and C4 not at all."""
    cdef int i, d, nI_l, ld0, w0, slot, y_slot
    cdef int64_t offset = 0
    cdef int64_t plane = <int64_t>N * nO
    cdef const floating* inp0
    cdef const floating* inp1
    cdef const floating* prev = NULL
    for i in range(depth):
        nI_l = nI if i == 0 else dirs * nO
        # Above the first layer the input is the layer below's hiddens, one block per direction.
        inp0 = X if i == 0 else prev
        ld0 = nI if i == 0 else nO
        w0 = ld0
        inp1 = (prev + plane) if (i > 0 and dirs == 2) else NULL
        y_slot = i if keep_state else i % 2
        slot = i if keep_state else 0
        for d in prange(dirs, num_threads=2 if (par and dirs == 2) else 1, schedule="static"):
            _fwd_direction(
                N, nO, nB, nI_l, n_steps, d == 1, sizes, starts, inp0, ld0, inp1, nO, w0,
                params + offset + d * (_layer_size(nI_l, nO, 1)),
                hidden_init + (i * dirs + d) * nO, cell_init + (i * dirs + d) * nO, work + d * n_work,
                G4 + (<int64_t>slot * dirs + d) * plane * 4,
                Y4 + (<int64_t>y_slot * dirs + d) * plane,
                (C4 + (<int64_t>slot * dirs + d) * plane) if keep_state else NULL,
                (out + d * nO) if i == depth - 1 else NULL, dirs * nO, blas_min,
            )
        offset += _layer_size(nI_l, nO, dirs)
        prev = Y4 + <int64_t>y_slot * dirs * plane


# --- backward ----------------------------------------------------------------------


cdef inline void _bwd_row(
    const floating* g, const floating* c, const floating* c_prev, const floating* dH,
    floating* dh_carry, floating* dc_carry, floating* dG, floating* tc_buf, int nO,
) noexcept nogil:
    """One row of one step: gate gradients dG (4 blocks of nO) and the carried cell gradient."""
    cdef int u
    cdef floating f, i, o, cand, tc, dh, dc
    if floating is float:
        plait_lstm_bwd_row_f(g, c, c_prev, dH, dh_carry, dc_carry, dG, tc_buf, nO)
    else:
        for u in range(nO):
            f = g[4 * u]
            i = g[4 * u + 1]
            o = g[4 * u + 2]
            cand = g[4 * u + 3]
            tc = tanh(c[u])
            dh = dH[u] + dh_carry[u]
            dc = dc_carry[u] + dh * o * (1 - tc * tc)
            dG[u] = dc * c_prev[u] * f * (1 - f)
            dG[nO + u] = dc * cand * i * (1 - i)
            dG[2 * nO + u] = dh * tc * o * (1 - o)
            dG[3 * nO + u] = dc * i * (1 - cand * cand)
            dc_carry[u] = dc * f


cdef int64_t _zero_rows_prefix(const floating* h_init, int nO, const floating* dG, int64_t n) noexcept nogil:
    """The rows (of 4nO gate gradients, n values in all) that dWh = dG.T @ Hprev may skip at its
    start because their Hprev row is h_init and h_init is all zeros: n / 4nO, or 0 where h_init
    has a nonzero value or those gradients a NaN or inf."""
    cdef int u
    cdef int64_t i
    for u in range(nO):
        if h_init[u] != 0:
            return 0
    for i in range(n):
        if dG[i] - dG[i] != 0:  # NaN or inf
            return 0
    return n // (4 * nO)


cdef void _bwd_direction(
    int N, int nO, int nB, int nI_l, int n_steps, bint reverse,
    const int64_t* sizes, const int64_t* starts,
    const floating* G, const floating* C, const floating* Y,
    const floating* h_init, const floating* c_init, const floating* dH, int ldh,
    const floating* inp0, int ld0, const floating* inp1, int ld1, int w0,
    const floating* W, floating* dW, floating* dXin, bint accumulate, floating* work, double* acc,
    const int64_t* blas_min,
) noexcept nogil:
    """Backprop one layer/direction: its slice dW of d_params, and dXin (N, nI_l) += or =.

    W/dW: the layer/direction's slices of params and d_params; dH (row stride ldh) the
    gradient of its hiddens. work: _bwd_work(N, nO, nB) values; acc: 4nO doubles. blas_min:
    which whole-sequence products go through the BLAS (see _to_blas).
    """
    cdef int four = 4 * nO
    cdef int k, j, b, bp, q
    cdef int64_t t, p, s, r, k0
    cdef const floating* Wh = W + <int64_t>four * (nI_l + 1)
    cdef floating* dbx = dW + <int64_t>four * nI_l
    cdef floating* dWh = dbx + four
    cdef floating* dbh = dWh + <int64_t>four * nO
    cdef floating* dG = work  # (N, 4nO), the gates in blocks like W's rows
    cdef floating* Hprev = dG + <int64_t>N * four  # (N, nO): the hidden state each row read
    cdef floating* dh_carry = Hprev + <int64_t>N * nO
    cdef floating* dc_carry = dh_carry + <int64_t>nB * nO
    cdef floating* tc_buf = dc_carry + <int64_t>nB * nO
    cdef floating* WhP = tc_buf + nO  # Wh (4nO, nO) in panels, for the steps' products
    cdef floating* scratch = WhP + _panel_cols(nO) * four
    _to_panels(Wh, four, nO, WhP)
    memset(dh_carry, 0, <int64_t>nB * nO * sizeof(floating))
    memset(dc_carry, 0, <int64_t>nB * nO * sizeof(floating))
    # Steps in the reverse of the order the forward pass ran them; p is the step before.
    for k in range(n_steps - 1, -1, -1):
        t = (n_steps - 1 - k) if reverse else k
        p = -1 if k == 0 else ((n_steps - k) if reverse else k - 1)
        b = <int>sizes[t]
        s = starts[t]
        bp = <int>sizes[p] if p >= 0 else 0
        # Rows past the previous step's width read the initial state. Gradients carried
        # into rows that had already ended stay zero, as they must.
        for j in range(b):
            memcpy(&Hprev[(s + j) * nO], (&Y[(starts[p] + j) * nO]) if j < bp else h_init,
                   nO * sizeof(floating))
            _bwd_row(&G[(s + j) * four], &C[(s + j) * nO],
                     (&C[(starts[p] + j) * nO]) if j < bp else c_init, &dH[(s + j) * ldh],
                     &dh_carry[<int64_t>j * nO], &dc_carry[<int64_t>j * nO], &dG[(s + j) * four], tc_buf, nO)
        # The hidden gradient only for the rows whose previous step exists: the others read
        # the initial state, which is not trained, and no later step reads their rows.
        if min(b, bp) > 0:
            _gemm(False, min(b, bp), nO, four, &dG[s * four], four, WhP, 0, four, dh_carry, nO, False, NULL)
    # The bias gradient is summed in double, row after row: exact enough, and fixed order.
    for q in range(four):
        acc[q] = 0
    for r in range(N):
        for q in range(four):
            acc[q] += dG[r * four + q]
    for q in range(four):
        dbx[q] = <floating>acc[q]
        dbh[q] = <floating>acc[q]
    _whole(blas_min, True, four, w0, N, dG, four, inp0, ld0, dW, nI_l, False, scratch)
    if inp1 != NULL:
        _whole(blas_min, True, four, nI_l - w0, N, dG, four, inp1, ld1, dW + w0, nI_l, False, scratch)
    # Left to right, the first step's rows (0 .. sizes[0]-1) all read h_init: where it is all
    # zeros, their part of dWh is zeros too, and the product skips them (unless a gradient
    # there is NaN or inf, which must reach dWh as it would through the product).
    k0 = 0 if reverse else _zero_rows_prefix(h_init, nO, dG, <int64_t>sizes[0] * four)
    if k0 < N:
        _whole(blas_min, True, four, nO, <int>(N - k0), dG + k0 * four, four, Hprev + k0 * nO, nO, dWh, nO,
               False, scratch)
    else:
        memset(dWh, 0, <int64_t>four * nO * sizeof(floating))
    _whole(blas_min, False, N, nI_l, four, dG, four, W, nI_l, dXin, nI_l, accumulate, NULL)


cdef void _bwd_stack(
    const floating* params, const floating* cell_init, const floating* hidden_init,
    const floating* X, int N, int nI, int depth, int dirs, int nO, int nB,
    int n_steps, const int64_t* sizes, const int64_t* starts,
    const floating* Y4, const floating* G4, const floating* C4, const floating* dY,
    floating* d_params, floating* dX, floating* dXbuf, floating* dX1, floating* work, int64_t n_work,
    double* acc, bint par, const int64_t* blas_min,
) noexcept nogil:
    """Top layer down; dXbuf holds two (N, dirs*nO) gradients of the layers' inputs, alternately."""
    cdef int i, d, nI_l, ldh, ld0, w0
    cdef int64_t offset, r, plane = <int64_t>N * nO
    cdef const floating* inp0
    cdef const floating* inp1
    cdef const floating* dH = dY
    cdef floating* dXin
    ldh = dirs * nO
    for i in range(depth - 1, -1, -1):
        nI_l = nI if i == 0 else dirs * nO
        offset = 0 if i == 0 else _layer_size(nI, nO, dirs) + (i - 1) * _layer_size(dirs * nO, nO, dirs)
        if i == 0:
            inp0 = X
            ld0 = nI
            inp1 = NULL
            dXin = dX
        else:
            inp0 = Y4 + <int64_t>(i - 1) * dirs * plane
            ld0 = nO
            inp1 = (inp0 + plane) if dirs == 2 else NULL
            dXin = dXbuf + (i % 2) * <int64_t>dirs * plane
        w0 = ld0
        for d in prange(dirs, num_threads=2 if (par and dirs == 2) else 1, schedule="static"):
            _bwd_direction(
                N, nO, nB, nI_l, n_steps, d == 1, sizes, starts,
                G4 + (<int64_t>i * dirs + d) * plane * 4, C4 + (<int64_t>i * dirs + d) * plane,
                Y4 + (<int64_t>i * dirs + d) * plane,
                hidden_init + (i * dirs + d) * nO, cell_init + (i * dirs + d) * nO,
                dH + d * nO, ldh, inp0, ld0, inp1, nO, w0,
                params + offset + d * _layer_size(nI_l, nO, 1), d_params + offset + d * _layer_size(nI_l, nO, 1),
                dXin if d == 0 else dX1, False, work + d * n_work, acc + d * 4 * nO, blas_min,
            )
        # The directions' input gradients are summed after both, the same with 1 or 2 threads.
        if dirs == 2:
            for r in range(<int64_t>N * nI_l):
                dXin[r] += dX1[r]
        dH = dXin
        ldh = nI_l


# --- activations -------------------------------------------------------------------


cdef void _dsigmoid(const floating* Y, floating* out, int64_t n) noexcept nogil:
    cdef int64_t j
    for j in range(n):
        out[j] = Y[j] * (<floating>1 - Y[j])


cdef void _dtanh(const floating* Y, floating* out, int64_t n) noexcept nogil:
    cdef int64_t j
    for j in range(n):
        out[j] = <floating>1 - Y[j] * Y[j]


# --- Python entry points -----------------------------------------------------------


# NOTE: the inputs are const memoryviews, so read-only arrays (which the reference takes) are
# accepted too; a plain typed memoryview refuses them ("buffer source array is read-only").
def _forward_impl(const floating[::1] params, const floating[:, :, ::1] H0, const floating[:, :, ::1] C0,
                  const floating[:, ::1] X, const int64_t[::1] sizes, const int64_t[::1] starts,
                  bint keep_state, bint par):
    cdef int N = X.shape[0], nI = X.shape[1]
    cdef int depth = H0.shape[0], dirs = H0.shape[1], nO = H0.shape[2]
    cdef int nB = <int>sizes[0] if sizes.shape[0] > 0 else 0
    cdef int64_t blas_min[2]
    blas_min[0] = plait_lstm_blas_min_work(0) if floating is float else -1
    blas_min[1] = plait_lstm_blas_min_work(1) if floating is float else -1
    cdef int n_steps = <int>numpy.count_nonzero(sizes)  # zero-size steps can only trail
    dtype = numpy.float32 if floating is float else numpy.float64
    if keep_state:
        Y4_arr = numpy.empty((depth, dirs, N, nO), dtype=dtype)
        G4_arr = numpy.empty((depth, dirs, N, 4 * nO), dtype=dtype)
        C4_arr = numpy.empty((depth, dirs, N, nO), dtype=dtype)
    else:
        Y4_arr = numpy.empty((2, dirs, N, nO), dtype=dtype)
        G4_arr = numpy.empty((1, dirs, N, 4 * nO), dtype=dtype)
        C4_arr = numpy.empty((1, 1, 1, 1), dtype=dtype)
    out_arr = numpy.empty((N, dirs * nO), dtype=dtype)
    if N == 0:
        return out_arr, Y4_arr, G4_arr, C4_arr
    cdef int64_t n_work = _fwd_work(max(nI, dirs * nO), nO, nB)
    work_arr = numpy.empty((dirs * n_work,), dtype=dtype)
    cdef floating[:, :, :, ::1] Y4 = Y4_arr
    cdef floating[:, :, :, ::1] G4 = G4_arr
    cdef floating[:, :, :, ::1] C4 = C4_arr
    cdef floating[:, ::1] out = out_arr
    cdef floating[::1] work = work_arr
    with nogil:
        _fwd_stack(&params[0], &H0[0, 0, 0], &C0[0, 0, 0], &X[0, 0], N, nI, depth, dirs, nO, nB,
                   n_steps, &sizes[0], &starts[0], &Y4[0, 0, 0, 0], &G4[0, 0, 0, 0], &C4[0, 0, 0, 0],
                   keep_state, &work[0], n_work, &out[0, 0], par, &blas_min[0])
    return out_arr, Y4_arr, G4_arr, C4_arr


def _split_directions(H0, X) -> bool:
    """Whether a bidirectional stack runs its two directions on two threads.

    Measured on 2 idle cores: 1.9-2.0x faster, the same CPU time, from about 2M
    multiply-adds per direction and layer; below that, waking the second thread costs more.
    """
    depth, dirs, nO = H0.shape
    N, nI = X.shape
    return dirs == 2 and plait_lstm_omp_threads() > 1 and N * 4 * nO * (max(nI, 2 * nO) + nO) >= (1 << 21)


def lstm_forward(params, H0, C0, X, sizes, starts, bint keep_state, par=None):
    """Forward pass of the stack; returns (Y (N, dirs*nO), Y4, G4, C4).

    H0 holds the initial cells and C0 the initial hiddens (Thinc's order); the float arrays
    are C-contiguous and of one dtype (unchecked: the caller validates), sizes and starts
    int64 with sizes non-increasing and summing to N. Y4/G4/C4 are the state for
    lstm_backward when keep_state is set, scratch otherwise. par: the two directions on two
    threads (None: see _split_directions; either way the results are the same).
    """
    par = _split_directions(H0, X) if par is None else par
    return _forward_impl(params, H0, C0, X, sizes, starts, keep_state, bool(par))


def _backward_impl(const floating[:, ::1] dY, const floating[::1] params, const floating[:, :, ::1] H0,
                   const floating[:, :, ::1] C0, const floating[:, ::1] X, const floating[:, :, :, ::1] Y4,
                   const floating[:, :, :, ::1] G4, const floating[:, :, :, ::1] C4, const int64_t[::1] sizes,
                   const int64_t[::1] starts, bint par):
    cdef int N = X.shape[0], nI = X.shape[1]
    cdef int depth = H0.shape[0], dirs = H0.shape[1], nO = H0.shape[2]
    cdef int nB = <int>sizes[0] if sizes.shape[0] > 0 else 0
    cdef int64_t blas_min[2]
    blas_min[0] = plait_lstm_blas_min_work(0) if floating is float else -1
    blas_min[1] = plait_lstm_blas_min_work(1) if floating is float else -1
    cdef int n_steps = <int>numpy.count_nonzero(sizes)
    dtype = numpy.float32 if floating is float else numpy.float64
    if N == 0:
        return numpy.zeros((N, nI), dtype=dtype), numpy.zeros((params.shape[0],), dtype=dtype)
    # Every layer and direction writes all of its slice (weights, biases; not accumulated):
    # numpy.empty reuses freed memory where numpy.zeros maps fresh pages, which the BLAS's
    # first product would then clear and fill again.
    d_params_arr = numpy.empty((params.shape[0],), dtype=dtype)
    # Every row is written (the first layer's input product, not accumulated), so no zeros:
    # from numpy.empty a large dX reuses a freed block (block_cache) instead of fresh pages.
    dX_arr = numpy.empty((N, nI), dtype=dtype)
    cdef int64_t n_work = _bwd_work(N, nO, nB)
    work_arr = numpy.empty((dirs * n_work,), dtype=dtype)
    dXbuf_arr = numpy.empty((2 * N * dirs * nO if depth > 1 else 1,), dtype=dtype)
    dX1_arr = numpy.empty((N * max(nI, dirs * nO) if dirs == 2 else 1,), dtype=dtype)
    acc_arr = numpy.empty((dirs * 4 * nO,), dtype=numpy.float64)
    cdef floating[::1] d_params = d_params_arr
    cdef floating[:, ::1] dX = dX_arr
    cdef floating[::1] work = work_arr
    cdef floating[::1] dXbuf = dXbuf_arr
    cdef floating[::1] dX1 = dX1_arr
    cdef double[::1] acc = acc_arr
    with nogil:
        _bwd_stack(&params[0], &H0[0, 0, 0], &C0[0, 0, 0], &X[0, 0], N, nI, depth, dirs, nO, nB,
                   n_steps, &sizes[0], &starts[0], &Y4[0, 0, 0, 0], &G4[0, 0, 0, 0], &C4[0, 0, 0, 0],
                   &dY[0, 0], &d_params[0], &dX[0, 0], &dXbuf[0], &dX1[0], &work[0], n_work, &acc[0], par,
                   &blas_min[0])
    return dX_arr, d_params_arr


def lstm_backward(dY, params, H0, C0, X, Y4, G4, C4, sizes, starts, par=None):
    """Gradients of `lstm_forward` with keep_state: (dX (N, nI), d_params (P,)).

    The same conventions as lstm_forward; dY (N, dirs*nO) is not modified.
    """
    par = _split_directions(H0, X) if par is None else par
    return _backward_impl(dY, params, H0, C0, X, Y4, G4, C4, sizes, starts, bool(par))


def set_blas_sgemm(uintptr_t address, int64_t avx512_work=-1, avx512_work_t=None):
    """Install the row-major float32 routine for the whole-sequence products (0: none), with
    plait.backends.cblas's signature (transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C,
    ldc). Without AVX-512 it takes all of them; with AVX-512 those of at least `avx512_work`
    multiply-adds, and the weight gradients (A transposed) from `avx512_work_t` (None: the
    same; -1: none). The caller holds its BLAS to one thread while the kernels run."""
    plait_lstm_set_sgemm(address, avx512_work, avx512_work if avx512_work_t is None else avx512_work_t)


def blas_min_work(bint weight_gradients=False) -> int:
    """The fewest multiply-adds of a float32 whole-sequence product that goes through the
    installed BLAS right now (0: every one; -1: none): of the weight gradients (A transposed)
    or of the input projection and the input gradient."""
    return plait_lstm_blas_min_work(weight_gradients)


def blas_products() -> bool:
    """Whether any float32 whole-sequence product may go through the installed BLAS right now."""
    return plait_lstm_blas_min_work(0) >= 0 or plait_lstm_blas_min_work(1) >= 0


def _gemm_isa(int force=0) -> int:
    """For tests: cap the instruction set of the products (x86-64-v4 = 4, v3 = 3, baseline = 1;
    0 = the CPU's best) and return the level now in use (0 where there is no choice)."""
    return plait_gemm_isa(force)


def _product(bint ta, const floating[:, ::1] A, const floating[:, ::1] B, floating[:, ::1] C, bint acc,
             bint panels, bint scratch):
    """For tests: the LSTM's product kernel, C = op(A) @ B (C += it with acc) in place, with B
    copied into panels first or read as it is, and with or without scratch for the copies of A."""
    cdef int M = C.shape[0], N = C.shape[1], K = B.shape[0]
    if B.shape[1] != N or (A.shape[1] if ta else A.shape[0]) != M or (A.shape[0] if ta else A.shape[1]) != K:
        raise ValueError(f"shapes do not match: A {tuple(A.shape)} (ta={ta}), B {tuple(B.shape)}, C {tuple(C.shape)}")
    dtype = numpy.float32 if floating is float else numpy.float64
    Bp_arr = numpy.zeros((max(1, K * _panel_cols(N)),), dtype=dtype)
    scratch_arr = numpy.zeros((PLAIT_GEMM_SCRATCH if scratch else 1,), dtype=dtype)
    cdef floating[::1] Bp = Bp_arr
    cdef floating[::1] work = scratch_arr
    # Empty operands are never read; Bp stands in for them so that no pointer is NULL.
    cdef const floating* Aptr = &A[0, 0] if A.shape[0] * A.shape[1] > 0 else &Bp[0]
    cdef const floating* Bptr = &B[0, 0] if K * N > 0 else &Bp[0]
    if M == 0 or N == 0:
        return
    with nogil:
        if panels and K > 0:
            _to_panels(Bptr, K, N, &Bp[0])
            Bptr = &Bp[0]
        _gemm(ta, M, N, K, Aptr, A.shape[1], Bptr, N, K if panels else 0, &C[0, 0], N, acc,
              &work[0] if scratch else NULL)


def dsigmoid(const floating[::1] Y, floating[::1] out):
    """out = Y * (1 - Y); out may be Y."""
    with nogil:
        if Y.shape[0] > 0:
            _dsigmoid(&Y[0], &out[0], Y.shape[0])


def dtanh(const floating[::1] Y, floating[::1] out):
    """out = 1 - Y**2; out may be Y."""
    with nogil:
        if Y.shape[0] > 0:
            _dtanh(&Y[0], &out[0], Y.shape[0])
