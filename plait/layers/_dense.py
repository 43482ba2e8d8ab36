"""The shared body of the dense-then-activation layers (Relu, Gelu, Swish, ClippedLinear, ...).

Each public layer keeps its own module-level `forward`, which names its activation ops and
hands them to `_dense_forward`; models therefore still pickle and copy by reference to a
plain function.
"""
from typing import Any, Callable, Dict, Optional, Tuple, cast

from ..initializers import zero_init
from ..model import Model
from ..types import Floats1d, Floats2d
from ..util import partial
from .chain import chain
from .dropout import Dropout
from .layernorm import LayerNorm
from .linear import _backprop_affine, _check_input, _init_affine


def _dense_model(
    name: str,
    forward: Callable,
    nO: Optional[int],
    nI: Optional[int],
    init_W: Optional[Callable],
    init_b: Optional[Callable],
    *,
    default_init_W: Callable,
    dropout: Optional[float],
    normalize: bool,
    attrs: Optional[Dict[str, Any]] = None,
) -> Model[Floats2d, Floats2d]:
    """Dense node `name` with W (nO, nI) and b (nO,), optionally chained with LayerNorm and Dropout.

    init_W falls back to default_init_W and init_b to zero_init. normalize=True chains a
    LayerNorm(nI=nO) after the node, dropout=rate a Dropout after that.
    """
    if init_W is None:
        init_W = default_init_W
    if init_b is None:
        init_b = zero_init
    model: Model[Floats2d, Floats2d] = Model(
        name,
        forward,
        init=partial(_init_affine, init_W, init_b),
        dims={"nO": nO, "nI": nI},
        params={"W": None, "b": None},
        attrs=attrs,
    )
    if normalize:
        model = chain(model, LayerNorm(nI=nO))
    if dropout is not None:
        model = chain(model, Dropout(dropout))
    return model


def _dense_forward(
    model: Model[Floats2d, Floats2d],
    X: Floats2d,
    activate: Callable[[Floats2d], Floats2d],
    backprop_activation: Callable[[Floats2d, Floats2d, Floats2d], Floats2d],
) -> Tuple[Floats2d, Callable]:
    """Y = activate(X @ W.T + b); backprop_activation(dY, Z, Y) gives dZ.  (nB, nI) -> (nB, nO)

    `activate` may overwrite Z in place when `backprop_activation` reads only Y.
    """
    W = cast(Floats2d, model.get_param("W"))
    b = cast(Floats1d, model.get_param("b"))
    _check_input(model, X, W.shape[1])
    Z = model.ops.affine(X, W, b)  # (nB, nO)
    Y = activate(Z)

    def backprop(dY: Floats2d) -> Floats2d:
        return _backprop_affine(model, X, W, backprop_activation(dY, Z, Y))

    return Y, backprop
