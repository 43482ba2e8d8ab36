"""neon's ``neon.backends.nervanagpu``: the GPU tensor and the GPU backend, on CuPy.

Tensors hold cupy arrays (batch on the last axis, as on the CPU) and keep the whole Tensor and
op-tree API of :class:`plait.neon.nervanacpu.CPUTensor`: both are
:class:`plait.neon._arrays.ArrayTensor`, and the backends share allocation, the host RNG,
``execute``, the matrix products, batch norm and neon's layer-level helpers through
:class:`plait.neon._arrays.ArrayBackend`, with ``xp = cupy`` here.

Assignments: a tree is split at ``dot`` (cuBLAS through cupy) and ``onehot``; the rest goes to
``plait.neon._fuse_cuda.execute``, one generated CUDA kernel per pass signature (reductions in
their own kernels); what it declines runs on the reference evaluator with cupy, one node at a
time. ``PLAIT_NEON_FUSE=0`` turns the fused kernels off. ``rand`` and stochastic ``binarize`` draw
their kernel seed from ``be.rng`` (a host RandomState, as on the CPU).

Not on the GPU: convolution, deconvolution, pooling, LRN, ROI pooling and
``compound_bprop_lut`` (their kernels are plait's CPU kernels); they raise
NotImplementedError naming the method.

Importing this module does not import cupy; making a :class:`NervanaGPU` does, and raises
:class:`GPUUnavailableError` saying what is missing when CuPy or a CUDA device is not there.
"""
import os
import time

import numpy as np

from . import _fuse_cuda
from ._arrays import ArrayBackend, ArrayTensor, default_float_dtype, store
from .backend import Backend, OpTreeNode
from .nervanacpu import NervanaCPU

__all__ = ["GPUTensor", "NervanaGPU", "GPUUnavailableError", "gpu_unavailable_reason"]


class GPUUnavailableError(RuntimeError):
    """The GPU backend cannot be made here (no CuPy, or no CUDA device)."""


def _cupy_or_reason():
    """(cupy, None) when CuPy imports and sees a CUDA device, else (None, what is missing)."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install failing at import
        return None, (f"CuPy is not installed or does not import ({type(exc).__name__}: {exc}); "
                      f"install the cupy wheel for your CUDA version, e.g. pip install cupy-cuda12x")
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return None, f"CuPy finds no usable CUDA device or driver ({type(exc).__name__}: {exc})"
    if n < 1:
        return None, "CuPy finds no CUDA device (getDeviceCount() is 0)"
    return cupy, None


def gpu_unavailable_reason():
    """None when the GPU backend can be made, else a sentence saying what is missing."""
    return _cupy_or_reason()[1]


class GPUTensor(ArrayTensor):
    """A tensor in GPU memory wrapping a cupy array (``_tensor``); views share memory.

    ``get()`` copies to a numpy array; ``set()`` copies a host array in; everything else is
    :class:`plait.neon._arrays.ArrayTensor`'s, shared with the CPU tensor."""


def _fuse_enabled():
    return os.environ.get("PLAIT_NEON_FUSE") != "0"


def _not_on_gpu(name, what):
    def method(self, *args, **kwargs):
        raise NotImplementedError(
            f"{name}: the GPU backend has no {what} kernels yet (plait's are CPU kernels); run "
            f"this layer on a backend made with gen_backend('cpu')"
        )
    method.__name__ = name
    method.__doc__ = f"Not on the GPU: raises NotImplementedError ({what})."
    return method


class NervanaGPU(ArrayBackend):
    """neon's GPU backend on CuPy: fused generated CUDA kernels per assignment, cuBLAS products.

    ``_xp`` and ``_launcher`` are for tests: numpy and ``plait.neon._cuda_emu.HostEmulator``
    run the same backend code and kernel sources on the host.
    """

    backend_name = "gpu"
    # a GPU tensor, or a CPU tensor of another backend (copied to the device by store)
    _assign_from = (ArrayTensor,)

    def __init__(self, rng_seed=None, default_dtype=np.float32, stochastic_round=False, device_id=0,
                 compat_mode=None, deterministic=None, num_devices=None, hist_bins=64,
                 hist_offset=-48, bench=False, scratch_size=0, _xp=None, _launcher=None):
        if _xp is None:
            cupy, reason = _cupy_or_reason()
            if cupy is None:
                raise GPUUnavailableError(f"the GPU backend needs CuPy and a CUDA device: {reason}")
            device_id = int(device_id or 0)
            cupy.cuda.Device(device_id).use()
            _xp = cupy
        self.xp = _xp
        self._launcher = _launcher
        super().__init__(rng_seed, default_float_dtype(default_dtype, "GPU"), compat_mode=compat_mode,
                         deterministic=deterministic)
        self.device_type = 1
        self.device_id = int(device_id or 0)
        self.tensor_cls = GPUTensor
        self.stochastic_round = stochastic_round
        self.hist_bins, self.hist_offset = None, None
        self.set_hist_buffers(hist_bins, hist_offset)
        self.use_pinned_mem = True

    # -- execution ----------------------------------------------------------------------------
    # -- execution: ArrayBackend._execute_assign with cuBLAS and the generated CUDA kernels -----
    def _execute_fused(self, tree, dst):
        return _fuse_enabled() and _fuse_cuda.execute(tree, dst, rng=self.rng, launcher=self._launcher)

    def Relu(self, ary, out=None):
        """max(ary, 0) on device arrays."""
        return self.xp.maximum(ary, 0, out) if out is not None else self.xp.maximum(ary, 0)

    # Greedy NMS reads the boxes on the host (tensors convert through __array__).
    nms = NervanaCPU.nms

    # -- timing marks: wait for the device before reading the clock ------------------------
    def _synchronize(self):
        cuda = getattr(self.xp, "cuda", None)
        if cuda is not None:
            cuda.runtime.deviceSynchronize()

    def record_mark(self, marker):
        self._synchronize()
        marker["time"] = time.time()

    def synchronize_mark(self, marker):
        """Wait for the work queued on the device."""
        self._synchronize()

    def cleanup_backend(self):
        """Free cupy's cached device blocks (tensors stay usable)."""
        pool = getattr(self.xp, "get_default_memory_pool", None)
        if pool is not None:
            pool().free_all_blocks()

    # -- what the GPU does not have ------------------------------------------------------------
    conv_layer = _not_on_gpu("conv_layer", "convolution")
    fprop_conv = _not_on_gpu("fprop_conv", "convolution")
    bprop_conv = _not_on_gpu("bprop_conv", "convolution")
    update_conv = _not_on_gpu("update_conv", "convolution")
    deconv_layer = _not_on_gpu("deconv_layer", "deconvolution")
    fprop_deconv = _not_on_gpu("fprop_deconv", "deconvolution")
    bprop_deconv = _not_on_gpu("bprop_deconv", "deconvolution")
    update_deconv = _not_on_gpu("update_deconv", "deconvolution")
    pool_layer = _not_on_gpu("pool_layer", "pooling")
    fprop_pool = _not_on_gpu("fprop_pool", "pooling")
    bprop_pool = _not_on_gpu("bprop_pool", "pooling")
    lrn_layer = _not_on_gpu("lrn_layer", "local response normalization")
    fprop_lrn = _not_on_gpu("fprop_lrn", "local response normalization")
    bprop_lrn = _not_on_gpu("bprop_lrn", "local response normalization")
    roipooling_fprop = _not_on_gpu("roipooling_fprop", "ROI pooling")
    roipooling_bprop = _not_on_gpu("roipooling_bprop", "ROI pooling")
    compound_bprop_lut = _not_on_gpu("compound_bprop_lut", "lookup-table backward (scatter-add)")


Backend.backends["gpu"] = NervanaGPU
