"""ClippedLinear and its presets (HardSigmoid, HardTanh, ReluK): a dense layer, then clip(Z * slope + offset)."""
from typing import Callable, Optional, Tuple

from ..config import registry
from ..initializers import glorot_uniform_init
from ..model import Model
from ..types import Floats2d
from ._dense import _dense_forward, _dense_model
from .linear import _init_affine


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
    return _dense_model(
        "clipped_linear", forward, nO, nI, init_W, init_b,
        default_init_W=glorot_uniform_init, dropout=dropout, normalize=normalize,
        attrs={"slope": slope, "offset": offset, "min_val": min_val, "max_val": max_val},
    )


def forward(model: Model[Floats2d, Floats2d], X: Floats2d, is_train: bool) -> Tuple[Floats2d, Callable]:
    # The constants are read at call time, so editing the attrs changes the activation.
    consts = (model.attrs["slope"], model.attrs["offset"], model.attrs["min_val"], model.attrs["max_val"])
    ops = model.ops
    return _dense_forward(
        model, X,
        lambda Z: ops.clipped_linear(Z, *consts),
        lambda dY, Z, Y: ops.backprop_clipped_linear(dY, Z, *consts),
    )


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


# Thinc's module-level name for this layer's init(init_W, init_b, model, X=None, Y=None).
init = _init_affine
