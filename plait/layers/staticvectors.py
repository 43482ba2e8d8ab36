"""StaticVectors: look ids up in a fixed (untrained) vectors table, then project it with W."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple, TypeVar, Union, cast

from ..config import registry
from ..initializers import glorot_uniform_init
from ..model import Model
from ..types import Floats2d, Ints1d, Ints2d, Unserializable
from ..util import get_width
from .array_getitem import ints_getitem
from .chain import chain
from .embed import _check_ids

InT = TypeVar("InT", bound=Union[Ints1d, Ints2d])
OutT = Floats2d


@registry.layers("StaticVectors.v1")
def StaticVectors(
    nO: Optional[int] = None,
    vectors: Optional[Floats2d] = None,
    *,
    column: Optional[int] = None,
    dropout: Optional[float] = None,
) -> Model[InT, OutT]:
    """Y = vectors[ids] @ W.T.  (n,) ids -> (n, nO); (n, k) with column=... -> (n, nO)

    The table lives in attrs["vectors"] (nV, nM) and is never updated; only the projection
    W (nO, nM) is learned. Ids outside the table read row 0. The table may be set after
    creation by writing attrs["vectors"] of the "static_vectors" node, before initialize.
    """
    attrs: Dict[str, Any] = {"column": column, "vectors": vectors}
    if dropout is not None:
        attrs["dropout_rate"] = dropout
    model: Model = Model(
        "static_vectors",
        forward,
        init=init,
        params={"W": None},
        attrs=attrs,
        dims={"nM": None, "nV": None, "nO": nO},
    )
    if column is not None:
        model = chain(ints_getitem((slice(0, None), column)), model)
    model.attrs["column"] = column
    return cast(Model[InT, OutT], model)


def forward(model: Model[Ints1d, OutT], ids: Ints1d, is_train: bool) -> Tuple[OutT, Callable]:
    table = _get_table(model)
    W = cast(Floats2d, model.get_param("W"))
    _check_ids(model, ids, None)
    if table.shape[1] != W.shape[1]:
        raise ValueError(
            f"Model '{model.name}': the vectors table has width {table.shape[1]}, but W expects "
            f"nM={W.shape[1]}. Re-initialize the model after replacing attrs['vectors']."
        )
    nN = ids.shape[0]
    xp = model.ops.xp
    # Out-of-table ids (e.g. unknown words) share row 0.
    rows = xp.where(ids < table.shape[0], ids, 0)
    V = model.ops.as_contig(xp.asarray(table)[rows], dtype=W.dtype)
    Y = model.ops.gemm(V, W, trans2=True)
    drop_mask = None
    rate = model.attrs.get("dropout_rate")
    if is_train and rate:
        drop_mask = model.ops.get_dropout_mask((Y.shape[1],), rate)
        Y *= drop_mask

    def backprop(dY: OutT) -> Ints1d:
        if drop_mask is not None:
            dY = dY * drop_mask
        model._inc_grad_product("W", dY, V, trans1=True)
        return model.ops.alloc1i(nN)

    return Y, backprop


def init(model: Model[Ints1d, OutT], X: Optional[Ints1d] = None, Y: Optional[OutT] = None) -> None:
    table = _get_table(model)
    if Y is not None:
        model.set_dim("nO", get_width(Y))
    nO = model.get_dim("nO")
    # W is re-drawn below, so a table of another shape may replace the old one.
    model.set_param("W", None)
    model.set_dim("nV", table.shape[0], force=True)
    model.set_dim("nM", table.shape[1], force=True)
    model.set_param("W", glorot_uniform_init(model.ops, (nO, table.shape[1])))


def _get_table(model: Model) -> Any:
    table = model.attrs.get("vectors")
    if isinstance(table, Unserializable):
        table = table.obj
    if table is None:
        raise ValueError(
            f"Cannot use model '{model.name}': its vectors table is unset. Pass vectors=... to "
            f"StaticVectors or set model.attrs['vectors'] to a (nV, nM) float array first."
        )
    if getattr(table, "ndim", None) != 2:
        raise ValueError(
            f"Model '{model.name}': attrs['vectors'] must be a 2d (nV, nM) array, got "
            f"{type(table).__name__} with shape {getattr(table, 'shape', None)}."
        )
    return table
