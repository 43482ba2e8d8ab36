"""with_list: run a layer over a list of arrays on Padded or Ragged data too."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple, TypeVar, cast

from ..config import registry
from ..model import Model
from ..types import Floats2d, Ints2d, List2d, Padded, Ragged
from .with_array import _check_layer, _sync_dims

SeqT = TypeVar("SeqT", Padded, Ragged, List2d, List[Floats2d], List[Ints2d])


@registry.layers("with_list.v1")
def with_list(layer: Model[List2d, List2d]) -> Model[SeqT, SeqT]:
    """Give `layer` a list of (nL_i, nF) arrays whatever the batch format, and convert back.

    Padded and Ragged are unpacked into their sequences (in the original order); lists pass
    straight through.
    """
    _check_layer("with_list", layer)
    return Model(
        f"with_list({layer.name})",
        forward,
        init=init,
        layers=[layer],
        dims={name: layer.maybe_get_dim(name) for name in layer.dim_names},
    )


def forward(model: Model[SeqT, SeqT], Xseq: SeqT, is_train: bool) -> Tuple[SeqT, Callable]:
    layer = model.layers[0]
    ops = layer.ops
    if isinstance(Xseq, Padded):
        Ys, get_dXs = layer(ops.padded2list(Xseq), is_train)

        def backprop_padded(dYp: Padded) -> Padded:
            return ops.list2padded(get_dXs(ops.padded2list(dYp)))

        return cast(SeqT, ops.list2padded(Ys)), backprop_padded
    if isinstance(Xseq, Ragged):
        Ys, get_dXs = layer(ops.unflatten(Xseq.dataXd, Xseq.lengths), is_train)

        def backprop_ragged(dYr: Ragged) -> Ragged:
            return Ragged(ops.flatten(get_dXs(ops.unflatten(dYr.dataXd, dYr.lengths))), dYr.lengths)

        return cast(SeqT, Ragged(ops.flatten(Ys), Xseq.lengths)), backprop_ragged
    return layer(Xseq, is_train)


def init(model: Model[SeqT, SeqT], X: Optional[SeqT] = None, Y: Optional[SeqT] = None) -> None:
    layer = model.layers[0]
    layer.initialize(X=_get_list(model, X), Y=_get_list(model, Y))
    _sync_dims(model, layer)


def _get_list(model: Model, seq: Any) -> Any:
    if isinstance(seq, Padded):
        return model.ops.padded2list(seq)
    if isinstance(seq, Ragged):
        return model.ops.unflatten(seq.dataXd, seq.lengths)
    return seq
