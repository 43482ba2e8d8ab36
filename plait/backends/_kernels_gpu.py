"""Custom CUDA kernels behind CupyOps, each written once and compiled lazily on first use.

Every kernel is an ``extern "C" __global__`` function named ``plait_<op>_<fwd|bwd>`` with a
grid-stride loop, so any launch shape covers all elements exactly once. Kernels are grouped
into families (one family per op, fwd and bwd together); a family's source is the shared
prelude for one float type (``real_t`` = float or double) followed by the family's body, and
is compiled with ``cupy.RawModule`` the first time one of its kernels is asked for, then
cached per (family, dtype, device).

The sources use no shared memory, no ``__syncthreads`` and no warp intrinsics: the only
CUDA-specific constructs are ``threadIdx``/``blockIdx``/``blockDim``/``gridDim`` and
``atomicAdd``. That keeps them compilable by ``nvcc --ptx`` for a syntax check and, with a
small emulation header, by a host C++ compiler, so that their arithmetic can be tested
against numpy on a machine without a GPU (see tests/backends/test_gpu_kernels.py).

This module imports without cupy; cupy is imported inside the functions that need it.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, Tuple

import numpy

DTYPES = ("float32", "float64")

# Threads per block. Grid-stride loops make the grid size a tuning knob, not a correctness
# condition; the cap keeps huge launches from paying for more blocks than the GPU can hold.
_BLOCK = 256
_MAX_BLOCKS = 8192

# NOTE: --fmad=false stops the compiler from fusing a*b+c into one FMA. The kernels are
# memory-bound, so it costs nothing measurable, and it keeps their rounding identical to
# numpy's separate multiply and add in the reference Ops (a fused result can differ by an
# ulp, enough to move an input across a clipping boundary).
COMPILE_OPTIONS = ("--std=c++14", "--fmad=false")


def _prelude(dtype: str) -> str:
    """The dtype-specific header every family's source starts with."""
    if dtype == "float32":
        real, suffix = "float", "f"
    elif dtype == "float64":
        real, suffix = "double", ""
    else:
        raise NotImplementedError(
            f"plait GPU kernels: no kernels for dtype {dtype!r}; supported: {', '.join(DTYPES)}."
        )
    return (
        f"// plait GPU kernels, real_t = {real}\n"
        f"typedef {real} real_t;\n"
        "typedef unsigned int pl_u32;\n"
        "typedef unsigned long long pl_u64;\n"
        # NOTE: the float/double variants of the math functions are picked by name (expf vs
        # exp) rather than by C++ overloading, so that float kernels never silently run the
        # much slower double-precision routines.
        f"__device__ __forceinline__ real_t pl_exp(real_t x) {{ return exp{suffix}(x); }}\n"
        f"__device__ __forceinline__ real_t pl_log1p(real_t x) {{ return log1p{suffix}(x); }}\n"
        f"__device__ __forceinline__ real_t pl_tanh(real_t x) {{ return tanh{suffix}(x); }}\n"
        f"__device__ __forceinline__ real_t pl_erf(real_t x) {{ return erf{suffix}(x); }}\n"
        f"__device__ __forceinline__ real_t pl_sqrt(real_t x) {{ return sqrt{suffix}(x); }}\n"
        + _COMMON
    )


_COMMON = r"""
// Comparisons are written so that a NaN in `a` propagates, as numpy's minimum/maximum do.
__device__ __forceinline__ real_t pl_min(real_t a, real_t b) { return b < a ? b : a; }
__device__ __forceinline__ real_t pl_max(real_t a, real_t b) { return b > a ? b : a; }
__device__ __forceinline__ real_t pl_clip(real_t x, real_t lo, real_t hi) {
    return pl_min(pl_max(x, lo), hi);
}

// log(1 + exp(x)) without overflow for large x.
__device__ __forceinline__ real_t pl_softplus(real_t x) {
    return x > (real_t)0.0 ? x + pl_log1p(pl_exp(-x)) : pl_log1p(pl_exp(x));
}

// Logistic function on an input clipped to [-20, 20], as the reference Ops.sigmoid does.
__device__ __forceinline__ real_t pl_sigmoid(real_t x) {
    x = pl_clip(x, (real_t)-20.0, (real_t)20.0);
    return (real_t)1.0 / ((real_t)1.0 + pl_exp(-x));
}

// Index of the sequence holding `row`: the first s with ends[s] > row (ends = cumsum(lengths)).
// Zero-length sequences repeat an end value and are skipped by construction.
__device__ __forceinline__ long long pl_seq_of(const int* ends, long long n_seqs, long long row) {
    long long lo = 0, hi = n_seqs;
    while (lo < hi) {
        long long mid = lo + (hi - lo) / 2;
        if ((long long)ends[mid] > row) hi = mid; else lo = mid + 1;
    }
    return lo;
}

// A negative index counts from the end, as in numpy's integer indexing.
__device__ __forceinline__ long long pl_wrap(long long idx, long long n) {
    return idx < 0 ? idx + n : idx;
}

#define PL_GRID_LOOP(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (long long)(n); \
         i += (long long)blockDim.x * gridDim.x)
"""

# ---------------------------------------------------------------------------------------
# Family bodies. Pointers that may alias (in-place updates) are never marked __restrict__.
# ---------------------------------------------------------------------------------------

_FAMILIES: Dict[str, str] = {}

_FAMILIES["seq2col"] = r"""
// Y[b, f, i] = X[b - nW + f, i] when that row is inside b's sequence, else 0.
// (nB, nI) -> (nB, nF * nI); nL == 0 means one sequence covering all rows.
extern "C" __global__ void plait_seq2col_fwd(real_t* Y, const real_t* X, const int* ends,
        long long nL, long long nW, long long nB, long long nI) {
    const long long nF = 2 * nW + 1;
    PL_GRID_LOOP(e, nB * nF * nI) {
        const long long b = e / (nF * nI);
        const long long f = (e / nI) % nF;
        const long long i = e % nI;
        long long start = 0, end = nB;
        if (nL > 0) {
            const long long s = pl_seq_of(ends, nL, b);
            start = s > 0 ? ends[s - 1] : 0;
            end = ends[s];
        }
        const long long src = b - nW + f;
        Y[e] = (src >= start && src < end) ? X[src * nI + i] : (real_t)0.0;
    }
}

// dX[b, i] = sum over f of dY[b + nW - f, f, i], for the rows in b's own sequence.
// Written as a gather, so no two threads touch the same output. (nB, nF * nI) -> (nB, nI)
extern "C" __global__ void plait_seq2col_bwd(real_t* dX, const real_t* dY, const int* ends,
        long long nL, long long nW, long long nB, long long nI) {
    const long long nF = 2 * nW + 1;
    PL_GRID_LOOP(e, nB * nI) {
        const long long b = e / nI;
        const long long i = e % nI;
        long long start = 0, end = nB;
        if (nL > 0) {
            const long long s = pl_seq_of(ends, nL, b);
            start = s > 0 ? ends[s - 1] : 0;
            end = ends[s];
        }
        real_t acc = (real_t)0.0;
        for (long long f = 0; f < nF; ++f) {
            const long long r = b + nW - f;
            if (r >= start && r < end) acc += dY[(r * nF + f) * nI + i];
        }
        dX[e] = acc;
    }
}
"""

_FAMILIES["maxout"] = r"""
// Max over the last axis and the first position holding it; a NaN wins, as in numpy.
// (nB*nO, nP) -> (nB*nO,), (nB*nO,)
extern "C" __global__ void plait_maxout_fwd(real_t* Y, int* which, const real_t* X,
        long long nBO, long long nP) {
    PL_GRID_LOOP(bo, nBO) {
        const real_t* x = X + bo * nP;
        real_t best = x[0];
        int arg = 0;
        for (long long p = 1; p < nP; ++p) {
            const real_t v = x[p];
            if (best == best && (v > best || v != v)) { best = v; arg = (int)p; }
        }
        Y[bo] = best;
        which[bo] = arg;
    }
}

// dX[bo, p] = dY[bo] where p == which[bo], else 0: every output written, no memset needed.
extern "C" __global__ void plait_maxout_bwd(real_t* dX, const real_t* dY, const int* which,
        long long nBO, long long nP) {
    PL_GRID_LOOP(e, nBO * nP) {
        const long long bo = e / nP;
        dX[e] = ((long long)which[bo] == e % nP) ? dY[bo] : (real_t)0.0;
    }
}
"""

_FAMILIES["relu"] = r"""
// max(x, 0), NaN propagating as in numpy.maximum.
extern "C" __global__ void plait_relu_fwd(real_t* Y, const real_t* X, long long N) {
    PL_GRID_LOOP(i, N) { Y[i] = pl_max(X[i], (real_t)0.0); }
}

extern "C" __global__ void plait_relu_bwd(real_t* dX, const real_t* dY, const real_t* Y,
        long long N) {
    PL_GRID_LOOP(i, N) { dX[i] = dY[i] * (real_t)(Y[i] > (real_t)0.0); }
}
"""

_FAMILIES["sigmoid"] = r"""
// The logistic function of X clipped to [-20, 20], as the reference Ops.sigmoid.
extern "C" __global__ void plait_sigmoid_fwd(real_t* Y, const real_t* X, long long N) {
    PL_GRID_LOOP(i, N) { Y[i] = pl_sigmoid(X[i]); }
}

// dX = dY * (Y * (1 - Y)) from the forward output; dX may alias dY or Y (Thinc's in-place
// form writes into Y).
extern "C" __global__ void plait_sigmoid_bwd(real_t* dX, const real_t* dY, const real_t* Y,
        long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t y = Y[i];
        dX[i] = dY[i] * (y * ((real_t)1.0 - y));
    }
}
"""

_FAMILIES["softmax"] = r"""
// Softmax along the last axis of an (nR, nC) array, one thread per row, nC >= 1:
// z = x / T (skipped when T == 1, as in the reference), exp(z - max z) / sum. A NaN in a
// row makes the whole row NaN, as numpy's max does. Y may alias X.
extern "C" __global__ void plait_softmax_fwd(real_t* Y, const real_t* X, real_t T,
        long long nR, long long nC) {
    const bool scaled = T != (real_t)1.0;
    PL_GRID_LOOP(r, nR) {
        const real_t* x = X + r * nC;
        real_t* y = Y + r * nC;
        real_t m = scaled ? x[0] / T : x[0];
        for (long long j = 1; j < nC; ++j) {
            const real_t z = scaled ? x[j] / T : x[j];
            if (z > m || z != z) m = z;
        }
        real_t s = (real_t)0.0;
        for (long long j = 0; j < nC; ++j) {
            const real_t e = pl_exp((scaled ? x[j] / T : x[j]) - m);
            y[j] = e;
            s += e;
        }
        for (long long j = 0; j < nC; ++j) y[j] /= s;
    }
}

// dX = (Y * dY - Y * sum(Y * dY)) / T per row (the division skipped when T == 1).
extern "C" __global__ void plait_softmax_bwd(real_t* dX, const real_t* dY, const real_t* Y,
        real_t T, long long nR, long long nC) {
    PL_GRID_LOOP(r, nR) {
        const real_t* y = Y + r * nC;
        const real_t* dy = dY + r * nC;
        real_t* dx = dX + r * nC;
        real_t s = (real_t)0.0;
        for (long long j = 0; j < nC; ++j) s += y[j] * dy[j];
        for (long long j = 0; j < nC; ++j) {
            const real_t d = y[j] * dy[j] - y[j] * s;
            dx[j] = T != (real_t)1.0 ? d / T : d;
        }
    }
}
"""

_FAMILIES["dropout"] = r"""
// Inverted-dropout mask from uniform draws U in [0, 1): `scale` (= 1 / (1 - drop)) where
// U >= drop, else 0, as the reference's (coinflips >= drop) / (1 - drop). M may alias U.
extern "C" __global__ void plait_dropout_fwd(real_t* M, const real_t* U, real_t drop,
        real_t scale, long long N) {
    PL_GRID_LOOP(i, N) { M[i] = U[i] >= drop ? scale : (real_t)0.0; }
}
"""

_FAMILIES["mish"] = r"""
// x * tanh(softplus(x)); the identity from `threshold` up, where tanh(softplus(x)) == 1.
extern "C" __global__ void plait_mish_fwd(real_t* Y, const real_t* X, real_t threshold,
        long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t x = X[i];
        Y[i] = x >= threshold ? x : x * pl_tanh(pl_softplus(x));
    }
}

// d/dx x*tanh(sp(x)) = t + x * sigmoid(x) * (1 - t^2), t = tanh(sp(x)). This form stays finite
// where the expanded exp(3x) polynomial would overflow.
extern "C" __global__ void plait_mish_bwd(real_t* dX, const real_t* dY, const real_t* X,
        real_t threshold, long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t x = X[i];
        if (x >= threshold) {
            dX[i] = dY[i];
        } else {
            const real_t t = pl_tanh(pl_softplus(x));
            dX[i] = dY[i] * (t + x * pl_sigmoid(x) * ((real_t)1.0 - t * t));
        }
    }
}
"""

_FAMILIES["swish"] = r"""
extern "C" __global__ void plait_swish_fwd(real_t* Y, const real_t* X, long long N) {
    PL_GRID_LOOP(i, N) { const real_t x = X[i]; Y[i] = x * pl_sigmoid(x); }
}

// d/dx x*s(x) = s + x*s*(1-s) = Y + s*(1 - Y), reusing the forward output Y.
extern "C" __global__ void plait_swish_bwd(real_t* dX, const real_t* dY, const real_t* X,
        const real_t* Y, long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t y = Y[i];
        dX[i] = dY[i] * (y + pl_sigmoid(X[i]) * ((real_t)1.0 - y));
    }
}
"""

_FAMILIES["dish"] = r"""
// 0.5 * x * (1 + x / sqrt(1 + x^2)): swish-like, with no exp or erf.
extern "C" __global__ void plait_dish_fwd(real_t* Y, const real_t* X, long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t x = X[i];
        Y[i] = x * ((real_t)0.5 * ((real_t)1.0 + x / pl_sqrt((real_t)1.0 + x * x)));
    }
}

// 0.5 * (1 + x / s) + 0.5 * x / s^3 with s = sqrt(1 + x^2)
extern "C" __global__ void plait_dish_bwd(real_t* dX, const real_t* dY, const real_t* X,
        long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t x = X[i];
        const real_t s = pl_sqrt((real_t)1.0 + x * x);
        const real_t d = (real_t)0.5 * ((real_t)1.0 + x / s) + (real_t)0.5 * x / (s * s * s);
        dX[i] = dY[i] * d;
    }
}
"""

_FAMILIES["gelu"] = r"""
// Exact GELU: x * Phi(x) with Phi(x) = 0.5 * (1 + erf(x / sqrt(2))).
extern "C" __global__ void plait_gelu_fwd(real_t* Y, const real_t* X, long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t x = X[i];
        Y[i] = x * ((real_t)0.5 * ((real_t)1.0 + pl_erf(x * (real_t)0.7071067811865476)));
    }
}

// Phi(x) + x * phi(x), phi the standard normal density.
extern "C" __global__ void plait_gelu_bwd(real_t* dX, const real_t* dY, const real_t* X,
        long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t x = X[i];
        const real_t cdf = (real_t)0.5 * ((real_t)1.0 + pl_erf(x * (real_t)0.7071067811865476));
        const real_t pdf = pl_exp((real_t)-0.5 * x * x) * (real_t)0.3989422804014327;
        dX[i] = dY[i] * (cdf + x * pdf);
    }
}
"""

_FAMILIES["clipped_linear"] = r"""
// clip(x * slope + offset, lo, hi); also backs relu_k, hard_sigmoid and hard_tanh.
extern "C" __global__ void plait_clipped_linear_fwd(real_t* Y, const real_t* X, real_t slope,
        real_t offset, real_t lo, real_t hi, long long N) {
    PL_GRID_LOOP(i, N) { Y[i] = pl_clip(X[i] * slope + offset, lo, hi); }
}

// slope where x * slope + offset lies strictly inside (lo, hi), 0 elsewhere.
extern "C" __global__ void plait_clipped_linear_bwd(real_t* dX, const real_t* dY,
        const real_t* X, real_t slope, real_t offset, real_t lo, real_t hi, long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t y = X[i] * slope + offset;
        dX[i] = dY[i] * ((lo < y && y < hi) ? slope : (real_t)0.0);
    }
}
"""

_FAMILIES["hard_swish"] = r"""
// x * hard_sigmoid(x), hard_sigmoid(x) = clip(0.2 x + 0.5, 0, 1).
extern "C" __global__ void plait_hard_swish_fwd(real_t* Y, const real_t* X, long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t x = X[i];
        Y[i] = x * pl_clip(x * (real_t)0.2 + (real_t)0.5, (real_t)0.0, (real_t)1.0);
    }
}

extern "C" __global__ void plait_hard_swish_bwd(real_t* dX, const real_t* dY, const real_t* X,
        long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t x = X[i];
        real_t d = x * (real_t)0.4 + (real_t)0.5;
        if (x > (real_t)2.5) d = (real_t)1.0;
        if (x < (real_t)-2.5) d = (real_t)0.0;
        dX[i] = dY[i] * d;
    }
}
"""

_FAMILIES["hard_swish_mobilenet"] = r"""
// x * relu6(x + 3) / 6 (MobileNetV3), with the gate as clip(x / 6 + 0.5, 0, 1).
extern "C" __global__ void plait_hard_swish_mobilenet_fwd(real_t* Y, const real_t* X,
        long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t x = X[i];
        Y[i] = x * pl_clip(x * (real_t)(1.0 / 6.0) + (real_t)0.5, (real_t)0.0, (real_t)1.0);
    }
}

extern "C" __global__ void plait_hard_swish_mobilenet_bwd(real_t* dX, const real_t* dY,
        const real_t* X, long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t x = X[i];
        real_t d = x / (real_t)3.0 + (real_t)0.5;
        if (x > (real_t)3.0) d = (real_t)1.0;
        if (x < (real_t)-3.0) d = (real_t)0.0;
        dX[i] = dY[i] * d;
    }
}
"""

_FAMILIES["reduce_sum"] = r"""
// Y[s, o] = sum of X[r, o] over the rows r of sequence s; 0 for an empty sequence.
// One thread per (s, o), consecutive threads on consecutive o, so loads coalesce.
extern "C" __global__ void plait_reduce_sum_fwd(real_t* Y, const real_t* X, const int* ends,
        long long nS, long long nO) {
    PL_GRID_LOOP(e, nS * nO) {
        const long long s = e / nO, o = e % nO;
        const long long start = s > 0 ? ends[s - 1] : 0, end = ends[s];
        real_t acc = (real_t)0.0;
        for (long long r = start; r < end; ++r) acc += X[r * nO + o];
        Y[e] = acc;
    }
}

// dX[r, o] = dY[seq_of(r), o]. (nS, nO) -> (nR, nO)
extern "C" __global__ void plait_reduce_sum_bwd(real_t* dX, const real_t* dY, const int* ends,
        long long nS, long long nR, long long nO) {
    PL_GRID_LOOP(e, nR * nO) {
        const long long r = e / nO, o = e % nO;
        dX[e] = dY[pl_seq_of(ends, nS, r) * nO + o];
    }
}
"""

_FAMILIES["reduce_mean"] = r"""
// The sum divided by the length (not a running mean), as numpy's mean computes it.
extern "C" __global__ void plait_reduce_mean_fwd(real_t* Y, const real_t* X, const int* ends,
        long long nS, long long nO) {
    PL_GRID_LOOP(e, nS * nO) {
        const long long s = e / nO, o = e % nO;
        const long long start = s > 0 ? ends[s - 1] : 0, end = ends[s];
        real_t acc = (real_t)0.0;
        for (long long r = start; r < end; ++r) acc += X[r * nO + o];
        Y[e] = end > start ? acc / (real_t)(end - start) : (real_t)0.0;
    }
}

extern "C" __global__ void plait_reduce_mean_bwd(real_t* dX, const real_t* dY, const int* ends,
        long long nS, long long nR, long long nO) {
    PL_GRID_LOOP(e, nR * nO) {
        const long long r = e / nO, o = e % nO;
        const long long s = pl_seq_of(ends, nS, r);
        const long long start = s > 0 ? ends[s - 1] : 0;
        // r lies in s, so the length is at least 1 here. Multiplying by the reciprocal (not
        // dividing) is what the reference does; for lengths below 2**28 the real_t division
        // rounds 1/len exactly as the reference's double division then cast does.
        dX[e] = dY[s * nO + o] * ((real_t)1.0 / (real_t)(ends[s] - start));
    }
}
"""

_FAMILIES["reduce_max"] = r"""
// Max over each sequence's rows and the first row (relative to the sequence) holding it.
// Lengths must be > 0 (checked by the caller). A NaN wins, as in numpy.
extern "C" __global__ void plait_reduce_max_fwd(real_t* Y, int* which, const real_t* X,
        const int* ends, long long nS, long long nO) {
    PL_GRID_LOOP(e, nS * nO) {
        const long long s = e / nO, o = e % nO;
        const long long start = s > 0 ? ends[s - 1] : 0, end = ends[s];
        real_t best = X[start * nO + o];
        int arg = 0;
        for (long long r = start + 1; r < end; ++r) {
            const real_t v = X[r * nO + o];
            if (best == best && (v > best || v != v)) { best = v; arg = (int)(r - start); }
        }
        Y[e] = best;
        which[e] = arg;
    }
}

// Scatter dY[s, o] to row which[s, o] of sequence s; dX must be zeroed by the caller.
// Each (s, o) owns a distinct output element, so no atomics are needed.
extern "C" __global__ void plait_reduce_max_bwd(real_t* dX, const real_t* dY, const int* which,
        const int* ends, long long nS, long long nO) {
    PL_GRID_LOOP(e, nS * nO) {
        const long long s = e / nO, o = e % nO;
        const long long start = s > 0 ? ends[s - 1] : 0;
        dX[(start + which[e]) * nO + o] = dY[e];
    }
}
"""

_FAMILIES["hash"] = r"""
__device__ __forceinline__ pl_u64 pl_rotl64(pl_u64 x, int r) { return (x << r) | (x >> (64 - r)); }

// MurmurHash3's 64-bit finalizer.
__device__ __forceinline__ pl_u64 pl_fmix64(pl_u64 k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

// MurmurHash3_x64_128 of each key's 8 little-endian bytes: (N,) uint64 -> (N, 4) uint32,
// words lo(h1), hi(h1), lo(h2), hi(h2). An 8-byte input has no full 16-byte block; it only
// goes through the first lane's tail mix, and the length (8) enters at finalization.
extern "C" __global__ void plait_hash_fwd(pl_u32* out, const pl_u64* keys, pl_u32 seed,
        long long N) {
    PL_GRID_LOOP(i, N) {
        pl_u64 k1 = keys[i];
        k1 *= 0x87c37b91114253d5ULL;
        k1 = pl_rotl64(k1, 31);
        k1 *= 0x4cf5ad432745937fULL;
        pl_u64 h1 = (pl_u64)seed ^ k1;
        pl_u64 h2 = (pl_u64)seed;
        h1 ^= 8ULL;
        h2 ^= 8ULL;
        h1 += h2;
        h2 += h1;
        h1 = pl_fmix64(h1);
        h2 = pl_fmix64(h2);
        h1 += h2;
        h2 += h1;
        out[4 * i + 0] = (pl_u32)(h1 & 0xffffffffULL);
        out[4 * i + 1] = (pl_u32)(h1 >> 32);
        out[4 * i + 2] = (pl_u32)(h2 & 0xffffffffULL);
        out[4 * i + 3] = (pl_u32)(h2 >> 32);
    }
}
"""

_FAMILIES["gather_add"] = r"""
// Y[b, o] = sum over k of table[indices[b, k], o]. (nT, nO), (nB, nK) -> (nB, nO)
// Indices must lie in [-nT, nT) (checked by the caller); negatives count from the end.
extern "C" __global__ void plait_gather_add_fwd(real_t* Y, const real_t* table,
        const int* indices, long long nT, long long nO, long long nB, long long nK) {
    PL_GRID_LOOP(e, nB * nO) {
        const long long b = e / nO, o = e % nO;
        real_t acc = (real_t)0.0;
        for (long long k = 0; k < nK; ++k) {
            acc += table[pl_wrap(indices[b * nK + k], nT) * nO + o];
        }
        Y[e] = acc;
    }
}
"""

_FAMILIES["scatter_add"] = r"""
// table[indices[m], r] += values[m, r] for every m, repeated indices accumulating (atomics).
// (nT, nR), (nM,), (nM, nR): trailing axes of table/values are flattened into nR.
extern "C" __global__ void plait_scatter_add_fwd(real_t* table, const int* indices,
        const real_t* values, long long nT, long long nM, long long nR) {
    PL_GRID_LOOP(e, nM * nR) {
        const long long m = e / nR, r = e % nR;
        atomicAdd(&table[pl_wrap(indices[m], nT) * nR + r], values[e]);
    }
}
"""

_FAMILIES["adam"] = r"""
// One fused Adam step in place on W, M1, M2 (the caller folds bias correction into lr):
// M1 = b1*M1 + (1-b1)*G;  M2 = b2*M2 + (1-b2)*G^2;  W -= lr * M1 / (mod_rate*sqrt(M2) + eps)
// and G is zeroed, ready to accumulate the next batch's gradient.
extern "C" __global__ void plait_adam_fwd(real_t* W, real_t* G, real_t* M1, real_t* M2,
        real_t beta1, real_t beta2, real_t one_minus_beta1, real_t one_minus_beta2,
        real_t eps, real_t lr, real_t mod_rate, long long N) {
    PL_GRID_LOOP(i, N) {
        const real_t g = G[i];
        const real_t m1 = M1[i] * beta1 + one_minus_beta1 * g;
        const real_t m2 = M2[i] * beta2 + one_minus_beta2 * g * g;
        M1[i] = m1;
        M2[i] = m2;
        G[i] = (real_t)0.0;
        W[i] -= lr * (m1 / (mod_rate * pl_sqrt(m2) + eps));
    }
}
"""

_FAMILIES["clip_gradient"] = r"""
// Rescale G in place to norm `threshold` when its norm (read from device memory, so the
// host never waits for it) is positive and at least `threshold`.
extern "C" __global__ void plait_clip_gradient_fwd(real_t* G, const real_t* norm,
        double threshold, long long N) {
    const double n = (double)norm[0];
    if (!(n >= threshold && n > 0.0)) return;
    const real_t scale = (real_t)(threshold / n);
    PL_GRID_LOOP(i, N) { G[i] *= scale; }
}
"""

# Families whose source does not depend on the float type (compiled once, as float32).
_DTYPE_FREE = frozenset({"hash"})


def _kernel_names(body: str) -> Tuple[str, ...]:
    names = []
    marker = 'extern "C" __global__ void '
    for line in body.splitlines():
        if line.startswith(marker):
            names.append(line[len(marker):].split("(", 1)[0].strip())
    return tuple(names)


KERNELS: Dict[str, str] = {
    name: family for family, body in _FAMILIES.items() for name in _kernel_names(body)
}
"""Every kernel name, mapped to the family (module) that defines it."""


def families() -> Tuple[str, ...]:
    """The kernel families, one compiled module each per dtype."""
    return tuple(_FAMILIES)


def family_source(family: str, dtype: str = "float32") -> str:
    """Complete CUDA C source of one family's module for one float dtype."""
    if family not in _FAMILIES:
        raise KeyError(
            f"plait GPU kernels: unknown kernel family {family!r}; known: {', '.join(_FAMILIES)}."
        )
    return _prelude(str(numpy.dtype(dtype))) + _FAMILIES[family]


def kernel_sources(dtype: str = "float32") -> Dict[str, str]:
    """Every kernel's name mapped to the complete source of the module that defines it.

    The two kernels of a family (fwd and bwd) map to the same source string.
    """
    return {name: family_source(family, dtype) for name, family in KERNELS.items()}


def combined_source(dtype: str = "float32") -> str:
    """All families in one translation unit for one dtype (for syntax checks and emulation)."""
    return _prelude(str(numpy.dtype(dtype))) + "".join(_FAMILIES.values())


# ---------------------------------------------------------------------------------------
# Lazy compilation and launching (these need cupy and a GPU).
# ---------------------------------------------------------------------------------------

_MODULES: Dict[Tuple[str, str, int], Any] = {}
_LOCK = threading.Lock()


def get_kernel(name: str, dtype: Any = "float32"):
    """The compiled ``cupy.RawKernel`` for a kernel name and float dtype, compiling its family once."""
    import cupy

    if name not in KERNELS:
        raise KeyError(f"plait GPU kernels: unknown kernel {name!r}; known: {', '.join(KERNELS)}.")
    family = KERNELS[name]
    dtype = "float32" if family in _DTYPE_FREE else str(numpy.dtype(dtype))
    key = (family, dtype, cupy.cuda.runtime.getDevice())
    module = _MODULES.get(key)
    if module is None:
        with _LOCK:
            module = _MODULES.get(key)
            if module is None:
                module = cupy.RawModule(code=family_source(family, dtype), options=COMPILE_OPTIONS)
                _MODULES[key] = module
    return module.get_function(name)


def launch(name: str, dtype: Any, n: int, args: tuple) -> None:
    """Launch a grid-stride kernel over `n` work items; a no-op when there is no work."""
    n = int(n)
    if n <= 0:
        return
    import cupy

    # NOTE: the kernel handle is cached per (name, dtype as given, device) in the same dict as
    # the modules: get_kernel's dtype normalisation and lookups cost ~15 us of Python per
    # launch, as much as a small kernel runs on the GPU.
    key = (name, dtype, cupy.cuda.runtime.getDevice())
    kernel = _MODULES.get(key)
    if kernel is None:
        kernel = _MODULES[key] = get_kernel(name, dtype)
    blocks = min((n + _BLOCK - 1) // _BLOCK, _MAX_BLOCKS)
    kernel((blocks,), (_BLOCK,), args)


def real(dtype: Any, value: float):
    """A kernel scalar argument of C type `real_t` for this dtype."""
    return numpy.dtype(dtype).type(value)


def i64(value: int) -> numpy.int64:
    """A kernel scalar argument of C type `long long`."""
    return numpy.int64(value)


def u32(value: int) -> numpy.uint32:
    """A kernel scalar argument of C type `unsigned int`."""
    return numpy.uint32(value)

