"""HardSwishMobilenet: a dense layer followed by MobileNetV3's hard swish, Z * relu6(Z + 3) / 6."""
from typing import Callable, Optional, Tuple, cast

from ..config import registry
from ..initializers import he_normal_init, zero_init
from ..model import Model
from ..types import Floats1d, Floats2d
from ..util import partial
from .chain import chain
from .dropout import Dropout
from .layernorm import LayerNorm
from .linear import _backprop_affine, _check_input, _init_affine

InT = Floats2d
OutT = Floats2d


@registry.layers("HardSwishMobilenet.v1")
def HardSwishMobilenet(
    nO: Optional[int] = None,
    nI: Optional[int] = None,
    *,
    init_W: Optional[Callable] = None,
    init_b: Optional[Callable] = None,
    dropout: Optional[float] = None,
    normalize: bool = False,
) -> Model[InT, OutT]:
    """hard_swish_mobilenet(X @ W.T + b).  (nB, nI) -> (nB, nO)

    Params: W (nO, nI) (default he_normal_init), b (nO,) (default zero_init).
    normalize=True chains a LayerNorm after the activation, dropout=rate a Dropout after that.
    """
    if init_W is None:
        init_W = he_normal_init
    if init_b is None:
        init_b = zero_init
    model: Model[InT, OutT] = Model(
        "hardswishmobilenet",
        forward,
        init=partial(_init_affine, init_W, init_b),
        dims={"nO": nO, "nI": nI},
        params={"W": None, "b": None},
    )
    if normalize:
        model = chain(model, LayerNorm(nI=nO))
    if dropout is not None:
        model = chain(model, Dropout(dropout))
    return model


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    W = cast(Floats2d, model.get_param("W"))
    b = cast(Floats1d, model.get_param("b"))
    _check_input(model, X, W.shape[1])
    Z = model.ops.affine(X, W, b)  # (nB, nO), kept for the gradient
    Y = model.ops.hard_swish_mobilenet(Z)

    def backprop(dY: OutT) -> InT:
        return _backprop_affine(model, X, W, model.ops.backprop_hard_swish_mobilenet(dY, Z))

    return Y, backprop
