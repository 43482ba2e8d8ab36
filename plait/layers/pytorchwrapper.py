"""PyTorchWrapper and friends: wrap a PyTorch module as a Model (not implemented yet in plait).

The names, signatures and registry entries match Thinc 8.3, so code and configs that use
them fail with a clear NotImplementedError instead of an ImportError or a registry miss.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple

from ..config import registry
from ..model import Model
from ..shims.pytorch import _unsupported
from ..shims.pytorch_grad_scaler import PyTorchGradScaler
from ..types import ArgsKwargs, Padded

if TYPE_CHECKING:
    import torch


@registry.layers("PyTorchRNNWrapper.v1")
def PyTorchRNNWrapper(
    pytorch_model: Any,
    convert_inputs: Optional[Callable] = None,
    convert_outputs: Optional[Callable] = None,
) -> Model[Padded, Padded]:
    """Wrap a PyTorch RNN module (torch.nn.RNN-like) as a Padded -> Padded Model."""
    raise _unsupported("PyTorchRNNWrapper")


@registry.layers("PyTorchWrapper.v1")
def PyTorchWrapper(
    pytorch_model: Any,
    convert_inputs: Optional[Callable] = None,
    convert_outputs: Optional[Callable] = None,
) -> Model[Any, Any]:
    """Wrap a PyTorch module as a Model."""
    raise _unsupported("PyTorchWrapper")


@registry.layers("PyTorchWrapper.v2")
def PyTorchWrapper_v2(
    pytorch_model: Any,
    convert_inputs: Optional[Callable] = None,
    convert_outputs: Optional[Callable] = None,
    mixed_precision: bool = False,
    grad_scaler: Optional[PyTorchGradScaler] = None,
    device: Optional["torch.device"] = None,
) -> Model[Any, Any]:
    """Wrap a PyTorch module as a Model, optionally with mixed precision."""
    raise _unsupported("PyTorchWrapper_v2")


@registry.layers("PyTorchWrapper.v3")
def PyTorchWrapper_v3(
    pytorch_model: "torch.nn.Module",
    convert_inputs: Optional[Callable] = None,
    convert_outputs: Optional[Callable] = None,
    mixed_precision: bool = False,
    grad_scaler: Optional[PyTorchGradScaler] = None,
    device: Optional["torch.device"] = None,
    serialize_model: Optional[Callable[[Any], bytes]] = None,
    deserialize_model: Optional[Callable[[Any, bytes, "torch.device"], Any]] = None,
) -> Model[Any, Any]:
    """Wrap a PyTorch module as a Model, with custom (de)serialization of the module."""
    raise _unsupported("PyTorchWrapper_v3")


def forward(model: Model, X: Any, is_train: bool) -> Tuple[Any, Callable]:
    """The forward pass of a wrapped PyTorch module."""
    raise _unsupported("pytorchwrapper.forward")


def convert_pytorch_default_inputs(
    model: Model, X: Any, is_train: bool
) -> Tuple[ArgsKwargs, Callable[[ArgsKwargs], Any]]:
    """Convert plait arrays to PyTorch tensors for a wrapped module."""
    raise _unsupported("convert_pytorch_default_inputs")


def convert_pytorch_default_outputs(model: Model, X_Ytorch: Any, is_train: bool) -> Any:
    """Convert a wrapped module's PyTorch outputs to plait arrays."""
    raise _unsupported("convert_pytorch_default_outputs")


def convert_rnn_inputs(model: Model, Xp: Padded, is_train: bool) -> Any:
    """Convert a Padded batch to the inputs of a PyTorch RNN."""
    raise _unsupported("convert_rnn_inputs")


def convert_rnn_outputs(model: Model, inputs_outputs: Tuple, is_train: bool) -> Any:
    """Convert a PyTorch RNN's outputs to a Padded batch."""
    raise _unsupported("convert_rnn_outputs")


__all__ = ["PyTorchWrapper", "PyTorchWrapper_v2", "PyTorchWrapper_v3", "PyTorchRNNWrapper"]
