"""strings2arrays: hash each string of each sequence into a (n, 1) uint64 column."""
from __future__ import annotations

import functools
import struct
from typing import Callable, List, Sequence, Tuple

from ..config import registry
from ..model import Model
from ..types import Ints2d

InT = Sequence[Sequence[str]]
OutT = List[Ints2d]

_MASK32 = 0xFFFFFFFF


@registry.layers("strings2arrays.v1")
def strings2arrays() -> Model[InT, OutT]:
    """[["a", "b"], ["c"]] -> [uint64 (2, 1), uint64 (1, 1)] of string hashes; no gradient."""
    return Model("strings2arrays", forward)


def forward(model: Model[InT, OutT], Xs: InT, is_train: bool) -> Tuple[OutT, Callable]:
    arrays = []
    for i, X in enumerate(Xs):
        if isinstance(X, str):
            raise TypeError(
                f"Cannot apply model '{model.name}': item {i} is a str ({X!r}), not a sequence of strings. "
                f"Pass a list of token lists, e.g. [['hello', 'world']]."
            )
        hashes = [_hash_string(model, word) for word in X]
        column = model.ops.xp.asarray(hashes, dtype="uint64").reshape((-1, 1))
        arrays.append(column)

    def backprop(dYs: OutT) -> InT:
        return []

    return arrays, backprop


def _hash_string(model: Model, word: str) -> int:
    if not isinstance(word, str):
        raise TypeError(
            f"Cannot apply model '{model.name}': expected str tokens, got {type(word).__name__} ({word!r})."
        )
    return _string_key(word)


@functools.lru_cache(maxsize=1 << 16)
def _string_key(word: str) -> int:
    """MurmurHash3 x86 32-bit (seed 0) of the UTF-8 bytes, read as a signed int32, wrapped to uint64.

    The signed-then-wrapped reading makes the keys identical to those Thinc (and so
    spaCy-trained tables) produce: negative hashes have their top 32 bits set.
    """
    value = _murmur3_32(word.encode("utf8"))
    return value if value < 0x80000000 else value + 0xFFFFFFFF00000000


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3_x86_32 as an unsigned 32-bit int."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _MASK32
    n_blocks = len(data) // 4
    for k in struct.unpack_from(f"<{n_blocks}I", data):
        k = _rotl32((k * c1) & _MASK32, 15)
        h ^= (k * c2) & _MASK32
        h = (_rotl32(h, 13) * 5 + 0xE6546B64) & _MASK32
    tail = data[4 * n_blocks :]
    if tail:
        k = int.from_bytes(tail, "little")
        k = _rotl32((k * c1) & _MASK32, 15)
        h ^= (k * c2) & _MASK32
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h
