"""HashEmbed: embed unbounded integer keys with the hashing trick."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple, TypeVar, Union, cast

from ..config import registry
from ..initializers import uniform_init
from ..model import Model
from ..types import Floats2d, Ints1d, Ints2d
from ..util import partial
from .array_getitem import ints_getitem
from .chain import chain
from .embed import _check_ids

InT = TypeVar("InT", bound=Union[Ints1d, Ints2d])
OutT = Floats2d


@registry.layers("HashEmbed.v1")
def HashEmbed(
    nO: int,
    nV: int,
    *,
    seed: Optional[int] = None,
    column: Optional[int] = None,
    initializer: Optional[Callable] = None,
    dropout: Optional[float] = None,
) -> Model[InT, OutT]:
    """Sum four rows of a table E picked by four hashes of each key.  (n,) keys -> (n, nO)

    Each key is hashed with MurmurHash3 (seed `seed`, the model id when None) into four
    32-bit words; each word modulo nV picks a row. Distinct keys rarely collide on all
    four rows, so a small table still tells most keys apart.
    Params: E (nV, nO), initialized with `initializer` (default uniform_init).
    """
    attrs: Dict[str, Any] = {"column": column, "seed": seed}
    if initializer is None:
        initializer = uniform_init
    if dropout is not None:
        attrs["dropout_rate"] = dropout
    model: Model = Model(
        "hashembed",
        forward,
        init=partial(init, initializer),
        params={"E": None},
        dims={"nO": nO, "nV": nV, "nI": None},
        attrs=attrs,
    )
    if seed is None:
        model.attrs["seed"] = model.id
    if column is not None:
        model = chain(ints_getitem((slice(0, None), column)), model)
    model.attrs["column"] = column
    return cast(Model[InT, OutT], model)


def forward(model: Model[Ints1d, OutT], ids: Ints1d, is_train: bool) -> Tuple[OutT, Callable]:
    E = cast(Floats2d, model.get_param("E"))
    _check_ids(model, ids, None)
    nV, nO = E.shape
    nN = ids.shape[0]
    if nN == 0:
        def backprop_empty(dY: OutT) -> Ints1d:
            return model.ops.alloc1i(0)

        return model.ops.alloc2f(0, nO, dtype=E.dtype), backprop_empty
    # NOTE: signed ids are reinterpreted as uint64 (two's complement), which is what
    # Thinc hashes, so negative ids pick the same rows in both.
    keys = model.ops.hash(model.ops.as_contig(ids, dtype="uint64"), model.attrs["seed"]) % nV
    Y = model.ops.gather_add(E, keys)
    drop_mask = None
    rate = model.attrs.get("dropout_rate")
    if is_train and rate:
        drop_mask = model.ops.get_dropout_mask((nO,), rate)
        Y *= drop_mask

    def backprop(dY: OutT) -> Ints1d:
        if drop_mask is not None:
            dY = dY * drop_mask
        # Every row of dY goes to each of its token's rows: (nN, 1, nO) values broadcast over
        # the (nN, nK) keys.
        model._inc_grad_rows("E", keys, dY.reshape((nN, 1, nO)))
        return model.ops.alloc1i(nN)

    return Y, backprop


def init(
    initializer: Callable,
    model: Model[Ints1d, OutT],
    X: Optional[Ints1d] = None,
    Y: Optional[OutT] = None,
) -> None:
    model.set_param("E", initializer(model.ops, (model.get_dim("nV"), model.get_dim("nO"))))
