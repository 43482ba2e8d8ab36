"""residual: a skip connection around a layer, f(x) + x."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple, TypeVar

from ..config import registry
from ..model import Model
from ..types import Floats1d, Floats2d, Floats3d, Floats4d, FloatsXd, Padded, Ragged
from .add import _sum_values

InT = TypeVar(
    "InT",
    List[Floats1d], List[Floats2d], List[Floats3d], List[Floats4d],
    Ragged, Padded, FloatsXd, Floats1d, Floats2d, Floats3d, Floats4d,
)  # fmt: skip


@registry.layers("residual.v1")
def residual(layer: Model[InT, InT]) -> Model[InT, InT]:
    """Add the layer's input to its output.  X -> layer(X) + X (arrays, lists, Ragged, Padded)

    The layer's output must have the shape of its input.
    """
    if not isinstance(layer, Model):
        raise TypeError(f"Cannot create residual: expected a Model, got {type(layer).__name__}.")
    return Model(
        f"residual({layer.name})",
        forward,
        init=init,
        layers=[layer],
        dims={"nO": layer.maybe_get_dim("nO"), "nI": layer.maybe_get_dim("nI")},
    )


def forward(model: Model[InT, InT], X: InT, is_train: bool) -> Tuple[InT, Callable]:
    Y, backprop_layer = model.layers[0](X, is_train)
    _check_same_kind(model, X, Y)
    # _sum_values makes new objects: updating the child's output in place would also
    # change X whenever the child hands its input back (noop, a no-op dropout).
    output = _sum_values(X, Y, model.name)

    def backprop(dY: InT) -> InT:
        return _sum_values(dY, backprop_layer(dY), model.name)

    return output, backprop


def _check_same_kind(model: Model, X: Any, Y: Any) -> None:
    kinds = (list, tuple, Ragged, Padded)
    kind_X = next((k for k in kinds if isinstance(X, k)), None)
    if kind_X is not None and not isinstance(Y, kind_X):
        raise TypeError(
            f"Cannot apply model '{model.name}': the input is {type(X).__name__} but layer "
            f"'{model.layers[0].name}' returned {type(Y).__name__}; a residual layer needs the same kind."
        )


def init(model: Model[InT, InT], X: Optional[InT] = None, Y: Optional[InT] = None) -> None:
    layer = model.layers[0]
    # Y describes the layer's output only while the layer's nO is still open.
    if layer.has_dim("nO") is None:
        layer.initialize(X=X, Y=Y)
    else:
        layer.initialize(X=X)
    for dim in ("nO", "nI"):
        if layer.has_dim(dim):
            model.set_dim(dim, layer.get_dim(dim))
