"""N-d patch extraction (im2col) and its adjoint (col2im), written once for numpy and cupy.

Layouts: an image batch is (nB, C, *size) with 1 or more spatial axes; a column array is
(nB, C, *k, *out): for every output position the window of k values it reads, so that a
convolution is one contraction over (C, *k).
"""
import itertools
from typing import Any, Sequence, Tuple

__all__ = [
    "as_nd_tuple", "conv_outsize", "deconv_outsize", "im2col_nd", "col2im_nd",
    "im2col_nd_out",
]


def as_nd_tuple(value: Any, n: int, name: str, where: str, minimum: int = 1) -> Tuple[int, ...]:
    """An int or a length-n sequence of ints as a tuple of n ints >= minimum."""
    # The common calls first (a layer's settings, on every call): no checks to word.
    if type(value) is int:
        if value >= minimum:
            return (value,) * n
    elif type(value) is tuple and len(value) == n and all(type(v) is int and v >= minimum for v in value):
        return value
    if isinstance(value, bool):
        raise TypeError(f"{where}: {name} must be an int or a sequence of {n} ints, got {value!r}.")
    if isinstance(value, (list, tuple)) or (hasattr(value, "__len__") and hasattr(value, "__getitem__")):
        values = tuple(value)
        if len(values) != n:
            raise ValueError(
                f"{where}: {name} must be an int or have one entry per spatial axis ({n}), got "
                f"{value!r} of length {len(values)}."
            )
    else:
        values = (value,) * n
    out = []
    for v in values:
        try:
            iv = int(v)
        except (TypeError, ValueError):
            raise TypeError(
                f"{where}: {name} must be an int or a sequence of {n} ints, got {value!r}."
            ) from None
        if iv != v or isinstance(v, bool):
            raise TypeError(f"{where}: {name} must hold integers, got {value!r}.")
        if iv < minimum:
            raise ValueError(f"{where}: {name} must be >= {minimum} on every axis, got {value!r}.")
        out.append(iv)
    return tuple(out)


def _dilated(k: int, d: int) -> int:
    return k + (k - 1) * (d - 1)


def conv_outsize(size: int, k: int, s: int, p: int, cover_all: bool = False, d: int = 1) -> int:
    """Number of window positions along one axis of length `size` padded by p on both sides.

    With cover_all, a last partial window is added so that every input element is read.
    """
    dk = _dilated(k, d)
    if cover_all:
        return (size + 2 * p - dk + s - 1) // s + 1
    return (size + 2 * p - dk) // s + 1


def deconv_outsize(size: int, k: int, s: int, p: int, cover_all: bool = False, d: int = 1) -> int:
    """The image length whose conv_outsize is `size` (the smallest such with cover_all)."""
    dk = _dilated(k, d)
    if cover_all:
        return s * (size - 1) + dk - s + 1 - 2 * p
    return s * (size - 1) + dk - 2 * p


def _padded_len(size: int, out: int, k: int, s: int, p: int, d: int) -> int:
    # Long enough for the padded image and for the last window, which may run past it.
    return max(size + 2 * p, (out - 1) * s + _dilated(k, d))


def im2col_nd_out(
    xp: Any,
    X: Any,
    ksize: Sequence[int],
    stride: Sequence[int],
    pad: Sequence[int],
    dilation: Sequence[int],
    out: Sequence[int],
    pad_value: Any = 0,
) -> Any:
    """Windows of X at `out` positions per axis, outside values read as pad_value.

    X (nB, C, *size) -> (nB, C, *k, *out), C-contiguous.
    """
    n = len(ksize)
    nB, C = X.shape[:2]
    size = X.shape[2:]
    P = tuple(_padded_len(size[i], out[i], ksize[i], stride[i], pad[i], dilation[i]) for i in range(n))
    if P == tuple(size) and all(p == 0 for p in pad):
        Xp = xp.ascontiguousarray(X)
    else:
        Xp = xp.full((nB, C) + P, pad_value, dtype=X.dtype)
        Xp[(slice(None), slice(None)) + tuple(slice(pad[i], pad[i] + size[i]) for i in range(n))] = X
    st = Xp.strides
    shape = (nB, C) + tuple(ksize) + tuple(out)
    strides = (
        (st[0], st[1])
        + tuple(st[2 + i] * dilation[i] for i in range(n))
        + tuple(st[2 + i] * stride[i] for i in range(n))
    )
    view = xp.lib.stride_tricks.as_strided(Xp, shape=shape, strides=strides)
    return xp.ascontiguousarray(view)


def im2col_nd(
    xp: Any,
    X: Any,
    ksize: Sequence[int],
    stride: Sequence[int],
    pad: Sequence[int],
    dilation: Sequence[int],
    cover_all: bool = False,
    pad_value: Any = 0,
) -> Any:
    """Windows of X for a convolution with these settings.

    X (nB, C, *size) -> (nB, C, *k, *out) with out from conv_outsize.
    """
    n = len(ksize)
    out = tuple(
        conv_outsize(X.shape[2 + i], ksize[i], stride[i], pad[i], cover_all, dilation[i])
        for i in range(n)
    )
    if any(o < 1 for o in out):
        raise ValueError(
            f"im2col_nd: input of spatial size {tuple(X.shape[2:])} is too small for ksize "
            f"{tuple(ksize)}, stride {tuple(stride)}, pad {tuple(pad)}, dilation "
            f"{tuple(dilation)}: the output size would be {out}. Pad more or use a smaller kernel."
        )
    return im2col_nd_out(xp, X, ksize, stride, pad, dilation, out, pad_value)


def col2im_nd(
    xp: Any,
    col: Any,
    size: Sequence[int],
    stride: Sequence[int],
    pad: Sequence[int],
    dilation: Sequence[int],
) -> Any:
    """Sum every window value back onto the image position it was read from (im2col's adjoint).

    col (nB, C, *k, *out) -> (nB, C, *size); contributions that fall in the padding are dropped.
    """
    n = len(size)
    nB, C = col.shape[:2]
    ksize = col.shape[2 : 2 + n]
    out = col.shape[2 + n :]
    P = tuple(_padded_len(size[i], out[i], ksize[i], stride[i], pad[i], dilation[i]) for i in range(n))
    Y = xp.zeros((nB, C) + P, dtype=col.dtype)
    # One strided slice per kernel offset: within a slice no two windows hit the same element,
    # so `+=` is safe; the loop runs prod(k) times, not once per pixel.
    for offs in itertools.product(*[range(k) for k in ksize]):
        target = tuple(
            slice(offs[i] * dilation[i], offs[i] * dilation[i] + stride[i] * (out[i] - 1) + 1, stride[i])
            for i in range(n)
        )
        Y[(slice(None), slice(None)) + target] += col[(slice(None), slice(None)) + offs]
    crop = tuple(slice(pad[i], pad[i] + size[i]) for i in range(n))
    return xp.ascontiguousarray(Y[(slice(None), slice(None)) + crop])


def _depth_taps(D: int, M: int, t: int, s: int, p: int, d: int):
    """For each filter tap ti along the first spatial axis: (ti, m0, m1, z0), the output planes
    [m0, m1) whose tap ti reads inside the input (input plane z0 + (m - m0) * s), or none."""
    for ti in range(t):
        off = ti * d - p  # input plane read by output plane 0
        m0 = (-off + s - 1) // s if off < 0 else 0
        m1 = min(M, (D - 1 - off) // s + 1) if D - 1 - off >= 0 else 0
        if m1 > m0:
            yield ti, m0, m1, m0 * s + off


def fold_depth(xp: Any, X: Any, t: int, s: int, p: int, d: int, M: int) -> Any:
    """A 3-D convolution's first spatial axis folded away: X (nB, C, D, H, W) ->
    (nB * M, C * t, H, W), row (n, m), channel (c, ti) holding input plane m * s - p + ti * d
    (zeros where that plane is padding). A 3-D convolution of X with W (O, C, t, kh, kw) is then
    the 2-D convolution of this with W.reshape(O, C * t, kh, kw), output (nB, M) images."""
    nB, C, D, H, W = X.shape
    out = xp.zeros((nB, M, C, t, H, W), dtype=X.dtype)
    for ti, m0, m1, z0 in _depth_taps(D, M, t, s, p, d):
        z1 = z0 + (m1 - m0 - 1) * s + 1
        out[:, m0:m1, :, ti] = X[:, :, z0:z1:s].transpose(0, 2, 1, 3, 4)
    return out.reshape(nB * M, C * t, H, W)


def unfold_depth(xp: Any, Xg: Any, nB: int, D: int, t: int, s: int, p: int, d: int) -> Any:
    """fold_depth's adjoint: (nB * M, C * t, H, W) -> (nB, C, D, H, W), every folded value added
    back onto the input plane it was read from (values read from padding dropped)."""
    nBM, Ct, H, W = Xg.shape
    M, C = nBM // max(nB, 1), Ct // t
    Xg = Xg.reshape(nB, M, C, t, H, W)
    out = xp.zeros((nB, C, D, H, W), dtype=Xg.dtype)
    for ti, m0, m1, z0 in _depth_taps(D, M, t, s, p, d):
        z1 = z0 + (m1 - m0 - 1) * s + 1
        out[:, :, z0:z1:s] += Xg[:, m0:m1, :, ti].transpose(0, 2, 1, 3, 4)
    return out
