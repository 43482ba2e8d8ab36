"""Logistic: the sigmoid function as a parameter-free layer (older name of sigmoid_activation)."""
from typing import Callable, Tuple

from ..config import registry
from ..model import Model
from ..types import Floats2d

InT = Floats2d
OutT = Floats2d


@registry.layers("Logistic.v1")
def Logistic() -> Model[InT, OutT]:
    """1 / (1 + exp(-X)), elementwise.  (nB, nI) -> (nB, nI)

    Kept for old configs; prefer sigmoid_activation, which also takes other ranks.
    """
    return Model("logistic", forward)


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    Y = model.ops.sigmoid(X, inplace=False)

    def backprop(dY: OutT) -> InT:
        return model.ops.backprop_sigmoid(dY, Y)

    return Y, backprop
