"""Convolution helpers (chainer.utils.conv): output sizes and the im2col / col2im windows.

Layouts as in Chainer: an image batch is (n, c, h, w); a column array is
(n, c, kh, kw, out_h, out_w), the kh x kw window read at each output position.
"""
from typing import Any

import numpy

from ...backends import _conv

__all__ = [
    "get_conv_outsize", "get_deconv_outsize", "im2col_cpu", "im2col_gpu", "col2im_cpu",
    "col2im_gpu",
]


def get_conv_outsize(size: int, k: int, s: int, p: int, cover_all: bool = False) -> int:
    """Window positions along an axis of `size` padded by p on both sides (kernel k, stride s).

    Without cover_all: the largest n with (n - 1) * s + k <= size + 2p. With cover_all: the
    smallest n whose windows reach the padded end.
    """
    return _conv.conv_outsize(size, k, s, p, cover_all)


def get_deconv_outsize(size: int, k: int, s: int, p: int, cover_all: bool = False) -> int:
    """The image length that a convolution with these settings maps to `size` (its inverse)."""
    return _conv.deconv_outsize(size, k, s, p, cover_all)


def _im2col(xp: Any, img: Any, kh: int, kw: int, sy: int, sx: int, ph: int, pw: int,
            pval: Any, cover_all: bool) -> Any:
    if img.ndim != 4:
        raise ValueError(
            f"im2col: img must be a 4-d (n, c, h, w) array, got shape {tuple(img.shape)}."
        )
    return _conv.im2col_nd(xp, img, (kh, kw), (sy, sx), (ph, pw), (1, 1), cover_all, pval)


def im2col_cpu(img: Any, kh: int, kw: int, sy: int, sx: int, ph: int, pw: int,
               pval: Any = 0, cover_all: bool = False) -> Any:
    """Windows of a numpy image batch: (n, c, h, w) -> (n, c, kh, kw, out_h, out_w).

    Positions outside the image read as `pval`.
    """
    return _im2col(numpy, img, kh, kw, sy, sx, ph, pw, pval, cover_all)


def im2col_gpu(img: Any, kh: int, kw: int, sy: int, sx: int, ph: int, pw: int,
               cover_all: bool = False) -> Any:
    """im2col_cpu for a cupy image batch (positions outside the image read as 0)."""
    from .. import cuda

    cuda.check_cuda_available()
    return _im2col(cuda.cupy, img, kh, kw, sy, sx, ph, pw, 0, cover_all)


def _col2im(xp: Any, col: Any, sy: int, sx: int, ph: int, pw: int, h: int, w: int) -> Any:
    if col.ndim != 6:
        raise ValueError(
            f"col2im: col must be a 6-d (n, c, kh, kw, out_h, out_w) array, got shape "
            f"{tuple(col.shape)}."
        )
    return _conv.col2im_nd(xp, col, (h, w), (sy, sx), (ph, pw), (1, 1))


def col2im_cpu(col: Any, sy: int, sx: int, ph: int, pw: int, h: int, w: int) -> Any:
    """Adjoint of im2col_cpu: every window value added back onto the pixel it was read from.

    (n, c, kh, kw, out_h, out_w) -> (n, c, h, w); values read from the padding are dropped.
    """
    return _col2im(numpy, col, sy, sx, ph, pw, h, w)


def col2im_gpu(col: Any, sy: int, sx: int, ph: int, pw: int, h: int, w: int) -> Any:
    """col2im_cpu for a cupy column array."""
    from .. import cuda

    cuda.check_cuda_available()
    return _col2im(cuda.cupy, col, sy, sx, ph, pw, h, w)
