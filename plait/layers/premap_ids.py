"""premap_ids: map integer ids to integer ids through a fixed table (a fast remap_ids)."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple, Union, cast

import numpy

from ..config import registry
from ..model import Model
from ..types import Ints1d, Ints2d
from ..util import to_numpy

InT = Union[Ints1d, Ints2d]
OutT = Ints2d


@registry.layers("premap_ids.v1")
def premap_ids(
    mapping_table: Mapping[int, int],
    default: int = 0,
    *,
    column: Optional[int] = None,
) -> Model[InT, OutT]:
    """Replace each id by mapping_table[id], `default` when absent.  (n,) or (n, k) -> (n, 1) int32

    Of 2d input, only column `column` is read. The table is held in attrs["mapping_table"]
    as an int -> int map that, like Thinc's, is not saved by to_bytes/to_disk.
    """
    for key, value in mapping_table.items():
        if not (isinstance(key, int) and isinstance(value, int)):
            raise ValueError(
                "premap_ids: mapping_table must be a Mapping[int, int], but it maps "
                f"{key!r} ({type(key).__name__}) to {value!r} ({type(value).__name__})."
            )
    return Model(
        "premap_ids",
        forward,
        attrs={"mapping_table": _IntMap(mapping_table), "default": default, "column": column},
    )


def forward(model: Model[InT, OutT], inputs: InT, is_train: bool) -> Tuple[OutT, Callable]:
    table = model.attrs["mapping_table"]
    default = model.attrs["default"]
    column = model.attrs["column"]
    if not hasattr(inputs, "ndim") or inputs.dtype.kind not in "iu":
        raise TypeError(
            f"Model '{model.name}' expects an integer array, got {type(inputs).__name__}"
            f"{f' of dtype {inputs.dtype}' if hasattr(inputs, 'dtype') else ''}."
        )
    if column is not None:
        if inputs.ndim != 2:
            raise ValueError(
                f"Model '{model.name}' has column={column} and expects a 2d array, got shape "
                f"{tuple(inputs.shape)}."
            )
        inputs = inputs[:, column]
    elif inputs.ndim != 1:
        raise ValueError(
            f"Model '{model.name}' got a {inputs.ndim}d array of shape {tuple(inputs.shape)} but has "
            f"no column set. Pass a 1d array, or create the layer with column=... ."
        )
    # The table lives on the CPU: look up there, then move the result to the backend.
    result = _lookup(table, to_numpy(inputs), default)
    output = model.ops.reshape2i(model.ops.asarray(result, dtype="int32"), -1, 1)

    def backprop(dY: OutT) -> InT:
        # The inputs are discrete: zeros mark "no gradient".
        return model.ops.xp.zeros(dY.shape)

    return output, backprop


def _lookup(table: Any, keys: Any, default: int) -> Any:
    if isinstance(table, _IntMap):
        return table.lookup(keys, default)
    # A table set by hand (e.g. a plain dict): look up key by key.
    return numpy.asarray([_get(table, int(key), default) for key in keys], dtype="int64")


def _get(table: Any, key: int, default: int) -> int:
    value = table.get(key) if hasattr(table, "get") else table[key]
    return default if value is None else value


class _IntMap:
    """An int -> int map with a vectorized lookup; deliberately not msgpack-serializable.

    Like Thinc's PreshMap, `m[key]` is None for a missing key.
    """

    __slots__ = ("_data", "_sorted")

    def __init__(self, items: Union[Mapping[int, int], None] = None) -> None:
        self._data: Dict[int, int] = dict(items or {})
        self._sorted: Optional[Tuple[Any, Any]] = None

    def __getitem__(self, key: int) -> Optional[int]:
        return self._data.get(key)

    def __setitem__(self, key: int, value: int) -> None:
        self._data[key] = value
        self._sorted = None

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[int]:
        return iter(self._data)

    def get(self, key: int, default: Optional[int] = None) -> Optional[int]:
        return self._data.get(key, default)

    def items(self) -> Any:
        return self._data.items()

    def keys(self) -> Any:
        return self._data.keys()

    def values(self) -> Any:
        return self._data.values()

    def lookup(self, keys: Any, default: int) -> Any:
        """Values of a 1d integer array of keys (`default` where absent), as int64."""
        if self._sorted is None:
            # Keys are compared as uint64 bit patterns: Thinc's table holds uint64 keys, and
            # signed inputs are read with the same two's-complement bits.
            ks = numpy.asarray([k & _MASK64 for k in self._data.keys()], dtype="uint64")
            vs = numpy.asarray(list(self._data.values()), dtype="int64")
            order = numpy.argsort(ks, kind="stable")
            self._sorted = (ks[order], vs[order])
        ks, vs = self._sorted
        keys = numpy.asarray(keys)
        out = numpy.full(keys.shape, default, dtype="int64")
        if not ks.size or not keys.size:
            return out
        if keys.dtype != numpy.uint64:
            keys = keys.astype("int64").view("uint64")
        pos = numpy.minimum(numpy.searchsorted(ks, keys), ks.size - 1)
        found = ks[pos] == keys
        out[found] = vs[pos[found]]
        return out


_MASK64 = (1 << 64) - 1
