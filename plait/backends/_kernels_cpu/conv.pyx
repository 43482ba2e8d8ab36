# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""CPU kernels for NumpyOps: the 2-D im2col / col2im copies under convolution and pooling, and
2-D max pooling with its backprop; each works on one (image, channel) plane at a time.

Each entry point returns None outside its fast case (exact, aligned, native-order, C-contiguous
float32/float64 arrays of the expected rank; int32 winners of dY's shape); the mixin
(plait.backends._numpy_conv) then calls the Ops reference, which computes the odd cases and
raises the errors. Planes are independent, so no result depends on the thread count.

im2col copies, so it equals the reference bit for bit. col2im adds each pixel's window values
in the reference's order (kernel offsets in row-major order, onto zeros), so it is bit-identical
too. The reference pads a copy of the image; these kernels read cells outside it as the pad
value (im2col) or drop them (col2im) instead.

Max pooling: the winner is the first maximum in the window's row-major order, and the first NaN
if there is one (numpy's argmax), cells outside the image reading as -inf, so Y and `which`
equal the reference's exactly. The backprop adds each output gradient to its winner's pixel:
exactly the reference's sum where windows do not overlap, the same up to the order of additions
where they do.
"""
cimport numpy as cnp
from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY
from libc.stdint cimport int64_t

import numpy

from ._arrays cimport _dim, _float_kind

cnp.import_array()

ctypedef fused real:
    float
    double


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #ifdef _OPENMP
    #include <omp.h>
    static int pcv_max_threads(void) { return omp_get_max_threads(); }
    #else
    static int pcv_max_threads(void) { return 1; }
    #endif
    /* float32 max pooling on 8- and 4-lane vectors (GCC/Clang vector extensions), compiled
       for x86-64-v3 (AVX2) in the builds that allow it (plait_isa.h). Same selects as the
       scalar code, so the same Y and winners. */
    #include "plait_isa.h"
    #define PCV_CLONES PLAIT_UPTO_V3
    #if defined(__GNUC__) || defined(__clang__)
    #define PCV_VECTORS 1
    #define PCV_DEFINE(VW)                                                                       \
    typedef float pcv_f##VW __attribute__((vector_size(VW * 4)));                                \
    typedef int32_t pcv_i##VW __attribute__((vector_size(VW * 4)));                              \
    /* VW values p[i * sx] (sx 1 or 2) of a row. For sx 2 it reads p[0 .. 2 VW - 1]. */         \
    static inline __attribute__((always_inline)) pcv_f##VW pcv_load##VW(const float* p, int sx, int odd) { \
        pcv_f##VW a, b;                                                                          \
        memcpy(&a, p, sizeof(a));                                                                \
        if (sx == 1) return a;                                                                   \
        memcpy(&b, p + VW, sizeof(b));                                                           \
        return odd ? __builtin_shuffle(a, b, pcv_odd##VW) : __builtin_shuffle(a, b, pcv_even##VW); \
    }                                                                                            \
    /* Windows of outputs [0, VW) of a row: window cell (ky, kx) of output o at                 \
       row[ky * W + o * sx + kx]. Returns a nonzero mask if a window holds a NaN. */           \
    static inline __attribute__((always_inline)) int32_t pcv_max##VW(                          \
            const float* row, float* y, int32_t* which, int64_t W, int kh, int kw, int sx) {    \
        pcv_f##VW best, v;                                                                       \
        pcv_i##VW idx = {0}, m, nan;                                                             \
        int ky, kx, c = 0, l;                                                                    \
        int32_t any = 0, t[VW];                                                                  \
        best = pcv_load##VW(row, sx, 0);                                                         \
        nan = best != best;                                                                      \
        for (ky = 0; ky < kh; ky++)                                                              \
            for (kx = 0; kx < kw; kx++, c++) {                                                   \
                if (c == 0) continue;                                                            \
                /* sx 2: the pair of vectors holding cells kx & ~1 and kx | 1 */                 \
                v = pcv_load##VW(row + ky * W + (sx == 2 ? (kx & ~1) : kx), sx, kx & 1);        \
                m = v > best;                                                                    \
                best = (pcv_f##VW)(((pcv_i##VW)best & ~m) | ((pcv_i##VW)v & m));                \
                idx = (idx & ~m) | (m & c);                                                      \
                nan |= v != v;                                                                   \
            }                                                                                    \
        memcpy(y, &best, sizeof(best));                                                          \
        memcpy(which, &idx, sizeof(idx));                                                        \
        memcpy(t, &nan, sizeof(t));                                                              \
        for (l = 0; l < VW; l++) any |= t[l];                                                    \
        return any;                                                                              \
    }
    typedef int32_t pcv_i8_ __attribute__((vector_size(32)));
    typedef int32_t pcv_i4_ __attribute__((vector_size(16)));
    static const pcv_i8_ pcv_even8 = {0, 2, 4, 6, 8, 10, 12, 14}, pcv_odd8 = {1, 3, 5, 7, 9, 11, 13, 15};
    static const pcv_i4_ pcv_even4 = {0, 2, 4, 6}, pcv_odd4 = {1, 3, 5, 7};
    PCV_DEFINE(8)
    PCV_DEFINE(4)

    /* Outputs [o0, o1) of one output row whose windows lie inside the image, 8 then 4 at a
       time, as long as the loads stay inside the row (x0: the first window's left column).
       Returns the first output not done (the caller does the rest one by one), or -1 if a
       window holds a NaN (the caller redoes the row). */
    static PCV_CLONES int64_t pcv_max_pool_row_f(const float* row, float* y, int32_t* which,
                                                 int64_t W, int64_t x0, int64_t o0, int64_t o1,
                                                 int kh, int kw, int sx) {
        int64_t o = o0;
        int32_t nan = 0;
        /* The last column a chunk of VW outputs reads, from its first window's left column. */
        const int64_t reach8 = sx == 2 ? 2 * 8 - 1 + ((kw - 1) & ~1) : 8 - 1 + kw - 1;
        const int64_t reach4 = sx == 2 ? 2 * 4 - 1 + ((kw - 1) & ~1) : 4 - 1 + kw - 1;
        for (; o + 8 <= o1 && x0 + o * sx + reach8 < W; o += 8)
            nan |= pcv_max8(row + x0 + o * sx, y + o, which + o, W, kh, kw, sx);
        for (; o + 4 <= o1 && x0 + o * sx + reach4 < W; o += 4)
            nan |= pcv_max4(row + x0 + o * sx, y + o, which + o, W, kh, kw, sx);
        return nan ? -1 : o;
    }

    /* Rows [0, oh) of a plane: for each output row whose windows lie inside the image
       vertically, its outputs [ox_lo, ox_hi) (windows inside horizontally) on vectors; done[oy]
       is the first output left to the one-by-one code (ox_lo where no vector ran, -1 where a
       window holds a NaN). One call per plane, not per row. */
    static int64_t pcv_max_pool_plane_f(const float* x, float* y, int32_t* which, int64_t H,
                                        int64_t W, int64_t oh, int64_t ow, int kh, int kw, int sy,
                                        int sx, int ph, int pw, int64_t* done) {
        const int64_t ox_lo = (pw + sx - 1) / sx;
        const int64_t ox_hi = W >= kw ? ((W - kw + pw) / sx + 1 < ow ? (W - kw + pw) / sx + 1 : ow) : 0;
        int64_t oy;
        for (oy = 0; oy < oh; oy++) {
            const int64_t y0 = oy * sy - ph;
            done[oy] = ox_lo;
            if (y0 >= 0 && y0 + kh <= H && ox_lo < ox_hi)
                done[oy] = pcv_max_pool_row_f(x + y0 * W, y + oy * ow, which + oy * ow, W, -pw,
                                              ox_lo, ox_hi, kh, kw, sx);
        }
        return 0;
    }

    /* Backprop of 2-wide windows tiling the row (kw = sx = 2): outputs [0, n) of one output row,
       for each of its kh input rows: the two cells of each window get 0 + gy (its winner) or
       +0, written in place of zeros-and-adds, so the same bits. Returns outputs done, or -1 if
       a winner lies outside the window. */
    static PCV_CLONES int64_t pcv_unpool_row2_f(const float* gy, const int32_t* which, float* dx,
                                                int64_t W, int64_t n, int kh) {
        int64_t o;
        int ky;
        pcv_i8 bad = {0};
        for (o = 0; o + 8 <= n; o += 8) {
            pcv_f8 g, e, d, lo, hi;
            pcv_i8 w;
            memcpy(&g, gy + o, sizeof(g));
            memcpy(&w, which + o, sizeof(w));
            g = g + 0.0f;
            bad |= (w < 0) | (w >= 2 * kh);
            for (ky = 0; ky < kh; ky++) {
                e = (pcv_f8)((pcv_i8)g & (w == 2 * ky));
                d = (pcv_f8)((pcv_i8)g & (w == 2 * ky + 1));
                lo = __builtin_shuffle(e, d, (pcv_i8){0, 8, 1, 9, 2, 10, 3, 11});
                hi = __builtin_shuffle(e, d, (pcv_i8){4, 12, 5, 13, 6, 14, 7, 15});
                memcpy(dx + ky * W + 2 * o, &lo, sizeof(lo));
                memcpy(dx + ky * W + 2 * o + 8, &hi, sizeof(hi));
            }
        }
        for (; o + 4 <= n; o += 4) {
            pcv_f4 g, e, d, lo, hi;
            pcv_i4 w;
            memcpy(&g, gy + o, sizeof(g));
            memcpy(&w, which + o, sizeof(w));
            g = g + 0.0f;
            {
                pcv_i4 b4 = (w < 0) | (w >= 2 * kh);
                int32_t t4[4];
                memcpy(t4, &b4, sizeof(t4));
                if (t4[0] | t4[1] | t4[2] | t4[3]) return -1;
            }
            for (ky = 0; ky < kh; ky++) {
                e = (pcv_f4)((pcv_i4)g & (w == 2 * ky));
                d = (pcv_f4)((pcv_i4)g & (w == 2 * ky + 1));
                lo = __builtin_shuffle(e, d, (pcv_i4){0, 4, 1, 5});
                hi = __builtin_shuffle(e, d, (pcv_i4){2, 6, 3, 7});
                memcpy(dx + ky * W + 2 * o, &lo, sizeof(lo));
                memcpy(dx + ky * W + 2 * o + 4, &hi, sizeof(hi));
            }
        }
        {
            int32_t t[8], l, any = 0;
            memcpy(t, &bad, sizeof(t));
            for (l = 0; l < 8; l++) any |= t[l];
            if (any) return -1;
        }
        return o;
    }
    /* A whole plane of pcv_unpool_row2_f, the outputs it leaves done one by one here.
       Returns -1 if a winner lies outside its window. */
    static int pcv_unpool_plane2_f(const float* gy, const int32_t* which, float* dx, int64_t W,
                                   int64_t oh, int64_t ow, int kh) {
        int64_t oy, ox, done;
        int ky, kx;
        for (oy = 0; oy < oh; oy++) {
            done = pcv_unpool_row2_f(gy + oy * ow, which + oy * ow, dx + oy * kh * W, W, ow, kh);
            if (done < 0) return -1;
            for (ox = done; ox < ow; ox++) {
                const int32_t w = which[oy * ow + ox];
                const float g = gy[oy * ow + ox] + 0.0f;
                if (w < 0 || w >= 2 * kh) return -1;
                for (ky = 0; ky < kh; ky++)
                    for (kx = 0; kx < 2; kx++)
                        dx[(oy * kh + ky) * W + 2 * ox + kx] = w == ky * 2 + kx ? g : 0.0f;
            }
        }
        return 0;
    }
    #else
    #define PCV_VECTORS 0
    static int64_t pcv_max_pool_plane_f(const float* x, float* y, int32_t* which, int64_t H,
                                        int64_t W, int64_t oh, int64_t ow, int kh, int kw, int sy,
                                        int sx, int ph, int pw, int64_t* done) {
        int64_t oy;
        for (oy = 0; oy < oh; oy++) done[oy] = 0;
        return 0;
    }
    static int pcv_unpool_plane2_f(const float* gy, const int32_t* which, float* dx, int64_t W,
                                   int64_t oh, int64_t ow, int kh) {
        int64_t oy, ox;
        int ky, kx;
        for (oy = 0; oy < oh; oy++)
            for (ox = 0; ox < ow; ox++) {
                const int32_t w = which[oy * ow + ox];
                const float g = gy[oy * ow + ox] + 0.0f;
                if (w < 0 || w >= 2 * kh) return -1;
                for (ky = 0; ky < kh; ky++)
                    for (kx = 0; kx < 2; kx++)
                        dx[(oy * kh + ky) * W + 2 * ox + kx] = w == ky * 2 + kx ? g : 0.0f;
            }
        return 0;
    }
    static int64_t pcv_max_pool_row_f(const float* row, float* y, int32_t* which, int64_t W,
                                      int64_t x0, int64_t o0, int64_t o1, int kh, int kw, int sx) {
        return o0;
    }
    static int64_t pcv_unpool_row2_f(const float* gy, const int32_t* which, float* dx, int64_t W,
                                     int64_t n, int kh) { return 0; }
    #endif
    """
    int64_t pcv_max_pool_plane_f(const float* x, float* y, int* which, int64_t H, int64_t W,
                                 int64_t oh, int64_t ow, int kh, int kw, int sy, int sx, int ph,
                                 int pw, int64_t* done) noexcept nogil
    int pcv_max_threads() noexcept nogil
    int pcv_unpool_plane2_f(const float* gy, const int* which, float* dx, int64_t W, int64_t oh,
                            int64_t ow, int kh) noexcept nogil


cdef inline bint _isnan(real v) noexcept nogil:
    return v != v


cdef void _max_pool_plane(const real* x, real* y, int* which, Py_ssize_t H, Py_ssize_t W,
                          Py_ssize_t oh, Py_ssize_t ow, int kh, int kw, int sy, int sx,
                          int ph, int pw, int64_t* done) noexcept nogil:
    # done (oh entries, float32 only): where each row's vector part stopped (see
    # pcv_max_pool_plane_f); the outputs before its windows, and after, go one by one.
    cdef Py_ssize_t oy, ox, ox_lo = (pw + sx - 1) // sx
    if real is float and (sx == 1 or sx == 2) and done != NULL:
        pcv_max_pool_plane_f(x, y, which, H, W, oh, ow, kh, kw, sy, sx, ph, pw, done)
        for oy in range(oh):
            if done[oy] < 0:  # a NaN: the one-by-one code finds numpy's winner
                done[oy] = min(ox_lo, ow)
            for ox in range(min(ox_lo, done[oy])):
                _max_pool_out(x, y, which, H, W, ow, kh, kw, sy, sx, ph, pw, oy, ox)
            for ox in range(done[oy], ow):
                _max_pool_out(x, y, which, H, W, ow, kh, kw, sy, sx, ph, pw, oy, ox)
        return
    for oy in range(oh):
        for ox in range(ow):
            _max_pool_out(x, y, which, H, W, ow, kh, kw, sy, sx, ph, pw, oy, ox)


cdef inline void _max_pool_out(const real* x, real* y, int* which, Py_ssize_t H, Py_ssize_t W,
                               Py_ssize_t ow, int kh, int kw, int sy, int sx, int ph, int pw,
                               Py_ssize_t oy, Py_ssize_t ox) noexcept nogil:
    cdef Py_ssize_t iy, ix, y0 = oy * sy - ph, x0 = ox * sx - pw
    cdef int ky, kx, idx, c
    cdef real v, best
    cdef bint first, take, nan
    cdef const real* row
    if y0 >= 0 and y0 + kh <= H and x0 >= 0 and x0 + kw <= W:
        # The window lies in the image. Selects, not branches (random data mispredicts
        # a branch half the time): the first of the largest values. A NaN compares
        # false, so it is only noted, and a window with one (rare) is searched again
        # for its first NaN, the winner of numpy's argmax.
        row = x + y0 * W + x0
        best = row[0]
        idx = 0
        c = 0
        nan = False
        for ky in range(kh):
            for kx in range(kw):
                v = row[ky * W + kx]
                take = v > best
                idx = c if take else idx
                best = v if take else best
                nan = nan | (v != v)
                c += 1
        if nan:
            idx = _first_nan(row, W, kh, kw)
            best = row[(idx // kw) * W + idx % kw]
        y[oy * ow + ox] = best
        which[oy * ow + ox] = idx
        return
    best = -INFINITY
    idx = 0
    first = True
    # The window in row-major order, padding read as -inf: `>` keeps the first of equal
    # values, and the first NaN wins and ends the search (numpy's argmax).
    for ky in range(kh):
        iy = y0 + ky
        for kx in range(kw):
            ix = x0 + kx
            if 0 <= iy < H and 0 <= ix < W:
                v = x[iy * W + ix]
            else:
                v = -INFINITY
            if first or v > best or _isnan(v):
                best = v
                idx = ky * kw + kx
                first = False
                if _isnan(v):
                    break
        if _isnan(best):
            break
    y[oy * ow + ox] = best
    which[oy * ow + ox] = idx


cdef inline int _first_nan(const real* row, Py_ssize_t W, int kh, int kw) noexcept nogil:
    cdef int ky, kx
    for ky in range(kh):
        for kx in range(kw):
            if row[ky * W + kx] != row[ky * W + kx]:
                return ky * kw + kx
    return 0


cdef void _max_pool_unpool_plane(const real* gy, const int* which, real* gx, Py_ssize_t H,
                                 Py_ssize_t W, Py_ssize_t oh, Py_ssize_t ow, int kw, int sy,
                                 int sx, int ph, int pw) noexcept nogil:
    cdef Py_ssize_t oy, ox, iy, ix
    cdef int idx
    for oy in range(oh):
        for ox in range(ow):
            idx = which[oy * ow + ox]
            iy = oy * sy - ph + idx // kw
            ix = ox * sx - pw + idx % kw
            if 0 <= iy < H and 0 <= ix < W:
                gx[iy * W + ix] += gy[oy * ow + ox]


cdef void _im2col_plane(const real* x, real* col, Py_ssize_t H, Py_ssize_t W, Py_ssize_t oh,
                        Py_ssize_t ow, int kh, int kw, int sy, int sx, int ph, int pw, int dy,
                        int dx, real pad, Py_ssize_t step) noexcept nogil:
    # Window cell (ky, kx) of every output position goes to col + (ky * kw + kx) * step: step is
    # oh * ow for the (nB, C, kh, kw, oh, ow) layout, nB * oh * ow for (C, kh, kw, nB, oh, ow).
    cdef Py_ssize_t oy, ox, iy, ix
    cdef int ky, kx
    cdef real* dst
    cdef const real* src
    for ky in range(kh):
        for kx in range(kw):
            for oy in range(oh):
                dst = col + (ky * kw + kx) * step + oy * ow
                iy = oy * sy - ph + ky * dy
                if iy < 0 or iy >= H:
                    for ox in range(ow):
                        dst[ox] = pad
                    continue
                src = x + iy * W
                for ox in range(ow):
                    ix = ox * sx - pw + kx * dx
                    dst[ox] = src[ix] if 0 <= ix < W else pad


cdef void _col2im_plane(const real* col, real* x, Py_ssize_t H, Py_ssize_t W, Py_ssize_t oh,
                        Py_ssize_t ow, int kh, int kw, int sy, int sx, int ph, int pw, int dy,
                        int dx) noexcept nogil:
    cdef Py_ssize_t oy, ox, iy, ix, i
    cdef int ky, kx
    cdef const real* src
    cdef real* dst
    for i in range(H * W):
        x[i] = 0
    # Offsets in the reference's order, so each pixel's sum is added up in the same order.
    for ky in range(kh):
        for kx in range(kw):
            for oy in range(oh):
                iy = oy * sy - ph + ky * dy
                if iy < 0 or iy >= H:
                    continue
                src = col + ((ky * kw + kx) * oh + oy) * ow
                dst = x + iy * W
                for ox in range(ow):
                    ix = ox * sx - pw + kx * dx
                    if 0 <= ix < W:
                        dst[ix] += src[ox]


def im2col_2d(object X, int kh, int kw, int sy, int sx, int ph, int pw, int dy, int dx,
              Py_ssize_t oh, Py_ssize_t ow, double pad_value, bint channels_first=False):
    """X (nB, C, H, W) -> (nB, C, kh, kw, oh, ow), or with channels_first (C, kh, kw, nB, oh, ow);
    None outside the fast case."""
    cdef int kind = _float_kind(X, 4)
    if kind == 0 or not _params_ok(kh, kw, sy, sx, ph, pw) or dy < 1 or dx < 1 or oh < 0 or ow < 0:
        return None
    cdef Py_ssize_t nB = _dim(X, 0), C = _dim(X, 1), H = _dim(X, 2), W = _dim(X, 3)
    cdef Py_ssize_t planes = nB * C, p, per = kh * kw * oh * ow, L = oh * ow
    # How far apart one plane's window cells lie in the column array.
    cdef Py_ssize_t step = nB * L if channels_first else L
    if channels_first:
        col = numpy.empty((C, kh, kw, nB, oh, ow), dtype=X.dtype)
    else:
        col = numpy.empty((nB, C, kh, kw, oh, ow), dtype=X.dtype)
    if planes == 0 or per == 0:
        return col
    cdef const float[:, :, :, ::1] x32
    cdef const double[:, :, :, ::1] x64
    cdef float[:, :, :, :, :, ::1] c32
    cdef double[:, :, :, :, :, ::1] c64
    cdef float pad32 = <float>pad_value
    if kind == 4:
        x32 = X
        c32 = col
        for p in prange(planes, nogil=True, schedule="static"):
            _im2col_plane(&x32[0, 0, 0, 0] + p * H * W,
                          &c32[0, 0, 0, 0, 0, 0] + _start(p, C, nB, per, L, channels_first),
                          H, W, oh, ow, kh, kw, sy, sx, ph, pw, dy, dx, pad32, step)
    else:
        x64 = X
        c64 = col
        for p in prange(planes, nogil=True, schedule="static"):
            _im2col_plane(&x64[0, 0, 0, 0] + p * H * W,
                          &c64[0, 0, 0, 0, 0, 0] + _start(p, C, nB, per, L, channels_first),
                          H, W, oh, ow, kh, kw, sy, sx, ph, pw, dy, dx, pad_value, step)
    return col


cdef inline Py_ssize_t _start(Py_ssize_t p, Py_ssize_t C, Py_ssize_t nB, Py_ssize_t per,
                              Py_ssize_t L, bint channels_first) noexcept nogil:
    """Offset of plane p = n * C + c's first window cell in the column array."""
    if channels_first:
        return (p % C) * per * nB + (p // C) * L  # at (c, 0, 0, n, 0, 0)
    return p * per


def col2im_2d(object col, Py_ssize_t H, Py_ssize_t W, int sy, int sx, int ph, int pw, int dy, int dx):
    """col (nB, C, kh, kw, oh, ow) -> (nB, C, H, W), or None outside the fast case."""
    cdef int kind = _float_kind(col, 6)
    if kind == 0 or sy < 1 or sx < 1 or ph < 0 or pw < 0 or dy < 1 or dx < 1 or H < 0 or W < 0:
        return None
    cdef Py_ssize_t nB = _dim(col, 0), C = _dim(col, 1), oh = _dim(col, 4), ow = _dim(col, 5)
    cdef int kh = <int>_dim(col, 2), kw = <int>_dim(col, 3)
    cdef Py_ssize_t planes = nB * C, p, per = kh * kw * oh * ow
    X = numpy.empty((nB, C, H, W), dtype=col.dtype)
    if planes == 0 or H * W == 0:
        return X
    if per == 0:
        X.fill(0)
        return X
    cdef float[:, :, :, ::1] x32
    cdef double[:, :, :, ::1] x64
    cdef const float[:, :, :, :, :, ::1] c32
    cdef const double[:, :, :, :, :, ::1] c64
    if kind == 4:
        x32 = X
        c32 = col
        for p in prange(planes, nogil=True, schedule="static"):
            _col2im_plane(&c32[0, 0, 0, 0, 0, 0] + p * per, &x32[0, 0, 0, 0] + p * H * W,
                          H, W, oh, ow, kh, kw, sy, sx, ph, pw, dy, dx)
    else:
        x64 = X
        c64 = col
        for p in prange(planes, nogil=True, schedule="static"):
            _col2im_plane(&c64[0, 0, 0, 0, 0, 0] + p * per, &x64[0, 0, 0, 0] + p * H * W,
                          H, W, oh, ow, kh, kw, sy, sx, ph, pw, dy, dx)
    return X


def _params_ok(int kh, int kw, int sy, int sx, int ph, int pw) -> bool:
    return kh >= 1 and kw >= 1 and sy >= 1 and sx >= 1 and ph >= 0 and pw >= 0


def max_pool_2d(object X, int kh, int kw, int sy, int sx, int ph, int pw, Py_ssize_t oh, Py_ssize_t ow):
    """(Y, which) for X (nB, C, H, W), or None outside the fast case."""
    cdef int kind = _float_kind(X, 4)
    if kind == 0 or not _params_ok(kh, kw, sy, sx, ph, pw) or oh < 1 or ow < 1:
        return None
    cdef Py_ssize_t nB = _dim(X, 0), C = _dim(X, 1), H = _dim(X, 2), W = _dim(X, 3)
    cdef Py_ssize_t planes = nB * C, p
    Y = numpy.empty((nB, C, oh, ow), dtype=X.dtype)
    which = numpy.empty((nB, C, oh, ow), dtype=numpy.int32)
    cdef int[:, :, :, ::1] w_view = which
    cdef int* w_ptr = &w_view[0, 0, 0, 0] if planes and oh and ow else NULL
    cdef const float[:, :, :, ::1] x32
    cdef float[:, :, :, ::1] y32
    cdef const double[:, :, :, ::1] x64
    cdef double[:, :, :, ::1] y64
    if planes == 0:
        return Y, which
    # One row of `done` per thread (see _max_pool_plane).
    done = numpy.empty((_max_threads(), oh), dtype=numpy.int64)
    cdef int64_t[:, ::1] d_view = done
    if kind == 4:
        x32 = X
        y32 = Y
        for p in prange(planes, nogil=True, schedule="static"):
            _max_pool_plane(&x32[0, 0, 0, 0] + p * H * W, &y32[0, 0, 0, 0] + p * oh * ow,
                            w_ptr + p * oh * ow, H, W, oh, ow, kh, kw, sy, sx, ph, pw,
                            &d_view[threadid(), 0])
    else:
        x64 = X
        y64 = Y
        for p in prange(planes, nogil=True, schedule="static"):
            _max_pool_plane(&x64[0, 0, 0, 0] + p * H * W, &y64[0, 0, 0, 0] + p * oh * ow,
                            w_ptr + p * oh * ow, H, W, oh, ow, kh, kw, sy, sx, ph, pw, NULL)
    return Y, which


cdef int _max_threads() noexcept:
    return pcv_max_threads()


def backprop_max_pool_2d(object dY, object which, Py_ssize_t H, Py_ssize_t W, int kh, int kw,
                         int sy, int sx, int ph, int pw):
    """dX (nB, C, H, W) for dY and which (nB, C, oh, ow), or None outside the fast case."""
    cdef int kind = _float_kind(dY, 4)
    if kind == 0 or not _params_ok(kh, kw, sy, sx, ph, pw) or H < 0 or W < 0:
        return None
    if not (cnp.PyArray_CheckExact(which) and which.dtype == numpy.int32 and which.flags.c_contiguous
            and which.flags.aligned and which.shape == dY.shape):
        return None
    cdef Py_ssize_t nB = _dim(dY, 0), C = _dim(dY, 1), oh = _dim(dY, 2), ow = _dim(dY, 3)
    cdef Py_ssize_t planes = nB * C, p, i, n
    cdef int bad = 0
    cdef const int[:, :, :, ::1] w_view
    cdef const float[:, :, :, ::1] g32
    cdef float[:, :, :, ::1] d32
    cdef const double[:, :, :, ::1] g64
    cdef double[:, :, :, ::1] d64
    if (kind == 4 and kw == 2 and sx == 2 and kh == sy and ph == 0 and pw == 0 and oh * kh == H
            and ow * 2 == W and planes and oh and ow):
        # Windows tile the image: each pixel is written once, no zeroing, no adds.
        dX = numpy.empty((nB, C, H, W), dtype=dY.dtype)
        g32 = dY
        d32 = dX
        w_view = which
        for p in prange(planes, nogil=True, schedule="static"):
            if pcv_unpool_plane2_f(&g32[0, 0, 0, 0] + p * oh * ow, &w_view[0, 0, 0, 0] + p * oh * ow,
                                   &d32[0, 0, 0, 0] + p * H * W, W, oh, ow, kh):
                bad += 1  # a reduction (a plain assignment in prange keeps the last iteration's)
        return None if bad else dX  # the reference reports (or routes) out-of-window winners
    w_arr = numpy.asarray(which)
    if w_arr.size and (int(w_arr.min()) < 0 or int(w_arr.max()) >= kh * kw):
        return None  # the reference reports (or routes) out-of-window winners
    dX = numpy.zeros((nB, C, H, W), dtype=dY.dtype)
    if planes == 0 or oh == 0 or ow == 0 or H == 0 or W == 0:
        return dX
    w_view = which
    if kind == 4:
        g32 = dY
        d32 = dX
        for p in prange(planes, nogil=True, schedule="static"):
            _max_pool_unpool_plane(&g32[0, 0, 0, 0] + p * oh * ow, &w_view[0, 0, 0, 0] + p * oh * ow,
                                   &d32[0, 0, 0, 0] + p * H * W, H, W, oh, ow, kw, sy, sx, ph, pw)
    else:
        g64 = dY
        d64 = dX
        for p in prange(planes, nogil=True, schedule="static"):
            _max_pool_unpool_plane(&g64[0, 0, 0, 0] + p * oh * ow, &w_view[0, 0, 0, 0] + p * oh * ow,
                                   &d64[0, 0, 0, 0] + p * H * W, H, W, oh, ow, kw, sy, sx, ph, pw)
    return dX
