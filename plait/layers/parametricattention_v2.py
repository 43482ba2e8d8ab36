"""ParametricAttention_v2: parametric attention whose keys come from a transform of the input."""
from __future__ import annotations

from typing import Callable, Optional, Tuple

from ..config import registry
from ..model import Model
from ..types import Floats2d, Ragged
from ..util import get_width
from .noop import noop
from .parametricattention import _apply_attention, _attention, _check_width, _init_query

InT = Ragged
OutT = Ragged

KEY_TRANSFORM_REF: str = "key_transform"


@registry.layers("ParametricAttention.v2")
def ParametricAttention_v2(
    *,
    key_transform: Optional[Model[Floats2d, Floats2d]] = None,
    nO: Optional[int] = None,
) -> Model[InT, OutT]:
    """Y[i] = a[i] * X[i], a = softmax over each sequence of key_transform(X) @ Q.

    Ragged (n, nO) -> Ragged (n, nO). key_transform (default noop) must keep the width nO;
    it is the model's only child and its "key_transform" ref. Params: Q (nO,).
    """
    if key_transform is None:
        key_transform = noop()
    return Model(
        "para-attn",
        forward,
        init=init,
        params={"Q": None},
        dims={"nO": nO},
        refs={KEY_TRANSFORM_REF: key_transform},
        layers=[key_transform],
    )


def forward(model: Model[InT, OutT], Xr: InT, is_train: bool) -> Tuple[OutT, Callable]:
    Q = model.get_param("Q")
    key_transform = model.get_ref(KEY_TRANSFORM_REF)
    X = Xr.dataXd
    _check_width(model, X, Q.shape[0])
    K, bp_keys = key_transform(X, is_train=is_train)
    if K.shape != X.shape:
        raise ValueError(
            f"Model '{model.name}': key_transform '{key_transform.name}' must keep the input's shape "
            f"{tuple(X.shape)}, got {tuple(K.shape)}. Give it nO={Q.shape[0]}."
        )
    attention, bp_attention = _attention(model.ops, Q, K, Xr.lengths)
    Y, bp_apply = _apply_attention(attention, X)

    def backprop(dYr: OutT) -> InT:
        dX, d_attention = bp_apply(dYr.dataXd)
        dQ, dK = bp_attention(d_attention)
        model.inc_grad("Q", dQ.ravel())
        dX += bp_keys(dK)
        return Ragged(dX, dYr.lengths)

    return Ragged(Y, Xr.lengths), backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    key_transform = model.get_ref(KEY_TRANSFORM_REF)
    width = get_width(X) if X is not None else None
    if width:
        model.set_dim("nO", width)
        # The keys are compared with Q, so the transform's output must be as wide as X.
        if key_transform.has_dim("nO") is not False:
            key_transform.set_dim("nO", width)
    model.set_param("Q", _init_query(model.ops, model.get_dim("nO")))
    key_transform.initialize(
        X.dataXd if X is not None else None, Y.dataXd if Y is not None else None
    )
