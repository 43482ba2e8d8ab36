"""Sigmoid: a dense layer followed by the logistic function, an output layer for multi-label tasks."""
from typing import Callable, Optional, Tuple

from ..config import registry
from ..initializers import zero_init
from ..model import Model
from ..types import Floats2d
from ..util import partial
from ._dense import _dense_forward
from .linear import _init_affine_keep_dims

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
    ops = model.ops
    return _dense_forward(
        model, X, lambda Z: ops.sigmoid(Z, inplace=True), lambda dY, Z, Y: ops.backprop_sigmoid(dY, Y)
    )


# Thinc's module-level name for this layer's init(init_W, init_b, model, X=None, Y=None): output
# layers fill only the dims that are still unset.
init = _init_affine_keep_dims
