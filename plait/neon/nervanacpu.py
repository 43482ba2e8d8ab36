"""neon's ``neon.backends.nervanacpu``: the CPU tensor and the CPU backend.

Assignments run in two tiers. A tree is first split at ``dot`` (BLAS) and ``onehot``, whose
results enter as ndarray leaves (a bare ``dot`` is written by BLAS straight into the output);
the rest is offered to the fused executor ``plait.neon._fuse.execute(tree, out, rng=...)`` with
every Tensor leaf replaced by its ndarray. When it declines (or is not importable, or
``PLAIT_NEON_FUSE=0``), the numpy evaluator of this module runs it. The numpy evaluator is the
reference: it handles every op of :class:`OpCollection`.

float16 tensors are stored as float16 and computed in float32. Convolution, deconvolution and
pooling are delegated to ``plait.neon._layers`` (functions of the same names, given ndarrays);
LRN and ROI pooling too when ``_layers`` has them, else ``plait.neon._norm_roi`` runs them.
"""
import os

import numpy as np

from ._arrays import (SUPPORTED_DTYPES as _SUPPORTED_DTYPES, ArrayBackend, ArrayEvaluator, ArrayTensor,
                      compute_dtype, data as _data, sign_pow2, store)
from .backend import Backend, OpCollection, OpTreeNode, Tensor, describe_operand


class CPUTensor(ArrayTensor):
    """A tensor in host memory wrapping a numpy array (``_tensor``); views share memory.

    Everything but the array module lives in :class:`plait.neon._arrays.ArrayTensor`, shared
    with the GPU tensor."""


# ---------------------------------------------------------------------------------------------
# The numpy evaluator (the reference for every op): plait.neon._arrays.ArrayEvaluator on numpy

_compute_dtype = compute_dtype
_store = store
_sign_pow2 = sign_pow2


class _NumpyEvaluator(ArrayEvaluator):
    """The reference evaluator on numpy."""

    __slots__ = ()

    def __init__(self, ctype, out_shape, rng):
        super().__init__(ctype, out_shape, rng, np, "CPU")


def evaluate(tree, out_shape, dtype, rng):
    """Evaluate ``tree`` with numpy for an output of ``out_shape``/``dtype``; returns an array."""
    return _NumpyEvaluator(_compute_dtype(dtype), tuple(out_shape), rng)(tree)


# ---------------------------------------------------------------------------------------------
# The fused executor hook

_FUSE_UNSET = object()
_fuse_module = _FUSE_UNSET


def _get_fuse():
    global _fuse_module
    if _fuse_module is _FUSE_UNSET:
        try:
            from . import _fuse as mod
        except ImportError:
            mod = None
        _fuse_module = mod if mod is not None and hasattr(mod, "execute") else None
    return _fuse_module


def fuse_enabled():
    """Whether assignments are offered to ``plait.neon._fuse`` (``PLAIT_NEON_FUSE=0`` turns it off)."""
    if _fuse_module is _FUSE_UNSET:
        _get_fuse()
    return _fuse_module is not None and os.environ.get("PLAIT_NEON_FUSE") != "0"


_SPLIT_OPS = frozenset({"dot", "onehot"})


def _to_arrays(node, ev=None):
    """The op-tree with every Tensor leaf (and onehot's index tensor) replaced by its ndarray.

    With a numpy evaluator ``ev``, ``dot`` and ``onehot`` subtrees (which the fused executor does
    not take) are computed first (dot by BLAS) and enter the tree as ndarray leaves, as neon
    split its trees at ``dot``.
    """
    d, left, right = node
    if ev is not None and d["op"] in _SPLIT_OPS:
        return np.asarray(ev(node))
    if "idx" in d and isinstance(d["idx"], CPUTensor):
        d = dict(d)
        d["idx"] = d["idx"]._tensor
    tl, tr = type(left), type(right)
    if tl is OpTreeNode:
        left = _to_arrays(left, ev)
    elif tl is CPUTensor or isinstance(left, CPUTensor):
        left = left._tensor
    if tr is OpTreeNode:
        right = _to_arrays(right, ev)
    elif tr is CPUTensor or isinstance(right, CPUTensor):
        right = right._tensor
    return tuple.__new__(OpTreeNode, (d, left, right))


def _dot_into(dst, node):
    """``dst = a . b`` straight from BLAS when ``node`` is a dot of two tensors of ``dst``'s float
    dtype and ``dst`` is contiguous and separate from them; False otherwise."""
    a, b = node[1], node[2]
    if not (isinstance(a, CPUTensor) and isinstance(b, CPUTensor)):
        return False
    a, b = a._tensor, b._tensor
    if not (dst.dtype == a.dtype == b.dtype and dst.dtype.char in "fd" and dst.flags.c_contiguous
            and a.ndim == b.ndim == 2):
        return False
    if np.may_share_memory(dst, a) or np.may_share_memory(dst, b):
        return False
    np.dot(a, b, out=dst)
    return True


# ---------------------------------------------------------------------------------------------
# The backend


def _layers_has(*names):
    """Whether ``plait.neon._layers`` imports and provides all of ``names``."""
    try:
        from . import _layers
    except ImportError:
        return False
    return all(callable(getattr(_layers, n, None)) for n in names)


def _local_call(name, *args, **kwargs):
    """Call ``plait.neon._norm_roi.<name>`` with tensors replaced by their ndarrays."""
    from . import _norm_roi

    return getattr(_norm_roi, name)(*[_data(a) for a in args], **{k: _data(v) for k, v in kwargs.items()})


def _layers_call(name, *args, **kwargs):
    """Call ``plait.neon._layers.<name>`` with every tensor argument replaced by its ndarray."""
    try:
        from . import _layers
    except ImportError as exc:
        raise NotImplementedError(
            f"{name}: the conv/deconv/pool kernels live in plait.neon._layers, which is not "
            f"available yet ({exc})"
        ) from exc
    fn = getattr(_layers, name, None)
    if fn is None:
        raise NotImplementedError(f"{name}: plait.neon._layers does not provide '{name}' yet")
    args = [_data(a) for a in args]
    kwargs = {k: _data(v) for k, v in kwargs.items()}
    return fn(*args, **kwargs)


class NervanaCPU(ArrayBackend):
    """neon's CPU backend on numpy (BLAS for matrix products), with fused op-tree execution.

    Allocation, the RNG, ``execute``, batch norm, the layer-level helpers, histograms and marks
    are :class:`plait.neon._arrays.ArrayBackend`'s (shared with the GPU backend)."""

    backend_name = "cpu"
    xp = np

    def __init__(self, rng_seed=None, default_dtype=np.float32, hist_bins=64, hist_offset=-48,
                 compat_mode=None, num_devices=None, stochastic_round=None, device_id=None,
                 deterministic=None):
        try:
            dt = np.dtype(default_dtype)
        except TypeError:
            dt = None
        if dt not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(
                f"the CPU backend's default dtype must be float16, float32 or float64, got {default_dtype!r}"
            )
        super().__init__(rng_seed, dt.type, compat_mode=compat_mode, deterministic=deterministic)
        self.device_type = 0
        self.device_id = 0
        self.tensor_cls = CPUTensor
        self.hist_bins, self.hist_offset = None, None
        self.set_hist_buffers(hist_bins, hist_offset)
        self.use_pinned_mem = False

    # -- execution ----------------------------------------------------------------------------
    def _execute_assign(self, out, value):
        """``out[...] = value`` for an op-tree, a tensor or a scalar; returns ``out``."""
        dst = out._tensor
        if isinstance(value, OpTreeNode):
            if value[0]["shape"] != dst.shape:
                self._check_assign_shape(out, value)
            if value[0]["op"] == "dot" and _dot_into(dst, value):
                return out
            if fuse_enabled():
                ev = _NumpyEvaluator(_compute_dtype(dst.dtype), dst.shape, self.rng)
                tree = _to_arrays(value, ev)
                if type(tree) is OpTreeNode and _fuse_module.execute(tree, dst, rng=self.rng):
                    return out
                result = ev(tree)
            else:
                result = evaluate(value, dst.shape, dst.dtype, self.rng)
        elif isinstance(value, CPUTensor):
            self._check_assign_shape(out, value)
            result = value._tensor
        else:
            result = value
        _store(dst, result)
        return out

    # -- matrix products ----------------------------------------------------------------------
    @staticmethod
    def _matmul_operand(x):
        a = x._tensor
        return a.astype(np.float32) if a.dtype == np.float16 or a.dtype.kind in "iu" else a

    def compound_dot(self, A, B, C, alpha=1.0, beta=0.0, relu=False, bsum=None):
        """``C = relu?(alpha * A . B) + beta * C`` with BLAS; pass ``A.T``/``B.T`` views to transpose.

        relu (max(x, 0)) is applied before the beta term, as in neon. ``bsum`` (optional) receives
        the row sums of C.
        """
        a_s, b_s, c_s = tuple(A.shape), tuple(B.shape), tuple(C.shape)
        if len(a_s) != 2 or len(b_s) != 2 or len(c_s) != 2 or a_s[1] != b_s[0] or \
                a_s[0] != c_s[0] or b_s[1] != c_s[1]:
            raise ValueError(
                f"compound_dot: shapes do not fit C = A . B: A is {describe_operand(A)}, B is "
                f"{describe_operand(B)}, C is {describe_operand(C)}; need A (m, k), B (k, n) and "
                f"C (m, n) (pass A.T or B.T views for transposed operands)"
            )
        a, b, c = self._matmul_operand(A), self._matmul_operand(B), C._tensor
        direct = (beta == 0 and alpha == 1.0 and c.flags.c_contiguous and c.dtype == np.result_type(a, b)
                  and not np.may_share_memory(c, a) and not np.may_share_memory(c, b))
        if direct:
            np.dot(a, b, out=c)
            if relu:
                np.maximum(c, 0, out=c)
        else:
            prod = np.dot(a, b)
            if alpha != 1.0:
                prod *= alpha
            if relu:
                np.maximum(prod, 0, out=prod)
            if beta != 0:
                prod += beta * c.astype(prod.dtype, copy=False)
            _store(c, prod)
        if bsum is not None:
            self.sum(C, axis=1, out=bsum)
        return C

    def batched_dot(self, A, B, C, alpha=1.0, beta=0.0, relu=False):
        """Three batched products (X batches on axis 0):

        fprop ``A (K, C), B (X, C, N) -> C (X, K, N)``; bprop ``batched_dot(A.T, B, C)``;
        update ``A (X, K, N), B.T (X, N, C) -> C (K, C)`` summed over the batches.
        """
        a, b, c = self._matmul_operand(A), self._matmul_operand(B), C._tensor
        if a.ndim == 2 and b.ndim == 3 and c.ndim == 3:
            ok = a.shape[1] == b.shape[1] and c.shape == (b.shape[0], a.shape[0], b.shape[2])
            prod = np.matmul(a, b) if ok else None
        elif a.ndim == 3 and b.ndim == 3 and c.ndim == 2:
            ok = a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1] and c.shape == (a.shape[1], b.shape[2])
            prod = np.matmul(a, b).sum(axis=0) if ok else None
        elif a.ndim == 3 and b.ndim == 3 and c.ndim == 3:
            ok = a.shape[0] == b.shape[0] == c.shape[0] and a.shape[2] == b.shape[1] and \
                c.shape[1:] == (a.shape[1], b.shape[2])
            prod = np.matmul(a, b) if ok else None
        else:
            ok, prod = False, None
        if not ok:
            raise ValueError(
                f"batched_dot: shapes do not fit one of the three modes: A is {describe_operand(A)}, "
                f"B is {describe_operand(B)}, C is {describe_operand(C)}; use A (K, C), B (X, C, N), "
                f"C (X, K, N) (fprop; A.T for bprop) or A (X, K, N), B.T (X, N, C), C (K, C) (update)"
            )
        if alpha != 1.0:
            prod = prod * alpha
        if relu:
            prod = np.maximum(prod, 0)
        if beta != 0:
            prod = prod + beta * c
        _store(c, prod)
        return C

    def xnor_compound_dot(self, A, B, C, beta=0.0, bsum=None):
        """XNOR GEMM: ``C = sign(A) . sign(B) + beta * C`` with sign(x) = +1 for x >= 0 else -1.

        On +1/-1 operands (what ``binarize`` makes) this equals ``A . B``, which is what an
        XNOR-and-popcount kernel computes.
        """
        a_s, b_s, c_s = tuple(A.shape), tuple(B.shape), tuple(C.shape)
        if a_s[1] != b_s[0] or a_s[0] != c_s[0] or b_s[1] != c_s[1]:
            raise ValueError(
                f"xnor_compound_dot: shapes do not fit C = A . B: A is {describe_operand(A)}, B is "
                f"{describe_operand(B)}, C is {describe_operand(C)}; need A (m, k), B (k, n), C (m, n)"
            )
        a = np.where(self._matmul_operand(A) >= 0, 1.0, -1.0).astype(np.float32)
        b = np.where(self._matmul_operand(B) >= 0, 1.0, -1.0).astype(np.float32)
        prod = np.dot(a, b)
        if beta != 0:
            prod += beta * C._tensor
        _store(C._tensor, prod)
        if bsum is not None:
            self.sum(C, axis=1, out=bsum)
        return C

    # -- compound layer helpers ---------------------------------------------------------------
    def compound_bprop_lut(self, nin, inputs, error, error_t, dW, pad_idx, alpha=1.0, beta=0):
        """Lookup-table backward: row ``w`` of ``dW`` = ``alpha`` * the sum of the columns of
        ``error`` whose word id (row 0 of ``inputs``) is ``w``, plus ``beta`` * the old row.
        Rows of absent words and of ``pad_idx`` are left as they are."""
        ids = np.asarray(inputs._tensor[0]).astype(np.int64).reshape(-1)
        err = error._tensor
        if err.shape[1] != ids.size:
            raise ValueError(
                f"compound_bprop_lut: error is {describe_operand(error)} but inputs hold {ids.size} "
                f"word ids; error needs one column per id"
            )
        uniq, inv = np.unique(ids, return_inverse=True)
        sums = np.zeros((uniq.size, err.shape[0]), dtype=np.float64)
        np.add.at(sums, inv.reshape(-1), err.T.astype(np.float64))
        keep = uniq != pad_idx if pad_idx is not None else np.ones(uniq.size, bool)
        rows = uniq[keep]
        dw = dW._tensor
        new = alpha * sums[keep]
        if beta != 0:
            new = new + beta * dw[rows]
        dw[rows] = new.astype(dw.dtype)

    def Relu(self, ary, out=None):
        """max(ary, 0) on ndarrays."""
        return np.maximum(ary, 0, out) if out is not None else np.maximum(ary, 0)

    def nms(self, detections, threshold, normalized=False):
        """Greedy non-maximum suppression of boxes (rows x1, y1, x2, y2, score); returns the
        indices kept (among the rows of non-zero score), best first."""
        offset = 0 if normalized else 1
        dets = detections.get() if isinstance(detections, CPUTensor) else np.asarray(detections)
        nz = np.where(dets[:, 4] != 0)[0]
        x1, y1, x2, y2, scores = (dets[nz, i] for i in range(5))
        areas = (x2 - x1 + offset) * (y2 - y1 + offset)
        order = scores.argsort()[::-1]
        keep = []
        while order.size:
            i = order[0]
            keep.append(int(i))
            rest = order[1:]
            w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]) + offset)
            h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]) + offset)
            inter = w * h
            ovr = inter / (areas[i] + areas[rest] - inter)
            order = rest[ovr <= threshold]
        return keep

    # -- convolution, deconvolution, pooling: plait.neon._layers --------------------------------
    def conv_layer(self, dtype, N, C, K, *args, **kwargs):
        kwargs.setdefault("lib", self)  # the backend, for caffe-mode output sizes
        return _layers_call("conv_layer", dtype, N, C, K, *args, **kwargs)

    def fprop_conv(self, layer, I, F, O, *args, **kwargs):
        return _layers_call("fprop_conv", layer, I, F, O, *args, **kwargs)

    def bprop_conv(self, layer, F, E, grad_I, *args, **kwargs):
        return _layers_call("bprop_conv", layer, F, E, grad_I, *args, **kwargs)

    def update_conv(self, layer, I, E, grad_F, *args, **kwargs):
        return _layers_call("update_conv", layer, I, E, grad_F, *args, **kwargs)

    def deconv_layer(self, dtype, N, C, K, *args, **kwargs):
        kwargs.setdefault("lib", self)  # the backend, for caffe-mode output sizes
        return _layers_call("deconv_layer", dtype, N, C, K, *args, **kwargs)

    def fprop_deconv(self, layer, I, F, O, *args, **kwargs):
        return _layers_call("fprop_deconv", layer, I, F, O, *args, **kwargs)

    def bprop_deconv(self, layer, F, E, grad_I, *args, **kwargs):
        return _layers_call("bprop_deconv", layer, F, E, grad_I, *args, **kwargs)

    def update_deconv(self, layer, I, E, grad_F, *args, **kwargs):
        return _layers_call("update_deconv", layer, I, E, grad_F, *args, **kwargs)

    def pool_layer(self, dtype, op, N, C, *args, **kwargs):
        kwargs.setdefault("lib", self)  # the backend, for caffe-mode output sizes
        return _layers_call("pool_layer", dtype, op, N, C, *args, **kwargs)

    def fprop_pool(self, layer, I, O, *args, **kwargs):
        return _layers_call("fprop_pool", layer, I, O, *args, **kwargs)

    def bprop_pool(self, layer, I, O, *args, **kwargs):
        return _layers_call("bprop_pool", layer, I, O, *args, **kwargs)

    # LRN and ROI pooling: plait.neon._layers when it provides them, else plait.neon._norm_roi
    _LRN = ("lrn_layer", "fprop_lrn", "bprop_lrn")

    def lrn_layer(self, dtype, N, C, D=1, H=1, W=1, J=1):
        """An LRN layer over windows of ``J`` (odd) feature maps."""
        if _layers_has(*self._LRN):
            return _layers_call("lrn_layer", dtype, N, C, D, H, W, J, lib=self)
        from ._norm_roi import LRNLayer

        return LRNLayer(self, dtype, N, C, D, H, W, J)

    def fprop_lrn(self, layer, I, O, denom, alpha=None, beta=None, ascale=1, bpower=1):
        """``denom = 1 + ascale/J * windowed sum of I**2``; ``O = I * denom**-bpower``."""
        call = _layers_call if _layers_has(*self._LRN) else _local_call
        return call("fprop_lrn", layer, I, O, denom, alpha=alpha, beta=beta, ascale=ascale,
                    bpower=bpower)

    def bprop_lrn(self, layer, I, O, E, delta, denom, alpha=None, beta=None, ascale=1, bpower=1):
        """The input gradient of ``fprop_lrn`` from the error ``E``, into ``delta``."""
        call = _layers_call if _layers_has(*self._LRN) else _local_call
        return call("bprop_lrn", layer, I, O, E, delta, denom, alpha=alpha, beta=beta,
                    ascale=ascale, bpower=bpower)

    def roipooling_fprop(self, I, rois, O, argmax, roi_count, C, H, W, pooled_height,
                         pooled_width, spatial_scale):
        """Max-pool regions of interest (rows of ``rois``: batch index, x1, y1, x2, y2)."""
        call = _layers_call if _layers_has("roipooling_fprop", "roipooling_bprop") else _local_call
        return call("roipooling_fprop", I, rois, O, argmax, roi_count, C, H, W, pooled_height,
                    pooled_width, spatial_scale, bsz=self.bsz)

    def roipooling_bprop(self, I, rois, O, argmax, roi_count, C, H, W, pooled_height,
                         pooled_width, spatial_scale):
        """Route pooled errors ``I`` back to the maxima's positions in the delta ``O``."""
        call = _layers_call if _layers_has("roipooling_fprop", "roipooling_bprop") else _local_call
        return call("roipooling_bprop", I, rois, O, argmax, roi_count, C, H, W, pooled_height,
                    pooled_width, spatial_scale, bsz=self.bsz)


Backend.backends["cpu"] = NervanaCPU
