"""Every registered layer, built from a config: initialize, forward, backprop, types, batch
invariance, numerical gradients of the weights, and serialization round trips.

The table below must list every name in `registry.layers` (a test enforces it), so a new
layer cannot be registered without being exercised here.
"""
from __future__ import annotations

import importlib.util
from typing import Any, Callable, Dict, List, Optional

import numpy
import pytest

import plait.layers  # noqa: F401  (registers every layer)
from plait.config import Config, registry
from plait.layers.resizable import resize_linear_weighted
from plait.model import Model
from plait.types import Padded, Ragged

rng = numpy.random.default_rng(0)
nB, nI, nO = 5, 4, 3


def _f2(n=nB, width=nI):
    return rng.uniform(-1, 1, (n, width)).astype("f")


def _lengths():
    return numpy.array([3, 1, 4, 2], dtype="i")


def _list_f2(width=nI):
    return [_f2(int(n), width) for n in _lengths()]


def _ragged(width=nI):
    lengths = _lengths()
    return Ragged(_f2(int(lengths.sum()), width), lengths)


def _padded(width=nI):
    from plait.backends import NumpyOps

    return NumpyOps().list2padded(_list_f2(width))


def _ints1d(n=nB, high=20):
    return rng.integers(0, high, n).astype("uint64")


def _ints2d(n=nB, cols=2, high=20):
    return rng.integers(0, high, (n, cols)).astype("uint64")


_HAS_TORCH = importlib.util.find_spec("torch") is not None


def _layer(name: str, **args: Any) -> Dict[str, Any]:
    return {"@layers": name, **args}


def _relu(nO_=nO, **kw):
    return _layer("Relu.v1", nO=nO_, **kw)


def _sparse_input():
    keys = rng.integers(0, 2**32, 8).astype("uint64")
    values = rng.uniform(-1, 1, 8).astype("f")
    lengths = numpy.array([3, 1, 2, 2], dtype="i")
    return (keys, values, lengths)


# name -> (config args, X factory, options). Options:
#   split: how to cut X into batch items for the invariance check: "rows" (arrays),
#          "items" (lists and tuples of parallel items), "ragged", "padded", None (skip)
#   grad: check param gradients numerically (layers with weights)
#   skip: reason the layer cannot run here (framework wrappers)
#   Y: sample output factory for initialize, if the layer needs Y to infer nO
TABLE: Dict[str, tuple] = {
    # --- weights and activations --------------------------------------------------
    "Linear.v1": ({"nO": nO}, _f2, {"split": "rows", "grad": True}),
    "Relu.v1": ({"nO": nO}, _f2, {"split": "rows", "grad": True}),
    "Sigmoid.v1": ({"nO": nO}, _f2, {"split": "rows", "grad": True}),
    "Swish.v1": ({"nO": nO}, _f2, {"split": "rows", "grad": True}),
    "Gelu.v1": ({"nO": nO}, _f2, {"split": "rows", "grad": True}),
    "Dish.v1": ({"nO": nO}, _f2, {"split": "rows", "grad": True}),
    "Mish.v1": ({"nO": nO}, _f2, {"split": "rows", "grad": True}),
    "HardSwish.v1": ({"nO": nO}, _f2, {"split": "rows", "grad": True}),
    "HardSwishMobilenet.v1": ({"nO": nO}, _f2, {"split": "rows", "grad": True}),
    "HardSigmoid.v1": ({"nO": nO}, _f2, {"split": "rows", "grad": True}),
    "HardTanh.v1": ({"nO": nO}, _f2, {"split": "rows", "grad": True}),
    "ReluK.v1": ({"nO": nO, "k": 0.5}, _f2, {"split": "rows", "grad": True}),
    "ClippedLinear.v1": ({"nO": nO, "slope": 0.7, "offset": 0.1, "min_val": -0.5, "max_val": 0.5}, _f2, {"split": "rows", "grad": True}),
    "Maxout.v1": ({"nO": nO, "nP": 2, "normalize": True}, _f2, {"split": "rows", "grad": True}),
    "Softmax.v1": ({"nO": nO}, _f2, {"split": "rows", "grad": "xent"}),
    "Softmax.v2": ({"nO": nO, "temperature": 0.7}, _f2, {"split": "rows", "grad": "xent"}),
    "MultiSoftmax.v1": ({"nOs": [2, 3]}, _f2, {"split": "rows", "grad": "xent", "groups": (2, 3)}),
    "LayerNorm.v1": ({}, _f2, {"split": "rows", "grad": True}),
    "Logistic.v1": ({}, _f2, {"split": "rows"}),
    "sigmoid_activation.v1": ({}, _f2, {"split": "rows"}),
    "softmax_activation.v1": ({}, _f2, {"split": "rows"}),
    "Dropout.v1": ({"rate": 0.0}, _f2, {"split": "rows"}),
    "CauchySimilarity.v1": ({}, lambda: (_f2(), _f2()), {"split": "items", "grad": True}),
    # --- embeddings, sparse, sequence ---------------------------------------------
    "Embed.v1": ({"nO": nO, "nV": 20}, lambda: _ints1d(), {"split": "rows", "grad": True}),
    "HashEmbed.v1": ({"nO": nO, "nV": 20, "seed": 3}, lambda: _ints1d(high=10**6), {"split": "rows", "grad": True}),
    "StaticVectors.v1": ({"nO": nO, "vectors": rng.uniform(-1, 1, (10, nI)).astype("f")}, lambda: _ints1d(high=10), {"split": "rows", "grad": True}),
    "SparseLinear.v1": ({"nO": nO, "length": 64}, _sparse_input, {"split": None, "grad": True}),
    "SparseLinear.v2": ({"nO": nO, "length": 64}, _sparse_input, {"split": None, "grad": True}),
    "ParametricAttention.v1": ({"nO": nI}, _ragged, {"split": "ragged", "grad": True}),
    "ParametricAttention.v2": ({"nO": nI, "key_transform": _layer("Gelu.v1", nO=nI, nI=nI)}, _ragged, {"split": "ragged", "grad": True}),
    "LSTM.v1": ({"nO": nO, "nI": nI}, _padded, {"split": "padded", "grad": True}),
    # Its weights live in torch (no plait params to check here); tests/thinc_face/test_pytorch_wrapper.py
    # checks its gradients numerically.
    "PyTorchLSTM.v1": ({"nO": nO, "nI": nI}, _padded, {"split": "padded"} if _HAS_TORCH else {"skip": "needs PyTorch"}),
    "expand_window.v1": ({"window_size": 1}, _f2, {"split": None}),
    "reduce_first.v1": ({}, _ragged, {"split": "ragged"}),
    "reduce_last.v1": ({}, _ragged, {"split": "ragged"}),
    "reduce_max.v1": ({}, _ragged, {"split": "ragged"}),
    "reduce_mean.v1": ({}, _ragged, {"split": "ragged"}),
    "reduce_sum.v1": ({}, _ragged, {"split": "ragged"}),
    "premap_ids.v1": ({"mapping_table": {1: 0, 2: 1}}, lambda: numpy.array([1, 2, 5], dtype="int64"), {"split": "rows", "no_grad_input": True}),
    "remap_ids.v1": ({"mapping_table": {"a": 1, "b": 2}}, lambda: ["a", "b", "z"], {"split": "items", "no_grad_input": True}),
    "remap_ids.v2": ({"mapping_table": {"1": 0, "2": 1}}, lambda: numpy.array([1, 2, 5], dtype="uint64"), {"split": "rows", "no_grad_input": True}),
    "uniqued.v1": ({"layer": _layer("Embed.v1", nO=nO, nV=20, column=0), "column": 0}, lambda: _ints2d(high=4), {"split": "rows", "grad": True}),
    "resizable.v1": ({"layer": _layer("Softmax.v2", nO=nO), "resize_layer": resize_linear_weighted}, _f2, {"split": "rows", "grad": "xent"}),
    # --- combinators -----------------------------------------------------------------
    "chain.v1": ({"*": {"a": _relu(5), "b": _layer("Linear.v1", nO=nO)}}, _f2, {"split": "rows", "grad": True}),
    "add.v1": ({"*": {"a": _relu(), "b": _layer("Linear.v1", nO=nO)}}, _f2, {"split": "rows", "grad": True}),
    "concatenate.v1": ({"*": {"a": _relu(), "b": _layer("Linear.v1", nO=2)}}, _f2, {"split": "rows", "grad": True}),
    "clone.v1": ({"orig": _relu(nI), "n": 2}, _f2, {"split": "rows", "grad": True}),
    "residual.v1": ({"layer": _relu(nI)}, _f2, {"split": "rows", "grad": True}),
    "noop.v1": ({"*": {"unused": _relu()}}, _f2, {"split": "rows"}),
    "tuplify.v1": ({"*": {"a": _relu(), "b": _layer("Linear.v1", nO=2)}}, _f2, {"split": "rows", "grad": True}),
    "siamese.v1": ({"layer": _relu(nI, nI=nI), "similarity": _layer("CauchySimilarity.v1")}, lambda: (_f2(), _f2()), {"split": "items", "grad": True}),
    "bidirectional.v1": ({"l2r": _layer("LSTM.v1", nO=nO, nI=nI)}, _padded, {"split": "padded", "grad": True}),
    # --- data type transfers -----------------------------------------------------------
    "list2array.v1": ({}, _list_f2, {"split": None}),
    "list2ragged.v1": ({}, _list_f2, {"split": "items"}),
    "list2padded.v1": ({}, _list_f2, {"split": "items"}),
    "ragged2list.v1": ({}, _ragged, {"split": "ragged"}),
    "padded2list.v1": ({}, _padded, {"split": "padded"}),
    "strings2arrays.v1": ({}, lambda: [["a", "bc"], ["d"]], {"split": "items", "no_grad_input": True}),
    "with_array.v1": ({"layer": _relu()}, _list_f2, {"split": "items", "grad": True}),
    "with_array2d.v1": ({"layer": _relu()}, _list_f2, {"split": "items", "grad": True}),
    "with_list.v1": ({"layer": _layer("with_array.v1", layer=_relu())}, _padded, {"split": "padded", "grad": True}),
    "with_padded.v1": ({"layer": _layer("LSTM.v1", nO=nO, nI=nI)}, _list_f2, {"split": "items", "grad": True}),
    "with_ragged.v1": ({"layer": _layer("ParametricAttention.v1", nO=nI)}, _list_f2, {"split": "items", "grad": True}),
    # v1's inner layer maps the flat list of items to one array, split back by item count.
    "with_flatten.v1": (
        {"layer": _layer("chain.v1", **{"*": {"a": _layer("list2array.v1"), "b": _relu()}})},
        lambda: [[_f2(1) for _ in range(3)], [_f2(1) for _ in range(2)]],
        {"split": "items", "grad": True},
    ),
    "with_flatten.v2": ({"layer": _layer("with_array.v1", layer=_relu())}, lambda: [_list_f2(), _list_f2()[:2]], {"split": "items", "grad": True}),
    "with_getitem.v1": ({"idx": 1, "layer": _relu(nI)}, lambda: (_f2(), _f2()), {"split": "items", "grad": True}),
    "with_reshape.v1": ({"layer": _relu(nI)}, lambda: rng.uniform(-1, 1, (nB, 3, nI)).astype("f"), {"split": "rows", "grad": True}),
    "with_cpu.v1": ({"layer": _relu(), "ops": {"@ops": "NumpyOps"}}, _f2, {"split": "rows", "grad": True}),
    # --- framework wrappers (a later issue) -------------------------------------------------
    "PyTorchWrapper.v1": ({}, _f2, {"skip": "wraps a torch module, which a config cannot build (see test_pytorch_wrapper.py)"}),
    "PyTorchWrapper.v2": ({}, _f2, {"skip": "wraps a torch module, which a config cannot build (see test_pytorch_wrapper.py)"}),
    "PyTorchWrapper.v3": ({}, _f2, {"skip": "wraps a torch module, which a config cannot build (see test_pytorch_wrapper.py)"}),
    "PyTorchRNNWrapper.v1": ({}, _f2, {"skip": "wraps a torch module, which a config cannot build (see test_pytorch_wrapper.py)"}),
    "MXNetWrapper.v1": ({}, _f2, {"skip": "framework wrappers are a later issue"}),
}

# Output of strings2arrays etc. carries no gradient into integer inputs.
_FLOAT_KINDS = ("f",)


def _build(name: str) -> Model:
    args, _, opts = TABLE[name]
    return registry.resolve(Config({"model": {"@layers": name, **args}}))["model"]


def _build_and_init(name: str):
    _, make_X, opts = TABLE[name]
    if "skip" in opts:
        pytest.skip(opts["skip"])
    numpy.random.seed(0)
    model = _build(name)
    X = make_X()
    model.initialize(X=X)
    return model, X, opts


def _map_floats(value: Any, fn: Callable[[numpy.ndarray], numpy.ndarray]) -> Any:
    """Apply fn to every float array inside an output structure, keeping its type."""
    if isinstance(value, Ragged):
        return Ragged(fn(value.data), value.lengths)
    if isinstance(value, Padded):
        return Padded(fn(value.data), value.size_at_t, value.lengths, value.indices)
    if isinstance(value, tuple):
        return tuple(_map_floats(v, fn) for v in value)
    if isinstance(value, list):
        return [_map_floats(v, fn) for v in value]
    if hasattr(value, "dtype") and value.dtype.kind in _FLOAT_KINDS:
        return fn(value)
    return value


def _float_arrays(value: Any) -> List[numpy.ndarray]:
    found: List[numpy.ndarray] = []
    _map_floats(value, lambda a: found.append(numpy.asarray(a)) or a)
    return found


def _type_of(value: Any) -> str:
    if isinstance(value, (Ragged, Padded, tuple, list)):
        return type(value).__name__
    return f"array{value.ndim}d"


@pytest.mark.parametrize("name", sorted(TABLE))
def test_forward_backprop_and_types(name):
    model, X, opts = _build_and_init(name)
    Y, backprop = model(X, is_train=True)
    assert _float_arrays(Y) or opts.get("no_grad_input"), f"{name}: no float output"
    for array in _float_arrays(Y):
        assert numpy.isfinite(array).all(), f"{name}: non-finite output"
    dY = _map_floats(Y, lambda a: numpy.ones_like(a))
    dX = backprop(dY)
    # The gradient of the input has the input's type and shapes.
    if not opts.get("no_grad_input"):
        assert _type_of(dX) == _type_of(X), f"{name}: dX is {_type_of(dX)}, X is {_type_of(X)}"
        for dx, x in zip(_float_arrays(dX), _float_arrays(X)):
            assert dx.shape == x.shape
    # predict agrees with the training forward pass when there is no dropout.
    Yp = model.predict(X)
    assert _type_of(Yp) == _type_of(Y)
    for a, b in zip(_float_arrays(Yp), _float_arrays(Y)):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _items(X: Any, split: str) -> List[Any]:
    if split == "rows":
        if isinstance(X, tuple):
            return [tuple(x[i : i + 1] for x in X) for i in range(len(X[0]))]
        return [X[i : i + 1] for i in range(len(X))]
    if split == "items":
        if isinstance(X, tuple):
            return [tuple(x[i : i + 1] for x in X) for i in range(len(X[0]))]
        return [X[i : i + 1] for i in range(len(X))]
    if split == "ragged":
        starts = numpy.concatenate([[0], numpy.cumsum(X.lengths)])
        return [Ragged(X.data[starts[i] : starts[i + 1]], X.lengths[i : i + 1]) for i in range(len(X.lengths))]
    if split == "padded":
        from plait.backends import NumpyOps

        return [NumpyOps().list2padded([seq]) for seq in NumpyOps().padded2list(X)]
    raise AssertionError(split)


def _join(parts: List[Any], Y: Any) -> List[numpy.ndarray]:
    """The float arrays of per-item outputs, concatenated like the batch output's."""
    if isinstance(Y, Padded):
        from plait.backends import NumpyOps

        return [numpy.concatenate([NumpyOps().padded2list(p)[0] for p in parts])]
    per_item = [_float_arrays(p) for p in parts]
    return [numpy.concatenate([arrays[k] for arrays in per_item]) for k in range(len(per_item[0]))]


def _flat(Y: Any) -> List[numpy.ndarray]:
    if isinstance(Y, Padded):
        from plait.backends import NumpyOps

        return [numpy.concatenate(NumpyOps().padded2list(Y))]
    if isinstance(Y, list) and Y and isinstance(Y[0], list):
        return [numpy.concatenate([numpy.concatenate(y) for y in Y])]
    if isinstance(Y, list):
        return [numpy.concatenate([numpy.asarray(y).reshape(len(y), -1) for y in Y])]
    return [a for a in _float_arrays(Y)]


@pytest.mark.parametrize("name", sorted(TABLE))
def test_batch_equals_items_one_at_a_time(name):
    model, X, opts = _build_and_init(name)
    split = opts.get("split")
    if split is None:
        pytest.skip(f"{name} mixes neighbouring items by design")
    Y = model.predict(X)
    if not _float_arrays(Y):
        pytest.skip(f"{name} has integer outputs")
    parts = [model.predict(item) for item in _items(X, split)]
    if isinstance(Y, list) and Y and isinstance(Y[0], list):
        joined = [numpy.concatenate([numpy.concatenate(p[0]) for p in parts])]
    elif isinstance(Y, list):
        joined = [numpy.concatenate([numpy.asarray(p[0]).reshape(len(p[0]), -1) for p in parts])]
    else:
        joined = _join(parts, Y)
    for got, want in zip(joined, _flat(Y)):
        numpy.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-5)


def _to_float64(model: Model, X: Any) -> Any:
    """Params and float inputs in float64, so central differences are accurate."""
    for node in model.walk():
        for pname in node.param_names:
            if node.has_param(pname):
                node.set_param(pname, node.get_param(pname).astype("float64"))
    return _map_floats(X, lambda a: a.astype("float64"))


def _softmax_groups(Y: numpy.ndarray, groups) -> List[numpy.ndarray]:
    starts = numpy.cumsum([0, *groups])
    return [Y[:, starts[i] : starts[i + 1]] for i in range(len(groups))]


def _loss(model: Model, X: Any, weights: List[numpy.ndarray], opts: Dict[str, Any]) -> float:
    Y = model.predict(X)
    if opts["grad"] == "xent":
        # Softmax layers backprop (Y - T), the gradient of cross-entropy w.r.t. the logits.
        groups = opts.get("groups", (Y.shape[1],))
        return float(
            sum(-(t * numpy.log(y)).sum() for y, t in zip(_softmax_groups(Y, groups), _softmax_groups(weights[0], groups)))
        )
    return float(sum((a * w).sum() for a, w in zip(_float_arrays(Y), weights)))


@pytest.mark.parametrize("name", sorted(n for n, (_, _, o) in TABLE.items() if o.get("grad")))
def test_param_gradients_numerically(name):
    model, X, opts = _build_and_init(name)
    X = _to_float64(model, X)
    Y, backprop = model(X, is_train=True)
    if opts["grad"] == "xent":
        groups = opts.get("groups", (Y.shape[1],))
        targets = numpy.concatenate(
            [numpy.eye(n)[rng.integers(0, n, Y.shape[0])] for n in groups], axis=1
        )
        weights = [targets]
        backprop(Y - targets)
    else:
        weights = [rng.uniform(-1, 1, a.shape) for a in _float_arrays(Y)]
        it = iter(weights)
        backprop(_map_floats(Y, lambda a: next(it).astype(a.dtype)))
    checked = 0
    for node in model.walk():
        for pname in node.param_names:
            if not node.has_grad(pname):
                continue
            param = node.get_param(pname)
            grad = node.get_grad(pname).copy()
            flat = param.reshape(-1)
            for index in rng.choice(flat.size, size=min(4, flat.size), replace=False):
                original = float(flat[index])
                eps = 1e-6
                flat[index] = original + eps
                up = _loss(model, X, weights, opts)
                flat[index] = original - eps
                down = _loss(model, X, weights, opts)
                flat[index] = original
                numeric = (up - down) / (2 * eps)
                analytic = float(grad.reshape(-1)[index])
                assert abs(numeric - analytic) <= 1e-4 * max(1.0, abs(numeric)), (
                    f"{name}: d(loss)/d({node.name}.{pname})[{index}] is {analytic}, numerically {numeric}"
                )
                checked += 1
    assert checked, f"{name}: no gradients were accumulated"


@pytest.mark.parametrize("name", sorted(TABLE))
def test_serialization_round_trip(name, tmp_path):
    model, X, opts = _build_and_init(name)
    Y = model.predict(X)
    data = model.to_bytes()
    fresh = _build(name)
    assert fresh.can_from_bytes(data)
    fresh.from_bytes(data)
    for a, b in zip(_float_arrays(fresh.predict(X)), _float_arrays(Y)):
        numpy.testing.assert_allclose(a, b, rtol=1e-6)
    path = tmp_path / "model.bin"
    model.to_disk(path)
    from_disk = _build(name).from_disk(path)
    for a, b in zip(_float_arrays(from_disk.predict(X)), _float_arrays(Y)):
        numpy.testing.assert_allclose(a, b, rtol=1e-6)


def test_table_covers_every_registered_layer():
    registered = set(registry.layers.get_all())
    missing = registered - set(TABLE)
    assert not missing, f"layers registered but not in the table: {sorted(missing)}"
    assert not set(TABLE) - registered, f"table names nothing registers: {sorted(set(TABLE) - registered)}"


# --- differential: thinc 8.3 <-> plait weights ---------------------------------------------

# Layers that thinc 8.3 lacks or whose thinc version cannot run here.
_NOT_IN_THINC = {"StaticVectors.v1", "resizable.v1"}
# Thinc 8.3 bugs plait does not copy; the comparison is adjusted to what still must agree.
# MultiSoftmax: thinc returns raw logits (its softmax ignores inplace=True), and its config
# rejects a list for nOs. bidirectional: thinc never reverses the r2l input (data[::1]),
# so only the l2r half of the output can agree.
_THINC_ARGS = {"MultiSoftmax.v1": {"nOs": (2, 3)}}


def _adjust_theirs(name: str, theirs: List[numpy.ndarray], ours: List[numpy.ndarray]):
    if name == "MultiSoftmax.v1":
        fixed = []
        for y in theirs:
            parts = []
            for part in (y[:, :2], y[:, 2:]):
                e = numpy.exp(part - part.max(axis=1, keepdims=True))
                parts.append(e / e.sum(axis=1, keepdims=True))
            fixed.append(numpy.concatenate(parts, axis=1))
        return fixed, ours
    if name == "bidirectional.v1":
        half = theirs[0].shape[-1] // 2
        return [t[..., :half] for t in theirs], [o[..., :half] for o in ours]
    return theirs, ours


def _to_thinc(value: Any) -> Any:
    import thinc.types as tt

    if isinstance(value, Ragged):
        return tt.Ragged(value.data, value.lengths)
    if isinstance(value, Padded):
        return tt.Padded(value.data, value.size_at_t, value.lengths, value.indices)
    if isinstance(value, tuple):
        return tuple(_to_thinc(v) for v in value)
    if isinstance(value, list):
        return [_to_thinc(v) for v in value]
    return value


def _outputs(value: Any) -> List[numpy.ndarray]:
    """Float arrays of a plait or thinc output structure."""
    if hasattr(value, "data") and hasattr(value, "lengths"):
        return [numpy.asarray(value.data)]
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _outputs(v)]
    if hasattr(value, "dtype") and value.dtype.kind == "f":
        return [numpy.asarray(value)]
    return []


@pytest.mark.parametrize("name", sorted(n for n in TABLE if n not in _NOT_IN_THINC))
def test_thinc_weights_load_into_plait_and_back(name):
    thinc_api = pytest.importorskip("thinc.api")
    args, make_X, opts = TABLE[name]
    if "skip" in opts:
        pytest.skip(opts["skip"])
    X = make_X()
    numpy.random.seed(1)
    theirs_args = {**args, **_THINC_ARGS.get(name, {})}
    theirs = thinc_api.registry.resolve(thinc_api.Config({"model": {"@layers": name, **theirs_args}}))["model"]
    theirs.initialize(X=_to_thinc(X))
    ours = _build(name)
    ours.initialize(X=X)
    # thinc -> plait
    assert ours.can_from_bytes(theirs.to_bytes())
    ours.from_bytes(theirs.to_bytes())
    expected, got = _adjust_theirs(name, _outputs(theirs.predict(_to_thinc(X))), _outputs(ours.predict(X)))
    for a, b in zip(got, expected, strict=True):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # plait -> thinc: fresh random weights on our side, loaded by thinc.
    fresh = _build(name)
    numpy.random.seed(2)
    fresh.initialize(X=X)
    theirs.from_bytes(fresh.to_bytes())
    expected, got = _adjust_theirs(name, _outputs(theirs.predict(_to_thinc(X))), _outputs(fresh.predict(X)))
    for a, b in zip(got, expected, strict=True):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(n for n, (_, _, o) in TABLE.items() if "skip" not in o))
def test_every_layer_with_weights_is_gradient_checked(name):
    model, _, opts = _build_and_init(name)
    has_weights = any(node.has_param(p) for node in model.walk() for p in node.param_names)
    assert bool(opts.get("grad")) == has_weights, f"{name}: weights={has_weights}, grad check={opts.get('grad')}"
