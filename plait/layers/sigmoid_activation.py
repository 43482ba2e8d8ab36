"""sigmoid_activation: the logistic function as a parameter-free layer, for arrays of any rank."""
from typing import Callable, Tuple

from ..config import registry
from ..model import Model
from ..types import FloatsXdT


@registry.layers("sigmoid_activation.v1")
def sigmoid_activation() -> Model[FloatsXdT, FloatsXdT]:
    """1 / (1 + exp(-X)), elementwise; the output has X's shape."""
    return Model("sigmoid_activation", forward)


def forward(model: Model[FloatsXdT, FloatsXdT], X: FloatsXdT, is_train: bool) -> Tuple[FloatsXdT, Callable]:
    Y = model.ops.sigmoid(X, inplace=False)

    def backprop(dY: FloatsXdT) -> FloatsXdT:
        return model.ops.backprop_sigmoid(dY, Y)

    return Y, backprop
