"""Shims: adapters that let a Model hold a model of another framework.

The framework shims load on first use of their names (see plait.layers for why).
"""
from .shim import Shim

__all__ = [
    "Shim", "PyTorchShim", "PyTorchGradScaler", "TorchScriptShim", "TensorFlowShim", "keras_model_fns",
    "maybe_handshake_model", "MXNetShim",
]


def __getattr__(name):
    # NOTE: the imports stay written out (not computed) so that the file lists what it
    # re-exports, as Thinc's own test of its package checks.
    if name in ('MXNetShim',):
        from .mxnet import MXNetShim
    elif name in ('PyTorchShim',):
        from .pytorch import PyTorchShim
    elif name in ('PyTorchGradScaler',):
        from .pytorch_grad_scaler import PyTorchGradScaler
    elif name in ('TensorFlowShim', 'keras_model_fns', 'maybe_handshake_model'):
        from .tensorflow import TensorFlowShim, keras_model_fns, maybe_handshake_model
    elif name in ('TorchScriptShim',):
        from .torchscript import TorchScriptShim
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = locals()[name]
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
