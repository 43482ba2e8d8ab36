"""Dropout: zero random cells of the input while training."""
from __future__ import annotations

from typing import Any, Callable, List, Sequence, Tuple, TypeVar

from ..config import registry
from ..model import Model
from ..types import Padded, Ragged

InT = TypeVar("InT")


@registry.layers("Dropout.v1")
def Dropout(rate: float = 0.0) -> Model[InT, InT]:
    """Zero each cell with probability `rate` during training, scaling the rest by 1/(1-rate).

    Works on arrays, Ragged, Padded and lists of arrays. The rate lives in the
    "dropout_rate" attr (set_dropout_rate changes it); "is_enabled" turns it off.
    """
    _check_rate(rate, "Dropout")
    return Model("dropout", forward, attrs={"dropout_rate": rate, "is_enabled": True})


def _check_rate(rate: Any, where: str) -> None:
    if isinstance(rate, bool) or not isinstance(rate, (int, float)):
        raise TypeError(f"{where}: the dropout rate must be a number in [0, 1], got {type(rate).__name__} ({rate!r}).")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"{where}: the dropout rate must be in [0, 1], got {rate!r}.")


def forward(model: Model[InT, InT], X: InT, is_train: bool) -> Tuple[InT, Callable]:
    rate = model.attrs["dropout_rate"]
    if not (is_train and model.attrs["is_enabled"]) or not rate:
        return X, _identity
    _check_rate(rate, f"Model '{model.name}'")
    ops = model.ops
    if isinstance(X, Ragged):
        mask = ops.get_dropout_mask(X.data.shape, rate)
        return Ragged(X.data * mask, X.lengths), lambda dY: Ragged(dY.data * mask, dY.lengths)
    if isinstance(X, Padded):
        mask = ops.get_dropout_mask(X.data.shape, rate)

        def backprop_padded(dY: Padded) -> Padded:
            return Padded(dY.data * mask, dY.size_at_t, dY.lengths, dY.indices)

        return Padded(X.data * mask, X.size_at_t, X.lengths, X.indices), backprop_padded
    if isinstance(X, Sequence) and not hasattr(X, "shape"):
        masks = [ops.get_dropout_mask(x.shape, rate) for x in X]

        def backprop_list(dYs: List[Any]) -> List[Any]:
            return [dY * mask for dY, mask in zip(dYs, masks)]

        return [x * mask for x, mask in zip(X, masks)], backprop_list
    mask = ops.get_dropout_mask(X.shape, rate)
    return X * mask, lambda dY: dY * mask


def _identity(dY: Any) -> Any:
    return dY
