"""Embed: look up integer ids in a learned table of vectors."""
from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple, TypeVar, Union, cast

from ..config import registry
from ..initializers import uniform_init
from ..model import Model
from ..types import Floats2d, Ints1d, Ints2d
from ..util import get_width, partial
from .array_getitem import ints_getitem
from .chain import chain

InT = TypeVar("InT", bound=Union[Ints1d, Ints2d])
OutT = Floats2d


@registry.layers("Embed.v1")
def Embed(
    nO: Optional[int] = None,
    nV: Optional[int] = None,
    *,
    column: Optional[int] = None,
    initializer: Optional[Callable] = None,
    dropout: Optional[float] = None,
) -> Model[InT, OutT]:
    """Map each id to row `id` of a table E.  (n,) ints -> (n, nO); (n, k) with column=... -> (n, nO)

    Params: E (nV, nO), initialized with `initializer` (default uniform_init).
    With `column` set, the layer is `ints-getitem>>embed`, which first picks that column.
    """
    attrs: Dict[str, Union[None, int, float]] = {}
    if initializer is None:
        initializer = uniform_init
    if dropout is not None:
        attrs["dropout_rate"] = dropout
    model: Model = Model(
        "embed",
        forward,
        init=partial(init, initializer),
        attrs=attrs,
        dims={"nO": nO, "nV": nV},
        params={"E": None},
    )
    if column is not None:
        model = chain(ints_getitem((slice(0, None), column)), model)
    model.attrs["column"] = column
    return cast(Model[InT, OutT], model)


def forward(model: Model[Ints1d, OutT], ids: Ints1d, is_train: bool) -> Tuple[OutT, Callable]:
    E = cast(Floats2d, model.get_param("E"))
    _check_ids(model, ids, E.shape[0])
    nN = ids.shape[0]
    Y = E[ids]
    # One mask per column, shared by every row (as Thinc does).
    drop_mask = None
    rate = model.attrs.get("dropout_rate")
    if is_train and rate:
        drop_mask = model.ops.get_dropout_mask((E.shape[1],), rate)
        Y *= drop_mask

    def backprop(dY: OutT) -> Ints1d:
        if drop_mask is not None:
            dY = dY * drop_mask
        model._inc_grad_rows("E", ids, dY)
        return model.ops.alloc1i(nN)

    return Y, backprop


def init(
    initializer: Callable,
    model: Model[Ints1d, OutT],
    X: Optional[Ints1d] = None,
    Y: Optional[OutT] = None,
) -> None:
    if Y is not None:
        model.set_dim("nO", get_width(Y))
    shape = (model.get_dim("nV"), model.get_dim("nO"))
    model.set_param("E", initializer(model.ops, shape))


def _check_ids(model: Model, ids, nV: Optional[int]) -> None:
    """Raise a clear error for ids that are not a 1d integer array (inside the table, if nV is given)."""
    if not hasattr(ids, "ndim") or not hasattr(ids, "dtype"):
        raise TypeError(
            f"Model '{model.name}' expects a 1d array of integer ids, got {type(ids).__name__}."
        )
    if ids.dtype.kind not in "iu":
        raise TypeError(
            f"Model '{model.name}' expects integer ids, got an array of dtype {ids.dtype}. "
            f"Cast them with ids.astype('uint64') or build the layer from integer features."
        )
    # An empty batch passes whatever its shape: array_getitem hands an empty (0, k) feature
    # array through unchanged, and Thinc returns E[ids] for it.
    if ids.ndim != 1 and ids.size:
        raise ValueError(
            f"Model '{model.name}' expects a 1d array of ids, got shape {tuple(ids.shape)}. "
            f"For 2d feature arrays, create the layer with column=... to pick the id column."
        )
    if nV is not None and ids.size and (int(ids.max()) >= nV or int(ids.min()) < -nV):
        raise IndexError(
            f"Model '{model.name}' got ids in {int(ids.min())}..{int(ids.max())}, but its table "
            f"has nV={nV} rows. Use ids below nV, or a larger nV (or HashEmbed for unbounded ids)."
        )
