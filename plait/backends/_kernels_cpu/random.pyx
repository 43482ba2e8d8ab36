# cython: language_level=3
"""CPU kernel for Ops.get_dropout_mask: a counter-based generator, so any thread count gives the same mask.

Elements 2p and 2p+1 of a mask (flattened) come from the low and high 32-bit halves of
SplitMix64's output number p + 1 from the state `key`:

    z = key + (p + 1) * 0x9E3779B97F4A7C15, then three xor-shift-multiply rounds;

the last element of an odd-sized mask takes the low half of its pair's draw.

Each value depends only on (key, p), so the mask can be cut into blocks and filled in any
order by any number of threads. An element is kept (set to `scale`) when its 32-bit draw
u satisfies u >= ceil(drop * 2**32), which happens with probability 1 - drop up to 2**-32,
the same law as the reference's `uniform(0, 1) >= drop`. The caller draws `key` from numpy's
global generator, which is what plait.util.fix_random_seed seeds.
"""
cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport uint64_t

cnp.import_array()

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #include "plait_mul64.h"

    /* SplitMix64 output number p + 1 of a generator whose state starts at `key`. */
    static inline uint64_t plait_splitmix64_at(uint64_t key, uint64_t p) {
        uint64_t z = key + (p + 1u) * 0x9E3779B97F4A7C15ULL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }

    /* 0 or `scale` by a mask of all-zero or all-one bits, without a branch: the comparisons
       are coin flips, which a branch predictor cannot learn. */
    static inline float plait_keep(uint32_t draw, uint64_t threshold, uint32_t scale_bits) {
        uint32_t bits = scale_bits & (uint32_t)(-(int32_t)((uint64_t)draw >= threshold));
        float value;
        memcpy(&value, &bits, sizeof value);
        return value;
    }

    /* Mask values 2*p0 .. 2*p1 - 1; the caller keeps 2*p1 <= n. The AVX-512 build lets GCC
       vectorise the loop with 64-bit multiplies (vpmullq). */
    static PLAIT_UPTO_V4 void plait_dropout_pairs_scalar(float *out, uint64_t key, uint64_t threshold,
                                                         float scale, Py_ssize_t p0, Py_ssize_t p1) {
        uint32_t scale_bits;
        memcpy(&scale_bits, &scale, sizeof scale_bits);
        for (Py_ssize_t p = p0; p < p1; ++p) {
            const uint64_t h = plait_splitmix64_at(key, (uint64_t)p);
            out[2 * p] = plait_keep((uint32_t)h, threshold, scale_bits);
            out[2 * p + 1] = plait_keep((uint32_t)(h >> 32), threshold, scale_bits);
        }
    }

    #ifdef PLAIT_MUL64_AVX2
    /* AVX2: 4 pairs a step. GCC's own 64-bit products there were barely faster than scalar
       code. A pair's draw is one 64-bit lane whose low and high halves are its two values, in
       memory order, so the vector of 4 draws is the 8 values' draws as they are stored.
       Integer arithmetic: the same bits as the scalar loop. */
    __attribute__((target("avx2")))
    static void plait_dropout_pairs(float *out, uint64_t key, uint64_t threshold, float scale,
                                    Py_ssize_t p0, Py_ssize_t p1) {
        const uint64_t golden = 0x9E3779B97F4A7C15ULL;
        Py_ssize_t p = p0;
        if (threshold > 0 && threshold <= 0xFFFFFFFFULL && p1 - p0 >= 4) {
            uint32_t scale_bits;
            memcpy(&scale_bits, &scale, sizeof scale_bits);
            const __m256i keep_bits = _mm256_set1_epi32((int)scale_bits);
            const __m256i limit = _mm256_set1_epi32((int)(uint32_t)threshold);
            const __m256i step = _mm256_set1_epi64x((long long)(4u * golden));
            /* z of pairs p .. p+3: key + (p + 1 + lane) * golden, advanced by 4 * golden. */
            const uint64_t z0 = key + ((uint64_t)p + 1u) * golden;
            __m256i z = _mm256_setr_epi64x((long long)z0, (long long)(z0 + golden),
                                           (long long)(z0 + 2u * golden), (long long)(z0 + 3u * golden));
            for (; p + 4 <= p1; p += 4) {
                __m256i h = _mm256_xor_si256(z, _mm256_srli_epi64(z, 30));
                h = plait_mul64c(h, PLAIT_C64(0xBF58476D1CE4E5B9ULL));
                h = _mm256_xor_si256(h, _mm256_srli_epi64(h, 27));
                h = plait_mul64c(h, PLAIT_C64(0x94D049BB133111EBULL));
                h = _mm256_xor_si256(h, _mm256_srli_epi64(h, 31));
                /* draw >= threshold (unsigned): max(draw, threshold) == draw. */
                const __m256i kept = _mm256_cmpeq_epi32(_mm256_max_epu32(h, limit), h);
                _mm256_storeu_si256((__m256i *)(out + 2 * p), _mm256_and_si256(kept, keep_bits));
                z = _mm256_add_epi64(z, step);
            }
        }
        plait_dropout_pairs_scalar(out, key, threshold, scale, p, p1);
    }
    #else
    #define plait_dropout_pairs plait_dropout_pairs_scalar
    #endif

    /* The last value of an odd-sized mask: the low half of pair p's draw. */
    static void plait_dropout_last(float *out, uint64_t key, uint64_t threshold, float scale,
                                   Py_ssize_t p) {
        uint32_t scale_bits;
        memcpy(&scale_bits, &scale, sizeof scale_bits);
        out[2 * p] = plait_keep((uint32_t)plait_splitmix64_at(key, (uint64_t)p), threshold, scale_bits);
    }
    """
    void plait_dropout_pairs(float *out, uint64_t key, uint64_t threshold, float scale,
                             Py_ssize_t p0, Py_ssize_t p1) nogil
    void plait_dropout_last(float *out, uint64_t key, uint64_t threshold, float scale, Py_ssize_t p) nogil

cdef enum:
    # Pairs per block handed to a thread; below two blocks (~100 us of work) the mask is filled
    # on one thread.
    _BLOCK_PAIRS = 1 << 15


def dropout_mask(cnp.ndarray out, uint64_t key, uint64_t threshold, float scale) -> None:
    """Fill a C-contiguous float32 array: each value is `scale` if its draw >= threshold, else 0.

    `threshold` is ceil(drop * 2**32); a value 2**32 or more drops everything.
    """
    cdef Py_ssize_t n = cnp.PyArray_Size(out)
    cdef Py_ssize_t n_pairs = n // 2
    cdef Py_ssize_t blk, n_blocks = (n_pairs + _BLOCK_PAIRS - 1) // _BLOCK_PAIRS
    cdef float* Y = <float*>cnp.PyArray_DATA(out)
    if n_blocks >= 2:
        for blk in prange(n_blocks, nogil=True, schedule="static"):
            plait_dropout_pairs(
                Y, key, threshold, scale, blk * _BLOCK_PAIRS, min((blk + 1) * _BLOCK_PAIRS, n_pairs)
            )
    else:
        with nogil:
            plait_dropout_pairs(Y, key, threshold, scale, 0, n_pairs)
    if n % 2:
        plait_dropout_last(Y, key, threshold, scale, n_pairs)
