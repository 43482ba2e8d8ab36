"""TorchScriptWrapper: a `torch.jit.ScriptModule` as a Model, and conversion from PyTorchWrapper."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from .. import compat as _compat
from ..model import Model
from ..shims.pytorch import PyTorchShim
from ..shims.pytorch_grad_scaler import PyTorchGradScaler
from ..shims.torchscript import TorchScriptShim
from .pytorchwrapper import convert_pytorch_default_inputs, convert_pytorch_default_outputs, forward

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
    """A ScriptModule as a Model, with PyTorchWrapper_v2's converters and options.

    With torchscript_model=None the model is a placeholder to `from_bytes` into: the bytes
    hold the scripted module itself, not only its weights.
    """
    shim = TorchScriptShim(model=torchscript_model, mixed_precision=mixed_precision, grad_scaler=grad_scaler, device=device)
    attrs = {
        "convert_inputs": convert_inputs if convert_inputs is not None else convert_pytorch_default_inputs,
        "convert_outputs": convert_outputs if convert_outputs is not None else convert_pytorch_default_outputs,
    }
    return Model("pytorch_script", forward, attrs=attrs, shims=[shim], dims={"nI": None, "nO": None})


def pytorch_to_torchscript_wrapper(model: Model) -> Model:
    """A TorchScriptWrapper_v1 over `torch.jit.script` of a PyTorchWrapper's module, keeping its
    converters, mixed precision, grad scaler and device."""
    shim = model.shims[0] if model.shims else None
    if not isinstance(shim, PyTorchShim):
        found = type(shim).__name__ if shim is not None else "no shim"
        raise ValueError(
            f"pytorch_to_torchscript_wrapper: expected a model made by PyTorchWrapper (a PyTorchShim "
            f"in model.shims[0]), got model '{model.name}' with {found}."
        )
    torch = _compat.torch
    module = shim._model
    if not isinstance(module, torch.nn.Module):
        raise ValueError(
            f"pytorch_to_torchscript_wrapper: the shim of model '{model.name}' holds "
            f"{type(module).__name__}, not a torch.nn.Module. Load the module first."
        )
    return TorchScriptWrapper_v1(
        torch.jit.script(module),
        convert_inputs=model.attrs["convert_inputs"],
        convert_outputs=model.attrs["convert_outputs"],
        mixed_precision=shim._mixed_precision,
        grad_scaler=shim._grad_scaler,
        device=shim.device,
    )


__all__ = ["TorchScriptWrapper_v1", "pytorch_to_torchscript_wrapper"]
