"""remap_ids, remap_ids_v2: map hashable inputs to integer ids through a lookup table."""
from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, Optional, Sequence, Tuple, Union, cast

from ..config import registry
from ..model import Model
from ..types import DTypes, Ints1d, Ints2d
from ..util import is_xp_array, to_numpy

InT = Union[Sequence[Hashable], Ints1d, Ints2d]
OutT = Ints2d

InT_v1 = Sequence[Any]
OutT_v1 = Ints2d

# remap_ids' default table: recognised by identity, and never handed to a model.
_DEFAULT_TABLE: Dict[Any, int] = {}


@registry.layers("remap_ids.v1")
def remap_ids(
    mapping_table: Dict[Any, int] = _DEFAULT_TABLE, default: int = 0, dtype: DTypes = "i"
) -> Model[InT_v1, OutT_v1]:
    """Look each input up in attrs["mapping_table"], `default` when absent.  n items -> (n, 1) ints

    The table may be replaced after creation by writing model.attrs["mapping_table"].
    """
    # A fresh dict per layer, so that editing one layer's default table edits no other.
    table = {} if mapping_table is _DEFAULT_TABLE else mapping_table
    return Model(
        "remap_ids",
        forward,
        attrs={"mapping_table": table, "dtype": dtype, "default": default},
    )


def forward(model: Model[InT_v1, OutT_v1], inputs: InT_v1, is_train: bool) -> Tuple[OutT, Callable]:
    table = model.attrs["mapping_table"]
    default = model.attrs["default"]
    values = [table.get(x, default) for x in _iter_keys(model, inputs)]
    output = model.ops.reshape2i(model.ops.asarray(values, dtype=model.attrs["dtype"]), -1, 1)

    def backprop(dY: OutT_v1) -> InT:
        return []

    return output, backprop


@registry.layers("remap_ids.v2")
def remap_ids_v2(
    mapping_table: Optional[Union[Dict[int, int], Dict[str, int]]] = None,
    default: int = 0,
    *,
    column: Optional[int] = None,
) -> Model[InT, OutT]:
    """Look each input up in attrs["mapping_table"], `default` when absent.  n items -> (n, 1) int32

    Inputs may be a sequence or an array; of a 2d array, only column `column` is read.
    """
    return Model(
        "remap_ids",
        forward_v2,
        attrs={"mapping_table": mapping_table, "default": default, "column": column},
    )


def forward_v2(model: Model[InT, OutT], inputs: InT, is_train: bool) -> Tuple[OutT, Callable]:
    table = model.attrs["mapping_table"]
    if table is None:
        raise ValueError(
            f"Cannot run model '{model.name}': its mapping table is unset. Pass mapping_table=... "
            f"to remap_ids_v2 or set model.attrs['mapping_table'] to a dict first."
        )
    default = model.attrs["default"]
    column = model.attrs["column"]
    array_input = is_xp_array(inputs)
    if array_input:
        keys = to_numpy(_select_column(model, cast(Ints2d, inputs), column))
    else:
        keys = _iter_keys(model, inputs)
    values = [table.get(x, default) for x in keys]
    output = model.ops.reshape2i(model.ops.asarray(values, dtype="int32"), -1, 1)

    def backprop(dY: OutT) -> InT:
        # The inputs are discrete: an array of zeros (for array inputs) marks "no gradient".
        return model.ops.xp.zeros(dY.shape) if array_input else []

    return output, backprop


def _iter_keys(model: Model, inputs: Any) -> Any:
    if isinstance(inputs, (str, bytes)) or not hasattr(inputs, "__iter__"):
        raise TypeError(
            f"Model '{model.name}' expects a sequence of keys, got {type(inputs).__name__}."
        )
    return to_numpy(inputs) if is_xp_array(inputs) else inputs


def _select_column(model: Model, X: Any, column: Optional[int]) -> Any:
    if column is None:
        if X.ndim != 1:
            raise ValueError(
                f"Model '{model.name}' got a {X.ndim}d array of shape {tuple(X.shape)} but has no "
                f"column set. Pass a 1d array, or create the layer with column=... ."
            )
        return X
    if X.ndim != 2:
        raise ValueError(
            f"Model '{model.name}' has column={column} and expects a 2d array, got shape {tuple(X.shape)}."
        )
    if not -X.shape[1] <= column < X.shape[1]:
        raise ValueError(
            f"Model '{model.name}': column {column} is out of range for input with {X.shape[1]} columns."
        )
    return X[:, column]
