"""TensorFlowShim: hold a Keras model (TensorFlow 2 with Keras 3) inside a Model.

TensorFlow is never imported here: every function reaches it through `plait.compat.tensorflow`,
which `enable_tensorflow()` fills in (TensorFlowWrapper calls it when the caller has already
imported TensorFlow).

Serialization stores the values of the model's variables, never its code or config: the
architecture is rebuilt by the code that wraps the model, as for every other plait layer, so
loading bytes from an untrusted source cannot run anything.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Tuple

import catalogue
import numpy
import srsly

from .. import compat as _compat
from ..backends import get_current_ops
from ..types import ArgsKwargs
from .shim import Shim

# Keras subclassed models are registered here by name (@keras_model_fns("name"), done by
# keras_subclass) so that a copy of a wrapped model can be rebuilt from its class.
keras_model_fns = catalogue.create("plait", "keras", entry_points=True)

_FORMAT = "plait.keras-weights"
_FORMAT_VERSION = 1
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
# Variables are plain numbers; refusing other kinds keeps object arrays out of from_bytes.
_NUMERIC_KINDS = "biufc"
_SUBCLASS_PROPS = ("catalogue_name", "eg_x", "eg_y", "eg_shape")


def _tf() -> Any:
    tf = _compat.tensorflow
    if tf is None:
        raise ImportError(
            "TensorFlowShim needs TensorFlow, which is not enabled: install it with "
            "`pip install plait[tensorflow]` and call plait.api.enable_tensorflow() first."
        )
    return tf


def _is_graph_model(keras_model: Any) -> bool:
    """Whether the model is a Sequential or functional Keras model (rebuildable from its config)."""
    return any(cls.__name__ in ("Sequential", "Functional") for cls in type(keras_model).__mro__)


def _tf_device() -> str:
    """The TensorFlow device matching the current plait backend."""
    ops = get_current_ops()
    if ops.device_type == "cpu":
        return "/CPU:0"
    return f"/GPU:{getattr(ops, 'device_id', 0)}"


def maybe_handshake_model(keras_model: Any) -> Any:
    """Create the variables of a Keras subclassed model (decorated with keras_subclass).

    Sequential and functional models are returned as they are. A subclassed model only gets
    its variables on its first call, so it is compiled, built and run once on the sample
    data given to @keras_subclass(...).
    """
    if _is_graph_model(keras_model):
        return keras_model
    missing = [name for name in _SUBCLASS_PROPS if not hasattr(keras_model, name)]
    if missing:
        raise ValueError(
            f"Cannot wrap Keras model of class {type(keras_model).__name__}: a subclassed Keras "
            f"model has no weights until it is called, and it lacks {', '.join(missing)}. Decorate "
            f"the class with @keras_subclass(name, X=..., Y=..., input_shape=...) to give plait "
            f"sample data for building it, or build it as a Sequential or functional model."
        )
    tf = _tf()
    with tf.device(_tf_device()):
        keras_model.compile(**keras_model.eg_compile)
        # Keras 3's own Model.build marks a subclass built without creating its variables
        # (with a warning); the call on the sample data below creates them either way.
        if type(keras_model).build is not tf.keras.Model.build:
            keras_model.build(keras_model.eg_shape)
        keras_model.predict(keras_model.eg_x, verbose=0)
    return keras_model


def _variable_path(variable: Any) -> str:
    # Keras 3 variables have a unique `path`; Keras 2 ones only a (unique) `name`.
    return str(getattr(variable, "path", None) or variable.name)


class TensorFlowShim(Shim):
    """Adapter between plait arrays and a Keras model: ArgsKwargs of tensors in, tensors out.

    The forward pass runs under a tf.GradientTape; the backward pass sums the gradients of
    the trainable variables into `gradients` until finish_update hands them, flattened into
    one vector under the key (shim.id, "tensorflow-shim"), to plait's optimizer. The
    `optimizer` argument is kept, as Thinc keeps it, but not used.
    """

    gradients: Optional[List[Any]]

    def __init__(self, model: Any, config: Any = None, optimizer: Any = None) -> None:
        super().__init__(model, config, optimizer)
        self.gradients = None

    def __str__(self) -> str:
        lines: List[str] = []
        self._model.summary(print_fn=lambda line, *args, **kwargs: lines.append(line))
        return "\n".join(lines)

    def __call__(self, X: ArgsKwargs, is_train: bool) -> Any:
        """The model's output (is_train=False), or (output, backprop) (is_train=True)."""
        if is_train:
            return self.begin_update(X)
        return self.predict(X)

    def _run(self, X: ArgsKwargs, training: bool) -> Any:
        kwargs = dict(X.kwargs)
        # Keras passes `training` on only to the layers whose call() accepts it.
        kwargs.setdefault("training", training)
        return self._model(*X.args, **kwargs)

    def predict(self, X: ArgsKwargs) -> Any:
        return self._run(X, training=False)

    def begin_update(self, X: ArgsKwargs) -> Tuple[Any, Any]:
        tf = _tf()
        # Inputs may nest (a dict of tensors as one arg); only float tensors can have gradients
        # (watching an int tensor makes TF warn).
        structure = (list(X.args), dict(X.kwargs))
        flat = tf.nest.flatten(structure)
        where = [i for i, x in enumerate(flat) if isinstance(x, tf.Tensor) and x.dtype.is_floating]
        watched = [flat[i] for i in where]
        with tf.GradientTape() as tape:
            tape.watch(watched)
            output = self._run(X, training=True)

        def backprop(d_output: Any) -> ArgsKwargs:
            d_output = tf.nest.map_structure(
                lambda d, y: tf.cast(d, y.dtype) if d is not None and d.dtype != y.dtype else d,
                d_output,
                output,
            )
            variables = list(self._model.trainable_variables)
            grads = tape.gradient(output, watched + variables, output_gradients=d_output)
            self._accumulate(variables, grads[len(watched):])
            d_flat: List[Any] = [None] * len(flat)
            for i, grad in zip(where, grads[: len(watched)]):
                d_flat[i] = grad
            d_args, d_kwargs = tf.nest.pack_sequence_as(structure, d_flat)
            return ArgsKwargs(args=tuple(d_args), kwargs=d_kwargs)

        return output, backprop

    def _accumulate(self, variables: List[Any], grads: List[Any]) -> None:
        tf = _tf()
        # A variable the output does not depend on gets None from the tape: its gradient is 0.
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g) for v, g in zip(variables, grads)]
        if self.gradients is None:
            self.gradients = grads
            return
        if len(self.gradients) != len(grads):
            raise ValueError(
                f"TensorFlowShim {self.id}: the model has {len(grads)} trainable variables now but "
                f"had {len(self.gradients)} when the pending gradients were computed. Call "
                f"finish_update before changing the model."
            )
        self.gradients = [old + new for old, new in zip(self.gradients, grads)]

    def finish_update(self, optimizer: Any) -> None:
        if self.gradients is None:
            raise ValueError(
                f"TensorFlowShim {self.id}: there are no gradients to apply. Run the model with "
                f"is_train=True and call its backprop callback before finish_update."
            )
        variables = list(self._model.trainable_variables)
        if len(variables) != len(self.gradients):
            raise ValueError(
                f"TensorFlowShim {self.id}: {len(self.gradients)} gradients for "
                f"{len(variables)} trainable variables. Call finish_update before changing the model."
            )
        values = [numpy.asarray(v.numpy()) for v in variables]
        dtype = numpy.result_type(*values) if values else numpy.float32
        flat = numpy.concatenate([v.ravel().astype(dtype, copy=False) for v in values])
        flat_grad = numpy.concatenate([numpy.asarray(g.numpy(), dtype=dtype).ravel() for g in self.gradients])
        ops = get_current_ops()
        flat, _ = optimizer((self.id, "tensorflow-shim"), ops.asarray(flat), ops.asarray(flat_grad))
        self._assign_flat(variables, _to_numpy(flat))
        self.gradients = None

    @staticmethod
    def _assign_flat(variables: List[Any], flat: numpy.ndarray) -> None:
        start = 0
        for variable in variables:
            shape = tuple(variable.shape)
            size = int(numpy.prod(shape))
            variable.assign(flat[start : start + size].reshape(shape).astype(variable.dtype))
            start += size

    @contextlib.contextmanager
    def use_params(self, params: Dict[Any, Any]) -> Iterator[None]:
        """Use the flat trainable values stored under (self.id, "tensorflow-shim") for the block."""
        key = (self.id, "tensorflow-shim")
        if key not in params:
            yield
            return
        variables = list(self._model.trainable_variables)
        backup = [v.numpy() for v in variables]
        self._assign_flat(variables, _to_numpy(params[key]))
        try:
            yield
        finally:
            for variable, value in zip(variables, backup):
                variable.assign(value)

    def _rebuilt_model(self, device: str) -> Any:
        """A new Keras model of the same architecture, on `device`, holding this one's weights."""
        tf = _tf()
        with tf.device(device):
            if _is_graph_model(self._model):
                model = tf.keras.models.clone_model(self._model)
            else:
                factory = keras_model_fns.get(self._model.catalogue_name)
                ak = getattr(self._model, "eg_args", ArgsKwargs(args=(), kwargs={}))
                model = maybe_handshake_model(factory(*ak.args, **ak.kwargs))
            model.set_weights(self._model.get_weights())
        return model

    def copy(self) -> "TensorFlowShim":
        copied = TensorFlowShim(self._rebuilt_model(_tf_device()), config=self.cfg, optimizer=self._optimizer)
        if self.gradients is not None:
            copied.gradients = list(self.gradients)
        return copied

    def to_device(self, device_type: str, device_id: int) -> None:
        tf = _tf()
        if device_type == "cpu":
            device = "/CPU:0"
        elif device_type == "gpu":
            if not tf.config.list_logical_devices("GPU"):
                raise ValueError(
                    f"TensorFlowShim {self.id}: cannot move the model to GPU {device_id}: TensorFlow "
                    f"sees no GPU (tensorflow-cpu has no GPU support). Install tensorflow with CUDA."
                )
            device = f"/GPU:{device_id}"
        else:
            raise ValueError(f"TensorFlowShim {self.id}: unknown device type {device_type!r}; use 'cpu' or 'gpu'.")
        on_device = tf.DeviceSpec.from_string(device)
        if all(_same_device(v, on_device) for v in self._model.weights):
            return
        self._model = self._rebuilt_model(device)

    def to_bytes(self) -> bytes:
        weights = []
        for variable in self._model.weights:
            value = numpy.ascontiguousarray(variable.numpy())
            weights.append([_variable_path(variable), value.dtype.str, list(value.shape), value.tobytes()])
        return srsly.msgpack_dumps({"format": _FORMAT, "version": _FORMAT_VERSION, "weights": weights})

    def from_bytes(self, data: Any) -> "TensorFlowShim":
        """Load weights saved by to_bytes (or by Thinc: HDF5 bytes, or (name, [arrays]))."""
        if isinstance(data, (bytes, bytearray)) and bytes(data[:8]) == _HDF5_SIGNATURE:
            self._load_hdf5_weights(bytes(data))
            return self
        if isinstance(data, (list, tuple)) and len(data) == 2 and isinstance(data[0], str):
            self._set_weights([_checked_array(w, i) for i, w in enumerate(data[1])])
            return self
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"TensorFlowShim {self.id}: from_bytes expects bytes, got {type(data).__name__}.")
        from ..model import _msgpack_loads  # keeps the garbage collector on when unpacking fails

        msg = _msgpack_loads(bytes(data), f"TensorFlowShim {self.id}")
        if not isinstance(msg, dict) or msg.get("format") != _FORMAT:
            raise ValueError(
                f"TensorFlowShim {self.id}: the data is not a plait Keras weights record. Load "
                f"bytes written by TensorFlowShim.to_bytes."
            )
        if msg.get("version") != _FORMAT_VERSION:
            raise ValueError(
                f"TensorFlowShim {self.id}: weights record version {msg.get('version')!r} is not "
                f"supported (this plait reads version {_FORMAT_VERSION}). Upgrade plait."
            )
        arrays = []
        for i, (path, dtype, shape, raw) in enumerate(msg["weights"]):
            dtype = numpy.dtype(dtype)
            if dtype.kind not in _NUMERIC_KINDS:
                raise ValueError(f"TensorFlowShim {self.id}: weight {i} ({path}) has non-numeric dtype {dtype}.")
            arrays.append(numpy.frombuffer(raw, dtype=dtype).reshape(shape).copy())
        self._set_weights(arrays)
        return self

    def _set_weights(self, arrays: List[numpy.ndarray]) -> None:
        variables = list(self._model.weights)
        if len(variables) != len(arrays):
            hint = (" The model has no weights yet: call it once (or give Keras its input shape) "
                    "before loading." if not variables else "")
            raise ValueError(
                f"TensorFlowShim {self.id}: cannot load {len(arrays)} weights into a Keras model "
                f"with {len(variables)} variables; build the same architecture that was saved.{hint}"
            )
        for variable, array in zip(variables, arrays):
            if tuple(variable.shape) != tuple(array.shape):
                raise ValueError(
                    f"TensorFlowShim {self.id}: variable {_variable_path(variable)} has shape "
                    f"{tuple(variable.shape)}, the saved weight has shape {tuple(array.shape)}; build "
                    f"the same architecture that was saved."
                )
        for variable, array in zip(variables, arrays):
            variable.assign(array.astype(variable.dtype))

    def _load_hdf5_weights(self, data: bytes) -> None:
        # Keras reads only the weight arrays of an HDF5 model file (written by Thinc with
        # Keras 2), which needs a file path.
        fd, path = tempfile.mkstemp(suffix=".h5")
        try:
            with os.fdopen(fd, "wb") as file_:
                file_.write(data)
            self._model.load_weights(path)
        finally:
            os.unlink(path)


def _same_device(variable: Any, wanted: Any) -> bool:
    tf = _tf()
    # A Keras 3 variable keeps its device on the TensorFlow variable it wraps (`.value`).
    device = getattr(variable, "device", None) or getattr(getattr(variable, "value", None), "device", "")
    spec = tf.DeviceSpec.from_string(str(device))
    return (spec.device_type or "CPU").upper() == wanted.device_type.upper() and (
        spec.device_index or 0) == (wanted.device_index or 0)


def _to_numpy(array: Any) -> numpy.ndarray:
    return array.get() if hasattr(array, "get") and not isinstance(array, numpy.ndarray) else numpy.asarray(array)


def _checked_array(value: Any, i: int) -> numpy.ndarray:
    array = numpy.asarray(_to_numpy(value))
    if array.dtype.kind not in _NUMERIC_KINDS:
        raise ValueError(f"TensorFlowShim: saved weight {i} has non-numeric dtype {array.dtype}.")
    return array


__all__ = ["TensorFlowShim", "keras_model_fns", "maybe_handshake_model"]
