"""with_padded: run a Padded -> Padded layer on lists, Ragged, arrays or Padded tuples too."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple, TypeVar, Union, cast

import numpy

from ..config import registry
from ..model import Model
from ..types import Floats3d, Ints1d, List2d, Padded, Ragged
from ..util import is_xp_array
from .with_array import _check_layer, _sync_dims

PaddedData = Tuple[Floats3d, Ints1d, Ints1d, Ints1d]
SeqT = TypeVar("SeqT", bound=Union[Padded, Ragged, List2d, Floats3d, PaddedData])


@registry.layers("with_padded.v1")
def with_padded(layer: Model[Padded, Padded]) -> Model[SeqT, SeqT]:
    """Give `layer` a Padded batch whatever the batch format, and convert its output back.

    Accepts Padded, Ragged, a list of (nL_i, nF) arrays, a (data, size_at_t, lengths,
    indices) tuple, or a time-major (nL, nB, nF) array of equal-length sequences.
    """
    _check_layer("with_padded", layer)
    return Model(
        f"with_padded({layer.name})",
        forward,
        init=init,
        layers=[layer],
        dims={name: layer.maybe_get_dim(name) for name in layer.dim_names},
    )


def forward(model: Model[SeqT, SeqT], Xseq: SeqT, is_train: bool) -> Tuple[SeqT, Callable]:
    layer = model.layers[0]
    ops = layer.ops
    if isinstance(Xseq, Padded):
        return layer(Xseq, is_train)
    if isinstance(Xseq, Ragged):
        fast = _unpadded(layer, Xseq.dataXd, Xseq.lengths, is_train)
        if fast is not None:
            Y, get_dX = fast

            def backprop_unpadded(dYr: Ragged) -> Ragged:
                if not numpy.array_equal(numpy.asarray(dYr.lengths), numpy.asarray(Xseq.lengths)):
                    raise ValueError(
                        f"Model '{model.name}': backprop expects a Ragged gradient with the "
                        f"output's lengths {numpy.asarray(Xseq.lengths)[:10].tolist()}, got "
                        f"{numpy.asarray(dYr.lengths)[:10].tolist()}."
                    )
                return Ragged(get_dX(dYr.dataXd), dYr.lengths)

            return cast(SeqT, Ragged(Y, Xseq.lengths)), backprop_unpadded
        Yp, get_dXp = layer(ops.list2padded(ops.unflatten(Xseq.dataXd, Xseq.lengths)), is_train)

        def backprop_ragged(dYr: Ragged) -> Ragged:
            dXp = get_dXp(ops.list2padded(ops.unflatten(dYr.dataXd, dYr.lengths)))
            return Ragged(ops.flatten(ops.padded2list(dXp)), dYr.lengths)

        return cast(SeqT, Ragged(ops.flatten(ops.padded2list(Yp)), Xseq.lengths)), backprop_ragged
    if _is_padded_data(Xseq):
        Yp, get_dXp = layer(Padded(*Xseq), is_train)

        def backprop_tuple(dY: PaddedData) -> PaddedData:
            dXp = get_dXp(Padded(*dY))
            return (dXp.data, dXp.size_at_t, dXp.lengths, dXp.indices)

        return cast(SeqT, (Yp.data, Yp.size_at_t, Yp.lengths, Yp.indices)), backprop_tuple
    if is_xp_array(Xseq):
        Xp = _array_to_padded(model, Xseq)
        Yp, get_dXp = layer(Xp, is_train)

        def backprop_array(dY: Floats3d) -> Floats3d:
            return get_dXp(Padded(dY, Xp.size_at_t, Xp.lengths, Xp.indices)).data

        return cast(SeqT, Yp.data), backprop_array
    if isinstance(Xseq, (list, tuple)):
        if len(Xseq) == 0:
            return cast(SeqT, []), lambda dYs: []
        fast = _unpadded_list(layer, Xseq, is_train)
        if fast is not None:
            return fast
        Yp, get_dXp = layer(ops.list2padded(list(Xseq)), is_train)

        def backprop_list(dYs: List2d) -> List2d:
            return ops.padded2list(get_dXp(ops.list2padded(list(dYs))))

        return cast(SeqT, ops.padded2list(Yp)), backprop_list
    raise TypeError(
        f"Model '{model.name}' cannot take input of type {type(Xseq).__name__}: expected Padded, "
        f"Ragged, a list of 2d arrays, a (data, size_at_t, lengths, indices) tuple or a 3d array."
    )


def _unpadded(layer: Model, data: Any, lengths: Any, is_train: bool) -> Optional[Tuple[Any, Callable]]:
    """The layer on rows back to back, or None for the Padded path.

    A layer whose forward function has an `unpadded(model, data, lengths, is_train)` (plait's
    LSTM: lstm.forward_unpadded) computes on rows packed step by step, so the padded batch in
    between would only be a copy of them with zeros; it returns None where it wants the
    Padded path. A layer given another forward (replace_callbacks) takes the Padded path.
    """
    unpadded = getattr(layer._func, "unpadded", None)
    return None if unpadded is None else unpadded(layer, data, lengths, is_train)


def _unpadded_list(layer: Model, Xs: Any, is_train: bool) -> Optional[Tuple[Any, Callable]]:
    """The list case of _unpadded: 2d numpy arrays of one dtype and width, outputs as views
    of one array in the input's order."""
    first = Xs[0]
    if getattr(layer._func, "unpadded", None) is None or not all(
        isinstance(x, numpy.ndarray) and x.ndim == 2 and x.dtype == first.dtype and x.shape[1:] == first.shape[1:]
        for x in Xs
    ):
        return None
    lengths = [x.shape[0] for x in Xs]
    fast = _unpadded(layer, numpy.concatenate(Xs) if len(Xs) > 1 else first, lengths, is_train)
    if fast is None:
        return None
    Y, get_dX = fast
    cuts = numpy.cumsum(lengths)[:-1]

    def backprop_list(dYs: List2d) -> List2d:
        if len(dYs) != len(lengths) or any(getattr(dY, "shape", (None,))[0] != n for dY, n in zip(dYs, lengths)):
            raise ValueError(
                f"Model '{layer.name}': backprop expects one gradient per sequence, with "
                f"{lengths[:10]}{'...' if len(lengths) > 10 else ''} rows, got "
                f"{len(dYs)} of {[getattr(dY, 'shape', None) for dY in dYs[:10]]}."
            )
        dY = numpy.concatenate(dYs) if len(dYs) > 1 else dYs[0]
        return cast(List2d, numpy.split(get_dX(dY), cuts))

    return cast(List2d, numpy.split(Y, cuts)), backprop_list


def init(model: Model[SeqT, SeqT], X: Optional[SeqT] = None, Y: Optional[SeqT] = None) -> None:
    layer = model.layers[0]
    layer.initialize(X=_get_padded(model, X), Y=_get_padded(model, Y))
    _sync_dims(model, layer)


def _is_padded_data(seq: Any) -> bool:
    return isinstance(seq, tuple) and len(seq) == 4 and all(is_xp_array(x) for x in seq)


def _array_to_padded(model: Model, X: Any) -> Padded:
    """Padded metadata for (nL, nB, nF) data in which every sequence runs the full nL steps."""
    if X.ndim != 3:
        raise ValueError(
            f"Model '{model.name}' expects an array input of shape (nL, nB, nF), got shape {tuple(X.shape)}."
        )
    nL, nB = X.shape[:2]
    ops = model.ops
    return Padded(X, ops.asarray1i([nB] * nL), ops.asarray1i([nL] * nB), ops.asarray1i(list(range(nB))))


def _get_padded(model: Model, seq: Any) -> Optional[Padded]:
    if seq is None:
        return None
    if isinstance(seq, Padded):
        return seq
    if isinstance(seq, Ragged):
        return model.ops.list2padded(model.ops.unflatten(seq.dataXd, seq.lengths))
    if _is_padded_data(seq):
        return Padded(*seq)
    if is_xp_array(seq):
        return _array_to_padded(model, seq)
    if isinstance(seq, (list, tuple)):
        return model.ops.list2padded(list(seq)) if len(seq) else None
    raise TypeError(
        f"Model '{model.name}' cannot initialize from {type(seq).__name__}: expected Padded, Ragged, "
        f"a list of 2d arrays, a (data, size_at_t, lengths, indices) tuple or a 3d array."
    )
