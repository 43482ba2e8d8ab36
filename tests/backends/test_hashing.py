"""Ops.hash / Ops.ngrams: MurmurHash3_x64_128 and MurmurHash64A, bit-identical to Thinc 8.3;
and the MurmurHash3_x86_32 helpers behind the SparseLinear and strings2arrays layers.

The vector tables were produced once by thinc 8.3.14's NumpyOps (and, for x86_32, by its
murmurhash dependency) and are pasted here as literals, so that they run without thinc.
"""
import subprocess
import sys
import warnings

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.backends import _murmur

try:
    from plait.backends._kernels_cpu import hashing as _kernels
except ImportError:
    _kernels = None

U64_MAX = (1 << 64) - 1

# (key, seed, four uint32 words of thinc.NumpyOps().hash([key], seed)[0])
HASH_VECTORS = [
    (0x0000000000000000, 0x0, (0xcc57c3cb, 0x28df63b7, 0xc4e8fe52, 0xf2557dfc)),
    (0x0000000000000001, 0x0, (0xfb05c44a, 0x004403b7, 0xd36d9c06, 0x3d8acdb4)),
    (0x0000000000000002, 0x0, (0x6c76c0a8, 0xde0820a0, 0x538b77a5, 0xe535e296)),
    (0x00000000ffffffff, 0x0, (0x456ea4f6, 0xab879e40, 0x67984cd6, 0x967007f2)),
    (0x0000000100000000, 0x0, (0x459a7ebb, 0x237ebf69, 0x3e83421c, 0x1c2ca43b)),
    (0x8000000000000000, 0x0, (0xb4593227, 0x01159dfe, 0xec4fe0b6, 0x8bdef8b0)),
    (0xffffffffffffffff, 0x0, (0x1abaed73, 0xa0e4b27a, 0x6b4a46af, 0x692112c9)),
    (0x223f21e8a2767d51, 0x0, (0xded925a0, 0xa6fcbc8d, 0x967876cf, 0x1aa9cfea)),
    (0x68c7fe0bab838384, 0x0, (0xa48747fa, 0xb903d342, 0x735955e7, 0xa469b28b)),
    (0x7aa8801fe0545ffe, 0x0, (0xd6dc1ed4, 0x655d0911, 0xb20875d6, 0x39d35852)),
    (0x000000000000d3e5, 0x0, (0xd7d82054, 0x91dc8eb6, 0xe55d665e, 0xffb7269a)),
    (0x00000000000d06dd, 0x0, (0xe683bd50, 0x9598d1eb, 0xf5407f8e, 0x688ebbb8)),
    (0x0000000000000000, 0x1, (0xe5476f20, 0x73269217, 0x6728ca0c, 0xf1fa3fc8)),
    (0x0000000000000001, 0x1, (0xf33bdc48, 0x3d9d8ba8, 0x229c23e9, 0xfd26c615)),
    (0x0000000000000002, 0x1, (0x1099f821, 0xe0c1374c, 0x9bd1e697, 0xeaa80fed)),
    (0x00000000ffffffff, 0x1, (0x36c58cdd, 0xb298ed64, 0x4a461ca4, 0xa492a63a)),
    (0x0000000100000000, 0x1, (0x9d699e85, 0x1e19f0d5, 0x50deab49, 0xe8ff7c0d)),
    (0x8000000000000000, 0x1, (0x61d259db, 0x131af5ce, 0xcc6a859f, 0x367cc69c)),
    (0xffffffffffffffff, 0x1, (0x2ba7784c, 0xc59e3322, 0x8d235c61, 0xb2941419)),
    (0x223f21e8a2767d51, 0x1, (0xa07d28d3, 0x1f7b026d, 0x19c07d35, 0x0ba65baa)),
    (0x68c7fe0bab838384, 0x1, (0x751aee46, 0x404a5521, 0x6ee19da7, 0xab9ed805)),
    (0x7aa8801fe0545ffe, 0x1, (0xf3708933, 0xbf17c5bd, 0xeb314a94, 0xed48d1aa)),
    (0x000000000000d3e5, 0x1, (0x95f8b3f3, 0xf30f01a4, 0x619e8d9c, 0xc21c0c76)),
    (0x00000000000d06dd, 0x1, (0x612c8d56, 0x71553045, 0x9edd6a9f, 0xcd3929b6)),
    (0x0000000000000000, 0x7, (0x15a56871, 0x6ce113b1, 0x230f8db2, 0x195953c2)),
    (0x0000000000000001, 0x7, (0xb820ede5, 0x5b8fda9e, 0x78993e0b, 0xf2d9258d)),
    (0x0000000000000002, 0x7, (0x27b4adc7, 0xa80a991c, 0xca0751e3, 0x793ad38d)),
    (0x00000000ffffffff, 0x7, (0x442dfc00, 0x01651f76, 0x6516faea, 0x422b0a5e)),
    (0x0000000100000000, 0x7, (0x09ba149b, 0xffb80f35, 0x297f9775, 0xac3bb8cc)),
    (0x8000000000000000, 0x7, (0x729491f0, 0x6e52ad93, 0xae0987a1, 0xfa7ac92f)),
    (0xffffffffffffffff, 0x7, (0xb5a122cd, 0xd68a355f, 0x4f61a771, 0x9b428601)),
    (0x223f21e8a2767d51, 0x7, (0x23d558ef, 0x8f1e7ad5, 0x900b60af, 0xaa8fe24d)),
    (0x68c7fe0bab838384, 0x7, (0xedb27989, 0x7dd5f434, 0xd57c65d8, 0x0cb03fae)),
    (0x7aa8801fe0545ffe, 0x7, (0x155b9f28, 0x05bcb559, 0x3c453a43, 0xa060fa3a)),
    (0x000000000000d3e5, 0x7, (0xff23077a, 0x7b95d1b6, 0x5f708103, 0xd9db0c82)),
    (0x00000000000d06dd, 0x7, (0xb8af56dd, 0xaeef0802, 0x167a2f34, 0x11b2bd5a)),
    (0x0000000000000000, 0xffffffff, (0xc9763842, 0x8c14b778, 0xc8351a98, 0xc3b71e85)),
    (0x0000000000000001, 0xffffffff, (0x0ac302d5, 0x1dc62f17, 0x4c645903, 0x5d9bf699)),
    (0x0000000000000002, 0xffffffff, (0x368631e6, 0x245d812d, 0xa589504b, 0x3af2211c)),
    (0x00000000ffffffff, 0xffffffff, (0x335272bd, 0x42b4ada4, 0xf5cd9583, 0x5aaf0f63)),
    (0x0000000100000000, 0xffffffff, (0xb37a0963, 0xf332d107, 0x340d0cd3, 0x29525fe7)),
    (0x8000000000000000, 0xffffffff, (0xbd7b56f9, 0xca22324f, 0xceb4be3b, 0xdc93c7fa)),
    (0xffffffffffffffff, 0xffffffff, (0x05418be5, 0x28119258, 0xf39d01ff, 0xe242ad39)),
    (0x223f21e8a2767d51, 0xffffffff, (0xd26e9c4a, 0xf18fbe1f, 0x753813d4, 0xb21615bc)),
    (0x68c7fe0bab838384, 0xffffffff, (0xbd0139aa, 0xd77e2676, 0xa5b7ce21, 0xd0dd73e8)),
    (0x7aa8801fe0545ffe, 0xffffffff, (0x236d88af, 0x4984bb80, 0x7cfa7be5, 0x6b1e2111)),
    (0x000000000000d3e5, 0xffffffff, (0xd63537df, 0x5d0a8d10, 0xe1b05024, 0x4a42e56e)),
    (0x00000000000d06dd, 0xffffffff, (0xcbeba176, 0x548ea832, 0xc0c41b6d, 0x67d5ca97)),
]

# NGRAM_VECTORS[n] == thinc.NumpyOps().ngrams(n, NGRAM_KEYS as uint64)
NGRAM_KEYS = [0x1, 0x2, 0x3, 0x0, 0xffffffffffffffff, 0x8000000000000000, 0xab54a98ceb1f0ad2]
NGRAM_VECTORS = {
    1: [0x8fbb8d815c9e092e, 0xc7530d606bb62412, 0x47cd23686e97a272, 0x7208f7fa198a2d81, 0x3a8e59c4e2c576dd, 0x7f1a400aee58a927, 0x2a14341eebe0b181],
    2: [0x208f4166ada677c0, 0xea0881ac1a3d90b0, 0xc4339d935ebe979c, 0x9a748d4fc9e76907, 0xd004eb5e5d235da7, 0x7c38ad7c8f9d99e6],
    3: [0x3714b1141a080ebd, 0x96946900517e2ac2, 0xda191b8cd83b5e68, 0x892f22be4d77f2cc, 0x6cec9cbf944ac070],
    4: [0xea72c0e38cc67d06, 0x51f280a3d2e9620d, 0x291665b3c28e0cd2, 0x44313fd8489013fb],
    5: [0x093fe140c4f2ba0c, 0xa4e4b79f46a84254, 0x906d43cc680436c4],
    6: [0xe445812c19bd7d9a, 0x54350111c80fc72e],
    7: [0x1797c982f8b3ed56],
}


class _XpOps:
    """The two attributes of an Ops that the hashing helpers use, over numpy."""

    xp = numpy

    def asarray(self, data, dtype=None):
        return numpy.asarray(data, dtype=dtype)


XP_OPS = _XpOps()

needs_kernels = pytest.mark.skipif(_kernels is None, reason="Cython kernels not built")


def _hash_impls():
    """Every way plait computes the hash of a validated uint64 array."""
    impls = [
        pytest.param(lambda k, s: _murmur.murmur3_x64_128_uint64(numpy, k, s), id="xp"),
        pytest.param(lambda k, s: _murmur.ops_hash(XP_OPS, k, s), id="ops_hash"),
        pytest.param(lambda k, s: _murmur.numpy_hash(XP_OPS, k, s), id="numpy_hash"),
        pytest.param(lambda k, s: _kernels.hash_ids(k, s), id="cython", marks=needs_kernels),
    ]
    return impls


def _ngram_impls():
    return [
        pytest.param(lambda n, k: _murmur.murmur64a_ngrams(numpy, k, n), id="xp"),
        pytest.param(lambda n, k: _murmur.ops_ngrams(XP_OPS, n, k), id="ops_ngrams"),
        pytest.param(lambda n, k: _murmur.numpy_ngrams(XP_OPS, n, k), id="numpy_ngrams"),
        pytest.param(lambda n, k: _kernels.ngrams(n, k), id="cython", marks=needs_kernels),
    ]


def _validating_entry_points():
    return [
        pytest.param((_murmur.ops_hash, _murmur.ops_ngrams), id="ops"),
        pytest.param((_murmur.numpy_hash, _murmur.numpy_ngrams), id="numpy"),
    ]


# ---------------------------------------------------------------------------------------
# Pure-Python MurmurHash3_x64_128 and MurmurHash64A over arbitrary bytes: slow, obviously
# faithful to the published algorithm, and checked below against SMHasher's verification
# codes; the vectorized 8-byte specialisations are then checked against them.

def _rotl64(x, r):
    return ((x << r) | (x >> (64 - r))) & U64_MAX


def _fmix64(k):
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & U64_MAX
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & U64_MAX
    return k ^ (k >> 33)


def _py_mmh3_x64_128(data: bytes, seed: int) -> bytes:
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    h1 = h2 = seed
    n_blocks = len(data) // 16
    for i in range(n_blocks):
        k1 = int.from_bytes(data[16 * i : 16 * i + 8], "little")
        k2 = int.from_bytes(data[16 * i + 8 : 16 * i + 16], "little")
        h1 ^= (_rotl64((k1 * c1) & U64_MAX, 31) * c2) & U64_MAX
        h1 = ((_rotl64(h1, 27) + h2) * 5 + 0x52DCE729) & U64_MAX
        h2 ^= (_rotl64((k2 * c2) & U64_MAX, 33) * c1) & U64_MAX
        h2 = ((_rotl64(h2, 31) + h1) * 5 + 0x38495AB5) & U64_MAX
    tail = data[16 * n_blocks :]
    if len(tail) > 8:
        h2 ^= (_rotl64((int.from_bytes(tail[8:], "little") * c2) & U64_MAX, 33) * c1) & U64_MAX
    if tail:
        h1 ^= (_rotl64((int.from_bytes(tail[:8], "little") * c1) & U64_MAX, 31) * c2) & U64_MAX
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & U64_MAX
    h2 = (h2 + h1) & U64_MAX
    h1, h2 = _fmix64(h1), _fmix64(h2)
    h1 = (h1 + h2) & U64_MAX
    h2 = (h2 + h1) & U64_MAX
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


def _py_murmur64a(data: bytes, seed: int) -> int:
    m, r = 0xC6A4A7935BD1E995, 47
    h = (seed ^ (len(data) * m)) & U64_MAX
    n_words = len(data) // 8
    for i in range(n_words):
        k = (int.from_bytes(data[8 * i : 8 * i + 8], "little") * m) & U64_MAX
        k = ((k ^ (k >> r)) * m) & U64_MAX
        h = ((h ^ k) * m) & U64_MAX
    tail = data[8 * n_words :]
    if tail:
        h = ((h ^ int.from_bytes(tail, "little")) * m) & U64_MAX
    h = ((h ^ (h >> r)) * m) & U64_MAX
    return h ^ (h >> r)


def _smhasher_verification(hash_fn) -> int:
    """SMHasher's VerificationTest: hash keys 0..i-1 (length i) with seed 256-i, then the hashes."""
    key = bytes(range(256))
    digests = b"".join(hash_fn(key[:i], 256 - i) for i in range(256))
    return int.from_bytes(hash_fn(digests, 0)[:4], "little")


def _py_hash_words(key: int, seed: int):
    return tuple(int(w) for w in numpy.frombuffer(_py_mmh3_x64_128(key.to_bytes(8, "little"), seed), "<u4"))


def _py_ngrams(n, keys):
    return [_py_murmur64a(b"".join(k.to_bytes(8, "little") for k in keys[i : i + n]), 0) for i in range(len(keys) - n + 1)]


def test_python_reference_matches_published_smhasher_verification_codes():
    assert _smhasher_verification(_py_mmh3_x64_128) == 0x6384BA69
    assert _smhasher_verification(lambda d, s: _py_murmur64a(d, s).to_bytes(8, "little")) == 0x1F0D3804


def test_vector_tables_agree_with_python_reference():
    for key, seed, words in HASH_VECTORS:
        assert _py_hash_words(key, seed) == words, (hex(key), seed)
    for n, expected in NGRAM_VECTORS.items():
        assert _py_ngrams(n, NGRAM_KEYS) == expected, n


# ---------------------------------------------------------------------------------------
# Fixed vectors, every implementation.

@pytest.mark.parametrize("impl", _hash_impls())
def test_hash_vectors(impl):
    for seed in sorted({s for _, s, _ in HASH_VECTORS}):
        rows = [(k, w) for k, s, w in HASH_VECTORS if s == seed]
        keys = numpy.array([k for k, _ in rows], dtype=numpy.uint64)
        expected = numpy.array([w for _, w in rows], dtype=numpy.uint32)
        out = impl(keys, seed)
        assert isinstance(out, numpy.ndarray)
        assert out.dtype == numpy.uint32 and out.shape == (len(rows), 4)
        numpy.testing.assert_array_equal(out, expected, err_msg=f"seed={seed:#x}")


@pytest.mark.parametrize("impl", _ngram_impls())
def test_ngram_vectors(impl):
    keys = numpy.array(NGRAM_KEYS, dtype=numpy.uint64)
    for n, expected in NGRAM_VECTORS.items():
        out = impl(n, keys)
        assert out.dtype == numpy.uint64 and out.shape == (len(keys) - n + 1,)
        assert [int(v) for v in out] == expected, n


@pytest.mark.parametrize("impl", _hash_impls())
def test_hash_empty(impl):
    out = impl(numpy.zeros((0,), dtype=numpy.uint64), 3)
    assert out.dtype == numpy.uint32 and out.shape == (0, 4)


@pytest.mark.parametrize("impl", [p for p in _ngram_impls() if p.id != "xp"])
@pytest.mark.parametrize("n", [-1, 0, 1, 2, 8, 9, 1000])
def test_ngrams_short_input_gives_empty_uint64(impl, n):
    keys = numpy.array(NGRAM_KEYS, dtype=numpy.uint64)
    for k in (keys, keys[:0]):
        out = impl(n, k)
        assert out.dtype == numpy.uint64
        assert out.shape == (max(0, len(k) - n + 1) if n >= 1 else 0,)


@pytest.mark.parametrize("impl", _hash_impls())
def test_hash_sequential_and_parallel_paths_agree(impl):
    # Long enough for the Cython kernel's prange path; the xp reference is the judge.
    keys = numpy.random.default_rng(5).integers(0, U64_MAX, 50_000, dtype=numpy.uint64, endpoint=True)
    expected = _murmur.murmur3_x64_128_uint64(numpy, keys, 0xDEADBEEF)
    numpy.testing.assert_array_equal(impl(keys, 0xDEADBEEF), expected)
    numpy.testing.assert_array_equal(impl(keys[:100], 0xDEADBEEF), expected[:100])


@pytest.mark.parametrize("impl", _ngram_impls())
@pytest.mark.parametrize("n", [1, 3])
def test_ngrams_sequential_and_parallel_paths_agree(impl, n):
    keys = numpy.random.default_rng(6).integers(0, U64_MAX, 40_000, dtype=numpy.uint64, endpoint=True)
    expected = _murmur.murmur64a_ngrams(numpy, keys, n)
    numpy.testing.assert_array_equal(impl(n, keys), expected)
    numpy.testing.assert_array_equal(impl(n, keys[:50]), expected[: 50 - n + 1])


def test_xp_reference_raises_no_overflow_warnings():
    keys = numpy.array([U64_MAX], dtype=numpy.uint64)
    with warnings.catch_warnings(), numpy.errstate(all="raise"):
        warnings.simplefilter("error")
        words = _murmur.murmur3_x64_128_uint64(numpy, keys, (1 << 32) - 1)
        grams = _murmur.murmur64a_ngrams(numpy, numpy.repeat(keys, 3), 3)
    assert tuple(int(w) for w in words[0]) == _py_hash_words(U64_MAX, (1 << 32) - 1)
    assert int(grams[0]) == _py_ngrams(3, [U64_MAX] * 3)[0]


# ---------------------------------------------------------------------------------------
# Random keys against the pure-Python reference (always) and thinc (when installed).

_keys_st = st.lists(st.integers(0, U64_MAX), max_size=40)
_seed_st = st.one_of(st.sampled_from([0, 1, (1 << 32) - 1]), st.integers(0, (1 << 32) - 1))


@settings(max_examples=60, deadline=None)
@given(keys=_keys_st, seed=_seed_st)
def test_hash_matches_python_reference(keys, seed):
    arr = numpy.array(keys, dtype=numpy.uint64)
    expected = numpy.array([_py_hash_words(k, seed) for k in keys], dtype=numpy.uint32).reshape(-1, 4)
    numpy.testing.assert_array_equal(_murmur.ops_hash(XP_OPS, arr, seed), expected)
    numpy.testing.assert_array_equal(_murmur.numpy_hash(XP_OPS, arr, seed), expected)


@settings(max_examples=60, deadline=None)
@given(keys=_keys_st, n=st.integers(-1, 6))
def test_ngrams_matches_python_reference(keys, n):
    arr = numpy.array(keys, dtype=numpy.uint64)
    expected = _py_ngrams(n, keys) if n >= 1 else []
    assert [int(v) for v in _murmur.ops_ngrams(XP_OPS, n, arr)] == expected
    assert [int(v) for v in _murmur.numpy_ngrams(XP_OPS, n, arr)] == expected


@pytest.fixture(scope="module")
def thinc_ops():
    thinc_api = pytest.importorskip("thinc.api")
    return thinc_api.NumpyOps()


@settings(max_examples=80, deadline=None)
@given(keys=_keys_st, seed=_seed_st)
def test_hash_matches_thinc(thinc_ops, keys, seed):
    arr = numpy.array(keys, dtype=numpy.uint64)
    expected = thinc_ops.hash(arr, seed)
    for fn in (_murmur.ops_hash, _murmur.numpy_hash):
        out = fn(XP_OPS, arr, seed)
        assert out.dtype == expected.dtype and out.shape == expected.shape
        numpy.testing.assert_array_equal(out, expected)


@settings(max_examples=80, deadline=None)
@given(keys=_keys_st.filter(len), n=st.integers(-2, 6))
def test_ngrams_matches_thinc(thinc_ops, keys, n):
    # Empty keys are left out: thinc 8.3 raises IndexError there for n >= 1 (it takes the
    # address of keys[0]); plait returns an empty array, checked above.
    arr = numpy.array(keys, dtype=numpy.uint64)
    expected = thinc_ops.ngrams(n, arr)
    for fn in (_murmur.ops_ngrams, _murmur.numpy_ngrams):
        out = fn(XP_OPS, n, arr)
        assert out.dtype == expected.dtype and out.shape == expected.shape
        numpy.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint32", "uint16", "uint8"])
def test_other_integer_dtypes_convert_like_thinc_astype(thinc_ops, dtype):
    # Thinc's Ops.hash/ngrams do keys.astype("uint64") before hashing: negative signed keys
    # become their two's-complement uint64 bit pattern.
    info = numpy.iinfo(dtype)
    arr = numpy.array([info.min, -1 if info.min < 0 else 1, 0, 5, info.max], dtype=dtype)
    as_u64 = arr.astype(numpy.uint64)
    for hash_fn, ngrams_fn in (
        (_murmur.ops_hash, _murmur.ops_ngrams),
        (_murmur.numpy_hash, _murmur.numpy_ngrams),
    ):
        numpy.testing.assert_array_equal(hash_fn(XP_OPS, arr, 7), thinc_ops.hash(as_u64, 7))
        numpy.testing.assert_array_equal(ngrams_fn(XP_OPS, 2, arr), thinc_ops.ngrams(2, as_u64))


def test_thinc_base_ops_agree_up_to_its_int32_cast():
    # Thinc's base Ops (not NumpyOps) casts the same hashes to int32 on the way out; the bits
    # of hash and the low 32 bits of ngrams must still agree with plait's unsigned results.
    thinc_api = pytest.importorskip("thinc.api")
    base = thinc_api.Ops()
    arr = numpy.array([-3, -1, 0, 1, 2**62], dtype=numpy.int64)
    numpy.testing.assert_array_equal(
        _murmur.ops_hash(XP_OPS, arr, 1), base.hash(arr, 1).view(numpy.uint32)
    )
    numpy.testing.assert_array_equal(
        _murmur.ops_ngrams(XP_OPS, 2, arr).astype(numpy.int32), base.ngrams(2, arr)
    )


# ---------------------------------------------------------------------------------------
# Input handling: conversions, errors, no mutation.

@pytest.mark.parametrize("entry", _validating_entry_points())
def test_int64_negative_keys_wrap_to_uint64(entry):
    hash_fn, ngrams_fn = entry
    signed = numpy.array([-1, -(2**63), 7], dtype=numpy.int64)
    unsigned = numpy.array([U64_MAX, 2**63, 7], dtype=numpy.uint64)
    numpy.testing.assert_array_equal(hash_fn(XP_OPS, signed, 0), hash_fn(XP_OPS, unsigned, 0))
    numpy.testing.assert_array_equal(ngrams_fn(XP_OPS, 2, signed), ngrams_fn(XP_OPS, 2, unsigned))
    assert tuple(int(w) for w in hash_fn(XP_OPS, signed, 0)[0]) == _py_hash_words(U64_MAX, 0)


@pytest.mark.parametrize("entry", _validating_entry_points())
def test_lists_noncontiguous_and_readonly_inputs(entry):
    hash_fn, ngrams_fn = entry
    keys = numpy.array(NGRAM_KEYS, dtype=numpy.uint64)
    expected_hash = hash_fn(XP_OPS, keys, 1)
    numpy.testing.assert_array_equal(hash_fn(XP_OPS, [int(k) for k in keys], 1), expected_hash)
    assert hash_fn(XP_OPS, [], 1).shape == (0, 4)
    assert ngrams_fn(XP_OPS, 1, []).shape == (0,)
    # numpy alone would turn this list into float64 and lose the low bits of the big keys.
    mixed = [1, -1, U64_MAX, 2**63 + 1]
    as_u64 = numpy.array([1, U64_MAX, U64_MAX, 2**63 + 1], dtype=numpy.uint64)
    numpy.testing.assert_array_equal(hash_fn(XP_OPS, mixed, 1), hash_fn(XP_OPS, as_u64, 1))
    numpy.testing.assert_array_equal(ngrams_fn(XP_OPS, 2, tuple(mixed)), ngrams_fn(XP_OPS, 2, as_u64))
    with pytest.raises(ValueError, match=r"ids\[1\]"):
        hash_fn(XP_OPS, [0, 2**64], 1)
    with pytest.raises(ValueError, match=r"keys\[0\]"):
        ngrams_fn(XP_OPS, 1, [-(2**63) - 1])
    with pytest.raises(TypeError, match=r"ids\[1\]"):
        hash_fn(XP_OPS, [1, 2.0], 1)
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        hash_fn(XP_OPS, [[1, 2], [3, 4]], 1)

    strided = numpy.zeros((2 * len(keys),), dtype=numpy.uint64)
    strided[::2] = keys
    numpy.testing.assert_array_equal(hash_fn(XP_OPS, strided[::2], 1), expected_hash)
    assert [int(v) for v in ngrams_fn(XP_OPS, 3, strided[::2])] == NGRAM_VECTORS[3]

    frozen = keys.copy()
    frozen.flags.writeable = False
    numpy.testing.assert_array_equal(hash_fn(XP_OPS, frozen, 1), expected_hash)
    assert [int(v) for v in ngrams_fn(XP_OPS, 2, frozen)] == NGRAM_VECTORS[2]


@pytest.mark.parametrize("entry", _validating_entry_points())
@pytest.mark.parametrize("dtype", ["uint64", "int64", "int32"])
def test_inputs_are_not_mutated_or_aliased(entry, dtype):
    hash_fn, ngrams_fn = entry
    keys = numpy.array([3, 1, 4, 1, 5, 9, 2, 6], dtype=dtype)
    before = keys.copy()
    H = hash_fn(XP_OPS, keys, 5)
    G = ngrams_fn(XP_OPS, 2, keys)
    numpy.testing.assert_array_equal(keys, before)
    assert keys.dtype == before.dtype
    assert not numpy.shares_memory(H, keys) and not numpy.shares_memory(G, keys)


@pytest.mark.parametrize("entry", _validating_entry_points())
@pytest.mark.parametrize(
    "bad, exc, fragments",
    [
        (numpy.zeros((2, 3), dtype=numpy.uint64), ValueError, ["ids", "(2, 3)", "uint64", "1d"]),
        (numpy.uint64(5), ValueError, ["ids", "()"]),
        (numpy.array([1.0, 2.0]), TypeError, ["ids", "float64", "integer"]),
        (numpy.array([True, False]), TypeError, ["ids", "bool"]),
        (["a", "b"], TypeError, ["ids"]),
    ],
)
def test_hash_rejects_bad_ids(entry, bad, exc, fragments):
    hash_fn, _ = entry
    with pytest.raises(exc) as info:
        hash_fn(XP_OPS, bad, 0)
    msg = str(info.value)
    assert "hash" in msg
    for fragment in fragments:
        assert fragment in msg


@pytest.mark.parametrize("entry", _validating_entry_points())
@pytest.mark.parametrize(
    "bad, exc",
    [
        (numpy.zeros((2, 2), dtype=numpy.uint64), ValueError),
        (numpy.array([0.5]), TypeError),
    ],
)
def test_ngrams_rejects_bad_keys_even_when_n_is_out_of_range(entry, bad, exc):
    _, ngrams_fn = entry
    for n in (0, 1, 10):
        with pytest.raises(exc, match="keys"):
            ngrams_fn(XP_OPS, n, bad)


@pytest.mark.parametrize("entry", _validating_entry_points())
@pytest.mark.parametrize(
    "seed, exc",
    [(-1, ValueError), (1 << 32, ValueError), (1 << 70, ValueError), (1.5, TypeError), (None, TypeError), ("3", TypeError)],
)
def test_hash_rejects_bad_seed(entry, seed, exc):
    hash_fn, _ = entry
    with pytest.raises(exc, match="seed"):
        hash_fn(XP_OPS, numpy.array([1], dtype=numpy.uint64), seed)


@pytest.mark.parametrize("entry", _validating_entry_points())
def test_hash_accepts_integer_like_seeds(entry):
    hash_fn, _ = entry
    keys = numpy.array([1, 2], dtype=numpy.uint64)
    expected = hash_fn(XP_OPS, keys, 7)
    for seed in (numpy.uint32(7), numpy.int64(7), numpy.uint64(7)):
        numpy.testing.assert_array_equal(hash_fn(XP_OPS, keys, seed), expected)
    numpy.testing.assert_array_equal(hash_fn(XP_OPS, keys, True), hash_fn(XP_OPS, keys, 1))


@pytest.mark.parametrize("entry", _validating_entry_points())
@pytest.mark.parametrize("n", [1.0, 2.5, None, "2"])
def test_ngrams_rejects_non_integer_n(entry, n):
    _, ngrams_fn = entry
    with pytest.raises(TypeError, match="n must be an integer"):
        ngrams_fn(XP_OPS, n, numpy.array([1, 2, 3], dtype=numpy.uint64))


@pytest.mark.parametrize("entry", _validating_entry_points())
def test_ngrams_huge_n_is_empty_not_overflow(entry):
    _, ngrams_fn = entry
    keys = numpy.array([1, 2, 3], dtype=numpy.uint64)
    for n in (2**31, 2**40, numpy.int64(2**62)):
        out = ngrams_fn(XP_OPS, n, keys)
        assert out.dtype == numpy.uint64 and out.shape == (0,)


def test_numpy_entry_points_fall_back_to_xp_without_kernels(monkeypatch):
    monkeypatch.setattr(_murmur, "_cpu_kernels", None)
    keys = numpy.array(NGRAM_KEYS, dtype=numpy.uint64)
    assert [int(v) for v in _murmur.numpy_ngrams(XP_OPS, 4, keys)] == NGRAM_VECTORS[4]
    key, seed, words = HASH_VECTORS[-1]
    out = _murmur.numpy_hash(XP_OPS, numpy.array([key], dtype=numpy.uint64), seed)
    assert tuple(int(w) for w in out[0]) == words


def test_importing_murmur_pulls_in_no_gpu_or_framework_module():
    code = (
        "import sys, plait.backends._murmur; "
        "bad = [m for m in ('cupy', 'torch', 'tensorflow', 'mxnet', 'mpi4py') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# ---------------------------------------------------------------------------------------
# MurmurHash3_x86_32: the byte-string and uint64-key helpers the hashing layers use.

U32_MAX = (1 << 32) - 1

# (data, seed, murmurhash.mrmr.hash_bytes(data, seed) as uint32)
X86_32_VECTORS = [
    (b"", 0x0, 0x00000000),
    (b"", 0x1, 0x514E28B7),
    (b"", 0x9747B28C, 0xEBB6C228),
    (b"a", 0x0, 0x3C2569B2),
    (b"a", 0x9747B28C, 0x7FA09EA6),
    (b"ab", 0x1, 0xB8079B46),
    (b"abc", 0x0, 0xB3DD93FA),
    (b"abcd", 0x0, 0x43ED676A),
    (b"abcd", 0x9747B28C, 0xF0478627),
    (b"abcde", 0x1, 0xFFACB11B),
    (b"Hello, world!", 0x0, 0xC0363E43),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    (bytes(range(32)), 0x0, 0xCAC37638),
    (bytes(range(32)), 0x1, 0x77DD5BB9),
    ("h\u00e9llo \u65e5\u672c\u8a9e".encode("utf8"), 0x0, 0xBE15CE90),
    ("h\u00e9llo \u65e5\u672c\u8a9e".encode("utf8"), 0x9747B28C, 0x0F2A6216),
]


def _rotl32(x, r):
    return ((x << r) | (x >> (32 - r))) & U32_MAX


def _py_murmur3_x86_32(data: bytes, seed: int) -> int:
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed
    n_blocks = len(data) // 4
    for i in range(n_blocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        h ^= (_rotl32((k * c1) & U32_MAX, 15) * c2) & U32_MAX
        h = (_rotl32(h, 13) * 5 + 0xE6546B64) & U32_MAX
    tail = data[4 * n_blocks :]
    if tail:
        h ^= (_rotl32((int.from_bytes(tail, "little") * c1) & U32_MAX, 15) * c2) & U32_MAX
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & U32_MAX
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & U32_MAX
    return h ^ (h >> 16)


def test_x86_32_python_reference_matches_smhasher_and_vectors():
    assert _smhasher_verification(lambda d, s: _py_murmur3_x86_32(d, s).to_bytes(4, "little")) == 0xB0F57EE3
    for data, seed, expected in X86_32_VECTORS:
        assert _py_murmur3_x86_32(data, seed) == expected, (data, seed)


def test_x86_32_bytes_vectors_in_one_batch():
    for seed in sorted({s for _, s, _ in X86_32_VECTORS}):
        rows = [(d, h) for d, s, h in X86_32_VECTORS if s == seed]
        out = _murmur.murmur3_x86_32_bytes([d for d, _ in rows], seed)
        assert isinstance(out, numpy.ndarray) and out.dtype == numpy.uint32 and out.shape == (len(rows),)
        assert [int(v) for v in out] == [h for _, h in rows], f"seed={seed:#x}"


def test_x86_32_bytes_empty_batch_and_smhasher_verification():
    out = _murmur.murmur3_x86_32_bytes([], 5)
    assert out.dtype == numpy.uint32 and out.shape == (0,)
    # The verification hashes 256 keys of every length 0..255 in one batch, then their digests.
    key = bytes(range(256))
    digests = _murmur.murmur3_x86_32_bytes([key[:i] for i in range(256)], 0)
    assert [int(v) for v in digests] == [_py_murmur3_x86_32(key[:i], 0) for i in range(256)]
    seeded = [int(_murmur.murmur3_x86_32_bytes([key[:i]], 256 - i)[0]) for i in range(256)]
    joined = b"".join(h.to_bytes(4, "little") for h in seeded)
    assert int(_murmur.murmur3_x86_32_bytes([joined], 0)[0]) == 0xB0F57EE3


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.binary(max_size=40), max_size=30), seed=st.integers(0, U32_MAX))
def test_x86_32_bytes_matches_python_reference(items, seed):
    # Mixed lengths exercise the per-step suffix of strings that still have a block,
    # and the reordering back to the input order.
    out = _murmur.murmur3_x86_32_bytes(items, seed)
    assert [int(v) for v in out] == [_py_murmur3_x86_32(d, seed) for d in items]


@settings(max_examples=60, deadline=None)
@given(keys=_keys_st, seed=_seed_st)
def test_x86_32_uint64_matches_python_reference(keys, seed):
    arr = numpy.array(keys, dtype=numpy.uint64)
    out = _murmur.murmur3_x86_32_uint64(numpy, arr, seed)
    assert out.dtype == numpy.uint32 and out.shape == arr.shape
    expected = [_py_murmur3_x86_32(k.to_bytes(8, "little"), seed) for k in keys]
    assert [int(v) for v in out] == expected
    assert [int(v) for v in _murmur.murmur3_x86_32_bytes([k.to_bytes(8, "little") for k in keys], seed)] == expected


def test_x86_32_raises_no_overflow_warnings_and_leaves_inputs_alone():
    keys = numpy.array([U64_MAX, 0, 0x8000000000000000], dtype=numpy.uint64)
    before = keys.copy()
    with warnings.catch_warnings(), numpy.errstate(all="raise"):
        warnings.simplefilter("error")
        out = _murmur.murmur3_x86_32_uint64(numpy, keys, U32_MAX)
        strings = _murmur.murmur3_x86_32_bytes([b"\xff" * 9, b""], U32_MAX)
    numpy.testing.assert_array_equal(keys, before)
    assert [int(v) for v in out] == [_py_murmur3_x86_32(int(k).to_bytes(8, "little"), U32_MAX) for k in before]
    assert [int(v) for v in strings] == [_py_murmur3_x86_32(b"\xff" * 9, U32_MAX), _py_murmur3_x86_32(b"", U32_MAX)]


@pytest.fixture(scope="module")
def mrmr():
    return pytest.importorskip("murmurhash.mrmr")  # thinc's dependency, which spaCy's tables came from


@settings(max_examples=40, deadline=None)
@given(items=st.lists(st.binary(max_size=24), max_size=20), seed=st.integers(0, (1 << 31) - 1))
def test_x86_32_bytes_matches_murmurhash(mrmr, items, seed):
    expected = [mrmr.hash_bytes(d, seed) & U32_MAX for d in items]
    assert [int(v) for v in _murmur.murmur3_x86_32_bytes(items, seed)] == expected


# ---------------------------------------------------------------------------------------
# Through plait's Ops classes, once they are wired to these helpers.

@pytest.fixture(params=["Ops", "NumpyOps"])
def plait_ops(request):
    import plait.backends as backends

    cls = getattr(backends, request.param, None)
    if cls is None:
        pytest.skip(f"plait.backends.{request.param} not available yet")
    return cls()


def test_plait_ops_hash_and_ngrams(plait_ops):
    keys = plait_ops.asarray(numpy.array([k for k, s, _ in HASH_VECTORS if s == 7], dtype=numpy.uint64))
    expected = numpy.array([w for _, s, w in HASH_VECTORS if s == 7], dtype=numpy.uint32)
    out = plait_ops.hash(keys, 7)
    assert out.dtype == numpy.uint32
    numpy.testing.assert_array_equal(out, expected)
    grams = plait_ops.ngrams(2, numpy.array(NGRAM_KEYS, dtype=numpy.uint64))
    assert grams.dtype == numpy.uint64
    assert [int(v) for v in grams] == NGRAM_VECTORS[2]
    with pytest.raises(ValueError, match="seed"):
        plait_ops.hash(keys, -1)
    with pytest.raises(ValueError, match="ids"):
        plait_ops.hash(numpy.zeros((2, 2), dtype=numpy.uint64), 0)
