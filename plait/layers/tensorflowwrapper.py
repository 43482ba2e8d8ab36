"""TensorFlowWrapper: wrap a Keras model as a Model (not implemented yet in plait)."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple, Type, TypeVar

from ..model import Model
from ..shims.tensorflow import TensorFlowShim, _unsupported, keras_model_fns, maybe_handshake_model  # noqa: F401 (re-exported, as in Thinc)
from ..types import ArrayXd

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
    """Decorate a Keras subclassed model with sample data so that it can be rebuilt on load."""
    raise _unsupported("keras_subclass")


def TensorFlowWrapper(
    tensorflow_model: Any,
    convert_inputs: Optional[Callable] = None,
    convert_outputs: Optional[Callable] = None,
    optimizer: Optional[Any] = None,
    model_class: Type[Model] = Model,
    model_name: str = "tensorflow",
) -> Model[InT, OutT]:
    """Wrap a Keras model as a Model."""
    raise _unsupported("TensorFlowWrapper")


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    """The forward pass of a wrapped Keras model."""
    raise _unsupported("tensorflowwrapper.forward")


__all__ = ["TensorFlowWrapper", "keras_subclass"]
