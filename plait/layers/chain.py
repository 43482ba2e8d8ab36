"""chain: feed-forward composition of layers, g(f(x))."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

from ..config import registry
from ..model import Model, _predicting
from ..util import get_width

InT = TypeVar("InT")
OutT = TypeVar("OutT")


@registry.layers("chain.v1")
def chain(layer1: Model, layer2: Model, *layers: Model) -> Model:
    """Compose layers so that each one's output is the next one's input: layerN(...layer1(X))."""
    all_layers: List[Model] = [layer1, layer2, *layers]
    for i, layer in enumerate(all_layers):
        if not isinstance(layer, Model):
            raise TypeError(f"Cannot chain: argument {i} is a {type(layer).__name__}, not a Model.")
    dims: Dict[str, Optional[int]] = {"nO": None}
    # nI exists only when the first layer knows about it; nO always exists.
    first_nI = all_layers[0].has_dim("nI")
    if first_nI is not False:
        dims["nI"] = all_layers[0].get_dim("nI") if first_nI else None
    if all_layers[-1].has_dim("nO"):
        dims["nO"] = all_layers[-1].get_dim("nO")
    return Model(">>".join(layer.name for layer in all_layers), forward, init=init, dims=dims, layers=all_layers)


def chain_no_types(*layer: Model) -> Model:
    """chain(*layer), for callers that skip chain's typing overloads (a Thinc name)."""
    return chain(*layer)


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    if not is_train and _predicting.get():
        # Model.predict discards the callback: keeping each layer's would keep every
        # intermediate output alive until the end (the peak memory of inference).
        for layer in model.layers:
            X = layer(X, is_train=False)[0]
        return X, _predict_only_backprop
    callbacks = []
    for layer in model.layers:
        X, backprop_layer = layer(X, is_train=is_train)
        callbacks.append(backprop_layer)

    def backprop(dY: OutT) -> InT:
        for backprop_layer in reversed(callbacks):
            dY = backprop_layer(dY)
        return dY

    return X, backprop


def _predict_only_backprop(dY: Any) -> Any:
    raise RuntimeError(
        "chain: this output came from Model.predict, which keeps no backprop state; call "
        "model.begin_update(X) (or model(X, is_train=...)) to get a usable backprop callback."
    )


def init(model: Model, X: Optional[Any] = None, Y: Optional[Any] = None) -> None:
    # Shape-inference rule: sample X flows through the layers in order (each layer is
    # initialized on its input and then run on it); Y goes only to layers whose nO is
    # still unknown, because only the last layer's output is described by Y.
    current = X
    for layer in model.layers:
        if layer.has_dim("nO") is None:
            layer.initialize(X=current, Y=Y)
        else:
            layer.initialize(X=current)
        if current is not None:
            current = layer.predict(current)
    if model.has_dim("nI") is not False and model.layers[0].has_dim("nI"):
        model.set_dim("nI", model.layers[0].get_dim("nI"))
    if model.has_dim("nO") is None:
        nO = None
        if current is not None:
            try:
                nO = get_width(current)
            except (ValueError, TypeError):
                nO = None
        if nO is None and model.layers[-1].has_dim("nO"):
            nO = model.layers[-1].get_dim("nO")
        if nO is not None:
            model.set_dim("nO", nO)
