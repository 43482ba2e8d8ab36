"""Convolution, deconvolution and pooling over 1 or more spatial axes, as Ops methods.

`ConvOps` is a mixin: its methods use `self.xp` (numpy or cupy) and so run on any Ops. Arrays
are channels-first: X (nB, C, *size), W (O, C // groups, *k) for a convolution. Every method
takes stride / pad / dilation as an int (all axes) or one int per spatial axis.
"""
from typing import Any, Optional, Sequence, Tuple

import numpy

from ._conv import as_nd_tuple, col2im_nd, conv_outsize, deconv_outsize, im2col_nd_out

__all__ = ["ConvOps"]


def _n_spatial(X: Any, name: str, where: str) -> int:
    ndim = getattr(X, "ndim", None)
    if ndim is None:
        raise TypeError(f"{where}: {name} must be an array, got {type(X).__name__}.")
    if ndim < 3:
        raise ValueError(
            f"{where}: {name} must be (nB, C, *spatial) with at least one spatial axis, got shape "
            f"{tuple(X.shape)}."
        )
    return ndim - 2


def _settings(n: int, where: str, ksize: Any, stride: Any, pad: Any, dilation: Any = 1) -> tuple:
    k = as_nd_tuple(ksize, n, "ksize", where)
    s = as_nd_tuple(k if stride is None else stride, n, "stride", where)
    p = as_nd_tuple(pad, n, "pad", where, minimum=0)
    d = as_nd_tuple(dilation, n, "dilation", where)
    return k, s, p, d


def _outsizes(size: Sequence[int], k, s, p, d, cover_all: bool, where: str) -> Tuple[int, ...]:
    out = tuple(conv_outsize(size[i], k[i], s[i], p[i], cover_all, d[i]) for i in range(len(k)))
    if any(o < 1 for o in out):
        raise ValueError(
            f"{where}: spatial size {tuple(size)} is too small for ksize {k}, stride {s}, pad {p}, "
            f"dilation {d}: the output size would be {out}. Pad more or use a smaller window."
        )
    return out


def _check_groups(groups: Any, C: int, O: int, where: str, c_name: str, o_name: str) -> int:
    if isinstance(groups, bool) or not isinstance(groups, (int, numpy.integer)) or groups < 1:
        raise ValueError(f"{where}: groups must be a positive int, got {groups!r}.")
    G = int(groups)
    if C % G or O % G:
        raise ValueError(
            f"{where}: groups={G} must divide both {c_name} ({C}) and {o_name} ({O})."
        )
    return G


def _bias_shape(n: int, O: int) -> tuple:
    return (1, O) + (1,) * n


def _check_bias(b: Any, O: int, where: str) -> None:
    if b is not None and tuple(b.shape) != (O,):
        raise ValueError(f"{where}: b must have shape ({O},), one value per output channel, got {tuple(b.shape)}.")


# The three products a convolution needs. Shapes below: G groups, Cg = C / G input channels per
# group, Og = O / G output channels per group, K = prod(k), L = prod(out).


# Windows are copied out (im2col) for this many bytes of images at a time, at least one image:
# the copy stays in cache for the product that reads it, and a big batch (prediction) does not
# need a window array many times the size of its images. Images are independent, so the block
# size changes no result.
_COL_BLOCK_BYTES = 8 << 20


def _image_blocks(nB: int, bytes_per_image: int):
    step = max(1, _COL_BLOCK_BYTES // max(bytes_per_image, 1))
    for start in range(0, nB, step):
        yield start, min(nB, start + step)


def _conv_forward(ops, X, W, k, s, p, d, G, out):
    """X (nB, C, *size), W (O, Cg, *k) -> (nB, O, *out)"""
    xp = ops.xp
    nB, C = X.shape[:2]
    O = W.shape[0]
    L = int(numpy.prod(out))
    Wg = W.reshape(G, O // G, -1)  # (G, Og, Cg*K)
    Y = xp.empty((nB, G, O // G, L), dtype=xp.result_type(X.dtype, W.dtype))
    for i, j in _image_blocks(nB, C * int(numpy.prod(k)) * L * X.dtype.itemsize):
        col = ops._im2col(X[i:j], k, s, p, d, out).reshape(j - i, G, -1, L)  # (nB, G, Cg*K, L)
        xp.matmul(Wg, col, out=Y[i:j])  # (nB, G, Og, L)
    return Y.reshape((nB, O) + tuple(out))


def _conv_backward_data(ops, dY, W, size, s, p, d, G):
    """dY (nB, O, *out), W (O, Cg, *k) -> dX (nB, C, *size)"""
    xp = ops.xp
    n = len(size)
    nB, O = dY.shape[:2]
    out = dY.shape[2:]
    k = W.shape[2:]
    Cg = W.shape[1]
    L = int(numpy.prod(out))
    Wg = W.reshape(G, O // G, -1)  # (G, Og, Cg*K)
    dtype = xp.result_type(dY.dtype, W.dtype)
    blocks = list(_image_blocks(nB, G * Cg * int(numpy.prod(k)) * L * dtype.itemsize))
    if len(blocks) == 1:
        dcol = xp.matmul(Wg.transpose(0, 2, 1), dY.reshape(nB, G, O // G, L))  # (nB, G, Cg*K, L)
        return ops._col2im(dcol.reshape((nB, G * Cg) + tuple(k) + tuple(out)), size[:n], s, p, d)
    dX = xp.empty((nB, G * Cg) + tuple(size[:n]), dtype=dtype)
    for i, j in blocks:
        dcol = xp.matmul(Wg.transpose(0, 2, 1), dY[i:j].reshape(j - i, G, O // G, L))
        dX[i:j] = ops._col2im(dcol.reshape((j - i, G * Cg) + tuple(k) + tuple(out)), size[:n], s, p, d)
    return dX


def _conv_backward_filter(ops, dY, X, k, s, p, d, G):
    """dY (nB, O, *out), X (nB, C, *size) -> dW (O, Cg, *k)"""
    xp = ops.xp
    nB, C = X.shape[:2]
    O = dY.shape[1]
    out = dY.shape[2:]
    L = int(numpy.prod(out))
    # The batch folded into the contracted axis, so that each group is one matrix product.
    # NOTE: explicit sizes, not -1: an empty batch must reshape too.
    CgK = C // G * int(numpy.prod(k))
    col = ops._im2col_channels_first(X, k, s, p, d, out).reshape(G, CgK, nB * L)  # (G, Cg*K, nB*L)
    dYg = dY.reshape(nB, G, O // G, L).transpose(1, 2, 0, 3).reshape(G, O // G, nB * L)
    dW = xp.matmul(dYg, col.transpose(0, 2, 1))  # (G, Og, Cg*K)
    return dW.reshape((O, C // G) + tuple(k))


class ConvOps:
    """N-d convolution, deconvolution and pooling methods for an Ops (uses self.xp only)."""

    xp: Any

    # The two copies every op here is built on; NumpyOps compiles the 2-D case.

    def _im2col(self, X: Any, k: tuple, s: tuple, p: tuple, d: tuple, out: tuple, pad_value: Any = 0) -> Any:
        """X's windows: (nB, C, *size) -> (nB, C, *k, *out), C-contiguous (see _conv.im2col_nd_out)."""
        return im2col_nd_out(self.xp, X, k, s, p, d, out, pad_value)

    def _im2col_channels_first(self, X: Any, k: tuple, s: tuple, p: tuple, d: tuple, out: tuple) -> Any:
        """_im2col's windows with the batch axis after the window axes: (C, *k, nB, *out)."""
        n = len(k)
        col = self._im2col(X, k, s, p, d, out)  # (nB, C, *k, *out)
        axes = (1,) + tuple(range(2, 2 + n)) + (0,) + tuple(range(2 + n, 2 + 2 * n))
        return self.xp.ascontiguousarray(col.transpose(axes))

    def _col2im(self, col: Any, size: tuple, s: tuple, p: tuple, d: tuple) -> Any:
        """im2col's adjoint: (nB, C, *k, *out) -> (nB, C, *size) (see _conv.col2im_nd)."""
        return col2im_nd(self.xp, col, size, s, p, d)

    # The three products of a convolution (NumpyOps computes the 2-D ones without window arrays).

    def _conv_forward(self, X: Any, W: Any, b: Any, k: tuple, s: tuple, p: tuple, d: tuple, G: int, out: tuple) -> Any:
        """X (nB, C, *size), W (O, Cg, *k), b (O,) or None -> X convolved with W, plus b: (nB, O, *out)."""
        Y = _conv_forward(self, X, W, k, s, p, d, G, out)
        if b is not None:
            Y += b.reshape(_bias_shape(len(k), W.shape[0]))
        return Y

    def _conv_backward_data(self, dY: Any, W: Any, size: tuple, s: tuple, p: tuple, d: tuple, G: int) -> Any:
        """dY (nB, O, *out), W (O, Cg, *k) -> dX (nB, G * Cg, *size)."""
        return _conv_backward_data(self, dY, W, size, s, p, d, G)

    def _conv_backward_filter(self, dY: Any, X: Any, k: tuple, s: tuple, p: tuple, d: tuple, G: int) -> Any:
        """dY (nB, O, *out), X (nB, C, *size) -> dW (O, C // G, *k)."""
        return _conv_backward_filter(self, dY, X, k, s, p, d, G)

    def _conv_backward_bias(self, dY: Any) -> Any:
        """dY (nB, O, *out) -> db (O,): the sum over the batch and the positions."""
        return dY.sum(axis=(0,) + tuple(range(2, dY.ndim)))

    # ------------------------------------------------------------------ convolution

    @staticmethod
    def _conv_args(where, X, W, stride, pad, dilation, groups):
        n = _n_spatial(X, "X", where)
        if getattr(W, "ndim", None) != n + 2:
            raise ValueError(
                f"{where}: W must have {n + 2} axes (O, C // groups, *k) for X of shape "
                f"{tuple(X.shape)}, got shape {tuple(getattr(W, 'shape', ()))}."
            )
        k, s, p, d = _settings(n, where, W.shape[2:], stride, pad, dilation)
        return n, k, s, p, d

    def conv_nd(
        self,
        X: Any,
        W: Any,
        b: Optional[Any] = None,
        stride: Any = 1,
        pad: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        cover_all: bool = False,
    ) -> Any:
        """Cross-correlate X with the filters W (plus b per output channel).

        X (nB, C, *size), W (O, C // groups, *k), b (O,) -> (nB, O, *out)
        """
        where = "Ops.conv_nd"
        n, k, s, p, d = ConvOps._conv_args(where, X, W, stride, pad, dilation, groups)
        G = _check_groups(groups, X.shape[1], W.shape[0], where, "X's channels", "W's output channels")
        if W.shape[1] * G != X.shape[1]:
            raise ValueError(
                f"{where}: W's second axis must be C // groups = {X.shape[1]} // {G}, got W of shape "
                f"{tuple(W.shape)} for X of shape {tuple(X.shape)}."
            )
        _check_bias(b, W.shape[0], where)
        out = _outsizes(X.shape[2:], k, s, p, d, cover_all, where)
        return self._conv_forward(X, W, b, k, s, p, d, G, out).astype(X.dtype, copy=False)

    def backprop_conv_nd(
        self,
        dY: Any,
        X: Any,
        W: Any,
        stride: Any = 1,
        pad: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        cover_all: bool = False,
        *,
        need_dX: bool = True,
    ) -> Tuple[Any, Any, Any]:
        """Gradients of conv_nd for its input, filters and bias.

        dY (nB, O, *out), X (nB, C, *size), W (O, C // groups, *k) -> (dX, dW, db (O,))
        With need_dX=False, dX is None and its cost is skipped (deconv_nd(dY, W, ...,
        outsize=X.shape[2:]) computes it later).
        """
        where = "Ops.backprop_conv_nd"
        n, k, s, p, d = ConvOps._conv_args(where, X, W, stride, pad, dilation, groups)
        G = _check_groups(groups, X.shape[1], W.shape[0], where, "X's channels", "W's output channels")
        out = _outsizes(X.shape[2:], k, s, p, d, cover_all, where)
        expected = (X.shape[0], W.shape[0]) + out
        if tuple(dY.shape) != expected:
            raise ValueError(f"{where}: dY must have shape {expected} (conv_nd's output), got {tuple(dY.shape)}.")
        dX = None
        if need_dX:
            dX = self._conv_backward_data(dY, W, X.shape[2:], s, p, d, G).astype(X.dtype, copy=False)
        dW = self._conv_backward_filter(dY, X, k, s, p, d, G).astype(W.dtype, copy=False)
        return dX, dW, self._conv_backward_bias(dY)

    # ------------------------------------------------------------------ deconvolution

    @staticmethod
    def _deconv_out(where, size, k, s, p, d, outsize):
        n = len(k)
        if outsize is None:
            out = tuple(deconv_outsize(size[i], k[i], s[i], p[i], False, d[i]) for i in range(n))
            if any(o < 1 for o in out):
                raise ValueError(
                    f"{where}: the output size {out} for input size {tuple(size)}, ksize {k}, stride {s}, "
                    f"pad {p} is not positive; use a smaller pad."
                )
            return out
        out = as_nd_tuple(outsize, n, "outsize", where)
        for i in range(n):
            fits = {conv_outsize(out[i], k[i], s[i], p[i], c, d[i]) for c in (False, True)}
            if size[i] not in fits:
                lo = deconv_outsize(size[i], k[i], s[i], p[i], True, d[i])
                hi = deconv_outsize(size[i], k[i], s[i], p[i], False, d[i]) + s[i] - 1
                raise ValueError(
                    f"{where}: outsize {tuple(out)} does not fit input size {tuple(size)} on axis {i}: "
                    f"with ksize {k}, stride {s}, pad {p} it must lie in [{lo}, {hi}]."
                )
        return out

    def deconv_nd(
        self,
        X: Any,
        W: Any,
        b: Optional[Any] = None,
        stride: Any = 1,
        pad: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        outsize: Any = None,
    ) -> Any:
        """Transposed convolution: the adjoint of conv_nd with respect to its input.

        X (nB, C, *size), W (C, O // groups, *k), b (O,) -> (nB, O, *outsize)
        """
        where = "Ops.deconv_nd"
        n, k, s, p, d = ConvOps._conv_args(where, X, W, stride, pad, dilation, groups)
        if W.shape[0] != X.shape[1]:
            raise ValueError(
                f"{where}: W's first axis must equal X's channels ({X.shape[1]}), got W of shape "
                f"{tuple(W.shape)}."
            )
        G = _check_groups(groups, X.shape[1], X.shape[1], where, "X's channels", "X's channels")
        O = W.shape[1] * G
        _check_bias(b, O, where)
        out = ConvOps._deconv_out(where, X.shape[2:], k, s, p, d, outsize)
        Y = self._conv_backward_data(X, W, out, s, p, d, G)
        if b is not None:
            Y += b.reshape(_bias_shape(n, O))
        return Y.astype(X.dtype, copy=False)

    def backprop_deconv_nd(
        self,
        dY: Any,
        X: Any,
        W: Any,
        stride: Any = 1,
        pad: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
    ) -> Tuple[Any, Any, Any]:
        """Gradients of deconv_nd for its input, filters and bias (the output size is dY's).

        dY (nB, O, *outsize), X (nB, C, *size), W (C, O // groups, *k) -> (dX, dW, db (O,))
        """
        where = "Ops.backprop_deconv_nd"
        n, k, s, p, d = ConvOps._conv_args(where, X, W, stride, pad, dilation, groups)
        G = _check_groups(groups, X.shape[1], X.shape[1], where, "X's channels", "X's channels")
        O = W.shape[1] * G
        if dY.ndim != n + 2 or dY.shape[:2] != (X.shape[0], O):
            raise ValueError(
                f"{where}: dY must have shape ({X.shape[0]}, {O}, *outsize), got {tuple(dY.shape)}."
            )
        ConvOps._deconv_out(where, X.shape[2:], k, s, p, d, dY.shape[2:])
        dX = self._conv_forward(dY, W, None, k, s, p, d, G, tuple(X.shape[2:])).astype(X.dtype, copy=False)
        # deconv is conv's data-gradient, so its filter gradient is conv's with dY and X swapped.
        dW = self._conv_backward_filter(X, dY, k, s, p, d, G).astype(W.dtype, copy=False)
        return dX, dW, self._conv_backward_bias(dY)

    # ------------------------------------------------------------------ pooling

    @staticmethod
    def _pool_args(where, X, ksize, stride, pad, cover_all):
        n = _n_spatial(X, "X", where)
        k, s, p, d = _settings(n, where, ksize, stride, pad)
        out = _outsizes(X.shape[2:], k, s, p, d, cover_all, where)
        return n, k, s, p, d, out

    @staticmethod
    def _pool_in_shape(where, in_shape, dY, n):
        in_shape = tuple(int(v) for v in in_shape)
        if len(in_shape) != n + 2 or in_shape[:2] != tuple(dY.shape[:2]):
            raise ValueError(
                f"{where}: in_shape must be the pooled input's full shape (nB, C, *size) matching dY "
                f"{tuple(dY.shape)}, got {in_shape}."
            )
        return in_shape

    def max_pool_nd(
        self, X: Any, ksize: Any, stride: Any = None, pad: Any = 0, cover_all: bool = True
    ) -> Tuple[Any, Any]:
        """Maximum over each window (padding never wins); stride defaults to ksize.

        X (nB, C, *size) -> (Y (nB, C, *out), which (nB, C, *out) int32: flat index in the window)
        """
        where = "Ops.max_pool_nd"
        n, k, s, p, d, out = ConvOps._pool_args(where, X, ksize, stride, pad, cover_all)
        xp = self.xp
        low = -numpy.inf if X.dtype.kind == "f" else numpy.iinfo(X.dtype).min
        col = self._im2col(X, k, s, p, d, out, pad_value=low)
        col = col.reshape(X.shape[:2] + (int(numpy.prod(k)),) + out)
        which = col.argmax(axis=2)
        Y = xp.take_along_axis(col, which[:, :, None], axis=2)[:, :, 0]
        return Y, which.astype("int32")

    def backprop_max_pool_nd(
        self,
        dY: Any,
        which: Any,
        in_shape: Sequence[int],
        ksize: Any,
        stride: Any = None,
        pad: Any = 0,
        cover_all: bool = True,
    ) -> Any:
        """Route each output gradient to the input element that won its window.

        dY (nB, C, *out), which (nB, C, *out), in_shape = X.shape -> dX (nB, C, *size)
        """
        where = "Ops.backprop_max_pool_nd"
        n = _n_spatial(dY, "dY", where)
        in_shape = ConvOps._pool_in_shape(where, in_shape, dY, n)
        k, s, p, d = _settings(n, where, ksize, stride, pad)
        if tuple(which.shape) != tuple(dY.shape):
            raise ValueError(f"{where}: which must have dY's shape {tuple(dY.shape)}, got {tuple(which.shape)}.")
        xp = self.xp
        K = int(numpy.prod(k))
        # One-hot over the window axis instead of a scatter: the same code runs on cupy.
        hot = xp.arange(K).reshape((1, 1, K) + (1,) * n) == which[:, :, None]
        dcol = (hot * dY[:, :, None]).astype(dY.dtype, copy=False)
        dcol = dcol.reshape(tuple(dY.shape[:2]) + k + tuple(dY.shape[2:]))
        return self._col2im(dcol, in_shape[2:], s, p, d)

    def avg_pool_nd(
        self, X: Any, ksize: Any, stride: Any = None, pad: Any = 0, cover_all: bool = False
    ) -> Any:
        """Mean over each window, padding counted as zeros (the divisor is always prod(ksize)).

        X (nB, C, *size) -> (nB, C, *out)
        """
        where = "Ops.avg_pool_nd"
        n, k, s, p, d, out = ConvOps._pool_args(where, X, ksize, stride, pad, cover_all)
        col = self._im2col(X, k, s, p, d, out)
        Y = col.reshape(X.shape[:2] + (int(numpy.prod(k)),) + out).mean(axis=2)
        return Y.astype(X.dtype, copy=False)

    def backprop_avg_pool_nd(
        self,
        dY: Any,
        in_shape: Sequence[int],
        ksize: Any,
        stride: Any = None,
        pad: Any = 0,
        cover_all: bool = False,
    ) -> Any:
        """Spread each output gradient evenly over its window.

        dY (nB, C, *out), in_shape = X.shape -> dX (nB, C, *size)
        """
        where = "Ops.backprop_avg_pool_nd"
        n = _n_spatial(dY, "dY", where)
        in_shape = ConvOps._pool_in_shape(where, in_shape, dY, n)
        k, s, p, d = _settings(n, where, ksize, stride, pad)
        xp = self.xp
        K = int(numpy.prod(k))
        shape = tuple(dY.shape[:2]) + k + tuple(dY.shape[2:])
        dcol = xp.broadcast_to((dY / K).astype(dY.dtype, copy=False)[(slice(None), slice(None)) + (None,) * n], shape)
        return self._col2im(dcol, in_shape[2:], s, p, d)

    def unpool_nd(
        self,
        X: Any,
        ksize: Any,
        stride: Any = None,
        pad: Any = 0,
        outsize: Any = None,
        cover_all: bool = True,
    ) -> Any:
        """Copy each value over its whole window and sum where windows overlap (pooling's inverse).

        X (nB, C, *size) -> (nB, C, *outsize); outsize defaults to the smallest image whose pooled
        size (with these settings) is X's.
        """
        where = "Ops.unpool_nd"
        n = _n_spatial(X, "X", where)
        k, s, p, d = _settings(n, where, ksize, stride, pad)
        size = tuple(X.shape[2:])
        if outsize is None:
            out = tuple(deconv_outsize(size[i], k[i], s[i], p[i], cover_all) for i in range(n))
            if any(o < 1 for o in out):
                raise ValueError(
                    f"{where}: the output size {out} for input size {size}, ksize {k}, stride {s}, pad {p} "
                    f"is not positive; use a smaller pad."
                )
        else:
            out = as_nd_tuple(outsize, n, "outsize", where)
            back = tuple(conv_outsize(out[i], k[i], s[i], p[i], cover_all) for i in range(n))
            if back != size:
                raise ValueError(
                    f"{where}: outsize {out} pools back to {back} with ksize {k}, stride {s}, pad {p}, "
                    f"cover_all={cover_all}, not to X's spatial size {size}."
                )
        xp = self.xp
        col = xp.broadcast_to(X[(slice(None), slice(None)) + (None,) * n], tuple(X.shape[:2]) + k + size)
        return self._col2im(col, out, s, p, d)

    def backprop_unpool_nd(
        self,
        dY: Any,
        in_shape: Sequence[int],
        ksize: Any,
        stride: Any = None,
        pad: Any = 0,
        cover_all: bool = True,
    ) -> Any:
        """Sum the output gradient over each window.

        dY (nB, C, *outsize), in_shape = X.shape -> dX (nB, C, *size)
        """
        where = "Ops.backprop_unpool_nd"
        n = _n_spatial(dY, "dY", where)
        in_shape = ConvOps._pool_in_shape(where, in_shape, dY, n)
        k, s, p, d = _settings(n, where, ksize, stride, pad)
        col = self._im2col(dY, k, s, p, d, in_shape[2:])
        return col.sum(axis=tuple(range(2, 2 + n)))
