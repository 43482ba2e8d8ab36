"""with_array: run an array layer on sequence data (list, Ragged, Padded) by concatenating it."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple, TypeVar, Union

import numpy

from ..config import registry
from ..model import Model
from ..types import ArrayXd, ListXd, Padded, Ragged
from ..util import is_xp_array

ArrayTXd = TypeVar("ArrayTXd", bound=ArrayXd)
SeqT = TypeVar("SeqT", bound=Union[Padded, Ragged, ListXd, ArrayXd])


@registry.layers("with_array.v1")
def with_array(layer: Model[ArrayTXd, ArrayTXd], pad: int = 0) -> Model[SeqT, SeqT]:
    """Concatenate sequences into one array for `layer` and split its output back.

    List[(nL_i, ...)] -> (sum nL_i, ...) -> List[(nL_i, ...)]; Ragged uses its dataXd and
    Padded its (nL, nB, ...) data unchanged; an array is passed straight through. `pad`
    zero rows go around each sequence of a list (for layers that look at neighbours).
    """
    _check_layer("with_array", layer)
    return Model(
        f"with_array({layer.name})",
        forward,
        init=init,
        layers=[layer],
        attrs={"pad": pad},
        dims={name: layer.maybe_get_dim(name) for name in layer.dim_names},
    )


def forward(model: Model[SeqT, SeqT], Xseq: SeqT, is_train: bool) -> Tuple[SeqT, Callable]:
    layer = model.layers[0]
    if isinstance(Xseq, Ragged):
        Y, get_dX = layer(Xseq.dataXd, is_train)

        def backprop_ragged(dYr: Ragged) -> Ragged:
            return Ragged(get_dX(dYr.dataXd), dYr.lengths)

        return Ragged(Y, Xseq.lengths), backprop_ragged
    if isinstance(Xseq, Padded):
        Y, get_dX = layer(Xseq.data, is_train)

        def backprop_padded(dYp: Padded) -> Padded:
            return Padded(get_dX(dYp.data), dYp.size_at_t, dYp.lengths, dYp.indices)

        return Padded(Y, Xseq.size_at_t, Xseq.lengths, Xseq.indices), backprop_padded
    if isinstance(Xseq, (list, tuple)):
        return _list_forward(model, Xseq, is_train)
    if is_xp_array(Xseq):
        return layer(Xseq, is_train)
    raise _input_error(model, Xseq)


def _list_forward(model: Model, Xs: Sequence[ArrayXd], is_train: bool) -> Tuple[List[ArrayXd], Callable]:
    """Run model.layers[0] on the concatenation of `Xs`, with model.attrs["pad"] rows around each."""
    layer = model.layers[0]
    pad = model.attrs["pad"]
    if len(Xs) == 0:
        # NOTE: an empty batch concatenates to a (0, 0) array, whose width would clash
        # with the layer's nI, so the layer is not run at all.
        return [], lambda dYs: []
    lengths = numpy.asarray([len(X) for X in Xs], dtype="int32")
    Yf, get_dXf = layer(layer.ops.flatten(Xs, pad=pad), is_train)

    def backprop(dYs: Sequence[ArrayXd]) -> List[ArrayXd]:
        dXf = get_dXf(layer.ops.flatten(dYs, pad=pad))
        return layer.ops.unflatten(dXf, lengths, pad=pad)

    return layer.ops.unflatten(Yf, lengths, pad=pad), backprop


def init(model: Model[SeqT, SeqT], X: Optional[SeqT] = None, Y: Optional[SeqT] = None) -> None:
    layer = model.layers[0]
    layer.initialize(X=_get_array(model, X), Y=_get_array(model, Y))
    _sync_dims(model, layer)


def _get_array(model: Model, X: Any) -> Optional[ArrayXd]:
    if X is None:
        return None
    if isinstance(X, Ragged):
        return X.dataXd
    if isinstance(X, Padded):
        return X.data
    if isinstance(X, (list, tuple)):
        # An empty sample says nothing about the widths, so it must not set any dim.
        return model.ops.flatten(X) if len(X) else None
    if is_xp_array(X):
        return X
    raise _input_error(model, X)


def _sync_dims(model: Model, layer: Model) -> None:
    """Copy the dims the wrapped layer now knows onto the wrapper (same names)."""
    for name in layer.dim_names:
        value = layer.maybe_get_dim(name)
        if value is not None and model.has_dim(name) is not False:
            model.set_dim(name, value)


def _check_layer(where: str, layer: Any) -> None:
    if not isinstance(layer, Model):
        raise TypeError(f"{where}: the layer to wrap must be a Model, got {type(layer).__name__} ({layer!r}).")


def _input_error(model: Model, X: Any) -> TypeError:
    return TypeError(
        f"Model '{model.name}' cannot take input of type {type(X).__name__}: expected a list of "
        f"arrays, Ragged, Padded or an array."
    )
