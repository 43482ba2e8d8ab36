"""MurmurHash kernels behind `Ops.hash` and `Ops.ngrams`, written once for numpy and cupy.

Both must be bit-identical to Thinc 8.3 so that hashed-embedding tables trained there look
up the same rows here:

- `hash(ids, seed)`: MurmurHash3_x64_128 of each key's 8 little-endian bytes with a 32-bit
  seed, returned as four uint32 words `[lo(h1), hi(h1), lo(h2), hi(h2)]`: (N,) -> (N, 4).
- `ngrams(n, keys)`: MurmurHash64A, seed 0, of the 8*n bytes of each run of n consecutive
  keys: (N,) -> (max(0, N - n + 1),) uint64; empty when n < 1.

The `xp` versions below use whole-array uint64 arithmetic only, so that they run unchanged
on cupy; NumpyOps swaps in the Cython kernels of `_kernels_cpu/hashing.pyx`.

MurmurHash3_x86_32, which the hashing layers use, lives here too:
`murmur3_x86_32_uint64` (SparseLinear's 8-byte keys, any `xp`) and
`murmur3_x86_32_bytes` (strings2arrays' UTF-8 tokens, numpy).
"""
from __future__ import annotations

import contextlib
import operator
from typing import Any, Sequence

import numpy

try:
    from ._kernels_cpu import hashing as _cpu_kernels
except ImportError:  # extension not built: the xp versions give the same bits, only slower
    _cpu_kernels = None

_MASK64 = (1 << 64) - 1

# MurmurHash3_x64_128 mixing constants, and the fmix64 finalizer's multipliers.
_X64_C1 = 0x87C37B91114253D5
_X64_C2 = 0x4CF5AD432745937F
_FMIX_1 = 0xFF51AFD7ED558CCD
_FMIX_2 = 0xC4CEB9FE1A85EC53

# MurmurHash64A multiplier and shift.
_M64A_M = 0xC6A4A7935BD1E995
_M64A_R = 47

# MurmurHash3_x86_32 block constants, and the fmix32 finalizer's multipliers.
_X86_C1 = 0xCC9E2D51
_X86_C2 = 0x1B873593
_X86_ROUND_ADD = 0xE6546B64
_FMIX32_1 = 0x85EBCA6B
_FMIX32_2 = 0xC2B2AE35

_KEY_BYTES = 8


def _wrapping(xp):
    """Context in which uint64 overflow is the intended modular arithmetic, not a warning."""
    errstate = getattr(xp, "errstate", None)
    return errstate(over="ignore") if errstate is not None else contextlib.nullcontext()


def _fmix64(xp, h):
    """MurmurHash3's 64-bit avalanche finalizer, in place on a fresh uint64 array."""
    u64 = xp.uint64
    h ^= h >> u64(33)
    h *= u64(_FMIX_1)
    h ^= h >> u64(33)
    h *= u64(_FMIX_2)
    h ^= h >> u64(33)
    return h


def murmur3_x64_128_uint64(xp, keys, seed: int):
    """MurmurHash3_x64_128 of each key's 8 little-endian bytes: (N,) uint64 -> (N, 4) uint32.

    Words per row: low and high 32 bits of h1, then of h2. `keys` must be a 1d uint64 array
    of `xp` and `seed` an int in [0, 2**32); neither is checked here.
    """
    u64 = xp.uint64
    # NOTE: constants and shift counts are passed as uint64 scalars, never Python ints, so
    # that no array module's casting rules can promote the uint64 arithmetic to int64/float.
    with _wrapping(xp):
        # An 8-byte key is shorter than one 16-byte block: it only goes through the tail
        # mix of the first lane, and h2 starts from the seed alone.
        h1 = keys * u64(_X64_C1)
        h1 = (h1 << u64(31)) | (h1 >> u64(33))
        h1 *= u64(_X64_C2)
        lane0 = u64(seed ^ _KEY_BYTES)  # seed, then xor-ed with the input length
        h1 ^= lane0
        h1 += lane0
        h2 = h1 + lane0
        _fmix64(xp, h1)
        _fmix64(xp, h2)
        h1 += h2
        h2 += h1
        out = xp.empty((keys.shape[0], 4), dtype=xp.uint32)
        low = u64(0xFFFFFFFF)
        # Explicit masks rather than a .view(uint32), which would depend on host byte order.
        out[:, 0] = (h1 & low).astype(xp.uint32)
        out[:, 1] = (h1 >> u64(32)).astype(xp.uint32)
        out[:, 2] = (h2 & low).astype(xp.uint32)
        out[:, 3] = (h2 >> u64(32)).astype(xp.uint32)
    return out


def murmur64a_ngrams(xp, keys, n: int):
    """MurmurHash64A (seed 0) of every window of n consecutive keys: (N,) -> (N - n + 1,) uint64.

    `keys` must be a 1d uint64 array of `xp` with 1 <= n <= N; not checked here.
    """
    u64 = xp.uint64
    m = u64(_M64A_M)
    r = u64(_M64A_R)
    n_out = keys.shape[0] - n + 1
    with _wrapping(xp):
        # Each key is mixed the same way whichever window it sits in, so mix all keys once.
        k = keys * m
        k ^= k >> r
        k *= m
        # The hash state starts as seed ^ (byte length * m), with seed 0 as Thinc uses it.
        h = xp.full((n_out,), u64(((n * _KEY_BYTES) * _M64A_M) & _MASK64), dtype=xp.uint64)
        # The loop runs over the n positions of a window (small), not over the keys.
        for j in range(n):
            h ^= k[j : j + n_out]
            h *= m
        h ^= h >> r
        h *= m
        h ^= h >> r
    return h


def _rotl32(xp, x, r: int):
    """Rotate each word of the uint32 array x left by r bits, in place."""
    u32 = xp.uint32
    carried = x >> u32(32 - r)
    x <<= u32(r)
    x |= carried
    return x


def _x86_32_scramble(xp, k):
    """Scramble 4-byte words (blocks, or zero-padded tails), in place on a fresh uint32 array."""
    k *= xp.uint32(_X86_C1)
    _rotl32(xp, k, 15)
    k *= xp.uint32(_X86_C2)
    return k


def _x86_32_fold(xp, h, k):
    """Fold one scrambled full block per row into the uint32 state h, in place."""
    h ^= k
    _rotl32(xp, h, 13)
    h *= xp.uint32(5)
    h += xp.uint32(_X86_ROUND_ADD)
    return h


def _x86_32_finish(xp, h, n_bytes):
    """Fold in the input length (uint32 scalar or array), then the fmix32 avalanche; in place."""
    u32 = xp.uint32
    h ^= n_bytes
    h ^= h >> u32(16)
    h *= u32(_FMIX32_1)
    h ^= h >> u32(13)
    h *= u32(_FMIX32_2)
    h ^= h >> u32(16)
    return h


def murmur3_x86_32_uint64(xp, keys, seed: int):
    """MurmurHash3_x86_32 of each key's 8 little-endian bytes: (N,) uint64 -> (N,) uint32.

    `keys` must be a 1d uint64 array of `xp` and `seed` an int in [0, 2**32); neither is
    checked here.
    """
    u64 = xp.uint64
    with _wrapping(xp):
        h = xp.full(keys.shape, seed, dtype=xp.uint32)
        # Two full blocks, low word first (little-endian), and no tail.
        for word in (keys & u64(0xFFFFFFFF), keys >> u64(32)):
            _x86_32_fold(xp, h, _x86_32_scramble(xp, word.astype(xp.uint32)))
        return _x86_32_finish(xp, h, xp.uint32(_KEY_BYTES))


def murmur3_x86_32_bytes(items: Sequence[bytes], seed: int = 0) -> numpy.ndarray:
    """MurmurHash3_x86_32 of each byte string: N bytes objects -> (N,) uint32, on numpy.

    Vectorised across the strings: step j folds the j-th block of every string that has
    one. `seed` must be an int in [0, 2**32); not checked here.
    """
    n_bytes = numpy.fromiter(map(len, items), dtype=numpy.int64, count=len(items))
    n_blocks = n_bytes // 4
    # Every string is zero-padded to n_blocks + 1 words, so that its word n_blocks is its
    # tail; a string without a tail gets an all-zero word there, which scrambles to 0 and
    # leaves the state unchanged, so no string needs a branch.
    n_words = n_blocks + 1
    starts = numpy.cumsum(n_words) - n_words  # first word of each string
    padded = numpy.zeros(4 * int(n_words.sum()), dtype=numpy.uint8)
    # Each byte moves by its string's offset between the packed and the padded layout.
    shift = numpy.repeat(4 * starts - (numpy.cumsum(n_bytes) - n_bytes), n_bytes)
    padded[numpy.arange(shift.shape[0]) + shift] = numpy.frombuffer(b"".join(items), dtype=numpy.uint8)
    words = padded.view("<u4").astype(numpy.uint32)
    # Sorted by block count, the strings that still have a j-th block form a suffix.
    order = numpy.argsort(n_blocks, kind="stable")
    n_blocks = n_blocks[order]
    starts = starts[order]
    h = numpy.full(len(items), seed, dtype=numpy.uint32)
    with _wrapping(numpy):
        # A word's scramble does not depend on the state, so all of them are done at once;
        # only the folds run one block position at a time.
        k = _x86_32_scramble(numpy, words)
        for j in range(int(n_blocks[-1]) if len(items) else 0):
            first = int(numpy.searchsorted(n_blocks, j, side="right"))
            _x86_32_fold(numpy, h[first:], k[starts[first:] + j])  # h[first:] is a view
        h ^= k[starts + n_blocks]  # the tails
        _x86_32_finish(numpy, h, n_bytes[order].astype(numpy.uint32))
    out = numpy.empty_like(h)
    out[order] = h
    return out


def _as_keys(ops, data: Any, argname: str, where: str):
    """Validated, contiguous 1d uint64 copy-or-view of `data` on `ops.xp`; never mutated later."""
    xp = ops.xp
    if isinstance(data, xp.ndarray):
        arr = data
    elif isinstance(data, (list, tuple)) and not any(isinstance(v, (list, tuple)) for v in data):
        arr = xp.asarray(_sequence_to_uint64(data, argname, where), dtype=xp.uint64)
    else:
        try:
            arr = ops.asarray(data)
        except (OverflowError, ValueError, TypeError) as err:
            raise TypeError(
                f"{where}: cannot convert {argname} of type {type(data).__name__} to an "
                f"array of 64-bit integer keys ({err}). Pass a 1d uint64 or int64 array."
            ) from err
    shape = tuple(getattr(arr, "shape", ()))
    dtype = getattr(arr, "dtype", None)
    if len(shape) != 1:
        raise ValueError(
            f"{where}: expected {argname} as a 1d array of integer keys, got shape {shape} "
            f"(dtype {dtype}). Pass a 1d array, e.g. {argname}.ravel()."
        )
    if dtype is None or dtype.kind not in "iu":
        raise TypeError(
            f"{where}: expected {argname} with an integer dtype (uint64 preferred), got "
            f"dtype {dtype} with shape {shape}. Convert it first, e.g. "
            f"{argname}.astype('uint64'), if the values are whole numbers."
        )
    # Signed keys wrap to their two's-complement uint64 bit pattern, as numpy's astype
    # does in Thinc's Ops.hash/ngrams; copy=False keeps uint64 input uncopied.
    arr = arr.astype(xp.uint64, copy=False)
    return xp.ascontiguousarray(arr)


def _sequence_to_uint64(data, argname: str, where: str) -> list:
    """Python ints of a flat list/tuple as uint64 bit patterns.

    NOTE: numpy turns a list that mixes keys >= 2**63 with small ones into float64, losing
    bits, so Python sequences are converted here key by key instead.
    """
    values = []
    for i, v in enumerate(data):
        try:
            key = operator.index(v)
        except TypeError:
            raise TypeError(
                f"{where}: {argname}[{i}] is {v!r} of type {type(v).__name__}, not an integer "
                f"key. Pass integers in [-2**63, 2**64), or a 1d uint64 array."
            ) from None
        if not -(1 << 63) <= key <= _MASK64:
            raise ValueError(
                f"{where}: {argname}[{i}] = {key} does not fit in 64 bits. Pass keys in "
                f"[-2**63, 2**64); negative keys are taken as their two's complement."
            )
        values.append(key & _MASK64)
    return values


def _check_seed(seed: Any, where: str) -> int:
    try:
        value = operator.index(seed)
    except TypeError:
        raise TypeError(
            f"{where}: seed must be an integer in [0, 2**32), got {seed!r} of type "
            f"{type(seed).__name__}. Pass an int."
        ) from None
    if not 0 <= value < 1 << 32:
        raise ValueError(
            f"{where}: seed must fit in uint32, i.e. lie in [0, {(1 << 32) - 1}], got {value}. "
            f"Pass seed % 2**32 if any value is acceptable."
        )
    return value


def _check_n(n: Any, where: str) -> int:
    try:
        return operator.index(n)
    except TypeError:
        raise TypeError(
            f"{where}: n must be an integer window length, got {n!r} of type "
            f"{type(n).__name__}. Pass an int >= 1."
        ) from None


def ops_hash(ops, ids, seed):
    """Reference `Ops.hash`: four uint32 MurmurHash3_x64_128 words per key: (N,) -> (N, 4)."""
    keys = _as_keys(ops, ids, "ids", "Ops.hash")
    seed = _check_seed(seed, "Ops.hash")
    return murmur3_x64_128_uint64(ops.xp, keys, seed)


def ops_ngrams(ops, n, keys):
    """Reference `Ops.ngrams`: uint64 hash of each run of n keys: (N,) -> (max(0, N-n+1),)."""
    keys = _as_keys(ops, keys, "keys", "Ops.ngrams")
    n = _check_n(n, "Ops.ngrams")
    xp = ops.xp
    if n < 1 or n > keys.shape[0]:
        return xp.zeros((0,), dtype=xp.uint64)
    return murmur64a_ngrams(xp, keys, n)


def numpy_hash(ops, ids, seed):
    """`NumpyOps.hash`: validated like `ops_hash`, computed by the Cython kernel."""
    keys = _as_keys(ops, ids, "ids", "NumpyOps.hash")
    seed = _check_seed(seed, "NumpyOps.hash")
    if _cpu_kernels is None:
        return murmur3_x64_128_uint64(ops.xp, keys, seed)
    return _cpu_kernels.hash_ids(keys, seed)


def numpy_ngrams(ops, n, keys):
    """`NumpyOps.ngrams`: validated like `ops_ngrams`, computed by the Cython kernel."""
    keys = _as_keys(ops, keys, "keys", "NumpyOps.ngrams")
    n = _check_n(n, "NumpyOps.ngrams")
    xp = ops.xp
    if n < 1 or n > keys.shape[0]:
        return xp.zeros((0,), dtype=xp.uint64)
    if _cpu_kernels is None:
        return murmur64a_ngrams(xp, keys, n)
    return _cpu_kernels.ngrams(n, keys)
