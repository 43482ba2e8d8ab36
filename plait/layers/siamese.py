"""siamese: encode both items of a pair with one shared layer, then compare the encodings."""
from __future__ import annotations

from typing import Callable, Optional, Tuple, TypeVar

from ..config import registry
from ..model import Model
from ..types import ArrayXd
from ..util import get_width

LayerT = TypeVar("LayerT")
SimT = TypeVar("SimT")
InT = Tuple[LayerT, LayerT]
OutT = TypeVar("OutT", bound=ArrayXd)


@registry.layers("siamese.v1")
def siamese(layer: Model[LayerT, SimT], similarity: Model[Tuple[SimT, SimT], OutT]) -> Model[InT, OutT]:
    """similarity((layer(X1), layer(X2))) for an input pair (X1, X2); both use the same weights."""
    for arg, value in (("layer", layer), ("similarity", similarity)):
        if not isinstance(value, Model):
            raise TypeError(f"Cannot create siamese: '{arg}' must be a Model, got {type(value).__name__}.")
    return Model(
        f"siamese({layer.name}, {similarity.name})",
        forward,
        init=init,
        layers=[layer, similarity],
        dims={"nI": layer.maybe_get_dim("nI"), "nO": similarity.maybe_get_dim("nO")},
    )


def forward(model: Model[InT, OutT], X1_X2: InT, is_train: bool) -> Tuple[OutT, Callable]:
    X1, X2 = _unpack(model, X1_X2)
    layer, similarity = model.layers
    vec1, backprop_vec1 = layer(X1, is_train)
    vec2, backprop_vec2 = layer(X2, is_train)
    Y, backprop_similarity = similarity((vec1, vec2), is_train)

    def backprop(dY: OutT) -> InT:
        d_vec1, d_vec2 = backprop_similarity(dY)
        return (backprop_vec1(d_vec1), backprop_vec2(d_vec2))

    return Y, backprop


def _unpack(model: Model, X1_X2: InT) -> InT:
    if not isinstance(X1_X2, (tuple, list)) or len(X1_X2) != 2:
        raise TypeError(
            f"Cannot apply model '{model.name}': expected a pair (X1, X2), got "
            f"{type(X1_X2).__name__}{'' if not hasattr(X1_X2, '__len__') else f' of length {len(X1_X2)}'}."
        )
    return X1_X2[0], X1_X2[1]


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    layer, similarity = model.layers
    if X is not None:
        X1, X2 = _unpack(model, X)
        if layer.has_dim("nI") is not False:
            layer.set_dim("nI", get_width(X2))
        layer.initialize(X=X1)
        similarity.initialize(X=(layer.predict(X1), layer.predict(X2)), Y=Y)
    else:
        layer.initialize()
        similarity.initialize(Y=Y)
    if layer.has_dim("nI"):
        model.set_dim("nI", layer.get_dim("nI"))
    if similarity.has_dim("nO"):
        model.set_dim("nO", similarity.get_dim("nO"))
