"""with_ragged: run a Ragged -> Ragged layer on lists, Padded or (data, lengths) tuples too."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple, TypeVar, Union, cast

import numpy

from ..config import registry
from ..model import Model
from ..types import Array2d, Ints1d, ListXd, Padded, Ragged
from ..util import is_xp_array
from .with_array import _check_layer

RaggedData = Tuple[Array2d, Ints1d]
SeqT = TypeVar("SeqT", bound=Union[Padded, Ragged, ListXd, RaggedData])


@registry.layers("with_ragged.v1")
def with_ragged(layer: Model[Ragged, Ragged]) -> Model[SeqT, SeqT]:
    """Give `layer` a Ragged batch whatever the batch format, and convert its output back.

    Accepts Ragged, Padded, a list of (nL_i, ...) arrays or a (data, lengths) tuple.
    """
    _check_layer("with_ragged", layer)
    # NOTE: no dims, unlike the other sequence wrappers: Thinc's node has none, and the
    # node's dims are part of the serialized tree.
    return Model(f"with_ragged({layer.name})", forward, init=init, layers=[layer])


def forward(model: Model[SeqT, SeqT], Xseq: SeqT, is_train: bool) -> Tuple[SeqT, Callable]:
    layer = model.layers[0]
    ops = layer.ops
    if isinstance(Xseq, Ragged):
        return layer(Xseq, is_train)
    if isinstance(Xseq, Padded):
        Xs = ops.padded2list(Xseq)
        # Host-side lengths: unflatten reads them on the CPU anyway.
        lengths = numpy.asarray([len(X) for X in Xs], dtype="int32")
        Yr, get_dXr = layer(Ragged(ops.flatten(Xs), ops.asarray1i(lengths)), is_train)

        def backprop_padded(dYp: Padded) -> Padded:
            dXr = get_dXr(Ragged(ops.flatten(ops.padded2list(dYp)), ops.asarray1i(lengths)))
            return ops.list2padded(ops.unflatten(dXr.dataXd, lengths))

        return cast(SeqT, ops.list2padded(ops.unflatten(Yr.dataXd, Yr.lengths))), backprop_padded
    if _is_ragged_data(Xseq):
        Yr, get_dXr = layer(Ragged(*Xseq), is_train)

        def backprop_tuple(dY: RaggedData) -> RaggedData:
            dXr = get_dXr(Ragged(*dY))
            return (dXr.dataXd, dXr.lengths)

        return cast(SeqT, (Yr.dataXd, Yr.lengths)), backprop_tuple
    if isinstance(Xseq, (list, tuple)):
        if len(Xseq) == 0:
            return cast(SeqT, []), lambda dYs: []
        lengths = numpy.asarray([len(X) for X in Xseq], dtype="int32")
        Yr, get_dXr = layer(Ragged(ops.flatten(Xseq), ops.asarray1i(lengths)), is_train)

        def backprop_list(dYs: ListXd) -> ListXd:
            dXr = get_dXr(Ragged(ops.flatten(dYs), ops.asarray1i(lengths)))
            return ops.unflatten(dXr.dataXd, lengths)

        return cast(SeqT, ops.unflatten(Yr.dataXd, Yr.lengths)), backprop_list
    raise TypeError(
        f"Model '{model.name}' cannot take input of type {type(Xseq).__name__}: expected Ragged, "
        f"Padded, a list of arrays or a (data, lengths) tuple."
    )


def init(model: Model[SeqT, SeqT], X: Optional[SeqT] = None, Y: Optional[SeqT] = None) -> None:
    model.layers[0].initialize(X=_get_ragged(model, X), Y=_get_ragged(model, Y))


def _is_ragged_data(seq: Any) -> bool:
    # A 2-tuple whose second item is 1d integer lengths; any other tuple is a list of sequences.
    return (
        isinstance(seq, tuple)
        and len(seq) == 2
        and is_xp_array(seq[0])
        and is_xp_array(seq[1])
        and seq[1].ndim == 1
        and seq[1].dtype.kind in "iu"
    )


def _get_ragged(model: Model, seq: Any) -> Optional[Ragged]:
    if seq is None:
        return None
    ops = model.ops
    if isinstance(seq, Ragged):
        return seq
    if isinstance(seq, Padded):
        Xs: List[Any] = ops.padded2list(seq)
        return Ragged(ops.flatten(Xs), ops.asarray1i([len(X) for X in Xs]))
    if _is_ragged_data(seq):
        return Ragged(*seq)
    if isinstance(seq, (list, tuple)):
        if len(seq) == 0:
            return None
        return Ragged(ops.flatten(seq), ops.asarray1i([len(X) for X in seq]))
    raise TypeError(
        f"Model '{model.name}' cannot initialize from {type(seq).__name__}: expected Ragged, Padded, "
        f"a list of arrays or a (data, lengths) tuple."
    )
