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
    mu = X.mean(axis=1, keepdims=True)  # (nB, 1)
    dist = X - mu
    var = X.var(axis=1, keepdims=True) + _VAR_EPS  # (nB, 1)
    inv_std = var ** -0.5
    Xhat = dist * inv_std
    Y = Xhat * G
    Y += b

    def backprop(dY: InT) -> InT:
        model.inc_grad("b", dY.sum(axis=0))
        model.inc_grad("G", (dY * Xhat).sum(axis=0))
        dXhat = dY * G
        # d/dX of (X - mu) / sqrt(var): the mean and the variance both depend on every
        # cell of the row, which gives the two row-sum corrections.
        nI = X.shape[1]
        sum_dXhat = dXhat.sum(axis=1, keepdims=True)
        sum_dXhat_dist = (dXhat * dist).sum(axis=1, keepdims=True)
        dX = nI * dXhat - sum_dXhat - dist * (sum_dXhat_dist / var)
        dX *= inv_std / nI
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
