"""TensorFlowWrapper: wrap a Keras model (TensorFlow 2 with Keras 3) as a Model."""
from __future__ import annotations

import json
import sys
from typing import Any, Callable, Dict, Optional, Tuple, Type, TypeVar

from .. import compat as _compat
from ..model import Model
from ..shims.tensorflow import TensorFlowShim, keras_model_fns, maybe_handshake_model  # noqa: F401 (re-exported, as in Thinc)
from ..types import ArgsKwargs, ArrayXd
from ..util import (
    assert_tensorflow_installed,
    convert_recursive,
    is_tensorflow_array,
    is_xp_array,
    tensorflow2xp,
    xp2tensorflow,
)

InT = TypeVar("InT")
OutT = TypeVar("OutT")
InFunc = TypeVar("InFunc")
XType = TypeVar("XType", bound=ArrayXd)
YType = TypeVar("YType", bound=ArrayXd)


def keras_subclass(
    name: str,
    X: XType,
    Y: YType,
    input_shape: Tuple[int, ...],
    compile_args: Optional[Dict[str, Any]] = None,
) -> Callable[[InFunc], InFunc]:
    """Decorate a Keras subclassed model with sample data so that it can be built and copied.

    `name` registers the class in `keras_model_fns`; `X`, `Y` and `input_shape` build the
    model (it has no weights until called); `compile_args` go to `model.compile`
    (default: adam and mse). The constructor's arguments must be JSON-serializable: they
    are kept (as `eg_args`) to rebuild the model.
    """
    compile_args = {"optimizer": "adam", "loss": "mse", **(compile_args or {})}

    def decorate(cls: InFunc) -> InFunc:
        cls.catalogue_name = property(lambda self: name)  # type: ignore[attr-defined]
        cls.eg_shape = property(lambda self: input_shape)  # type: ignore[attr-defined]
        cls.eg_compile = property(lambda self: compile_args)  # type: ignore[attr-defined]
        cls.eg_x = property(lambda self: X)  # type: ignore[attr-defined]
        cls.eg_y = property(lambda self: Y)  # type: ignore[attr-defined]

        @keras_model_fns(name)
        def create_model(*args: Any, **kwargs: Any) -> Any:
            return cls(*args, **kwargs)  # type: ignore[operator]

        original_init = cls.__init__  # type: ignore[misc]

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original_init(self, *args, **kwargs)
            try:
                json.dumps([args, kwargs])
            except (TypeError, ValueError, OverflowError, RecursionError) as err:
                raise ValueError(
                    f"keras_subclass('{name}'): the arguments of {cls.__name__}(...) must be "  # type: ignore[attr-defined]
                    f"JSON-serializable, so that the model can be rebuilt from them: {err}"
                ) from err
            self.eg_args = ArgsKwargs(args=args, kwargs=kwargs)

        cls.__init__ = __init__  # type: ignore[misc]
        return cls

    return decorate


def _enable_tensorflow() -> None:
    # A caller holding a Keras model has imported TensorFlow already: turn plait's support
    # on for it instead of failing as Thinc does. Otherwise raise Thinc's ImportError.
    if not _compat.has_tensorflow and "tensorflow" in sys.modules:
        _compat.enable_tensorflow()
    assert_tensorflow_installed()


def TensorFlowWrapper(
    tensorflow_model: Any,
    convert_inputs: Optional[Callable] = None,
    convert_outputs: Optional[Callable] = None,
    optimizer: Optional[Any] = None,
    model_class: Type[Model] = Model,
    model_name: str = "tensorflow",
) -> Model[InT, OutT]:
    """Wrap a Keras model as a Model: plait arrays in and out, trained by plait's optimizer.

    `convert_inputs(model, X, is_train) -> (ArgsKwargs, get_dX)` and
    `convert_outputs(model, Ytf, is_train) -> (Y, get_dYtf)` default to converting every
    array inside lists, tuples, dicts and ArgsKwargs.
    """
    _enable_tensorflow()
    tf = _compat.tensorflow
    if not isinstance(tensorflow_model, tf.keras.Model):
        raise ValueError(
            f"TensorFlowWrapper: expected a tf.keras.Model, got {type(tensorflow_model).__name__}. "
            f"Wrap plait models directly; they need no wrapper."
        )
    tensorflow_model = maybe_handshake_model(tensorflow_model)
    return model_class(
        model_name,
        forward,
        shims=[TensorFlowShim(tensorflow_model, optimizer=optimizer)],
        attrs={
            "convert_inputs": convert_inputs or _convert_inputs,
            "convert_outputs": convert_outputs or _convert_outputs,
        },
    )


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    """Run the wrapped Keras model on X; the callback maps dY back to dX."""
    shim = model.shims[0]
    X_tf, get_dX = model.attrs["convert_inputs"](model, X, is_train)
    if is_train:
        Y_tf, backprop_tf = shim(X_tf, is_train)
    else:
        Y_tf = shim(X_tf, is_train)
    Y, get_dY_tf = model.attrs["convert_outputs"](model, Y_tf, is_train)

    def backprop(dY: OutT) -> InT:
        return get_dX(backprop_tf(get_dY_tf(dY)))

    return Y, backprop


def _to_xp(dX_tf: Any) -> Any:
    return convert_recursive(is_tensorflow_array, tensorflow2xp, dX_tf)


def _convert_inputs(model: Model, X: Any, is_train: bool) -> Tuple[ArgsKwargs, Callable[[ArgsKwargs], Any]]:
    """Arrays to tensors, packed as ArgsKwargs; the callback returns dX shaped like X."""
    converted = convert_recursive(is_xp_array, lambda x: xp2tensorflow(x, requires_grad=is_train), X)
    if isinstance(converted, ArgsKwargs):
        return converted, _to_xp
    if isinstance(converted, dict):
        return ArgsKwargs(args=(), kwargs=converted), lambda dX: _to_xp(dX).kwargs
    if isinstance(converted, (list, tuple)):
        return ArgsKwargs(args=tuple(converted), kwargs={}), lambda dX: _to_xp(dX).args
    return ArgsKwargs(args=(converted,), kwargs={}), lambda dX: _to_xp(dX).args[0]


def _convert_outputs(model: Model, Y_tf: Any, is_train: bool) -> Tuple[Any, Callable[[Any], Any]]:
    """Tensors to arrays; the callback turns dY back into tensors."""
    Y = convert_recursive(is_tensorflow_array, tensorflow2xp, Y_tf)
    return Y, lambda dY: convert_recursive(is_xp_array, xp2tensorflow, dY)


__all__ = ["TensorFlowWrapper", "keras_subclass"]
