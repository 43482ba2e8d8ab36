"""Dish: a dense layer followed by the dish activation, a cheap swish-like curve."""
from typing import Callable, Optional, Tuple

from ..config import registry
from ..initializers import he_normal_init
from ..model import Model
from ..types import Floats2d
from ._dense import _dense_forward, _dense_model
from .linear import _init_affine

InT = Floats2d
OutT = Floats2d


@registry.layers("Dish.v1")
def Dish(
    nO: Optional[int] = None,
    nI: Optional[int] = None,
    *,
    init_W: Optional[Callable] = None,
    init_b: Optional[Callable] = None,
    dropout: Optional[float] = None,
    normalize: bool = False,
) -> Model[InT, OutT]:
    """dish(X @ W.T + b).  (nB, nI) -> (nB, nO)

    Params: W (nO, nI) (default he_normal_init), b (nO,) (default zero_init).
    normalize=True chains a LayerNorm after the activation, dropout=rate a Dropout after that.
    """
    return _dense_model(
        "dish", forward, nO, nI, init_W, init_b,
        default_init_W=he_normal_init, dropout=dropout, normalize=normalize,
    )


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    ops = model.ops
    return _dense_forward(model, X, ops.dish, lambda dY, Z, Y: ops.backprop_dish(dY, Z))


# Thinc's module-level name for this layer's init(init_W, init_b, model, X=None, Y=None).
init = _init_affine
