"""with_reshape: run a 2d layer on the last axis of a 3d (or higher) array."""
from __future__ import annotations

import math

from typing import Any, Callable, Optional, Tuple, TypeVar

from ..config import registry
from ..model import Model
from ..types import Array2d, Array3d, ArrayXd
from .with_array import _check_layer

InT = TypeVar("InT", bound=ArrayXd)
OutT = TypeVar("OutT", bound=Array2d)


@registry.layers("with_reshape.v1")
def with_reshape(layer: Model[OutT, OutT]) -> Model[InT, InT]:
    """Merge the leading axes for `layer` and restore them on its output.

    (nB, nT, nI) -> (nB * nT, nI) -> layer -> (nB * nT, nO) -> (nB, nT, nO)
    """
    _check_layer("with_reshape", layer)
    return Model(
        f"with_reshape({layer.name})",
        forward,
        init=init,
        layers=[layer],
        dims={"nO": layer.maybe_get_dim("nO"), "nI": layer.maybe_get_dim("nI")},
    )


def forward(model: Model[InT, InT], X: InT, is_train: bool) -> Tuple[InT, Callable]:
    layer = model.layers[0]
    X2d = _to_2d(model, X)
    lead = tuple(X.shape[:-1])
    Y2d, backprop_layer = layer(X2d, is_train)
    Y = model.ops.reshape(Y2d, lead + (Y2d.shape[-1],))

    def backprop(dY: InT) -> InT:
        dX2d = backprop_layer(_to_2d(model, dY))
        return model.ops.reshape(dX2d, lead + (dX2d.shape[-1],))

    return Y, backprop


def init(model: Model[InT, InT], X: Optional[Array3d] = None, Y: Optional[Array3d] = None) -> None:
    layer = model.layers[0]
    layer.initialize(
        X=_to_2d(model, X) if X is not None else None,
        Y=_to_2d(model, Y) if Y is not None else None,
    )
    for name in ("nI", "nO"):
        if layer.has_dim(name):
            model.set_dim(name, layer.get_dim(name))


def _to_2d(model: Model, X: Any) -> Array2d:
    """(..., nF) -> (prod(...), nF)"""
    if getattr(X, "ndim", 0) < 2:
        shape = getattr(X, "shape", None)
        raise ValueError(
            f"Model '{model.name}' expects an array with at least 2 dimensions (e.g. (nB, nT, nI)), "
            f"got {type(X).__name__}" + (f" of shape {tuple(shape)}." if shape is not None else ".")
        )
    # An explicit row count: numpy cannot infer -1 when the array is empty.
    return model.ops.reshape(X, (math.prod(X.shape[:-1]), X.shape[-1]))
