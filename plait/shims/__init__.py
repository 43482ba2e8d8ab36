"""Shims: adapters that let a Model hold a model of another framework."""
from .mxnet import MXNetShim
from .pytorch import PyTorchShim
from .pytorch_grad_scaler import PyTorchGradScaler
from .shim import Shim
from .tensorflow import TensorFlowShim, keras_model_fns, maybe_handshake_model
from .torchscript import TorchScriptShim

__all__ = [
    "Shim", "PyTorchShim", "PyTorchGradScaler", "TorchScriptShim", "TensorFlowShim", "keras_model_fns",
    "maybe_handshake_model", "MXNetShim",
]
