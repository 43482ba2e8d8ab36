"""Local response normalization across feature maps and ROI pooling, in neon's layouts.

The CPU backend uses these when ``plait.neon._layers`` does not provide its own
``lrn_layer``/``fprop_lrn``/``bprop_lrn`` or ``roipooling_fprop``/``roipooling_bprop``.
Arrays are the backend tensors' ndarrays: LRN's ``I``/``O`` are ``(C*D*H*W, N)`` (batch last),
ROI pooling's feature map is ``(C*H*W, N)`` and its output ``(C*ph*pw, rois)``.
"""
import math

import numpy as np


def _view(a, shape, what, where):
    """``a`` reshaped without copying (a copy would drop what is written into it)."""
    r = a.reshape(shape)
    if r.size and not np.may_share_memory(r, a):
        raise ValueError(
            f"{where}: {what} is a non-contiguous view ({a.shape}, strides {a.strides}); pass a "
            f"contiguous tensor"
        )
    return r


def _ctype(*arrays):
    return np.float64 if any(a.dtype == np.float64 for a in arrays) else np.float32


class LRNLayer:
    """The parameters of an LRN layer: windows of ``J`` (odd) neighbouring feature maps."""

    def __init__(self, lib, dtype, N, C, D=1, H=1, W=1, J=1):
        if J % 2 != 1 or J < 1:
            raise ValueError(f"lrn_layer: the window J must be a positive odd number, got {J}")
        for name, v in (("N", N), ("C", C), ("D", D), ("H", H), ("W", W)):
            if int(v) != v or v < 1:
                raise ValueError(f"lrn_layer: {name} must be a positive integer, got {v!r}")
        self.lib = lib
        self.dtype = np.dtype(dtype if dtype is not None else np.float32)
        self.op = "lrn"
        self.N, self.C, self.K = N, C, C
        self.D, self.H, self.W = D, H, W
        self.M, self.P, self.Q = D, H, W
        self.J = J
        self.JTRS = (J, 1, 1, 1)
        self.padding = (J // 2, 0, 0, 0)
        self.strides = (1, 1, 1, 1)
        self.dimI = self.dimO = (C, D, H, W, N)
        self.dimI2 = self.dimO2 = (C * D * H * W, N)
        self.sizeI = self.sizeO = C * D * H * W * N
        self.nOut = C * D * H * W

    def __str__(self):
        return f"LRNLayer: N={self.N}, C={self.C}, DHW={(self.D, self.H, self.W)}, J={self.J}"

    __repr__ = __str__


def _window_sum(x, half):
    """Sum of x over channels c-half .. c+half (clipped at the edges), along axis 0."""
    cs = np.concatenate([np.zeros((1,) + x.shape[1:], x.dtype), np.cumsum(x, axis=0)])
    C = x.shape[0]
    hi = np.minimum(np.arange(C) + half + 1, C)
    lo = np.maximum(np.arange(C) - half, 0)
    return cs[hi] - cs[lo]


def _as_channels(a, layer, what, where):
    if a.size != layer.sizeI:
        raise ValueError(
            f"{where}: {what} has {a.size} elements ({a.shape}) but the layer's (C, D, H, W, N) = "
            f"{layer.dimI} needs {layer.sizeI}"
        )
    return _view(a, (layer.C, -1), what, where)


def fprop_lrn(layer, I, O, denom, alpha=None, beta=None, ascale=1, bpower=1):
    """``denom = 1 + ascale/J * (sum of I**2 over the J-map window)``, ``O = I * denom**-bpower``."""
    where = "fprop_lrn"
    x = _as_channels(I, layer, "I", where)
    ct = _ctype(x)
    xf = x.astype(ct, copy=False)
    d = 1.0 + (ascale / layer.J) * _window_sum(xf * xf, layer.J // 2)
    _as_channels(denom, layer, "denom", where)[...] = d
    _as_channels(O, layer, "O", where)[...] = xf * np.power(d, -bpower)


def bprop_lrn(layer, I, O, E, delta, denom, alpha=None, beta=None, ascale=1, bpower=1):
    """The input gradient of :func:`fprop_lrn` from the output error ``E``, into ``delta``."""
    where = "bprop_lrn"
    x = _as_channels(I, layer, "I", where)
    o = _as_channels(O, layer, "O", where)
    e = _as_channels(E, layer, "E", where)
    d = _as_channels(denom, layer, "denom", where)
    ct = _ctype(x, o, e, d)
    x, o, e, d = (a.astype(ct, copy=False) for a in (x, o, e, d))
    s = _window_sum(o * e / d, layer.J // 2)
    grad = -2.0 * bpower * (ascale / layer.J) * s * x + e * np.power(d, -bpower)
    _as_channels(delta, layer, "delta", where)[...] = grad


def _roi_bounds(roi, spatial_scale):
    idx, xmin, ymin, xmax, ymax = (float(v) for v in roi)
    xmin, xmax = int(round(xmin * spatial_scale)), int(round(xmax * spatial_scale))
    ymin, ymax = int(round(ymin * spatial_scale)), int(round(ymax * spatial_scale))
    return int(idx), xmin, ymin, max(xmax - xmin + 1, 1), max(ymax - ymin + 1, 1)


def _cell(i, stride, size, offset):
    start = int(math.floor(i * stride)) + offset
    end = int(math.ceil((i + 1) * stride)) + offset
    return min(max(start, 0), size), min(max(end, 0), size)


def _check_roi(I, rois, O, argmax, roi_count, C, H, W, ph, pw, bsz, where):
    if bsz is None or I.size != C * H * W * bsz:
        raise ValueError(
            f"{where}: the feature map has {I.size} elements but C*H*W*batch = {C}*{H}*{W}*{bsz}"
        )
    if O.size != C * ph * pw * roi_count or argmax.size != O.size:
        raise ValueError(
            f"{where}: the output and argmax need C*pooled_height*pooled_width*roi_count = "
            f"{C * ph * pw * roi_count} elements, got {O.size} and {argmax.size}"
        )
    if rois.ndim != 2 or rois.shape[1] != 5 or rois.shape[0] != roi_count:
        raise ValueError(
            f"{where}: rois must be ({roi_count}, 5) rows of (batch index, x1, y1, x2, y2), got {rois.shape}"
        )


def roipooling_fprop(I, rois, O, argmax, roi_count, C, H, W, pooled_height, pooled_width,
                     spatial_scale, bsz=None):
    """Max-pool each region of interest into a ``pooled_height x pooled_width`` grid.

    ``argmax`` receives, per output, the flat ``h * W + w`` position of the maximum in the
    feature map (-1 for an empty cell, whose output is 0).
    """
    _check_roi(I, rois, O, argmax, roi_count, C, H, W, pooled_height, pooled_width, bsz,
               "roipooling_fprop")
    fm = I.reshape(C, H, W, bsz)
    out = _view(O, (C, pooled_height, pooled_width, roi_count), "O", "roipooling_fprop")
    am = _view(argmax, (C, pooled_height, pooled_width, roi_count), "argmax", "roipooling_fprop")
    out[...] = 0
    am[...] = -1
    for b in range(roi_count):
        idx, xmin, ymin, roi_w, roi_h = _roi_bounds(rois[b], spatial_scale)
        sh, sw = roi_h / pooled_height, roi_w / pooled_width
        for i in range(pooled_height):
            h0, h1 = _cell(i, sh, H, ymin)
            if h1 <= h0:
                continue
            for j in range(pooled_width):
                w0, w1 = _cell(j, sw, W, xmin)
                if w1 <= w0:
                    continue
                patch = fm[:, h0:h1, w0:w1, idx].reshape(C, -1)
                k = patch.argmax(axis=1)
                out[:, i, j, b] = patch[np.arange(C), k]
                am[:, i, j, b] = (k // (w1 - w0) + h0) * W + (k % (w1 - w0) + w0)


def roipooling_bprop(I, rois, O, argmax, roi_count, C, H, W, pooled_height, pooled_width,
                     spatial_scale, bsz=None):
    """Route each pooled error ``I`` back to its maximum's position in the feature-map delta ``O``."""
    _check_roi(O, rois, I, argmax, roi_count, C, H, W, pooled_height, pooled_width, bsz,
               "roipooling_bprop")
    err = I.reshape(C, pooled_height, pooled_width, roi_count)
    am = argmax.reshape(C, pooled_height, pooled_width, roi_count).astype(np.int64)
    delta = _view(O, (C, H * W, bsz), "O", "roipooling_bprop")
    acc = np.zeros(delta.shape, dtype=np.float64)
    batch = np.array([int(float(r[0])) for r in rois], dtype=np.int64)
    cc, _, _, bb = np.meshgrid(np.arange(C), np.arange(pooled_height), np.arange(pooled_width),
                               np.arange(roi_count), indexing="ij")
    valid = am >= 0
    np.add.at(acc, (cc[valid], am[valid], batch[bb[valid]]), err[valid].astype(np.float64))
    delta[...] = acc
