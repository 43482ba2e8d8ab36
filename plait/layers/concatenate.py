"""concatenate: run several layers on the same input and join their outputs feature-wise."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union, cast

from ..config import registry
from ..model import Model
from ..types import Array2d, ArrayXd, Padded, Ragged, XY_XY_OutT
from ..util import get_width
from .add import _sum_values
from .noop import noop

InT = TypeVar("InT", bound=Any)
OutT = TypeVar("OutT", bound=Union[ArrayXd, Sequence[Array2d], Ragged, Padded])


@registry.layers("concatenate.v1")
def concatenate(*layers: Model) -> Model[InT, XY_XY_OutT]:
    """Join the outputs of the layers along the feature axis.  X -> hstack(f(X), g(X), ...)

    No layers gives noop(), one layer gives that layer; concatenating onto a
    concatenate model appends to it (its name is kept).
    """
    for i, layer in enumerate(layers):
        if not isinstance(layer, Model):
            raise TypeError(f"Cannot concatenate: argument {i} is a {type(layer).__name__}, not a Model.")
    if not layers:
        return cast(Model[InT, XY_XY_OutT], noop())
    if len(layers) == 1:
        return layers[0]
    if layers[0]._func is forward:
        layers[0].layers.extend(layers[1:])
        return layers[0]
    dims: Dict[str, Optional[int]] = {"nO": None}
    if all(layer.has_dim("nI") is not False for layer in layers):
        dims["nI"] = None
    return Model("|".join(layer.name for layer in layers), forward, init=init, dims=dims, layers=list(layers))


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    Ys, callbacks = zip(*[layer(X, is_train=is_train) for layer in model.layers])
    if isinstance(Ys[0], Ragged):
        return _ragged_forward(model, Ys, callbacks)
    if isinstance(Ys[0], Padded):
        return _padded_forward(model, Ys, callbacks)
    if isinstance(Ys[0], (list, tuple)):
        return _list_forward(model, Ys, callbacks)
    return _array_forward(model, Ys, callbacks)


def _check_kinds(model: Model, Ys: Sequence[Any], kind: type) -> None:
    for layer, Y in zip(model.layers, Ys):
        if not isinstance(Y, kind):
            raise TypeError(
                f"Cannot concatenate in model '{model.name}': layer '{model.layers[0].name}' returned "
                f"{type(Ys[0]).__name__} but layer '{layer.name}' returned {type(Y).__name__}."
            )


def _check_rows(model: Model, Ys: Sequence[Any]) -> None:
    for layer, Y in zip(model.layers, Ys):
        if Y.ndim < 2:
            raise ValueError(
                f"Cannot concatenate in model '{model.name}': layer '{layer.name}' returned an array of "
                f"shape {tuple(Y.shape)}; concatenation joins axis 1, so outputs must be at least 2d."
            )
        if Y.shape[0] != Ys[0].shape[0]:
            raise ValueError(
                f"Cannot concatenate in model '{model.name}': layer '{model.layers[0].name}' returned "
                f"{Ys[0].shape[0]} rows but layer '{layer.name}' returned {Y.shape[0]}."
            )


def _backprop_columns(model: Model, callbacks: Sequence[Callable], widths: List[int], dY: Any, wrap: Callable) -> Any:
    """Hand each child the columns of dY (axis -1 of the 2d/3d gradient) it produced; sum the dXs."""
    ops = model.ops
    dX = None
    start = 0
    for backprop_layer, width in zip(callbacks, widths):
        d_part = ops.as_contig(dY[..., start : start + width])
        dX = _sum_values(dX, backprop_layer(wrap(d_part)), model.name)
        start += width
    return dX


def _array_forward(model: Model, Ys: Sequence[Any], callbacks: Sequence[Callable]) -> Tuple[Any, Callable]:
    _check_kinds(model, Ys, type(Ys[0]))
    _check_rows(model, Ys)
    widths = [Y.shape[1] for Y in Ys]
    Y = model.ops.xp.concatenate(Ys, axis=1)

    def backprop(dY: Any) -> Any:
        # Move axis 1 last so the shared column splitter also serves >2d outputs.
        moved = model.ops.xp.moveaxis(dY, 1, -1)
        return _backprop_columns(
            model, callbacks, widths, moved, lambda d: model.ops.as_contig(model.ops.xp.moveaxis(d, -1, 1))
        )

    return Y, backprop


def _ragged_forward(model: Model, Ys: Sequence[Ragged], callbacks: Sequence[Callable]) -> Tuple[Ragged, Callable]:
    _check_kinds(model, Ys, Ragged)
    datas = [Y.data for Y in Ys]
    _check_rows(model, datas)
    widths = [data.shape[1] for data in datas]
    lengths = Ys[0].lengths
    Y = Ragged(model.ops.xp.concatenate(datas, axis=1), lengths)

    def backprop(dY: Ragged) -> Any:
        return _backprop_columns(model, callbacks, widths, dY.data, lambda d: Ragged(d, dY.lengths))

    return Y, backprop


def _padded_forward(model: Model, Ys: Sequence[Padded], callbacks: Sequence[Callable]) -> Tuple[Padded, Callable]:
    _check_kinds(model, Ys, Padded)
    for layer, Y in zip(model.layers, Ys):
        if Y.data.shape[:-1] != Ys[0].data.shape[:-1]:
            raise ValueError(
                f"Cannot concatenate in model '{model.name}': layer '{model.layers[0].name}' returned "
                f"Padded data of shape {tuple(Ys[0].data.shape)} but layer '{layer.name}' returned "
                f"{tuple(Y.data.shape)}; all but the last axis must agree."
            )
    widths = [Y.data.shape[-1] for Y in Ys]
    first = Ys[0]
    Y = Padded(model.ops.xp.concatenate([Y.data for Y in Ys], axis=-1), first.size_at_t, first.lengths, first.indices)

    def backprop(dY: Padded) -> Any:
        return _backprop_columns(
            model, callbacks, widths, dY.data, lambda d: Padded(d, dY.size_at_t, dY.lengths, dY.indices)
        )

    return Y, backprop


def _list_forward(model: Model, Ys: Sequence[List[Any]], callbacks: Sequence[Callable]) -> Tuple[List[Any], Callable]:
    _check_kinds(model, Ys, (list, tuple))
    ops = model.ops
    lengths = [len(y) for y in Ys[0]]
    for layer, Y in zip(model.layers, Ys):
        if [len(y) for y in Y] != lengths:
            raise ValueError(
                f"Cannot concatenate in model '{model.name}': layer '{model.layers[0].name}' returned "
                f"sequences of lengths {lengths} but layer '{layer.name}' returned {[len(y) for y in Y]}."
            )
    if not lengths:

        def backprop_empty(dY: List[Any]) -> Any:
            dX = None
            for backprop_layer in callbacks:
                dX = _sum_values(dX, backprop_layer([]), model.name)
            return dX

        return [], backprop_empty
    flats = [ops.xp.concatenate(list(Y), axis=0) for Y in Ys]
    _check_rows(model, flats)
    widths = [flat.shape[1] for flat in flats]
    Y = ops.unflatten(ops.xp.concatenate(flats, axis=1), ops.asarray1i(lengths))

    def backprop(dY: List[Any]) -> Any:
        flat = ops.xp.concatenate(list(dY), axis=0)
        return _backprop_columns(
            model, callbacks, widths, flat, lambda d: ops.unflatten(d, ops.asarray1i(lengths))
        )

    return Y, backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    # Rule: every child gets X; Y (whose width is the total) only reaches the children
    # whose nO is not yet set, as in chain, so set widths are never overwritten.
    if X is not None:
        # The width is read only for nodes that have an nI: X may be data that has no width
        # (spaCy passes a list of Docs to a concatenate of feature extractors).
        takers = [node for node in [model, *model.layers] if node.has_dim("nI") is not False]
        if takers:
            width = get_width(X)
            for node in takers:
                node.set_dim("nI", width)
    for layer in model.layers:
        layer.initialize(X=X, Y=Y if layer.has_dim("nO") is not True else None)
    if all(layer.has_dim("nO") for layer in model.layers):
        model.set_dim("nO", sum(layer.get_dim("nO") for layer in model.layers))
