# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""2-D convolution as blocked matrix products whose operands are packed straight from the images:
the three products of a convolution (forward, data gradient, filter gradient) for NumpyOps.

Per image and group, with K = Cg * kh * kw window cells and P = oh * ow output positions:

* forward: Y_n (Og, P) = W (Og, K) @ col_n (K, P) + b
* data gradient: dX_n = col2im(W.T (K, Og) @ dY_n (Og, P))
* filter gradient: dW (Og, K) = sum over n of dY_n (Og, P) @ col_n.T (P, K)

col_n is never built for the whole batch: one image's windows are copied into a buffer that
stays in cache (the im2col of _kernels_cpu/conv.pyx, rows padded to whole vectors) and read
there by a register-blocked kernel (GCC vector extensions; compiled for AVX-512, AVX2+FMA and
the baseline, picked at run time from what the CPU has). The filter gradient contracts over the
output positions of a group of images at a time, with partial sums in vector registers.

Sums are taken in another order than the reference's (numpy.matmul, then col2im and + b), so
results equal it to rounding, not bit for bit; the order is fixed by the shapes alone, never by
the thread count: images are independent in the forward and data-gradient products, and each
filter-gradient entry is one thread's sum over the image groups, in batch order.

Entry points take float32/float64 arrays of one dtype (made C-contiguous here) and return None
outside their case (other ranks or dtypes, sizes past 32-bit ints, processors without AVX2); the
mixin (plait.backends._numpy_conv) then runs the Ops reference. Also here: the bias gradient
(a sum per channel) on vectors.

Measured on LeNet's layers (Zen 5, 1 thread, batch 100), AVX-512 / AVX2 build vs the reference
on numpy's OpenBLAS (AVX2 kernels): 20->50 channels, 5x5, 12x12 images: forward 1.7 / 3.4 vs
4.8 ms, data gradient 1.8 / 2.9 vs 4.7 ms, filter gradient 2.1 / 4.1 vs 5.2 ms.
"""
cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport int64_t

import numpy

cnp.import_array()

cdef extern from *:
    """
    #include <stdint.h>
    #include <stdlib.h>
    #include <string.h>
    #ifdef _OPENMP
    #include <omp.h>
    static int pcg_threads(void) { return omp_get_max_threads(); }
    #else
    static int pcg_threads(void) { return 1; }
    #endif

    #include "plait_isa.h"
    #if PLAIT_ISA_LEVEL > 0
    #define PCG_X86_DISPATCH 1
    #endif
    #if defined(__GNUC__)
    #define PCG_INLINE inline __attribute__((always_inline))
    #else
    #define PCG_INLINE inline
    #endif

    /* One convolution's geometry (per group: C channels in, O out). */
    typedef struct {
        int64_t nB, G, C, O, H, W, kh, kw, sy, sx, ph, pw, dy, dx, oh, ow;
    } pcg_geom;

    static int64_t pcg_roundup(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

    /* The windows of one image's C channels (x: C planes of H x W) for window rows [r0, r1)
       (row r = (c * kh + ky) * kw + kx): row r goes to col + (r - r0) * ld, the oh * ow output
       positions first, then zeros up to P_pad. Cells outside the image read as 0. */
    #define PCG_DEFINE_PACK(NAME, T, ATTR)                                                       \
    /* n values: whole 64/32/16-byte moves (inlined), then one by one. */                      \
    static PCG_INLINE void NAME##_copy(T* dst, const T* src, int64_t n) {                       \
        for (; n * (int64_t)sizeof(T) >= 64; n -= 64 / sizeof(T), dst += 64 / sizeof(T), src += 64 / sizeof(T)) \
            memcpy(dst, src, 64);                                                                \
        if (n * sizeof(T) >= 32) { memcpy(dst, src, 32); n -= 32 / sizeof(T); dst += 32 / sizeof(T); src += 32 / sizeof(T); } \
        if (n * sizeof(T) >= 16) { memcpy(dst, src, 16); n -= 16 / sizeof(T); dst += 16 / sizeof(T); src += 16 / sizeof(T); } \
        for (; n > 0; n--) *dst++ = *src++;                                                      \
    }                                                                                            \
    ATTR static void NAME##_pack(const T* x, T* col, int64_t ld, int64_t P_pad, int64_t r0,      \
                                 int64_t r1, const pcg_geom* g) {                                \
        const int64_t H = g->H, W = g->W, oh = g->oh, ow = g->ow, K2 = g->kh * g->kw;            \
        const int64_t sy = g->sy, sx = g->sx;                                                    \
        int64_t r, oy, ox;                                                                       \
        /* (c, ky, kx) of row r0, then counted up: no division per row. */                      \
        int64_t c = r0 / K2, ky = (r0 % K2) / g->kw, kx = r0 % g->kw;                            \
        for (r = r0; r < r1; r++) {                                                              \
            const T* plane = x + c * H * W;                                                      \
            T* dst = col + (r - r0) * ld;                                                        \
            const int64_t ix0 = kx * g->dx - g->pw, iy0 = ky * g->dy - g->ph;                    \
            /* Output columns [lo, hi) read inside the image (stride 1: one run per row). */    \
            int64_t lo = 0, hi = ow;                                                             \
            if (sx == 1) {                                                                       \
                lo = ix0 < 0 ? -ix0 : 0;                                                         \
                hi = W - ix0 < ow ? W - ix0 : ow;                                                \
                if (hi < lo) hi = lo;                                                            \
                if (lo > ow) lo = hi = ow;                                                       \
            }                                                                                    \
            /* Output rows [oy_lo, oy_hi) read inside the image; the others are padding. */     \
            int64_t oy_lo = iy0 < 0 ? (-iy0 + sy - 1) / sy : 0;                                  \
            int64_t oy_hi = H - iy0 <= 0 ? 0 : (H - iy0 + sy - 1) / sy;                          \
            if (oy_hi > oh) oy_hi = oh;                                                          \
            if (oy_lo > oy_hi) oy_lo = oy_hi;                                                    \
            if (oy_lo) memset(dst, 0, oy_lo * ow * sizeof(T));                                   \
            if (oy_hi < oh) memset(dst + oy_hi * ow, 0, (oh - oy_hi) * ow * sizeof(T));          \
            const T* src = plane + (oy_lo * sy + iy0) * W + ix0;                                 \
            if (sx == 1 && lo == 0 && hi == ow && ow % (32 / sizeof(T)) == 0) {                  \
                /* Whole rows of 32-byte pieces (the common case): nothing else per row. */     \
                for (oy = oy_lo; oy < oy_hi; oy++, src += sy * W) {                              \
                    T* d = dst + oy * ow;                                                        \
                    for (ox = 0; ox < ow; ox += 32 / sizeof(T)) memcpy(d + ox, src + ox, 32);    \
                }                                                                                \
            } else if (sx == 1) {                                                                \
                for (oy = oy_lo; oy < oy_hi; oy++, src += sy * W) {                              \
                    T* d = dst + oy * ow;                                                        \
                    for (ox = 0; ox < lo; ox++) d[ox] = 0;                                       \
                    NAME##_copy(d + lo, src + lo, hi - lo);                                      \
                    for (ox = hi; ox < ow; ox++) d[ox] = 0;                                      \
                }                                                                                \
            } else {                                                                             \
                for (oy = oy_lo; oy < oy_hi; oy++, src += sy * W) {                              \
                    T* d = dst + oy * ow;                                                        \
                    for (ox = 0; ox < ow; ox++) {                                                \
                        const int64_t ix = ox * sx + ix0;                                        \
                        d[ox] = (ix >= 0 && ix < W) ? src[ox * sx] : (T)0;                       \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
            for (ox = oh * ow; ox < P_pad; ox++) col[(r - r0) * ld + ox] = 0;                    \
            if (++kx == g->kw) { kx = 0; if (++ky == g->kh) { ky = 0; c++; } }                  \
        }                                                                                        \
    }

    #define PCG_DEFINE_UNPACK(NAME, T, ATTR)                                                     \
    typedef T NAME##_h __attribute__((vector_size(32)));                                         \
    ATTR static void NAME##_unpack(const T* col, int64_t ld, T* x, const pcg_geom* g) {         \
        const int64_t H = g->H, W = g->W, oh = g->oh, ow = g->ow, kh = g->kh, kw = g->kw;       \
        int64_t c, ky, kx, oy, ox;                                                               \
        memset(x, 0, g->C * H * W * sizeof(T));                                                  \
        for (c = 0; c < g->C; c++) {                                                             \
            T* plane = x + c * H * W;                                                            \
            for (ky = 0; ky < kh; ky++)                                                          \
                for (kx = 0; kx < kw; kx++) {                                                    \
                    const T* src = col + ((c * kh + ky) * kw + kx) * ld;                         \
                    const int64_t ix0 = kx * g->dx - g->pw;                                      \
                    int64_t lo = 0, hi = ow;                                                     \
                    if (g->sx == 1) {                                                            \
                        lo = ix0 < 0 ? -ix0 : 0;                                                 \
                        hi = W - ix0 < ow ? W - ix0 : ow;                                        \
                        if (lo > ow) lo = ow;                                                    \
                    }                                                                            \
                    const int64_t iy0 = ky * g->dy - g->ph, sy = g->sy;                          \
                    int64_t oy_lo = iy0 < 0 ? (-iy0 + sy - 1) / sy : 0;                          \
                    int64_t oy_hi = H - iy0 <= 0 ? 0 : (H - iy0 + sy - 1) / sy;                  \
                    if (oy_hi > oh) oy_hi = oh;                                                  \
                    src += oy_lo * ow;                                                           \
                    if (g->sx == 1 && lo == 0 && hi == ow && ow % (32 / sizeof(T)) == 0) {       \
                        /* Whole rows, 32 bytes at a time (the common case). */                  \
                        for (oy = oy_lo; oy < oy_hi; oy++, src += ow) {                          \
                            T* dst = plane + (oy * sy + iy0) * W + ix0;                          \
                            for (ox = 0; ox < ow; ox += 32 / sizeof(T)) {                        \
                                NAME##_h a, b;                                                   \
                                memcpy(&a, dst + ox, 32);                                        \
                                memcpy(&b, src + ox, 32);                                        \
                                a += b;                                                          \
                                memcpy(dst + ox, &a, 32);                                        \
                            }                                                                    \
                        }                                                                        \
                        continue;                                                                \
                    }                                                                            \
                    for (oy = oy_lo; oy < oy_hi; oy++, src += ow) {                              \
                        T* dst = plane + (oy * sy + iy0) * W;                                    \
                        if (g->sx == 1) {                                                        \
                            for (ox = lo; ox < hi; ox++) dst[ox + ix0] += src[ox];               \
                        } else {                                                                 \
                            for (ox = 0; ox < ow; ox++) {                                        \
                                const int64_t ix = ox * g->sx + ix0;                             \
                                if (ix >= 0 && ix < W) dst[ix] += src[ox];                       \
                            }                                                                    \
                        }                                                                        \
                    }                                                                            \
                }                                                                                \
        }                                                                                        \
    }

    typedef float pcg_f;
    typedef double pcg_d;

    /* ---------------------------------------------------------------- products on vectors

       NN: C (M, N) = Ap @ B (+ bias per row; + C where accum), Ap packed in blocks of MR rows (block i at
       Ap + i * MR * K, entry (r, k) at [k * MR + r], rows past M zero), B (K, N) with rows of
       whole vectors (ldb >= N rounded up). MR x NV vectors of C stay in registers over all of K.

       DOT: C (M, N) = A (M, K) @ B (N, K).T with K a multiple of the vector width: MRD x NRD
       vector partial sums, added across at the end. Each entry is then one sum over K. */

    /* Shuffle masks of the tree that adds VW partial-sum vectors across (see NAME##_hsum):
       pcg_mask_T[VW][level][0 = low halves, 1 = high halves][lane]; filled by pcg_init. */
    static int32_t pcg_mask_int32_t[17][4][2][16];
    static int64_t pcg_mask_int64_t[17][4][2][16];
    static void pcg_init(void) {
        int vw, level, i;
        for (vw = 2; vw <= 16; vw *= 2)
            for (level = 0; (1 << level) < vw; level++) {
                const int h = vw >> (level + 1), w = 2 * h, nu = vw / w;
                for (i = 0; i < vw; i++) {
                    const int s = i / h, e = i % h;
                    const int base = s < nu ? s * w : vw + (s - nu) * w;
                    pcg_mask_int32_t[vw][level][0][i] = pcg_mask_int64_t[vw][level][0][i] = base + e;
                    pcg_mask_int32_t[vw][level][1][i] = pcg_mask_int64_t[vw][level][1][i] = base + h + e;
                }
            }
    }

    #define PCG_NN_BLOCK(NAME, T, VW, MR, NVC)                                                   \
        {                                                                                        \
            NAME##_v acc[MR][NVC];                                                               \
            int r_, q_;                                                                          \
            int64_t k_;                                                                          \
            for (r_ = 0; r_ < MR; r_++)                                                          \
                for (q_ = 0; q_ < NVC; q_++) acc[r_][q_] = (NAME##_v){0};                        \
            const T* a_ = a;                                                                     \
            const T* b_ = B + j;                                                                 \
            for (k_ = 0; k_ < K; k_++, a_ += MR, b_ += ldb) {                                    \
                NAME##_v bv[NVC];                                                                \
                for (q_ = 0; q_ < NVC; q_++) bv[q_] = NAME##_ld(b_ + q_ * VW);                   \
                for (r_ = 0; r_ < MR; r_++) {                                                    \
                    const T av = a_[r_];                                                         \
                    for (q_ = 0; q_ < NVC; q_++) acc[r_][q_] += av * bv[q_];                     \
                }                                                                                \
            }                                                                                    \
            for (r_ = 0; r_ < rows; r_++) {                                                      \
                T* c_ = C + (i0 + r_) * ldc + j;                                                 \
                for (q_ = 0; q_ < NVC; q_++) {                                                   \
                    NAME##_v v = acc[r_][q_];                                                    \
                    if (bias) v += bias[i0 + r_];                                                \
                    if (j + (q_ + 1) * VW <= N) {                                                \
                        if (accum) v += NAME##_ld(c_ + q_ * VW);                                 \
                        NAME##_st(c_ + q_ * VW, v);                                              \
                    } else { T t_[VW]; int64_t n_ = N - j - q_ * VW, l_; if (n_ > VW) n_ = VW;  \
                           memcpy(t_, &v, sizeof(v));                                            \
                           if (accum) for (l_ = 0; l_ < n_; l_++) t_[l_] += c_[q_ * VW + l_];   \
                           memcpy(c_ + q_ * VW, t_, n_ * sizeof(T)); }                           \
                }                                                                                \
            }                                                                                    \
        }

    /* The dot block: MRD x NRD partial-sum vectors. A full block (MRD * NRD == VW) is added
       across by a tree of shuffles into one vector of its VW sums (3 operations per partial sum
       instead of VW); the edge blocks (one row or column) lane by lane. Either way each sum's
       order is fixed by the block's place, which depends on the shapes only. */
    #define PCG_DOT_BLOCK(NAME, T, VW, MRD, NRD)                                                 \
        {                                                                                        \
            NAME##_v acc[MRD * NRD];                                                             \
            int r_, q_, l_;                                                                      \
            int64_t k_;                                                                          \
            for (r_ = 0; r_ < MRD * NRD; r_++) acc[r_] = (NAME##_v){0};                          \
            for (k_ = 0; k_ < K; k_ += VW) {                                                     \
                NAME##_v av[MRD];                                                                \
                for (r_ = 0; r_ < MRD; r_++) av[r_] = NAME##_ld(A + (i + r_) * lda + k_);        \
                for (q_ = 0; q_ < NRD; q_++) {                                                   \
                    const NAME##_v bv = NAME##_ld(B + (j + q_) * ldb + k_);                      \
                    for (r_ = 0; r_ < MRD; r_++) acc[r_ * NRD + q_] += av[r_] * bv;              \
                }                                                                                \
            }                                                                                    \
            if (MRD * NRD == VW) {                                                               \
                T t_[VW];                                                                        \
                NAME##_v s_ = NAME##_hsum(acc);                                                  \
                memcpy(t_, &s_, sizeof(t_));                                                     \
                for (r_ = 0; r_ < MRD; r_++)                                                     \
                    for (q_ = 0; q_ < NRD; q_++) C[(i + r_) * ldc + j + q_] = t_[r_ * NRD + q_]; \
            } else {                                                                             \
                for (r_ = 0; r_ < MRD * NRD; r_++) {                                             \
                    T t_[VW], s_ = 0;                                                            \
                    memcpy(t_, &acc[r_], sizeof(t_));                                            \
                    for (l_ = 0; l_ < VW; l_++) s_ += t_[l_];                                    \
                    C[(i + r_ / NRD) * ldc + j + r_ % NRD] = s_;                                 \
                }                                                                                \
            }                                                                                    \
        }

    #define PCG_DEFINE_PRODUCTS(NAME, T, MT, VW, MR, NV, MRD, NRD, ATTR)                              \
    typedef T NAME##_v __attribute__((vector_size(VW * sizeof(T))));                            \
    static PCG_INLINE NAME##_v NAME##_ld(const T* p) { NAME##_v v; memcpy(&v, p, sizeof(v)); return v; } \
    static PCG_INLINE void NAME##_st(T* p, NAME##_v v) { memcpy(p, &v, sizeof(v)); }            \
    typedef MT NAME##_m __attribute__((vector_size(VW * sizeof(T))));                            \
    /* u, v holding n segments each -> 2n segments of half the width h, each the sum of its     \
       two halves, u's segments first (masks from pcg_masks). */                                \
    static PCG_INLINE NAME##_v NAME##_pair(NAME##_v u, NAME##_v v, int level) {                 \
        NAME##_m lo, hi;                                                                         \
        memcpy(&lo, pcg_mask_##MT[VW][level][0], sizeof(lo));                                   \
        memcpy(&hi, pcg_mask_##MT[VW][level][1], sizeof(hi));                                   \
        return __builtin_shuffle(u, v, lo) + __builtin_shuffle(u, v, hi);                       \
    }                                                                                            \
    /* VW vectors -> one vector of their VW sums, in order (a is overwritten). */               \
    static PCG_INLINE NAME##_v NAME##_hsum(NAME##_v* a) {                                       \
        int n_ = VW, level_ = 0, i_;                                                             \
        _Pragma("GCC unroll 8")                                                                  \
        for (; n_ > 1; n_ /= 2, level_++) {                                                      \
            _Pragma("GCC unroll 16")                                                             \
            for (i_ = 0; i_ < n_ / 2; i_++) a[i_] = NAME##_pair(a[2 * i_], a[2 * i_ + 1], level_); \
        }                                                                                        \
        return a[0];                                                                             \
    }                                                                                            \
    ATTR static void NAME##_nn(int64_t M, int64_t N, int64_t K, const T* Ap, const T* B,        \
                               int64_t ldb, T* C, int64_t ldc, const T* bias, int accum) {      \
        int64_t i0, j;                                                                           \
        for (j = 0; j < N; j += NV * VW) {                                                       \
            const int64_t nv = (N - j + VW - 1) / VW;                                            \
            for (i0 = 0; i0 < M; i0 += MR) {                                                     \
                const int64_t rows = M - i0 < MR ? M - i0 : MR;                                  \
                const T* a = Ap + i0 * K;                                                        \
                if (nv >= NV) PCG_NN_BLOCK(NAME, T, VW, MR, NV)                                  \
                else if (nv == 3) PCG_NN_BLOCK(NAME, T, VW, MR, 3)                               \
                else if (nv == 2) PCG_NN_BLOCK(NAME, T, VW, MR, 2)                               \
                else PCG_NN_BLOCK(NAME, T, VW, MR, 1)                                            \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
    /* sum over n < nB and l < L of Y[(n * O + o) * L + l], for each o in [o0, o1): per image \
       four vector sums over its run of L (its tail one by one), added into the batch's        \
       (shorter chains of additions than one running sum), then across the lanes. */           \
    ATTR static void NAME##_chansum(const T* Y, int64_t nB, int64_t O, int64_t L, int64_t o0,   \
                                    int64_t o1, T* out) {                                       \
        int64_t o, n, l;                                                                         \
        for (o = o0; o < o1; o++) {                                                              \
            NAME##_v total = {0};                                                                \
            T tail = 0, t_[VW], s_ = 0;                                                          \
            int q_;                                                                              \
            for (n = 0; n < nB; n++) {                                                           \
                const T* y = Y + (n * O + o) * L;                                                \
                NAME##_v acc[4] = {{0}, {0}, {0}, {0}};                                          \
                T t1 = 0;                                                                        \
                for (l = 0; l + 4 * VW <= L; l += 4 * VW)                                        \
                    for (q_ = 0; q_ < 4; q_++) acc[q_] += NAME##_ld(y + l + q_ * VW);            \
                for (; l + VW <= L; l += VW) acc[0] += NAME##_ld(y + l);                         \
                for (; l < L; l++) t1 += y[l];                                                   \
                total += (acc[0] + acc[1]) + (acc[2] + acc[3]);                                  \
                tail += t1;                                                                      \
            }                                                                                    \
            memcpy(t_, &total, sizeof(t_));                                                      \
            for (q_ = 0; q_ < VW; q_++) s_ += t_[q_];                                            \
            out[o] = s_ + tail;                                                                  \
        }                                                                                        \
    }                                                                                            \
    ATTR static void NAME##_dot(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda,       \
                                const T* B, int64_t ldb, T* C, int64_t ldc) {                   \
        int64_t i, j;                                                                            \
        for (j = 0; j + NRD <= N; j += NRD) {                                                    \
            for (i = 0; i + MRD <= M; i += MRD) PCG_DOT_BLOCK(NAME, T, VW, MRD, NRD)             \
            for (; i < M; i++) PCG_DOT_BLOCK(NAME, T, VW, 1, NRD)                                \
        }                                                                                        \
        for (; j < N; j++) {                                                                     \
            for (i = 0; i + MRD <= M; i += MRD) PCG_DOT_BLOCK(NAME, T, VW, MRD, 1)               \
            for (; i < M; i++) PCG_DOT_BLOCK(NAME, T, VW, 1, 1)                                  \
        }                                                                                        \
    }

    #ifdef PCG_X86_DISPATCH
    #define PCG_V4 __attribute__((target("arch=x86-64-v4")))
    #define PCG_V3 __attribute__((target("arch=x86-64-v3")))
    PCG_DEFINE_PACK(pcg_f_v4, pcg_f, PCG_V4)
    PCG_DEFINE_PACK(pcg_d_v4, pcg_d, PCG_V4)
    PCG_DEFINE_PACK(pcg_f_v3, pcg_f, PCG_V3)
    PCG_DEFINE_PACK(pcg_d_v3, pcg_d, PCG_V3)
    PCG_DEFINE_UNPACK(pcg_f_v4, pcg_f, PCG_V4)
    PCG_DEFINE_UNPACK(pcg_d_v4, pcg_d, PCG_V4)
    PCG_DEFINE_UNPACK(pcg_f_v3, pcg_f, PCG_V3)
    PCG_DEFINE_UNPACK(pcg_d_v3, pcg_d, PCG_V3)
    PCG_DEFINE_PRODUCTS(pcg_f_v4, pcg_f, int32_t, 16, 5, 4, 4, 4, PCG_V4)
    PCG_DEFINE_PRODUCTS(pcg_d_v4, pcg_d, int64_t, 8, 5, 4, 2, 4, PCG_V4)
    PCG_DEFINE_PRODUCTS(pcg_f_v3, pcg_f, int32_t, 8, 6, 2, 2, 4, PCG_V3)
    PCG_DEFINE_PRODUCTS(pcg_d_v3, pcg_d, int64_t, 4, 6, 2, 2, 2, PCG_V3)
    #endif
    PCG_DEFINE_PACK(pcg_f_v1, pcg_f, )
    PCG_DEFINE_PACK(pcg_d_v1, pcg_d, )
    PCG_DEFINE_UNPACK(pcg_f_v1, pcg_f, )
    PCG_DEFINE_UNPACK(pcg_d_v1, pcg_d, )
    PCG_DEFINE_PRODUCTS(pcg_f_v1, pcg_f, int32_t, 4, 4, 2, 2, 2, )
    PCG_DEFINE_PRODUCTS(pcg_d_v1, pcg_d, int64_t, 2, 4, 2, 1, 2, )

    static volatile int pcg_isa_detected = 0, pcg_isa_forced = 0;
    static int pcg_isa(void) {
    #ifdef PCG_X86_DISPATCH
        if (pcg_isa_detected == 0) {  /* benign race: every thread computes the same value */
            __builtin_cpu_init();
            pcg_isa_detected = (PLAIT_ISA_ALLOWS(4) && __builtin_cpu_supports("x86-64-v4")) ? 4
                               : ((PLAIT_ISA_ALLOWS(3) && __builtin_cpu_supports("x86-64-v3")) ? 3 : 1);
        }
    #else
        pcg_isa_detected = 1;
    #endif
        return pcg_isa_forced && pcg_isa_forced < pcg_isa_detected ? pcg_isa_forced : pcg_isa_detected;
    }
    /* For tests: run at a lower level than the CPU's (0: the CPU's own). */
    static int pcg_set_isa(int force) { pcg_isa_forced = force; return pcg_isa(); }
    static int pcg_forced(void) { return pcg_isa_forced; }
    static int64_t pcg_width(int isa, int itemsize) {
        int64_t bytes = isa == 4 ? 64 : (isa == 3 ? 32 : 16);
        return bytes / itemsize;
    }
    static int64_t pcg_mr(int isa) { return isa == 4 ? 5 : (isa == 3 ? 6 : 4); }

    /* W (G * O, C * kh * kw) -> per group, blocks of MR rows of W (trans = 0: rows are output
       channels, K = C * kh * kw) or of W.T (trans = 1: rows are window cells, K = O). */
    #define PCG_DEFINE_PACKW(T)                                                                  \
    static void pcg_pack_w_##T(const T* W, T* Wp, int64_t G, int64_t O, int64_t KC, int64_t MR, \
                               int trans) {                                                      \
        const int64_t M = trans ? KC : O, K = trans ? O : KC, Mp = pcg_roundup(M, MR);           \
        int64_t g, i, k, r;                                                                      \
        for (g = 0; g < G; g++) {                                                                \
            const T* w = W + g * O * KC;                                                         \
            T* dst = Wp + g * Mp * K;                                                            \
            for (i = 0; i < Mp; i += MR)                                                         \
                for (k = 0; k < K; k++)                                                          \
                    for (r = 0; r < MR; r++) {                                                   \
                        const int64_t m = i + r;                                                 \
                        *dst++ = m >= M ? (T)0 : (trans ? w[k * KC + m] : w[m * KC + k]);        \
                    }                                                                            \
        }                                                                                        \
    }
    PCG_DEFINE_PACKW(pcg_f)
    PCG_DEFINE_PACKW(pcg_d)

    /* Forward for images [n0, n1): Y (nB, G*O, oh, ow) = conv(X, W) + b. Wp from pack_w. */
    #define PCG_ROWS 64
    #define PCG_DEFINE_DRIVERS(T, SUF)                                                           \
    static int pcg_forward_##SUF(const T* X, const T* Wp, const T* b, T* Y, int64_t n0,          \
                                 int64_t n1, const pcg_geom* g, int isa) {                      \
        const int64_t VW = pcg_width(isa, sizeof(T)), MR = pcg_mr(isa);                          \
        const int64_t KC = g->C * g->kh * g->kw, P = g->oh * g->ow, Pp = pcg_roundup(P, VW);     \
        const int64_t Mp = pcg_roundup(g->O, MR);                                                \
        T* col = (T*)malloc(KC * Pp * sizeof(T));                                                \
        int64_t n, gi;                                                                           \
        if (!col) return -1;                                                                     \
        for (n = n0; n < n1; n++)                                                                \
            for (gi = 0; gi < g->G; gi++) {                                                      \
                const T* x = X + (n * g->G + gi) * g->C * g->H * g->W;                           \
                T* y = Y + (n * g->G + gi) * g->O * P;                                            \
                PCG_ISA_CALL(T, pack, (x, col, Pp, Pp, 0, KC, g))                                \
                const T* a = Wp + gi * Mp * KC;                                                  \
                const T* bias = b ? b + gi * g->O : NULL;                                        \
                PCG_ISA_CALL(T, nn, (g->O, P, KC, a, col, Pp, y, P, bias, 0))                       \
            }                                                                                    \
        free(col);                                                                               \
        return 0;                                                                                \
    }                                                                                            \
    /* Data gradient for images [n0, n1): dX (nB, G*C, H, W) from dY (nB, G*O, oh, ow). */      \
    static int pcg_backward_data_##SUF(const T* dY, const T* WTp, T* dX, int64_t n0, int64_t n1, \
                                       const pcg_geom* g, int isa) {                            \
        const int64_t VW = pcg_width(isa, sizeof(T)), MR = pcg_mr(isa);                          \
        const int64_t KC = g->C * g->kh * g->kw, P = g->oh * g->ow, Pp = pcg_roundup(P, VW);     \
        const int64_t Mp = pcg_roundup(KC, MR);                                                  \
        T* dcol = (T*)malloc((KC * Pp + (Pp != P ? g->O * Pp : 0)) * sizeof(T));                 \
        T* dyp = dcol + KC * Pp;                                                                 \
        int64_t n, gi, o;                                                                        \
        if (!dcol) return -1;                                                                    \
        for (n = n0; n < n1; n++)                                                                \
            for (gi = 0; gi < g->G; gi++) {                                                      \
                const T* dy = dY + (n * g->G + gi) * g->O * P;                                    \
                T* dx = dX + (n * g->G + gi) * g->C * g->H * g->W;                                \
                const T* B = dy;                                                                 \
                if (Pp != P) {  /* rows padded to whole vectors */                               \
                    for (o = 0; o < g->O; o++) {                                                 \
                        memcpy(dyp + o * Pp, dy + o * P, P * sizeof(T));                         \
                        memset(dyp + o * Pp + P, 0, (Pp - P) * sizeof(T));                       \
                    }                                                                            \
                    B = dyp;                                                                     \
                }                                                                                \
                const T* a = WTp + gi * Mp * g->O;                                               \
                PCG_ISA_CALL(T, nn, (KC, P, g->O, a, B, Pp, dcol, Pp, (const T*)NULL, 0))           \
                PCG_ISA_CALL(T, unpack, (dcol, Pp, dx, g))                                       \
            }                                                                                    \
        free(dcol);                                                                              \
        return 0;                                                                                \
    }                                                                                            \
    /* Filter gradient, window rows [r0, r1) of every group: dW (G*O, C*kh*kw) = sum over the    \
       batch, NG images at a time (their output positions side by side, zeros after the last   \
       up to whole vectors), each entry added up in batch order. The windows are copied out    \
       PCG_ROWS rows at a time and read while they are in cache. */                            \
    static int pcg_backward_filter_##SUF(const T* dY, const T* X, T* dW, int64_t r0, int64_t r1, \
                                         int64_t NG, const pcg_geom* g, int isa) {              \
        const int64_t VW = pcg_width(isa, sizeof(T));                                            \
        const int64_t KC = g->C * g->kh * g->kw, P = g->oh * g->ow;                              \
        const int64_t R = r1 - r0, L = pcg_roundup(NG * P, VW), RC = R < PCG_ROWS ? R : PCG_ROWS; \
        T* col = (T*)malloc((RC * L + g->O * L + g->O * RC) * sizeof(T));                        \
        T* dyp = col + RC * L;                                                                   \
        T* part = dyp + g->O * L;                                                                \
        int64_t n0, n, gi, o, r, q0, q1;                                                         \
        if (!col) return -1;                                                                     \
        if (R <= 0) { free(col); return 0; }                                                     \
        for (gi = 0; gi < g->G; gi++) {                                                          \
            T* dw = dW + gi * g->O * KC;                                                         \
            for (n0 = 0; n0 < g->nB; n0 += NG) {                                                 \
                const int64_t m = g->nB - n0 < NG ? g->nB - n0 : NG;                             \
                const int64_t Kg = pcg_roundup(m * P, VW);  /* this group's contraction */      \
                for (n = 0; n < m; n++) {                                                        \
                    const T* dy = dY + ((n0 + n) * g->G + gi) * g->O * P;                         \
                    for (o = 0; o < g->O; o++) memcpy(dyp + o * L + n * P, dy + o * P, P * sizeof(T)); \
                }                                                                                \
                for (o = 0; o < g->O; o++) memset(dyp + o * L + m * P, 0, (Kg - m * P) * sizeof(T)); \
                for (q0 = r0; q0 < r1; q0 = q1) {                                                \
                    q1 = r1 - q0 < RC ? r1 : q0 + RC;                                            \
                    for (n = 0; n < m; n++) {                                                    \
                        const T* x = X + ((n0 + n) * g->G + gi) * g->C * g->H * g->W;             \
                        PCG_ISA_CALL(T, pack, (x, col + n * P, L, P, q0, q1, g))                  \
                    }                                                                            \
                    for (r = 0; r < q1 - q0; r++) memset(col + r * L + m * P, 0, (Kg - m * P) * sizeof(T)); \
                    PCG_ISA_CALL(T, dot, (g->O, q1 - q0, Kg, dyp, L, col, L, part, q1 - q0))     \
                    for (o = 0; o < g->O; o++)                                                   \
                        for (r = 0; r < q1 - q0; r++) {                                          \
                            if (n0 == 0) dw[o * KC + q0 + r] = part[o * (q1 - q0) + r];          \
                            else dw[o * KC + q0 + r] += part[o * (q1 - q0) + r];                 \
                        }                                                                        \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        free(col);                                                                               \
        return 0;                                                                                \
    }

    #ifdef PCG_X86_DISPATCH
    #define PCG_ISA_CALL(T, KIND, ARGS)                                                          \
        if (isa == 4) T##_v4_##KIND ARGS;                                                        \
        else if (isa == 3) T##_v3_##KIND ARGS;                                                   \
        else T##_v1_##KIND ARGS;
    #else
    #define PCG_ISA_CALL(T, KIND, ARGS) T##_v1_##KIND ARGS;
    #endif
    PCG_DEFINE_DRIVERS(pcg_f, f)
    PCG_DEFINE_DRIVERS(pcg_d, d)
    static void pcg_chansum_f(const float* Y, int64_t nB, int64_t O, int64_t L, int64_t o0, int64_t o1,
                              float* out, int isa) { PCG_ISA_CALL(pcg_f, chansum, (Y, nB, O, L, o0, o1, out)) }
    static void pcg_chansum_d(const double* Y, int64_t nB, int64_t O, int64_t L, int64_t o0, int64_t o1,
                              double* out, int isa) { PCG_ISA_CALL(pcg_d, chansum, (Y, nB, O, L, o0, o1, out)) }
    """
    ctypedef struct pcg_geom:
        int64_t nB, G, C, O, H, W, kh, kw, sy, sx, ph, pw, dy, dx, oh, ow
    int pcg_threads() noexcept nogil
    void pcg_init() noexcept nogil
    int pcg_isa() noexcept nogil
    int pcg_set_isa(int force) noexcept nogil
    int pcg_forced() noexcept nogil
    int64_t pcg_width(int isa, int itemsize) noexcept nogil
    int64_t pcg_mr(int isa) noexcept nogil
    int64_t pcg_roundup(int64_t v, int64_t m) noexcept nogil
    void pcg_pack_w_pcg_f(const float* W, float* Wp, int64_t G, int64_t O, int64_t KC, int64_t MR, int trans) noexcept nogil
    void pcg_pack_w_pcg_d(const double* W, double* Wp, int64_t G, int64_t O, int64_t KC, int64_t MR, int trans) noexcept nogil
    int pcg_forward_f(const float* X, const float* Wp, const float* b, float* Y, int64_t n0, int64_t n1,
                      const pcg_geom* g, int isa) noexcept nogil
    int pcg_forward_d(const double* X, const double* Wp, const double* b, double* Y, int64_t n0, int64_t n1,
                      const pcg_geom* g, int isa) noexcept nogil
    int pcg_backward_data_f(const float* dY, const float* WTp, float* dX, int64_t n0, int64_t n1,
                            const pcg_geom* g, int isa) noexcept nogil
    int pcg_backward_data_d(const double* dY, const double* WTp, double* dX, int64_t n0, int64_t n1,
                            const pcg_geom* g, int isa) noexcept nogil
    void pcg_chansum_f(const float* Y, int64_t nB, int64_t O, int64_t L, int64_t o0, int64_t o1,
                       float* out, int isa) noexcept nogil
    void pcg_chansum_d(const double* Y, int64_t nB, int64_t O, int64_t L, int64_t o0, int64_t o1,
                       double* out, int isa) noexcept nogil
    int pcg_backward_filter_f(const float* dY, const float* X, float* dW, int64_t r0, int64_t r1, int64_t NG,
                              const pcg_geom* g, int isa) noexcept nogil
    int pcg_backward_filter_d(const double* dY, const double* X, double* dW, int64_t r0, int64_t r1, int64_t NG,
                              const pcg_geom* g, int isa) noexcept nogil


cdef int64_t _INT_MAX = 2147483647

pcg_init()

# The filter gradient contracts over about this many output positions at a time (whole images):
# enough to pay for adding the vector partial sums across, few enough to stay in cache.
_DOT_POSITIONS = 512


def _set_isa(int force=0) -> int:
    """For tests: compute at a lower instruction-set level (1 baseline, 3 AVX2, 4 AVX-512) than
    the CPU's, even the baseline (which unforced is left to the reference); 0 restores the CPU's
    own. Returns the level now in use."""
    return pcg_set_isa(force)


cdef object _as_float(object A, object dtype):
    if not isinstance(A, numpy.ndarray) or A.dtype != dtype:
        return None
    return numpy.ascontiguousarray(A)


cdef object _dtype_of(object X, object W):
    """The products' dtype, or None to leave them to the reference: other dtypes, and processors
    without AVX2, where numpy's BLAS (kernels tuned for each processor) is the better bet than
    the baseline build here (which tests still run, by forcing its level)."""
    cdef int isa = pcg_isa()
    if isa < 3 and not pcg_forced():
        return None
    if not isinstance(X, numpy.ndarray) or not isinstance(W, numpy.ndarray):
        return None
    if X.dtype != W.dtype or X.dtype not in (numpy.float32, numpy.float64):
        return None
    return X.dtype


cdef bint _geom(pcg_geom* g, Py_ssize_t nB, Py_ssize_t G, Py_ssize_t C, Py_ssize_t O,
                Py_ssize_t H, Py_ssize_t W, Py_ssize_t kh, Py_ssize_t kw, tuple s, tuple p,
                tuple d, Py_ssize_t oh, Py_ssize_t ow):
    vals = (nB, G, C, O, H, W, kh, kw, s[0], s[1], p[0], p[1], d[0], d[1], oh, ow)
    for v in vals:
        if not (0 <= v <= _INT_MAX):
            return False
    if kh < 1 or kw < 1 or s[0] < 1 or s[1] < 1 or d[0] < 1 or d[1] < 1:
        return False
    # Python ints: one image's windows, planes and products must stay far from overflow.
    KC = int(C) * int(kh) * int(kw)
    if KC * (int(oh) * int(ow) + 64) > _INT_MAX or int(C) * H * W > _INT_MAX or int(O) * oh * ow > _INT_MAX:
        return False
    g.nB, g.G, g.C, g.O, g.H, g.W = nB, G, C, O, H, W
    g.kh, g.kw, g.sy, g.sx, g.ph, g.pw = kh, kw, s[0], s[1], p[0], p[1]
    g.dy, g.dx, g.oh, g.ow = d[0], d[1], oh, ow
    return True


cdef object _pack_w(object W, pcg_geom* g, int isa, int trans):
    """W (G*O, C, kh, kw) packed in blocks of MR rows for each group (trans: of W.T)."""
    cdef int64_t MR = pcg_mr(isa), KC = g.C * g.kh * g.kw
    cdef int64_t M = KC if trans else g.O, K = g.O if trans else KC
    Wp = numpy.empty(max(1, g.G * pcg_roundup(M, MR) * K), dtype=W.dtype)
    cdef cnp.ndarray w = W, wp = Wp
    if W.dtype == numpy.float32:
        pcg_pack_w_pcg_f(<const float*>cnp.PyArray_DATA(w), <float*>cnp.PyArray_DATA(wp), g.G, g.O, KC, MR, trans)
    else:
        pcg_pack_w_pcg_d(<const double*>cnp.PyArray_DATA(w), <double*>cnp.PyArray_DATA(wp), g.G, g.O, KC, MR, trans)
    return Wp


cdef int64_t _chunks(int64_t n) noexcept:
    cdef int64_t t = pcg_threads()
    return max(1, min(n, t))


def forward(X, W, b, tuple s, tuple p, tuple d, Py_ssize_t G, tuple out):
    """X (nB, G*C, H, W), W (G*O, C, kh, kw), b (G*O,) or None -> Y (nB, G*O, oh, ow), or None
    outside the fast case."""
    dtype = _dtype_of(X, W)
    if dtype is None or X.ndim != 4 or W.ndim != 4 or len(out) != 2 or G < 1:
        return None
    if X.shape[1] != G * W.shape[1] or W.shape[0] % G:
        return None
    X = numpy.ascontiguousarray(X)
    W = numpy.ascontiguousarray(W)
    if b is not None:
        b = _as_float(b, dtype)
        if b is None:
            return None
    cdef pcg_geom g
    if not _geom(&g, X.shape[0], G, X.shape[1] // G, W.shape[0] // G, X.shape[2], X.shape[3],
                 W.shape[2], W.shape[3], s, p, d, out[0], out[1]):
        return None
    cdef int isa = pcg_isa()
    Wp = _pack_w(W, &g, isa, 0)
    Y = numpy.empty((g.nB, G * g.O, g.oh, g.ow), dtype=dtype)
    if g.nB == 0 or g.O == 0 or g.oh * g.ow == 0:
        return Y
    if g.C == 0:
        Y[...] = 0 if b is None else b.reshape(1, -1, 1, 1)
        return Y
    cdef cnp.ndarray xa = X, wa = Wp, ya = Y
    cdef void* bp = NULL if b is None else cnp.PyArray_DATA(<cnp.ndarray>b)
    cdef void* xp = cnp.PyArray_DATA(xa)
    cdef void* wpp = cnp.PyArray_DATA(wa)
    cdef void* yp = cnp.PyArray_DATA(ya)
    cdef int64_t nc = _chunks(g.nB), t, step = (g.nB + nc - 1) // nc
    cdef int failed = 0
    cdef bint f32 = dtype == numpy.float32
    for t in prange(nc, nogil=True, schedule="static", num_threads=nc):
        if f32:
            if pcg_forward_f(<const float*>xp, <const float*>wpp, <const float*>bp, <float*>yp,
                             t * step, min((t + 1) * step, g.nB), &g, isa):
                failed += 1
        else:
            if pcg_forward_d(<const double*>xp, <const double*>wpp, <const double*>bp, <double*>yp,
                             t * step, min((t + 1) * step, g.nB), &g, isa):
                failed += 1
    if failed:
        raise MemoryError("conv_gemm.forward: cannot allocate a window buffer")
    return Y


def backward_data(dY, W, tuple size, tuple s, tuple p, tuple d, Py_ssize_t G):
    """dY (nB, G*O, oh, ow), W (G*O, C, kh, kw) -> dX (nB, G*C, *size), or None outside the
    fast case."""
    dtype = _dtype_of(dY, W)
    if dtype is None or dY.ndim != 4 or W.ndim != 4 or len(size) != 2 or G < 1:
        return None
    if dY.shape[1] != W.shape[0] or W.shape[0] % G:
        return None
    dY = numpy.ascontiguousarray(dY)
    W = numpy.ascontiguousarray(W)
    cdef pcg_geom g
    if not _geom(&g, dY.shape[0], G, W.shape[1], W.shape[0] // G, size[0], size[1],
                 W.shape[2], W.shape[3], s, p, d, dY.shape[2], dY.shape[3]):
        return None
    cdef int isa = pcg_isa()
    WTp = _pack_w(W, &g, isa, 1)
    dX = numpy.empty((g.nB, G * g.C, g.H, g.W), dtype=dtype)
    if g.nB == 0 or g.C * g.H * g.W == 0:
        return dX
    if g.O == 0 or g.oh * g.ow == 0:
        dX.fill(0)
        return dX
    cdef cnp.ndarray da = dY, wa = WTp, xa = dX
    cdef void* dyp = cnp.PyArray_DATA(da)
    cdef void* wpp = cnp.PyArray_DATA(wa)
    cdef void* dxp = cnp.PyArray_DATA(xa)
    cdef int64_t nc = _chunks(g.nB), t, step = (g.nB + nc - 1) // nc
    cdef int failed = 0
    cdef bint f32 = dtype == numpy.float32
    for t in prange(nc, nogil=True, schedule="static", num_threads=nc):
        if f32:
            if pcg_backward_data_f(<const float*>dyp, <const float*>wpp, <float*>dxp,
                                   t * step, min((t + 1) * step, g.nB), &g, isa):
                failed += 1
        else:
            if pcg_backward_data_d(<const double*>dyp, <const double*>wpp, <double*>dxp,
                                   t * step, min((t + 1) * step, g.nB), &g, isa):
                failed += 1
    if failed:
        raise MemoryError("conv_gemm.backward_data: cannot allocate a window buffer")
    return dX


def backward_filter(dY, X, tuple k, tuple s, tuple p, tuple d, Py_ssize_t G):
    """dY (nB, G*O, oh, ow), X (nB, G*C, H, W) -> dW (G*O, C, *k), or None outside the fast
    case."""
    dtype = _dtype_of(dY, X)
    if dtype is None or dY.ndim != 4 or X.ndim != 4 or len(k) != 2 or G < 1:
        return None
    if X.shape[1] % G or dY.shape[1] % G or dY.shape[0] != X.shape[0]:
        return None
    dY = numpy.ascontiguousarray(dY)
    X = numpy.ascontiguousarray(X)
    cdef pcg_geom g
    if not _geom(&g, X.shape[0], G, X.shape[1] // G, dY.shape[1] // G, X.shape[2], X.shape[3],
                 k[0], k[1], s, p, d, dY.shape[2], dY.shape[3]):
        return None
    cdef int64_t KC = g.C * g.kh * g.kw
    dW = numpy.empty((G * g.O, g.C, g.kh, g.kw), dtype=dtype)
    if dW.size == 0:
        return dW
    if g.nB == 0 or g.oh * g.ow == 0:
        dW.fill(0)
        return dW
    cdef int isa = pcg_isa()
    cdef int64_t NG = max(1, min(g.nB, _DOT_POSITIONS // (g.oh * g.ow)))
    cdef cnp.ndarray da = dY, xa = X, wa = dW
    cdef void* dyp = cnp.PyArray_DATA(da)
    cdef void* xp = cnp.PyArray_DATA(xa)
    cdef void* dwp = cnp.PyArray_DATA(wa)
    # Threads split the window rows, at multiples of 16: the kernels' blocks of rows (which
    # decide how each sum is added up) then fall alike whatever the split.
    cdef int64_t nc = _chunks(max(1, KC // 16)), t, step = pcg_roundup((KC + nc - 1) // nc, 16)
    cdef int failed = 0
    cdef bint f32 = dtype == numpy.float32
    for t in prange(nc, nogil=True, schedule="static", num_threads=nc):
        if f32:
            if pcg_backward_filter_f(<const float*>dyp, <const float*>xp, <float*>dwp,
                                     min(t * step, KC), min((t + 1) * step, KC), NG, &g, isa):
                failed += 1
        else:
            if pcg_backward_filter_d(<const double*>dyp, <const double*>xp, <double*>dwp,
                                     min(t * step, KC), min((t + 1) * step, KC), NG, &g, isa):
                failed += 1
    if failed:
        raise MemoryError("conv_gemm.backward_filter: cannot allocate a window buffer")
    return dW


def bias_grad(dY):
    """dY (nB, O, *out) -> its sum over every axis but the channels' (O,), or None outside the
    fast case (float32/float64, at least one spatial axis)."""
    if not isinstance(dY, numpy.ndarray) or dY.dtype not in (numpy.float32, numpy.float64) or dY.ndim < 3:
        return None
    dY = numpy.ascontiguousarray(dY)
    cdef int64_t nB = dY.shape[0], O = dY.shape[1], L = dY.size // max(1, nB * O)
    db = numpy.empty(O, dtype=dY.dtype)
    if O == 0:
        return db
    if nB == 0 or L == 0:
        db.fill(0)
        return db
    cdef int isa = pcg_isa()
    cdef cnp.ndarray ya = dY, da = db
    cdef void* yp = cnp.PyArray_DATA(ya)
    cdef void* dp = cnp.PyArray_DATA(da)
    # Threads split the channels; each sum is one thread's, whatever the split.
    cdef int64_t nc = _chunks(max(1, nB * O * L // 65536)), t, step = (O + nc - 1) // nc
    cdef bint f32 = dY.dtype == numpy.float32
    for t in prange(nc, nogil=True, schedule="static", num_threads=nc):
        if f32:
            pcg_chansum_f(<const float*>yp, nB, O, L, min(t * step, O), min((t + 1) * step, O), <float*>dp, isa)
        else:
            pcg_chansum_d(<const double*>yp, nB, O, L, min(t * step, O), min((t + 1) * step, O), <double*>dp, isa)
    return db


# ------------------------------------------------------------------------ batch-last layout
#
# The same products for images stored channels first and batch last, I (C, H, W, N) (neon's
# layout, also cuda-convnet's): there a window row (c, r, s) over a run of output positions is
# a run of whole N-vectors of the input, so the windows of a block of output rows are copied
# out with memcpy, and each product is one call of the register-blocked kernel above over the
# block, written straight into the batch-last output:
#
# * forward: O (K, P*Q*N) = F.T (K, C*R*S) @ col (C*R*S, P*Q*N), F (C*R*S, K)
# * data gradient: grad_I = col2im(F (C*R*S, K) @ E (K, P*Q*N))
# * filter gradient: grad_F (C*R*S, K) = col @ E.T, summed over blocks of positions
#
# float32 only (the callers keep float64 on the batch-first products).

cdef extern from *:
    """
    /* The batch-last products' own register tile on AVX-512 (float32): 6 rows x 4 vectors of
       accumulators (the batch-first products keep 5 x 4); the other levels share theirs. */
    #ifdef PCG_X86_DISPATCH
    #define PBL_MR4 6
    PCG_DEFINE_PRODUCTS(pbl_f_v4, pcg_f, int32_t, 16, PBL_MR4, 4, 4, 4, PCG_V4)
    #define PBL_NN(ARGS) if (isa == 4) pbl_f_v4_nn ARGS; else { PCG_ISA_CALL(pcg_f, nn, ARGS) }
    static int64_t pbl_mr(int isa) { return isa == 4 ? PBL_MR4 : pcg_mr(isa); }
    #else
    #define PBL_NN(ARGS) PCG_ISA_CALL(pcg_f, nn, ARGS)
    static int64_t pbl_mr(int isa) { return pcg_mr(isa); }
    #endif

    /* Buffers on 64-byte boundaries: rows of whole vectors then never straddle cache lines. */
    static float* pbl_alloc(int64_t n) {
        return (float*)aligned_alloc(64, (size_t)((n * (int64_t)sizeof(float) + 63) / 64 * 64));
    }

    typedef struct {
        int64_t C, H, W, N, K, R, S, sh, sw, ph, pw, dh, dw, P, Q;
    } pbl_geom;

    /* n floats: whole 64-byte moves (inlined, no call per batch vector), then one by one. */
    static PCG_INLINE void pbl_copy(float* d, const float* s, int64_t n) {
        for (; n >= 16; n -= 16, d += 16, s += 16) memcpy(d, s, 64);
        for (; n > 0; n--) *d++ = *s++;
    }

    /* Window row (c, r, s) for output rows [p0, p1): (p1 - p0) * Q runs of N values into dst,
       zeros where the window reads padding. */
    static void pbl_im2row(const float* In, float* dst, int64_t c, int64_t r, int64_t s,
                           int64_t p0, int64_t p1, const pbl_geom* g) {
        const int64_t N = g->N, W = g->W, Q = g->Q, x0 = s * g->dw - g->pw;
        int64_t qlo = x0 < 0 ? (-x0 + g->sw - 1) / g->sw : 0;
        int64_t qhi = W - 1 - x0 < 0 ? 0 : (W - 1 - x0) / g->sw + 1;
        int64_t p, q;
        if (qhi > Q) qhi = Q;
        if (qlo > qhi) qlo = qhi;
        for (p = p0; p < p1; p++) {
            float* d = dst + (p - p0) * Q * N;
            const int64_t y = p * g->sh - g->ph + r * g->dh;
            if (y < 0 || y >= g->H) { memset(d, 0, Q * N * sizeof(float)); continue; }
            const float* src = In + (c * g->H + y) * W * N;
            if (qlo) memset(d, 0, qlo * N * sizeof(float));
            if (g->sw == 1) memcpy(d + qlo * N, src + (qlo + x0) * N, (qhi - qlo) * N * sizeof(float));
            else for (q = qlo; q < qhi; q++) pbl_copy(d + q * N, src + (q * g->sw + x0) * N, N);
            if (qhi < Q) memset(d + qhi * N, 0, (Q - qhi) * N * sizeof(float));
        }
    }

    /* pbl_im2row writing every value `ld` apart (the rows of a packed block, interleaved). */
    static void pbl_im2row_strided(const float* In, float* dst, int64_t ld, int64_t c, int64_t r,
                                   int64_t s, int64_t p0, int64_t p1, const pbl_geom* g) {
        const int64_t N = g->N, W = g->W, Q = g->Q, x0 = s * g->dw - g->pw;
        int64_t qlo = x0 < 0 ? (-x0 + g->sw - 1) / g->sw : 0;
        int64_t qhi = W - 1 - x0 < 0 ? 0 : (W - 1 - x0) / g->sw + 1;
        int64_t p, q, n;
        if (qhi > Q) qhi = Q;
        if (qlo > qhi) qlo = qhi;
        for (p = p0; p < p1; p++) {
            float* d = dst + (p - p0) * Q * N * ld;
            const int64_t y = p * g->sh - g->ph + r * g->dh;
            if (y < 0 || y >= g->H) { for (n = 0; n < Q * N; n++) d[n * ld] = 0; continue; }
            const float* src = In + (c * g->H + y) * W * N;
            for (n = 0; n < qlo * N; n++) d[n * ld] = 0;
            if (g->sw == 1) {
                const float* sp = src + (qlo + x0) * N;
                float* dp = d + qlo * N * ld;
                const int64_t len = (qhi - qlo) * N;
                for (n = 0; n < len; n++) dp[n * ld] = sp[n];
            } else {
                for (q = qlo; q < qhi; q++) {
                    const float* sp = src + (q * g->sw + x0) * N;
                    float* dp = d + q * N * ld;
                    for (n = 0; n < N; n++) dp[n * ld] = sp[n];
                }
            }
            for (n = qhi * N; n < Q * N; n++) d[n * ld] = 0;
        }
    }

    #ifdef PCG_X86_DISPATCH
    /* AVX-512's 6-row packing: a[l * 6 + rr] = t[rr * ld + l] for l < L (six contiguous window
       rows interleaved as the kernel's packed A), 16 positions at a time in vector registers:
       rows paired (unpack lo/hi of 32-bit lanes), then the three pair streams interleaved as
       64-bit units by two two-source permutes per output vector; writes sequential. */
    typedef float pbl_v16f __attribute__((vector_size(64)));
    typedef int32_t pbl_v16i __attribute__((vector_size(64)));
    typedef double pbl_v8d __attribute__((vector_size(64)));
    typedef int64_t pbl_v8i __attribute__((vector_size(64)));
    /* The permutations of the six-row interleave (pbl_ilv6): 32-bit lanes of two rows paired
       (lo/hi halves), then three pair streams merged as 64-bit units. */
    typedef struct { pbl_v16i lo, hi; pbl_v8i a[3], b[3]; } pbl_ilv6_masks;
    PCG_V4 static inline pbl_ilv6_masks pbl_ilv6_make(void) {
        pbl_ilv6_masks m;
        int32_t lo_[16], hi_[16];
        int64_t a_[3][8], b_[3][8];
        int i, o;
        for (i = 0; i < 8; i++) {
            lo_[2 * i] = i; lo_[2 * i + 1] = 16 + i;
            hi_[2 * i] = 8 + i; hi_[2 * i + 1] = 24 + i;
        }
        for (o = 0; o < 3; o++)
            for (i = 0; i < 8; i++) {
                const int k = 8 * o + i, l = k / 3, kk = k % 3;
                a_[o][i] = kk == 1 ? 8 + l : l;
                b_[o][i] = kk == 2 ? 8 + l : i;
            }
        memcpy(&m.lo, lo_, 64); memcpy(&m.hi, hi_, 64);
        memcpy(m.a, a_, sizeof(m.a)); memcpy(m.b, b_, sizeof(m.b));
        return m;
    }
    /* a[l * 6 + k] = r[k][l] for the 16 lanes l of six row vectors: 96 floats, written in order. */
    PCG_V4 static inline void pbl_ilv6(const pbl_v16f r[6], const pbl_ilv6_masks* m, float* a) {
        pbl_v8d lo[3], hi[3];
        int k, o;
        for (k = 0; k < 3; k++) {
            pbl_v16f x = __builtin_shuffle(r[2 * k], r[2 * k + 1], m->lo);
            pbl_v16f y = __builtin_shuffle(r[2 * k], r[2 * k + 1], m->hi);
            memcpy(&lo[k], &x, 64); memcpy(&hi[k], &y, 64);
        }
        for (o = 0; o < 3; o++) {
            pbl_v8d u = __builtin_shuffle(lo[0], lo[1], m->a[o]);
            u = __builtin_shuffle(u, lo[2], m->b[o]);
            memcpy(a + o * 16, &u, 64);
            pbl_v8d w = __builtin_shuffle(hi[0], hi[1], m->a[o]);
            w = __builtin_shuffle(w, hi[2], m->b[o]);
            memcpy(a + 48 + o * 16, &w, 64);
        }
    }
    PCG_V4 static void pbl_interleave6(const float* t, int64_t ld, float* a, int64_t L) {
        const pbl_ilv6_masks m = pbl_ilv6_make();
        int k;
        int64_t l = 0;
        for (; l + 16 <= L; l += 16, a += 96) {
            pbl_v16f r[6];
            for (k = 0; k < 6; k++) memcpy(&r[k], t + k * ld + l, 64);
            pbl_ilv6(r, &m, a);
        }
        for (; l < L; l++, a += 6)
            for (k = 0; k < 6; k++) a[k] = t[k * ld + l];
    }

    /* pbl_im2row of window rows (c, r, s)[k] (k < 6; nrow of them, the rest zeros) for output
       rows [p0, p1) straight into the kernel's interleaved layout (a[l * 6 + k]), for batches
       of whole vectors (N % 16 == 0): per output position and batch vector, the six rows'
       vectors are read from the image (or zeros in padding) and interleaved in registers as in
       pbl_interleave6, with no contiguous copy in between. */
    PCG_V4 static void pbl_pack6(const float* In, float* a, const int64_t* crs, int nrow, int64_t p0,
                                 int64_t p1, const pbl_geom* g) {
        const pbl_ilv6_masks m = pbl_ilv6_make();
        int k;
        const int64_t N = g->N, W = g->W, Q = g->Q, sw = g->sw;
        int64_t x0[6], qlo[6], qhi[6], cc[6], rr[6], p, q, n;
        for (k = 0; k < 6; k++) {
            if (k >= nrow) { qlo[k] = qhi[k] = 0; x0[k] = 0; cc[k] = rr[k] = 0; continue; }
            cc[k] = crs[3 * k]; rr[k] = crs[3 * k + 1];
            x0[k] = crs[3 * k + 2] * g->dw - g->pw;
            qlo[k] = x0[k] < 0 ? (-x0[k] + sw - 1) / sw : 0;
            qhi[k] = W - 1 - x0[k] < 0 ? 0 : (W - 1 - x0[k]) / sw + 1;
            if (qhi[k] > Q) qhi[k] = Q;
            if (qlo[k] > qhi[k]) qlo[k] = qhi[k];
        }
        for (p = p0; p < p1; p++) {
            const float* src[6];
            int64_t lo[6], hi[6];
            for (k = 0; k < 6; k++) {
                const int64_t y = p * g->sh - g->ph + rr[k] * g->dh;
                if (k >= nrow || y < 0 || y >= g->H) { src[k] = In; lo[k] = hi[k] = 0; continue; }
                src[k] = In + ((cc[k] * g->H + y) * W + x0[k]) * N;
                lo[k] = qlo[k]; hi[k] = qhi[k];
            }
            for (q = 0; q < Q; q++)
                for (n = 0; n < N; n += 16, a += 96) {
                    pbl_v16f r[6];
                    for (k = 0; k < 6; k++) {
                        if (q >= lo[k] && q < hi[k]) memcpy(&r[k], src[k] + q * sw * N + n, 64);
                        else r[k] = (pbl_v16f){0};
                    }
                    pbl_ilv6(r, &m, a);
                }
        }
    }

    /* d[l * ldd + k] = s[k * lds + l] for k, l < 16, in registers: four rounds of zipping row i
       with row i + 8 (two-source permutes) transpose a 16 x 16 block. */
    PCG_V4 static void pbl_tr16(const float* s, int64_t lds, float* d, int64_t ldd) {
        int32_t mlo_[16], mhi_[16];
        int i, st;
        for (i = 0; i < 8; i++) {
            mlo_[2 * i] = i; mlo_[2 * i + 1] = 16 + i;
            mhi_[2 * i] = 8 + i; mhi_[2 * i + 1] = 24 + i;
        }
        pbl_v16i mlo, mhi;
        memcpy(&mlo, mlo_, 64); memcpy(&mhi, mhi_, 64);
        pbl_v16f r[16], n[16];
        for (i = 0; i < 16; i++) memcpy(&r[i], s + i * lds, 64);
        for (st = 0; st < 4; st++) {
            for (i = 0; i < 8; i++) {
                n[2 * i] = __builtin_shuffle(r[i], r[i + 8], mlo);
                n[2 * i + 1] = __builtin_shuffle(r[i], r[i + 8], mhi);
            }
            memcpy(r, n, sizeof(r));
        }
        for (i = 0; i < 16; i++) memcpy(d + i * ldd, &r[i], 64);
    }
    #endif

    /* pbl_im2row's adjoint: the row's values added onto the input cells they were read from. */
    static void pbl_row2im(const float* src, float* GI, int64_t c, int64_t r, int64_t s,
                           int64_t p0, int64_t p1, const pbl_geom* g) {
        const int64_t N = g->N, W = g->W, Q = g->Q, x0 = s * g->dw - g->pw;
        int64_t qlo = x0 < 0 ? (-x0 + g->sw - 1) / g->sw : 0;
        int64_t qhi = W - 1 - x0 < 0 ? 0 : (W - 1 - x0) / g->sw + 1;
        int64_t p, q, n;
        if (qhi > Q) qhi = Q;
        if (qlo > qhi) qlo = qhi;
        for (p = p0; p < p1; p++) {
            const int64_t y = p * g->sh - g->ph + r * g->dh;
            if (y < 0 || y >= g->H) continue;
            const float* d = src + (p - p0) * Q * N;
            float* dst = GI + (c * g->H + y) * W * N;
            if (g->sw == 1) {
                float* o = dst + (qlo + x0) * N;
                const float* i = d + qlo * N;
                const int64_t len = (qhi - qlo) * N;
                for (n = 0; n < len; n++) o[n] += i[n];
            } else {
                for (q = qlo; q < qhi; q++) {
                    float* o = dst + (q * g->sw + x0) * N;
                    const float* i = d + q * N;
                    for (n = 0; n < N; n++) o[n] += i[n];
                }
            }
        }
    }

    static void pbl_rcs(int64_t row, const pbl_geom* g, int64_t* c, int64_t* r, int64_t* s) {
        *c = row / (g->R * g->S); *r = (row / g->S) % g->R; *s = row % g->S;
    }

    /* Forward for output rows [p0, p1), PB rows at a time, the contraction KCB window rows at
       a time (accumulated in O). Fp: F.T packed per chunk of KCB rows of F (pack_w trans), chunk
       i at Fp + i * KCB * roundup(K, MR). */
    static int pbl_forward(const float* In, const float* Fp, float* O, int64_t p0, int64_t p1,
                           int64_t PB, int64_t KCB, const pbl_geom* g, int isa) {
        const int64_t VW = pcg_width(isa, sizeof(float)), KC = g->C * g->R * g->S;
        const int64_t Kp = pcg_roundup(g->K, pbl_mr(isa));
        const int64_t QN = g->Q * g->N, ldmax = pcg_roundup(PB * QN, VW);
        float* col = pbl_alloc(KCB * ldmax);
        int64_t pb, pe, row, c, r, s, k0, k1;
        if (!col) return -1;
        for (pb = p0; pb < p1; pb = pe) {
            pe = p1 - pb < PB ? p1 : pb + PB;
            const int64_t Lb = (pe - pb) * QN, ld = pcg_roundup(Lb, VW);
            for (k0 = 0; k0 < KC; k0 = k1) {
                k1 = KC - k0 < KCB ? KC : k0 + KCB;
                for (row = k0; row < k1; row++) {
                    float* d = col + (row - k0) * ld;
                    pbl_rcs(row, g, &c, &r, &s);
                    pbl_im2row(In, d, c, r, s, pb, pe, g);
                    if (ld > Lb) memset(d + Lb, 0, (ld - Lb) * sizeof(float));
                }
                PBL_NN((g->K, Lb, k1 - k0, Fp + k0 * Kp, col, ld, O + pb * QN,
                                         g->P * QN, (const float*)NULL, k0 > 0))
            }
        }
        free(col);
        return 0;
    }

    /* Data gradient for input channels [c0, c1): grad_I's planes zeroed, then for PB output rows
       at a time and RCH window rows at a time, dcol = F[rows] @ E[:, block], added back onto
       the image (pbl_row2im). */
    static int pbl_backward_data(const float* E, const float* F, float* GI, int64_t c0, int64_t c1,
                                 int64_t PB, int64_t RCH, const pbl_geom* g, int isa) {
        const int64_t VW = pcg_width(isa, sizeof(float)), MR = pbl_mr(isa), RS = g->R * g->S;
        const int64_t r0 = c0 * RS, nr = (c1 - c0) * RS, K = g->K;
        const int64_t QN = g->Q * g->N, PQN = g->P * QN, ldmax = pcg_roundup(PB * QN, VW);
        const int64_t rch = pcg_roundup(RCH, MR);
        const int64_t nAp = pcg_roundup(pcg_roundup(nr, MR) * K, 16);
        float* Ap = pbl_alloc(nAp + rch * ldmax + K * ldmax);
        float* dcol = Ap + nAp;
        float* Eb = dcol + rch * ldmax;
        int64_t pb, pe, i, i0, i1, k, c, r, s;
        if (!Ap) return -1;
        memset(GI + c0 * g->H * g->W * g->N, 0, (c1 - c0) * g->H * g->W * g->N * sizeof(float));
        pcg_pack_w_pcg_f(F + r0 * K, Ap, 1, nr, K, MR, 0);
        for (pb = 0; pb < g->P; pb = pe) {
            pe = g->P - pb < PB ? g->P : pb + PB;
            const int64_t Lb = (pe - pb) * QN, ld = pcg_roundup(Lb, VW);
            /* E's block copied to aligned rows of whole vectors */
            for (k = 0; k < K; k++) {
                memcpy(Eb + k * ld, E + k * PQN + pb * QN, Lb * sizeof(float));
                if (ld > Lb) memset(Eb + k * ld + Lb, 0, (ld - Lb) * sizeof(float));
            }
            const float* B = Eb;
            const int64_t ldb = ld;
            for (i0 = 0; i0 < nr; i0 = i1) {
                i1 = nr - i0 < rch ? nr : i0 + rch;
                PBL_NN((i1 - i0, Lb, K, Ap + i0 * K, B, ldb, dcol, ld, (const float*)NULL, 0))
                for (i = i0; i < i1; i++) {
                    pbl_rcs(r0 + i, g, &c, &r, &s);
                    pbl_row2im(dcol + (i - i0) * ld, GI, c, r, s, pb, pe, g);
                }
            }
        }
        free(Ap);
        return 0;
    }

    /* Filter gradient rows [r0, r1) (r0 a multiple of MR): grad_F[rows] = sum over blocks of
       PB output rows of col[rows, block] @ E[:, block].T, RCH rows at a time; each block's
       product is summed in registers over the block, the blocks added in order. */
    static int pbl_backward_filter(const float* In, const float* E, float* GF, int64_t r0, int64_t r1,
                                   int64_t PB, int64_t RCH, const pbl_geom* g, int isa) {
        const int64_t VW = pcg_width(isa, sizeof(float)), MR = pbl_mr(isa), K = g->K;
        const int64_t nr = r1 - r0, ldk = pcg_roundup(K, VW), rch = pcg_roundup(RCH, MR);
        const int64_t QN = g->Q * g->N, PQN = g->P * QN, Lmax = PB * QN;
        const int64_t nAp = pcg_roundup(rch * Lmax, 16), ntmp = pcg_roundup(MR * Lmax, 16);
        float* Ap = pbl_alloc(nAp + ntmp + Lmax * ldk);
        float* tmp = Ap + nAp;
        float* ET = tmp + ntmp;
        int64_t pb, pe, i0, i1, j0, rr, l, k, k0, c, r, s;
        if (!Ap) return -1;
        if (nr <= 0) { free(Ap); return 0; }
        for (pb = 0; pb < g->P; pb = pe) {
            pe = g->P - pb < PB ? g->P : pb + PB;
            const int64_t Lb = (pe - pb) * QN;
            /* E[:, block].T with rows of whole vectors, 16 maps at a time (16 rows of E read
               in step, each output row written 64 bytes at a time) */
            for (k0 = 0; k0 < ldk; k0 += 16) {
                const int64_t kn = K - k0 < 16 ? (K > k0 ? K - k0 : 0) : 16;
                l = 0;
                #ifdef PCG_X86_DISPATCH
                if (isa == 4 && kn == 16)
                    for (; l + 16 <= Lb; l += 16)
                        pbl_tr16(E + k0 * PQN + pb * QN + l, PQN, ET + l * ldk + k0, ldk);
                #endif
                for (; l < Lb; l++) {
                    float* et = ET + l * ldk + k0;
                    const float* e = E + k0 * PQN + pb * QN + l;
                    for (k = 0; k < kn; k++) et[k] = e[k * PQN];
                    for (; k < 16 && k0 + k < ldk; k++) et[k] = 0;
                }
            }
            for (i0 = 0; i0 < nr; i0 = i1) {
                i1 = nr - i0 < rch ? nr : i0 + rch;
                /* col rows [i0, i1), MR at a time, interleaved as the kernel's packed A */
                for (j0 = i0; j0 < i1; j0 += MR) {
                    float* a = Ap + (j0 - i0) * Lb;
                    #ifdef PCG_X86_DISPATCH
                    if (MR == 6 && isa == 4 && g->N % 16 == 0) {
                        int64_t crs[18];
                        const int nrow = i1 - j0 < 6 ? (int)(i1 - j0) : 6;
                        for (rr = 0; rr < nrow; rr++)
                            pbl_rcs(r0 + j0 + rr, g, crs + 3 * rr, crs + 3 * rr + 1, crs + 3 * rr + 2);
                        pbl_pack6(In, a, crs, nrow, pb, pe, g);
                        continue;
                    }
                    if (MR == 6 && isa == 4) {
                        /* batches not of whole vectors: contiguous window rows (memcpy-speed
                           copies), then one vector pass */
                        for (rr = 0; rr < 6; rr++) {
                            if (j0 + rr < i1) {
                                pbl_rcs(r0 + j0 + rr, g, &c, &r, &s);
                                pbl_im2row(In, tmp + rr * Lb, c, r, s, pb, pe, g);
                            } else memset(tmp + rr * Lb, 0, Lb * sizeof(float));
                        }
                        pbl_interleave6(tmp, Lb, a, Lb);
                        continue;
                    }
                    #endif
                    for (rr = 0; rr < MR; rr++) {
                        if (j0 + rr < i1) {
                            pbl_rcs(r0 + j0 + rr, g, &c, &r, &s);
                            pbl_im2row_strided(In, a + rr, MR, c, r, s, pb, pe, g);
                        } else for (l = 0; l < Lb; l++) a[l * MR + rr] = 0;
                    }
                }
                PBL_NN((i1 - i0, K, Lb, Ap, ET, ldk, GF + (r0 + i0) * K, K,
                                         (const float*)NULL, pb > 0))
            }
        }
        free(Ap);
        return 0;
    }

    /* The filter gradient transposed, for few output maps (K below a register tile's width):
       GFT (K, C*R*S) rows [k0, k1) = sum over blocks of E[rows, block] @ col[:, block].T, so
       that the kernel's wide side runs over the window rows. */
    static int pbl_backward_filter_t(const float* In, const float* E, float* GFT, int64_t k0, int64_t k1,
                                     int64_t PB, const pbl_geom* g, int isa) {
        const int64_t VW = pcg_width(isa, sizeof(float)), MR = pbl_mr(isa);
        const int64_t KC = g->C * g->R * g->S, KCp = pcg_roundup(KC, VW), nk = k1 - k0;
        const int64_t nkp = pcg_roundup(nk, MR), QN = g->Q * g->N, PQN = g->P * QN, Lmax = PB * QN;
        const int64_t nAp = pcg_roundup(nkp * Lmax, 16), ntmp = pcg_roundup(16 * Lmax, 16);
        float* Ap = pbl_alloc(nAp + ntmp + Lmax * KCp);
        float* tmp = Ap + nAp;
        float* colT = tmp + ntmp;
        int64_t pb, pe, i0, rr, l, j0, jj, c, r, s;
        if (!Ap) return -1;
        if (nk <= 0) { free(Ap); return 0; }
        for (pb = 0; pb < g->P; pb = pe) {
            pe = g->P - pb < PB ? g->P : pb + PB;
            const int64_t Lb = (pe - pb) * QN;
            for (i0 = 0; i0 < nkp; i0 += MR) {
                float* a = Ap + i0 * Lb;
                for (rr = 0; rr < MR; rr++) {
                    if (i0 + rr < nk) {
                        const float* e = E + (k0 + i0 + rr) * PQN + pb * QN;
                        for (l = 0; l < Lb; l++) a[l * MR + rr] = e[l];
                    } else for (l = 0; l < Lb; l++) a[l * MR + rr] = 0;
                }
            }
            for (j0 = 0; j0 < KCp; j0 += 16) {
                const int64_t nj = KCp - j0 < 16 ? KCp - j0 : 16;
                for (jj = 0; jj < nj; jj++) {
                    if (j0 + jj < KC) {
                        pbl_rcs(j0 + jj, g, &c, &r, &s);
                        pbl_im2row(In, tmp + jj * Lb, c, r, s, pb, pe, g);
                    } else memset(tmp + jj * Lb, 0, Lb * sizeof(float));
                }
                l = 0;
                #ifdef PCG_X86_DISPATCH
                if (isa == 4 && nj == 16)
                    for (; l + 16 <= Lb; l += 16) pbl_tr16(tmp + l, Lb, colT + l * KCp + j0, KCp);
                #endif
                for (; l < Lb; l++) {
                    float* d = colT + l * KCp + j0;
                    for (jj = 0; jj < nj; jj++) d[jj] = tmp[jj * Lb + l];
                }
            }
            PBL_NN((nk, KC, Lb, Ap, colT, KCp, GFT + k0 * KC, KC,
                                     (const float*)NULL, pb > 0))
        }
        free(Ap);
        return 0;
    }

    /* The filter gradient for unit width stride and whole-vector batches, without copies:
       for each filter tap (r, s) and output row p, the run of output positions whose window
       reads inside the image is one contiguous run of both the input rows (channel c's at
       stride H*W*N) and the error rows (map k's at stride P*Q*N), so grad_F[(c, r, s), k] sums
       dot products of runs straight from the arrays (the dot kernel, partial sums in vector
       registers), added up per tap in output-row order. Input channels [c0, c1). */
    static int pbl_backward_filter_dot(const float* In, const float* E, float* GF, int64_t c0, int64_t c1,
                                       const pbl_geom* g, int isa) {
        const int64_t N = g->N, K = g->K, RS = g->R * g->S, nc = c1 - c0;
        const int64_t QN = g->Q * N, PQN = g->P * QN, HWN = g->H * g->W * N;
        float* part = pbl_alloc(nc * K);
        int64_t r, s, p, c, k;
        if (!part) return -1;
        for (c = c0; c < c1; c++) memset(GF + c * RS * K, 0, RS * K * sizeof(float));
        for (r = 0; r < g->R; r++)
            for (s = 0; s < g->S; s++) {
                const int64_t x0 = s * g->dw - g->pw;
                int64_t qlo = x0 < 0 ? -x0 : 0, qhi = g->W - x0 < g->Q ? g->W - x0 : g->Q;
                if (qhi <= qlo) continue;
                for (p = 0; p < g->P; p++) {
                    const int64_t y = p * g->sh - g->ph + r * g->dh;
                    if (y < 0 || y >= g->H) continue;
                    const float* A = In + ((c0 * g->H + y) * g->W + qlo + x0) * N;
                    const float* B = E + (p * g->Q + qlo) * N;
                    PCG_ISA_CALL(pcg_f, dot, (nc, K, (qhi - qlo) * N, A, HWN, B, PQN, part, K))
                    for (c = 0; c < nc; c++) {
                        float* gf = GF + (((c0 + c) * g->R + r) * g->S + s) * K;
                        const float* pp = part + c * K;
                        for (k = 0; k < K; k++) gf[k] += pp[k];
                    }
                }
            }
        free(part);
        return 0;
    }

    /* Unit width stride, whole-vector batches: no window copies at all. For output row p and
       filter tap (r, s), the run of outputs whose window reads inside the image reads one run
       of input row y = p*sh - ph + r*dh in every channel (channel rows H*W*N apart), so
       O[:, p, run] += F[:, r, s, :].T @ In[:, y, run'] is one kernel call on the arrays
       themselves. Fp: per tap, F[:, r, s, :].T packed. Output rows [p0, p1). */
    static void pbl_forward_direct(const float* In, const float* Fp, float* O, int64_t p0, int64_t p1,
                                   const pbl_geom* g, int isa) {
        const int64_t N = g->N, K = g->K, C = g->C, Kp = pcg_roundup(K, pbl_mr(isa));
        const int64_t QN = g->Q * N, PQN = g->P * QN, HWN = g->H * g->W * N;
        int64_t p, r, s, k;
        for (k = 0; k < K; k++) memset(O + k * PQN + p0 * QN, 0, (p1 - p0) * QN * sizeof(float));
        for (p = p0; p < p1; p++)
            for (r = 0; r < g->R; r++) {
                const int64_t y = p * g->sh - g->ph + r * g->dh;
                if (y < 0 || y >= g->H) continue;
                for (s = 0; s < g->S; s++) {
                    const int64_t x0 = s * g->dw - g->pw;
                    const int64_t qlo = x0 < 0 ? -x0 : 0, qhi = g->W - x0 < g->Q ? g->W - x0 : g->Q;
                    if (qhi <= qlo) continue;
                    PBL_NN((K, (qhi - qlo) * N, C, Fp + (r * g->S + s) * Kp * C,
                            In + (y * g->W + qlo + x0) * N, HWN, O + (p * g->Q + qlo) * N, PQN,
                            (const float*)NULL, 1))
                }
            }
    }

    /* The data gradient the same way: grad_I[:, y, run'] += F[:, r, s, :] @ E[:, p, run] for
       input channels [c0, c1). FTp: per tap, F[c0:c1, r, s, :] packed (nc rounded up to MR). */
    static void pbl_backward_data_direct(const float* E, const float* FTp, float* GI, int64_t c0,
                                         int64_t c1, const pbl_geom* g, int isa) {
        const int64_t N = g->N, K = g->K, nc = c1 - c0, ncp = pcg_roundup(nc, pbl_mr(isa));
        const int64_t QN = g->Q * N, PQN = g->P * QN, HWN = g->H * g->W * N;
        int64_t p, r, s;
        memset(GI + c0 * HWN, 0, nc * HWN * sizeof(float));
        for (p = 0; p < g->P; p++)
            for (r = 0; r < g->R; r++) {
                const int64_t y = p * g->sh - g->ph + r * g->dh;
                if (y < 0 || y >= g->H) continue;
                for (s = 0; s < g->S; s++) {
                    const int64_t x0 = s * g->dw - g->pw;
                    const int64_t qlo = x0 < 0 ? -x0 : 0, qhi = g->W - x0 < g->Q ? g->W - x0 : g->Q;
                    if (qhi <= qlo) continue;
                    PBL_NN((nc, (qhi - qlo) * N, K, FTp + (r * g->S + s) * ncp * K,
                            E + (p * g->Q + qlo) * N, PQN, GI + ((c0 * g->H + y) * g->W + qlo + x0) * N,
                            HWN, (const float*)NULL, 1))
                }
            }
    }
    """
    ctypedef struct pbl_geom:
        int64_t C, H, W, N, K, R, S, sh, sw, ph, pw, dh, dw, P, Q
    int64_t pbl_mr(int isa) noexcept nogil
    int pbl_forward(const float* In, const float* Fp, float* O, int64_t p0, int64_t p1, int64_t PB,
                    int64_t KCB, const pbl_geom* g, int isa) noexcept nogil
    int pbl_backward_data(const float* E, const float* F, float* GI, int64_t c0, int64_t c1, int64_t PB,
                          int64_t RCH, const pbl_geom* g, int isa) noexcept nogil
    int pbl_backward_filter(const float* In, const float* E, float* GF, int64_t r0, int64_t r1, int64_t PB,
                            int64_t RCH, const pbl_geom* g, int isa) noexcept nogil
    int pbl_backward_filter_t(const float* In, const float* E, float* GFT, int64_t k0, int64_t k1,
                              int64_t PB, const pbl_geom* g, int isa) noexcept nogil
    int pbl_backward_filter_dot(const float* In, const float* E, float* GF, int64_t c0, int64_t c1,
                                const pbl_geom* g, int isa) noexcept nogil
    void pbl_forward_direct(const float* In, const float* Fp, float* O, int64_t p0, int64_t p1,
                            const pbl_geom* g, int isa) noexcept nogil
    void pbl_backward_data_direct(const float* E, const float* FTp, float* GI, int64_t c0, int64_t c1,
                                  const pbl_geom* g, int isa) noexcept nogil


# Positions per block (output rows x Q x N) in the batch-last products: the window copy of a
# block is read while in cache (forward, data gradient) or is the contraction of one product in
# registers (filter gradient).
# Window rows per product: the forward's contraction, the data gradient's and the filter
# gradient's rows of output (small enough for the operands to stay in L1 / L2). Picked on Zen 5
# (1 thread, convnet-benchmarks layers, batch 16): within a few percent over 2x either way.
_BL_POSITIONS = 4096
_BL_POSITIONS_FILTER = 1024
_BL_CONTRACTION = 128
_BL_ROWS = 64
_BL_ROWS_FILTER = 120
# Small filter gradients (K * C*R*S up to 64->64 3x3's, images up to 64x64) with unit width
# stride and whole-vector batches: dot products of runs read in place (no window copies), which
# measured 7-35% faster there and 10-40% slower on larger layers.
_BL_FILTER_DOT = True
# The transposed filter gradient (grad_F.T = E @ col.T): for fewer output maps than a register
# tile is wide, and for unit-stride layers with 56x56 outputs or more, where it measured 8-19%
# faster (64->128 at 112x112: 170 vs 208 ms; 128->256 at 56x56: 150 vs 162) and 10-20% slower
# at 28x28 and below. Not on AVX-512, where the windows' vector interleave (pbl_interleave6)
# made the plain form the faster one there too (64->128 at 112x112: 156 -> 143 ms; 128->256 at
# 56x56: 137 -> 126 ms).
_BL_FILTER_T_MAXK = 63
_BL_FILTER_T_AREA = 56 * 56
# Forward and data gradient without window copies (unit width stride, whole-vector batches) for
# images up to 32x32 and C * K up to 256 * 512: 5-15% faster there than the copies, 5-25%
# slower on 56x56 and larger images and on 512 -> 512 maps (measured on Zen 5).
_BL_DIRECT = True
_BL_DIRECT_AREA = 1024
_BL_DIRECT_WORK = 256 * 512
_BL_FILTER_DOT_WORK = 64 * 64 * 9
# On AVX-512, with the windows interleaved in vector registers (pbl_interleave6), the copies
# are the faster form above K * C*R*S of 8192 (GoogLeNet 3a 1x1, 192->64: 2.1 -> 1.5 ms; 5x5,
# 16->32: 1.9 -> 1.7; 64->64 3x3 at 56x56: 33.6 -> 18.0, at 32x32: 7.6 -> 5.5) and for window
# rows under 64 (3->32 3x3 at 32x32: 0.4 -> 0.2); the dot products stay ahead on the smallest
# (32->16 3x3: 0.6 vs 0.9 ms; 16->8 5x5: 0.5 vs 1.3; 64->32 1x1: 0.2 vs 0.3). The transposed
# form likewise only below 16 output maps there (16->8 5x5: 1.2 vs 1.3 ms; at 16 and 32 maps
# the plain form measured 10-25% faster).
_BL_FILTER_DOT_WORK_V4 = 8192
_BL_FILTER_T_MAXK_V4 = 15
_BL_FILTER_DOT_AREA = 4096


cdef bint _direct(pbl_geom* g, int isa):
    """Whether the copy-free products apply (unit width stride, whole-vector batches) and are
    chosen (_BL_DIRECT)."""
    return (_BL_DIRECT and g.sw == 1 and g.N % pcg_width(isa, 4) == 0
            and g.H * g.W <= _BL_DIRECT_AREA and g.C * g.K <= _BL_DIRECT_WORK)


cdef bint _bl_geom(pbl_geom* g, tuple geom):
    if len(geom) != 15:
        return False
    for v in geom:
        if not (0 <= v <= _INT_MAX):
            return False
    g.C, g.H, g.W, g.N, g.K, g.R, g.S, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.P, g.Q = geom
    if min(g.C, g.H, g.W, g.N, g.K, g.R, g.S, g.sh, g.sw, g.dh, g.dw, g.P, g.Q) < 1:
        return False
    return True


cdef bint _bl_ok(arrays, shapes):
    cdef int isa = pcg_isa()
    if isa < 3 and not pcg_forced():
        return False
    for A, shape in zip(arrays, shapes):
        if not isinstance(A, numpy.ndarray) or A.dtype != numpy.float32 or not A.flags.c_contiguous:
            return False
        if A.size != shape:
            return False
    return True


def forward_bl(I, F, O, tuple geom):
    """Batch-last forward: I (C*H*W*N values), F (C*R*S, K), O (K*P*Q*N values, written);
    geom = (C, H, W, N, K, R, S, sh, sw, ph, pw, dh, dw, P, Q). float32, C-contiguous arrays.
    Returns True when computed, None outside the fast case (then nothing was written)."""
    cdef pbl_geom g
    if not _bl_geom(&g, geom):
        return None
    cdef int64_t KC = g.C * g.R * g.S
    if not _bl_ok((I, F, O), (g.C * g.H * g.W * g.N, KC * g.K, g.K * g.P * g.Q * g.N)):
        return None
    if not O.flags.writeable:
        return None
    cdef int isa = pcg_isa()
    cdef int64_t Kp = pcg_roundup(g.K, pbl_mr(isa)), KCB = _BL_CONTRACTION, k0
    cdef int64_t rs, t, nc, step
    cdef cnp.ndarray fda, ida, oda
    cdef float* fdp
    if _direct(&g, isa):
        Frs = numpy.ascontiguousarray(F.reshape(g.C, g.R * g.S, g.K).transpose(1, 0, 2))  # (RS, C, K)
        Fd = numpy.empty(max(1, g.R * g.S * Kp * g.C), dtype=numpy.float32)
        fda = Frs
        oda = Fd
        fdp = <float*>cnp.PyArray_DATA(oda)
        for rs in range(g.R * g.S):
            pcg_pack_w_pcg_f(<const float*>cnp.PyArray_DATA(fda) + rs * g.C * g.K, fdp + rs * Kp * g.C,
                             1, g.C, g.K, pbl_mr(isa), 1)
        ida = I
        oda = O
        nc = _chunks(g.P)
        step = (g.P + nc - 1) // nc
        for t in prange(nc, nogil=True, schedule="static", num_threads=nc):
            if t * step < g.P:
                pbl_forward_direct(<const float*>cnp.PyArray_DATA(ida), fdp, <float*>cnp.PyArray_DATA(oda),
                                   t * step, min((t + 1) * step, g.P), &g, isa)
        return True
    Fp = numpy.empty(max(1, Kp * KC), dtype=numpy.float32)
    cdef cnp.ndarray fa = F, fpa = Fp, ia = I, oa = O
    for k0 in range(0, KC, KCB):
        pcg_pack_w_pcg_f(<const float*>cnp.PyArray_DATA(fa) + k0 * g.K,
                         <float*>cnp.PyArray_DATA(fpa) + k0 * Kp, 1, min(KCB, KC - k0), g.K,
                         pbl_mr(isa), 1)
    cdef int64_t PB = max(1, _BL_POSITIONS // (g.Q * g.N))
    cdef int64_t nblk = (g.P + PB - 1) // PB
    nc = _chunks(nblk)
    step = (nblk + nc - 1) // nc * PB
    cdef const float* ip = <const float*>cnp.PyArray_DATA(ia)
    cdef const float* fp = <const float*>cnp.PyArray_DATA(fpa)
    cdef float* op = <float*>cnp.PyArray_DATA(oa)
    cdef int failed = 0
    for t in prange(nc, nogil=True, schedule="static", num_threads=nc):
        if t * step < g.P:
            if pbl_forward(ip, fp, op, t * step, min((t + 1) * step, g.P), PB, KCB, &g, isa):
                failed += 1
    if failed:
        raise MemoryError("conv_gemm.forward_bl: cannot allocate a window buffer")
    return True


def backward_data_bl(E, F, GI, tuple geom):
    """Batch-last data gradient: E (K*P*Q*N), F (C*R*S, K) -> GI (C*H*W*N values, written)."""
    cdef pbl_geom g
    if not _bl_geom(&g, geom):
        return None
    cdef int64_t KC = g.C * g.R * g.S
    if not _bl_ok((E, F, GI), (g.K * g.P * g.Q * g.N, KC * g.K, g.C * g.H * g.W * g.N)):
        return None
    if not GI.flags.writeable:
        return None
    cdef int isa = pcg_isa()
    cdef cnp.ndarray ea = E, fa = F, ga = GI, fda
    cdef const float* ep = <const float*>cnp.PyArray_DATA(ea)
    cdef const float* fp = <const float*>cnp.PyArray_DATA(fa)
    cdef float* gp = <float*>cnp.PyArray_DATA(ga)
    cdef int64_t MR = pbl_mr(isa), rs, c0, ncp, tt, nct, stp
    cdef float* fdp
    if _direct(&g, isa):
        Frs = numpy.ascontiguousarray(F.reshape(g.C, g.R * g.S, g.K).transpose(1, 0, 2))  # (RS, C, K)
        nct = _chunks(max(1, g.C // MR))
        stp = pcg_roundup((g.C + nct - 1) // nct, MR)
        ncp = stp
        # per thread chunk of channels, per tap: F[chunk, r, s, :] packed (rows padded to MR)
        Fd = numpy.zeros(max(1, nct * g.R * g.S * ncp * g.K), dtype=numpy.float32)
        fda = Fd
        fdp = <float*>cnp.PyArray_DATA(fda)
        for tt in range(nct):
            c0 = tt * stp
            if c0 >= g.C:
                break
            for rs in range(g.R * g.S):
                blk = Frs[rs, c0:min(c0 + stp, g.C)]
                blk = numpy.ascontiguousarray(blk)
                pcg_pack_w_pcg_f(<const float*>cnp.PyArray_DATA(<cnp.ndarray>blk),
                                 fdp + (tt * g.R * g.S + rs) * ncp * g.K, 1, blk.shape[0], g.K, MR, 0)
        for tt in prange(nct, nogil=True, schedule="static", num_threads=nct):
            if tt * stp < g.C:
                pbl_backward_data_direct(ep, fdp + tt * g.R * g.S * ncp * g.K, gp, tt * stp,
                                         min((tt + 1) * stp, g.C), &g, isa)
        return True
    cdef int64_t PB = max(1, _BL_POSITIONS // (g.Q * g.N)), RCH = _BL_ROWS
    cdef int64_t nc = _chunks(g.C), t, step = (g.C + nc - 1) // nc
    cdef int failed = 0
    for t in prange(nc, nogil=True, schedule="static", num_threads=nc):
        if t * step < g.C:
            if pbl_backward_data(ep, fp, gp, t * step, min((t + 1) * step, g.C), PB, RCH, &g, isa):
                failed += 1
    if failed:
        raise MemoryError("conv_gemm.backward_data_bl: cannot allocate a buffer")
    return True


def backward_filter_bl(I, E, GF, tuple geom):
    """Batch-last filter gradient: I (C*H*W*N), E (K*P*Q*N) -> GF (C*R*S, K), written."""
    cdef pbl_geom g
    if not _bl_geom(&g, geom):
        return None
    cdef int64_t KC = g.C * g.R * g.S
    if not _bl_ok((I, E, GF), (g.C * g.H * g.W * g.N, g.K * g.P * g.Q * g.N, KC * g.K)):
        return None
    if not GF.flags.writeable:
        return None
    cdef int isa = pcg_isa()
    cdef int64_t MR = pbl_mr(isa)
    cdef cnp.ndarray ia = I, ea = E, ga = GF, gta
    cdef const float* ip = <const float*>cnp.PyArray_DATA(ia)
    cdef const float* ep = <const float*>cnp.PyArray_DATA(ea)
    cdef float* gp = <float*>cnp.PyArray_DATA(ga)
    cdef float* gtp
    cdef int64_t t, nc, step, PB
    cdef int failed = 0
    if (_BL_FILTER_DOT and g.sw == 1 and g.N % pcg_width(isa, 4) == 0
            and g.K * KC <= (_BL_FILTER_DOT_WORK if isa != 4 else _BL_FILTER_DOT_WORK_V4)
            and (isa != 4 or KC >= 4 * pcg_width(isa, 4)) and g.H * g.W <= _BL_FILTER_DOT_AREA):
        nc = _chunks(g.C)
        step = (g.C + nc - 1) // nc
        for t in prange(nc, nogil=True, schedule="static", num_threads=nc):
            if t * step < g.C:
                if pbl_backward_filter_dot(ip, ep, gp, t * step, min((t + 1) * step, g.C), &g, isa):
                    failed += 1
        if failed:
            raise MemoryError("conv_gemm.backward_filter_bl: cannot allocate a buffer")
        return True
    if ((g.K <= (_BL_FILTER_T_MAXK if isa != 4 else _BL_FILTER_T_MAXK_V4) or (g.sw == 1 and g.P * g.Q >= _BL_FILTER_T_AREA and isa != 4))
            and KC >= 4 * pcg_width(isa, 4)):
        # few output maps: the transposed product, wide over the window rows
        GFT = numpy.empty((g.K, KC), dtype=numpy.float32)
        gta = GFT
        gtp = <float*>cnp.PyArray_DATA(gta)
        PB = max(1, _BL_POSITIONS_FILTER // (g.Q * g.N))
        nc = _chunks(max(1, g.K // MR))
        step = pcg_roundup((g.K + nc - 1) // nc, MR)
        for t in prange(nc, nogil=True, schedule="static", num_threads=nc):
            if t * step < g.K:
                if pbl_backward_filter_t(ip, ep, gtp, t * step, min((t + 1) * step, g.K), PB, &g, isa):
                    failed += 1
        if failed:
            raise MemoryError("conv_gemm.backward_filter_bl: cannot allocate a buffer")
        GF.reshape(KC, g.K)[...] = GFT.T
        return True
    PB = max(1, _BL_POSITIONS_FILTER // (g.Q * g.N))
    cdef int64_t RCH = _BL_ROWS_FILTER
    nc = _chunks(max(1, KC // (4 * MR)))
    step = pcg_roundup((KC + nc - 1) // nc, MR)
    for t in prange(nc, nogil=True, schedule="static", num_threads=nc):
        if t * step < KC:
            if pbl_backward_filter(ip, ep, gp, t * step, min((t + 1) * step, KC), PB, RCH, &g, isa):
                failed += 1
    if failed:
        raise MemoryError("conv_gemm.backward_filter_bl: cannot allocate a buffer")
    return True
