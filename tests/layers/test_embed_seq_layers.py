"""Embedding, sparse, sequence and reduction layers: Embed, HashEmbed, StaticVectors, SparseLinear(_v2),
ParametricAttention(_v2), LSTM, PyTorchLSTM, expand_window, reduce_*, remap_ids(_v2), premap_ids,
uniqued, resizable (resize_model, resize_linear_weighted)."""
import inspect
import sys

import numpy
import pytest

from plait.backends import NumpyOps
from plait.config import registry
from plait.layers.embed import Embed
from plait.layers.expand_window import expand_window
from plait.layers.hashembed import HashEmbed
from plait.layers.linear import Linear
from plait.layers.lstm import LSTM, PyTorchLSTM
from plait.layers.parametricattention import ParametricAttention
from plait.layers.parametricattention_v2 import ParametricAttention_v2
from plait.layers.premap_ids import premap_ids
from plait.layers.reduce_first import reduce_first
from plait.layers.reduce_last import reduce_last
from plait.layers.reduce_max import reduce_max
from plait.layers.reduce_mean import reduce_mean
from plait.layers.reduce_sum import reduce_sum
from plait.layers.remap_ids import remap_ids, remap_ids_v2
from plait.layers.resizable import resizable, resize_linear_weighted, resize_model
from plait.layers.sparselinear import SparseLinear, SparseLinear_v2
from plait.layers.staticvectors import StaticVectors
from plait.layers.uniqued import uniqued
from plait.types import Padded, Ragged


def _rng(seed=0):
    return numpy.random.default_rng(seed)


def _float64(model, rng=None, scale=0.5):
    """NumpyOps everywhere and float64 params (random when rng is given)."""
    for node in model.walk():
        node.ops = NumpyOps()
        for name in node.param_names:
            if node.has_param(name):
                P = node.get_param(name)
                P = rng.normal(scale=scale, size=P.shape) if rng is not None else P.astype("float64")
                node.set_param(name, P.astype("float64"))
    return model


def _data(Y):
    return Y.data if isinstance(Y, (Ragged, Padded)) else Y


def _numeric_grad(loss, X, eps=1e-6):
    """Central differences of the scalar loss() wrt every entry of X (edited in place)."""
    grad = numpy.zeros(X.shape)
    for i in numpy.ndindex(X.shape):
        old = X[i]
        X[i] = old + eps
        up = loss()
        X[i] = old - eps
        down = loss()
        X[i] = old
        grad[i] = (up - down) / (2 * eps)
    return grad


def _check_grads(model, X, get_X_array=None, rng=None, atol=1e-6, params=True):
    """Compare backprop's input and param gradients with central differences (float64)."""
    rng = rng or _rng(1)
    Y, backprop = model.begin_update(X)
    dY = rng.normal(size=_data(Y).shape)

    def wrap(dY_arr):
        if isinstance(Y, Ragged):
            return Ragged(dY_arr, Y.lengths)
        if isinstance(Y, Padded):
            return Padded(dY_arr, Y.size_at_t, Y.lengths, Y.indices)
        return dY_arr

    def loss():
        return float((_data(model.predict(X)) * dY).sum())

    dX = backprop(wrap(dY.copy()))
    if get_X_array is not None:
        X_arr = get_X_array(X)
        numpy.testing.assert_allclose(_data(dX), _numeric_grad(loss, X_arr), atol=atol, rtol=1e-5)
    if params:
        for node in model.walk():
            for name in node.param_names:
                if node.has_grad(name):
                    numpy.testing.assert_allclose(
                        node.get_grad(name), _numeric_grad(loss, node.get_param(name)),
                        atol=atol, rtol=1e-5, err_msg=f"{node.name}.{name}",
                    )
    return dX


def _model_skips_unserializable_attrs():
    """Whether Model.to_bytes leaves out attrs msgpack cannot store (slices, callables), as thinc does."""
    from plait.model import Model

    try:
        Model("probe", lambda model, X, is_train: (X, None), attrs={"index": (slice(0, None), 0)}).to_bytes()
    except TypeError:
        return False
    return True


# Layers whose trees hold such attrs (ints-getitem's index, resizable's resize_layer,
# premap_ids' table) can only be saved once the model skips them.
needs_attr_skipping = pytest.mark.xfail(
    not _model_skips_unserializable_attrs(), raises=TypeError, strict=True,
    reason="plait.model.Model.to_dict must skip attrs that fail to serialize, as thinc does",
)


def _roundtrip(make, X, init_X=None):
    """A fresh model of the same architecture gives the same output after from_bytes."""
    m1 = make()
    m1.initialize(X=init_X)
    m2 = make().from_bytes(m1.to_bytes())
    numpy.testing.assert_array_equal(_data(m1.predict(X)), _data(m2.predict(X)))


# --------------------------------------------------------------------------- thinc parity

SAME_SIGNATURE = [
    ("Embed", Embed), ("HashEmbed", HashEmbed), ("SparseLinear", SparseLinear),
    ("SparseLinear_v2", SparseLinear_v2), ("ParametricAttention", ParametricAttention),
    ("ParametricAttention_v2", ParametricAttention_v2), ("LSTM", LSTM), ("PyTorchLSTM", PyTorchLSTM),
    ("expand_window", expand_window), ("reduce_first", reduce_first), ("reduce_last", reduce_last),
    ("reduce_max", reduce_max), ("reduce_mean", reduce_mean), ("reduce_sum", reduce_sum),
    ("remap_ids", remap_ids), ("remap_ids_v2", remap_ids_v2), ("premap_ids", premap_ids),
    ("uniqued", uniqued), ("resizable", resizable),
]


def _params_of(func):
    return [(p.name, p.kind, repr(p.default)) for p in inspect.signature(func).parameters.values()]


@pytest.mark.parametrize("name,func", SAME_SIGNATURE, ids=[n for n, _ in SAME_SIGNATURE])
def test_signature_matches_thinc(name, func):
    thinc_api = pytest.importorskip("thinc.api")
    assert _params_of(func) == _params_of(getattr(thinc_api, name))


def test_resize_helpers_signature_match_thinc():
    thinc_resizable = pytest.importorskip("thinc.layers.resizable")
    assert _params_of(resize_model) == _params_of(thinc_resizable.resize_model)
    assert _params_of(resize_linear_weighted) == _params_of(thinc_resizable.resize_linear_weighted)


REGISTERED = {
    "Embed.v1": Embed, "HashEmbed.v1": HashEmbed, "StaticVectors.v1": StaticVectors,
    "SparseLinear.v1": SparseLinear, "SparseLinear.v2": SparseLinear_v2,
    "ParametricAttention.v1": ParametricAttention, "ParametricAttention.v2": ParametricAttention_v2,
    "LSTM.v1": LSTM, "PyTorchLSTM.v1": PyTorchLSTM, "expand_window.v1": expand_window,
    "reduce_first.v1": reduce_first, "reduce_last.v1": reduce_last, "reduce_max.v1": reduce_max,
    "reduce_mean.v1": reduce_mean, "reduce_sum.v1": reduce_sum, "remap_ids.v1": remap_ids,
    "remap_ids.v2": remap_ids_v2, "premap_ids.v1": premap_ids, "uniqued.v1": uniqued,
    "resizable.v1": resizable,
}


def test_registered_names():
    for name, func in REGISTERED.items():
        assert registry.layers.get(name) is func, name


def test_model_trees_match_thinc():
    t = pytest.importorskip("thinc.api")
    pairs = [
        (lambda m: m.Embed(4, 10, column=1, dropout=0.1), (Embed, t.Embed)),
        (lambda m: m.HashEmbed(4, 10, column=0, seed=2), (HashEmbed, t.HashEmbed)),
        (lambda m: m.LSTM(4, 3, bi=True, depth=2, dropout=0.2), (LSTM, t.LSTM)),
        (lambda m: m.SparseLinear(3, 64), (SparseLinear, t.SparseLinear)),
        (lambda m: m.SparseLinear_v2(3, 64), (SparseLinear_v2, t.SparseLinear_v2)),
        (lambda m: m.ParametricAttention(5), (ParametricAttention, t.ParametricAttention)),
        (lambda m: m.ParametricAttention_v2(nO=5), (ParametricAttention_v2, t.ParametricAttention_v2)),
        (lambda m: m.expand_window(2), (expand_window, t.expand_window)),
        (lambda m: m.reduce_max(), (reduce_max, t.reduce_max)),
        (lambda m: m.remap_ids({"a": 1}, 3), (remap_ids, t.remap_ids)),
        (lambda m: m.remap_ids_v2({1: 2}, column=1), (remap_ids_v2, t.remap_ids_v2)),
    ]

    class NS:
        def __init__(self, **funcs):
            self.__dict__.update(funcs)

    for build, (plait_f, thinc_f) in pairs:
        name = plait_f.__name__
        p = build(NS(**{name: plait_f}))
        q = build(NS(**{name: thinc_f}))
        p_nodes = [(n.name, n.dim_names, n.param_names, sorted(n.attrs)) for n in p.walk()]
        q_nodes = [(n.name, n.dim_names, n.param_names, sorted(n.attrs)) for n in q.walk()]
        assert p_nodes == q_nodes, name
        for pn, qn in zip(p.walk(), q.walk()):
            for attr, value in qn.attrs.items():
                if attr not in ("seed", "index", "mapping_table"):
                    assert pn.attrs[attr] == value, (name, attr)
    u = uniqued(Embed(4, 10, column=0), column=0)
    assert u.name == "uniqued(ints-getitem>>embed)" and u.dim_names == ("nO", "nI")
    assert u.attrs == {"column": 0}


# --------------------------------------------------------------------------- Embed


def test_embed_forward_backprop_and_dropout():
    model = _float64(Embed(3, 6).initialize(), _rng())
    E = model.get_param("E")
    ids = numpy.array([0, 5, 2, 2], dtype="uint64")
    numpy.testing.assert_array_equal(model.predict(ids), E[ids])
    _check_grads(model, ids)
    # Repeated ids accumulate their gradients.
    model = Embed(2, 4).initialize()
    _, backprop = model.begin_update(numpy.array([1, 1, 3], dtype="int32"))
    dX = backprop(numpy.ones((3, 2), dtype="f"))
    assert dX.shape == (3,) and dX.dtype.kind == "i"
    numpy.testing.assert_array_equal(model.get_grad("E"), [[0, 0], [2, 2], [0, 0], [1, 1]])
    # One dropout mask per column: a column is zero for every row, or scaled for every row.
    model = Embed(200, 4, dropout=0.5).initialize()
    ids = numpy.array([0, 1, 2, 3, 1], dtype="int64")
    Y, backprop = model.begin_update(ids)
    ratio = Y / model.get_param("E")[ids]
    assert numpy.all((numpy.isclose(ratio, 0) | numpy.isclose(ratio, 2)))
    assert numpy.all(ratio == ratio[0])
    assert 0 < (ratio[0] == 0).sum() < 200
    numpy.testing.assert_array_equal(model.predict(ids), model.get_param("E")[ids])


def test_embed_column_init_and_errors():
    model = Embed(nV=7, column=1)
    assert model.name == "ints-getitem>>embed" and model.attrs["column"] == 1
    model.initialize(Y=numpy.zeros((2, 5), dtype="f"))
    X = numpy.array([[9, 3], [9, 6]], dtype="int64")
    embed = model.layers[1]
    numpy.testing.assert_array_equal(model.predict(X), embed.get_param("E")[[3, 6]])
    with pytest.raises(ValueError, match="nO.*embed|embed.*nO"):
        Embed(nV=4).initialize()
    model = Embed(2, 4).initialize()
    with pytest.raises(ValueError, match="column="):
        model.predict(numpy.zeros((2, 2), dtype="i"))
    with pytest.raises(IndexError, match="nV=4"):
        model.predict(numpy.array([4], dtype="i"))
    with pytest.raises(TypeError, match="integer"):
        model.predict(numpy.zeros((2,), dtype="f"))
    _roundtrip(lambda: Embed(3, 5), numpy.array([1, 4], dtype="uint64"))


@needs_attr_skipping
def test_embed_hashembed_with_column_roundtrip():
    X = numpy.array([[1, 2], [4, 0]], dtype="uint64")
    _roundtrip(lambda: Embed(3, 5, column=0), X)
    _roundtrip(lambda: HashEmbed(3, 9, column=1), X)


def test_embed_matches_thinc():
    t = pytest.importorskip("thinc.api")
    ids = _rng().integers(0, 10, size=(6, 2)).astype("uint64")
    tm = t.Embed(4, 10, column=1).initialize()
    pm = Embed(4, 10, column=1).from_bytes(tm.to_bytes())
    numpy.testing.assert_array_equal(pm.predict(ids), tm.predict(ids))
    pm2 = Embed(4, 10).initialize()
    tm2 = t.Embed(4, 10).from_bytes(pm2.to_bytes())
    numpy.testing.assert_array_equal(pm2.predict(ids[:, 0]), tm2.predict(ids[:, 0]))


@needs_attr_skipping
def test_embed_with_column_plait_bytes_load_in_thinc():
    t = pytest.importorskip("thinc.api")
    ids = _rng().integers(0, 10, size=(6, 2)).astype("uint64")
    pm = Embed(4, 10, column=1).initialize()
    tm = t.Embed(4, 10, column=1).from_bytes(pm.to_bytes())
    numpy.testing.assert_array_equal(pm.predict(ids), tm.predict(ids))


# --------------------------------------------------------------------------- HashEmbed


def test_hashembed_forward_backprop():
    model = _float64(HashEmbed(3, 11, seed=5).initialize(), _rng())
    ids = numpy.array([1, 2**40, 7, 1, 0], dtype="uint64")
    keys = NumpyOps().hash(ids, 5) % 11
    E = model.get_param("E")
    numpy.testing.assert_allclose(model.predict(ids), E[keys].sum(axis=1))
    assert model.predict(ids)[0].tolist() == model.predict(ids)[3].tolist()
    _check_grads(model, ids)
    # Batch invariance: each row depends only on its own key.
    row_by_row = numpy.vstack([model.predict(ids[i : i + 1]) for i in range(len(ids))])
    numpy.testing.assert_allclose(model.predict(ids), row_by_row)
    Y, backprop = model.begin_update(ids[:0])
    assert Y.shape == (0, 3) and backprop(Y).shape == (0,)


def test_hashembed_seed_and_column():
    a, b = HashEmbed(4, 10), HashEmbed(4, 10)
    assert a.attrs["seed"] == a.id and b.attrs["seed"] == b.id
    model = HashEmbed(4, 10, column=2, seed=1).initialize()
    assert model.name == "ints-getitem>>hashembed" and model.attrs["column"] == 2
    X = numpy.array([[0, 0, 8], [1, 1, 9]], dtype="uint64")
    numpy.testing.assert_array_equal(model.predict(X), model.layers[1].predict(X[:, 2]))
    with pytest.raises(ValueError, match="column="):
        model.layers[1].predict(X)
    _roundtrip(lambda: HashEmbed(3, 9), X[:, 0])


def test_hashembed_matches_thinc():
    t = pytest.importorskip("thinc.api")
    ids = numpy.array([3, -5, 2**62, 0, 17], dtype="int64")
    tm = t.HashEmbed(5, 13).initialize()  # default seed: thinc's model id, loaded from the bytes
    pm = HashEmbed(5, 13).from_bytes(tm.to_bytes())
    assert pm.attrs["seed"] == tm.attrs["seed"]
    numpy.testing.assert_array_equal(pm.predict(ids), tm.predict(ids))
    tm = t.HashEmbed(5, 13, seed=7, column=1).initialize()
    pm = HashEmbed(5, 13, seed=7, column=1).from_bytes(tm.to_bytes())
    X = numpy.stack([ids, ids[::-1]], axis=1).astype("uint64")
    numpy.testing.assert_array_equal(pm.predict(X), tm.predict(X))
    _, bp_t = tm.begin_update(X)
    _, bp_p = pm.begin_update(X)
    dY = _rng().normal(size=(5, 5)).astype("f")
    bp_t(dY.copy())
    bp_p(dY.copy())
    numpy.testing.assert_allclose(pm.layers[1].get_grad("E"), tm.layers[1].get_grad("E"), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- StaticVectors


def test_staticvectors():
    rng = _rng()
    vectors = rng.normal(size=(6, 4))
    model = StaticVectors(3, vectors)
    assert model.name == "static_vectors" and model.dim_names == ("nM", "nV", "nO")
    model.initialize()
    assert model.get_dim("nM") == 4 and model.get_param("W").shape == (3, 4)
    _float64(model, rng)
    W = model.get_param("W")
    ids = numpy.array([0, 5, 9, 2], dtype="uint64")  # 9 is outside the table: row 0
    numpy.testing.assert_allclose(model.predict(ids), vectors[[0, 5, 0, 2]] @ W.T)
    _check_grads(model, ids)
    assert "W" in model.grad_names and not numpy.any(model.attrs["vectors"] != vectors)
    with pytest.raises(ValueError, match="vectors"):
        StaticVectors(3).initialize()
    late = StaticVectors(2, column=1)
    late.layers[1].attrs["vectors"] = vectors.astype("f")
    late.initialize()
    X = numpy.array([[7, 1], [7, 3]], dtype="int32")
    numpy.testing.assert_allclose(
        late.predict(X), vectors[[1, 3]].astype("f") @ late.layers[1].get_param("W").T, rtol=1e-5
    )
    with pytest.raises(ValueError, match="nO"):
        StaticVectors(None, vectors).initialize()
    _roundtrip(lambda: StaticVectors(2, vectors.astype("f")), ids)


# --------------------------------------------------------------------------- SparseLinear


def _murmur3_x86_32(key, seed):
    """Scalar reference MurmurHash3_x86_32 over the 8 little-endian bytes of a uint64 key."""
    M = 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & M

    h = seed
    for block in (key & M, key >> 32):
        k = (block * 0xCC9E2D51) & M
        k = rotl(k, 15)
        k = (k * 0x1B873593) & M
        h ^= k
        h = rotl(h, 13)
        h = (h * 5 + 0xE6546B64) & M
    h ^= 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M
    h ^= h >> 16
    return h


def _sparse_reference(W, b, keys, values, lengths, nO, length, v1):
    scores = numpy.tile(b, (len(lengths), 1)).astype("float64")
    i = 0
    for s, n in enumerate(lengths):
        for _ in range(n):
            key = int(keys[i])
            for seed in (0, 1):
                h = _murmur3_x86_32(key, seed)
                for c in range(nO):
                    slot = (h & (length - 1)) + c if v1 else c * length + h % length
                    scores[s, c] += W[slot] * values[i]
            i += 1
    return scores


@pytest.mark.parametrize("factory,v1", [(SparseLinear, True), (SparseLinear_v2, False)])
def test_sparselinear_forward_backprop(factory, v1):
    rng = _rng()
    nO, length = 3, 16
    model = _float64(factory(nO, length).initialize(), rng)
    assert model.attrs == {"v1_indexing": v1}
    keys = rng.integers(0, 2**64, size=9, dtype="uint64")
    values = rng.normal(size=9)
    lengths = numpy.array([4, 0, 5], dtype="int32")
    X = (keys, values, lengths)
    expected = _sparse_reference(model.get_param("W"), model.get_param("b"), keys, values, lengths, nO, length, v1)
    numpy.testing.assert_allclose(model.predict(X), expected)
    assert model.predict(X)[1].tolist() == model.get_param("b").tolist()
    dX = _check_grads(model, X)
    assert dX is X
    # Batch invariance: each sequence's scores depend only on its own keys.
    seqs = [model.predict((keys[:4], values[:4], lengths[:1])), model.predict((keys[4:], values[4:], lengths[2:]))]
    numpy.testing.assert_allclose(model.predict(X)[[0, 2]], numpy.vstack(seqs))


def test_sparselinear_errors_and_init():
    model = SparseLinear_v2(length=8)
    with pytest.raises(ValueError, match="nO"):
        model.initialize()
    model.initialize(Y=numpy.zeros((2, 3), dtype="f"))
    assert model.get_param("W").shape == (24,) and not model.get_param("W").any()
    keys = numpy.arange(4, dtype="uint64")
    values = numpy.ones(4, dtype="f")
    with pytest.raises(ValueError, match="sum to 5, but there are only 4 keys"):
        model.predict((keys, values, numpy.array([3, 2], dtype="i")))
    # Keys past sum(lengths) belong to no sequence and are ignored, as in Thinc.
    W = numpy.arange(24, dtype="f")
    model.set_param("W", W)
    numpy.testing.assert_array_equal(
        model.predict((keys, values, numpy.array([3], dtype="i"))),
        model.predict((keys[:3], values[:3], numpy.array([3], dtype="i"))),
    )
    with pytest.raises(ValueError, match="same length"):
        model.predict((keys, values[:2], numpy.array([4], dtype="i")))
    with pytest.raises(TypeError, match="tuple"):
        model.predict(keys)
    assert model.predict((keys[:0], values[:0], numpy.zeros(0, dtype="i"))).shape == (0, 3)


@pytest.mark.parametrize("name,factory", [("SparseLinear", SparseLinear), ("SparseLinear_v2", SparseLinear_v2)])
def test_sparselinear_matches_thinc(name, factory):
    t = pytest.importorskip("thinc.api")
    rng = _rng(3)
    tm = getattr(t, name)(4, 64).initialize()
    tm.set_param("W", rng.normal(size=tm.get_param("W").shape).astype("f"))
    tm.set_param("b", rng.normal(size=4).astype("f"))
    pm = factory(4, 64).from_bytes(tm.to_bytes())
    keys = rng.integers(0, 2**64, size=30, dtype="uint64")
    values = rng.normal(size=30).astype("f")
    lengths = numpy.array([10, 0, 12, 8], dtype="int32")
    Yt, bp_t = tm.begin_update((keys, values, lengths))
    Yp, bp_p = pm.begin_update((keys, values, lengths))
    numpy.testing.assert_allclose(Yp, Yt, rtol=1e-5, atol=1e-5)
    dY = rng.normal(size=Yt.shape).astype("f")
    bp_t(dY)
    bp_p(dY)
    for param in ("W", "b"):
        numpy.testing.assert_allclose(pm.get_grad(param), tm.get_grad(param), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- ParametricAttention


def _attention_reference(K, X, Q, lengths):
    scores = numpy.clip(K @ Q, -20, 20)
    out, start = [], 0
    for n in lengths:
        e = numpy.exp(scores[start : start + n])
        out.append(X[start : start + n] * (e / e.sum())[:, None])
        start += n
    return numpy.vstack(out)


def test_parametric_attention():
    rng = _rng()
    lengths = numpy.array([3, 1, 4], dtype="int32")
    X = rng.normal(size=(8, 5))
    model = ParametricAttention()
    model.initialize(X=Ragged(X.astype("f"), lengths))
    assert model.get_dim("nO") == 5 and numpy.all(numpy.abs(model.get_param("Q")) <= 0.1)
    _float64(model, rng)
    Xr = Ragged(X, lengths)
    numpy.testing.assert_allclose(model.predict(Xr).data, _attention_reference(X, X, model.get_param("Q"), lengths))
    _check_grads(model, Xr, get_X_array=lambda Xr: Xr.data)
    whole = model.predict(Xr).data
    parts = [model.predict(Ragged(X[a:b], numpy.array([b - a], dtype="i"))).data for a, b in ((0, 3), (3, 4), (4, 8))]
    numpy.testing.assert_allclose(whole, numpy.vstack(parts))
    with pytest.raises(ValueError, match=r"\(n, 5\)"):
        model.predict(Ragged(X[:, :3], lengths))
    _roundtrip(lambda: ParametricAttention(5), Ragged(X.astype("f"), lengths))


def test_parametric_attention_v2():
    rng = _rng()
    lengths = numpy.array([2, 3], dtype="int32")
    X = rng.normal(size=(5, 4))
    model = ParametricAttention_v2(key_transform=Linear())
    assert model.layers[0] is model.get_ref("key_transform")
    model.initialize(X=Ragged(X.astype("f"), lengths))
    assert model.get_dim("nO") == 4 and model.layers[0].get_dim("nO") == 4
    _float64(model, rng)
    lin = model.layers[0]
    K = X @ lin.get_param("W").T + lin.get_param("b")
    Xr = Ragged(X, lengths)
    numpy.testing.assert_allclose(model.predict(Xr).data, _attention_reference(K, X, model.get_param("Q"), lengths))
    _check_grads(model, Xr, get_X_array=lambda Xr: Xr.data)
    plain = ParametricAttention_v2(nO=4)
    assert plain.layers[0].name == "noop"
    _roundtrip(lambda: ParametricAttention_v2(key_transform=Linear(4, 4)), Xr, init_X=Ragged(X.astype("f"), lengths))


def test_parametric_attention_matches_thinc():
    t = pytest.importorskip("thinc.api")
    rng = _rng(2)
    lengths = numpy.array([3, 2, 4], dtype="int32")
    X = rng.normal(size=(9, 6)).astype("f")
    tm = t.ParametricAttention(6).initialize()
    pm = ParametricAttention(6).from_bytes(tm.to_bytes())
    numpy.testing.assert_allclose(pm.predict(Ragged(X, lengths)).data, tm.predict(t.Ragged(X, lengths)).data, rtol=1e-5)
    tm = t.ParametricAttention_v2(key_transform=t.Linear(6, 6), nO=6).initialize(t.Ragged(X, lengths))
    pm = ParametricAttention_v2(key_transform=Linear(6, 6), nO=6).from_bytes(tm.to_bytes())
    Yt, bp_t = tm.begin_update(t.Ragged(X, lengths))
    Yp, bp_p = pm.begin_update(Ragged(X, lengths))
    numpy.testing.assert_allclose(Yp.data, Yt.data, rtol=1e-5, atol=1e-6)
    dY = rng.normal(size=X.shape).astype("f")
    numpy.testing.assert_allclose(bp_p(Ragged(dY, lengths)).data, bp_t(t.Ragged(dY, lengths)).data, rtol=1e-4, atol=1e-6)
    numpy.testing.assert_allclose(pm.get_grad("Q"), tm.get_grad("Q"), rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------- LSTM


def _sigmoid(Z):
    return 1 / (1 + numpy.exp(-Z))


def _lstm_reference(params, seq, nI, nH, depth, dirs):
    """An independent per-sequence LSTM (zero initial state) on Thinc's weight layout."""
    offset = 0

    def take(shape):
        nonlocal offset
        size = int(numpy.prod(shape))
        block = params[offset : offset + size].reshape(shape)
        offset += size
        return block

    layer_in = seq
    for layer in range(depth):
        outs = []
        n_in = nI if layer == 0 else nH * dirs
        for d in range(dirs):
            Wx = numpy.vstack([take((nH, n_in)) for _ in range(4)])
            bx = numpy.concatenate([take((nH,)) for _ in range(4)])
            Wh = numpy.vstack([take((nH, nH)) for _ in range(4)])
            bh = numpy.concatenate([take((nH,)) for _ in range(4)])
            h, c = numpy.zeros(nH), numpy.zeros(nH)
            steps = range(len(seq)) if d == 0 else range(len(seq) - 1, -1, -1)
            H = numpy.zeros((len(seq), nH))
            for t in steps:
                z = Wx @ layer_in[t] + bx + Wh @ h + bh
                f, i, o, cand = _sigmoid(z[:nH]), _sigmoid(z[nH : 2 * nH]), _sigmoid(z[2 * nH : 3 * nH]), numpy.tanh(z[3 * nH :])
                c = f * c + i * cand
                h = o * numpy.tanh(c)
                H[t] = h
            outs.append(H)
        layer_in = numpy.hstack(outs)
    return layer_in


def _padded(ops, seqs):
    return ops.list2padded(seqs)


@pytest.mark.parametrize("bi,depth", [(False, 1), (True, 1), (False, 2), (True, 2)])
def test_lstm_forward_and_grads(bi, depth):
    rng = _rng()
    nI, nO = 3, 4
    model = LSTM(nO, nI, bi=bi, depth=depth)
    assert model.attrs == {"registry_name": "LSTM.v1", "dropout_rate": 0.0}
    model.initialize()
    dirs = 2 if bi else 1
    nH = nO // dirs
    assert model.get_param("HC0").shape == (2, depth, dirs, nH)
    _float64(model, rng)
    model.set_param("HC0", numpy.zeros((2, depth, dirs, nH)))
    seqs = [rng.normal(size=(n, nI)) for n in (4, 2, 3)]
    Xp = _padded(model.ops, seqs)
    Yp = model.predict(Xp)
    assert Yp.data.shape == (4, 3, nO)
    for b, seq in enumerate(seqs):
        col = int(numpy.where(Xp.indices == b)[0][0])
        got = Yp.data[: len(seq), col]
        numpy.testing.assert_allclose(got, _lstm_reference(model.get_param("LSTM"), seq, nI, nH, depth, dirs), atol=1e-10)
        assert not Yp.data[len(seq) :, col].any()
    # Batch invariance: each sequence alone gives the same rows.
    alone = model.predict(_padded(model.ops, seqs[:1])).data[:, 0]
    col0 = int(numpy.where(Xp.indices == 0)[0][0])
    numpy.testing.assert_allclose(Yp.data[:4, col0], alone, atol=1e-12)
    # Padding cells are not inputs: dY is zero there, and so must dX be.
    mask = numpy.arange(Xp.data.shape[1])[None, :] < Xp.size_at_t[:, None]
    Y, backprop = model.begin_update(Xp)
    dY = rng.normal(size=Y.data.shape) * mask[:, :, None]

    def loss():
        return float((model.predict(Xp).data * dY).sum())

    dX = backprop(Padded(dY.copy(), Y.size_at_t, Y.lengths, Y.indices))
    num_dX = _numeric_grad(loss, Xp.data)
    numpy.testing.assert_allclose(dX.data, num_dX * mask[:, :, None], atol=1e-6)
    numpy.testing.assert_allclose(model.get_grad("LSTM"), _numeric_grad(loss, model.get_param("LSTM")), atol=1e-6)
    assert not model.has_grad("HC0")


def test_lstm_matches_thinc_forward():
    t = pytest.importorskip("thinc.api")
    rng = _rng(4)
    seqs = [rng.normal(size=(n, 3)).astype("f") for n in (5, 1, 3)]
    for bi, depth in ((False, 1), (True, 2)):
        tm = t.LSTM(6, 3, bi=bi, depth=depth).initialize()
        tm.set_param("LSTM", rng.normal(scale=0.5, size=tm.get_param("LSTM").shape).astype("f"))
        pm = LSTM(6, 3, bi=bi, depth=depth).from_bytes(tm.to_bytes())
        Xt = t.NumpyOps().list2padded(seqs)
        Xp = pm.ops.list2padded(seqs)
        numpy.testing.assert_allclose(pm.predict(Xp).data, tm.predict(Xt).data, atol=1e-6)
        Yp, _ = pm.begin_update(Xp)
        Yt, _ = tm.begin_update(Xt)
        numpy.testing.assert_allclose(Yp.data, Yt.data, atol=1e-6)


def test_lstm_gradients_are_zero_for_a_zero_output_gradient():
    # Backprop is linear in dY. (thinc 8.3.14's LSTM returns a non-zero parameter gradient here,
    # norm ~7.9 for this model: under a zero-initialised Softmax, whose first backprop sends zeros,
    # that noise moves thinc's LSTM before any signal arrives; bench/README.md, the tagger's
    # batch-256 cells. plait keeps the exact gradient.)
    rng = _rng(5)
    model = LSTM(8, 4, bi=True, depth=2).initialize()
    Xp = model.ops.list2padded([rng.normal(size=(n, 4)).astype("f") for n in (5, 3, 7)])
    Y, backprop = model.begin_update(Xp)
    dX = backprop(Padded(numpy.zeros_like(Y.data), Y.size_at_t, Y.lengths, Y.indices))
    assert not numpy.any(model.get_grad("LSTM"))
    assert not numpy.any(dX.data)


def test_lstm_padding_stays_zero_with_an_empty_sequence_in_the_batch():
    # The numpy path copies each step's rows as one block and zeroes only the padding after
    # them; an empty sequence is a column that is padding at every step.
    rng = _rng()
    model = LSTM(4, 3, bi=True)
    model.initialize()
    _float64(model, rng)
    seqs = [rng.normal(size=(n, 3)) for n in (3, 0, 5, 1)]
    Xp = _padded(model.ops, seqs)
    Yp, backprop = model.begin_update(Xp)
    assert Yp.data.shape == (5, 4, 4)
    dYp = Padded(numpy.ones_like(Yp.data), Yp.size_at_t, Yp.lengths, Yp.indices)
    dXp = backprop(dYp)
    assert dXp.data.shape == Xp.data.shape
    for col, n in enumerate(Xp.lengths):
        assert not Yp.data[n:, col].any() and not dXp.data[n:, col].any()
        assert Yp.data[:n, col].all() and (n == 0 or dXp.data[:n, col].any())
    # The empty sequence changes nothing for the others.
    alone = model.predict(_padded(model.ops, [seqs[2]])).data[:, 0]
    col = int(numpy.where(Xp.indices == 2)[0][0])
    numpy.testing.assert_allclose(Yp.data[:, col], alone, atol=1e-12)


@pytest.mark.parametrize("bi,depth", [(False, 1), (True, 2)])
@pytest.mark.parametrize("seq_dtype", ["float32", "float64"])
def test_with_padded_lstm_skips_the_padded_batch_with_the_same_results(bi, depth, seq_dtype):
    # with_padded hands plait's LSTM lists and Ragged without a Padded batch in between (the
    # rows packed step by step in list2padded's order). Everything must be bit for bit what
    # the Padded path gives: outputs, dX, the weight gradient, weight dropout's draws, with
    # ties in length, an empty sequence and inputs of another dtype than the weights.
    from plait.layers.with_padded import with_padded

    rng = _rng(6)
    model = with_padded(LSTM(6, 3, bi=bi, depth=depth, dropout=0.3))
    seqs = [rng.normal(size=(n, 3)).astype(seq_dtype) for n in (4, 0, 2, 4, 1, 3)]
    model.initialize(X=seqs)
    lstm = model.layers[0]
    ops = model.ops
    dYs = [rng.normal(size=(len(x), 6)).astype("float32") for x in seqs]

    def run(X, dY):
        numpy.random.seed(11)
        lstm.set_grad("LSTM", numpy.zeros_like(lstm.get_param("LSTM")))
        Y, backprop = model.begin_update(X)
        return Y, backprop(dY), lstm.get_grad("LSTM").copy()

    Y, dX, grad = run(seqs, dYs)
    assert isinstance(Y, list) and [y.shape for y in Y] == [(len(x), 6) for x in seqs]
    assert all(y.dtype == numpy.float32 for y in Y) and all(d.dtype == numpy.float32 for d in dX)
    Xp = ops.list2padded(seqs)
    Yp, dXp, grad_p = run(Xp, ops.list2padded(dYs))
    for got, want in zip(Y, ops.padded2list(Yp)):
        assert got.tobytes() == want.tobytes()
    for got, want in zip(dX, ops.padded2list(dXp)):
        assert got.tobytes() == want.tobytes()
    assert grad.tobytes() == grad_p.tobytes()
    lengths = numpy.array([len(x) for x in seqs], dtype="int32")
    Yr, dXr, grad_r = run(Ragged(numpy.concatenate(seqs), lengths), Ragged(numpy.concatenate(dYs), lengths))
    assert Yr.dataXd.tobytes() == numpy.concatenate(Y).tobytes()
    assert dXr.dataXd.tobytes() == numpy.concatenate(dX).tobytes()
    numpy.testing.assert_array_equal(Yr.lengths, lengths)
    assert grad_r.tobytes() == grad.tobytes()
    # The path was taken (it returns None where the general path must run).
    unpadded = sys.modules["plait.layers.with_padded"]._unpadded
    assert unpadded(lstm, numpy.concatenate(seqs), lengths, False) is not None
    assert unpadded(lstm, numpy.zeros((4, 5), dtype="f"), [4], False) is None  # width 5, not nI
    # A layer opts in through its forward function's `unpadded`: given another forward, the
    # LSTM takes the Padded path.
    from plait.layers import lstm as lstm_module

    other = LSTM(6, 3).initialize()
    other.replace_callbacks(lambda m, X, is_train: lstm_module.forward(m, X, is_train))
    assert unpadded(other, numpy.concatenate(seqs).astype("f"), lengths, False) is None
    assert [y.shape for y in with_padded(other).predict(seqs)] == [(len(x), 6) for x in seqs]
    predicted = model.predict(seqs)
    for got, want in zip(predicted, ops.padded2list(model.predict(Xp))):
        assert got.tobytes() == want.tobytes()
    # Gradients that do not match the outputs, or a backprop after predict, are refused.
    _, backprop = model.begin_update(seqs)
    with pytest.raises(ValueError, match="one gradient per sequence"):
        backprop(dYs[:-1])
    with pytest.raises(ValueError, match="one gradient per sequence"):
        backprop(dYs[:-1] + [numpy.zeros((5, 6), dtype="f")])
    _, backprop = model.begin_update(Ragged(numpy.concatenate(seqs), lengths))
    with pytest.raises(ValueError, match="output's lengths"):
        backprop(Ragged(numpy.concatenate(dYs), lengths[::-1].copy()))
    _, backprop = model(seqs, is_train=False)
    with pytest.raises(ValueError, match="is_train=False"):
        backprop(dYs)


def test_lstm_init_dropout_and_errors():
    with pytest.raises(ValueError, match="depth"):
        LSTM(4, 3, depth=0)
    model = LSTM(bi=True)
    seqs = [numpy.ones((2, 3), dtype="f")]
    Xp = model.ops.list2padded(seqs)
    model.initialize(X=Xp, Y=model.ops.list2padded([numpy.ones((2, 6), dtype="f")]))
    assert model.get_dim("nI") == 3 and model.get_dim("nO") == 6
    size = model.get_param("LSTM").size
    assert size == 2 * 4 * 3 * (3 + 3 + 2)
    with pytest.raises(ValueError, match="even"):
        LSTM(5, 3, bi=True).initialize()
    with pytest.raises(ValueError, match="nI"):
        LSTM(4).initialize()
    with pytest.raises(ValueError, match=r"\(nL, nB, 3\)"):
        model.predict(model.ops.list2padded([numpy.ones((2, 4), dtype="f")]))
    with pytest.raises(TypeError, match="Padded"):
        model.predict(numpy.ones((2, 3), dtype="f"))
    _, backprop = model(Xp, is_train=False)
    with pytest.raises(ValueError, match="is_train=False"):
        backprop(Xp)
    # The same refusal where with_padded hands the LSTM a list without a Padded batch.
    from plait.layers.with_padded import with_padded

    wrapped = with_padded(model)
    Ys, backprop = wrapped(seqs, is_train=False)
    with pytest.raises(ValueError, match="is_train=False"):
        backprop([numpy.ones_like(y) for y in Ys])
    # Weight dropout changes training outputs only.
    drop = LSTM(6, 3, dropout=0.5).initialize()
    plain = LSTM(6, 3).from_bytes(drop.to_bytes())
    assert plain.attrs["dropout_rate"] == 0.5
    plain.attrs["dropout_rate"] = 0.0
    Xp = model.ops.list2padded([numpy.linspace(-1, 1, 9, dtype="f").reshape(3, 3)])
    numpy.testing.assert_array_equal(drop.predict(Xp).data, plain.predict(Xp).data)
    assert not numpy.allclose(drop.begin_update(Xp)[0].data, plain.begin_update(Xp)[0].data)
    _roundtrip(lambda: LSTM(4, 3, bi=True, depth=2), Xp)


def test_data_validation_names_the_layer():
    from plait.util import DataValidationError, data_validation

    with data_validation(True):
        with pytest.raises(DataValidationError, match="embed"):
            Embed(3, 5).initialize(X=numpy.zeros((3,), dtype="f"))
        with pytest.raises(DataValidationError, match="lstm"):
            LSTM(4, 3).initialize(X=numpy.zeros((3, 3), dtype="f"))
        with pytest.raises(DataValidationError, match="reduce_sum"):
            reduce_sum().initialize(X=numpy.zeros((3, 3), dtype="f"))
        Embed(3, 5).initialize(X=numpy.zeros((3,), dtype="i"))
        reduce_sum().initialize(X=Ragged(numpy.zeros((3, 2), dtype="f"), numpy.array([3], dtype="i")))


def test_pytorch_lstm():
    assert PyTorchLSTM(4, 3, depth=0).name == "noop"
    try:
        model = PyTorchLSTM(4, 3)
    except NotImplementedError as err:
        assert "PyTorch" in str(err)
    except ImportError:
        pytest.skip("PyTorch is not installed")
    else:
        assert model.name.startswith("with_padded")


# --------------------------------------------------------------------------- expand_window


def test_expand_window():
    rng = _rng()
    X = rng.normal(size=(4, 2))
    model = expand_window(1)
    Y = model.predict(X)
    Z = numpy.zeros(2)
    expected = [numpy.concatenate([X[i - 1] if i > 0 else Z, X[i], X[i + 1] if i < 3 else Z]) for i in range(4)]
    numpy.testing.assert_array_equal(Y, numpy.array(expected))
    _check_grads(model, X, get_X_array=lambda X: X, params=False)
    lengths = numpy.array([1, 3], dtype="int32")
    Yr = model.predict(Ragged(X, lengths))
    numpy.testing.assert_array_equal(Yr.data[0], numpy.concatenate([Z, X[0], Z]))
    numpy.testing.assert_array_equal(Yr.data[1:], model.predict(X[1:]))
    _check_grads(model, Ragged(X, lengths), get_X_array=lambda Xr: Xr.data, params=False)
    Y, backprop = expand_window(2).begin_update(X[:0])
    assert Y.shape == (0, 10) and backprop(Y).shape == (0, 2)
    with pytest.raises(ValueError, match="window_size"):
        expand_window(-1)
    t = pytest.importorskip("thinc.api")
    Xf = X.astype("f")
    numpy.testing.assert_array_equal(expand_window(2).predict(Xf), t.expand_window(2).predict(Xf))


# --------------------------------------------------------------------------- reductions

REDUCE = [
    (reduce_first, lambda seq: seq[0]),
    (reduce_last, lambda seq: seq[-1]),
    (reduce_max, lambda seq: seq.max(axis=0)),
    (reduce_mean, lambda seq: seq.mean(axis=0)),
    (reduce_sum, lambda seq: seq.sum(axis=0)),
]


@pytest.mark.parametrize("factory,ref", REDUCE, ids=[f.__name__ for f, _ in REDUCE])
def test_reductions(factory, ref):
    rng = _rng()
    lengths = numpy.array([2, 1, 3], dtype="int32")
    X = rng.normal(size=(6, 4))
    model = factory()
    assert model.name == factory.__name__
    Xr = Ragged(X, lengths)
    Y = model.predict(Xr)
    expected = numpy.vstack([ref(X[a:b]) for a, b in ((0, 2), (2, 3), (3, 6))])
    numpy.testing.assert_allclose(Y, expected)
    _check_grads(model, Xr, get_X_array=lambda Xr: Xr.data, params=False)
    _, backprop = model.begin_update(Xr)
    with pytest.raises(ValueError, match="Shape mismatch"):
        backprop(numpy.zeros((2, 4)))
    with pytest.raises(ValueError, match="Type mismatch"):
        backprop(numpy.zeros((3, 4), dtype="f"))
    t = pytest.importorskip("thinc.api")
    Xf = X.astype("f")
    numpy.testing.assert_allclose(
        model.predict(Ragged(Xf, lengths)), getattr(t, factory.__name__)().predict(t.Ragged(Xf, lengths)), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("factory", [reduce_first, reduce_last, reduce_max])
def test_reductions_refuse_empty_sequences(factory):
    with pytest.raises(ValueError, match="> 0"):
        factory().predict(Ragged(numpy.ones((2, 3), dtype="f"), numpy.array([2, 0], dtype="i")))


def test_reduce_mean_sum_empty_sequence_is_zero():
    Xr = Ragged(numpy.ones((2, 3), dtype="f"), numpy.array([2, 0], dtype="i"))
    assert not reduce_mean().predict(Xr)[1].any() and not reduce_sum().predict(Xr)[1].any()


# --------------------------------------------------------------------------- id mapping


def test_remap_ids_v1():
    model = remap_ids({"a": 1, "b": 2}, default=7)
    Y, backprop = model(["a", "z", "b"], is_train=False)
    assert Y.tolist() == [[1], [7], [2]] and Y.dtype == numpy.int32 and backprop(Y) == []
    assert remap_ids({"a": 1}, dtype="int64").predict(["a"]).dtype == numpy.int64
    assert remap_ids().predict([]).shape == (0, 1)
    m1, m2 = remap_ids(), remap_ids()
    m1.attrs["mapping_table"]["x"] = 3
    assert m2.predict(["x"]).tolist() == [[0]] and m1.predict(["x"]).tolist() == [[3]]
    model.attrs["mapping_table"] = {"z": 4}
    assert model.predict(["z"]).tolist() == [[4]]
    with pytest.raises(TypeError, match="sequence"):
        model.predict("abc")
    _roundtrip(lambda: remap_ids({"q": 5}, default=1), ["q", "r"])


def test_remap_ids_v2():
    model = remap_ids_v2({3: 1, 4: 2}, default=9, column=0)
    X = numpy.array([[3, 0], [5, 1], [4, 1]])
    Y, backprop = model(X, is_train=False)
    assert Y.tolist() == [[1], [9], [2]] and Y.dtype == numpy.int32
    assert backprop(Y).shape == (3, 1) and not backprop(Y).any()
    plain = remap_ids_v2({"x": 1})
    Y, backprop = plain(["x", "y"], is_train=False)
    assert Y.tolist() == [[1], [0]] and backprop(Y) == []
    assert remap_ids_v2({3: 1}).predict(numpy.array([3, 4])).tolist() == [[1], [0]]
    with pytest.raises(ValueError, match="mapping table"):
        remap_ids_v2().predict([1])
    with pytest.raises(ValueError, match="column"):
        remap_ids_v2({3: 1}).predict(X)
    t = pytest.importorskip("thinc.api")
    numpy.testing.assert_array_equal(model.predict(X), t.remap_ids_v2({3: 1, 4: 2}, default=9, column=0).predict(X))


def test_premap_ids():
    model = premap_ids({1: 0, 2: 3, 4: 9, 2**63 + 5: 11}, default=5)
    X = numpy.array([1, 2, 3, 4, 2], dtype="int64")
    Y, backprop = model(X, is_train=False)
    assert Y.tolist() == [[0], [3], [5], [9], [3]] and Y.dtype == numpy.int32
    assert backprop(Y).shape == (5, 1)
    for dtype in ("int32", "uint64", "uint32"):
        assert model.predict(X.astype(dtype)).tolist() == Y.tolist()
    assert model.predict(numpy.array([2**63 + 5], dtype="uint64")).tolist() == [[11]]
    col = premap_ids({7: 1}, column=1)
    assert col.predict(numpy.array([[7, 7], [0, 8]])).tolist() == [[1], [0]]
    assert len(model.attrs["mapping_table"]) == 4 and model.attrs["mapping_table"][2] == 3
    assert model.attrs["mapping_table"][99] is None
    model.attrs["mapping_table"][99] = 1
    assert model.predict(numpy.array([99])).tolist() == [[1]]
    with pytest.raises(ValueError, match="Mapping\\[int, int\\]"):
        premap_ids({"a": 1})
    with pytest.raises(ValueError, match="column"):
        premap_ids({1: 2}).predict(numpy.zeros((2, 2), dtype="i"))
    with pytest.raises(TypeError, match="integer"):
        premap_ids({1: 2}).predict(numpy.zeros(2, dtype="f"))
    t = pytest.importorskip("thinc.api")
    tm = t.premap_ids({1: 0, 2: 3, 4: 9}, default=5)
    numpy.testing.assert_array_equal(premap_ids({1: 0, 2: 3, 4: 9}, default=5).predict(X), tm.predict(X))


@needs_attr_skipping
def test_premap_ids_bytes_skip_the_table():
    model = premap_ids({1: 2}, default=3, column=None)
    other = premap_ids({1: 4}, default=0).from_bytes(model.to_bytes())
    assert other.attrs["default"] == 3 and other.predict(numpy.array([1])).tolist() == [[4]]


# --------------------------------------------------------------------------- uniqued


def test_uniqued():
    rng = _rng()
    inner = _float64(Embed(3, 10, column=0).initialize(), rng)
    model = uniqued(inner, column=0)
    assert model.name == "uniqued(ints-getitem>>embed)" and model.layers[0] is inner
    X = numpy.array([[4], [1], [4], [4], [7]], dtype="uint64")
    numpy.testing.assert_allclose(model.predict(X), inner.predict(X))
    dY = rng.normal(size=(5, 3))
    _, bp_u = model.begin_update(X)
    bp_u(dY)
    grad_u = inner.layers[1].get_grad("E").copy()
    inner.layers[1].set_grad("E", numpy.zeros_like(grad_u))
    _, bp_plain = inner.begin_update(X)
    bp_plain(dY)
    numpy.testing.assert_allclose(grad_u, inner.layers[1].get_grad("E"))
    one = X[:1]
    numpy.testing.assert_allclose(model.predict(one), inner.predict(one))
    lin = uniqued(Linear(2, 3), column=1)
    lin.initialize(X=numpy.zeros((2, 3)))
    assert lin.get_dim("nI") == 3 and lin.get_dim("nO") == 2
    with pytest.raises(ValueError, match="column 1"):
        uniqued(Embed(3, 10), column=1).predict(numpy.array([1, 2], dtype="i"))
    t = pytest.importorskip("thinc.api")
    tm = t.uniqued(t.Embed(3, 10, column=0), column=0).initialize()
    pm = uniqued(Embed(3, 10, column=0), column=0).from_bytes(tm.to_bytes())
    numpy.testing.assert_array_equal(pm.predict(X), tm.predict(X))


# --------------------------------------------------------------------------- resizable


def test_resizable_and_resize_linear_weighted():
    rng = _rng()
    model = resizable(Linear(3, 2), resize_linear_weighted)
    assert model.name == "resizable(linear)" and model.dim_names == ("nO", "nI")
    assert model.get_dim("nO") == 3
    model.initialize()
    X = rng.normal(size=(4, 2)).astype("f")
    before = model.predict(X)
    old_W = model.layers[0].get_param("W").copy()
    resize_model(model, 5)
    assert model.layers[0].get_dim("nO") == 5
    after = model.predict(X)
    numpy.testing.assert_allclose(after[:, :3], before, rtol=1e-5, atol=1e-6)
    assert not after[:, 3:].any()
    numpy.testing.assert_array_equal(model.layers[0].get_param("W")[:3], old_W)
    layer = Linear(3, 2).initialize()
    bigger = resize_linear_weighted(layer, 4, fill_defaults={"b": 1.5})
    assert bigger.get_param("b").tolist()[3] == 1.5 and bigger is not layer
    assert resize_linear_weighted(layer, 3) is layer
    unset = Linear()
    assert resize_linear_weighted(unset, 6) is unset and unset.get_dim("nO") == 6
    no_nI = Linear(3)
    assert resize_linear_weighted(no_nI, 8) is no_nI and no_nI.get_dim("nO") == 8
    with pytest.raises(ValueError, match="single layers"):
        resize_linear_weighted(resizable(Linear(3, 2), resize_linear_weighted), 5)
    with pytest.raises(TypeError, match="callable"):
        resizable(Linear(3, 2), None)
    t = pytest.importorskip("thinc.api")
    from thinc.layers.resizable import resize_linear_weighted as t_resize

    tl = t.Linear(3, 2).initialize()
    pl = Linear(3, 2).from_bytes(tl.to_bytes())
    tl2 = t_resize(tl, 5)
    pl2 = resize_linear_weighted(pl, 5)
    numpy.testing.assert_allclose(pl2.predict(X), tl2.predict(X), rtol=1e-5, atol=1e-6)


@needs_attr_skipping
def test_resizable_roundtrip():
    _roundtrip(lambda: resizable(Linear(3, 2), resize_linear_weighted), numpy.ones((2, 2), dtype="f"))


def test_hashembed_second_backprop_adds_into_the_same_gradient_array():
    # From the second backprop on, HashEmbed adds its rows straight into the table's gradient
    # (Model._grad_buffer); the result must be what inc_grad gives: the sum of both passes.
    import numpy

    from plait.api import HashEmbed

    model = HashEmbed(nO=4, nV=13, seed=3)
    ids = numpy.asarray([1, 5, 5, 9, 2**40], dtype="uint64")
    model.initialize(X=ids)
    Y, backprop = model.begin_update(ids)
    dY1 = numpy.random.default_rng(0).standard_normal(Y.shape).astype("f")
    dY2 = numpy.random.default_rng(1).standard_normal(Y.shape).astype("f")
    backprop(dY1)
    first = model.get_grad("E").copy()
    buffer = model.get_grad("E")
    backprop(dY2)
    assert model.get_grad("E") is buffer
    fresh = HashEmbed(nO=4, nV=13, seed=3)
    fresh.initialize(X=ids)
    fresh.set_param("E", model.get_param("E").copy())
    _, bp_fresh = fresh.begin_update(ids)
    bp_fresh(dY2)
    numpy.testing.assert_allclose(model.get_grad("E"), first + fresh.get_grad("E"), rtol=1e-6, atol=1e-6)


def test_embed_second_backprop_adds_into_the_same_gradient_array():
    # Embed, like HashEmbed, adds its rows straight into the table's gradient once it has one;
    # repeated ids and an optimizer step between passes must give what inc_grad gives.
    import numpy

    from plait.api import Adam, Embed

    model = Embed(nO=4, nV=11)
    ids = numpy.asarray([1, 5, 5, 9, 0], dtype="uint64")
    model.initialize(X=ids)
    rng = numpy.random.default_rng(2)
    Y, backprop = model.begin_update(ids)
    dY1, dY2 = (rng.standard_normal(Y.shape).astype("f") for _ in range(2))
    backprop(dY1)
    first = model.get_grad("E").copy()
    buffer = model.get_grad("E")
    backprop(dY2)
    assert model.get_grad("E") is buffer
    want = numpy.zeros((11, 4), dtype="f")
    numpy.add.at(want, ids.astype("int64"), dY1 + dY2)
    numpy.testing.assert_allclose(model.get_grad("E"), want, rtol=1e-6, atol=1e-6)
    model.finish_update(Adam(0.01))
    _, backprop = model.begin_update(ids)
    backprop(dY1)  # after the step: the zeroed buffer takes this pass alone
    numpy.testing.assert_allclose(model.get_grad("E"), first, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("layer", ["Embed", "HashEmbed"])
def test_embedding_rows_reach_a_store_that_lends_no_gradient_buffer(layer):
    # DataParallel's overlapped update swaps in a store that must see every gradient through
    # inc_grad (it refuses grad_buffer); the embedding layers' in-place rows must respect that,
    # as Linear's products do, and still add up to the same gradient.
    import numpy

    from plait import api
    from plait.distributed._data_parallel import _CountingStore

    model = getattr(api, layer)(nO=4, nV=11)
    ids = numpy.asarray([1, 5, 5, 9, 0], dtype="uint64")
    model.initialize(X=ids)
    told = []
    Y, backprop = model.begin_update(ids)
    dY = numpy.random.default_rng(4).standard_normal(Y.shape).astype("f")
    backprop(dY)
    once = model.get_grad("E").copy()
    model._params = _CountingStore(model._params, lambda mid, name: told.append(name))
    backprop(dY)
    assert told == ["E"]
    numpy.testing.assert_allclose(model.get_grad("E"), 2 * once, rtol=1e-6, atol=1e-6)


def test_model_grad_buffer_declines_without_a_local_gradient():
    import numpy

    from plait.api import HashEmbed

    model = HashEmbed(nO=4, nV=13)
    model.initialize(X=numpy.asarray([1, 2], dtype="uint64"))
    assert model._grad_buffer("E") is None  # no gradient yet
    # A gradient of another dtype (put on the param server directly) is left to inc_grad.
    model._params.set_grad(model.id, "E", numpy.zeros((13, 4), dtype="float64"))
    assert model._grad_buffer("E") is None
    model.set_grad("E", numpy.zeros((13, 4), dtype="f"))
    assert model._grad_buffer("E") is model.get_grad("E")
