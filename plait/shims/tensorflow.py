"""TensorFlowShim: hold a Keras model inside a Model (not implemented yet in plait)."""
from __future__ import annotations

from typing import Any

import catalogue

from .shim import Shim

# Keras subclassed models are registered here by name (@keras_model_fns("name")) so that a
# saved model can be rebuilt. Registering needs no TensorFlow, so this is a working registry.
keras_model_fns = catalogue.create("plait", "keras", entry_points=True)


def _unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what}: wrapping TensorFlow models is not implemented yet in plait. Build the model from "
        f"plait layers instead, or run TensorFlow-wrapping code with thinc."
    )


def maybe_handshake_model(keras_model: Any) -> Any:
    """Build a Keras subclassed model so its weights exist (not implemented yet in plait)."""
    raise _unsupported("maybe_handshake_model")


class TensorFlowShim(Shim):
    """Adapter between plait arrays and a Keras model (ArgsKwargs in, tensors out).

    Not implemented yet: creating one raises NotImplementedError.
    """

    def __init__(self, model: Any, config: Any = None, optimizer: Any = None) -> None:
        raise _unsupported(type(self).__name__)


__all__ = ["TensorFlowShim", "keras_model_fns", "maybe_handshake_model"]
