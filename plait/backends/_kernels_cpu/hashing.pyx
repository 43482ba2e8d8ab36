# cython: language_level=3
"""CPU kernels for Ops.hash (MurmurHash3_x64_128 of 8-byte keys) and Ops.ngrams (MurmurHash64A).

Inputs are validated by plait.backends._murmur; these only require C-contiguous uint64 keys.
Every output element depends on its own inputs only, so results do not depend on threads.
"""
import numpy

from cython.parallel cimport prange
from libc.stdint cimport uint32_t, uint64_t

cdef extern from *:
    """
    #include <stdint.h>

    static inline uint64_t plait_rotl64(uint64_t x, int r) {
        return (x << r) | (x >> (64 - r));
    }

    static inline uint64_t plait_fmix64(uint64_t h) {
        h ^= h >> 33;
        h *= 0xFF51AFD7ED558CCDULL;
        h ^= h >> 33;
        h *= 0xC4CEB9FE1A85EC53ULL;
        h ^= h >> 33;
        return h;
    }

    /* MurmurHash3_x64_128 specialised to one 8-byte little-endian key: the key is shorter
       than a 16-byte block, so only the first lane's tail mix runs before finalisation.
       The key is taken as a value, so the result does not depend on host byte order. */
    static inline void plait_mmh3_x64_128_u64(uint64_t key, uint32_t seed, uint32_t *out) {
        uint64_t h1 = key * 0x87C37B91114253D5ULL;
        h1 = plait_rotl64(h1, 31) * 0x4CF5AD432745937FULL;
        uint64_t lane0 = (uint64_t)seed ^ 8u;
        h1 ^= lane0;
        h1 += lane0;
        uint64_t h2 = lane0 + h1;
        h1 = plait_fmix64(h1);
        h2 = plait_fmix64(h2);
        h1 += h2;
        h2 += h1;
        out[0] = (uint32_t)h1;
        out[1] = (uint32_t)(h1 >> 32);
        out[2] = (uint32_t)h2;
        out[3] = (uint32_t)(h2 >> 32);
    }

    /* Keys i0..i1-1. The loop is plain enough for GCC to vectorise the 64-bit multiplies
       where AVX-512DQ has them (vpmullq); the AVX-512 build compiles it for that (plait_isa.h).
       AVX2 has no 64-bit multiply, so GCC leaves the loop scalar there (5x slower than the
       AVX-512 build, measured): the AVX2 build hashes 4 keys per 256-bit vector instead,
       each 64-bit product from three 32x32->64 ones (plait_mul64.h). Integer arithmetic:
       every build gives the same bits. */
    #include "plait_mul64.h"
    #define PLAIT_HASH_CLONES PLAIT_ONLY_V4
    #ifdef PLAIT_MUL64_AVX2
    #define PLAIT_HASH_AVX2 1
    static inline __attribute__((target("avx2"), always_inline)) __m256i plait_fmix64_v(__m256i h) {
        h = _mm256_xor_si256(h, _mm256_srli_epi64(h, 33));
        h = plait_mul64c(h, PLAIT_C64(0xFF51AFD7ED558CCDULL));
        h = _mm256_xor_si256(h, _mm256_srli_epi64(h, 33));
        h = plait_mul64c(h, PLAIT_C64(0xC4CEB9FE1A85EC53ULL));
        return _mm256_xor_si256(h, _mm256_srli_epi64(h, 33));
    }
    /* Keys ids[0..3] into out[0..15]. */
    static inline __attribute__((target("avx2"), always_inline))
    void plait_mmh3_4(const uint64_t *ids, __m256i lane0, uint32_t *out) {
        __m256i h1 = plait_mul64c(_mm256_loadu_si256((const __m256i *)ids),
                                  PLAIT_C64(0x87C37B91114253D5ULL));
        h1 = _mm256_or_si256(_mm256_slli_epi64(h1, 31), _mm256_srli_epi64(h1, 33));
        h1 = plait_mul64c(h1, PLAIT_C64(0x4CF5AD432745937FULL));
        h1 = _mm256_add_epi64(_mm256_xor_si256(h1, lane0), lane0);
        __m256i h2 = _mm256_add_epi64(lane0, h1);
        h1 = plait_fmix64_v(h1);
        h2 = plait_fmix64_v(h2);
        h1 = _mm256_add_epi64(h1, h2);
        h2 = _mm256_add_epi64(h2, h1);
        /* Key k's 16 bytes are h1 then h2 (little-endian words): interleave the lanes. */
        const __m256i lo = _mm256_unpacklo_epi64(h1, h2), hi = _mm256_unpackhi_epi64(h1, h2);
        _mm256_storeu_si256((__m256i *)out, _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256((__m256i *)(out + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
    __attribute__((target("avx2")))
    static void plait_mmh3_rows(const uint64_t *ids, uint32_t seed, uint32_t *out,
                                Py_ssize_t i0, Py_ssize_t i1) {
        const __m256i lane0 = _mm256_set1_epi64x((long long)((uint64_t)seed ^ 8u));
        Py_ssize_t i = i0;
        /* 6 keys a step: 4 in the vector lanes, 2 in scalar registers. The scalar multiplier
           runs beside the vector units, which the emulated products keep busy. */
        for (; i + 6 <= i1; i += 6) {
            plait_mmh3_x64_128_u64(ids[i + 4], seed, out + 4 * (i + 4));
            plait_mmh3_x64_128_u64(ids[i + 5], seed, out + 4 * (i + 5));
            plait_mmh3_4(ids + i, lane0, out + 4 * i);
        }
        for (; i + 4 <= i1; i += 4) plait_mmh3_4(ids + i, lane0, out + 4 * i);
        for (; i < i1; ++i) plait_mmh3_x64_128_u64(ids[i], seed, out + 4 * i);
    }
    #else
    static PLAIT_HASH_CLONES void plait_mmh3_rows(const uint64_t *ids, uint32_t seed, uint32_t *out,
                                                  Py_ssize_t i0, Py_ssize_t i1) {
        for (Py_ssize_t i = i0; i < i1; ++i) plait_mmh3_x64_128_u64(ids[i], seed, out + 4 * i);
    }
    #endif

    static inline uint64_t plait_m64a_mix(uint64_t k) {
        k *= 0xC6A4A7935BD1E995ULL;
        k ^= k >> 47;
        return k * 0xC6A4A7935BD1E995ULL;
    }

    /* MurmurHash64A, seed 0, of n consecutive uint64 keys (8*n bytes, so never a tail). */
    static inline uint64_t plait_m64a_window(const uint64_t *keys, Py_ssize_t n) {
        const uint64_t m = 0xC6A4A7935BD1E995ULL;
        uint64_t h = ((uint64_t)n * 8u) * m;
        for (Py_ssize_t j = 0; j < n; ++j) {
            h ^= plait_m64a_mix(keys[j]);
            h *= m;
        }
        h ^= h >> 47;
        h *= m;
        h ^= h >> 47;
        return h;
    }
    """
    void plait_mmh3_rows(const uint64_t *ids, uint32_t seed, uint32_t *out, Py_ssize_t i0,
                         Py_ssize_t i1) nogil
    uint64_t plait_m64a_window(const uint64_t *keys, Py_ssize_t n) nogil

cdef enum:
    # Below this much work (in mixed keys) a parallel region costs more than it saves.
    _PARALLEL_MIN_WORK = 32768
    # Keys per block handed to a thread.
    _HASH_BLOCK = 4096


def hash_ids(const uint64_t[::1] ids, uint32_t seed):
    """Four uint32 words of MurmurHash3_x64_128 per key: (N,) uint64 -> (N, 4) uint32."""
    cdef Py_ssize_t i, N = ids.shape[0]
    out = numpy.empty((N, 4), dtype=numpy.uint32)
    cdef uint32_t[:, ::1] Y = out
    if N == 0:
        return out
    cdef Py_ssize_t blk, n_blocks = (N + _HASH_BLOCK - 1) // _HASH_BLOCK
    if N >= _PARALLEL_MIN_WORK:
        for blk in prange(n_blocks, nogil=True, schedule="static"):
            plait_mmh3_rows(&ids[0], seed, &Y[0, 0], blk * _HASH_BLOCK, min(N, (blk + 1) * _HASH_BLOCK))
    else:
        with nogil:
            plait_mmh3_rows(&ids[0], seed, &Y[0, 0], 0, N)
    return out


def ngrams(int n, const uint64_t[::1] keys):
    """MurmurHash64A of each run of n keys: (N,) uint64 -> (max(0, N - n + 1),) uint64.

    Empty when n < 1 or n > N, as in Thinc.
    """
    cdef Py_ssize_t i, N = keys.shape[0]
    cdef Py_ssize_t width = n
    cdef Py_ssize_t n_out = N - width + 1 if width >= 1 else 0
    if n_out < 0:
        n_out = 0
    out = numpy.empty((n_out,), dtype=numpy.uint64)
    cdef uint64_t[::1] Y = out
    if n_out == 0:
        return out
    cdef const uint64_t *K = &keys[0]
    if n_out * width >= _PARALLEL_MIN_WORK:
        for i in prange(n_out, nogil=True, schedule="static"):
            Y[i] = plait_m64a_window(K + i, width)
    else:
        with nogil:
            for i in range(n_out):
                Y[i] = plait_m64a_window(K + i, width)
    return out
