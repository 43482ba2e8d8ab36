"""noop: the identity layer, optionally wrapping layers it does not call."""
from __future__ import annotations

from typing import Callable, Tuple, TypeVar

from ..config import registry
from ..model import Model

InOutT = TypeVar("InOutT")


@registry.layers("noop.v1")
def noop(*layers: Model) -> Model[InOutT, InOutT]:
    """Return the input unchanged; any layers given are kept as children but never run."""
    return Model("noop", forward, layers=list(layers))


def forward(model: Model[InOutT, InOutT], X: InOutT, is_train: bool) -> Tuple[InOutT, Callable]:
    def backprop(dY: InOutT) -> InOutT:
        return dY

    return X, backprop
