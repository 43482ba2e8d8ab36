"""ClippedLinear and its presets (HardSigmoid, HardTanh, ReluK): a dense layer, then clip(Z * slope + offset)."""
from typing import Callable, Optional, Tuple, cast

from ..config import registry
from ..initializers import glorot_uniform_init, zero_init
from ..model import Model
from ..types import Floats1d, Floats2d
from ..util import partial
from .chain import chain
from .dropout import Dropout
from .layernorm import LayerNorm
from .linear import _backprop_affine, _check_input, _init_affine


@registry.layers("ClippedLinear.v1")
def ClippedLinear(
    nO: Optional[int] = None,
    nI: Optional[int] = None,
    *,
    init_W: Optional[Callable] = None,
    init_b: Optional[Callable] = None,
    dropout: Optional[float] = None,
    normalize: bool = False,
    slope: float = 1.0,
    offset: float = 0.0,
    min_val: float = 0.0,
    max_val: float = 1.0,
) -> Model[Floats2d, Floats2d]:
    """clip((X @ W.T + b) * slope + offset, min_val, max_val).  (nB, nI) -> (nB, nO)

    Params: W (nO, nI) (default glorot_uniform_init), b (nO,) (default zero_init).
    The four constants live in attrs of the same names. normalize=True chains a
    LayerNorm after the activation, dropout=rate a Dropout after that.
    """
    if min_val > max_val:
        raise ValueError(
            f"ClippedLinear: min_val ({min_val}) must not exceed max_val ({max_val})."
        )
    if init_W is None:
        init_W = glorot_uniform_init
    if init_b is None:
        init_b = zero_init
    model: Model[Floats2d, Floats2d] = Model(
        "clipped_linear",
        forward,
        init=partial(_init_affine, init_W, init_b),
        dims={"nO": nO, "nI": nI},
        params={"W": None, "b": None},
        attrs={"slope": slope, "offset": offset, "min_val": min_val, "max_val": max_val},
    )
    if normalize:
        model = chain(model, LayerNorm(nI=nO))
    if dropout is not None:
        model = chain(model, Dropout(dropout))
    return model


def forward(model: Model[Floats2d, Floats2d], X: Floats2d, is_train: bool) -> Tuple[Floats2d, Callable]:
    # The constants are read at call time, so editing the attrs changes the activation.
    slope = model.attrs["slope"]
    offset = model.attrs["offset"]
    min_val = model.attrs["min_val"]
    max_val = model.attrs["max_val"]
    W = cast(Floats2d, model.get_param("W"))
    b = cast(Floats1d, model.get_param("b"))
    _check_input(model, X, W.shape[1])
    Z = model.ops.affine(X, W, b)  # (nB, nO), kept for the gradient
    Y = model.ops.clipped_linear(Z, slope, offset, min_val, max_val)

    def backprop(dY: Floats2d) -> Floats2d:
        dZ = model.ops.backprop_clipped_linear(dY, Z, slope, offset, min_val, max_val)
        return _backprop_affine(model, X, W, dZ)

    return Y, backprop


@registry.layers("HardSigmoid.v1")
def HardSigmoid(
    nO: Optional[int] = None,
    nI: Optional[int] = None,
    *,
    init_W: Optional[Callable] = None,
    init_b: Optional[Callable] = None,
    dropout: Optional[float] = None,
    normalize: bool = False,
) -> Model[Floats2d, Floats2d]:
    """clip(0.2 * (X @ W.T + b) + 0.5, 0, 1): a ClippedLinear.  (nB, nI) -> (nB, nO)"""
    return ClippedLinear(
        nO, nI, init_W=init_W, init_b=init_b, dropout=dropout, normalize=normalize,
        slope=0.2, offset=0.5,
    )


@registry.layers("HardTanh.v1")
def HardTanh(
    nO: Optional[int] = None,
    nI: Optional[int] = None,
    *,
    init_W: Optional[Callable] = None,
    init_b: Optional[Callable] = None,
    dropout: Optional[float] = None,
    normalize: bool = False,
) -> Model[Floats2d, Floats2d]:
    """clip(X @ W.T + b, -1, 1): a ClippedLinear.  (nB, nI) -> (nB, nO)"""
    return ClippedLinear(
        nO, nI, init_W=init_W, init_b=init_b, dropout=dropout, normalize=normalize,
        min_val=-1.0, max_val=1.0,
    )


@registry.layers("ReluK.v1")
def ReluK(
    nO: Optional[int] = None,
    nI: Optional[int] = None,
    *,
    init_W: Optional[Callable] = None,
    init_b: Optional[Callable] = None,
    dropout: Optional[float] = None,
    normalize: bool = False,
    k: float = 6.0,
) -> Model[Floats2d, Floats2d]:
    """clip(X @ W.T + b, 0, k) (ReLU6 for k=6): a ClippedLinear.  (nB, nI) -> (nB, nO)"""
    return ClippedLinear(
        nO, nI, init_W=init_W, init_b=init_b, dropout=dropout, normalize=normalize,
        min_val=0.0, max_val=k,
    )
