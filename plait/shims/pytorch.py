"""PyTorchShim: hold a PyTorch module inside a Model (not implemented yet in plait)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from .pytorch_grad_scaler import PyTorchGradScaler
from .shim import Shim

if TYPE_CHECKING:
    import torch


def _unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what}: wrapping PyTorch models is not implemented yet in plait. Build the model from "
        f"plait layers instead, or run PyTorch-wrapping code with thinc."
    )


class PyTorchShim(Shim):
    """Adapter between plait arrays and a `torch.nn.Module` (ArgsKwargs in, tensors out).

    Not implemented yet: creating one raises NotImplementedError. The constructor takes
    Thinc 8.3's arguments, so code that builds one fails with a clear message.
    """

    def __init__(
        self,
        model: Any,
        config: Any = None,
        optimizer: Any = None,
        mixed_precision: bool = False,
        grad_scaler: Optional[PyTorchGradScaler] = None,
        device: Optional["torch.device"] = None,
        serialize_model: Optional[Callable[[Any], bytes]] = None,
        deserialize_model: Optional[Callable[[Any, bytes, "torch.device"], Any]] = None,
    ) -> None:
        raise _unsupported(type(self).__name__)


def default_serialize_torch_model(model: Any) -> bytes:
    """Serialize a PyTorch module's state (not implemented yet in plait)."""
    raise _unsupported("default_serialize_torch_model")


def default_deserialize_torch_model(model: Any, state_bytes: bytes, device: "torch.device") -> Any:
    """Load a PyTorch module's state from bytes (not implemented yet in plait)."""
    raise _unsupported("default_deserialize_torch_model")


__all__ = ["PyTorchShim", "default_serialize_torch_model", "default_deserialize_torch_model"]
