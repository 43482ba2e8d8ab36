"""MXNetWrapper: Thinc's name and registry entry, which raise a clear ImportError in plait.

MXNet cannot be imported with numpy 2 (plait's numpy), so every entry point here says so and
names the alternatives, instead of failing inside MXNet or with a registry miss.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple, Type

from ..config import registry
from ..model import Model
from ..shims.mxnet import _unavailable
from ..types import ArgsKwargs


@registry.layers("MXNetWrapper.v1")
def MXNetWrapper(
    mxnet_model: Any,
    convert_inputs: Optional[Callable] = None,
    convert_outputs: Optional[Callable] = None,
    model_class: Type[Model] = Model,
    model_name: str = "mxnet",
) -> Model[Any, Any]:
    """Wrap an MXNet Gluon block as a Model: raises ImportError (no MXNet with numpy 2)."""
    raise _unavailable("MXNetWrapper")


def forward(model: Model, X: Any, is_train: bool) -> Tuple[Any, Callable]:
    """The forward pass of a wrapped MXNet block: raises ImportError."""
    raise _unavailable("mxnetwrapper.forward")


def convert_mxnet_default_inputs(
    model: Model, X: Any, is_train: bool
) -> Tuple[ArgsKwargs, Callable[[ArgsKwargs], Any]]:
    """Convert plait arrays to MXNet NDArrays: raises ImportError."""
    raise _unavailable("convert_mxnet_default_inputs")


def convert_mxnet_default_outputs(model: Model, X_Ymxnet: Any, is_train: bool) -> Any:
    """Convert a wrapped block's MXNet outputs to plait arrays: raises ImportError."""
    raise _unavailable("convert_mxnet_default_outputs")


__all__ = ["MXNetWrapper"]
