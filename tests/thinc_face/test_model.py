"""Model: dims, params, grads, refs, walking, surgery, copying, operators and serialization."""
from __future__ import annotations

import pickle
import threading

import numpy
import pytest

from plait.backends import NumpyOps
from plait.model import Model, change_attr_values, set_dropout_rate, wrap_model_recursive
from plait.util import data_validation
from plait.types import Floats2d


def _affine_forward(model, X, is_train):
    W, b = model.get_param("W"), model.get_param("b")
    Y = X @ W.T + b

    def backprop(dY):
        model.inc_grad("W", dY.T @ X)
        model.inc_grad("b", dY.sum(axis=0))
        return dY @ W

    return Y, backprop


def _affine_init(model, X=None, Y=None):
    if X is not None:
        model.set_dim("nI", X.shape[1])
    if Y is not None:
        model.set_dim("nO", Y.shape[1])
    nO, nI = model.get_dim("nO"), model.get_dim("nI")
    model.set_param("W", numpy.arange(nO * nI, dtype="f").reshape(nO, nI) / 10)
    model.set_param("b", numpy.zeros(nO, dtype="f"))


def affine(nO=None, nI=None, name="affine"):
    return Model(name, _affine_forward, init=_affine_init, dims={"nO": nO, "nI": nI}, params={"W": None, "b": None})


def _seq_forward(model, X, is_train):
    callbacks = []
    for layer in model.layers:
        X, cb = layer(X, is_train)
        callbacks.append(cb)

    def backprop(dY):
        for cb in reversed(callbacks):
            dY = cb(dY)
        return dY

    return X, backprop


def _seq_init(model, X=None, Y=None):
    for layer in model.layers:
        layer.initialize()


def seq(*layers, name="seq"):
    return Model(name, _seq_forward, init=_seq_init, layers=list(layers), dims={"nO": None})


def test_ids_are_unique_across_threads():
    ids = []

    def make():
        for _ in range(200):
            ids.append(affine().id)

    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 800


def test_dims_get_set_has():
    m = affine(nO=3)
    assert m.has_dim("nO") is True and m.has_dim("nI") is None and m.has_dim("nZ") is False
    assert m.get_dim("nO") == 3 and m.maybe_get_dim("nI") is None
    assert m.dim_names == ("nO", "nI")
    m.set_dim("nI", numpy.int64(4))
    assert m.get_dim("nI") == 4 and type(m.get_dim("nI")) is int
    with pytest.raises(ValueError, match="'nI'.*'affine'.*4 to 5"):
        m.set_dim("nI", 5)
    m.set_dim("nI", 5, force=True)
    assert m.get_dim("nI") == 5


def test_unset_dim_error_names_model_and_dim():
    m = affine(name="my_linear")
    with pytest.raises(ValueError, match="dimension 'nO' for model 'my_linear': value unset"):
        m.get_dim("nO")
    with pytest.raises(ValueError, match="'nO'.*'my_linear'"):
        m.initialize()
    with pytest.raises(KeyError, match="'nZ'"):
        m.get_dim("nZ")
    with pytest.raises(KeyError, match="unknown dimension 'nZ'"):
        m.set_dim("nZ", 1)
    with pytest.raises(TypeError, match="'nO'.*str"):
        m.set_dim("nO", "3")


def test_force_cannot_change_dim_after_params_allocated():
    m = affine(2, 3).initialize()
    with pytest.raises(ValueError, match="already allocated"):
        m.set_dim("nO", 4, force=True)


def test_params_and_grads():
    m = affine(2, 3)
    assert m.param_names == ("W", "b") and m.has_param("W") is None and m.has_param("Z") is False
    with pytest.raises(ValueError, match="'W'.*'affine'.*not been allocated"):
        m.get_param("W")
    with pytest.raises(KeyError, match="Unknown parameter 'Z'"):
        m.get_param("Z")
    m.initialize()
    assert m.has_param("W") is True and m.grad_names == ()
    X = numpy.ones((4, 3), dtype="f")
    Y, backprop = m.begin_update(X)
    dX = backprop(numpy.ones_like(Y))
    assert dX.shape == X.shape and m.grad_names == ("W", "b")
    numpy.testing.assert_allclose(m.get_grad("b"), [4, 4])
    backprop(numpy.ones_like(Y))
    numpy.testing.assert_allclose(m.get_grad("b"), [8, 8])
    with pytest.raises(ValueError, match="Gradient for parameter 'W'.*shape \\(3, 3\\).*\\(2, 3\\)"):
        m.inc_grad("W", numpy.zeros((3, 3), "f"))
    with pytest.raises(TypeError, match="'W'.*list"):
        m.set_param("W", [[1.0]])
    grads = m.get_gradients()
    assert set(grads) == {(m.id, "W"), (m.id, "b")}


def test_refs():
    a, b = affine(name="a"), affine(name="b")
    m = Model("outer", _seq_forward, layers=[a, b], refs={"first": a, "spare": None})
    assert m.has_ref("first") is True and m.has_ref("spare") is None and m.has_ref("x") is False
    assert m.get_ref("first") is a and m.maybe_get_ref("spare") is None
    # As in Thinc, set_ref adds a name that was not declared (spaCy's Tok2Vec relies on it),
    # but only for a node of the tree.
    m.set_ref("x", a)
    assert m.get_ref("x") is a and "x" in m.ref_names
    with pytest.raises(ValueError, match="not in tree"):
        m.set_ref("y", affine(name="stranger"))
    assert not m.has_ref("y")
    with pytest.raises(TypeError, match="'first'.*int"):
        m.set_ref("first", 3)
    with pytest.raises(ValueError, match="'spare'.*unset"):
        m.get_ref("spare")


def test_walk_orders():
    leaves = [affine(name=n) for n in "abcd"]
    left = seq(leaves[0], leaves[1], name="L")
    right = seq(leaves[2], leaves[3], name="R")
    root = seq(left, right, name="root")
    assert [n.name for n in root.walk()] == ["root", "L", "R", "a", "b", "c", "d"]
    assert [n.name for n in root.walk(order="dfs_pre")] == ["root", "L", "a", "b", "R", "c", "d"]
    assert [n.name for n in root.walk(order="dfs_post")] == ["a", "b", "L", "c", "d", "R", "root"]
    with pytest.raises(ValueError, match="'sideways'"):
        root.walk(order="sideways")


def test_walk_visits_shared_nodes_once_and_handles_deep_trees():
    shared = affine(name="shared")
    root = seq(shared, seq(shared, name="inner"), name="root")
    assert [n.name for n in root.walk()] == ["root", "shared", "inner"]
    node = affine()
    for _ in range(5000):
        node = seq(node)
    assert len(list(node.walk(order="dfs_post"))) == 5001


def test_remove_and_replace_node():
    a, b, c = affine(name="a"), affine(name="b"), affine(name="c")
    root = Model("root", _seq_forward, layers=[a, b], refs={"r": b})
    assert root.replace_node(b, c) is True
    assert root.layers == [a, c] and root.get_ref("r") is c
    assert root.replace_node(b, c) is False
    root.remove_node(c)
    assert root.layers == [a] and root.has_ref("r") is None


def test_replace_callbacks():
    m = affine(2, 3).initialize()
    m.replace_callbacks(lambda model, X, is_train: (X * 2, lambda d: d))
    numpy.testing.assert_allclose(m.predict(numpy.ones((1, 3), "f")), [[2, 2, 2]])


def test_copy_is_deep_with_new_ids_and_shared_structure():
    shared = affine(2, 3, name="shared").initialize()
    root = Model("root", _seq_forward, layers=[shared, shared], refs={"r": shared}, attrs={"cfg": {"k": [1]}})
    copied = root.copy()
    assert copied.id != root.id and copied.layers[0].id != shared.id
    assert copied.layers[0] is copied.layers[1] and copied.get_ref("r") is copied.layers[0]
    copied.layers[0].get_param("W")[...] = 0
    assert shared.get_param("W").any()
    copied.attrs["cfg"]["k"].append(2)
    assert root.attrs["cfg"] == {"k": [1]}


def test_use_params_swaps_and_restores():
    m = seq(affine(2, 3, name="x").initialize())
    leaf = m.layers[0]
    original = leaf.get_param("W").copy()
    new_W = numpy.zeros_like(original)
    with m.use_params({(leaf.id, "W"): new_W}):
        assert not leaf.get_param("W").any()
    numpy.testing.assert_array_equal(leaf.get_param("W"), original)
    with pytest.raises(RuntimeError):
        with m.use_params({(leaf.id, "W"): new_W}):
            raise RuntimeError("boom")
    numpy.testing.assert_array_equal(leaf.get_param("W"), original)


def test_finish_update_calls_optimizer_per_param():
    m = affine(2, 3).initialize()
    Y, backprop = m.begin_update(numpy.ones((2, 3), "f"))
    backprop(numpy.ones_like(Y))
    calls = []

    def optimizer(key, param, grad):
        calls.append(key)
        return param - 1.0, grad * 0

    m.finish_update(optimizer)
    assert sorted(calls) == [(m.id, "W"), (m.id, "b")]
    numpy.testing.assert_allclose(m.get_param("b"), [-1, -1])


def test_define_operators_is_scoped():
    a, b = affine(name="a"), affine(name="b")
    with Model.define_operators({">>": lambda x, y: seq(x, y, name=f"{x.name}>>{y.name}"), "**": lambda x, n: x}):
        m = a >> b
        assert m.name == "a>>b" and (a ** 3) is a
    with pytest.raises(TypeError, match="Undefined operator: >>"):
        a >> b
    with pytest.raises(ValueError, match="'\\?'"):
        with Model.define_operators({"?": lambda x, y: x}):
            pass


def test_define_operators_is_thread_local():
    results = {}

    def other():
        try:
            affine() + affine()
        except TypeError:
            results["other"] = "undefined"

    with Model.define_operators({"+": lambda x, y: x}):
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert results["other"] == "undefined"


def test_serialization_round_trip_bytes_disk_dict(tmp_path):
    m = seq(affine(2, 3, name="x"), name="root")
    m.attrs["meta"] = {"a": 1}
    m.initialize()
    m.layers[0].get_param("W")[...] = numpy.random.rand(2, 3)
    data = m.to_bytes()
    fresh = seq(affine(2, 3, name="x"), name="root")
    fresh.attrs["meta"] = None
    assert fresh.can_from_bytes(data)
    fresh.from_bytes(data)
    numpy.testing.assert_array_equal(fresh.layers[0].get_param("W"), m.layers[0].get_param("W"))
    assert fresh.attrs["meta"] == {"a": 1}
    path = tmp_path / "model.bin"
    m.to_disk(path)
    assert [p.name for p in tmp_path.iterdir()] == ["model.bin"]
    other = seq(affine(2, 3, name="x"), name="root").from_disk(path)
    numpy.testing.assert_array_equal(other.layers[0].get_param("W"), m.layers[0].get_param("W"))
    assert other.can_from_disk(path) and not other.can_from_disk(tmp_path / "missing")
    assert m.to_dict()["nodes"][1] == {"index": 1, "name": "x", "dims": {"nO": 2, "nI": 3}, "refs": {}}


def test_from_bytes_refuses_other_architecture():
    m = seq(affine(2, 3), name="root").initialize()
    data = m.to_bytes()
    wrong = seq(affine(2, 3), affine(2, 2), name="root")
    assert not wrong.can_from_bytes(data)
    with pytest.raises(ValueError, match="mismatched structure.*2 nodes.*3"):
        wrong.from_bytes(data)
    wrong_dims = seq(affine(4, 3), name="root")
    assert not wrong_dims.can_from_bytes(data)
    with pytest.raises(ValueError, match="'nO'.*2 to 4|4 to 2"):
        wrong_dims.from_bytes(data)
    with pytest.raises(ValueError, match="not valid msgpack"):
        m.from_bytes(b"\xc1garbage")
    with pytest.raises(FileNotFoundError, match="no such file"):
        m.from_disk("/nonexistent/model.bin")


def test_to_disk_failure_leaves_old_file(tmp_path, monkeypatch):
    m = affine(2, 3).initialize()
    path = tmp_path / "m.bin"
    m.to_disk(path)
    before = path.read_bytes()
    monkeypatch.setattr(Model, "to_bytes", lambda self: (_ for _ in ()).throw(RuntimeError("disk full")))
    with pytest.raises(RuntimeError):
        m.to_disk(path)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["m.bin"]


def test_unserializable_attrs_are_skipped_not_fatal():
    m = affine(2, 3).initialize()
    m.attrs["fn"] = len
    m.attrs["rate"] = 0.5
    msg = m.to_dict()
    assert set(msg["attrs"][0]) == {"rate"}
    fresh = affine(2, 3)
    fresh.attrs["fn"] = len
    fresh.attrs["rate"] = 0.1
    fresh.from_bytes(m.to_bytes())
    assert fresh.attrs == {"fn": len, "rate": 0.5}


def test_pickle_and_deepcopy():
    m = seq(affine(2, 3, name="x")).initialize()
    clone = pickle.loads(pickle.dumps(m))
    numpy.testing.assert_array_equal(clone.layers[0].get_param("W"), m.layers[0].get_param("W"))


def test_dropout_and_attr_helpers():
    inner = Model("dropout", _seq_forward, attrs={"dropout_rate": 0.1})
    root = seq(inner, affine(name="other"))
    assert set_dropout_rate(root, 0.3) is root and inner.attrs["dropout_rate"] == 0.3
    change_attr_values(root, {"dropout": {"dropout_rate": 0.5, "missing": 1}})
    assert inner.attrs == {"dropout_rate": 0.5}


def test_wrap_model_recursive_wraps_every_node():
    leaf = affine(name="leaf")
    root = seq(leaf, name="root")

    def wrapper(node):
        return Model(f"wrap({node.name})", _seq_forward, layers=[node])

    wrapped = wrap_model_recursive(root, wrapper)
    assert wrapped.name == "wrap(root)"
    assert [n.name for n in wrapped.walk(order="dfs_pre")] == ["wrap(root)", "root", "wrap(leaf)", "leaf"]


def test_to_cpu_converts_params():
    m = affine(2, 3).initialize()
    m.to_cpu()
    assert isinstance(m.ops, NumpyOps) and isinstance(m.get_param("W"), numpy.ndarray)


def test_data_validation_on_initialize():
    def forward(model, X: Floats2d, is_train: bool):
        return X, lambda d: d

    m = Model("typed", forward)
    with data_validation(True):
        m.initialize(X=numpy.zeros((2, 2), "f"))
        with pytest.raises(ValueError, match="typed"):
            m.initialize(X=numpy.zeros((2, 2, 2), "f"))
    m.initialize(X=numpy.zeros((2, 2, 2), "f"))


def test_constructor_errors():
    with pytest.raises(TypeError, match="forward must be a callable"):
        Model("x", None)
    with pytest.raises(TypeError, match="layers\\[1\\]"):
        Model("x", _seq_forward, layers=[affine(), "nope"])
