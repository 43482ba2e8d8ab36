"""strings2arrays: hash each string of each sequence into a (n, 1) uint64 column."""
from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

import numpy

from ..backends._murmur import murmur3_x86_32_bytes
from ..config import registry
from ..model import Model
from ..types import Ints2d

InT = Sequence[Sequence[str]]
OutT = List[Ints2d]


@registry.layers("strings2arrays.v1")
def strings2arrays() -> Model[InT, OutT]:
    """[["a", "b"], ["c"]] -> [uint64 (2, 1), uint64 (1, 1)] of string hashes; no gradient."""
    return Model("strings2arrays", forward)


def forward(model: Model[InT, OutT], Xs: InT, is_train: bool) -> Tuple[OutT, Callable]:
    encoded: List[bytes] = []
    ends = []
    for i, X in enumerate(Xs):
        # NOTE: a str item is a sequence of one-character strings, and is hashed as such (as
        # Thinc does): ["hello"] gives one (5, 1) array.
        for word in X:
            if not isinstance(word, str):
                raise TypeError(
                    f"Cannot apply model '{model.name}': expected str tokens, got "
                    f"{type(word).__name__} ({word!r})."
                )
            encoded.append(word.encode("utf8"))
        ends.append(len(encoded))
    # One hash call for the whole batch, then a column per sequence.
    keys = model.ops.xp.asarray(_string_keys(encoded)).reshape((-1, 1))
    arrays = [keys[start:end] for start, end in zip([0] + ends[:-1], ends)]

    def backprop(dYs: OutT) -> InT:
        return []

    return arrays, backprop


def _string_keys(encoded: List[bytes]) -> numpy.ndarray:
    """MurmurHash3 x86 32-bit (seed 0) of each UTF-8 string, read as a signed int32, wrapped to uint64.

    The signed-then-wrapped reading makes the keys identical to those Thinc (and so
    spaCy-trained tables) produce: negative hashes have their top 32 bits set.
    """
    hashes = murmur3_x86_32_bytes(encoded, 0)
    return hashes.view(numpy.int32).astype(numpy.int64).view(numpy.uint64)
