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

from ._arrays import SUPPORTED_DTYPES as _SUPPORTED_DTYPES, ArrayBackend, ArrayTensor, data as _data, default_float_dtype
# OpCollection, OpTreeNode and Tensor are importable from here, as from neon.backends.nervanacpu.
from .backend import Backend, OpCollection, OpTreeNode, Tensor, describe_operand  # noqa: F401


class CPUTensor(ArrayTensor):
    """A tensor in host memory wrapping a numpy array (``_tensor``); views share memory.

    Everything but the array module lives in :class:`plait.neon._arrays.ArrayTensor`, shared
    with the GPU tensor."""


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
    _assign_from = (CPUTensor,)
    xp = np

    def __init__(self, rng_seed=None, default_dtype=np.float32, hist_bins=64, hist_offset=-48,
                 compat_mode=None, num_devices=None, stochastic_round=None, device_id=None,
                 deterministic=None):
        super().__init__(rng_seed, default_float_dtype(default_dtype, "CPU"), compat_mode=compat_mode,
                         deterministic=deterministic)
        self.device_type = 0
        self.device_id = 0
        self.tensor_cls = CPUTensor
        self.hist_bins, self.hist_offset = None, None
        self.set_hist_buffers(hist_bins, hist_offset)
        self.use_pinned_mem = False

    # -- execution: ArrayBackend._execute_assign with numpy's BLAS and the C fused pass --------
    def _execute_fused(self, tree, dst):
        return fuse_enabled() and _fuse_module.execute(tree, dst, rng=self.rng)

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
