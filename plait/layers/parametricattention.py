"""ParametricAttention: weight each row of a sequence by its softmax similarity to a learned vector."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from ..config import registry
from ..model import Model
from ..types import Ragged
from ..util import get_width

InT = Ragged
OutT = Ragged


@registry.layers("ParametricAttention.v1")
def ParametricAttention(nO: Optional[int] = None) -> Model[InT, OutT]:
    """Y[i] = a[i] * X[i], a = softmax over each sequence of X @ Q.  Ragged (n, nO) -> Ragged (n, nO)

    Params: Q (nO,), drawn uniformly from [-0.1, 0.1) (Yang et al., 2016).
    """
    return Model("para-attn", forward, init=init, params={"Q": None}, dims={"nO": nO})


def forward(model: Model[InT, OutT], Xr: InT, is_train: bool) -> Tuple[OutT, Callable]:
    Q = model.get_param("Q")
    X = Xr.dataXd
    _check_width(model, X, Q.shape[0])
    attention, bp_attention = _attention(model.ops, Q, X, Xr.lengths)
    Y, bp_apply = _apply_attention(attention, X)

    def backprop(dYr: OutT) -> InT:
        dX, d_attention = bp_apply(dYr.dataXd)
        dQ, dK = bp_attention(d_attention)
        model.inc_grad("Q", dQ.ravel())
        dX += dK
        return Ragged(dX, dYr.lengths)

    return Ragged(Y, Xr.lengths), backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    if X is not None:
        model.set_dim("nO", get_width(X))
    model.set_param("Q", _init_query(model.ops, model.get_dim("nO")))


def _init_query(ops: Any, nO: int) -> Any:
    # Drawn like an embedding row, from the backend's global generator as in Thinc.
    Q = ops.alloc1f(nO)
    Q += ops.xp.random.uniform(-0.1, 0.1, Q.shape)
    return Q


def _check_width(model: Model, X: Any, nO: int) -> None:
    if X.ndim != 2 or X.shape[1] != nO:
        raise ValueError(
            f"Model '{model.name}' expects Ragged data of shape (n, {nO}) (nO={nO}), got "
            f"{tuple(X.shape)}. Initialize the model on sample data of the right width."
        )


def _attention(ops: Any, Q: Any, K: Any, lengths: Any) -> Tuple[Any, Callable]:
    """Softmax over each sequence of the keys' scores K @ Q: (n, nO) -> (n, 1)."""
    attention = ops.softmax_sequences(ops.gemm(K, ops.reshape2f(Q, -1, 1)), lengths)

    def backprop_attention(d_attention: Any) -> Tuple[Any, Any]:
        d_scores = ops.backprop_softmax_sequences(d_attention, attention, lengths)
        dQ = ops.gemm(K, d_scores, trans1=True)
        dK = ops.xp.outer(d_scores, Q)
        return dQ, dK

    return attention, backprop_attention


def _apply_attention(attention: Any, X: Any) -> Tuple[Any, Callable]:
    Y = X * attention

    def backprop_apply(dY: Any) -> Tuple[Any, Any]:
        return dY * attention, (X * dY).sum(axis=1, keepdims=True)

    return Y, backprop_apply
