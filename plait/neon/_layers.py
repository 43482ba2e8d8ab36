"""Convolution, deconvolution and pooling for the Neon face, in neon's batch-last layouts.

neon 2.x keeps images as I (C, D, H, W, N), filters as F (C, T, R, S, K) and outputs as
O (K, M, P, Q, N), each flattened to 2-D (rows, N) in its tensors. The layer objects here carry
neon's geometry attributes (dimI, dimF, dimO, dimI2, ..., nOut, MPQ, padding, strides, ...);
the functions compute on the numpy arrays under neon's tensors and write in place.

The arithmetic is plait's backend's, the kernels the Chainer face runs. float32 layers with two
spatial axes (1-D ones are H = 1) run conv_gemm's batch-last products (forward_bl,
backward_data_bl, backward_filter_bl in plait/backends/_kernels_cpu/conv_gemm.pyx: the same
register-blocked kernel as NumpyOps' convolutions, reading neon's layout in place and writing
straight into O / grad_I / grad_F). Other cases (float64, 3-D) go through NumpyOps'
_conv_forward / _conv_backward_data / _conv_backward_filter on batch-first copies (3-D folded
onto the 2-D kernels, _conv.fold_depth), and float64 1x1 layers are one NumpyOps.gemm on the
batch-last arrays. Pooling reads its windows with NumpyOps._im2col and writes back with
NumpyOps._col2im / backprop_max_pool_nd (compiled 2-D); pooling across feature maps (J) makes
the channel axis one of the pooled axes. This module moves data between layouts where needed
and applies neon's compound options (alpha, beta, bias, relu, brelu, slope, bsum).

Behaviour follows neon 2.6's CPU backend where it is well defined, and its documentation where
the CPU code drops an option: alpha scales the result whether or not beta is set, and bias,
relu / brelu and bsum apply after the beta accumulation (neon's CPU code ignored alpha without
beta and the compound options with it; its GPU kernels do what the docstrings say). Average
pooling divides by the number of window cells inside the image (padding not counted), as
neon's CPU backend does; argmax holds the index of the winner inside the window clipped to the
image, in (j, t, r, s) order, as neon's CPU backend writes it. bprop_pool does not scale its
error input in place (neon's CPU code did, a side effect), and takes both the spec page's form
(layer, I, E, grad_I) and neon 2.6's (layer, I = errors, O = deltas, argmax, alpha, beta); l2
pooling's backprop, which neon's CPU backend left unimplemented, is the gradient of the norm.
"""
from __future__ import annotations

import math
from functools import reduce
from operator import mul
from typing import Any, Optional, Sequence, Tuple

import numpy

__all__ = [
    "ConvLayer", "DeconvLayer", "PoolLayer", "output_dim",
    "conv_layer", "deconv_layer", "pool_layer",
    "fprop_conv", "bprop_conv", "update_conv", "fprop_deconv", "bprop_deconv", "update_deconv",
    "fprop_pool", "bprop_pool",
]

_OPS = None

try:
    from ..backends._kernels_cpu import conv_gemm as _conv_gemm
except ImportError:  # pragma: no cover - a source checkout without a build
    _conv_gemm = None


def _ops():
    global _OPS
    if _OPS is None:
        from ..backends import NumpyOps

        _OPS = NumpyOps()
    return _OPS


def _prod(values: Sequence[int]) -> int:
    return int(reduce(mul, values, 1))


# ---------------------------------------------------------------------------------- geometry


def output_dim(X: int, S: int, padding: int, strides: int, pooling: bool = False, dilation: int = 1,
               caffe: bool = False) -> int:
    """neon's Backend.output_dim: the output length along one axis of length X for a window of S
    taps (dilated by `dilation`), `padding` on each side and stride `strides`. Caffe mode (only
    for pooling) rounds up, dropping a last window that would start in the padding."""
    S = dilation * (S - 1) + 1
    if caffe and pooling:
        size = int(math.ceil(float(X - S + 2 * padding) / strides)) + 1
        if padding > 0 and (size - 1) * strides >= X + padding:
            size -= 1
    else:
        size = (X - S + 2 * padding) // strides + 1
    if pooling and padding >= S:
        raise ValueError("Padding dim %d incompatible with filter size %d" % (padding, S))
    return size


def _lib_output_dim(lib: Any, X, S, pad, stride, pooling=False, dilation=1) -> int:
    fn = getattr(lib, "output_dim", None)
    if fn is not None:
        return int(fn(X, S, pad, stride, pooling=pooling, dilation=dilation))
    caffe = bool(getattr(lib, "check_caffe_compat", lambda: False)())
    return output_dim(X, S, pad, stride, pooling=pooling, dilation=dilation, caffe=caffe)


def _check_ints(where: str, **values: Any) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, numpy.integer)):
            raise TypeError(f"{where}: {name} must be an int, got {v!r}.")


def _positive(where: str, **values: Any) -> None:
    _check_ints(where, **values)
    for name, v in values.items():
        if v < 1:
            raise ValueError(f"{where}: {name} must be >= 1, got {v}.")


def _nonneg(where: str, **values: Any) -> None:
    _check_ints(where, **values)
    for name, v in values.items():
        if v < 0:
            raise ValueError(f"{where}: {name} must be >= 0, got {v}.")


class ConvLayer:
    """neon's ConvLayer parameter object: N images, C input and K output feature maps, input
    D x H x W, filter T x R x S, output M x P x Q (from output_dim)."""

    def __init__(self, lib, dtype, N, C, K, D=1, H=1, W=1, T=1, R=1, S=1,
                 pad_d=0, pad_h=0, pad_w=0, str_d=1, str_h=1, str_w=1, dil_d=1, dil_h=1, dil_w=1,
                 relu=False, bsum=False):
        where = "conv_layer"
        _positive(where, N=N, C=C, K=K, D=D, H=H, W=W, T=T, R=R, S=S, str_d=str_d, str_h=str_h,
                  str_w=str_w, dil_d=dil_d, dil_h=dil_h, dil_w=dil_w)
        _nonneg(where, pad_d=pad_d, pad_h=pad_h, pad_w=pad_w)
        M = _lib_output_dim(lib, D, T, pad_d, str_d, dilation=dil_d)
        P = _lib_output_dim(lib, H, R, pad_h, str_h, dilation=dil_h)
        Q = _lib_output_dim(lib, W, S, pad_w, str_w, dilation=dil_w)
        if min(M, P, Q) < 1:
            raise ValueError(
                f"{where}: input D, H, W = {(D, H, W)} is too small for filter T, R, S = {(T, R, S)} "
                f"with padding {(pad_d, pad_h, pad_w)}, strides {(str_d, str_h, str_w)}, dilation "
                f"{(dil_d, dil_h, dil_w)}: the output M, P, Q would be {(M, P, Q)}."
            )
        self._set(dtype, N, C, K, (D, H, W), (T, R, S), (M, P, Q), (pad_d, pad_h, pad_w),
                  (str_d, str_h, str_w), (dil_d, dil_h, dil_w), relu, bsum)
        self.nOut = self.M * self.P * self.Q * K

    def _set(self, dtype, N, C, K, DHW, TRS, MPQ, padding, strides, dilation, relu, bsum):
        self.dtype = numpy.dtype(dtype) if dtype is not None else numpy.dtype("float32")
        self.N = N
        self.C, self.K = C, K
        self.D, self.H, self.W = DHW
        self.T, self.R, self.S = TRS
        self.M, self.P, self.Q = MPQ
        self.NCK = (N, C, K)
        self.DHW, self.TRS, self.MPQ = tuple(DHW), tuple(TRS), tuple(MPQ)
        self.padding, self.strides, self.dilation = tuple(padding), tuple(strides), tuple(dilation)
        self.relu, self.bsum = relu, bsum
        self.dimI = (C,) + self.DHW + (N,)
        self.dimF = (C,) + self.TRS + (K,)
        self.dimO = (K,) + self.MPQ + (N,)
        self.dimS = (K, 1)
        self.dimI2 = (C * _prod(self.DHW), N)
        self.dimF2 = (C * _prod(self.TRS), K)
        self.dimO2 = (K * _prod(self.MPQ), N)
        self.sizeI = _prod(self.dimI)
        self.sizeF = _prod(self.dimF)
        self.sizeO = _prod(self.dimO)
        self.dot = (all(x == 1 for x in self.TRS) and not any(self.padding)
                    and all(s == 1 for s in self.strides) and all(d == 1 for d in self.dilation))

    def __str__(self):
        return (f"{type(self).__name__}: NCK: {self.NCK}, DHW: {self.DHW}, TRS: {self.TRS}, "
                f"MPQ: {self.MPQ}, padding: {self.padding}, strides: {self.strides}, "
                f"dilation: {self.dilation}")

    __repr__ = __str__


class DeconvLayer(ConvLayer):
    """neon's DeconvLayer: the convolution whose output (K, M, P, Q) is the deconvolution's
    input; its image D x H x W (C maps) is the deconvolution's output, from M, P, Q."""

    def __init__(self, lib, dtype, N, C, K, M, P, Q, T=1, R=1, S=1,
                 pad_d=0, pad_h=0, pad_w=0, str_d=1, str_h=1, str_w=1, dil_d=1, dil_h=1, dil_w=1,
                 relu=False, bsum=False):
        where = "deconv_layer"
        _positive(where, N=N, C=C, K=K, M=M, P=P, Q=Q, T=T, R=R, S=S, str_d=str_d, str_h=str_h,
                  str_w=str_w, dil_d=dil_d, dil_h=dil_h, dil_w=dil_w)
        _nonneg(where, pad_d=pad_d, pad_h=pad_h, pad_w=pad_w)
        D = (M - 1) * str_d - 2 * pad_d + dil_d * (T - 1) + 1
        H = (P - 1) * str_h - 2 * pad_h + dil_h * (R - 1) + 1
        W = (Q - 1) * str_w - 2 * pad_w + dil_w * (S - 1) + 1
        if min(D, H, W) < 1:
            raise ValueError(
                f"{where}: input M, P, Q = {(M, P, Q)} with filter T, R, S = {(T, R, S)}, padding "
                f"{(pad_d, pad_h, pad_w)}, strides {(str_d, str_h, str_w)} gives output D, H, W = "
                f"{(D, H, W)}; use less padding."
            )
        self._set(dtype, N, C, K, (D, H, W), (T, R, S), (M, P, Q), (pad_d, pad_h, pad_w),
                  (str_d, str_h, str_w), (dil_d, dil_h, dil_w), relu, bsum)
        self.nOut = D * H * W * C


def _pool_slice(q: int, S: int, X: int, pad: int, stride: int) -> Tuple[int, int]:
    """The in-image part [first, last] of output q's window along one axis."""
    qs = q * stride - pad
    first = max(qs, 0)
    last = min(qs + S - 1, X - 1)
    return first, last


class PoolLayer:
    """neon's PoolLayer: op "max" / "avg" / "l2" over windows of J feature maps x T x R x S."""

    def __init__(self, lib, dtype, op, N, C, D=1, H=1, W=1, J=1, T=1, R=1, S=1,
                 pad_j=0, pad_d=0, pad_h=0, pad_w=0, str_j=None, str_d=None, str_h=None, str_w=None):
        where = "pool_layer"
        if op not in ("max", "avg", "l2"):
            raise ValueError(f'{where}: op must be "max", "avg" or "l2", got {op!r}.')
        str_j = J if str_j is None else str_j
        str_d = T if str_d is None else str_d
        str_h = R if str_h is None else str_h
        str_w = S if str_w is None else str_w
        _positive(where, N=N, C=C, D=D, H=H, W=W, J=J, T=T, R=R, S=S, str_j=str_j, str_d=str_d,
                  str_h=str_h, str_w=str_w)
        _nonneg(where, pad_j=pad_j, pad_d=pad_d, pad_h=pad_h, pad_w=pad_w)
        if str_j < J or str_d < T or str_h < R or str_w < S:
            self.overlap = (math.ceil(J / str_j) * math.ceil(T / str_d)
                            * math.ceil(R / str_h) * math.ceil(S / str_w))
        else:
            self.overlap = 0.0
        K = _lib_output_dim(lib, C, J, pad_j, str_j, pooling=True)
        M = _lib_output_dim(lib, D, T, pad_d, str_d, pooling=True)
        P = _lib_output_dim(lib, H, R, pad_h, str_h, pooling=True)
        Q = _lib_output_dim(lib, W, S, pad_w, str_w, pooling=True)
        if min(K, M, P, Q) < 1:
            raise ValueError(
                f"{where}: input C, D, H, W = {(C, D, H, W)} is too small for window J, T, R, S = "
                f"{(J, T, R, S)} with padding {(pad_j, pad_d, pad_h, pad_w)} and strides "
                f"{(str_j, str_d, str_h, str_w)}: the output K, M, P, Q would be {(K, M, P, Q)}."
            )
        self.dtype = numpy.dtype(dtype) if dtype is not None else numpy.dtype("float32")
        self.op = op
        self.N, self.C, self.K, self.M, self.P, self.Q = N, C, K, M, P, Q
        self.D, self.H, self.W = D, H, W
        self.J, self.T, self.R, self.S = J, T, R, S
        self.JTRS = (J, T, R, S)
        self.DHW = (D, H, W)
        self.MPQ = (M, P, Q)
        self.padding = (pad_j, pad_d, pad_h, pad_w)
        self.strides = (str_j, str_d, str_h, str_w)
        self.dimI = (C, D, H, W, N)
        self.dimO = (K, M, P, Q, N)
        self.dimF2 = None
        self.dimI2 = (C * D * H * W, N)
        self.dimO2 = (K * M * P * Q, N)
        self.sizeI = _prod(self.dimI)
        self.sizeO = _prod(self.dimO)
        self.nOut = M * P * Q * K
        sizes = (C, D, H, W)
        outs = (K, M, P, Q)
        # Per axis: every output's in-image window [first, last] (neon's kSlice ... qSlice).
        self._bounds = [
            numpy.array([_pool_slice(o, self.JTRS[a], sizes[a], self.padding[a], self.strides[a])
                         for o in range(outs[a])], dtype=numpy.int64).reshape(outs[a], 2)
            for a in range(4)
        ]
        for a, name in enumerate("KMPQ"):
            b = self._bounds[a]
            if (b[:, 1] < b[:, 0]).any():
                raise ValueError(f"{where}: a window along {name} lies wholly in the padding.")
        self.kSlice, self.mSlice, self.pSlice, self.qSlice = [
            [(slice(int(f), int(l) + 1), int(l - f + 1)) for f, l in b] for b in self._bounds
        ]
        self._last = None  # (input, output) arrays of the last l2 fprop, for its bprop

    def __str__(self):
        return (f"PoolLayer: op: {self.op}, NCK: {(self.N, self.C, self.K)}, DHW: {self.DHW}, "
                f"JTRS: {self.JTRS}, MPQ: {self.MPQ}, padding: {self.padding}, strides: {self.strides}")

    __repr__ = __str__


def _split_lib(args: tuple, where: str) -> Tuple[Any, tuple]:
    """Factories take (lib, dtype, N, ...) as neon's layer classes do, or (dtype, N, ...) as
    neon's Backend methods do (then output sizes are neon's own, without caffe mode): the form
    is told by whether the second positional value is the batch size."""
    if len(args) >= 2 and isinstance(args[1], (int, numpy.integer)) and not isinstance(args[1], bool):
        return None, args
    if not args:
        raise TypeError(f"{where}: missing the dtype and sizes.")
    return args[0], args[1:]


def conv_layer(*args, **kwargs) -> ConvLayer:
    """neon's conv_layer: (lib, dtype, N, C, K, D=1, H=1, W=1, T=1, R=1, S=1, pad_d/h/w=0,
    str_d/h/w=1, dil_d/h/w=1, relu=False, bsum=False); lib may be left out (see _split_lib)."""
    lib, rest = _split_lib(args, "conv_layer")
    return ConvLayer(kwargs.pop("lib", lib), *rest, **kwargs)


def deconv_layer(*args, **kwargs) -> DeconvLayer:
    """neon's deconv_layer: (lib, dtype, N, C, K, M, P, Q, T=1, R=1, S=1, pad_*, str_*, dil_*);
    C is the deconvolution's output maps, K its input maps, M x P x Q its input size."""
    lib, rest = _split_lib(args, "deconv_layer")
    # The spec page's form has no M: (dtype, N, C, K, P, Q, R=1, S=1, ...). Two sizes after K
    # (and no M keyword) are read as that form's P, Q.
    if len(rest) == 6 and "M" not in kwargs and "P" not in kwargs:
        rest = rest[:4] + (1,) + rest[4:]
    return DeconvLayer(kwargs.pop("lib", lib), *rest, **kwargs)


def pool_layer(*args, pad_c=None, str_c=None, **kwargs) -> PoolLayer:
    """neon's pool_layer: (lib, dtype, op, N, C, D=1, H=1, W=1, J=1, T=1, R=1, S=1, pad_j/d/h/w=0,
    str_j/d/h/w=None: the window); pad_c / str_c (neon 2.6's CPU names) are accepted for pad_j /
    str_j, and lib may be left out."""
    lib = kwargs.pop("lib", None)
    if len(args) >= 3 and isinstance(args[2], str):  # (lib, dtype, op, ...); else (dtype, op, ...)
        lib, args = args[0], args[1:]
    if pad_c is not None:
        if kwargs.get("pad_j"):
            raise TypeError("pool_layer: give pad_j or pad_c (the same setting), not both.")
        kwargs["pad_j"] = pad_c
    if str_c is not None:
        if kwargs.get("str_j") is not None:
            raise TypeError("pool_layer: give str_j or str_c (the same setting), not both.")
        kwargs["str_j"] = str_c
    return PoolLayer(lib, *args, **kwargs)


# ------------------------------------------------------------------------------- array access


def _array(A: Any, name: str, where: str) -> numpy.ndarray:
    a = getattr(A, "_tensor", A)
    if not isinstance(a, numpy.ndarray):
        raise TypeError(f"{where}: {name} must be a numpy array (a tensor's data), got {type(A).__name__}.")
    return a


def _operand(A: Any, shape: tuple, name: str, dim_name: str, where: str) -> numpy.ndarray:
    """A read operand viewed as `shape` (the layer's dim*), or a clear error."""
    a = _array(A, name, where)
    if a.size != _prod(shape):
        raise ValueError(
            f"{where}: {name} has shape {tuple(a.shape)} ({a.size} values); the layer's {dim_name} is "
            f"{shape} ({_prod(shape)} values, 2-D ({shape[0] * _prod(shape[1:-1]) if len(shape) > 2 else shape[0]}, "
            f"{shape[-1]}))."
        )
    return a.reshape(shape)


def _target(A: Any, shape: tuple, name: str, dim_name: str, where: str) -> numpy.ndarray:
    """A written operand viewed as `shape` without a copy (so writes land in it)."""
    a = _operand(A, shape, name, dim_name, where)
    if not numpy.may_share_memory(a, _array(A, name, where)) and a.size:
        raise ValueError(f"{where}: {name} of strides {_array(A, name, where).strides} cannot be viewed "
                         f"as {shape} in place; pass a contiguous array.")
    if not a.flags.writeable:
        raise ValueError(f"{where}: {name} is read-only.")
    return a


def _compute_dtype(*arrays: numpy.ndarray):
    dt = numpy.result_type(*arrays)
    if dt == numpy.float64:
        return numpy.float64
    return numpy.float32  # float16 (and float32) computed in float32


def _as(a: numpy.ndarray, dt) -> numpy.ndarray:
    return a if a.dtype == dt else a.astype(dt)


def _vector(A: Any, K: int, name: str, where: str) -> Optional[numpy.ndarray]:
    if A is None:
        return None
    a = _array(A, name, where)
    if a.size != K:
        raise ValueError(f"{where}: {name} must hold one value per output feature map, ({K}, 1), "
                         f"got shape {tuple(a.shape)}.")
    return a


def _finish(target: numpy.ndarray, result: numpy.ndarray, X: Optional[numpy.ndarray], bias, bsum,
            alpha: float, beta: float, relu: bool, brelu: bool, slope: float, where: str,
            old: Optional[numpy.ndarray] = None) -> None:
    """target = alpha * result + beta * X (X defaults to target's old values, `old` when the
    product was written into target itself, result is target), then + bias, relu
    (max(v, 0) + slope * min(v, 0)) or brelu (v * ((X > 0) + slope * (X < 0))), then bsum =
    per-map sums. result is in target's layout (maps first) and may be overwritten."""
    K = target.shape[0]
    if alpha != 1.0:
        result *= alpha
    if beta:
        if X is None:
            old = target if old is None else old
        else:
            old = X
        result += beta * old.astype(result.dtype, copy=False)
    if bias is not None:
        result += bias.reshape((K,) + (1,) * (result.ndim - 1)).astype(result.dtype, copy=False)
    if relu:
        if slope:
            result[...] = numpy.maximum(result, 0) + slope * numpy.minimum(result, 0)
        else:
            numpy.maximum(result, 0, out=result)
    elif brelu:
        mask_src = result if X is None else X
        factor = (mask_src > 0).astype(result.dtype)
        if slope:
            factor += slope * (mask_src < 0)
        result *= factor
    if result is not target:
        numpy.copyto(target, result, casting="unsafe")
    if bsum is not None:
        bsum.reshape(K)[...] = target.reshape(K, -1).sum(axis=1, dtype=numpy.float32 if
                                                       target.dtype != numpy.float64 else numpy.float64)


# ------------------------------------------------------------------------------ convolution


def _batch_first(A5: numpy.ndarray, dt, flat: bool) -> numpy.ndarray:
    """(C, D, H, W, N) -> (N, C, D, H, W) (or (N, C, H, W) when flat, D == 1), contiguous."""
    C, D, H, W, N = A5.shape
    if flat:
        out = numpy.empty((N, C, H, W), dtype=dt)
        numpy.copyto(out, A5.reshape(C, H, W, N).transpose(3, 0, 1, 2), casting="unsafe")
    else:
        out = numpy.empty((N, C, D, H, W), dtype=dt)
        numpy.copyto(out, A5.transpose(4, 0, 1, 2, 3), casting="unsafe")
    return out


def _filters(F5: numpy.ndarray, dt, flat: bool) -> numpy.ndarray:
    """F (C, T, R, S, K) -> the backend's (K, C, [T,] R, S)."""
    C, T, R, S, K = F5.shape
    W = numpy.ascontiguousarray(F5.transpose(4, 0, 1, 2, 3), dtype=dt)
    return W.reshape(K, C, R, S) if flat else W


def _is_2d(layer) -> bool:
    return layer.D == 1 and layer.T == 1 and layer.M == 1


def _settings(layer, flat: bool):
    k, s, p, d = layer.TRS, layer.strides, layer.padding, layer.dilation
    if flat:
        return k[1:], s[1:], p[1:], d[1:]
    return k, s, p, d


def _to_layout(Y: numpy.ndarray, shape5: tuple) -> numpy.ndarray:
    """Backend (N, K, [M,] P, Q) -> neon (K, M, P, Q, N) as a new contiguous array."""
    out = numpy.empty(shape5, dtype=Y.dtype)
    if Y.ndim == 4:
        out.reshape(shape5[0], shape5[2], shape5[3], shape5[4])[...] = Y.transpose(1, 2, 3, 0)
    else:
        out[...] = Y.transpose(1, 2, 3, 4, 0)
    return out


def _xprop(layer, I, F, O, X, bias, bsum, alpha, beta, relu, brelu, slope, repeat, backward, where):
    dimIn, dimOut = (layer.dimO, layer.dimI) if backward else (layer.dimI, layer.dimO)
    nIn, nOut = ("E", "grad_I") if backward else ("I", "O")
    dIn, dOut = ("dimO", "dimI") if backward else ("dimI", "dimO")
    a_in = _operand(I, dimIn, nIn, dIn, where)
    a_f = _operand(F, layer.dimF, "F", "dimF", where)
    a_out = _target(O, dimOut, nOut, dOut, where)
    a_x = None if X is None else _operand(X, dimOut, "X", dOut, where)
    Kout = dimOut[0]
    bias = _vector(bias, Kout, "bias", where)
    bsum = _vector(bsum, Kout, "bsum", where)
    _repeat(repeat, where)
    dt = _compute_dtype(a_in, a_f)
    ops = _ops()
    bl = _batch_last_kernels(layer, dt)
    for _ in range(int(repeat)):
        if bl is not None:
            # float32 2-D: the batch-last products, written straight into the output
            direct = a_out.dtype == numpy.float32 and a_out.flags.c_contiguous
            old = a_out.copy() if (beta and X is None and direct) else None
            res = a_out if direct else numpy.empty(dimOut, numpy.float32)
            In = numpy.ascontiguousarray(a_in, dtype=numpy.float32)
            Fc = numpy.ascontiguousarray(a_f, dtype=numpy.float32)
            fn = bl.backward_data_bl if backward else bl.forward_bl
            if fn(In, Fc, res, _bl_geom(layer)):
                _finish(a_out, res, a_x, bias, bsum, float(alpha), float(beta), bool(relu), bool(brelu),
                        float(slope or 0.0), where, old)
                continue
        if layer.dot:
            # 1x1, unstrided, unpadded: one product on the batch-last arrays.
            C, K = layer.C, layer.K
            Fm = _as(a_f.reshape(C, K), dt)
            In = _as(a_in.reshape(dimIn[0], -1), dt)
            res = ops.gemm(Fm, In, trans1=not backward)  # (K, DHWN) or (C, MPQN)
            res = res.reshape(dimOut)
        else:
            flat = _is_2d(layer)
            k, s, p, d = _settings(layer, flat)
            Wb = _filters(a_f, dt, flat)
            Xb = _batch_first(a_in, dt, flat)
            if backward:
                size = (layer.H, layer.W) if flat else layer.DHW
                Y = ops._conv_backward_data(Xb, Wb, size, s, p, d, 1)
            else:
                out = (layer.P, layer.Q) if flat else layer.MPQ
                Y = ops._conv_forward(Xb, Wb, None, k, s, p, d, 1, out)
            res = _to_layout(_as(Y, dt), dimOut)
        _finish(a_out, res, a_x, bias, bsum, float(alpha), float(beta), bool(relu), bool(brelu),
                float(slope or 0.0), where)


def _batch_last_kernels(layer, dt):
    """The backend's batch-last products (conv_gemm.forward_bl & co.) where they apply: float32,
    two spatial axes (D == T == M == 1). None elsewhere (then the batch-first products run on
    transposed copies)."""
    if dt != numpy.float32 or not _is_2d(layer) or _conv_gemm is None:
        return None
    return _conv_gemm


def _bl_geom(layer) -> tuple:
    return (layer.C, layer.H, layer.W, layer.N, layer.K, layer.R, layer.S, layer.strides[1],
            layer.strides[2], layer.padding[1], layer.padding[2], layer.dilation[1],
            layer.dilation[2], layer.P, layer.Q)


def _is_number(v) -> bool:
    return isinstance(v, (int, float, numpy.integer, numpy.floating)) and not isinstance(v, bool)


def _repeat(repeat, where):
    if isinstance(repeat, bool) or not isinstance(repeat, (int, numpy.integer)) or repeat < 1:
        raise ValueError(f"{where}: repeat must be an int >= 1, got {repeat!r}.")


def _check_layer(layer, where, kinds=(ConvLayer,)):
    if not isinstance(layer, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise TypeError(f"{where}: layer must be a {names} (from conv_layer / deconv_layer / pool_layer), "
                        f"got {type(layer).__name__}.")


def fprop_conv(layer, I, F, O, X=None, bias=None, bsum=None, alpha=1.0, beta=0.0, relu=False,
               brelu=False, slope=0.0, repeat=1, layer_op=None):
    """O (K*M*P*Q, N) = alpha * conv(I, F) + beta * X (X defaults to O), + bias, relu / brelu, bsum."""
    where = "fprop_conv"
    _check_layer(layer, where)
    if _is_number(X):  # the spec page's positional form: (layer, I, F, O, alpha, relu, repeat)
        X, alpha, bias, relu, bsum, repeat = None, X, None, (relu if bias is None else bias), None, (
            repeat if bsum is None else bsum)
    _xprop(layer, I, F, O, X, bias, bsum, alpha, beta, relu, brelu, slope, repeat, False, where)


def bprop_conv(layer, F, E, grad_I, X=None, bias=None, bsum=None, alpha=1.0, beta=0.0, relu=False,
               brelu=False, slope=0.0, repeat=1, layer_op=None):
    """grad_I (C*D*H*W, N) = alpha * (the data gradient of conv for errors E) + beta * X, then the
    compound options as fprop_conv (over the C maps)."""
    where = "bprop_conv"
    _check_layer(layer, where)
    if _is_number(X):  # the spec page's positional form: (layer, F, E, grad_I, alpha, repeat)
        X, alpha, bias, repeat = None, X, None, (repeat if bias is None else bias)
    _xprop(layer, E, F, grad_I, X, bias, bsum, alpha, beta, relu, brelu, slope, repeat, True, where)


def update_conv(layer, I, E, grad_F, alpha=1.0, beta=0.0, grad_bias=None, repeat=1, layer_op=None):
    """grad_F (C*T*R*S, K) = alpha * (the filter gradient for inputs I, errors E) + beta * grad_F;
    grad_bias (K, 1), if given, = the per-map sums of E."""
    where = "update_conv"
    _check_layer(layer, where)
    a_i = _operand(I, layer.dimI, "I", "dimI", where)
    a_e = _operand(E, layer.dimO, "E", "dimO", where)
    a_u = _target(grad_F, layer.dimF, "grad_F", "dimF", where)
    gb = _vector(grad_bias, layer.K, "grad_bias", where)
    _repeat(repeat, where)
    dt = _compute_dtype(a_i, a_e)
    ops = _ops()
    bl = _batch_last_kernels(layer, dt)
    for _ in range(int(repeat)):
        C, K = layer.C, layer.K
        if bl is not None:
            direct = a_u.dtype == numpy.float32 and a_u.flags.c_contiguous
            old = a_u.copy() if (beta and direct) else a_u
            res = a_u if direct else numpy.empty(layer.dimF, numpy.float32)
            if bl.backward_filter_bl(numpy.ascontiguousarray(a_i, dtype=numpy.float32),
                                     numpy.ascontiguousarray(a_e, dtype=numpy.float32), res, _bl_geom(layer)):
                if alpha != 1.0:
                    res *= alpha
                if beta:
                    res += beta * old.astype(res.dtype, copy=False)
                if res is not a_u:
                    numpy.copyto(a_u, res, casting="unsafe")
                if gb is not None:
                    gb.reshape(K)[...] = a_e.reshape(K, -1).sum(axis=1, dtype=dt)
                continue
        if layer.dot:
            res = ops.gemm(_as(a_i.reshape(C, -1), dt), _as(a_e.reshape(K, -1), dt), trans2=True)
            res = res.reshape(layer.dimF)
        else:
            flat = _is_2d(layer)
            k, s, p, d = _settings(layer, flat)
            Xb = _batch_first(a_i, dt, flat)
            dYb = _batch_first(a_e, dt, flat)
            dW = _as(ops._conv_backward_filter(dYb, Xb, k, s, p, d, 1), dt)  # (K, C, [T,] R, S)
            res = numpy.ascontiguousarray(dW.reshape((K,) + layer.dimF[:4]).transpose(1, 2, 3, 4, 0))
        if alpha != 1.0:
            res *= alpha
        if beta:
            res += beta * a_u.astype(res.dtype, copy=False)
        numpy.copyto(a_u, res, casting="unsafe")
        if gb is not None:
            gb.reshape(K)[...] = a_e.reshape(K, -1).sum(axis=1, dtype=dt)


# ---------------------------------------------------------------------------------- pooling


class _PoolPlan:
    """How a PoolLayer's windows map onto the backend's (nB, C', *pooled axes) pooling: the axes
    of (C, D, H, W) that a window spans (or strides or pads) stay spatial, the others join the
    batch-like channel axis."""

    def __init__(self, layer: PoolLayer):
        sizes = (layer.C,) + layer.DHW
        outs = (layer.K,) + layer.MPQ
        self.pooled = [a for a in range(4)
                       if not (layer.JTRS[a] == 1 and layer.strides[a] == 1 and layer.padding[a] == 0)]
        self.free = [a for a in range(4) if a not in self.pooled]
        self.k = tuple(layer.JTRS[a] for a in self.pooled)
        self.s = tuple(layer.strides[a] for a in self.pooled)
        self.p = tuple(layer.padding[a] for a in self.pooled)
        self.size = tuple(sizes[a] for a in self.pooled)
        self.out = tuple(outs[a] for a in self.pooled)
        self.nfree = _prod([sizes[a] for a in self.free])
        # Batch-first order: N, the free axes, the pooled axes; the inverse for going back.
        self.perm_in = (4,) + tuple(self.free) + tuple(self.pooled)
        self.inv = tuple(numpy.argsort(self.perm_in))
        n = len(self.pooled)
        # Per pooled axis and output position: first in-image tap offset, in-image tap count.
        self.lo, self.cnt = [], []
        for j, a in enumerate(self.pooled):
            b = layer._bounds[a]
            start = numpy.arange(outs[a]) * layer.strides[a] - layer.padding[a]
            shape = [1] * n
            shape[j] = outs[a]
            self.lo.append((b[:, 0] - start).reshape(shape))
            self.cnt.append((b[:, 1] - b[:, 0] + 1).reshape(shape))
        self.clipped = any(int(c.min()) < k for c, k in zip(self.cnt, self.k))
        self.count = reduce(mul, self.cnt, numpy.ones((1,) * n, dtype=numpy.int64)) if n else None

    def to_backend(self, A5: numpy.ndarray, dt) -> numpy.ndarray:
        """(C, D, H, W, N) -> (N, free, *pooled sizes), contiguous in dt."""
        N = A5.shape[4]
        out = numpy.empty((N,) + tuple(A5.shape[a] for a in self.perm_in[1:]), dtype=dt)
        numpy.copyto(out, A5.transpose(self.perm_in), casting="unsafe")
        return out.reshape((N, self.nfree) + tuple(A5.shape[a] for a in self.pooled))

    def from_backend(self, B: numpy.ndarray, shape5: tuple) -> numpy.ndarray:
        """(N, free, *pooled) -> (C', D', H', W', N) (shape5) as a new contiguous array."""
        full = B.reshape(tuple(shape5[a] for a in self.perm_in))
        return numpy.ascontiguousarray(full.transpose(self.inv))


def _plan(layer: PoolLayer) -> _PoolPlan:
    plan = getattr(layer, "_plan", None)
    if plan is None:
        plan = layer._plan = _PoolPlan(layer)
    return plan


def fprop_deconv(layer, I, F, O, **kwargs):
    """A deconvolution's forward pass: O (its C-map output, dimI) from I (its K-map input, dimO),
    which is bprop_conv's product (the options as bprop_conv's)."""
    _check_layer(layer, "fprop_deconv")
    bprop_conv(layer, F, I, O, **kwargs)


def bprop_deconv(layer, F, E, grad_I, **kwargs):
    """A deconvolution's data gradient: grad_I (dimO) from E (dimI), fprop_conv's product."""
    _check_layer(layer, "bprop_deconv")
    fprop_conv(layer, E, F, grad_I, **kwargs)


def update_deconv(layer, I, E, grad_F, **kwargs):
    """A deconvolution's filter gradient, I its input (dimO), E its output's errors (dimI)."""
    _check_layer(layer, "update_deconv")
    update_conv(layer, E, I, grad_F, **kwargs)


def _pool_compute(layer: PoolLayer, plan: _PoolPlan, Xb: numpy.ndarray):
    """Pooled values of Xb (N, free, *pooled sizes) -> (Y (N, free, *out), which: the max's
    full-window flat index, or None for avg / l2)."""
    ops = _ops()
    n = len(plan.pooled)
    if n == 0:
        return Xb.copy(), numpy.zeros(Xb.shape, dtype=numpy.int64)
    if layer.op == "max":
        col = ops._im2col(Xb, plan.k, plan.s, plan.p, (1,) * n, plan.out, -numpy.inf)
        col = col.reshape(Xb.shape[:2] + (_prod(plan.k),) + plan.out)
        which = col.argmax(axis=2)
        return numpy.take_along_axis(col, which[:, :, None], axis=2)[:, :, 0], which
    col = ops._im2col(Xb, plan.k, plan.s, plan.p, (1,) * n, plan.out, 0)
    col = col.reshape(Xb.shape[:2] + (_prod(plan.k),) + plan.out)
    if layer.op == "avg":
        Y = col.sum(axis=2)
        Y /= plan.count.astype(Y.dtype)
        return Y, None
    return numpy.sqrt(numpy.einsum("abk...,abk...->ab...", col, col)), None


def fprop_pool(layer, I, O, argmax=None, beta=0.0):
    """O (K*M*P*Q, N) = pool(I) + beta * O; for max pooling argmax (dimO-sized, any integer
    dtype), if given, gets each winner's index in its in-image window (neon's CPU argmax)."""
    where = "fprop_pool"
    _check_layer(layer, where, (PoolLayer,))
    a_i = _operand(I, layer.dimI, "I", "dimI", where)
    a_o = _target(O, layer.dimO, "O", "dimO", where)
    a_arg = None
    if layer.op == "max" and argmax is not None:
        a_arg = _target(argmax, layer.dimO, "argmax", "dimO", where)
    plan = _plan(layer)
    dt = _compute_dtype(a_i)
    Y, which = _pool_compute(layer, plan, plan.to_backend(a_i, dt))
    res = plan.from_backend(Y, layer.dimO)
    if beta:
        res += beta * a_o.astype(res.dtype, copy=False)
    numpy.copyto(a_o, res, casting="unsafe")
    if a_arg is not None:
        a_arg[...] = plan.from_backend(_clip_index(plan, which), layer.dimO)
    if layer.op == "l2":
        layer._last = (a_i, a_o)


def _clip_index(plan: _PoolPlan, which: numpy.ndarray) -> numpy.ndarray:
    """Full-window flat index -> index in the in-image (clipped) window, neon's argmax."""
    if not plan.clipped or not plan.pooled:
        return which
    offs = numpy.unravel_index(which, plan.k)
    idx = numpy.zeros(which.shape, dtype=numpy.int64)
    for j in range(len(plan.k)):
        idx = idx * plan.cnt[j] + (offs[j] - plan.lo[j])
    return idx


def _full_index(plan: _PoolPlan, idx: numpy.ndarray) -> numpy.ndarray:
    """neon's clipped-window index -> the backend's full-window flat index (int32)."""
    idx = idx.astype(numpy.int64)
    if plan.clipped:
        offs = []
        rest = idx
        for j in reversed(range(len(plan.k))):
            offs.append(rest % plan.cnt[j] + plan.lo[j])
            rest = rest // plan.cnt[j]
        offs.reverse()
        idx = numpy.ravel_multi_index(tuple(numpy.broadcast_arrays(*offs)), plan.k, mode="clip")
    return idx.astype(numpy.int32)


def _spec_form(layer, I, O, argmax) -> bool:
    """Whether bprop_pool was called as the spec page writes it, (layer, I, E, grad_I) with I the
    forward input, rather than neon 2.6's (layer, I = errors, O = deltas, argmax)."""
    if argmax is None:
        return False
    sizes = [getattr(_array(a, n, "bprop_pool"), "size", None) for a, n in ((I, "I"), (O, "O"), (argmax, "argmax"))]
    if sizes != [layer.sizeI, layer.sizeO, layer.sizeI]:
        return False
    if layer.sizeI != layer.sizeO:
        return True
    return _array(argmax, "argmax", "bprop_pool").dtype.kind == "f"  # an argmax buffer holds integers


def bprop_pool(layer, I, O, argmax=None, alpha=1.0, beta=0.0):
    """Pooling's backprop, in either call form:

    neon 2.6: bprop_pool(layer, I, O, argmax=None, alpha=1.0, beta=0.0) with I the errors
    (dimO), O the deltas written (dimI) = alpha * backprop + beta * O, argmax from fprop_pool;
    the spec page: bprop_pool(layer, I, E, grad_I) with I the forward input, E the errors and
    grad_I written (the winners and l2 norms recomputed from I).

    max: each error goes to its window's winner; avg: spread evenly over the window's in-image
    cells; l2: error * x / y over the window (x, y from I in the spec form, else from the layer's
    last fprop_pool)."""
    where = "bprop_pool"
    _check_layer(layer, where, (PoolLayer,))
    fwd_input = None
    if _spec_form(layer, I, O, argmax):
        fwd_input = _operand(I, layer.dimI, "I", "dimI", where)
        I, O, argmax = O, argmax, None
        a_e = _operand(I, layer.dimO, "E", "dimO", where)
        a_d = _target(O, layer.dimI, "grad_I", "dimI", where)
    else:
        a_e = _operand(I, layer.dimO, "I", "dimO", where)
        a_d = _target(O, layer.dimI, "O", "dimI", where)
    plan = _plan(layer)
    dt = _compute_dtype(a_e)
    ops = _ops()
    Eb = plan.to_backend(a_e, dt)  # (N, free, *out)
    n = len(plan.pooled)
    in_shape = (Eb.shape[0], plan.nfree) + plan.size
    if n == 0:
        dX = Eb.copy()
    elif layer.op == "max":
        if fwd_input is not None:
            which = _pool_compute(layer, plan, plan.to_backend(fwd_input, dt))[1].astype(numpy.int32)
        elif argmax is None:
            raise ValueError(f"{where}: max pooling needs the argmax buffer fprop_pool filled "
                             f"(or the spec form bprop_pool(layer, I, E, grad_I) with the forward input).")
        else:
            a_arg = _operand(argmax, layer.dimO, "argmax", "dimO", where)
            which = _full_index(plan, plan.to_backend(a_arg, numpy.int64))
        dX = ops.backprop_max_pool_nd(Eb, which, in_shape, plan.k, plan.s, plan.p)
    elif layer.op == "avg":
        G = Eb / plan.count.astype(dt)
        dcol = numpy.broadcast_to(G[(slice(None), slice(None)) + (None,) * n],
                                  Eb.shape[:2] + plan.k + plan.out)
        dX = ops._col2im(numpy.ascontiguousarray(dcol), plan.size, plan.s, plan.p, (1,) * n)
    else:
        if fwd_input is not None:
            Xb = plan.to_backend(fwd_input, dt)
            Yb = _pool_compute(layer, plan, Xb)[0]
        elif layer._last is None:
            raise ValueError(f"{where}: l2 pooling's backprop needs the input and output of a "
                             f"fprop_pool on this layer first (neon 2.6's signature does not pass "
                             f"them), or the spec form bprop_pool(layer, I, E, grad_I).")
        else:
            xi, yo = layer._last
            Xb = plan.to_backend(xi, dt)
            Yb = plan.to_backend(yo, dt)
        with numpy.errstate(divide="ignore", invalid="ignore"):
            G = numpy.where(Yb > 0, Eb / Yb, 0).astype(dt)
        col = ops._im2col(Xb, plan.k, plan.s, plan.p, (1,) * n, plan.out, 0)
        col = col.reshape(Xb.shape[:2] + plan.k + plan.out)
        dcol = col * G[(slice(None), slice(None)) + (None,) * n]
        dX = ops._col2im(numpy.ascontiguousarray(dcol), plan.size, plan.s, plan.p, (1,) * n)
    res = plan.from_backend(_as(dX, dt), layer.dimI)
    if alpha != 1.0:
        res *= alpha
    if beta:
        res += beta * a_d.astype(res.dtype, copy=False)
    numpy.copyto(a_d, res, casting="unsafe")
