"""Data-type wrappers (with_array, with_list, with_padded, ...) and the framework-wrapper stubs."""
import inspect
import subprocess
import sys

import numpy
import pytest

from plait.backends import NumpyOps
from plait.config import registry
from plait.layers.linear import Linear
from plait.layers.mxnetwrapper import MXNetWrapper
from plait.layers.pytorchwrapper import PyTorchRNNWrapper, PyTorchWrapper, PyTorchWrapper_v2, PyTorchWrapper_v3
from plait.layers.tensorflowwrapper import TensorFlowWrapper, keras_subclass
from plait.layers.torchscriptwrapper import TorchScriptWrapper_v1, pytorch_to_torchscript_wrapper
from plait.layers.with_array import with_array
from plait.layers.with_array2d import with_array2d
from plait.layers.with_cpu import with_cpu
from plait.layers.with_debug import with_debug
from plait.layers.with_flatten import with_flatten
from plait.layers.with_flatten_v2 import with_flatten_v2
from plait.layers.with_getitem import with_getitem
from plait.layers.with_list import with_list
from plait.layers.with_nvtx_range import with_nvtx_range
from plait.layers.with_padded import with_padded
from plait.layers.with_ragged import with_ragged
from plait.layers.with_reshape import with_reshape
from plait.layers.with_signpost_interval import with_signpost_interval
from plait.model import Model
from plait.shims.mxnet import MXNetShim
from plait.shims.pytorch import PyTorchShim
from plait.shims.pytorch_grad_scaler import PyTorchGradScaler
from plait.shims.shim import Shim
from plait.shims.tensorflow import TensorFlowShim, keras_model_fns, maybe_handshake_model
from plait.shims.torchscript import TorchScriptShim
from plait.types import Padded, Ragged
from plait.util import DataValidationError, data_validation

OPS = NumpyOps()
LENGTHS = (3, 1, 4, 2)


# --- helpers --------------------------------------------------------------------------------


def _seqs(nF=4, lengths=LENGTHS, dtype="float64", seed=0):
    rng = numpy.random.default_rng(seed)
    return [rng.normal(size=(n, nF)).astype(dtype) for n in lengths]


def _as_format(fmt, Xs, ops=OPS, ragged_cls=Ragged):
    if fmt == "list":
        return list(Xs)
    if fmt == "ragged":
        return ragged_cls(ops.flatten(Xs), ops.asarray1i([len(x) for x in Xs]))
    if fmt == "padded":
        return ops.list2padded(list(Xs))
    if fmt == "padded_tuple":
        Xp = ops.list2padded(list(Xs))
        return (Xp.data, Xp.size_at_t, Xp.lengths, Xp.indices)
    if fmt == "ragged_tuple":
        return (ops.flatten(Xs), ops.asarray1i([len(x) for x in Xs]))
    if fmt == "array3d":  # (nL, nB, nF): every sequence as long as the first
        return numpy.stack([x[: len(Xs[0])] for x in Xs if len(x) >= len(Xs[0])], axis=1)
    raise ValueError(fmt)


def _leaves(obj):
    """The float arrays inside obj, in a fixed order."""
    if isinstance(obj, numpy.ndarray):
        return [obj] if obj.dtype.kind == "f" else []
    if hasattr(obj, "size_at_t"):  # Padded (plait or thinc)
        return [obj.data]
    if hasattr(obj, "lengths") and hasattr(obj, "dataXd"):  # Ragged (plait or thinc)
        return [obj.dataXd]
    if isinstance(obj, (list, tuple)):
        return [leaf for item in obj for leaf in _leaves(item)]
    return []


def _flat(obj):
    leaves = _leaves(obj)
    return numpy.concatenate([a.ravel() for a in leaves]) if leaves else numpy.zeros(0)


def _rebuild(obj, x):
    """obj with its float leaves replaced by consecutive pieces of the vector x."""
    pos = [0]

    def take(a):
        piece = x[pos[0] : pos[0] + a.size].reshape(a.shape).astype(a.dtype)
        pos[0] += a.size
        return piece

    def go(o):
        if isinstance(o, numpy.ndarray):
            return take(o) if o.dtype.kind == "f" else o
        if isinstance(o, Padded):
            return Padded(take(o.data), o.size_at_t, o.lengths, o.indices)
        if isinstance(o, Ragged):
            return Ragged(take(o.dataXd), o.lengths)
        if isinstance(o, tuple):
            return tuple(go(i) for i in o)
        if isinstance(o, list):
            return [go(i) for i in o]
        return o

    out = go(obj)
    assert pos[0] == x.size
    return out


def _use_float64(model):
    for node in model.walk():
        node.ops = OPS
        for name in node.param_names:
            if node.has_param(name):
                node.set_param(name, node.get_param(name).astype("float64"))


def check_gradients(model, X, eps=1e-6, atol=1e-6):
    """Central differences of L = <Y, R> against backprop(R), for the input and every param."""
    _use_float64(model)
    rng = numpy.random.default_rng(1)
    Y, backprop = model(X, is_train=True)
    R = _rebuild(Y, rng.normal(size=_flat(Y).size))
    r = _flat(R)
    for node in model.walk():
        for name in node.param_names:
            if node.has_param(name):
                node.set_grad(name, numpy.zeros_like(node.get_param(name)))
    dX = backprop(R)

    def loss(Xv):
        return float(_flat(model.predict(Xv)) @ r)

    x0 = _flat(X)
    numeric = numpy.zeros_like(x0)
    for i in range(x0.size):
        xp, xm = x0.copy(), x0.copy()
        xp[i] += eps
        xm[i] -= eps
        numeric[i] = (loss(_rebuild(X, xp)) - loss(_rebuild(X, xm))) / (2 * eps)
    numpy.testing.assert_allclose(_flat(dX), numeric, atol=atol, rtol=1e-5)
    checked = 0
    for node in model.walk():
        for name in node.param_names:
            if not node.has_param(name):
                continue
            param = node.get_param(name)
            analytic = node.get_grad(name).copy()
            numeric = numpy.zeros_like(param)
            for idx in numpy.ndindex(param.shape):
                orig = param[idx]
                param[idx] = orig + eps
                up = loss(X)
                param[idx] = orig - eps
                down = loss(X)
                param[idx] = orig
                numeric[idx] = (up - down) / (2 * eps)
            numpy.testing.assert_allclose(analytic, numeric, atol=atol, rtol=1e-5)
            checked += 1
    return dX, checked


def _rcumsum(A):
    return numpy.flip(numpy.cumsum(numpy.flip(A, 0), 0), 0)


def make_seq_layer(kind, nF, ModelCls=Model, RaggedCls=Ragged, PaddedCls=Padded):
    """A width-preserving layer with a param: each sequence -> cumsum over time of X * w.

    kind says what it takes and returns: "list", "ragged" or "padded". Built with ModelCls,
    so the same layer can be made for thinc (for the differential tests).
    """

    def seq_fwd(X, w):
        return numpy.cumsum(X * w, 0)

    def seq_bwd(X, dY, w):
        g = _rcumsum(dY)
        return g * w, (X * g).sum(0)

    def forward(model, X, is_train):
        w = model.get_param("w")
        if kind == "list":
            Xs = list(X)
        elif kind == "ragged":
            Xs = numpy.split(X.dataXd, numpy.cumsum(X.lengths)[:-1])
        else:
            Xs = [X.data[: int(n), i] for i, n in enumerate(X.lengths)]
        Ys = [seq_fwd(x, w) for x in Xs]
        if kind == "list":
            Y = Ys
        elif kind == "ragged":
            Y = RaggedCls(numpy.concatenate(Ys), X.lengths)
        else:
            data = numpy.zeros_like(X.data)
            for i, y in enumerate(Ys):
                data[: len(y), i] = y
            Y = PaddedCls(data, X.size_at_t, X.lengths, X.indices)

        def backprop(dY):
            if kind == "list":
                dYs = list(dY)
            elif kind == "ragged":
                dYs = numpy.split(dY.dataXd, numpy.cumsum(dY.lengths)[:-1])
            else:
                dYs = [dY.data[: int(n), i] for i, n in enumerate(dY.lengths)]
            pairs = [seq_bwd(x, dy, w) for x, dy in zip(Xs, dYs)]
            model.inc_grad("w", sum(p[1] for p in pairs))
            dXs = [p[0] for p in pairs]
            if kind == "list":
                return dXs
            if kind == "ragged":
                return RaggedCls(numpy.concatenate(dXs), dY.lengths)
            data = numpy.zeros_like(dY.data)
            for i, dx in enumerate(dXs):
                data[: len(dx), i] = dx
            return PaddedCls(data, dY.size_at_t, dY.lengths, dY.indices)

        return Y, backprop

    w = numpy.random.default_rng(7).normal(size=(nF,)).astype("float32")
    return ModelCls(f"cumsum_{kind}", forward, dims={"nO": nF, "nI": nF}, params={"w": w})


def make_scale(nF, ModelCls=Model):
    """Elementwise Y = X * w over the last axis, for inputs of any rank."""

    def forward(model, X, is_train):
        w = model.get_param("w")

        def backprop(dY):
            model.inc_grad("w", (dY * X).reshape(-1, nF).sum(0))
            return dY * w

        return X * w, backprop

    w = numpy.random.default_rng(3).normal(size=(nF,)).astype("float32")
    return ModelCls("scale", forward, dims={"nO": nF, "nI": nF}, params={"w": w})


def _close(a, b):
    numpy.testing.assert_allclose(_flat(a), _flat(b), rtol=1e-5, atol=1e-6)


# --- with_array / with_array2d ------------------------------------------------------------


def test_with_array_tree_matches_thinc_layout():
    model = with_array(Linear(3, 4), pad=2)
    assert model.name == "with_array(linear)"
    assert model.attrs == {"pad": 2}
    assert model.dim_names == ("nO", "nI")
    assert (model.get_dim("nO"), model.get_dim("nI")) == (3, 4)
    assert model.layers[0].name == "linear"
    model2d = with_array2d(Linear(3, 4))
    assert model2d.name == "with_array(linear)"
    assert model2d.attrs == {"pad": 0}
    assert inspect.signature(with_array).parameters["pad"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


@pytest.mark.parametrize("wrapper", [with_array, with_array2d])
@pytest.mark.parametrize("pad", [0, 2])
def test_with_array_list_matches_numpy_and_is_batch_invariant(wrapper, pad):
    model = wrapper(Linear(3, 4), pad=pad).initialize()
    W, b = model.layers[0].get_param("W"), model.layers[0].get_param("b")
    Xs = _seqs(dtype="float32", lengths=(3, 0, 2))
    Ys, backprop = model(Xs, is_train=True)
    assert isinstance(Ys, list) and [y.shape for y in Ys] == [(3, 3), (0, 3), (2, 3)]
    for X, Y in zip(Xs, Ys):
        numpy.testing.assert_allclose(Y, X @ W.T + b, rtol=1e-5, atol=1e-6)
        numpy.testing.assert_allclose(model.predict([X])[0], Y, rtol=1e-5, atol=1e-6)
    dXs = backprop([numpy.ones_like(Y) for Y in Ys])
    assert [dX.shape for dX in dXs] == [X.shape for X in Xs]
    numpy.testing.assert_allclose(dXs[0], numpy.ones((3, 3), "f") @ W, rtol=1e-5)


@pytest.mark.parametrize("wrapper", [with_array, with_array2d])
@pytest.mark.parametrize("fmt", ["list", "ragged"])
def test_with_array_gradients(wrapper, fmt):
    model = wrapper(Linear(2, 3), pad=1).initialize()
    X = _as_format(fmt, _seqs(nF=3, lengths=(2, 1, 3)))
    dX, n_params = check_gradients(model, X)
    assert type(dX) is type(X) and n_params == 2


def test_with_array_passes_arrays_and_padded_data_through():
    model = with_array(make_scale(4))
    X = _seqs()[0]
    numpy.testing.assert_allclose(model.predict(X), X * model.layers[0].get_param("w"))
    Xp = _as_format("padded", _seqs())
    Yp, backprop = model(Xp, is_train=True)
    assert isinstance(Yp, Padded) and Yp.data.shape == Xp.data.shape
    numpy.testing.assert_array_equal(Yp.indices, Xp.indices)
    dX, _ = check_gradients(model, Xp)
    assert isinstance(dX, Padded)


def test_with_array2d_merges_padded_axes():
    model = with_array2d(Linear(2, 4)).initialize()
    Xs = _seqs(dtype="float32")
    Yp = model.predict(OPS.list2padded(Xs))
    assert isinstance(Yp, Padded) and Yp.data.shape == (4, 4, 2)
    for X, Y in zip(Xs, OPS.padded2list(Yp)):
        numpy.testing.assert_allclose(Y, model.layers[0].predict(X), rtol=1e-5, atol=1e-6)
    dX, _ = check_gradients(with_array2d(Linear(2, 4)).initialize(), _as_format("padded", _seqs()))
    assert isinstance(dX, Padded) and dX.data.shape == (4, 4, 4)


# with_array gives Padded data to the layer as 3d, which Linear does not take.
@pytest.mark.parametrize(
    "wrapper, fmt",
    [(with_array, "list"), (with_array, "ragged"), (with_array2d, "list"), (with_array2d, "ragged"), (with_array2d, "padded")],
)
def test_with_array_infers_dims(wrapper, fmt):
    model = wrapper(Linear())
    X = _as_format(fmt, _seqs(nF=4, dtype="float32"))
    Y = _as_format(fmt, _seqs(nF=6, dtype="float32"))
    model.initialize(X=X, Y=Y)
    assert (model.get_dim("nI"), model.get_dim("nO")) == (4, 6)
    assert model.layers[0].get_param("W").shape == (6, 4)


def test_with_array_empty_batch_and_bad_input():
    model = with_array(Linear(2, 3)).initialize()
    Ys, backprop = model([], is_train=True)
    assert Ys == [] and backprop([]) == []
    with pytest.raises(TypeError, match=r"with_array\(linear\).*str"):
        model("not a batch", is_train=False)
    with pytest.raises(ValueError, match="'linear'"):
        with_array(Linear(2))(_seqs(dtype="float32"), is_train=False)


def test_with_array_data_validation_accepts_every_format():
    for fmt in ("list", "ragged"):
        with data_validation(True):
            with_array(Linear(2)).initialize(X=_as_format(fmt, _seqs(dtype="float32")))
    with data_validation(True), pytest.raises(DataValidationError):
        with_array(Linear(2)).initialize(X={"not": "a batch"})


@pytest.mark.parametrize("fmt", ["list", "ragged", "padded"])
@pytest.mark.parametrize("which", ["with_array", "with_array2d"])
def test_with_array_matches_thinc(fmt, which):
    thinc = pytest.importorskip("thinc.api")
    t_ops = thinc.NumpyOps()
    Xs = _seqs(dtype="float32")
    if which == "with_array2d" or fmt != "padded":
        t_model = getattr(thinc, which)(thinc.Linear(3, 4), pad=1)
        p_model = globals()[which](Linear(3, 4), pad=1)
    else:
        t_model = thinc.with_array(make_scale(4, ModelCls=thinc.Model), pad=1)
        p_model = with_array(make_scale(4), pad=1)
    t_model.initialize()
    p_model.initialize()
    p_model.from_bytes(t_model.to_bytes())
    t_X = _as_format(fmt, Xs, ops=t_ops, ragged_cls=thinc.Ragged)
    p_X = _as_format(fmt, Xs)
    t_Y, t_back = t_model(t_X, is_train=True)
    p_Y, p_back = p_model(p_X, is_train=True)
    _close(t_Y, p_Y)
    _close(t_back(t_Y), p_back(p_Y))
    inner = p_model.layers[0]
    for name in inner.param_names:
        numpy.testing.assert_allclose(inner.get_grad(name), t_model.layers[0].get_grad(name), rtol=1e-5, atol=1e-6)
    # and back: plait bytes load into the thinc model
    t_model2 = getattr(thinc, which)(thinc.Linear(3, 4)) if inner.name == "linear" else None
    if t_model2 is not None:
        t_model2.from_bytes(p_model.to_bytes())
        assert t_model2.attrs["pad"] == 1
        numpy.testing.assert_array_equal(t_model2.layers[0].get_param("W"), inner.get_param("W"))


def test_with_array_bytes_round_trip():
    model = with_array(Linear(3, 4), pad=3).initialize()
    other = with_array(Linear(3, 4)).initialize()
    other.from_bytes(model.to_bytes())
    assert other.attrs["pad"] == 3
    Xs = _seqs(dtype="float32")
    _close(model.predict(Xs), other.predict(Xs))


# --- with_list / with_padded / with_ragged -----------------------------------------------


@pytest.mark.parametrize("fmt", ["list", "ragged", "padded"])
def test_with_list(fmt):
    model = with_list(make_seq_layer("list", 4))
    assert model.name == "with_list(cumsum_list)" and model.dim_names == ("nO", "nI")
    X = _as_format(fmt, _seqs())
    Y = model.predict(X)
    assert type(Y) is type(X)
    w = model.layers[0].get_param("w")
    ys = Y if fmt == "list" else (OPS.unflatten(Y.dataXd, Y.lengths) if fmt == "ragged" else OPS.padded2list(Y))
    for x, y in zip(_seqs(), ys):
        numpy.testing.assert_allclose(y, numpy.cumsum(x * w, 0), rtol=1e-5)
    dX, n_params = check_gradients(model, X)
    assert type(dX) is type(X) and n_params == 1


@pytest.mark.parametrize("fmt", ["list", "ragged", "padded", "tuple", "array"])
def test_with_padded(fmt):
    model = with_padded(make_seq_layer("padded", 4))
    assert model.name == "with_padded(cumsum_padded)"
    if fmt == "tuple":
        Xp = OPS.list2padded(_seqs())
        X = (Xp.data, Xp.size_at_t, Xp.lengths, Xp.indices)
    elif fmt == "array":
        X = numpy.random.default_rng(0).normal(size=(3, 2, 4))  # (nL, nB, nF), all full length
    else:
        X = _as_format(fmt, _seqs())
    Y = model.predict(X)
    assert type(Y) is type(X)
    w = model.layers[0].get_param("w")
    if fmt == "array":
        numpy.testing.assert_allclose(Y, numpy.cumsum(X * w, 0), rtol=1e-5)
    elif fmt == "list":
        for x, y in zip(X, Y):
            numpy.testing.assert_allclose(y, numpy.cumsum(x * w, 0), rtol=1e-5)
    dX, n_params = check_gradients(model, X)
    assert type(dX) is type(X) and n_params == 1
    if fmt == "tuple":
        assert len(dX) == 4


@pytest.mark.parametrize("fmt", ["list", "ragged", "padded", "tuple"])
def test_with_ragged(fmt):
    model = with_ragged(make_seq_layer("ragged", 4))
    assert model.name == "with_ragged(cumsum_ragged)"
    assert model.dim_names == ()  # as in Thinc: the node has no dims
    if fmt == "tuple":
        Xr = _as_format("ragged", _seqs())
        X = (Xr.dataXd, Xr.lengths)
    else:
        X = _as_format(fmt, _seqs())
    Y = model.predict(X)
    assert type(Y) is type(X)
    if fmt == "list":
        w = model.layers[0].get_param("w")
        for x, y in zip(X, Y):
            numpy.testing.assert_allclose(y, numpy.cumsum(x * w, 0), rtol=1e-5)
    dX, n_params = check_gradients(model, X)
    assert type(dX) is type(X) and n_params == 1


def test_with_ragged_tuple_of_two_sequences_is_a_list():
    # A 2-tuple of float sequences is a batch of two sequences, not (data, lengths).
    model = with_ragged(make_seq_layer("ragged", 4))
    X = tuple(_seqs(lengths=(2, 3)))
    Y = model.predict(X)
    assert isinstance(Y, list) and [y.shape for y in Y] == [(2, 4), (3, 4)]


@pytest.mark.parametrize("wrapper", [with_list, with_padded, with_ragged])
def test_sequence_wrappers_initialize_from_any_format(wrapper):
    kind = {with_list: "list", with_padded: "padded", with_ragged: "ragged"}[wrapper]
    seen = []

    def init(model, X=None, Y=None):
        seen.append((type(X).__name__, type(Y).__name__))

    for fmt in ("list", "ragged", "padded"):
        inner = make_seq_layer(kind, 4)
        inner.init = init
        wrapper(inner).initialize(X=_as_format(fmt, _seqs()), Y=_as_format(fmt, _seqs()))
    expected = {"list": "list", "padded": "Padded", "ragged": "Ragged"}[kind]
    assert seen == [(expected, expected)] * 3
    with pytest.raises(TypeError, match="cannot"):
        (with_padded if wrapper is with_padded else with_ragged)(make_seq_layer(kind, 4)).predict("text")


@pytest.mark.parametrize(
    "name, kind, formats",
    [
        ("with_list", "list", ["list", "ragged", "padded"]),
        ("with_padded", "padded", ["list", "ragged", "padded", "padded_tuple", "array3d"]),
        ("with_ragged", "ragged", ["list", "ragged", "padded", "ragged_tuple"]),
    ],
)
def test_sequence_wrappers_match_thinc(name, kind, formats):
    thinc = pytest.importorskip("thinc.api")
    t_ops = thinc.NumpyOps()
    t_model = getattr(thinc, name)(make_seq_layer(kind, 4, thinc.Model, thinc.Ragged, thinc.Padded))
    p_model = globals()[name](make_seq_layer(kind, 4))
    t_model.layers[0].set_param("w", numpy.arange(4, dtype="float32") - 1.5)
    p_model.from_bytes(t_model.to_bytes())
    numpy.testing.assert_array_equal(p_model.layers[0].get_param("w"), numpy.arange(4) - 1.5)
    Xs = _seqs(dtype="float32")
    for fmt in formats:
        t_Y, t_back = t_model(_as_format(fmt, Xs, ops=t_ops, ragged_cls=thinc.Ragged), is_train=True)
        p_Y, p_back = p_model(_as_format(fmt, Xs), is_train=True)
        _close(t_Y, p_Y)
        _close(t_back(t_Y), p_back(p_Y))
    t_copy = getattr(thinc, name)(make_seq_layer(kind, 4, thinc.Model, thinc.Ragged, thinc.Padded))
    t_copy.from_bytes(p_model.to_bytes())
    numpy.testing.assert_array_equal(t_copy.layers[0].get_param("w"), p_model.layers[0].get_param("w"))


def test_with_padded_rejects_bad_arrays():
    model = with_padded(make_seq_layer("padded", 4))
    with pytest.raises(ValueError, match=r"with_padded\(cumsum_padded\).*\(nL, nB, nF\)"):
        model.predict(numpy.zeros((3, 4)))


# --- with_flatten, with_getitem, with_reshape ---------------------------------------------


def _stack_layer(ModelCls=Model):
    """List of 1d float vectors -> (n, nF) array, times 2; dX is a (n, nF) array."""

    def forward(model, Xs, is_train):
        def backprop(dY):
            return dY * 2

        return numpy.asarray(Xs, dtype="float64").reshape(len(Xs), -1) * 2, backprop

    return ModelCls("stack", forward)


def test_with_flatten():
    model = with_flatten(_stack_layer())
    assert model.name == "with_flatten(stack)"
    rows = numpy.arange(12, dtype="float64").reshape(6, 2)
    Xnest = [[rows[0], rows[1]], [], [rows[2], rows[3], rows[4]], [rows[5]]]
    Ynest, backprop = model(Xnest, is_train=True)
    assert [y.shape for y in Ynest] == [(2, 2), (0, 2), (3, 2), (1, 2)]
    numpy.testing.assert_array_equal(numpy.concatenate(Ynest), rows * 2)
    dX = backprop([numpy.ones_like(y) for y in Ynest])
    assert [d.shape for d in dX] == [(2, 2), (0, 2), (3, 2), (1, 2)]  # split on rows, per sequence
    assert all((d == 2).all() for d in dX)


def test_with_flatten_matches_thinc_forward():
    thinc = pytest.importorskip("thinc.api")
    rows = numpy.arange(10, dtype="float64").reshape(5, 2)
    Xnest = [[rows[0]], [rows[1], rows[2]], [rows[3], rows[4]]]
    t_Y = thinc.with_flatten(_stack_layer(thinc.Model)).predict(Xnest)
    p_Y = with_flatten(_stack_layer()).predict(Xnest)
    assert len(t_Y) == len(p_Y)
    _close(t_Y, p_Y)


def test_with_flatten_v2():
    def forward(model, Xs, is_train):
        return [x.upper() for x in Xs], lambda dYs: [d * 2 for d in dYs]

    model = with_flatten_v2(Model("upper", forward))
    assert model.name == "with_flatten(upper)"
    Ynest, backprop = model([["a", "b"], [], ["c"]], is_train=True)
    assert Ynest == [["A", "B"], [], ["C"]]
    assert backprop([[1, 2], [], [3]]) == [[2, 4], [], [6]]
    seen = {}
    model.layers[0].init = lambda m, X=None, Y=None: seen.update(X=X, Y=Y)
    model.initialize(X=[["a"], ["b", "c"]], Y=[["A"], ["B", "C"]])
    assert seen == {"X": ["a", "b", "c"], "Y": ["A", "B", "C"]}
    with pytest.raises(ValueError, match="one output row per item"):
        with_flatten_v2(Model("drop", lambda m, X, is_train: (X[:-1], None))).predict([["a"], ["b"]])


@pytest.mark.parametrize("idx", [1, -1])
def test_with_getitem(idx):
    model = with_getitem(idx, Linear(2, 3)).initialize()
    assert model.name == "with_getitem(linear)" and model.attrs == {"idx": idx}
    X0, X1 = numpy.ones((2, 5)), _seqs(nF=3)[0]
    Y, backprop = model((X0, X1), is_train=True)
    assert isinstance(Y, tuple) and Y[0] is X0 and Y[1].shape == (3, 2)
    dX, n_params = check_gradients(model, (X0, X1))
    assert isinstance(dX, tuple) and n_params == 2
    assert model.predict([X0, X1])[1].shape == (3, 2)  # lists work too
    with pytest.raises(IndexError, match="out of range"):
        model.predict((X1,) * 0)
    with pytest.raises(TypeError, match="idx"):
        with_getitem("0", Linear(2, 3))


def test_with_getitem_matches_thinc():
    thinc = pytest.importorskip("thinc.api")
    t_model = thinc.with_getitem(0, thinc.Linear(2, 3)).initialize()
    p_model = with_getitem(0, Linear(2, 3))
    p_model.from_bytes(t_model.to_bytes())
    assert p_model.attrs["idx"] == 0
    X = (_seqs(nF=3, dtype="float32")[2], "other")
    t_Y, p_Y = t_model.predict(X), p_model.predict(X)
    numpy.testing.assert_allclose(t_Y[0], p_Y[0], rtol=1e-5, atol=1e-6)
    assert p_Y[1] == "other"


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 1, 2, 4)])
def test_with_reshape(shape):
    model = with_reshape(Linear(3))
    X = numpy.random.default_rng(0).normal(size=shape).astype("float32")
    model.initialize(X=X)
    assert model.name == "with_reshape(linear)"
    assert (model.get_dim("nI"), model.get_dim("nO")) == (4, 3)
    Y = model.predict(X)
    assert Y.shape == shape[:-1] + (3,)
    numpy.testing.assert_allclose(Y.reshape(-1, 3), model.layers[0].predict(X.reshape(-1, 4)), rtol=1e-5, atol=1e-6)
    dX, n_params = check_gradients(model, X.astype("float64"))
    assert dX.shape == shape and n_params == 2
    with pytest.raises(ValueError, match=r"with_reshape\(linear\).*at least 2"):
        model.predict(numpy.zeros(4, "f"))


def test_with_reshape_matches_thinc():
    thinc = pytest.importorskip("thinc.api")
    X = numpy.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
    t_model = thinc.with_reshape(thinc.Linear(5)).initialize(X=X)
    p_model = with_reshape(Linear(5)).initialize(X=X)
    p_model.from_bytes(t_model.to_bytes())
    numpy.testing.assert_allclose(t_model.predict(X), p_model.predict(X), rtol=1e-5, atol=1e-6)
    assert p_model.to_dict()["nodes"] == t_model.to_dict()["nodes"]


# --- with_debug, with_nvtx_range, with_signpost_interval, with_cpu ------------------------


def test_with_debug_calls_hooks_and_keeps_the_layer():
    calls = []
    inner = Linear(2, 3)
    model = with_debug(
        inner,
        name="dbg",
        on_init=lambda m, X, Y: calls.append(("init", m, X is not None, Y)),
        on_forward=lambda m, X, is_train: calls.append(("forward", m, X.shape, is_train)),
        on_backprop=lambda dY: calls.append(("backprop", dY.shape)),
    )
    assert model is inner and model.name == "debug:dbg"
    X = numpy.ones((4, 3), "f")
    model.initialize(X=X)
    Y, backprop = model(X, is_train=True)
    backprop(Y)
    assert calls == [("init", inner, True, None), ("forward", inner, (4, 3), True), ("backprop", (4, 2))]
    numpy.testing.assert_allclose(Y, X @ inner.get_param("W").T + inner.get_param("b"))


def test_with_debug_name_defaults_to_the_layer_name_with_prefix():
    assert with_debug(Linear(2, 3)).name == "debug:linear"
    with pytest.raises(TypeError, match="name must be a str"):
        with_debug(Linear(2, 3), name=3)


def test_with_debug_copy_uses_its_own_params_and_keeps_validation():
    model = with_debug(Linear(2, 3)).initialize()
    clone = model.copy()
    clone.set_param("W", clone.get_param("W") + 1)
    X = numpy.ones((1, 3), "f")
    assert not numpy.allclose(model.predict(X), clone.predict(X))
    with data_validation(True), pytest.raises(DataValidationError):
        with_debug(Linear(2, 3)).initialize(X=[1, 2, 3])


def test_with_nvtx_range_is_transparent_without_cupy():
    model = with_nvtx_range(Linear(2, 3), forward_color=1).initialize()
    assert model.name == "linear"
    X = _seqs(nF=3, dtype="float32")[0]
    numpy.testing.assert_allclose(model.predict(X), X @ model.get_param("W").T + model.get_param("b"), rtol=1e-5, atol=1e-6)
    _, n_params = check_gradients(model, X.astype("float64"))
    assert n_params == 2


def test_with_signpost_interval(monkeypatch):
    from plait import compat

    monkeypatch.setattr(compat, "has_os_signpost", False, raising=False)
    with pytest.raises(ValueError, match="os_signpost"):
        with_signpost_interval(Linear(2, 3), signposter=None)
    monkeypatch.setattr(compat, "has_os_signpost", True, raising=False)
    intervals = []

    class FakeSignposter:
        def use_interval(self, message):
            import contextlib

            intervals.append(message)
            return contextlib.nullcontext()

    model = with_signpost_interval(Linear(2, 3), FakeSignposter(), name="L")
    model.initialize()
    Y, backprop = model(numpy.ones((1, 3), "f"), is_train=True)
    backprop(Y)
    assert intervals == ["L init", "L forward", "L backprop"]


def test_with_cpu_converts_containers_and_passes_is_train():
    modes = []

    def forward(model, X, is_train):
        modes.append(is_train)
        return X, lambda dY: dY

    inner = Model("identity", forward)
    ops = NumpyOps()
    model = with_cpu(inner, ops)
    assert model.name == "with_cpu(identity)" and model.ops is ops and isinstance(inner.ops, NumpyOps)
    X = {"a": (numpy.ones(2), [numpy.zeros((1, 2))]), "r": _as_format("ragged", _seqs()), "s": "text"}
    Y, backprop = model(X, is_train=False)
    assert Y["s"] == "text" and isinstance(Y["r"], Ragged) and isinstance(Y["a"], tuple)
    numpy.testing.assert_array_equal(Y["r"].dataXd, X["r"].dataXd)
    assert modes == [False]
    assert backprop(Y)["a"][1][0].shape == (1, 2)
    assert registry.layers.get("with_cpu.v1") is with_cpu
    with pytest.raises(TypeError, match="Ops"):
        with_cpu(inner, "cpu")


# --- registry and framework-wrapper stubs -------------------------------------------------


def test_registered_names():
    expected = {
        "with_array.v1": with_array,
        "with_array2d.v1": with_array2d,
        "with_list.v1": with_list,
        "with_padded.v1": with_padded,
        "with_ragged.v1": with_ragged,
        "with_flatten.v1": with_flatten,
        "with_flatten.v2": with_flatten_v2,
        "with_getitem.v1": with_getitem,
        "with_reshape.v1": with_reshape,
        "with_cpu.v1": with_cpu,
        "PyTorchWrapper.v1": PyTorchWrapper,
        "PyTorchWrapper.v2": PyTorchWrapper_v2,
        "PyTorchWrapper.v3": PyTorchWrapper_v3,
        "PyTorchRNNWrapper.v1": PyTorchRNNWrapper,
        "MXNetWrapper.v1": MXNetWrapper,
    }
    for name, func in expected.items():
        assert registry.layers.get(name) is func


def test_with_array_from_config():
    from plait.config import Config

    cfg = Config().from_str(
        """
        [model]
        @layers = "with_array.v1"
        pad = 1

        [model.layer]
        @layers = "Linear.v1"
        nO = 3
        nI = 2
        """
    )
    model = registry.resolve(cfg)["model"]
    assert model.name == "with_array(linear)" and model.attrs["pad"] == 1 and model.get_dim("nO") == 3


@pytest.mark.parametrize(
    "call",
    [
        lambda: PyTorchWrapper(object()),
        lambda: PyTorchWrapper_v2(object(), mixed_precision=True),
        lambda: PyTorchWrapper_v3(object()),
        lambda: PyTorchRNNWrapper(object()),
        lambda: PyTorchShim(object()),
        lambda: TorchScriptShim(object()),
    ],
)
def test_pytorch_wrappers_reject_what_is_not_a_module(call):
    pytest.importorskip("torch")
    with pytest.raises(TypeError, match="expected a torch"):
        call()


def test_pytorch_wrappers_build_placeholders_and_refuse_plain_models():
    pytest.importorskip("torch")
    # A None module is a placeholder to from_bytes into, as in Thinc.
    assert registry.resolve({"m": {"@layers": "PyTorchWrapper.v1", "pytorch_model": None}})["m"].name == "pytorch"
    assert TorchScriptWrapper_v1().name == "pytorch_script"
    assert PyTorchGradScaler().found_inf is False
    with pytest.raises(ValueError, match="PyTorchShim"):
        pytorch_to_torchscript_wrapper(Linear(2, 2))


def test_shim_classes_and_keras_registry():
    for cls in (PyTorchShim, TorchScriptShim, TensorFlowShim, MXNetShim):
        assert issubclass(cls, Shim)
    assert issubclass(TorchScriptShim, PyTorchShim)

    @keras_model_fns("plait-test-keras-model")
    def build():
        return "built"

    assert keras_model_fns.get("plait-test-keras-model")() == "built"


def test_wrappers_do_not_import_frameworks():
    code = (
        "import sys\n"
        "import plait.layers.pytorchwrapper, plait.layers.torchscriptwrapper\n"
        "import plait.layers.tensorflowwrapper, plait.layers.mxnetwrapper, plait.layers.with_cpu\n"
        "import plait.layers.with_signpost_interval\n"
        "print(sorted(m for m in ('torch', 'tensorflow', 'mxnet', 'cupy', 'os_signpost') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_signatures_match_thinc():
    pytest.importorskip("thinc")
    import importlib

    def sig(func):
        return [
            (p.name, p.kind, "<callable>" if callable(p.default) else p.default)
            for p in inspect.signature(func).parameters.values()
        ]

    names = {
        "layers": [(m, m) for m in (
            "with_array with_array2d with_list with_padded with_ragged with_flatten with_flatten_v2 "
            "with_getitem with_reshape with_debug with_cpu with_nvtx_range with_signpost_interval"
        ).split()]
        + [("pytorchwrapper", n) for n in ("PyTorchWrapper", "PyTorchWrapper_v2", "PyTorchWrapper_v3", "PyTorchRNNWrapper")]
        + [("torchscriptwrapper", n) for n in ("TorchScriptWrapper_v1", "pytorch_to_torchscript_wrapper")]
        + [("tensorflowwrapper", n) for n in ("TensorFlowWrapper", "keras_subclass")]
        + [("mxnetwrapper", "MXNetWrapper")],
        "shims": [("pytorch", "PyTorchShim"), ("torchscript", "TorchScriptShim"), ("tensorflow", "TensorFlowShim"),
                  ("tensorflow", "maybe_handshake_model"), ("mxnet", "MXNetShim"),
                  ("pytorch_grad_scaler", "PyTorchGradScaler")],
    }
    for package, pairs in names.items():
        for module, name in pairs:
            ours = getattr(importlib.import_module(f"plait.{package}.{module}"), name)
            theirs = getattr(importlib.import_module(f"thinc.{package}.{module}"), name)
            assert sig(ours) == sig(theirs), f"{package}.{module}.{name}"
