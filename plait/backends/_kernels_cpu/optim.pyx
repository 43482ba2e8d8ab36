# cython: language_level=3
"""CPU kernels for Ops.adam and Ops.adam_step (clip, L2 or weight decay, Adam, average in one pass).

Each entry point takes the arrays only when all are C-contiguous, of one dtype (float32 or
float64) and of one shape, and otherwise declines, so that the caller hands the case to the
Ops reference. Every value is computed with the reference's numpy operations, in its order and
at the arrays' precision, with each Python-float hyper-parameter rounded to that precision
once, as numpy does with a Python scalar; the results are therefore the reference's, bit for
bit, except for the clipping norm, which is summed here in float64 (numpy sums float32
squares in float32), and except that the step flushes subnormal values to zero (see
plait_adam_f32: on x86 each operation on one costs ~20 times a normal one, and Adam's first
moment of a weight whose gradient stays zero becomes subnormal after ~800 steps).

The global norm is a sum over fixed blocks whose partial sums are added in block order, so
that, like the elementwise pass, it does not depend on the thread count.
"""
cimport numpy as cnp
from ._arrays cimport _shares
from cython.parallel cimport prange
from libc.math cimport sqrt
from libc.stdlib cimport free, malloc

cnp.import_array()

cdef extern from *:
    """
    #include <math.h>
    #include "plait_isa.h"
    #if defined(__SSE2__) || defined(_M_X64)
    #include <emmintrin.h>
    #define PLAIT_SSE2 1
    #else
    #define PLAIT_SSE2 0
    #endif

    typedef struct {
        double beta1, one_minus_beta1, beta2, one_minus_beta2, eps, learn_rate, mod_rate;
        double L2, scale, weight_decay, one_minus_decay;
        int use_L2, use_scale, use_decay, use_average, keep_grad;
    } plait_adam_args;

    /* NOTE: the loops are vectorized by hand: C's sqrt may set errno, which stops GCC from
       vectorizing it unless the whole build uses -fno-math-errno. Vector and scalar lanes
       run the same IEEE operations (no FMA), so both give the reference's bits.

       One Adam step on values i0..i1-1; each line is one numpy statement of the reference. */
    #define PLAIT_ADAM_LANE(T, SQRT, w, g, m1, m2, a)                                            \\
        if (use_l2) g = g + l2 * w;                                                              \\
        if (use_scale) g = g * scale;                                                            \\
        m1 = m1 * b1;                                                                            \\
        m1 = m1 + c1 * g;                                                                        \\
        m2 = m2 * b2;                                                                            \\
        m2 = m2 + (c2 * g) * g;                                                                  \\
        w = w - lr * (m1 / (mod * SQRT(m2) + eps));                                              \\
        if (use_wd) w = w - wd * w;                                                              \\
        if (use_avg) a = a - ca * (a - w);

    #define PLAIT_ADAM_SETUP(T)                                                                  \\
        const T b1 = (T)args->beta1, c1 = (T)args->one_minus_beta1;                              \\
        const T b2 = (T)args->beta2, c2 = (T)args->one_minus_beta2;                              \\
        const T eps = (T)args->eps, lr = (T)args->learn_rate, mod = (T)args->mod_rate;           \\
        const T l2 = (T)args->L2, scale = (T)args->scale, wd = (T)args->weight_decay;            \\
        const T ca = (T)args->one_minus_decay;                                                   \\
        const int use_l2 = args->use_L2, use_scale = args->use_scale;                            \\
        const int use_wd = args->use_decay, use_avg = args->use_average;                         \\
        const int keep_g = args->keep_grad;                                                      \\
        Py_ssize_t i = i0;

    #define PLAIT_ADAM_TAIL(T, SQRT)                                                             \\
        for (; i < i1; ++i) {                                                                    \\
            T w = W[i], g = G[i], m1 = M1[i], m2 = M2[i], a = use_avg ? A[i] : (T)0;             \\
            PLAIT_ADAM_LANE(T, SQRT, w, g, m1, m2, a)                                            \\
            M1[i] = m1; M2[i] = m2; W[i] = w;                                                    \\
            if (!keep_g) G[i] = (T)0;                                                            \\
            if (use_avg) A[i] = a;                                                               \\
        }

    #if PLAIT_SSE2
    /* Vector versions of +, -, *, / and sqrt, so that PLAIT_ADAM_LANE reads the same for both. */
    #define PLAIT_VEC_BODY(P, VT, V, LANES, T)                                                     \\
        const VT vb1 = P##_set1_##V(b1), vc1 = P##_set1_##V(c1);                                 \\
        const VT vb2 = P##_set1_##V(b2), vc2 = P##_set1_##V(c2);                                 \\
        const VT veps = P##_set1_##V(eps), vlr = P##_set1_##V(lr), vmod = P##_set1_##V(mod);     \\
        const VT vl2 = P##_set1_##V(l2), vscale = P##_set1_##V(scale), vwd = P##_set1_##V(wd);   \\
        const VT vca = P##_set1_##V(ca), vzero = P##_setzero_##V();                              \\
        for (; i + LANES <= i1; i += LANES) {                                                    \\
            VT w = P##_loadu_##V(W + i), g = P##_loadu_##V(G + i);                               \\
            VT m1 = P##_loadu_##V(M1 + i), m2 = P##_loadu_##V(M2 + i);                           \\
            if (use_l2) g = P##_add_##V(g, P##_mul_##V(vl2, w));                                 \\
            if (use_scale) g = P##_mul_##V(g, vscale);                                           \\
            m1 = P##_add_##V(P##_mul_##V(m1, vb1), P##_mul_##V(vc1, g));                         \\
            m2 = P##_add_##V(P##_mul_##V(m2, vb2), P##_mul_##V(P##_mul_##V(vc2, g), g));         \\
            const VT den = P##_add_##V(P##_mul_##V(vmod, P##_sqrt_##V(m2)), veps);               \\
            w = P##_sub_##V(w, P##_mul_##V(vlr, P##_div_##V(m1, den)));                          \\
            if (use_wd) w = P##_sub_##V(w, P##_mul_##V(vwd, w));                                 \\
            P##_storeu_##V(M1 + i, m1);                                                          \\
            P##_storeu_##V(M2 + i, m2);                                                          \\
            P##_storeu_##V(W + i, w);                                                            \\
            if (!keep_g) P##_storeu_##V(G + i, vzero);                                           \\
            if (use_avg) {                                                                       \\
                VT a = P##_loadu_##V(A + i);                                                     \\
                P##_storeu_##V(A + i, P##_sub_##V(a, P##_mul_##V(vca, P##_sub_##V(a, w))));      \\
            }                                                                                    \\
        }
    #else
    #define PLAIT_VEC_BODY(P, VT, V, LANES, T)
    #endif

    static void plait_adam_f32_sse2(float *W, float *G, float *M1, float *M2, float *A,
                                    const plait_adam_args *args, Py_ssize_t i0, Py_ssize_t i1) {
        PLAIT_ADAM_SETUP(float)
        PLAIT_VEC_BODY(_mm, __m128, ps, 4, float)
        PLAIT_ADAM_TAIL(float, sqrtf)
    }

    static void plait_adam_f64_sse2(double *W, double *G, double *M1, double *M2, double *A,
                                    const plait_adam_args *args, Py_ssize_t i0, Py_ssize_t i1) {
        PLAIT_ADAM_SETUP(double)
        PLAIT_VEC_BODY(_mm, __m128d, pd, 2, double)
        PLAIT_ADAM_TAIL(double, sqrt)
    }

    /* 256-bit copies for CPUs with AVX, chosen at run time. The target is plain "avx", not
       "avx2"/"fma": without FMA instructions the compiler cannot fuse a multiply and an add, so
       every lane still rounds exactly as the reference's separate numpy operations do. */
    #if PLAIT_SSE2 && defined(__GNUC__) && defined(__x86_64__)
    #include <immintrin.h>
    #define PLAIT_AVX_DISPATCH 1
    __attribute__((target("avx")))
    static void plait_adam_f32_avx(float *W, float *G, float *M1, float *M2, float *A,
                                   const plait_adam_args *args, Py_ssize_t i0, Py_ssize_t i1) {
        PLAIT_ADAM_SETUP(float)
        PLAIT_VEC_BODY(_mm256, __m256, ps, 8, float)
        PLAIT_ADAM_TAIL(float, sqrtf)
    }

    __attribute__((target("avx")))
    static void plait_adam_f64_avx(double *W, double *G, double *M1, double *M2, double *A,
                                   const plait_adam_args *args, Py_ssize_t i0, Py_ssize_t i1) {
        PLAIT_ADAM_SETUP(double)
        PLAIT_VEC_BODY(_mm256, __m256d, pd, 4, double)
        PLAIT_ADAM_TAIL(double, sqrt)
    }

    static int plait_use_avx(void) {
        static int known = -1;
        if (known < 0) {
            __builtin_cpu_init();
            known = (PLAIT_ISA_ALLOWS(3) && __builtin_cpu_supports("avx")) ? 1 : 0;
        }
        return known;
    }

    /* 512-bit copies where the build allows AVX-512 and the CPU has it: Adam's square root and
       division are its cost per value, and AVX-512 does 16 lanes of each per instruction. The
       target is "avx512f" without "fma", and contraction is off: every lane still rounds each
       operation apart, as the reference does. */
    #define PLAIT_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
    __attribute__((target("avx512f,no-fma"))) PLAIT_NO_CONTRACT
    static void plait_adam_f32_avx512(float *W, float *G, float *M1, float *M2, float *A,
                                      const plait_adam_args *args, Py_ssize_t i0, Py_ssize_t i1) {
        PLAIT_ADAM_SETUP(float)
        PLAIT_VEC_BODY(_mm512, __m512, ps, 16, float)
        PLAIT_ADAM_TAIL(float, sqrtf)
    }

    __attribute__((target("avx512f,no-fma"))) PLAIT_NO_CONTRACT
    static void plait_adam_f64_avx512(double *W, double *G, double *M1, double *M2, double *A,
                                      const plait_adam_args *args, Py_ssize_t i0, Py_ssize_t i1) {
        PLAIT_ADAM_SETUP(double)
        PLAIT_VEC_BODY(_mm512, __m512d, pd, 8, double)
        PLAIT_ADAM_TAIL(double, sqrt)
    }

    static int plait_use_avx512(void) {
        static int known = -1;
        if (known < 0) {
            __builtin_cpu_init();
            known = (PLAIT_ISA_ALLOWS(4) && __builtin_cpu_supports("avx512f")) ? 1 : 0;
        }
        return known;
    }
    #else
    #define PLAIT_AVX_DISPATCH 0
    #endif

    /* Subnormal values (below 1.2e-38 in float32, 2.2e-308 in float64) are flushed to zero
       while a step runs: the MXCSR's flush-to-zero and denormals-are-zero bits are set on
       entry and the caller's MXCSR is restored on exit (per thread: each OpenMP block sets its
       own). Adam makes such values itself: a weight whose gradient stays zero (an MNIST border
       pixel's, a dead unit's) has its first moment multiplied by beta1 every step, and after
       ~800 steps it is subnormal; x86 cores take a microcode assist for every operation on one
       (15 ns a value against 0.8 on an Emerald Rapids Xeon, 2026-11-27), which made Adam half
       of an MLP's time at batch 16 (bench/README.md, "Subnormal moments"). The flush changes
       no bit of a result that is not subnormal itself or computed from one; a flushed first
       moment's weight step would have been below 1.2e-30 (learn rate <= 1, eps >= 1e-8). */
    #if PLAIT_SSE2
    #include <xmmintrin.h>
    #define PLAIT_FLUSH_BITS 0x8040u  /* MXCSR: flush-to-zero (bit 15), denormals-are-zero (bit 6) */
    #define PLAIT_FLUSH_BEGIN const unsigned int plait_csr_ = _mm_getcsr(); _mm_setcsr(plait_csr_ | PLAIT_FLUSH_BITS);
    #define PLAIT_FLUSH_END _mm_setcsr(plait_csr_);
    #else
    #define PLAIT_FLUSH_BEGIN
    #define PLAIT_FLUSH_END
    #endif

    static void plait_adam_f32(float *W, float *G, float *M1, float *M2, float *A,
                               const plait_adam_args *args, Py_ssize_t i0, Py_ssize_t i1) {
        PLAIT_FLUSH_BEGIN
    #if PLAIT_AVX_DISPATCH
        if (plait_use_avx512()) plait_adam_f32_avx512(W, G, M1, M2, A, args, i0, i1);
        else if (plait_use_avx()) plait_adam_f32_avx(W, G, M1, M2, A, args, i0, i1);
        else
    #endif
        plait_adam_f32_sse2(W, G, M1, M2, A, args, i0, i1);
        PLAIT_FLUSH_END
    }

    static void plait_adam_f64(double *W, double *G, double *M1, double *M2, double *A,
                               const plait_adam_args *args, Py_ssize_t i0, Py_ssize_t i1) {
        PLAIT_FLUSH_BEGIN
    #if PLAIT_AVX_DISPATCH
        if (plait_use_avx512()) plait_adam_f64_avx512(W, G, M1, M2, A, args, i0, i1);
        else if (plait_use_avx()) plait_adam_f64_avx(W, G, M1, M2, A, args, i0, i1);
        else
    #endif
        plait_adam_f64_sse2(W, G, M1, M2, A, args, i0, i1);
        PLAIT_FLUSH_END
    }

    /* Sum of squares of (G + L2 * W) over i0..i1-1 in float64: element i0 + 8k + j goes to
       accumulator j, the accumulators are added pairwise, then the tail. The vector and scalar
       paths add the same numbers in the same order. */
    #if PLAIT_AVX_DISPATCH
    /* The same sum as plait_sumsq_f32 below (element i0 + 8k + j to accumulator j, float L2
       term, no FMA), 8 floats per step. */
    __attribute__((target("avx")))
    static double plait_sumsq_f32_avx(const float *G, const float *W, double L2, int use_l2,
                                      Py_ssize_t i0, Py_ssize_t i1) {
        const float l2 = (float)L2;
        double acc[8];
        double tail = 0;
        Py_ssize_t i = i0;
        __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
        const __m256 vl2 = _mm256_set1_ps(l2);
        for (; i + 8 <= i1; i += 8) {
            __m256 g = _mm256_loadu_ps(G + i);
            if (use_l2) g = _mm256_add_ps(g, _mm256_mul_ps(vl2, _mm256_loadu_ps(W + i)));
            const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(g));
            const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(g, 1));
            a0 = _mm256_add_pd(a0, _mm256_mul_pd(lo, lo));
            a1 = _mm256_add_pd(a1, _mm256_mul_pd(hi, hi));
        }
        _mm256_storeu_pd(acc, a0);
        _mm256_storeu_pd(acc + 4, a1);
        for (; i < i1; ++i) {
            float g = G[i];
            if (use_l2) g = g + l2 * W[i];
            tail += (double)g * (double)g;
        }
        return (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) + tail;
    }
    #endif

    static double plait_sumsq_f32(const float *G, const float *W, double L2, int use_l2,
                                  Py_ssize_t i0, Py_ssize_t i1) {
    #if PLAIT_AVX_DISPATCH
        if (plait_use_avx()) return plait_sumsq_f32_avx(G, W, L2, use_l2, i0, i1);
    #endif
        const float l2 = (float)L2;
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        double tail = 0;
        Py_ssize_t i = i0;
    #if PLAIT_SSE2
        __m128d a01 = _mm_setzero_pd(), a23 = _mm_setzero_pd();
        __m128d a45 = _mm_setzero_pd(), a67 = _mm_setzero_pd();
        const __m128 vl2 = _mm_set1_ps(l2);
        for (; i + 8 <= i1; i += 8) {
            __m128 g0 = _mm_loadu_ps(G + i), g1 = _mm_loadu_ps(G + i + 4);
            if (use_l2) {
                g0 = _mm_add_ps(g0, _mm_mul_ps(vl2, _mm_loadu_ps(W + i)));
                g1 = _mm_add_ps(g1, _mm_mul_ps(vl2, _mm_loadu_ps(W + i + 4)));
            }
            const __m128d d0 = _mm_cvtps_pd(g0), d1 = _mm_cvtps_pd(_mm_movehl_ps(g0, g0));
            const __m128d d2 = _mm_cvtps_pd(g1), d3 = _mm_cvtps_pd(_mm_movehl_ps(g1, g1));
            a01 = _mm_add_pd(a01, _mm_mul_pd(d0, d0));
            a23 = _mm_add_pd(a23, _mm_mul_pd(d1, d1));
            a45 = _mm_add_pd(a45, _mm_mul_pd(d2, d2));
            a67 = _mm_add_pd(a67, _mm_mul_pd(d3, d3));
        }
        _mm_storeu_pd(acc, a01); _mm_storeu_pd(acc + 2, a23);
        _mm_storeu_pd(acc + 4, a45); _mm_storeu_pd(acc + 6, a67);
    #endif
        for (; i + 8 <= i1; i += 8) {
            for (int j = 0; j < 8; ++j) {
                float g = G[i + j];
                if (use_l2) g = g + l2 * W[i + j];
                acc[j] += (double)g * (double)g;
            }
        }
        for (; i < i1; ++i) {
            float g = G[i];
            if (use_l2) g = g + l2 * W[i];
            tail += (double)g * (double)g;
        }
        return (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) + tail;
    }

    static double plait_sumsq_f64(const double *G, const double *W, double l2, int use_l2,
                                  Py_ssize_t i0, Py_ssize_t i1) {
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        double tail = 0;
        Py_ssize_t i = i0;
    #if PLAIT_SSE2
        __m128d a01 = _mm_setzero_pd(), a23 = _mm_setzero_pd();
        __m128d a45 = _mm_setzero_pd(), a67 = _mm_setzero_pd();
        const __m128d vl2 = _mm_set1_pd(l2);
        for (; i + 8 <= i1; i += 8) {
            __m128d g0 = _mm_loadu_pd(G + i), g1 = _mm_loadu_pd(G + i + 2);
            __m128d g2 = _mm_loadu_pd(G + i + 4), g3 = _mm_loadu_pd(G + i + 6);
            if (use_l2) {
                g0 = _mm_add_pd(g0, _mm_mul_pd(vl2, _mm_loadu_pd(W + i)));
                g1 = _mm_add_pd(g1, _mm_mul_pd(vl2, _mm_loadu_pd(W + i + 2)));
                g2 = _mm_add_pd(g2, _mm_mul_pd(vl2, _mm_loadu_pd(W + i + 4)));
                g3 = _mm_add_pd(g3, _mm_mul_pd(vl2, _mm_loadu_pd(W + i + 6)));
            }
            a01 = _mm_add_pd(a01, _mm_mul_pd(g0, g0));
            a23 = _mm_add_pd(a23, _mm_mul_pd(g1, g1));
            a45 = _mm_add_pd(a45, _mm_mul_pd(g2, g2));
            a67 = _mm_add_pd(a67, _mm_mul_pd(g3, g3));
        }
        _mm_storeu_pd(acc, a01); _mm_storeu_pd(acc + 2, a23);
        _mm_storeu_pd(acc + 4, a45); _mm_storeu_pd(acc + 6, a67);
    #endif
        for (; i + 8 <= i1; i += 8) {
            for (int j = 0; j < 8; ++j) {
                double g = G[i + j];
                if (use_l2) g = g + l2 * W[i + j];
                acc[j] += g * g;
            }
        }
        for (; i < i1; ++i) {
            double g = G[i];
            if (use_l2) g = g + l2 * W[i];
            tail += g * g;
        }
        return (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) + tail;
    }
    """
    ctypedef struct plait_adam_args:
        double beta1, one_minus_beta1, beta2, one_minus_beta2, eps, learn_rate, mod_rate
        double L2, scale, weight_decay, one_minus_decay
        int use_L2, use_scale, use_decay, use_average, keep_grad

    void plait_adam_f32(float *W, float *G, float *M1, float *M2, float *A,
                        const plait_adam_args *args, Py_ssize_t i0, Py_ssize_t i1) nogil
    void plait_adam_f64(double *W, double *G, double *M1, double *M2, double *A,
                        const plait_adam_args *args, Py_ssize_t i0, Py_ssize_t i1) nogil
    double plait_sumsq_f32(const float *G, const float *W, double L2, int use_l2,
                           Py_ssize_t i0, Py_ssize_t i1) nogil
    double plait_sumsq_f64(const double *G, const double *W, double L2, int use_l2,
                           Py_ssize_t i0, Py_ssize_t i1) nogil

cdef enum:
    # Values per block: the unit of both thread scheduling and the norm's partial sums.
    _BLOCK = 1 << 15
    # Arrays shorter than this run on one thread: the work (~100 us) is then too small to risk
    # waiting for a second thread that a busy machine has not scheduled yet.
    _PARALLEL_MIN = 1 << 18


cdef void _adam_blocks(bint is_f32, void* W, void* G, void* M1, void* M2, void* A,
                       const plait_adam_args* args, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t blk, i0, n_blocks = (n + _BLOCK - 1) // _BLOCK
    if n < _PARALLEL_MIN:
        if is_f32:
            plait_adam_f32(<float*>W, <float*>G, <float*>M1, <float*>M2, <float*>A, args, 0, n)
        else:
            plait_adam_f64(<double*>W, <double*>G, <double*>M1, <double*>M2, <double*>A, args, 0, n)
        return
    for blk in prange(n_blocks, schedule="static"):
        i0 = blk * _BLOCK
        if is_f32:
            plait_adam_f32(<float*>W, <float*>G, <float*>M1, <float*>M2, <float*>A, args,
                           i0, min(i0 + _BLOCK, n))
        else:
            plait_adam_f64(<double*>W, <double*>G, <double*>M1, <double*>M2, <double*>A, args,
                           i0, min(i0 + _BLOCK, n))


cdef inline double _block_sumsq(bint is_f32, const void* G, const void* W, double L2, bint use_l2,
                                Py_ssize_t blk, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i0 = blk * _BLOCK
    if is_f32:
        return plait_sumsq_f32(<const float*>G, <const float*>W, L2, use_l2, i0, min(i0 + _BLOCK, n))
    return plait_sumsq_f64(<const double*>G, <const double*>W, L2, use_l2, i0, min(i0 + _BLOCK, n))


cdef double _sumsq(bint is_f32, const void* G, const void* W, double L2, bint use_l2,
                   Py_ssize_t n) noexcept nogil:
    """Sum of squares as block sums added in block order: the same number serial or parallel."""
    cdef Py_ssize_t blk, n_blocks = (n + _BLOCK - 1) // _BLOCK
    cdef double total = 0
    cdef double* partial = NULL
    if n >= _PARALLEL_MIN:
        partial = <double*>malloc(n_blocks * sizeof(double))
    if partial == NULL:
        for blk in range(n_blocks):
            total += _block_sumsq(is_f32, G, W, L2, use_l2, blk, n)
        return total
    for blk in prange(n_blocks, schedule="static"):
        partial[blk] = _block_sumsq(is_f32, G, W, L2, use_l2, blk, n)
    for blk in range(n_blocks):
        total += partial[blk]
    free(partial)
    return total


cdef plait_adam_args _args(double beta1, double beta2, double eps, double learn_rate, double mod_rate):
    cdef plait_adam_args args
    args.beta1 = beta1
    args.one_minus_beta1 = 1.0 - beta1
    args.beta2 = beta2
    args.one_minus_beta2 = 1.0 - beta2
    args.eps = eps
    args.learn_rate = learn_rate
    args.mod_rate = mod_rate
    args.L2 = 0.0
    args.scale = 1.0
    args.weight_decay = 0.0
    args.one_minus_decay = 0.0
    args.use_L2 = 0
    args.use_scale = 0
    args.use_decay = 0
    args.use_average = 0
    args.keep_grad = 0
    return args


cdef inline bint _is_floats(object X, int itemsize, cnp.ndarray like):
    """A C-contiguous, aligned, writeable, native float array; of `like`'s dtype and shape if given."""
    if not isinstance(X, cnp.ndarray):
        return False
    cdef cnp.ndarray A = <cnp.ndarray>X
    if not (
        cnp.PyArray_ISFLOAT(A)
        and cnp.PyArray_ITEMSIZE(A) == itemsize
        and cnp.PyArray_ISCARRAY(A)
        and cnp.PyArray_ISNOTSWAPPED(A)
    ):
        return False
    return like is None or cnp.PyArray_SAMESHAPE(A, like)


cdef bint _suits(object W, object G, object M1, object M2, object A):
    """All arrays C-contiguous float32 (or all float64) of one shape; A may be None."""
    if not isinstance(W, cnp.ndarray):
        return False
    cdef int itemsize = cnp.PyArray_ITEMSIZE(<cnp.ndarray>W)
    if itemsize != 4 and itemsize != 8:
        return False
    cdef cnp.ndarray like = <cnp.ndarray>W
    if not (
        _is_floats(W, itemsize, None)
        and _is_floats(G, itemsize, like)
        and _is_floats(M1, itemsize, like)
        and _is_floats(M2, itemsize, like)
        and (A is None or _is_floats(A, itemsize, like))
    ):
        return False
    # Every array is written (G zeroed): one pass over shared memory would read values it has
    # already updated; the reference's steps then give other numbers, so it computes those.
    return not (
        _shares(W, G) or _shares(W, M1) or _shares(W, M2) or _shares(G, M1) or _shares(G, M2)
        or _shares(M1, M2)
        or (A is not None and (_shares(A, W) or _shares(A, G) or _shares(A, M1) or _shares(A, M2)))
    )


cdef inline bint _is_number(object x):
    # NOTE: numpy works a Python float into an array at the array's precision but a numpy
    # float64 scalar at float64; the kernels copy the first rule, so numpy scalars (and
    # anything else) are left to the reference.
    return type(x) is float or type(x) is int


def adam(object W, object G, object M1, object M2, object beta1, object beta2, object eps,
         object learn_rate, object mod_rate, bint keep_gradient=False) -> bool:
    """One Adam step in place on W, M1 and M2; zeroes G unless keep_gradient (Ops.adam's arithmetic).

    Returns False, touching nothing, unless the arrays are C-contiguous, of one float dtype and
    one shape, and the hyper-parameters are Python numbers.
    """
    if not (
        _suits(W, G, M1, M2, None)
        and _is_number(beta1) and _is_number(beta2) and _is_number(eps)
        and _is_number(learn_rate) and _is_number(mod_rate)
    ):
        return False
    cdef plait_adam_args args = _args(beta1, beta2, eps, learn_rate, mod_rate)
    args.keep_grad = keep_gradient
    cdef bint is_f32 = cnp.PyArray_ITEMSIZE(<cnp.ndarray>W) == 4
    cdef Py_ssize_t n = cnp.PyArray_SIZE(<cnp.ndarray>W)
    cdef void* w = cnp.PyArray_DATA(<cnp.ndarray>W)
    cdef void* g = cnp.PyArray_DATA(<cnp.ndarray>G)
    cdef void* m1 = cnp.PyArray_DATA(<cnp.ndarray>M1)
    cdef void* m2 = cnp.PyArray_DATA(<cnp.ndarray>M2)
    with nogil:
        _adam_blocks(is_f32, w, g, m1, m2, NULL, &args, n)
    return True


cdef bint _step(object W, object G, object M1, object M2, object A, object beta1, object beta2,
                object eps, object learn_rate, object mod_rate, object L2, object weight_decay,
                object nr_update, object max_decay, double clip, double scale):
    """The step of adam_step (clip > 0: clip to that norm; else scale != 1: multiply by scale)."""
    if not (
        _suits(W, G, M1, M2, A)
        and _is_number(beta1) and _is_number(beta2) and _is_number(eps)
        and _is_number(learn_rate) and _is_number(mod_rate) and _is_number(L2)
        and _is_number(weight_decay) and _is_number(nr_update) and _is_number(max_decay)
    ):
        return False
    cdef plait_adam_args args = _args(beta1, beta2, eps, learn_rate, mod_rate)
    cdef bint is_f32 = cnp.PyArray_ITEMSIZE(<cnp.ndarray>W) == 4
    cdef Py_ssize_t n = cnp.PyArray_SIZE(<cnp.ndarray>W)
    cdef void* w = cnp.PyArray_DATA(<cnp.ndarray>W)
    cdef void* g = cnp.PyArray_DATA(<cnp.ndarray>G)
    cdef void* m1 = cnp.PyArray_DATA(<cnp.ndarray>M1)
    cdef void* m2 = cnp.PyArray_DATA(<cnp.ndarray>M2)
    cdef void* avg = NULL
    cdef double norm
    if A is not None:
        # The decay exactly as update_averages computes it.
        decay = min((1.0 + nr_update) / (10.0 + nr_update), max_decay)
        avg = cnp.PyArray_DATA(<cnp.ndarray>A)
        args.use_average = 1
        args.one_minus_decay = 1.0 - decay
    args.L2 = L2
    args.use_L2 = args.L2 != 0.0
    args.weight_decay = weight_decay
    args.use_decay = args.weight_decay != 0.0
    if clip <= 0.0 and scale != 1.0:
        args.use_scale = 1
        args.scale = scale
    with nogil:
        if clip > 0.0:
            norm = sqrt(_sumsq(is_f32, g, w, args.L2, args.use_L2, n))
            if norm >= clip and norm > 0.0:
                args.use_scale = 1
                args.scale = clip / norm
        _adam_blocks(is_f32, w, g, m1, m2, avg, &args, n)
    return True


def adam_step(object W, object G, object M1, object M2, object A, object beta1, object beta2,
              object eps, object learn_rate, object mod_rate, object L2, object weight_decay,
              object grad_clip, object nr_update, object max_decay) -> bool:
    """Ops.adam_step's arithmetic in two passes (the norm if clipping, then the update).

    Returns False, touching nothing, unless the arrays (A may be None) are C-contiguous, of one
    float dtype and one shape, and the hyper-parameters are Python numbers with grad_clip >= 0.
    """
    if not (_is_number(grad_clip) and grad_clip >= 0):
        return False
    return _step(W, G, M1, M2, A, beta1, beta2, eps, learn_rate, mod_rate, L2, weight_decay,
                 nr_update, max_decay, grad_clip, 1.0)


def adam_step_scaled(object W, object G, object M1, object M2, object A, object beta1, object beta2,
                     object eps, object learn_rate, object mod_rate, object L2, object weight_decay,
                     double scale, object nr_update, object max_decay) -> bool:
    """adam_step with the clipping factor given: `(G + L2 * W) * scale` is the gradient stepped on.

    For a parameter split among processes (plait.distributed's sharded update): each holds a
    slice, the norm is summed over the slices' `sumsq`, and every slice steps with the factor
    that norm gives. Returns False, touching nothing, where adam_step would.
    """
    return _step(W, G, M1, M2, A, beta1, beta2, eps, learn_rate, mod_rate, L2, weight_decay,
                 nr_update, max_decay, 0.0, scale)


def sumsq(object G, object W, object L2):
    """The sum of squares of (G + L2 * W) in float64, as adam_step's clipping norm sums it.

    None (nothing computed) unless G and W are C-contiguous arrays of one float dtype and one
    shape and L2 a Python number.
    """
    if not (isinstance(W, cnp.ndarray) and _is_number(L2)):
        return None
    cdef int itemsize = cnp.PyArray_ITEMSIZE(<cnp.ndarray>W)
    if itemsize != 4 and itemsize != 8:
        return None
    if not (_is_floats(W, itemsize, None) and _is_floats(G, itemsize, <cnp.ndarray>W)):
        return None
    cdef bint is_f32 = itemsize == 4
    cdef double l2 = L2
    cdef Py_ssize_t n = cnp.PyArray_SIZE(<cnp.ndarray>W)
    cdef const void* g = cnp.PyArray_DATA(<cnp.ndarray>G)
    cdef const void* w = cnp.PyArray_DATA(<cnp.ndarray>W)
    cdef double total
    with nogil:
        total = _sumsq(is_f32, g, w, l2, l2 != 0.0, n)
    return total
