"""add: run several layers on the same input and sum their outputs, f(x) + g(x) + ..."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar, Union

from ..config import registry
from ..model import Model
from ..types import ArrayXd, ListXd, Padded, Ragged, XY_XY_OutT
from ..util import get_width

InT = TypeVar("InT", bound=Any)
OutT = TypeVar("OutT", bound=Union[ArrayXd, Ragged, Padded, ListXd])


@registry.layers("add.v1")
def add(layer1: Model[InT, OutT], layer2: Model[InT, OutT], *layers: Model) -> Model[InT, XY_XY_OutT]:
    """Sum the outputs of the layers, all run on the same input.  X -> f(X) + g(X) + ...

    Adding to a model named "add" appends to it (so `a + b + c` is one node).
    """
    all_layers: List[Model] = [layer1, layer2, *layers]
    for i, layer in enumerate(all_layers):
        if not isinstance(layer, Model):
            raise TypeError(f"Cannot add: argument {i} is a {type(layer).__name__}, not a Model.")
    if all_layers[0].name == "add":
        all_layers[0].layers.extend(all_layers[1:])
        return all_layers[0]
    dims: Dict[str, Optional[int]] = {"nO": None}
    # nI is only meaningful when every child has one.
    if all(layer.has_dim("nI") is not False for layer in all_layers):
        dims["nI"] = None
    return Model("add", forward, init=init, dims=dims, layers=all_layers)


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    if not model.layers:
        return X, lambda dY: dY
    Y, first_backprop = model.layers[0](X, is_train=is_train)
    callbacks = [first_backprop]
    for layer in model.layers[1:]:
        layer_Y, backprop_layer = layer(X, is_train=is_train)
        # NOTE: a new sum rather than `Y += ...`: a child's output may be X itself (noop).
        Y = _sum_values(Y, layer_Y, model.name)
        callbacks.append(backprop_layer)

    def backprop(dY: OutT) -> InT:
        dX = callbacks[0](dY)
        for backprop_layer in callbacks[1:]:
            dX = _sum_values(dX, backprop_layer(dY), model.name)
        return dX

    return Y, backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    # Every child sees the same X and must produce an output the shape of Y.
    if X is not None:
        width = get_width(X)
        for node in [model, *model.layers]:
            if node.has_dim("nI") is not False:
                node.set_dim("nI", width)
    if Y is not None:
        width = get_width(Y)
        for node in [model, *model.layers]:
            if node.has_dim("nO") is not False:
                node.set_dim("nO", width)
    for layer in model.layers:
        layer.initialize(X=X, Y=Y)
    widths = [(layer.name, layer.get_dim("nO")) for layer in model.layers if layer.has_dim("nO")]
    if len({nO for _, nO in widths}) > 1:
        listed = ", ".join(f"'{name}' nO={nO}" for name, nO in widths)
        raise ValueError(
            f"Cannot initialize model '{model.name}': its layers have different output widths "
            f"({listed}), so their outputs cannot be added. Give them the same nO."
        )
    if widths:
        model.set_dim("nO", widths[0][1])


def _sum_values(a: Any, b: Any, where: str) -> Any:
    """Elementwise a + b for arrays, Ragged, Padded and lists/tuples of them (new objects)."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, Ragged) and isinstance(b, Ragged):
        return Ragged(_sum_values(a.dataXd, b.dataXd, where), a.lengths)
    if isinstance(a, Padded) and isinstance(b, Padded):
        return Padded(_sum_values(a.data, b.data, where), a.size_at_t, a.lengths, a.indices)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            raise ValueError(f"Cannot add the values in model '{where}': sequences of length {len(a)} and {len(b)}.")
        summed = [_sum_values(x, y, where) for x, y in zip(a, b)]
        return tuple(summed) if isinstance(a, tuple) else summed
    if hasattr(a, "shape") and hasattr(b, "shape"):
        if tuple(a.shape) != tuple(b.shape):
            raise ValueError(
                f"Cannot add the values in model '{where}': shapes {tuple(a.shape)} and {tuple(b.shape)} "
                f"differ. The layers must produce outputs (and input gradients) of the same shape."
            )
        return a + b
    raise TypeError(
        f"Cannot add the values in model '{where}': got {type(a).__name__} and {type(b).__name__}; "
        f"expected two arrays, Ragged, Padded or lists of arrays."
    )
