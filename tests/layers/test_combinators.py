"""Combinators (add, concatenate, residual, siamese, tuplify, clone, map_list, bidirectional)
and data-type transfers (array_getitem, list2array, list2ragged, list2padded, ragged2list,
padded2list, strings2arrays)."""
import ctypes

import numpy
import pytest
from numpy.testing import assert_allclose

from plait.backends import NumpyOps
from plait.config import Config, registry
from plait.model import Model
from plait.types import Padded, Ragged
from plait.layers.add import add
from plait.layers.array_getitem import array_getitem, floats_getitem, ints_getitem
from plait.layers.bidirectional import bidirectional
from plait.layers.chain import chain
from plait.layers.clone import clone
from plait.layers.concatenate import concatenate
from plait.layers.linear import Linear
from plait.layers.list2array import list2array
from plait.layers.list2padded import list2padded
from plait.layers.list2ragged import list2ragged
from plait.layers.map_list import map_list
from plait.layers.noop import noop
from plait.layers.padded2list import padded2list
from plait.layers.ragged2list import ragged2list
from plait.layers.residual import residual
from plait.layers.siamese import siamese
from plait.layers.strings2arrays import strings2arrays
from plait.layers.tuplify import tuplify

OPS = NumpyOps()


def _rng(seed=0):
    return numpy.random.default_rng(seed)


def _X(nB=5, nI=3, seed=0, dtype="float32"):
    return _rng(seed).normal(size=(nB, nI)).astype(dtype)


def _seqs(lengths=(3, 1, 4, 2), nI=3, seed=0, dtype="float32"):
    rng = _rng(seed)
    return [rng.normal(size=(n, nI)).astype(dtype) for n in lengths]


# --- structured values as flat lists of arrays ------------------------------------------


def _arrays(value):
    """The arrays inside an array, Ragged, Padded or list/tuple of those (live views)."""
    if isinstance(value, Ragged):
        return [value.data]
    if isinstance(value, Padded):
        return [value.data]
    if isinstance(value, (list, tuple)):
        return [a for item in value for a in _arrays(item)]
    return [value]


def _rebuild(template, arrays):
    """A value shaped like `template` holding `arrays` (consumed from the front)."""
    if isinstance(template, Ragged):
        return Ragged(arrays.pop(0).reshape(template.dataXd.shape), template.lengths)
    if isinstance(template, Padded):
        return Padded(arrays.pop(0), template.size_at_t, template.lengths, template.indices)
    if isinstance(template, (list, tuple)):
        items = [_rebuild(item, arrays) for item in template]
        return tuple(items) if isinstance(template, tuple) else items
    return arrays.pop(0)


def _to_float64(model):
    for node in model.walk():
        node.ops = OPS
        for name in node.param_names:
            if node.has_param(name):
                node.set_param(name, node.get_param(name).astype("float64"))
    return model


def check_gradients(model, X, eps=1e-6, rtol=1e-5, atol=1e-7, seed=1):
    """Central differences of sum(Y * G) against backprop, for the input and every param."""
    rng = _rng(seed)
    Y, backprop = model(X, is_train=True)
    G = [rng.normal(size=a.shape) for a in _arrays(Y)]
    dX = backprop(_rebuild(Y, list(G)))

    def loss():
        Yl = model.predict(X)
        return sum(float((a * g).sum()) for a, g in zip(_arrays(Yl), G))

    def numeric(array):
        grad = numpy.zeros(array.shape)
        flat = array.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            up = loss()
            flat[i] = old - eps
            down = loss()
            flat[i] = old
            grad.reshape(-1)[i] = (up - down) / (2 * eps)
        return grad

    for x, dx in zip(_arrays(X), _arrays(dX)):
        assert_allclose(dx, numeric(x), rtol=rtol, atol=atol)
    checked = 0
    for node in model.walk():
        for name in node.param_names:
            if node.has_grad(name):
                assert_allclose(node.get_grad(name), numeric(node.get_param(name)), rtol=rtol, atol=atol)
                checked += 1
    return checked


def _linear(nO, nI, seed):
    model = Linear(nO, nI)
    model.initialize()
    rng = _rng(seed)
    model.set_param("W", rng.normal(size=(nO, nI)).astype("float32"))
    model.set_param("b", rng.normal(size=(nO,)).astype("float32"))
    return model


def _np_linear(model, X):
    return X @ model.get_param("W").T + model.get_param("b")


# --- add --------------------------------------------------------------------------------


def test_add_forward_names_dims():
    a, b, c = _linear(4, 3, 1), _linear(4, 3, 2), _linear(4, 3, 3)
    model = add(a, b)
    assert model.name == "add" and model.dim_names == ("nO", "nI")
    assert add(model, c) is model and model.layers == [a, b, c]
    model.initialize(X=_X())
    assert model.get_dim("nO") == 4 and model.get_dim("nI") == 3
    X = _X()
    expected = _np_linear(a, X) + _np_linear(b, X) + _np_linear(c, X)
    assert_allclose(model.predict(X), expected, rtol=1e-5, atol=1e-6)
    # Only an nI when every child has one.
    assert add(Linear(2), noop()).dim_names == ("nO",)


def test_add_init_infers_dims_from_X_and_Y():
    model = add(Linear(), Linear())
    model.initialize(X=_X(nI=3), Y=_X(nI=6))
    assert [layer.get_dim("nO") for layer in model.layers] == [6, 6]
    assert [layer.get_dim("nI") for layer in model.layers] == [3, 3]
    assert model.get_dim("nO") == 6 and model.get_dim("nI") == 3


def test_add_mismatched_widths_raise():
    with pytest.raises(ValueError, match="nO"):
        add(Linear(2, 3), Linear(4, 3)).initialize()


def test_add_with_noop_does_not_mutate_input_or_gradient():
    X = _X()
    X0 = X.copy()
    model = add(noop(), noop())
    Y, backprop = model(X, is_train=True)
    assert_allclose(Y, 2 * X0)
    assert_allclose(X, X0)
    dY = numpy.ones_like(X)
    assert_allclose(backprop(dY), 2 * dY)
    assert_allclose(dY, numpy.ones_like(X))


def test_add_gradients():
    model = _to_float64(add(_linear(3, 3, 1), _linear(3, 3, 2), noop()))
    assert check_gradients(model, _X(4, 3, dtype="float64")) == 4


def test_add_ragged_and_lists():
    lengths = numpy.asarray([2, 3], dtype="int32")
    Xr = Ragged(_X(5, 3), lengths)
    Yr = add(noop(), noop()).predict(Xr)
    assert isinstance(Yr, Ragged)
    assert_allclose(Yr.data, 2 * Xr.data)
    Xs = _seqs()
    Ys = add(noop(), noop()).predict(Xs)
    for x, y in zip(Xs, Ys):
        assert_allclose(y, 2 * x)


# --- concatenate ----------------------------------------------------------------------------


def test_concatenate_names_and_flattening():
    a, b, c = Linear(2, 3), Linear(3, 3), Linear(4, 3)
    model = concatenate(a, b)
    assert model.name == "linear|linear" and model.dim_names == ("nO", "nI")
    # Appending keeps the name, as Thinc does (serialized names depend on it).
    assert concatenate(model, c) is model and model.layers == [a, b, c] and model.name == "linear|linear"
    assert concatenate().name == "noop"
    assert concatenate(a) is a
    with pytest.raises(TypeError, match="argument 1"):
        concatenate(a, "b")


def test_concatenate_arrays():
    a, b = _linear(2, 3, 1), _linear(4, 3, 2)
    model = concatenate(a, b)
    model.initialize(X=_X())
    assert model.get_dim("nO") == 6 and model.get_dim("nI") == 3
    X = _X()
    assert_allclose(model.predict(X), numpy.hstack([_np_linear(a, X), _np_linear(b, X)]), rtol=1e-5, atol=1e-6)
    assert check_gradients(_to_float64(model), X.astype("float64")) == 4


def test_concatenate_ragged_list_padded():
    a, b = _linear(2, 3, 1), _linear(4, 3, 2)
    seqs = _seqs()
    expected = [numpy.hstack([_np_linear(a, s), _np_linear(b, s)]) for s in seqs]
    # Lists: map the linear layers over each sequence.
    model = concatenate(map_list(a), map_list(b))
    for y, e in zip(model.predict(seqs), expected):
        assert_allclose(y, e, rtol=1e-5, atol=1e-6)
    # Ragged
    lengths = numpy.asarray([len(s) for s in seqs], dtype="int32")
    Xr = Ragged(numpy.concatenate(seqs), lengths)
    wrap = lambda layer: Model(  # noqa: E731
        "ragged_" + layer.name, lambda m, X, is_train: _ragged_apply(layer, X, is_train), layers=[layer]
    )
    Yr = concatenate(wrap(a), wrap(b)).predict(Xr)
    assert isinstance(Yr, Ragged)
    assert_allclose(Yr.data, numpy.concatenate(expected), rtol=1e-5, atol=1e-6)
    # Padded
    Xp = OPS.list2padded(seqs)
    Yp = concatenate(noop(), noop()).predict(Xp)
    assert isinstance(Yp, Padded)
    for y, s in zip(OPS.padded2list(Yp), seqs):
        assert_allclose(y, numpy.hstack([s, s]))


def _ragged_apply(layer, Xr, is_train):
    Y, backprop = layer(Xr.data, is_train)
    return Ragged(Y, Xr.lengths), lambda dY: Ragged(backprop(dY.data), dY.lengths)


def test_concatenate_gradients_lists_and_ragged():
    a, b = _linear(2, 3, 1), _linear(4, 3, 2)
    model = _to_float64(concatenate(map_list(a), map_list(b)))
    assert check_gradients(model, _seqs((2, 1, 3), dtype="float64")) == 4
    seqs = _seqs((2, 3), dtype="float64")
    Xr = Ragged(numpy.concatenate(seqs), numpy.asarray([2, 3], dtype="int32"))
    model = concatenate(noop(), noop(), noop())
    Y, backprop = model(Xr, is_train=True)
    dY = Ragged(_rng(3).normal(size=Y.data.shape), Y.lengths)
    assert_allclose(backprop(dY).data, dY.data[:, :3] + dY.data[:, 3:6] + dY.data[:, 6:])


def test_concatenate_padded_gradients():
    Xp = OPS.list2padded(_seqs((3, 1, 2), dtype="float64"))
    assert check_gradients(concatenate(noop(), residual(noop()), noop()), Xp) == 0


def test_concatenate_init_gives_Y_only_to_open_children():
    X, Y = _X(nI=3), _X(nI=6)
    model = chain(concatenate(Linear(2), Linear(4)), Linear())
    model.initialize(X=X, Y=Y)
    assert model.layers[0].get_dim("nO") == 6
    assert model.predict(X).shape == (5, 6)


def test_concatenate_mismatched_rows_raise():
    model = concatenate(noop(), array_getitem(slice(0, 2)))
    with pytest.raises(ValueError, match="rows"):
        model.predict(_X())


# --- residual ---------------------------------------------------------------------------------


def test_residual_arrays():
    inner = _linear(3, 3, 1)
    model = residual(inner)
    assert model.name == "residual(linear)" and model.dim_names == ("nO", "nI")
    assert model.get_dim("nO") == 3 and model.get_dim("nI") == 3
    X = _X()
    assert_allclose(model.predict(X), X + _np_linear(inner, X), rtol=1e-5, atol=1e-6)
    assert check_gradients(_to_float64(model), X.astype("float64")) == 2


def test_residual_infers_dims():
    model = residual(Linear())
    assert model.has_dim("nO") is None
    model.initialize(X=_X(nI=4), Y=_X(nI=4))
    assert model.get_dim("nO") == 4 and model.get_dim("nI") == 4


def test_residual_lists_ragged_padded_without_mutation():
    seqs = _seqs()
    copies = [s.copy() for s in seqs]
    Ys = residual(noop()).predict(seqs)
    for y, s in zip(Ys, copies):
        assert_allclose(y, 2 * s)
    for s, c in zip(seqs, copies):
        assert_allclose(s, c)
    lengths = numpy.asarray([len(s) for s in seqs], dtype="int32")
    Xr = Ragged(numpy.concatenate(seqs), lengths)
    Yr, backprop = residual(noop())(Xr, is_train=True)
    assert_allclose(Yr.data, 2 * Xr.data)
    assert_allclose(backprop(Ragged(numpy.ones_like(Yr.data), lengths)).data, 2.0)
    Xp = OPS.list2padded(seqs)
    data = Xp.data.copy()
    Yp, backprop = residual(noop())(Xp, is_train=True)
    assert_allclose(Yp.data, 2 * data)
    assert_allclose(Xp.data, data)
    assert_allclose(backprop(Padded(numpy.ones_like(data), Xp.size_at_t, Xp.lengths, Xp.indices)).data, 2.0)


def test_residual_shape_mismatch_raises():
    model = residual(_linear(2, 3, 0))
    with pytest.raises(ValueError, match=r"residual\(linear\)"):
        model.predict(_X(nI=3))


# --- siamese, tuplify, map_list -----------------------------------------------------------------


def _product_layer():
    """(A, B) -> A * B: a toy similarity."""

    def forward(model, AB, is_train):
        A, B = AB
        return A * B, lambda dY: (dY * B, dY * A)

    return Model("product", forward, dims={"nO": None})


def test_siamese():
    layer = _linear(2, 3, 1)
    model = siamese(layer, _product_layer())
    assert model.name == "siamese(linear, product)" and model.layers[0] is layer
    X1, X2 = _X(seed=1), _X(seed=2)
    model.initialize(X=(X1, X2))
    assert model.get_dim("nI") == 3
    assert_allclose(model.predict((X1, X2)), _np_linear(layer, X1) * _np_linear(layer, X2), rtol=1e-5, atol=1e-6)
    assert check_gradients(_to_float64(model), (X1.astype("float64"), X2.astype("float64"))) == 2
    with pytest.raises(TypeError, match="pair"):
        model.predict(X1)


def test_tuplify():
    a, b = _linear(2, 3, 1), _linear(4, 3, 2)
    model = tuplify(a, b, noop())
    assert model.name == "tuple(linear, linear, noop)" and model.dim_names == ("nI",)
    model.initialize(X=_X())
    assert model.get_dim("nI") == 3
    X = _X()
    Y = model.predict(X)
    assert isinstance(Y, tuple) and len(Y) == 3
    assert_allclose(Y[0], _np_linear(a, X), rtol=1e-5, atol=1e-6)
    assert_allclose(Y[2], X)
    assert check_gradients(_to_float64(model), X.astype("float64")) == 4
    opened = tuplify(Linear(), Linear())
    opened.initialize(X=X, Y=(_X(nI=2), _X(nI=5)))
    assert [layer.get_dim("nO") for layer in opened.layers] == [2, 5]


def test_map_list():
    inner = _linear(2, 3, 1)
    model = map_list(inner)
    assert model.name == "map_list"
    seqs = _seqs()
    for y, s in zip(model.predict(seqs), seqs):
        assert_allclose(y, _np_linear(inner, s), rtol=1e-5, atol=1e-6)
    assert check_gradients(_to_float64(model), _seqs((2, 1), dtype="float64")) == 2
    opened = map_list(Linear())
    opened.initialize(X=seqs, Y=[numpy.zeros((3, 7), "f")])
    assert opened.layers[0].get_dim("nO") == 7


# --- clone --------------------------------------------------------------------------------------


def test_clone():
    orig = _linear(3, 3, 1)
    model = clone(orig, 3)
    assert model.name == "linear>>linear>>linear" and model.layers[0] is orig
    W = [layer.get_param("W") for layer in model.layers]
    assert_allclose(W[1], W[0]) and W[1] is not W[0]
    model.layers[1].set_param("W", W[1] * 2)
    assert_allclose(orig.get_param("W"), W[0])
    X = _X()
    expected = X
    for layer in model.layers:
        expected = _np_linear(layer, expected)
    assert_allclose(model.predict(X), expected, rtol=1e-4, atol=1e-5)
    assert clone(orig, 1) is orig
    assert clone(orig, 0).name == "noop"
    with pytest.raises(ValueError, match=">= 0"):
        clone(orig, -1)
    with pytest.raises(TypeError, match="int"):
        clone(orig, 2.0)
    assert len(clone(orig, numpy.int64(2)).layers) == 2


# --- operators ------------------------------------------------------------------------------------


def test_operators():
    from plait.layers.relu import Relu

    with Model.define_operators({">>": chain, "|": concatenate, "+": add, "**": clone}):
        model = Relu(4, 3) >> (Linear(2) | Linear(3)) >> (Linear(5) + Linear(5)) >> Linear(5, 5) ** 2
    assert model.name == "relu>>linear|linear>>add>>linear>>linear"
    model.initialize(X=_X())
    assert model.predict(_X()).shape == (5, 5)
    # Python groups a >> b >> c as (a >> b) >> c: chains nest, as in Thinc.
    assert [node.name for node in model.walk()] == [
        "relu>>linear|linear>>add>>linear>>linear", "relu>>linear|linear>>add", "linear>>linear",
        "relu>>linear|linear", "add", "linear", "linear", "relu", "linear|linear", "linear", "linear",
        "linear", "linear",
    ]
    with Model.define_operators({"|": concatenate}):
        three = Linear(1, 2) | Linear(1, 2) | Linear(1, 2)
    assert len(three.layers) == 3 and three.name == "linear|linear"


# --- bidirectional --------------------------------------------------------------------------------


def _cumsum_rnn():
    """Padded -> Padded: Y[t] = w * sum_{s <= t} X[s] within each sequence (a toy RNN)."""

    def forward(model, Xp, is_train):
        w = model.get_param("w")
        nL = Xp.data.shape[0]
        mask = (numpy.arange(nL)[:, None] < Xp.lengths[None, :])[..., None]
        C = numpy.cumsum(Xp.data * mask, axis=0)
        Y = C * w * mask

        def backprop(dYp):
            dY = dYp.data * mask
            model.inc_grad("w", (dY * C).sum(axis=(0, 1)))
            dC = dY * w
            dX = numpy.cumsum(dC[::-1], axis=0)[::-1] * mask
            return Padded(dX, dYp.size_at_t, dYp.lengths, dYp.indices)

        return Padded(Y, Xp.size_at_t, Xp.lengths, Xp.indices), backprop

    def init(model, X=None, Y=None):
        if X is not None:
            model.set_dim("nI", X.data.shape[-1])
        if model.has_param("w") is None:
            model.set_param("w", _rng(7).normal(size=(model.get_dim("nI"),)))

    return Model("cumsum", forward, init=init, dims={"nI": None}, params={"w": None})


def test_bidirectional_reverses_each_sequence():
    l2r, r2l = _cumsum_rnn(), _cumsum_rnn()
    model = bidirectional(l2r, r2l)
    assert model.name == "bicumsum" and model.layers == [l2r, r2l]
    seqs = _seqs((3, 1, 4, 4, 2), dtype="float64")
    Xp = OPS.list2padded(seqs)
    model.initialize(X=Xp)
    r2l.set_param("w", r2l.get_param("w") * -3.0)
    w1, w2 = l2r.get_param("w"), r2l.get_param("w")
    Ys = OPS.padded2list(model.predict(Xp))
    for y, x in zip(Ys, seqs):
        prefix = numpy.cumsum(x, axis=0) * w1
        suffix = numpy.cumsum(x[::-1], axis=0)[::-1] * w2
        assert_allclose(y, numpy.hstack([prefix, suffix]))
    assert check_gradients(model, Xp) == 2


def test_bidirectional_copies_l2r_and_checks_input():
    l2r = _cumsum_rnn()
    model = bidirectional(l2r)
    assert model.layers[1] is not l2r and model.layers[1].name == "cumsum"
    with pytest.raises(TypeError, match="Padded"):
        model.predict(_X())


# --- array_getitem -----------------------------------------------------------------------------


def test_array_getitem():
    X = _X(4, 5)
    for index in [1, slice(1, 3), (slice(None), slice(0, -1)), [0, 2], (slice(None), [4, 1])]:
        model = array_getitem(index)
        Y, backprop = model(X, is_train=False)
        assert_allclose(Y, X[index])
        dX = backprop(numpy.ones_like(Y))
        expected = numpy.zeros_like(X)
        expected[index] = 1
        assert_allclose(dX, expected)
    assert array_getitem(0).name == "array-getitem" and array_getitem(0).attrs == {"index": 0}
    assert floats_getitem(0).name == "floats-getitem" and ints_getitem(0).name == "ints-getitem"
    empty = numpy.zeros((0, 3), "f")
    assert array_getitem(5).predict(empty) is empty


def test_array_getitem_repeated_index_sums_gradient():
    model = _to_float64(array_getitem([0, 0, 2]))
    X = _X(3, 2, dtype="float64")
    Y, backprop = model(X, is_train=True)
    dX = backprop(numpy.ones_like(Y))
    assert_allclose(dX, [[2, 2], [0, 0], [1, 1]])
    check_gradients(model, X)


def test_array_getitem_bad_index():
    with pytest.raises(IndexError, match="array-getitem"):
        array_getitem(9).predict(_X(3, 2))


# --- transfers ---------------------------------------------------------------------------------


def test_list2array_and_list2ragged_and_ragged2list():
    seqs = _seqs()
    Y, backprop = list2array()(seqs, is_train=True)
    assert_allclose(Y, numpy.concatenate(seqs))
    for d, s in zip(backprop(Y), seqs):
        assert_allclose(d, s)
    Yr, backprop = list2ragged()(seqs, is_train=True)
    assert isinstance(Yr, Ragged) and list(Yr.lengths) == [3, 1, 4, 2]
    assert_allclose(Yr.data, numpy.concatenate(seqs))
    for d, s in zip(backprop(Yr), seqs):
        assert_allclose(d, s)
    Ys, backprop = ragged2list()(Yr, is_train=True)
    for y, s in zip(Ys, seqs):
        assert_allclose(y, s)
    dXr = backprop(Ys)
    assert isinstance(dXr, Ragged)
    assert_allclose(dXr.data, Yr.data)
    empty = list2array().predict([])
    assert empty.shape[0] == 0
    with pytest.raises(TypeError, match="Ragged"):
        ragged2list().predict(seqs)


def test_list2padded_and_padded2list():
    seqs = _seqs((2, 4, 1, 4))
    Yp, backprop = list2padded()(seqs, is_train=True)
    assert isinstance(Yp, Padded) and Yp.data.shape == (4, 4, 3)
    assert list(Yp.lengths) == [4, 4, 2, 1] and list(Yp.size_at_t) == [4, 3, 2, 2]
    for d, s in zip(backprop(Yp), seqs):
        assert_allclose(d, s)
    Ys, backprop = padded2list()(Yp, is_train=True)
    for y, s in zip(Ys, seqs):
        assert_allclose(y, s)
    dXp = backprop(Ys)
    assert_allclose(dXp.data, Yp.data)
    assert list(dXp.indices) == list(Yp.indices)
    with pytest.raises(ValueError, match="rows"):
        backprop([s[:1] for s in seqs])


def test_list2padded_pads_with_zeros_keeps_dtype_and_refuses_mixed_sequences():
    # Written time-major in one pass: every cell past a sequence's end must still be zero.
    for dtype in ("float32", "float64", "int32"):
        seqs = [(numpy.arange(n * 3).reshape(n, 3) + 1).astype(dtype) for n in (3, 0, 5, 3)]
        Xp = OPS.list2padded(seqs)
        assert Xp.data.dtype == numpy.dtype(dtype) and Xp.data.flags.c_contiguous
        assert Xp.data.shape == (5, 4, 3)
        assert list(Xp.indices) == [2, 3, 0, 1] and list(Xp.lengths) == [5, 3, 3, 0]
        assert list(Xp.size_at_t) == [3, 3, 3, 1, 1]
        for col, i in enumerate(Xp.indices):
            n = len(seqs[i])
            assert (Xp.data[:n, col] == seqs[i]).all() and (Xp.data[n:, col] == 0).all()
    with pytest.raises(ValueError, match=r"list2padded.*same dtype.*float32.*float64"):
        OPS.list2padded([numpy.zeros((2, 3), "float32"), numpy.zeros((1, 3), "float64")])
    with pytest.raises(ValueError, match=r"list2padded.*every axis but the first"):
        OPS.list2padded([numpy.zeros((2, 3), "float32"), numpy.zeros((1, 4), "float32")])
    with pytest.raises(ValueError, match=r"list2padded.*seqs\[1\].*2-dimensional"):
        OPS.list2padded([numpy.zeros((2, 3), "float32"), numpy.zeros(3, "float32")])


# murmurhash.hash_unicode(word) (Thinc's hash) as the uint64 key: negative hashes fill the top 32 bits.
STRING_KEYS = {
    "": 0x0, "a": 0x3C2569B2, "hello": 0x248BFA47, "h\u00e9llo": 0xFFFFFFFFBC9FA068,
    "\u65e5\u672c\u8a9e": 0xFFFFFFFFA5A47297, "x" * 30: 0xFFFFFFFFF77137F8, "spaCy": 0xFFFFFFFFCEEEE75A,
    "\U0001F600": 0xFFFFFFFFBEB42EFA,
}


def test_strings2arrays_keys_do_not_depend_on_the_batch():
    words = list(STRING_KEYS)
    docs = [words[:3], [], words[3:], [words[0]], words[::-1]]
    Ys = strings2arrays().predict(docs)
    assert [y.shape for y in Ys] == [(len(d), 1) for d in docs]
    for doc, y in zip(docs, Ys):
        assert y.dtype == numpy.uint64
        assert [int(v) for v in y[:, 0]] == [STRING_KEYS[w] for w in doc]
    alone = [strings2arrays().predict([[w]])[0] for w in words]
    assert [int(y[0, 0]) for y in alone] == list(STRING_KEYS.values())
    assert strings2arrays().predict([]) == []
    with pytest.raises(TypeError, match="str tokens"):
        strings2arrays().predict([["a"], ["b", 3]])


def test_strings2arrays():
    hash_unicode = pytest.importorskip("murmurhash").hash_unicode  # a thinc dependency

    docs = [["hello", "world", "héllo"], [], ["日本語", ""]]
    Ys = strings2arrays().predict(docs)
    assert [y.shape for y in Ys] == [(3, 1), (0, 1), (2, 1)]
    assert all(y.dtype == numpy.uint64 for y in Ys)
    for doc, y in zip(docs, Ys):
        assert [int(v) for v in y[:, 0]] == [ctypes.c_uint64(hash_unicode(w)).value for w in doc]
    # As in Thinc, a str item is a sequence of one-character tokens.
    (y,) = strings2arrays().predict(["héllo"])
    assert [int(v) for v in y[:, 0]] == [ctypes.c_uint64(hash_unicode(c)).value for c in "héllo"]


# --- batch invariance, serialization, config -------------------------------------------------------


def test_batch_invariance():
    X = _X(6, 3)
    models = [
        add(_linear(2, 3, 1), _linear(2, 3, 2)),
        concatenate(_linear(2, 3, 1), _linear(4, 3, 2)),
        residual(_linear(3, 3, 3)),
    ]
    for model in models:
        full = model.predict(X)
        rows = numpy.vstack([model.predict(X[i : i + 1]) for i in range(len(X))])
        assert_allclose(full, rows, rtol=1e-5, atol=1e-6)


def test_bytes_round_trip():
    def build():
        return chain(residual(Linear(3, 3)), concatenate(Linear(2, 3), Linear(4, 3)), add(Linear(5, 6), Linear(5, 6)))

    X = _X()
    model = build()
    model.initialize(X=X)
    other = build()
    other.initialize(X=X)
    other.from_bytes(model.to_bytes())
    assert_allclose(other.predict(X), model.predict(X))


def test_registered_names():
    for name in [
        "add.v1", "bidirectional.v1", "clone.v1", "concatenate.v1", "residual.v1", "siamese.v1", "tuplify.v1",
        "list2array.v1", "list2ragged.v1", "list2padded.v1", "ragged2list.v1", "padded2list.v1",
        "strings2arrays.v1",
    ]:
        assert callable(registry.layers.get(name))
    config = """
    [model]
    @layers = "clone.v1"
    n = 2

    [model.orig]
    @layers = "residual.v1"

    [model.orig.layer]
    @layers = "Linear.v1"
    nO = 3
    nI = 3
    """
    model = registry.resolve(Config().from_str(config))["model"]
    assert model.name == "residual(linear)>>residual(linear)"


def test_data_validation():
    from plait.util import DataValidationError, data_validation

    X = _X()
    with data_validation(True):
        list2padded().initialize(X=[X, X])
        residual(noop()).initialize(X=[X])
        strings2arrays().initialize(X=[["a", "b"]])
        for model, bad in [
            (list2padded(), X), (list2array(), X), (ragged2list(), X), (bidirectional(noop()), X),
            (map_list(noop()), X), (strings2arrays(), [[1, 2]]),
        ]:
            with pytest.raises(DataValidationError, match=model.name):
                model.initialize(X=bad)


# --- against thinc ---------------------------------------------------------------------------------


def _thinc():
    return pytest.importorskip("thinc.api")


def _both(build_thinc, build_plait, X, Y=None):
    """Initialize the thinc model, load its bytes into the plait model; return both."""
    t_model = build_thinc()
    t_model.initialize(X=X, Y=Y)
    p_model = build_plait()
    p_model.initialize(X=X, Y=Y)
    assert [n.name for n in p_model.walk()] == [n.name for n in t_model.walk()]
    assert [n.dim_names for n in p_model.walk()] == [n.dim_names for n in t_model.walk()]
    p_model.from_bytes(t_model.to_bytes())
    for p_node, t_node in zip(p_model.walk(), t_model.walk()):
        assert {d: p_node.maybe_get_dim(d) for d in p_node.dim_names} == {
            d: t_node.maybe_get_dim(d) for d in t_node.dim_names
        }
    # And back: thinc can load plait's bytes.
    build_thinc().from_bytes(p_model.to_bytes())
    return t_model, p_model


def _compare(t_out, p_out):
    t_arrays, p_arrays = _arrays(t_out), _arrays(p_out)
    assert len(t_arrays) == len(p_arrays)
    for t, p in zip(t_arrays, p_arrays):
        assert_allclose(p, t, rtol=1e-5, atol=1e-6)


def test_thinc_array_combinators():
    T = _thinc()
    X = _X(5, 3)
    cases = [
        (lambda m: m["add"](m["Linear"](4, 3), m["Linear"](4, 3), m["Relu"](4, 3))),
        (lambda m: m["concatenate"](m["Linear"](2), m["Relu"](4), m["noop"]())),
        (lambda m: m["residual"](m["Relu"](3))),
        (lambda m: m["clone"](m["Relu"](3, 3), 3)),
        (lambda m: m["tuplify"](m["Linear"](2, 3), m["Relu"](4, 3))),
        (lambda m: m["chain"](m["residual"](m["Linear"](3, 3)), m["concatenate"](m["Linear"](2), m["Linear"](3)))),
    ]
    from plait.layers.relu import Relu

    names = ["add", "concatenate", "residual", "clone", "tuplify", "chain", "Linear", "Relu", "noop"]
    t_ns = {name: getattr(T, name) for name in names}
    p_ns = dict(
        add=add, concatenate=concatenate, residual=residual, clone=clone, tuplify=tuplify, chain=chain,
        Linear=Linear, Relu=Relu, noop=noop,
    )
    for build in cases:
        t_model, p_model = _both(lambda: build(t_ns), lambda: build(p_ns), X)
        _compare(t_model.predict(X), p_model.predict(X))
        t_Y, t_bp = t_model.begin_update(X)
        p_Y, p_bp = p_model.begin_update(X)
        dY = _rebuild(t_Y, [_rng(5).normal(size=a.shape).astype("float32") for a in _arrays(t_Y)])
        _compare(t_bp(dY), p_bp(_rebuild(p_Y, [a.copy() for a in _arrays(dY)])))


def test_thinc_siamese():
    T = _thinc()
    X = (_X(seed=1), _X(seed=2))

    def similarity(M):
        def forward(model, AB, is_train):
            A, B = AB
            return A * B, lambda dY: (dY * B, dY * A)

        return M("product", forward, dims={"nO": 5})

    t_model, p_model = _both(
        lambda: T.siamese(T.Linear(2, 3), similarity(T.Model)), lambda: siamese(Linear(2, 3), similarity(Model)), X
    )
    _compare(t_model.predict(X), p_model.predict(X))


def test_thinc_sequence_combinators():
    T = _thinc()
    from thinc.layers.map_list import map_list as t_map_list

    seqs = _seqs()
    t_model, p_model = _both(
        lambda: T.concatenate(t_map_list(T.Linear(2, 3)), t_map_list(T.Linear(4, 3))),
        lambda: concatenate(map_list(Linear(2, 3)), map_list(Linear(4, 3))),
        seqs,
    )
    _compare(t_model.predict(seqs), p_model.predict(seqs))
    lengths = numpy.asarray([len(s) for s in seqs], dtype="int32")
    Xr = Ragged(numpy.concatenate(seqs), lengths)
    t_Xr = T.Ragged(Xr.data, lengths)
    t_model, p_model = _both(lambda: T.concatenate(T.noop(), T.noop()), lambda: concatenate(noop(), noop()), None)
    _compare(t_model.predict(t_Xr).data, p_model.predict(Xr).data)
    t_model, p_model = _both(lambda: T.residual(T.noop()), lambda: residual(noop()), None)
    _compare(t_model.predict(seqs), p_model.predict(seqs))
    _compare(t_model.predict(t_Xr).data, p_model.predict(Xr).data)


def test_thinc_transfers():
    T = _thinc()
    from thinc.layers.array_getitem import array_getitem as t_array_getitem

    seqs = _seqs((2, 4, 1, 4))
    pairs = [(T.list2array, list2array), (T.list2ragged, list2ragged), (T.list2padded, list2padded)]
    for t_build, p_build in pairs:
        t_Y = t_build().predict(seqs)
        p_Y = p_build().predict(seqs)
        assert p_build().name == t_build().name
        _compare(t_Y if not hasattr(t_Y, "data") else t_Y.data, p_Y if not hasattr(p_Y, "data") else p_Y.data)
        if hasattr(t_Y, "lengths"):
            assert list(p_Y.lengths) == list(t_Y.lengths)
        if hasattr(t_Y, "indices"):
            assert list(p_Y.indices) == list(t_Y.indices) and list(p_Y.size_at_t) == list(t_Y.size_at_t)
    Xp = OPS.list2padded(seqs)
    t_Xp = T.Padded(Xp.data, Xp.size_at_t, Xp.lengths, Xp.indices)
    _compare(T.padded2list().predict(t_Xp), padded2list().predict(Xp))
    lengths = numpy.asarray([2, 4, 1, 4], dtype="int32")
    _compare(T.ragged2list().predict(T.Ragged(numpy.concatenate(seqs), lengths)),
             ragged2list().predict(Ragged(numpy.concatenate(seqs), lengths)))
    docs = [["a", "bb", "ünïcode", "x" * 30], ["z"]]
    for t, p in zip(T.strings2arrays().predict(docs), strings2arrays().predict(docs)):
        assert p.dtype == t.dtype and (p == t).all()
    X = _X(4, 5)
    for index in [2, (slice(None), slice(1, 3)), [3, 0]]:
        assert_allclose(array_getitem(index).predict(X), t_array_getitem(index).predict(X))


def test_thinc_bidirectional_structure():
    T = _thinc()
    t_model = T.bidirectional(T.Linear(2, 3))
    p_model = bidirectional(Linear(2, 3))
    assert p_model.name == t_model.name == "bilinear"
    assert [n.name for n in p_model.walk()] == [n.name for n in t_model.walk()]
    t_model.initialize()
    p_model.initialize()
    p_model.from_bytes(t_model.to_bytes())
    for p_node, t_node in zip(p_model.walk(), t_model.walk()):
        for name in t_node.param_names:
            assert_allclose(p_node.get_param(name), t_node.get_param(name))
