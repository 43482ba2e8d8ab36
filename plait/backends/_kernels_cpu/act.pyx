# cython: language_level=3
"""Compiled activations for NumpyOps: relu, sigmoid, swish, mish, gelu (exact and tanh form),
dish, hard_swish (both), clipped_linear, erf, each with its backprop, and row softmax.

Every kernel is one pass over C-contiguous float32 or float64 data of any rank (softmax: rows
of the last axis). The formulas, thresholds and clips are those of the Ops reference, step
for step: the piecewise-linear ops, relu, dish and the derivatives built from +, -, *, / and
sqrt give the reference's bits (those loops are compiled without fused multiply-add). The
transcendental ones differ from the reference only by the error of their exp/erf/tanh:
float32 uses the branch-free polynomial versions below, so that GCC vectorises the loops;
float64 uses a polynomial exp too (numpy's SIMD exp would otherwise be faster than a libm
loop), but libm's erf (exact, and faster than scipy's, which the reference calls).

Large arrays are cut into fixed blocks that OpenMP threads take in any order; each element is
computed by the same code whatever the thread count, so results never depend on it.
"""
cimport numpy as cnp

from ._arrays cimport _float_kind_any, _shares
from cython.parallel cimport prange
from libc.stdint cimport int64_t

cnp.import_array()

cdef extern from *:
    """
    #include <math.h>
    #include <stdint.h>
    #include <string.h>
    /* The selects in the loops below (clips, special cases, branches of a piecewise fit)
       vectorise as blends only if both sides may be computed for every lane, which GCC
       allows under -ftrapping-math (its default) only with AVX-512 masks: nothing here
       reads the floating-point exception flags, so the assumption is dropped. */
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC optimize ("no-trapping-math")
    #endif
    #ifdef _OPENMP
    #include <omp.h>
    static int plait_act_max_threads(void) { return omp_get_max_threads(); }
    #else
    static int plait_act_max_threads(void) { return 1; }
    #endif

    /* Each loop is compiled for the widest instruction set of this build (plait_isa.h):
       x86-64-v4 (AVX-512), v3 (AVX2, FMA) or the baseline. */
    #include "plait_isa.h"
    #define PLAIT_CLONES PLAIT_UPTO_V4
    /* Helpers must be inlined into each clone to be compiled for its instruction set. */
    #if defined(__GNUC__) || defined(__clang__)
    #define PLAIT_INLINE inline __attribute__((always_inline))
    #else
    #define PLAIT_INLINE inline
    #endif
    /* Output arrays are either the input itself or disjoint from it (act.pyx makes sure), so
       the loops carry no dependences: without this GCC adds overlap checks, and runs the
       scalar loop when an op works in place. */
    #if defined(__clang__)
    #define PLAIT_IVDEP _Pragma("clang loop vectorize(assume_safety)")
    #elif defined(__GNUC__)
    #define PLAIT_IVDEP _Pragma("GCC ivdep")
    #else
    #define PLAIT_IVDEP
    #endif
    #if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    #define PLAIT_X86 1
    #include <immintrin.h>
    #else
    #define PLAIT_X86 0
    #endif

    static PLAIT_INLINE uint32_t plait_bits_f(float x) { uint32_t u; memcpy(&u, &x, sizeof u); return u; }
    static PLAIT_INLINE float plait_float_of(uint32_t u) { float x; memcpy(&x, &u, sizeof x); return x; }
    static PLAIT_INLINE uint64_t plait_bits_d(double x) { uint64_t u; memcpy(&u, &x, sizeof u); return u; }
    static PLAIT_INLINE double plait_double_of(uint64_t u) { double x; memcpy(&x, &u, sizeof x); return x; }

    /* ---------------------------------------------------------------- float32 math

       The coefficients were fitted for this file (weighted least squares iterated towards
       minimax, then rounded to float32). The errors quoted were measured against float64
       numpy/scipy on dense grids (400k points per range plus every power of two down to
       2**-125; the tests repeat that with a margin). */

    /* e**x. x = k ln2 + r with |r| <= ln2/2 (ln2 in two parts, the first exact times any k
       in range), e**r = 1 + r + r**2 q(r) with q of degree 4 (fit error 3.3e-9), and 2**k
       added into the exponent bits. Max error 0.98 ulp; below -86.5 (results < 2.7e-38)
       it returns 0, above log(FLT_MAX) inf, and NaN stays NaN. */
    static PLAIT_INLINE float plait_exp_f(float x) {
        const float t = x * 1.44269504f + 12582912.0f;  /* 1.5 * 2**23: rounds k into the low bits */
        const float k = t - 12582912.0f;
        float r = x - k * 0.693359375f;
        r = r + k * 2.12194440e-4f;
        float q = 1.3813145e-3f;
        q = q * r + 8.3694190e-3f;
        q = q * r + 4.1668456e-2f;
        q = q * r + 1.6666515e-1f;
        q = q * r + 4.9999994e-1f;
        const float p = (q * r) * r + r + 1.0f;
        float y = plait_float_of(plait_bits_f(p) + ((plait_bits_f(t) - 0x4B400000u) << 23));
        y = x < -86.5f ? 0.0f : y;
        y = x > 88.72283f ? INFINITY : y;
        return x != x ? x : y;
    }

    /* 2/sqrt(pi) in two parts, so that erf(z) ~ z * 2/sqrt(pi) near 0 keeps its last bit. */
    #define PLAIT_ERF_C0_HI 1.12837922573089599609375f
    #define PLAIT_ERF_C0_LO -5.8635382771e-08f

    /* erf(z) for |z| < 0.875: z (2/sqrt(pi) + u s(u)), u = z*z, s of degree 4. */
    static PLAIT_INLINE float plait_erf_small_f(float z) {
        const float u = z * z;
        float s = -6.23918488e-4f;
        s = s * u + 5.03975525e-3f;
        s = s * u - 2.67972630e-2f;
        s = s * u + 1.12826489e-1f;
        s = s * u - 3.76125753e-1f;
        s = s * u + PLAIT_ERF_C0_LO;
        return z * PLAIT_ERF_C0_HI + z * s;
    }

    /* erf: the odd polynomial below |z| = 0.875, above it 1 - exp(l(|z|)) with l a degree-6
       fit of log(erfc) on [0.875, 4] (erf rounds to 1 from 3.92 on). Max error 1.16 ulp. */
    static PLAIT_INLINE float plait_erf_f(float z) {
        const float a = plait_float_of(plait_bits_f(z) & 0x7FFFFFFFu);
        const float t = a > 4.0f ? 4.0f : a;
        float l = 1.99901432e-4f;
        l = l * t - 3.08199674e-3f;
        l = l * t + 2.23810319e-2f;
        l = l * t - 1.04250208e-1f;
        l = l * t - 6.36820674e-1f;
        l = l * t - 1.12788939e+0f;
        l = l * t - 1.44210176e-4f;
        float big = 1.0f - plait_exp_f(l);
        big = plait_float_of(plait_bits_f(big) | (plait_bits_f(z) & 0x80000000u));
        return a < 0.875f ? plait_erf_small_f(z) : big;
    }

    /* The reference's Phi(x) = 0.5 (1 + erf(x / sqrt 2)), and in *e the exp(-0.5 x x) of its
       gelu derivative (the same rounded argument). Below |x| = 0.875 sqrt 2 as the reference
       writes it, with erf's polynomial; above it from erfc(|x|/sqrt 2) = e h(|x|), with h a
       degree-11 fit of erfcx(|x|/sqrt 2) on [1.237, 5.55] (relative error 2e-7), so that one
       exp serves both. gelu = x Phi(x) from it is within 1.2e-7 |x| of the exact value (the
       reference's float32 rounding of erf near -1 alone allows 3e-8 |x|), and for x < -1.24
       within 7.4e-7 relative, mostly from the rounding of -x*x/2 (the reference's
       derivative rounds it the same way), where the reference's own is up to 0.5 / Phi(x) ulp. */
    static PLAIT_INLINE float plait_cdf_f(float x, float* e_out) {
        const float z = x * 0.70710677f;
        const float small = 0.5f * (1.0f + plait_erf_small_f(z));
        const float e = plait_exp_f((-0.5f * x) * x);
        const float a = plait_float_of(plait_bits_f(x) & 0x7FFFFFFFu);
        const float v = (a > 5.55f ? 5.55f : a) - 3.39371848f;
        float h = -1.21300747e-08f;
        h = h * v + 7.09947514e-08f;
        h = h * v - 2.22732837e-07f;
        h = h * v + 1.12247108e-06f;
        h = h * v - 6.51638584e-06f;
        h = h * v + 3.25146066e-05f;
        h = h * v - 1.54481633e-04f;
        h = h * v + 7.16824026e-04f;
        h = h * v - 3.20648961e-03f;
        h = h * v + 1.37510244e-02f;
        h = h * v - 5.62861115e-02f;
        h = h * v + 2.18520910e-01f;
        const float c = 0.5f * (e * h);
        const float big = x > 0.0f ? 1.0f - c : c;
        *e_out = e;
        return a < 1.23743689f ? small : big;
    }

    /* tanh: v + v u s(u) below |v| = 0.625 (s of degree 4), else 1 - 2 / (exp(2|v|) + 1)
       with the sign of v (tanh rounds to 1 from 9.01 on). Max error 1.32 ulp. */
    static PLAIT_INLINE float plait_tanh_f(float v) {
        const float a = plait_float_of(plait_bits_f(v) & 0x7FFFFFFFu);
        const float u = v * v;
        float s = -5.70498500e-03f;
        s = s * u + 2.06390861e-02f;
        s = s * u - 5.37397154e-02f;
        s = s * u + 1.33314416e-01f;
        s = s * u - 3.33332807e-01f;
        const float small = v + v * (u * s);
        const float e = plait_exp_f(2.0f * (a > 9.5f ? 9.5f : a));
        float big = 1.0f - 2.0f / (e + 1.0f);
        big = plait_float_of(plait_bits_f(big) | (plait_bits_f(v) & 0x80000000u));
        return a < 0.625f ? small : big;
    }

    /* ---------------------------------------------------------------- float64 math */

    /* e**x: as plait_exp_f with ln2 split for |k| < 2**21 and e**r from its Taylor
       polynomial of degree 13 (truncation error 4e-18). Within 2.3e-16 relative of numpy's
       exp; below -708 (results < 3.3e-308) it returns 0. */
    static PLAIT_INLINE double plait_exp_d(double x) {
        const double t = x * 1.4426950408889634 + 6755399441055744.0;  /* 1.5 * 2**52 */
        const double k = t - 6755399441055744.0;
        double r = x - k * 0.6931471806019545;
        r = r - k * -4.2009150726810846e-11;
        double p = 1.0 / 6227020800.0;
        p = p * r + 1.0 / 479001600.0;
        p = p * r + 1.0 / 39916800.0;
        p = p * r + 1.0 / 3628800.0;
        p = p * r + 1.0 / 362880.0;
        p = p * r + 1.0 / 40320.0;
        p = p * r + 1.0 / 5040.0;
        p = p * r + 1.0 / 720.0;
        p = p * r + 1.0 / 120.0;
        p = p * r + 1.0 / 24.0;
        p = p * r + 1.0 / 6.0;
        p = p * r + 0.5;
        p = (p * r) * r + r + 1.0;
        double y = plait_double_of(plait_bits_d(p) + ((plait_bits_d(t) - plait_bits_d(6755399441055744.0)) << 52));
        y = x < -708.0 ? 0.0 : y;
        y = x > 709.782712893383 ? INFINITY : y;
        return x != x ? x : y;
    }

    static PLAIT_INLINE double plait_erf_d(double z) { return erf(z); }

    static PLAIT_INLINE double plait_cdf_d(double x, double* e_out) {
        *e_out = plait_exp_d((-0.5 * x) * x);
        return 0.5 * (1.0 + erf(x * 0.7071067811865475));
    }

    /* tanh from exp alone: its error is absolute (~2e-16), which is what gelu_approx, its
       only user, needs (it takes 1 + t and 1 - t*t). */
    static PLAIT_INLINE double plait_tanh_d(double v) {
        const double a = fabs(v);
        const double e = plait_exp_d(2.0 * (a > 20.0 ? 20.0 : a));
        const double big = 1.0 - 2.0 / (e + 1.0);
        return a != a ? v : copysign(big, v);
    }

    /* ---------------------------------------------------------------- sqrt

       C's sqrt may set errno, which stops GCC from vectorising it (only a build-wide
       -fno-math-errno lifts that), so dish takes its square roots a block at a time here,
       with the CPU's widest vector sqrt (IEEE-exact in every width). */
    #define PLAIT_SQRT_CHUNK 256
    #if PLAIT_X86
    __attribute__((target("avx512f"))) static void plait_sqrt_f_512(float* a, int64_t n) {
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(a + i, _mm512_sqrt_ps(_mm512_loadu_ps(a + i)));
        for (; i < n; i++) _mm_store_ss(a + i, _mm_sqrt_ss(_mm_load_ss(a + i)));
    }
    __attribute__((target("avx"))) static void plait_sqrt_f_256(float* a, int64_t n) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(a + i, _mm256_sqrt_ps(_mm256_loadu_ps(a + i)));
        for (; i < n; i++) _mm_store_ss(a + i, _mm_sqrt_ss(_mm_load_ss(a + i)));
    }
    static void plait_sqrt_f_128(float* a, int64_t n) {
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) _mm_storeu_ps(a + i, _mm_sqrt_ps(_mm_loadu_ps(a + i)));
        for (; i < n; i++) _mm_store_ss(a + i, _mm_sqrt_ss(_mm_load_ss(a + i)));
    }
    __attribute__((target("avx512f"))) static void plait_sqrt_d_512(double* a, int64_t n) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) _mm512_storeu_pd(a + i, _mm512_sqrt_pd(_mm512_loadu_pd(a + i)));
        for (; i < n; i++) _mm_store_sd(a + i, _mm_sqrt_sd(_mm_setzero_pd(), _mm_load_sd(a + i)));
    }
    __attribute__((target("avx"))) static void plait_sqrt_d_256(double* a, int64_t n) {
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) _mm256_storeu_pd(a + i, _mm256_sqrt_pd(_mm256_loadu_pd(a + i)));
        for (; i < n; i++) _mm_store_sd(a + i, _mm_sqrt_sd(_mm_setzero_pd(), _mm_load_sd(a + i)));
    }
    static void plait_sqrt_d_128(double* a, int64_t n) {
        int64_t i = 0;
        for (; i + 2 <= n; i += 2) _mm_storeu_pd(a + i, _mm_sqrt_pd(_mm_loadu_pd(a + i)));
        for (; i < n; i++) _mm_store_sd(a + i, _mm_sqrt_sd(_mm_setzero_pd(), _mm_load_sd(a + i)));
    }
    static volatile int plait_sqrt_width = 0;
    static int plait_sqrt_level(void) {
        if (plait_sqrt_width == 0) {  /* benign race: every thread computes the same value */
            __builtin_cpu_init();
            plait_sqrt_width = (PLAIT_ISA_ALLOWS(4) && __builtin_cpu_supports("avx512f")) ? 512
                             : ((PLAIT_ISA_ALLOWS(3) && __builtin_cpu_supports("avx")) ? 256 : 128);
        }
        return plait_sqrt_width;
    }
    static void plait_sqrt_f(float* a, int64_t n) {
        int w = plait_sqrt_level();
        if (w == 512) plait_sqrt_f_512(a, n); else if (w == 256) plait_sqrt_f_256(a, n); else plait_sqrt_f_128(a, n);
    }
    static void plait_sqrt_d(double* a, int64_t n) {
        int w = plait_sqrt_level();
        if (w == 512) plait_sqrt_d_512(a, n); else if (w == 256) plait_sqrt_d_256(a, n); else plait_sqrt_d_128(a, n);
    }
    #else
    static void plait_sqrt_f(float* a, int64_t n) { int64_t i; for (i = 0; i < n; i++) a[i] = sqrtf(a[i]); }
    static void plait_sqrt_d(double* a, int64_t n) { int64_t i; for (i = 0; i < n; i++) a[i] = sqrt(a[i]); }
    #endif

    /* ---------------------------------------------------------------- the kernels

       Each op is a loop over n elements: Y = op(A[, B[, C]]) with parameters p (doubles,
       rounded to the array's precision as numpy rounds a Python float). Y may be A. */
    typedef void (*plait_act_fn_f)(float*, const float*, const float*, const float*, int64_t, const double*);
    typedef void (*plait_act_fn_d)(double*, const double*, const double*, const double*, int64_t, const double*);

    #define PLAIT_MAP(NAME, T, S, SETUP, BODY)                                                      \\
        PLAIT_CLONES static void plait_k_##NAME##_##S(T* Y, const T* A, const T* B, const T* C,     \\
                                                      int64_t n, const double* p) {                 \\
            int64_t i;                                                                              \\
            SETUP                                                                                   \\
            (void)B; (void)C; (void)p;                                                              \\
            PLAIT_IVDEP for (i = 0; i < n; i++) { BODY }                                            \\
        }

    /* The exact ops: IEEE +, -, *, / and sqrt in the reference's order, no fused multiply-add,
       so they give the reference's bits. relu keeps NaN and maps -0 to +0 (numpy.maximum);
       clip keeps NaN and an x equal to a bound (numpy.clip). */
    #define PLAIT_EXACT_OPS(T, S)                                                                   \\
        PLAIT_MAP(relu, T, S, ,                                                                     \\
            const T x = A[i]; Y[i] = !(x <= (T)0) ? x : (T)0;)                                      \\
        PLAIT_MAP(backprop_relu, T, S, ,                                                            \\
            Y[i] = A[i] * (B[i] > (T)0 ? (T)1 : (T)0);)                                             \\
        PLAIT_MAP(backprop_sigmoid, T, S, ,                                                         \\
            const T y = B[i]; Y[i] = A[i] * (y * ((T)1 - y));)                                      \\
        PLAIT_MAP(clipped_linear, T, S,                                                             \\
            const T slope = (T)p[0]; const T offset = (T)p[1]; const T lo = (T)p[2];                \\
            const T hi = (T)p[3]; const int use_slope = p[4] != 0.0; const int use_offset = p[5] != 0.0;, \\
            T v = A[i];                                                                             \\
            v = use_slope ? v * slope : v;                                                          \\
            v = use_offset ? v + offset : v;                                                        \\
            v = v < lo ? lo : v;                                                                    \\
            Y[i] = v > hi ? hi : v;)                                                                \\
        PLAIT_MAP(backprop_clipped_linear, T, S,                                                    \\
            const T slope = (T)p[0]; const T offset = (T)p[1]; const T lo = (T)p[2];                \\
            const T hi = (T)p[3]; const T zero = (T)0 * slope;,                                     \\
            const T lin = B[i] * slope + offset;                                                    \\
            Y[i] = A[i] * ((lin > lo && lin < hi) ? slope : zero);)                                 \\
        PLAIT_MAP(hard_swish, T, S, ,                                                               \\
            const T x = A[i]; T g = x * (T)0.2;                                                     \\
            g = g + (T)0.5; g = g < (T)0 ? (T)0 : g; g = g > (T)1 ? (T)1 : g;                       \\
            Y[i] = x * g;)                                                                          \\
        PLAIT_MAP(backprop_hard_swish, T, S, ,                                                      \\
            const T x = B[i];                                                                       \\
            const T g = x > (T)2.5 ? (T)1 : (x < (T)-2.5 ? (T)0 : x * (T)0.4 + (T)0.5);             \\
            Y[i] = A[i] * g;)                                                                       \\
        PLAIT_MAP(hard_swish_mobilenet, T, S, ,                                                     \\
            const T x = A[i]; T g = x * (T)(1.0 / 6.0);                                             \\
            g = g + (T)0.5; g = g < (T)0 ? (T)0 : g; g = g > (T)1 ? (T)1 : g;                       \\
            Y[i] = x * g;)                                                                          \\
        PLAIT_MAP(backprop_hard_swish_mobilenet, T, S, ,                                            \\
            const T x = B[i];                                                                       \\
            const T g = x > (T)3 ? (T)1 : (x < (T)-3 ? (T)0 : x / (T)3 + (T)0.5);                   \\
            Y[i] = A[i] * g;)                                                                       \\
                                                                                                    \\
        /* dish: 1 + x*x, its square roots, then the rest, through a buffer on the stack. */        \\
        PLAIT_CLONES static void plait_dish_pre_##S(T* s, const T* X, int64_t m) {                  \\
            int64_t i; PLAIT_IVDEP for (i = 0; i < m; i++) s[i] = (T)1 + X[i] * X[i];               \\
        }                                                                                           \\
        PLAIT_CLONES static void plait_dish_post_##S(T* Y, const T* X, const T* s, int64_t m) {     \\
            int64_t i;                                                                              \\
            PLAIT_IVDEP for (i = 0; i < m; i++) {                                                   \\
                const T x = X[i];                                                                   \\
                Y[i] = x * ((T)0.5 * ((T)1 + x / s[i]));                                            \\
            }                                                                                       \\
        }                                                                                           \\
        PLAIT_CLONES static void plait_backprop_dish_post_##S(T* Y, const T* dY, const T* X,        \\
                                                              const T* s, int64_t m) {              \\
            int64_t i;                                                                              \\
            PLAIT_IVDEP for (i = 0; i < m; i++) {                                                   \\
                const T x = X[i], r = s[i];                                                         \\
                Y[i] = dY[i] * ((T)0.5 * ((T)1 + x / r) + ((T)0.5 * x) / ((r * r) * r));           \\
            }                                                                                       \\
        }                                                                                           \\
        static void plait_k_dish_##S(T* Y, const T* A, const T* B, const T* C, int64_t n,           \\
                                     const double* p) {                                             \\
            T s[PLAIT_SQRT_CHUNK]; int64_t i, m;                                                    \\
            (void)B; (void)C; (void)p;                                                              \\
            for (i = 0; i < n; i += m) {                                                            \\
                m = n - i < PLAIT_SQRT_CHUNK ? n - i : PLAIT_SQRT_CHUNK;                            \\
                plait_dish_pre_##S(s, A + i, m);                                                    \\
                plait_sqrt_##S(s, m);                                                               \\
                plait_dish_post_##S(Y + i, A + i, s, m);                                            \\
            }                                                                                       \\
        }                                                                                           \\
        static void plait_k_backprop_dish_##S(T* Y, const T* A, const T* B, const T* C, int64_t n,  \\
                                              const double* p) {                                    \\
            T s[PLAIT_SQRT_CHUNK]; int64_t i, m;                                                    \\
            (void)C; (void)p;                                                                       \\
            for (i = 0; i < n; i += m) {                                                            \\
                m = n - i < PLAIT_SQRT_CHUNK ? n - i : PLAIT_SQRT_CHUNK;                            \\
                plait_dish_pre_##S(s, B + i, m);                                                    \\
                plait_sqrt_##S(s, m);                                                               \\
                plait_backprop_dish_post_##S(Y + i, A + i, B + i, s, m);                            \\
            }                                                                                       \\
        }

    /* The ops with exp, erf or tanh: the reference's formulas, with its sigmoid clip to
       [-20, 20] and mish's threshold. mish's tanh(softplus(x)) is n / (n + 2) with
       n = e**x (e**x + 2) (exact algebra, no cancellation), and its 1 - tanh**2 is
       4 (n + 1) / (n + 2)**2; x is capped at 20 there, where both are already 1 and 0. */
    #define PLAIT_MATH_OPS(T, S)                                                                    \\
        static PLAIT_INLINE T plait_sigmoid1_##S(T x) {                                             \\
            T c = x < (T)-20 ? (T)-20 : x;                                                          \\
            c = c > (T)20 ? (T)20 : c;                                                              \\
            return (T)1 / ((T)1 + plait_exp_##S(-c));                                               \\
        }                                                                                           \\
        PLAIT_MAP(sigmoid, T, S, , Y[i] = plait_sigmoid1_##S(A[i]);)                                \\
        PLAIT_MAP(swish, T, S, , const T x = A[i]; Y[i] = x * plait_sigmoid1_##S(x);)               \\
        PLAIT_MAP(backprop_swish, T, S, ,                                                           \\
            const T y = C[i]; Y[i] = A[i] * (y + plait_sigmoid1_##S(B[i]) * ((T)1 - y));)          \\
        PLAIT_MAP(mish, T, S, const T thr = (T)p[0];,                                               \\
            const T x = A[i];                                                                       \\
            const T u = plait_exp_##S(x > (T)20 ? (T)20 : x);                                       \\
            const T m = u * (u + (T)2);                                                             \\
            Y[i] = x >= thr ? x : x * (m / (m + (T)2));)                                            \\
        PLAIT_MAP(backprop_mish, T, S,                                                              \\
            const T thr = (T)p[0]; const T sig_lo = plait_sigmoid1_##S((T)-20);,                    \\
            const T x = B[i];                                                                       \\
            const T u = plait_exp_##S(x > (T)20 ? (T)20 : x);                                       \\
            const T m = u * (u + (T)2);                                                             \\
            const T d = m + (T)2;                                                                   \\
            const T sig = x < (T)-20 ? sig_lo : u / ((T)1 + u);                                     \\
            const T g = m / d + x * sig * (((T)4 * (m + (T)1)) / (d * d));                          \\
            Y[i] = A[i] * (x >= thr ? (T)1 : g);)                                                   \\
        PLAIT_MAP(gelu, T, S, ,                                                                     \\
            const T x = A[i]; T e; Y[i] = x * plait_cdf_##S(x, &e);)                                \\
        PLAIT_MAP(backprop_gelu, T, S, ,                                                            \\
            const T x = B[i]; T e; const T cdf = plait_cdf_##S(x, &e);                              \\
            Y[i] = A[i] * (cdf + x * (e * (T)0.3989422804014327));)                                 \\
        PLAIT_MAP(gelu_approx, T, S, ,                                                              \\
            const T x = A[i];                                                                       \\
            const T t = plait_tanh_##S((T)0.7978845608028654 * (x + (((T)0.044715 * x) * x) * x));  \\
            Y[i] = x * ((T)0.5 * ((T)1 + t));)                                                      \\
        PLAIT_MAP(backprop_gelu_approx, T, S, ,                                                     \\
            const T x = B[i];                                                                       \\
            const T t = plait_tanh_##S((T)0.7978845608028654 * (x + (((T)0.044715 * x) * x) * x));  \\
            const T g = (T)0.5 * ((T)1 + t) + ((((T)0.5 * x) * ((T)1 - t * t))                     \\
                        * (T)0.7978845608028654) * ((T)1 + (((T)0.134145) * x) * x);                \\
            Y[i] = A[i] * g;)                                                                       \\
        PLAIT_MAP(erf, T, S, , Y[i] = plait_erf_##S(A[i]);)                                         \\
        PLAIT_MAP(exp, T, S, , Y[i] = plait_exp_##S(A[i]);)                                         \\
        PLAIT_MAP(tanh, T, S, , Y[i] = plait_tanh_##S(A[i]);)

    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC push_options
    #pragma GCC optimize ("fp-contract=off")
    #elif defined(__clang__)
    #pragma STDC FP_CONTRACT OFF
    #endif
    PLAIT_EXACT_OPS(float, f)
    PLAIT_EXACT_OPS(double, d)
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC pop_options
    #elif defined(__clang__)
    #pragma STDC FP_CONTRACT ON
    #endif
    PLAIT_MATH_OPS(float, f)
    PLAIT_MATH_OPS(double, d)

    /* Op codes: the order of the tables below (act.pyx repeats them). */
    #define PLAIT_ACT_TABLE(S) {                                                                    \\
        plait_k_relu_##S, plait_k_sigmoid_##S, plait_k_swish_##S, plait_k_mish_##S,                 \\
        plait_k_gelu_##S, plait_k_gelu_approx_##S, plait_k_dish_##S, plait_k_hard_swish_##S,        \\
        plait_k_hard_swish_mobilenet_##S, plait_k_clipped_linear_##S, plait_k_erf_##S,              \\
        plait_k_backprop_relu_##S, plait_k_backprop_sigmoid_##S, plait_k_backprop_swish_##S,        \\
        plait_k_backprop_mish_##S, plait_k_backprop_gelu_##S, plait_k_backprop_gelu_approx_##S,     \\
        plait_k_backprop_dish_##S, plait_k_backprop_hard_swish_##S,                                 \\
        plait_k_backprop_hard_swish_mobilenet_##S, plait_k_backprop_clipped_linear_##S,             \\
        plait_k_exp_##S, plait_k_tanh_##S }
    static const plait_act_fn_f plait_act_table_f[] = PLAIT_ACT_TABLE(f);
    static const plait_act_fn_d plait_act_table_d[] = PLAIT_ACT_TABLE(d);
    #define PLAIT_ACT_N_OPS ((int)(sizeof(plait_act_table_f) / sizeof(plait_act_table_f[0])))

    /* Elements [start, start + n) of op on float32 (dt 4) or float64 (dt 8) arrays. */
    static void plait_act_block(int op, int dt, void* Y, const void* A, const void* B, const void* C,
                                int64_t start, int64_t n, const double* p) {
        if (dt == 4) {
            plait_act_table_f[op]((float*)Y + start, (const float*)A + start,
                                  B ? (const float*)B + start : NULL, C ? (const float*)C + start : NULL, n, p);
        } else {
            plait_act_table_d[op]((double*)Y + start, (const double*)A + start,
                                  B ? (const double*)B + start : NULL, C ? (const double*)C + start : NULL, n, p);
        }
    }

    /* ---------------------------------------------------------------- softmax rows

       The reference: x / T (if T != 1), minus the row max (NaN if the row has one), exp,
       divided by the row sum. */
    /* Row max and row sums: OpenMP SIMD reductions, which GCC vectorises at every
       instruction set (written as plain loops they are not, and vector-extension code wider
       than the target's vectors goes scalar). The order of the additions is fixed by the
       instruction set and the row length, never by the thread count; in 8 or 16 lanes, like
       numpy's pairwise sum in 8, so both stay within a few ulp of each other. Without
       OpenMP, and in the x86-64 baseline build (whose SSE2 registers hold only 2 float64 or 4
       float32 lanes: 11 ulp off numpy's float64 softmax over 1777 columns, where 8 lanes stay
       within 8), the sums take 8 explicit lanes. The max may skip a NaN: a NaN in the row
       makes the row's sum, and so every output, NaN, as in the reference.

       PLAIT_STORE_SUM: dst[i] = EXPR for i < n, and s = the sum of the dst[i]. */
    #ifdef _OPENMP
    #define PLAIT_SIMD_MAX(m) _Pragma("omp simd reduction(max:m)")
    #else
    #define PLAIT_SIMD_MAX(m)
    #endif
    #if defined(_OPENMP) && PLAIT_ISA_LEVEL != 1
    #define PLAIT_STORE_SUM(S, s, dst, n, EXPR)                                                     \\
        s = 0; _Pragma("omp simd reduction(+:s)") for (i = 0; i < n; i++) { dst[i] = EXPR; s += dst[i]; }
    #else
    #define PLAIT_STORE_SUM(S, s, dst, n, EXPR)                                                     \\
        for (i = 0; i < n; i++) dst[i] = EXPR;                                                      \\
        s = plait_lanesum_##S(dst, n);
    #endif
    #define PLAIT_ROWMAX(T, S)                                                                      \\
        static PLAIT_INLINE T plait_rowmax_##S(const T* x, int64_t n) {                             \\
            T m = -INFINITY; int64_t i;                                                             \\
            PLAIT_SIMD_MAX(m) for (i = 0; i < n; i++) m = x[i] > m ? x[i] : m;                      \\
            return m;                                                                               \\
        }                                                                                           \\
        static PLAIT_INLINE T plait_lanesum_##S(const T* x, int64_t n) {                            \\
            T lane[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s;                                                \\
            int64_t i, k;                                                                           \\
            for (i = 0; i + 8 <= n; i += 8)                                                         \\
                for (k = 0; k < 8; k++) lane[k] += x[i + k];                                        \\
            s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])); \\
            for (; i < n; i++) s += x[i];                                                           \\
            return s;                                                                               \\
        }
    PLAIT_ROWMAX(float, f)
    PLAIT_ROWMAX(double, d)
    #define PLAIT_SOFTMAX(T, S)                                                                     \\
        PLAIT_CLONES static void plait_softmax_rows_##S(T* Y, const T* X, int64_t rows, int64_t n,  \\
                                                        double temperature) {                       \\
            const T temp = (T)temperature;                                                          \\
            const int scale = temperature != 1.0;                                                   \\
            int64_t row, i;                                                                         \\
            for (row = 0; row < rows; row++) {                                                      \\
                const T* x = X + row * n;                                                           \\
                T* y = Y + row * n;                                                                 \\
                T m, r, s;                                                                          \\
                if (scale) { PLAIT_IVDEP for (i = 0; i < n; i++) y[i] = x[i] / temp; x = y; }       \\
                m = plait_rowmax_##S(x, n);                                                         \\
                PLAIT_STORE_SUM(S, s, y, n, plait_exp_##S(x[i] - m))                                \\
                /* times 1/sum, not / sum: one more rounding, a fraction of the time */             \\
                r = (T)1 / s;                                                                       \\
                PLAIT_IVDEP for (i = 0; i < n; i++) y[i] = y[i] * r;                                \\
            }                                                                                       \\
        }                                                                                           \\
        /* dX = (Y dY - Y sum(Y dY)) / T. */                                                        \\
        PLAIT_CLONES static void plait_backprop_softmax_rows_##S(T* dX, const T* Y, const T* dY,    \\
                                                                 int64_t rows, int64_t n,           \\
                                                                 double temperature) {              \\
            const T temp = (T)temperature;                                                          \\
            const int scale = temperature != 1.0;                                                   \\
            int64_t row, i;                                                                         \\
            for (row = 0; row < rows; row++) {                                                      \\
                const T* y = Y + row * n;                                                           \\
                const T* dy = dY + row * n;                                                         \\
                T* dx = dX + row * n;                                                               \\
                T s;                                                                                \\
                PLAIT_STORE_SUM(S, s, dx, n, y[i] * dy[i])                                          \\
                if (scale) { PLAIT_IVDEP for (i = 0; i < n; i++) dx[i] = (dx[i] - y[i] * s) / temp; } \\
                else { PLAIT_IVDEP for (i = 0; i < n; i++) dx[i] = dx[i] - y[i] * s; }              \\
            }                                                                                       \\
        }
    PLAIT_SOFTMAX(float, f)
    PLAIT_SOFTMAX(double, d)

    static void plait_softmax_block(int dt, void* Y, const void* X, int64_t row0, int64_t rows,
                                    int64_t n, double temperature) {
        if (dt == 4) plait_softmax_rows_f((float*)Y + row0 * n, (const float*)X + row0 * n, rows, n, temperature);
        else plait_softmax_rows_d((double*)Y + row0 * n, (const double*)X + row0 * n, rows, n, temperature);
    }
    static void plait_backprop_softmax_block(int dt, void* dX, const void* Y, const void* dY, int64_t row0,
                                             int64_t rows, int64_t n, double temperature) {
        if (dt == 4)
            plait_backprop_softmax_rows_f((float*)dX + row0 * n, (const float*)Y + row0 * n,
                                          (const float*)dY + row0 * n, rows, n, temperature);
        else
            plait_backprop_softmax_rows_d((double*)dX + row0 * n, (const double*)Y + row0 * n,
                                          (const double*)dY + row0 * n, rows, n, temperature);
    }
    """
    int plait_act_max_threads() noexcept nogil
    int PLAIT_ACT_N_OPS
    void plait_act_block(int op, int dt, void* Y, const void* A, const void* B, const void* C,
                         int64_t start, int64_t n, const double* p) noexcept nogil
    void plait_softmax_block(int dt, void* Y, const void* X, int64_t row0, int64_t rows, int64_t n,
                             double temperature) noexcept nogil
    void plait_backprop_softmax_block(int dt, void* dX, const void* Y, const void* dY, int64_t row0,
                                      int64_t rows, int64_t n, double temperature) noexcept nogil


# Op codes, in the order of PLAIT_ACT_TABLE.
RELU = 0
SIGMOID = 1
SWISH = 2
MISH = 3
GELU = 4
GELU_APPROX = 5
DISH = 6
HARD_SWISH = 7
HARD_SWISH_MOBILENET = 8
CLIPPED_LINEAR = 9
ERF = 10
BACKPROP_RELU = 11
BACKPROP_SIGMOID = 12
BACKPROP_SWISH = 13
BACKPROP_MISH = 14
BACKPROP_GELU = 15
BACKPROP_GELU_APPROX = 16
BACKPROP_DISH = 17
BACKPROP_HARD_SWISH = 18
BACKPROP_HARD_SWISH_MOBILENET = 19
BACKPROP_CLIPPED_LINEAR = 20
# The building blocks, for the accuracy tests.
EXP = 21
TANH = 22

# Work per element relative to a copy, by op code: what decides when threads pay.
cdef int _COST[23]
_COST[:] = [1, 8, 8, 8, 12, 10, 4, 1, 1, 1, 10, 1, 1, 8, 10, 12, 10, 4, 1, 1, 1, 6, 8]

# How many arrays each op reads (A; A and B; A, B and C): a call that gives fewer declines,
# since the kernel would read the missing ones through NULL.
cdef int _ARITY[23]
_ARITY[:] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 2, 2, 2, 2, 2, 2, 2, 1, 1]

cdef enum:
    # Elements per work item of the elementwise ops (a multiple of every vector width).
    _BLOCK = 16384

# Below this much work (elements times _COST), a parallel region costs more than it saves.
cdef Py_ssize_t _parallel_min_work = 1 << 21


def set_parallel_min_work(Py_ssize_t n):
    """Set the work (elements times relative cost) from which an op uses threads; returns the
    old value. For tests, which set 0 to run the threaded paths on small inputs."""
    global _parallel_min_work
    old = _parallel_min_work
    _parallel_min_work = max(n, 0)
    return old


cdef inline int _threads(Py_ssize_t work, Py_ssize_t items) noexcept nogil:
    # NOTE: prange's num_threads overrides omp_set_num_threads, so the current OpenMP limit
    # (threadpoolctl's) is read here rather than hard-coded.
    if work < _parallel_min_work or items < 2:
        return 1
    return min(plait_act_max_threads(), items)


cdef inline int _kind(object X) noexcept:
    """4 or 8 for a float32/float64 numpy array of rank >= 1 that a kernel may read in place."""
    return _float_kind_any(X, 1)


cdef bint _same_shape(object A, object B) noexcept:
    cdef int nd = cnp.PyArray_NDIM(<cnp.ndarray>A), i
    if cnp.PyArray_NDIM(<cnp.ndarray>B) != nd:
        return False
    for i in range(nd):
        if cnp.PyArray_DIM(<cnp.ndarray>A, i) != cnp.PyArray_DIM(<cnp.ndarray>B, i):
            return False
    return True


cdef bint _partly_overlap(object A, object B) noexcept:
    """Whether A and B (same size and dtype) share memory without being the same buffer."""
    cdef char* a = <char*>cnp.PyArray_DATA(<cnp.ndarray>A)
    cdef char* b = <char*>cnp.PyArray_DATA(<cnp.ndarray>B)
    cdef Py_ssize_t nbytes = cnp.PyArray_NBYTES(<cnp.ndarray>A)
    return a != b and a < b + nbytes and b < a + nbytes


cdef object _output(object X, bint inplace):
    if inplace:
        return X if cnp.PyArray_ISWRITEABLE(<cnp.ndarray>X) else None
    return cnp.PyArray_EMPTY(cnp.PyArray_NDIM(<cnp.ndarray>X), cnp.PyArray_DIMS(<cnp.ndarray>X),
                             cnp.PyArray_TYPE(<cnp.ndarray>X), 0)


cdef void _run(int op, int dt, void* Y, const void* A, const void* B, const void* C,
               Py_ssize_t n, const double* p) noexcept nogil:
    cdef Py_ssize_t n_blocks = (n + _BLOCK - 1) // _BLOCK, b
    cdef int n_threads = _threads(n * _COST[op], n_blocks)
    if n_threads > 1:
        for b in prange(n_blocks, num_threads=n_threads, schedule="dynamic"):
            plait_act_block(op, dt, Y, A, B, C, b * _BLOCK, min(<Py_ssize_t>_BLOCK, n - b * _BLOCK), p)
    else:
        for b in range(n_blocks):
            plait_act_block(op, dt, Y, A, B, C, b * _BLOCK, min(<Py_ssize_t>_BLOCK, n - b * _BLOCK), p)


def elementwise(int op, A, B=None, C=None, bint inplace=False, double p0=0.0, double p1=0.0,
                double p2=0.0, double p3=0.0, double p4=0.0, double p5=0.0, bint into_b=False):
    """Y = op(A[, B[, C]]) elementwise, Y of A's shape and dtype (A itself with inplace, or B
    with inplace and into_b: Thinc's backprop_sigmoid writes into its second argument).

    Returns None, computing nothing, unless every array given is a C-contiguous float32 or
    float64 numpy array of rank >= 1, all of one dtype and shape, and (with inplace) the array
    written is writeable and shares no memory with the others other than being the very same
    buffer.
    """
    if op < 0 or op >= PLAIT_ACT_N_OPS:
        raise ValueError(f"act.elementwise: unknown op code {op}.")
    cdef int dt = _kind(A)
    cdef int arity = _ARITY[op] if op < 23 else 1
    if dt == 0 or (into_b and B is None) or (arity >= 2 and B is None) or (arity >= 3 and C is None):
        return None
    if (arity < 2 and B is not None) or (arity < 3 and C is not None):
        return None
    for other in (B, C):
        if other is not None:
            if _kind(other) != dt or not _same_shape(A, other):
                return None
    W = B if (inplace and into_b) else A
    if inplace:
        for other in (A, B, C):
            if other is not None and other is not W and _partly_overlap(W, other):
                return None
        # Written into B, the reference computes on B in steps that read A after B changed:
        # the one pass computes something else when A is B's memory.
        if into_b and _shares(A, W):
            return None
    Y = _output(W, inplace)
    if Y is None:
        return None
    cdef double p[6]
    p[0] = p0; p[1] = p1; p[2] = p2; p[3] = p3; p[4] = p4; p[5] = p5
    cdef void* y = cnp.PyArray_DATA(<cnp.ndarray>Y)
    cdef const void* a = cnp.PyArray_DATA(<cnp.ndarray>A)
    cdef const void* b = NULL if B is None else cnp.PyArray_DATA(<cnp.ndarray>B)
    cdef const void* c = NULL if C is None else cnp.PyArray_DATA(<cnp.ndarray>C)
    cdef Py_ssize_t n = cnp.PyArray_SIZE(<cnp.ndarray>A)
    with nogil:
        _run(op, dt, y, a, b, c, n, p)
    return Y


cdef inline Py_ssize_t _row_block(Py_ssize_t n_cols) noexcept:
    """Rows per work item: about _BLOCK elements."""
    return max(<Py_ssize_t>1, _BLOCK // max(n_cols, <Py_ssize_t>1))


def softmax(X, bint inplace, double temperature):
    """Softmax over the last axis of X (C-contiguous float32/float64, rank >= 1, non-empty
    last axis); None where not covered (the caller validates temperature first)."""
    cdef int dt = _kind(X)
    if dt == 0 or cnp.PyArray_SIZE(<cnp.ndarray>X) == 0:
        return None
    Y = _output(X, inplace)
    if Y is None:
        return None
    cdef Py_ssize_t n = cnp.PyArray_DIM(<cnp.ndarray>X, cnp.PyArray_NDIM(<cnp.ndarray>X) - 1)
    cdef Py_ssize_t rows = cnp.PyArray_SIZE(<cnp.ndarray>X) // n
    cdef Py_ssize_t per = _row_block(n), n_items = (rows + per - 1) // per, b
    cdef int n_threads = _threads(rows * n * 10, n_items)
    cdef void* y = cnp.PyArray_DATA(<cnp.ndarray>Y)
    cdef const void* x = cnp.PyArray_DATA(<cnp.ndarray>X)
    with nogil:
        if n_threads > 1:
            for b in prange(n_items, num_threads=n_threads, schedule="dynamic"):
                plait_softmax_block(dt, y, x, b * per, min(per, rows - b * per), n, temperature)
        else:
            for b in range(n_items):
                plait_softmax_block(dt, y, x, b * per, min(per, rows - b * per), n, temperature)
    return Y


def backprop_softmax(Y, dY, double temperature):
    """dX = (Y dY - Y sum(Y dY, last axis)) / T for C-contiguous float32/float64 Y and dY of
    one shape and dtype; None where not covered."""
    cdef int dt = _kind(Y)
    if dt == 0 or _kind(dY) != dt or not _same_shape(Y, dY) or cnp.PyArray_SIZE(<cnp.ndarray>Y) == 0:
        return None
    dX = _output(Y, False)
    cdef Py_ssize_t n = cnp.PyArray_DIM(<cnp.ndarray>Y, cnp.PyArray_NDIM(<cnp.ndarray>Y) - 1)
    cdef Py_ssize_t rows = cnp.PyArray_SIZE(<cnp.ndarray>Y) // n
    cdef Py_ssize_t per = _row_block(n), n_items = (rows + per - 1) // per, b
    cdef int n_threads = _threads(rows * n * 2, n_items)
    cdef void* dx = cnp.PyArray_DATA(<cnp.ndarray>dX)
    cdef const void* y = cnp.PyArray_DATA(<cnp.ndarray>Y)
    cdef const void* dy = cnp.PyArray_DATA(<cnp.ndarray>dY)
    with nogil:
        if n_threads > 1:
            for b in prange(n_items, num_threads=n_threads, schedule="dynamic"):
                plait_backprop_softmax_block(dt, dx, y, dy, b * per, min(per, rows - b * per), n, temperature)
        else:
            for b in range(n_items):
                plait_backprop_softmax_block(dt, dx, y, dy, b * per, min(per, rows - b * per), n, temperature)
    return dX
