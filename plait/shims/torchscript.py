"""TorchScriptShim: a PyTorchShim for `torch.jit.ScriptModule`s, serialized with torch.jit."""
from __future__ import annotations

from io import BytesIO
from typing import TYPE_CHECKING, Any, Optional

import srsly

from .. import compat as _compat
from ..util import get_torch_default_device
from .pytorch import PyTorchShim, _load_msg, _WrongKindError
from .pytorch_grad_scaler import PyTorchGradScaler, _require_torch

if TYPE_CHECKING:
    import torch


class TorchScriptShim(PyTorchShim):
    """Holds a ScriptModule. The bytes carry the whole module (code and weights), so
    `from_bytes` works on a shim made with model=None."""

    def __init__(
        self,
        model: Optional["torch.jit.ScriptModule"],
        config: Any = None,
        optimizer: Any = None,
        mixed_precision: bool = False,
        grad_scaler: Optional[PyTorchGradScaler] = None,
        device: Optional["torch.device"] = None,
    ) -> None:
        torch = _require_torch(type(self).__name__)
        if model is not None and not isinstance(model, torch.jit.ScriptModule):
            raise _WrongKindError(
                f"{type(self).__name__}: expected a torch.jit.ScriptModule (or None, to load one "
                f"with from_bytes), got {type(model).__module__}.{type(model).__qualname__}. Convert "
                "the module with torch.jit.script(...) first, or use PyTorchShim."
            )
        super().__init__(model, config, optimizer, mixed_precision, grad_scaler, device)

    def to_bytes(self) -> bytes:
        buf = BytesIO()
        _compat.torch.jit.save(self._module("to_bytes"), buf)
        return srsly.msgpack_dumps({"config": self.cfg, "model": buf.getvalue()})

    def from_bytes(self, bytes_data: bytes) -> "TorchScriptShim":
        torch = _require_torch(f"{type(self).__name__}.from_bytes")
        msg = _load_msg(type(self).__name__, bytes_data, "model")
        device = self.device if self._model is not None else get_torch_default_device()
        # torch.jit.load cannot map straight onto Apple's Metal device; load on the CPU, then move.
        map_location = torch.device("cpu") if device.type == "mps" else device
        self.cfg = msg["config"]
        self._model = torch.jit.load(BytesIO(msg["model"]), map_location=map_location)
        self._model.to(device)
        self._grad_scaler.to_(device)
        return self


__all__ = ["TorchScriptShim"]
