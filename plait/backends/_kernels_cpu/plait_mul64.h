/* 64-bit lane products for the AVX2 builds of the integer hash kernels (hashing.pyx, random.pyx).

   AVX2 has no 64-bit multiply (AVX-512DQ's vpmullq): a * c mod 2^64 is built from three
   32x32->64 products, lo(a)*lo(c) + ((hi(a)*lo(c) + lo(a)*hi(c)) << 32); the high half of the
   full 128-bit product is never needed. Integer arithmetic: the bits are those of the scalar
   `a * c`. Only the AVX2 build (PLAIT_ISA_LEVEL 3) defines PLAIT_MUL64_AVX2 and the helpers. */
#ifndef PLAIT_MUL64_H
#define PLAIT_MUL64_H

#include "plait_isa.h"

#if PLAIT_ISA_LEVEL == 3
#include <immintrin.h>
#define PLAIT_MUL64_AVX2 1

/* a * c in each 64-bit lane, for a constant c given as its two 32-bit halves. */
static inline __attribute__((target("avx2"), always_inline))
__m256i plait_mul64c(__m256i a, __m256i c_lo, __m256i c_hi) {
    const __m256i lolo = _mm256_mul_epu32(a, c_lo);
    const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_lo),
                                           _mm256_mul_epu32(a, c_hi));
    return _mm256_add_epi64(lolo, _mm256_slli_epi64(cross, 32));
}

/* The two arguments plait_mul64c takes for the constant c. */
#define PLAIT_C64(c) _mm256_set1_epi64x((long long)((c) & 0xFFFFFFFFULL)), \
                     _mm256_set1_epi64x((long long)((c) >> 32))
#endif

#endif
