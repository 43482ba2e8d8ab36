"""with_array2d: run a 2d-array layer on sequence data (list, Ragged, Padded)."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple, TypeVar, Union

from ..config import registry
from ..model import Model
from ..types import Array2d, List2d, Padded, Ragged
from ..util import is_xp_array
from .with_array import _check_layer, _input_error, _list_forward, _sync_dims

ValT = TypeVar("ValT", bound=Array2d)
SeqT = TypeVar("SeqT", bound=Union[Padded, Ragged, List2d, Array2d])


@registry.layers("with_array2d.v1")
def with_array2d(layer: Model[ValT, ValT], pad: int = 0) -> Model[SeqT, SeqT]:
    """Like with_array, but the layer always sees a 2d array.

    Padded (nL, nB, nI) is merged to (nL * nB, nI) and split back; Ragged uses its 2d data;
    lists are concatenated (with `pad` zero rows around each); an array passes through.
    The node is named "with_array(...)", as in Thinc.
    """
    _check_layer("with_array2d", layer)
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
        Y, get_dX = layer(Xseq.data, is_train)
        x_shape = Xseq.dataXd.shape

        def backprop_ragged(dYr: Ragged) -> Ragged:
            return Ragged(get_dX(dYr.data).reshape(x_shape), dYr.lengths)

        return Ragged(Y, Xseq.lengths), backprop_ragged
    if isinstance(Xseq, Padded):
        nL, nB = Xseq.data.shape[:2]
        Y2d, get_dX = layer(_merge_axes(model, Xseq.data), is_train)
        Y = model.ops.reshape(Y2d, (nL, nB, Y2d.shape[1]))  # (nL, nB, nO)

        def backprop_padded(dYp: Padded) -> Padded:
            dX2d = get_dX(_merge_axes(model, dYp.data))
            dX = model.ops.reshape(dX2d, (nL, nB, dX2d.shape[1]))  # (nL, nB, nI)
            return Padded(dX, dYp.size_at_t, dYp.lengths, dYp.indices)

        return Padded(Y, Xseq.size_at_t, Xseq.lengths, Xseq.indices), backprop_padded
    if isinstance(Xseq, (list, tuple)):
        return _list_forward(model, Xseq, is_train)
    if is_xp_array(Xseq):
        return layer(Xseq, is_train)
    raise _input_error(model, Xseq)


def init(model: Model[SeqT, SeqT], X: Optional[SeqT] = None, Y: Optional[SeqT] = None) -> None:
    layer = model.layers[0]
    layer.initialize(X=_get_array(model, X), Y=_get_array(model, Y))
    _sync_dims(model, layer)


def _merge_axes(model: Model, data: Any) -> Array2d:
    """(nL, nB, nF) -> (nL * nB, nF)"""
    if data.ndim != 3:
        raise ValueError(
            f"Model '{model.name}' expects Padded data of shape (nL, nB, nF), got shape {tuple(data.shape)}."
        )
    return model.ops.reshape(data, (data.shape[0] * data.shape[1], data.shape[2]))


def _get_array(model: Model, X: Any) -> Optional[Array2d]:
    if X is None:
        return None
    if isinstance(X, Ragged):
        return X.data
    if isinstance(X, Padded):
        return _merge_axes(model, X.data)
    if isinstance(X, (list, tuple)):
        return model.ops.flatten(X) if len(X) else None
    if is_xp_array(X):
        return X
    raise _input_error(model, X)
