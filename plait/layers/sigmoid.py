"""Sigmoid: a dense layer followed by the logistic function, an output layer for multi-label tasks."""
from typing import Callable, Optional, Tuple, cast

from ..config import registry
from ..initializers import zero_init
from ..model import Model
from ..types import Floats1d, Floats2d
from ..util import partial
from .linear import _backprop_affine, _check_input, _init_affine_keep_dims

InT = Floats2d
OutT = Floats2d


@registry.layers("Sigmoid.v1")
def Sigmoid(
    nO: Optional[int] = None,
    nI: Optional[int] = None,
    *,
    init_W: Optional[Callable] = None,
    init_b: Optional[Callable] = None,
) -> Model[InT, OutT]:
    """sigmoid(X @ W.T + b): independent probabilities per class.  (nB, nI) -> (nB, nO)

    Params: W (nO, nI), b (nO,), both zero_init by default. Sample data given to
    initialize only fills dims that are still unset.
    """
    if init_W is None:
        init_W = zero_init
    if init_b is None:
        init_b = zero_init
    return Model(
        "sigmoid",
        forward,
        init=partial(_init_affine_keep_dims, init_W, init_b),
        dims={"nO": nO, "nI": nI},
        params={"W": None, "b": None},
    )


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    W = cast(Floats2d, model.get_param("W"))
    b = cast(Floats1d, model.get_param("b"))
    _check_input(model, X, W.shape[1])
    Y = model.ops.sigmoid(model.ops.affine(X, W, b), inplace=True)

    def backprop(dY: OutT) -> InT:
        return _backprop_affine(model, X, W, model.ops.backprop_sigmoid(dY, Y))

    return Y, backprop
