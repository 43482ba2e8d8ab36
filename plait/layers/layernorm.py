"""LayerNorm: normalise each row to zero mean and unit variance, then rescale and shift."""
from typing import Callable, Optional, Tuple

from ..config import registry
from ..model import Model
from ..types import Floats2d
from ..util import get_width
from .linear import _check_input

InT = Floats2d

# Added to the variance so that constant rows do not divide by zero.
_VAR_EPS = 1e-08


@registry.layers("LayerNorm.v1")
def LayerNorm(nI: Optional[int] = None) -> Model[InT, InT]:
    """Layer normalization (Ba et al., 2016).  (nB, nI) -> (nB, nI)

    Params: G (nI,) the gain, initialized to ones; b (nI,) the shift, initialized to zeros.
    """
    return Model(
        "layernorm",
        forward,
        init=init,
        dims={"nI": nI, "nO": nI},
        params={"G": None, "b": None},
    )


def forward(model: Model[InT, InT], X: InT, is_train: bool) -> Tuple[InT, Callable]:
    G = model.get_param("G")
    b = model.get_param("b")
    _check_input(model, X, G.shape[0])
    Y, mean, var = model.ops.layer_norm(X, G, b, _VAR_EPS)

    def backprop(dY: InT) -> InT:
        dX, dG, db = model.ops.backprop_layer_norm(dY, X, G, mean, var)
        model.inc_grad("b", db)
        model.inc_grad("G", dG)
        return dX

    return Y, backprop


def init(model: Model[InT, InT], X: Optional[InT] = None, Y: Optional[InT] = None) -> None:
    # X takes precedence; Y only fills in when no X is given (the layer keeps the width).
    sample = X if X is not None else Y
    if sample is not None:
        width = get_width(sample)
        model.set_dim("nI", width)
        model.set_dim("nO", width)
    nI = model.get_dim("nI")
    if model.has_dim("nO") is None:
        model.set_dim("nO", nI)
    model.set_param("G", model.ops.alloc1f(nI) + 1)
    model.set_param("b", model.ops.alloc1f(nI))
