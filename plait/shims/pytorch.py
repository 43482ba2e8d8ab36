"""PyTorchShim: run a `torch.nn.Module` inside a Model, and let plait's optimizer train it.

The shim speaks torch on both sides: ArgsKwargs of tensors in, the module's output out,
and for backprop the ArgsKwargs of `torch.autograd.backward`. The wrapper layers
(plait.layers.pytorchwrapper) convert between plait arrays and tensors around it.
torch is imported on first use, never when this module is.
"""
from __future__ import annotations

import contextlib
import copy
import itertools
from io import BytesIO
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Mapping, Optional, Tuple

import numpy
import srsly

from .. import compat as _compat
from ..types import ArgsKwargs
from ..util import convert_recursive, get_torch_default_device, is_torch_array, iterate_recursive, torch2xp, xp2torch
from .pytorch_grad_scaler import PyTorchGradScaler, _require_torch
from .shim import Shim

if TYPE_CHECKING:
    import torch


class _WrongKindError(TypeError, ValueError):
    """Thinc raises ValueError for a wrong kind of model, plait TypeError; this satisfies both."""


class PyTorchShim(Shim):
    """Holds a `torch.nn.Module`; forward, backward, optimizer steps and serialization go to torch.

    mixed_precision: run the forward pass under `torch.autocast` for the module's device
        type (float16 on CUDA, bfloat16 on the CPU).
    grad_scaler: loss scaling for float16 training; None gives a default scaler, enabled
        when mixed precision runs on CUDA (bfloat16 needs none).
    device: where the module lives; None picks the device of the current ops.
    serialize_model / deserialize_model: module -> bytes and (module, bytes, device) ->
        module; the defaults store the state dict and load it back without unpickling
        anything but tensors.
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
        torch = _require_torch(type(self).__name__)
        if model is not None and not isinstance(model, torch.nn.Module):
            raise _WrongKindError(
                f"{type(self).__name__}: expected a torch.nn.Module (or None, to load one with "
                f"from_bytes), got {type(model).__module__}.{type(model).__qualname__}. Wrap the "
                "PyTorch module itself."
            )
        if grad_scaler is not None and not isinstance(grad_scaler, PyTorchGradScaler):
            raise _WrongKindError(
                f"{type(self).__name__}: grad_scaler must be a PyTorchGradScaler or None, got "
                f"{type(grad_scaler).__name__}."
            )
        for name, func in (("serialize_model", serialize_model), ("deserialize_model", deserialize_model)):
            if func is not None and not callable(func):
                raise _WrongKindError(
                    f"{type(self).__name__}: {name} must be a callable or None, got {type(func).__name__}."
                )
        super().__init__(model, config, optimizer)
        device = get_torch_default_device() if device is None else torch.device(device)
        if model is not None:
            model.to(device)
        if grad_scaler is None:
            grad_scaler = PyTorchGradScaler(enabled=bool(mixed_precision) and device.type == "cuda")
        grad_scaler.to_(device)
        self._grad_scaler = grad_scaler
        self._mixed_precision = bool(mixed_precision)
        self._serialize_model = serialize_model if serialize_model is not None else default_serialize_torch_model
        self._deserialize_model = (
            deserialize_model if deserialize_model is not None else default_deserialize_torch_model
        )
        if device.type == "cuda":
            _share_gpu_memory_with_torch()

    # --- forward and backward ----------------------------------------------------------

    @property
    def device(self) -> "torch.device":
        """The device of the module's first parameter (the ops' default device without any)."""
        first = next(self._module("device").parameters(), None) if self._model is not None else None
        return first.device if first is not None else get_torch_default_device()

    def __call__(self, inputs: ArgsKwargs, is_train: bool) -> Tuple[Any, Callable[[ArgsKwargs], ArgsKwargs]]:
        if is_train:
            return self.begin_update(inputs)

        def backprop(grads: ArgsKwargs) -> ArgsKwargs:
            raise ValueError(
                f"{type(self).__name__}: cannot backprop through a prediction (is_train=False): no "
                "graph was recorded. Use begin_update (is_train=True) to train."
            )

        return self.predict(inputs), backprop

    def predict(self, inputs: ArgsKwargs) -> Any:
        """The module's output in eval mode and without a graph; no conversions."""
        module = self._module("predict")
        self._check_inputs("predict", inputs)
        torch = _compat.torch
        was_training = module.training
        module.eval()
        try:
            with torch.no_grad(), self._autocast():
                return module(*inputs.args, **inputs.kwargs)
        finally:
            module.train(was_training)

    def begin_update(self, inputs: ArgsKwargs) -> Tuple[Any, Callable[[ArgsKwargs], ArgsKwargs]]:
        """The module's output in train mode, and a callback taking the ArgsKwargs of
        torch.autograd.backward that returns `inputs` with each tensor replaced by its gradient."""
        module = self._module("begin_update")
        self._check_inputs("begin_update", inputs)
        module.train()
        # Autocast covers the forward pass only; backward replays the dtypes it recorded.
        with self._autocast():
            output = module(*inputs.args, **inputs.kwargs)

        def backprop(grads: ArgsKwargs) -> ArgsKwargs:
            if not isinstance(grads, ArgsKwargs):
                raise TypeError(
                    f"{type(self).__name__}: backprop expects the ArgsKwargs of torch.autograd.backward "
                    f"(args=(tensors,), kwargs={{'grad_tensors': ...}}), got {type(grads).__name__}."
                )
            if self._grad_scaler._enabled:
                self._backward_scaled(module, grads, inputs)
            else:
                _compat.torch.autograd.backward(*grads.args, **grads.kwargs)
            if self._grad_scaler.found_inf:
                # The step will be skipped; hand on zeros rather than infinities.
                get_grad = lambda x: x.grad.zero_() if x.grad is not None else None  # noqa: E731
            else:
                get_grad = lambda x: x.grad  # noqa: E731
            return convert_recursive(is_torch_array, get_grad, inputs)

        return output, backprop

    def _backward_scaled(self, module: Any, grads: ArgsKwargs, inputs: ArgsKwargs) -> None:
        """Backward with the output gradients scaled, then unscale what this pass added."""
        if "grad_tensors" not in grads.kwargs:
            raise ValueError(
                f"{type(self).__name__}: mixed-precision backprop scales the output gradients, so "
                "the backward ArgsKwargs needs a 'grad_tensors' kwarg; got kwargs "
                f"{sorted(grads.kwargs)}. Return grad_tensors from convert_outputs, or disable the scaler."
            )
        # Not in place: the output gradients may share memory with the caller's arrays.
        kwargs = dict(grads.kwargs)
        kwargs["grad_tensors"] = self._grad_scaler.scale(kwargs["grad_tensors"], inplace=False)
        # NOTE: gradients accumulated by earlier backprops are unscaled already; set them aside
        # so that only this pass's gradients are unscaled, then add them back.
        earlier = {}
        for param in module.parameters():
            if param.grad is not None:
                earlier[param] = param.grad
                param.grad = None
        _compat.torch.autograd.backward(*grads.args, **kwargs)
        fresh = [
            t.grad
            for t in itertools.chain(module.parameters(), iterate_recursive(is_torch_array, inputs))
            if t.grad is not None
        ]
        self._grad_scaler.unscale(fresh)
        for param, grad in earlier.items():
            param.grad = grad if param.grad is None else grad.add_(param.grad)

    def finish_update(self, optimizer: Any) -> None:
        """Step every parameter that has a gradient with plait's `optimizer`, keyed (shim id, name).

        The optimizer sees numpy/cupy views of the torch storage, so in-place updates need
        no copy. After an overflow (found by the grad scaler) the step is skipped.
        """
        module = self._module("finish_update")
        torch = _compat.torch
        skip = self._grad_scaler.found_inf
        with torch.no_grad():
            for name, param in module.named_parameters():
                grad = param.grad
                if grad is None:
                    continue
                if not skip:
                    W = _updatable(param.data)
                    dW = _updatable(grad)
                    W_new, _ = optimizer((self.id, name), W, dW)
                    if not _same_memory(W_new, param.data):
                        param.data.copy_(xp2torch(W_new, device=param.device))
                grad.zero_()
        self._grad_scaler.update()

    # --- parameters ------------------------------------------------------------------

    @contextlib.contextmanager
    def use_params(self, params: Mapping[Any, Any]) -> Iterator[None]:
        """Swap in module state from `params` for the block, e.g. an optimizer's averages.

        Keys are the optimizer's `(shim.id, name)` or Thinc's `"pytorch_<shim.id>_<name>"`,
        with `name` a key of the module's state_dict; other keys are ignored.
        """
        if self._model is None:
            yield
            return
        torch = _compat.torch
        state = self._model.state_dict()
        prefix = f"pytorch_{self.id}_"
        chosen: Dict[str, Any] = {}
        for key, value in params.items():
            if isinstance(key, tuple) and len(key) == 2 and key[0] == self.id:
                name = key[1]
            elif isinstance(key, str) and key.startswith(prefix):
                name = key[len(prefix):]
            else:
                continue
            if name in state:
                chosen[name] = value
        if not chosen:
            yield
            return
        backup = {name: state[name].clone() for name in chosen}
        with torch.no_grad():
            for name, value in chosen.items():
                target = state[name]
                if tuple(value.shape) != tuple(target.shape):
                    raise ValueError(
                        f"{type(self).__name__}.use_params: value for '{name}' has shape "
                        f"{tuple(value.shape)}, the module's has {tuple(target.shape)}. Pass params "
                        "saved from this model."
                    )
                target.copy_(value if is_torch_array(value) else xp2torch(value, device=target.device))
        try:
            yield
        finally:
            with torch.no_grad():
                for name, value in backup.items():
                    state[name].copy_(value)

    def copy(self) -> "PyTorchShim":
        """A deep copy with its own id, so that optimizer state is not shared with the original."""
        clone = copy.deepcopy(self)
        with Shim.global_id_lock:
            Shim.global_id += 1
            clone.id = Shim.global_id
        return clone

    def to_device(self, device_type: str, device_id: int) -> None:
        """Move the module (and the grad scaler) to "cpu" or to CUDA device `device_id` ("gpu")."""
        torch = _require_torch(f"{type(self).__name__}.to_device")
        if device_type == "cpu":
            device = torch.device("cpu")
        elif device_type == "gpu":
            device = torch.device("cuda", device_id)
        else:
            raise ValueError(
                f"{type(self).__name__}.to_device: invalid device_type {device_type!r}. Use 'cpu' or 'gpu'."
            )
        if self._model is not None:
            self._model.to(device)
        self._grad_scaler.to_(device)
        if device.type == "cuda":
            _share_gpu_memory_with_torch()

    # --- serialization ---------------------------------------------------------------

    def to_bytes(self) -> bytes:
        state = self._serialize_model(self._module("to_bytes"))
        if not isinstance(state, bytes):
            raise TypeError(
                f"{type(self).__name__}.to_bytes: serialize_model must return bytes, got "
                f"{type(state).__name__}."
            )
        return srsly.msgpack_dumps({"config": self.cfg, "state": state})

    def from_bytes(self, bytes_data: bytes) -> "PyTorchShim":
        msg = _load_msg(type(self).__name__, bytes_data, "state")
        device = self.device if self._model is not None else get_torch_default_device()
        self.cfg = msg["config"]
        self._model = self._deserialize_model(self._model, msg["state"], device)
        self._grad_scaler.to_(device)
        return self

    # --- helpers ---------------------------------------------------------------------

    def _module(self, where: str) -> Any:
        if self._model is None:
            raise ValueError(
                f"{type(self).__name__}.{where}: no PyTorch module is wrapped yet (the shim was "
                "created with model=None). Load one with from_bytes/from_disk first."
            )
        return self._model

    def _check_inputs(self, where: str, inputs: Any) -> None:
        if not isinstance(inputs, ArgsKwargs):
            raise TypeError(
                f"{type(self).__name__}.{where}: expected the module's inputs as an ArgsKwargs, got "
                f"{type(inputs).__name__}. Convert them with the wrapper's convert_inputs."
            )

    def _autocast(self) -> Any:
        if not self._mixed_precision:
            return contextlib.nullcontext()
        # The device type picks autocast's default dtype: float16 on CUDA, bfloat16 on the CPU.
        return _compat.torch.autocast(device_type=self.device.type)


def _load_msg(where: str, bytes_data: bytes, key: str) -> Dict[str, Any]:
    from ..model import _msgpack_loads  # keeps the garbage collector on when unpacking fails

    msg = _msgpack_loads(bytes_data, f"{where}.from_bytes")
    if not isinstance(msg, dict) or key not in msg or "config" not in msg:
        found = sorted(msg) if isinstance(msg, dict) else type(msg).__name__
        raise ValueError(
            f"{where}.from_bytes: expected a message with 'config' and '{key}', got {found}. Pass "
            f"bytes made by {where}.to_bytes."
        )
    return msg


def _updatable(tensor: "torch.Tensor") -> Any:
    """A numpy/cupy view of a float tensor for the optimizer; a float32 copy for bfloat16."""
    torch = _compat.torch
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return torch2xp(tensor)


def _same_memory(array: Any, tensor: "torch.Tensor") -> bool:
    """Whether `array` is exactly `tensor`'s memory (same start, shape and strides)."""
    if isinstance(array, numpy.ndarray):
        start = array.__array_interface__["data"][0]
    else:
        start = getattr(getattr(array, "data", None), "ptr", None)
    if start != tensor.data_ptr() or tuple(array.shape) != tuple(tensor.shape):
        return False
    if array.dtype.itemsize != tensor.element_size():
        return False
    return tuple(array.strides) == tuple(s * tensor.element_size() for s in tensor.stride())


def _share_gpu_memory_with_torch() -> None:
    """Route CuPy through PyTorch's allocator (as Thinc does), so they share one GPU pool."""
    from ..backends import CupyOps, context_pools, get_current_ops, set_gpu_allocator

    if not _compat.has_cupy or not isinstance(get_current_ops(), CupyOps):
        return
    if "pytorch" not in context_pools.get():
        set_gpu_allocator("pytorch")
        _compat.cupy.get_default_memory_pool().free_all_blocks()


def default_serialize_torch_model(model: Any) -> bytes:
    """The module's state_dict, saved with torch.save."""
    torch = _require_torch("default_serialize_torch_model")
    buf = BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getvalue()


def default_deserialize_torch_model(model: Any, state_bytes: bytes, device: "torch.device") -> Any:
    """Load a state_dict saved by default_serialize_torch_model into `model`, on `device`.

    Loads with `weights_only=True`: tensors and plain containers only, so bytes from an
    untrusted source cannot run code while loading.
    """
    torch = _require_torch("default_deserialize_torch_model")
    if model is None:
        raise ValueError(
            "default_deserialize_torch_model: no module to load the state into (model=None). "
            "Create the wrapper with the module's architecture, or pass deserialize_model= to "
            "PyTorchWrapper_v3 to rebuild the module from the bytes."
        )
    try:
        state = torch.load(BytesIO(state_bytes), map_location=device, weights_only=True)
    except Exception as err:
        raise ValueError(
            "default_deserialize_torch_model: could not load the state as plain tensors "
            f"(torch.load with weights_only=True refused it: {str(err)[:300]}). Only state dicts "
            "saved by default_serialize_torch_model load here; for anything else pass your own "
            "deserialize_model= to PyTorchWrapper_v3, for bytes from a source you trust."
        ) from err
    if not isinstance(state, Mapping):
        raise ValueError(
            f"default_deserialize_torch_model: expected a state dict, got {type(state).__name__}. "
            "Pass bytes made by default_serialize_torch_model."
        )
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(
            f"default_deserialize_torch_model: the saved state does not fit the wrapped "
            f"{type(model).__name__}: {err}. Build the wrapper around the architecture that was saved."
        ) from err
    model.to(device)
    return model


__all__ = ["PyTorchShim", "default_serialize_torch_model", "default_deserialize_torch_model"]
