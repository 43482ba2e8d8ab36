"""bidirectional: run one RNN over the sequences and another over them reversed; join the outputs."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from ..backends import Ops
from ..config import registry
from ..model import Model
from ..types import Padded
from .add import _sum_values

InT = Padded
OutT = Padded


@registry.layers("bidirectional.v1")
def bidirectional(l2r: Model[InT, OutT], r2l: Optional[Model[InT, OutT]] = None) -> Model[InT, OutT]:
    """Concatenate l2r(X) and r2l run right-to-left on X, feature-wise.  Padded -> Padded

    At step t, the r2l half holds r2l's output for step t of the reversed sequence,
    mapped back to position t. Without r2l, a copy of l2r (its own weights) is used.
    """
    if not isinstance(l2r, Model):
        raise TypeError(f"Cannot create bidirectional: 'l2r' must be a Model, got {type(l2r).__name__}.")
    if r2l is None:
        r2l = l2r.copy()
    elif not isinstance(r2l, Model):
        raise TypeError(f"Cannot create bidirectional: 'r2l' must be a Model or None, got {type(r2l).__name__}.")
    return Model(f"bi{l2r.name}", forward, init=init, layers=[l2r, r2l])


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    _check_padded(model, X, "input")
    l2r, r2l = model.layers
    ops = model.ops
    Y_l2r, backprop_l2r = l2r(X, is_train)
    Y_r2l_rev, backprop_r2l = r2l(_reverse(ops, X), is_train)
    _check_padded(model, Y_l2r, f"output of '{l2r.name}'")
    _check_padded(model, Y_r2l_rev, f"output of '{r2l.name}'")
    Y_r2l = _reverse(ops, Y_r2l_rev)
    if Y_l2r.data.shape[:-1] != Y_r2l.data.shape[:-1]:
        raise ValueError(
            f"Cannot apply model '{model.name}': '{l2r.name}' returned data of shape {tuple(Y_l2r.data.shape)} "
            f"and '{r2l.name}' returned {tuple(Y_r2l.data.shape)}; all but the last axis must agree."
        )
    width = Y_l2r.data.shape[-1]
    Y = Padded(ops.xp.concatenate((Y_l2r.data, Y_r2l.data), axis=-1), X.size_at_t, X.lengths, X.indices)

    def backprop(dY: OutT) -> InT:
        d_l2r, d_r2l = _split(ops, dY, width)
        dX_l2r = backprop_l2r(d_l2r)
        dX_r2l = _reverse(ops, backprop_r2l(_reverse(ops, d_r2l)))
        return _sum_values(dX_l2r, dX_r2l, model.name)

    return Y, backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    l2r, r2l = model.layers
    Y_l2r = Y_r2l = None
    if Y is not None:
        _check_padded(model, Y, "Y")
        width = Y.data.shape[-1]
        if width % 2:
            raise ValueError(
                f"Cannot initialize model '{model.name}': Y has {width} features, which cannot be split "
                f"evenly between '{l2r.name}' and '{r2l.name}'. Pass a Y with an even width, or none."
            )
        Y_l2r, Y_r2l = _split(model.ops, Y, width // 2)
        Y_r2l = _reverse(model.ops, Y_r2l)
    l2r.initialize(X=X, Y=Y_l2r)
    r2l.initialize(X=_reverse(model.ops, X) if isinstance(X, Padded) else X, Y=Y_r2l)


def _check_padded(model: Model, value: Any, what: str) -> None:
    if not isinstance(value, Padded):
        raise TypeError(
            f"Cannot apply model '{model.name}': the {what} must be Padded, got {type(value).__name__}. "
            f"Wrap the layer with with_padded(...) or convert with list2padded()."
        )


def _reverse(ops: Ops, Xp: Padded) -> Padded:
    """Reverse each sequence within its own length; padding steps stay where they are."""
    xp = ops.xp
    nL, nB = Xp.data.shape[:2]
    lengths = ops.asarray(Xp.lengths).astype("int64")
    steps = xp.arange(nL, dtype="int64")[:, None]
    source = lengths[None, :] - 1 - steps  # (nL, nB)
    source = xp.where(source >= 0, source, steps)
    columns = xp.arange(nB, dtype="int64")[None, :]
    return Padded(Xp.data[source, columns], Xp.size_at_t, Xp.lengths, Xp.indices)


def _split(ops: Ops, Xp: Padded, width: int) -> Tuple[Padded, Padded]:
    first = ops.as_contig(Xp.data[..., :width])
    second = ops.as_contig(Xp.data[..., width:])
    return (
        Padded(first, Xp.size_at_t, Xp.lengths, Xp.indices),
        Padded(second, Xp.size_at_t, Xp.lengths, Xp.indices),
    )
