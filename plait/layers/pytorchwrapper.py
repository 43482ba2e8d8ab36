"""PyTorchWrapper (v1-v3) and PyTorchRNNWrapper: a `torch.nn.Module` as a Model.

The forward pass is three steps, each with its own backward callback:

    Xtorch, get_dX = convert_inputs(model, X, is_train)        # arrays -> ArgsKwargs of tensors
    Ytorch, torch_backprop = model.shims[0](Xtorch, is_train)   # the module (PyTorchShim)
    Y, get_dYtorch = convert_outputs(model, (X, Ytorch), is_train)  # tensors -> arrays

`torch_backprop` takes the ArgsKwargs of `torch.autograd.backward`. plait's optimizer
trains the module's parameters through `model.finish_update(optimizer)`. torch is
imported on first use, never when this module is.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple, cast

from .. import compat as _compat
from ..config import registry
from ..model import Model
from ..shims.pytorch import PyTorchShim
from ..shims.pytorch_grad_scaler import PyTorchGradScaler
from ..types import ArgsKwargs, Padded
from ..util import convert_recursive, is_torch_array, is_xp_array, iterate_recursive, torch2xp, xp2torch

if TYPE_CHECKING:
    import torch


@registry.layers("PyTorchRNNWrapper.v1")
def PyTorchRNNWrapper(
    pytorch_model: Any,
    convert_inputs: Optional[Callable] = None,
    convert_outputs: Optional[Callable] = None,
) -> Model[Padded, Padded]:
    """A torch RNN (seq-first, like torch.nn.LSTM) as a Padded -> Padded Model.

    Padded (nL, nB, nI) -> Padded (nL, nB, nO). The padded steps run through the RNN too.
    """
    return cast(
        Model[Padded, Padded],
        PyTorchWrapper(
            pytorch_model,
            convert_inputs=convert_inputs if convert_inputs is not None else convert_rnn_inputs,
            convert_outputs=convert_outputs if convert_outputs is not None else convert_rnn_outputs,
        ),
    )


@registry.layers("PyTorchWrapper.v1")
def PyTorchWrapper(
    pytorch_model: Any,
    convert_inputs: Optional[Callable] = None,
    convert_outputs: Optional[Callable] = None,
) -> Model[Any, Any]:
    """A torch module as a Model; arrays (or lists, tuples, dicts, ArgsKwargs of them) in and out.

    The module's forward returns a tensor or a tuple. The default converters map an array
    to one positional argument, a list/tuple to several, a dict to keyword arguments.
    """
    return _wrap("pytorch", PyTorchShim(pytorch_model), convert_inputs, convert_outputs)


@registry.layers("PyTorchWrapper.v2")
def PyTorchWrapper_v2(
    pytorch_model: Any,
    convert_inputs: Optional[Callable] = None,
    convert_outputs: Optional[Callable] = None,
    mixed_precision: bool = False,
    grad_scaler: Optional[PyTorchGradScaler] = None,
    device: Optional["torch.device"] = None,
) -> Model[Any, Any]:
    """PyTorchWrapper with mixed precision (autocast on the module's device type), a grad
    scaler for float16 training, and the device to run on (default: the current ops')."""
    shim = PyTorchShim(pytorch_model, mixed_precision=mixed_precision, grad_scaler=grad_scaler, device=device)
    return _wrap("pytorch", shim, convert_inputs, convert_outputs)


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
    """PyTorchWrapper_v2 with custom serialization: serialize_model(module) -> bytes and
    deserialize_model(module, bytes, device) -> module (defaults: the state dict)."""
    shim = PyTorchShim(
        pytorch_model,
        mixed_precision=mixed_precision,
        grad_scaler=grad_scaler,
        device=device,
        serialize_model=serialize_model,
        deserialize_model=deserialize_model,
    )
    return _wrap("pytorch", shim, convert_inputs, convert_outputs)


def _wrap(name: str, shim: PyTorchShim, convert_inputs: Optional[Callable], convert_outputs: Optional[Callable]) -> Model:
    for arg, func in (("convert_inputs", convert_inputs), ("convert_outputs", convert_outputs)):
        if func is not None and not callable(func):
            raise TypeError(
                f"Cannot create model '{name}': {arg} must be a callable (model, X, is_train) -> "
                f"(converted, backprop) or None, got {type(func).__name__}."
            )
    attrs = {
        "convert_inputs": convert_inputs if convert_inputs is not None else convert_pytorch_default_inputs,
        "convert_outputs": convert_outputs if convert_outputs is not None else convert_pytorch_default_outputs,
    }
    return Model(name, forward, attrs=attrs, shims=[shim], dims={"nI": None, "nO": None})


def forward(model: Model, X: Any, is_train: bool) -> Tuple[Any, Callable]:
    """Convert X, run the wrapped module, convert its output; backprop runs the three in reverse."""
    if not model.shims:
        raise ValueError(
            f"Model '{model.name}' has no shim: pytorchwrapper.forward runs the PyTorchShim in "
            "model.shims[0]. Build the model with PyTorchWrapper."
        )
    Xtorch, get_dX = model.attrs["convert_inputs"](model, X, is_train)
    Ytorch, torch_backprop = model.shims[0](Xtorch, is_train)
    Y, get_dYtorch = model.attrs["convert_outputs"](model, (X, Ytorch), is_train)

    def backprop(dY: Any) -> Any:
        return get_dX(torch_backprop(get_dYtorch(dY)))

    return Y, backprop


def _shim(model: Model, where: str) -> PyTorchShim:
    shims = model.shims
    if not shims or not isinstance(shims[0], PyTorchShim):
        found = type(shims[0]).__name__ if shims else "no shim"
        raise TypeError(
            f"{where}: model '{model.name}' must hold a PyTorchShim in model.shims[0], found "
            f"{found}. Use it with models made by PyTorchWrapper."
        )
    return cast(PyTorchShim, shims[0])


def _to_xp(tensor: "torch.Tensor") -> Any:
    # bfloat16 (what CPU autocast produces) has no numpy dtype; float32 holds it exactly.
    if tensor.dtype == _compat.torch.bfloat16:
        tensor = tensor.float()
    return torch2xp(tensor)


# --- the default converters -------------------------------------------------------------


def convert_pytorch_default_inputs(
    model: Model, X: Any, is_train: bool
) -> Tuple[ArgsKwargs, Callable[[ArgsKwargs], Any]]:
    """Arrays (in nested lists, tuples, dicts, ArgsKwargs) to tensors on the module's device.

    An ArgsKwargs passes through; a dict becomes kwargs, a list or tuple args, anything
    else one positional arg. The backprop callback turns the input gradients back into
    arrays with the structure of X (a list comes back as a tuple). While training, float
    inputs require gradients.
    """
    device = _shim(model, "convert_pytorch_default_inputs").device

    def to_torch(x: Any) -> Any:
        return xp2torch(x, requires_grad=is_train and x.dtype.kind == "f", device=device)

    converted = convert_recursive(is_xp_array, to_torch, X)

    def arrays(dXtorch: ArgsKwargs) -> Any:
        return convert_recursive(is_torch_array, torch2xp, dXtorch)

    if isinstance(converted, ArgsKwargs):
        return converted, arrays
    if isinstance(converted, dict):
        return ArgsKwargs(args=(), kwargs=converted), lambda dXtorch: arrays(dXtorch).kwargs
    if isinstance(converted, (list, tuple)):
        return ArgsKwargs(args=tuple(converted), kwargs={}), lambda dXtorch: arrays(dXtorch).args
    return ArgsKwargs(args=(converted,), kwargs={}), lambda dXtorch: arrays(dXtorch).args[0]


def convert_pytorch_default_outputs(model: Model, X_Ytorch: Any, is_train: bool) -> Tuple[Any, Callable]:
    """The module's output tensors (nested in tuples, lists, dicts) to arrays; bfloat16 comes
    back as float32. The backprop callback makes the ArgsKwargs of torch.autograd.backward."""
    device = _shim(model, "convert_pytorch_default_outputs").device
    _, Ytorch = X_Ytorch
    Y = convert_recursive(is_torch_array, _to_xp, Ytorch)

    def backprop(dY: Any) -> ArgsKwargs:
        dYtorch = convert_recursive(is_xp_array, lambda d: xp2torch(d, device=device), dY)
        if is_torch_array(Ytorch):
            return ArgsKwargs(args=((Ytorch,),), kwargs={"grad_tensors": dYtorch})
        # Several outputs: pair each one that takes part in the graph with its gradient.
        outputs = list(iterate_recursive(is_torch_array, Ytorch))
        grads = list(iterate_recursive(is_torch_array, dYtorch))
        if len(outputs) != len(grads):
            raise ValueError(
                f"Model '{model.name}': the gradient has {len(grads)} arrays, but the module "
                f"returned {len(outputs)} tensors. Pass dY with the structure of Y."
            )
        pairs = [(y, d) for y, d in zip(outputs, grads) if y.requires_grad]
        return ArgsKwargs(
            args=(tuple(y for y, _ in pairs),), kwargs={"grad_tensors": tuple(d for _, d in pairs)}
        )

    return Y, backprop


# --- RNN converters -------------------------------------------------------------------


def convert_rnn_inputs(model: Model, Xp: Padded, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    """A Padded batch to the args of a seq-first torch RNN: (data (nL, nB, nI), hx=None)."""
    device = _shim(model, "convert_rnn_inputs").device
    if not isinstance(Xp, Padded):
        raise TypeError(
            f"Model '{model.name}' (a PyTorchRNNWrapper) expects a Padded batch, got "
            f"{type(Xp).__name__}. Wrap it with with_padded(...)."
        )
    # NOTE: the RNN sees the padding too (as in Thinc): a right-to-left direction reads a
    # short sequence's padding before its own steps.
    Xtorch = xp2torch(Xp.data, requires_grad=is_train, device=device)

    def backprop(dXtorch: ArgsKwargs) -> Padded:
        dX = torch2xp(dXtorch.args[0])
        return Padded(dX, Xp.size_at_t, Xp.lengths, Xp.indices)

    return ArgsKwargs(args=(Xtorch, None), kwargs={}), backprop


def convert_rnn_outputs(model: Model, inputs_outputs: Tuple, is_train: bool) -> Tuple[Padded, Callable]:
    """A torch RNN's (output, state) to a Padded batch of its output."""
    device = _shim(model, "convert_rnn_outputs").device
    Xp, (Ytorch, _) = inputs_outputs
    Yp = Padded(_to_xp(Ytorch), Xp.size_at_t, Xp.lengths, Xp.indices)

    def backprop(dYp: Padded) -> ArgsKwargs:
        return ArgsKwargs(args=(Ytorch,), kwargs={"grad_tensors": xp2torch(dYp.data, device=device)})

    return Yp, backprop


__all__ = ["PyTorchWrapper", "PyTorchWrapper_v2", "PyTorchWrapper_v3", "PyTorchRNNWrapper"]
