"""TorchScriptShim: hold a TorchScript module inside a Model (not implemented yet in plait)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from .pytorch import PyTorchShim, _unsupported
from .pytorch_grad_scaler import PyTorchGradScaler

if TYPE_CHECKING:
    import torch


class TorchScriptShim(PyTorchShim):
    """PyTorchShim for `torch.jit.ScriptModule`s, serialized with torch.jit.

    Not implemented yet: creating one raises NotImplementedError.
    """

    def __init__(
        self,
        model: Optional["torch.jit.ScriptModule"],
        config: Any = None,
        optimizer: Any = None,
        mixed_precision: bool = False,
        grad_scaler: Optional[PyTorchGradScaler] = None,
        device: Optional["torch.device"] = None,
    ) -> None:
        raise _unsupported(type(self).__name__)


__all__ = ["TorchScriptShim"]
