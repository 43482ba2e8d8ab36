"""TorchScriptWrapper: wrap a TorchScript module as a Model (not implemented yet in plait)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from ..model import Model
from ..shims.pytorch import _unsupported
from ..shims.pytorch_grad_scaler import PyTorchGradScaler

if TYPE_CHECKING:
    import torch


def TorchScriptWrapper_v1(
    torchscript_model: Optional["torch.jit.ScriptModule"] = None,
    convert_inputs: Optional[Callable] = None,
    convert_outputs: Optional[Callable] = None,
    mixed_precision: bool = False,
    grad_scaler: Optional[PyTorchGradScaler] = None,
    device: Optional["torch.device"] = None,
) -> Model[Any, Any]:
    """Wrap a TorchScript module as a Model."""
    raise _unsupported("TorchScriptWrapper_v1")


def pytorch_to_torchscript_wrapper(model: Model) -> Model:
    """Turn a PyTorchWrapper model into a TorchScriptWrapper model."""
    raise _unsupported("pytorch_to_torchscript_wrapper")


__all__ = ["TorchScriptWrapper_v1", "pytorch_to_torchscript_wrapper"]
