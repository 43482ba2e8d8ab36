"""Weight and activation layers: Linear, Relu, Sigmoid, the dense activations, ClippedLinear and
presets, Softmax, MultiSoftmax, LayerNorm, Maxout, CauchySimilarity and the parameter-free
activations (Logistic, sigmoid_activation, softmax_activation)."""
import math
import pickle

import numpy
import pytest
import scipy.special

from plait.backends import NumpyOps
from plait.config import Config, registry
from plait.initializers import glorot_uniform_init, he_normal_init, zero_init
from plait.layers.cauchysimilarity import CauchySimilarity
from plait.layers.clipped_linear import ClippedLinear, HardSigmoid, HardTanh, ReluK
from plait.layers.dish import Dish
from plait.layers.gelu import Gelu
from plait.layers.hard_swish import HardSwish
from plait.layers.hard_swish_mobilenet import HardSwishMobilenet
from plait.layers.layernorm import LayerNorm
from plait.layers.linear import Linear
from plait.layers.logistic import Logistic
from plait.layers.maxout import Maxout
from plait.layers.mish import Mish
from plait.layers.multisoftmax import MultiSoftmax
from plait.layers.relu import Relu
from plait.layers.sigmoid import Sigmoid
from plait.layers.sigmoid_activation import sigmoid_activation
from plait.layers.softmax import Softmax, Softmax_v2
from plait.layers.softmax_activation import softmax_activation
from plait.layers.swish import Swish
from plait.util import DataValidationError, data_validation, fix_random_seed

nB, nI, nO = 4, 3, 5


def _sigmoid(Z):
    return 1.0 / (1.0 + numpy.exp(-Z))


def _softmax(Z, axis=-1):
    E = numpy.exp(Z - Z.max(axis=axis, keepdims=True))
    return E / E.sum(axis=axis, keepdims=True)


# name -> (factory(nO, nI, **kw), node name, numpy activation of the preactivation Z, default init_W)
DENSE = {
    "Linear": (Linear, "linear", lambda Z: Z, glorot_uniform_init),
    "Relu": (Relu, "relu", lambda Z: numpy.maximum(Z, 0), glorot_uniform_init),
    "Sigmoid": (Sigmoid, "sigmoid", _sigmoid, zero_init),
    "Swish": (Swish, "swish", lambda Z: Z * _sigmoid(Z), he_normal_init),
    "Gelu": (Gelu, "gelu", lambda Z: Z * 0.5 * (1 + scipy.special.erf(Z / math.sqrt(2))), he_normal_init),
    "Dish": (Dish, "dish", lambda Z: Z * 0.5 * (1 + Z / numpy.sqrt(1 + Z * Z)), he_normal_init),
    "Mish": (Mish, "mish", lambda Z: Z * numpy.tanh(numpy.log1p(numpy.exp(Z))), glorot_uniform_init),
    "HardSwish": (HardSwish, "hardswish", lambda Z: Z * numpy.clip(0.2 * Z + 0.5, 0, 1), he_normal_init),
    "HardSwishMobilenet": (
        HardSwishMobilenet, "hardswishmobilenet", lambda Z: Z * numpy.clip(Z + 3, 0, 6) / 6, he_normal_init,
    ),
    "ClippedLinear": (
        lambda nO=None, nI=None, **kw: ClippedLinear(nO, nI, slope=0.7, offset=0.1, min_val=-0.5, max_val=0.8, **kw),
        "clipped_linear",
        lambda Z: numpy.clip(0.7 * Z + 0.1, -0.5, 0.8),
        glorot_uniform_init,
    ),
    "HardSigmoid": (HardSigmoid, "clipped_linear", lambda Z: numpy.clip(0.2 * Z + 0.5, 0, 1), glorot_uniform_init),
    "HardTanh": (HardTanh, "clipped_linear", lambda Z: numpy.clip(Z, -1, 1), glorot_uniform_init),
    "ReluK": (
        lambda nO=None, nI=None, **kw: ReluK(nO, nI, k=2.0, **kw), "clipped_linear",
        lambda Z: numpy.clip(Z, 0, 2.0), glorot_uniform_init,
    ),
}
# Layers that take dropout= and normalize=.
WITH_EXTRAS = [name for name in DENSE if name not in ("Linear", "Sigmoid")]


def _rng(seed=0):
    return numpy.random.default_rng(seed)


def _randomize(model, rng, dtype="float32", scale=0.7):
    """Give every param of the tree random values (the default inits are often zeros)."""
    for node in model.walk():
        for name in node.param_names:
            if node.has_param(name):
                shape = node.get_param(name).shape
                node.set_param(name, (rng.normal(size=shape) * scale).astype(dtype))
    return model


def _float64_model(model, X):
    model.ops = NumpyOps()
    for node in model.walk():
        node.ops = model.ops
    model.initialize(X=X)
    return _randomize(model, _rng(1), dtype="float64")


def _numeric_grad(loss, arr, eps=1e-6):
    """Central differences of loss() with respect to each cell of arr (mutated, then restored)."""
    grad = numpy.zeros_like(arr)
    for idx in numpy.ndindex(*arr.shape):
        old = arr[idx]
        arr[idx] = old + eps
        up = loss()
        arr[idx] = old - eps
        down = loss()
        arr[idx] = old
        grad[idx] = (up - down) / (2 * eps)
    return grad


def _check_param_grads(model, loss):
    for node in model.walk():
        for name in node.param_names:
            # get_param returns the stored array, so perturbing it perturbs the model.
            expected = _numeric_grad(loss, node.get_param(name))
            numpy.testing.assert_allclose(
                node.get_grad(name), expected, rtol=1e-5, atol=1e-7, err_msg=f"{node.name}.{name}"
            )


# --- forward against numpy -------------------------------------------------------------------


@pytest.mark.parametrize("name", list(DENSE))
def test_dense_forward_matches_numpy(name):
    factory, node_name, act, _ = DENSE[name]
    rng = _rng()
    X = rng.normal(size=(nB, nI)).astype("float32")
    model = factory(nO, nI)
    assert model.name == node_name
    model.initialize(X=X)
    _randomize(model, rng)
    W, b = model.get_param("W"), model.get_param("b")
    assert W.shape == (nO, nI) and b.shape == (nO,)
    Y = model.predict(X)
    assert Y.shape == (nB, nO) and Y.dtype == numpy.float32
    expected = act(X.astype("float64") @ W.T.astype("float64") + b)
    numpy.testing.assert_allclose(Y, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(DENSE))
def test_dense_infers_dims_and_uses_default_init(name):
    factory, _, _, default_init = DENSE[name]
    rng = _rng()
    X = rng.normal(size=(nB, nI)).astype("float32")
    Y = rng.normal(size=(nB, nO)).astype("float32")
    model = factory()
    assert model.has_dim("nO") is None and model.has_dim("nI") is None
    fix_random_seed(3)
    model.initialize(X=X, Y=Y)
    assert model.get_dim("nI") == nI and model.get_dim("nO") == nO
    fix_random_seed(3)
    numpy.testing.assert_array_equal(model.get_param("W"), default_init(model.ops, (nO, nI)))
    numpy.testing.assert_array_equal(model.get_param("b"), numpy.zeros((nO,), dtype="float32"))


@pytest.mark.parametrize("name", list(DENSE))
def test_dense_uses_given_initializers(name):
    factory = DENSE[name][0]
    model = factory(
        nO, nI,
        init_W=lambda ops, shape: ops.alloc_f(shape) + 2.0,
        init_b=lambda ops, shape: ops.alloc_f(shape) - 1.0,
    )
    model.initialize()
    assert numpy.all(model.get_param("W") == 2.0)
    # NOTE: Thinc 8.3's HardSigmoid/HardTanh/ReluK drop init_b; plait honours it.
    assert numpy.all(model.get_param("b") == -1.0)


def test_layernorm_forward():
    rng = _rng()
    X = rng.normal(size=(nB, nI), loc=3.0, scale=2.0).astype("float32")
    model = LayerNorm()
    model.initialize(X=X)
    assert model.get_dim("nI") == nI and model.get_dim("nO") == nI
    Y = model.predict(X)
    # G = 1, b = 0 at init: rows come out with mean 0 and variance 1.
    numpy.testing.assert_allclose(Y.mean(axis=1), 0.0, atol=1e-5)
    numpy.testing.assert_allclose(Y.var(axis=1), 1.0, rtol=1e-4)
    _randomize(model, rng)
    G, b = model.get_param("G"), model.get_param("b")
    X64 = X.astype("float64")
    Xhat = (X64 - X64.mean(1, keepdims=True)) / numpy.sqrt(X64.var(1, keepdims=True) + 1e-8)
    numpy.testing.assert_allclose(model.predict(X), Xhat * G + b, rtol=1e-5, atol=1e-5)


def test_layernorm_infers_width_from_Y_when_no_X():
    model = LayerNorm()
    model.initialize(Y=numpy.zeros((2, 7), dtype="float32"))
    assert model.get_dim("nI") == 7 and model.get_param("G").shape == (7,)
    numpy.testing.assert_array_equal(model.get_param("G"), numpy.ones(7, dtype="float32"))


def test_maxout_forward():
    rng = _rng()
    nP = 2
    X = rng.normal(size=(nB, nI)).astype("float32")
    model = Maxout(nO, nI, nP=nP)
    model.initialize(X=X)
    assert model.get_param("W").shape == (nO, nP, nI)
    assert model.get_param("b").shape == (nO, nP)
    _randomize(model, rng)
    W, b = model.get_param("W"), model.get_param("b")
    pieces = numpy.einsum("bi,opi->bop", X.astype("float64"), W) + b
    numpy.testing.assert_allclose(model.predict(X), pieces.max(axis=-1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_softmax_forward(temperature):
    rng = _rng()
    X = rng.normal(size=(nB, nI)).astype("float32")
    model = Softmax_v2(nO, nI, temperature=temperature)
    model.initialize()
    _randomize(model, rng)
    Z = X.astype("float64") @ model.get_param("W").T + model.get_param("b")
    Y = model.predict(X)
    numpy.testing.assert_allclose(Y, _softmax(Z / temperature), rtol=1e-5, atol=1e-6)
    numpy.testing.assert_allclose(Y.sum(axis=1), 1.0, rtol=1e-5)


def test_softmax_unnormalized_outputs_logits_at_prediction_only():
    rng = _rng()
    X = rng.normal(size=(nB, nI)).astype("float32")
    model = Softmax_v2(nO, nI, normalize_outputs=False)
    assert model.attrs == {"softmax_normalize": False, "softmax_temperature": 1.0}
    model.initialize()
    _randomize(model, rng)
    Z = X @ model.get_param("W").T + model.get_param("b")
    numpy.testing.assert_allclose(model.predict(X), Z, rtol=1e-5, atol=1e-6)
    Y, backprop = model(X, is_train=False)
    with pytest.raises(ValueError, match="softmax"):
        backprop(Y)
    Y_train, _ = model.begin_update(X)
    numpy.testing.assert_allclose(Y_train, _softmax(Z), rtol=1e-5, atol=1e-6)
    # The attr is read at call time.
    model.attrs["softmax_normalize"] = True
    numpy.testing.assert_allclose(model.predict(X), _softmax(Z), rtol=1e-5, atol=1e-6)


def test_softmax_v1_attrs_and_default_init():
    model = Softmax(nO, nI)
    assert model.attrs == {"softmax_normalize": True, "softmax_temperature": 1.0}
    model.initialize()
    assert not model.get_param("W").any() and not model.get_param("b").any()


def test_multisoftmax_forward():
    rng = _rng()
    nOs = (2, 3, 1)
    X = rng.normal(size=(nB, nI)).astype("float32")
    model = MultiSoftmax(nOs)
    assert model.get_dim("nO") == 6 and model.attrs["nOs"] == nOs
    model.initialize(X=X)
    assert not model.get_param("W").any()
    _randomize(model, rng)
    Z = X.astype("float64") @ model.get_param("W").T + model.get_param("b")
    expected = numpy.hstack([_softmax(Z[:, :2]), _softmax(Z[:, 2:5]), _softmax(Z[:, 5:])])
    numpy.testing.assert_allclose(model.predict(X), expected, rtol=1e-5, atol=1e-6)


def test_cauchy_similarity_forward():
    rng = _rng()
    X1 = rng.normal(size=(nB, nI)).astype("float32")
    X2 = rng.normal(size=(nB, nI)).astype("float32")
    model = CauchySimilarity()
    model.initialize(X=(X1, X2))
    assert model.get_dim("nI") == nI and model.get_dim("nO") == 1
    numpy.testing.assert_array_equal(model.get_param("W"), numpy.ones(nI, dtype="float32"))
    model.set_param("W", rng.uniform(0.5, 2.0, size=nI).astype("float32"))
    W = model.get_param("W")
    sim = model.predict((X1, X2))
    assert sim.shape == (nB,)
    numpy.testing.assert_allclose(sim, 1 / (1 + ((X1 - X2) ** 2 * W).sum(axis=1)), rtol=1e-5)


def test_activation_layers_forward():
    rng = _rng()
    X = rng.normal(size=(nB, nI)).astype("float32")
    numpy.testing.assert_allclose(Logistic().predict(X), _sigmoid(X), rtol=1e-6)
    X3 = rng.normal(size=(2, 3, 4)).astype("float32")
    numpy.testing.assert_allclose(sigmoid_activation().predict(X3), _sigmoid(X3), rtol=1e-6)
    numpy.testing.assert_allclose(softmax_activation().predict(X), _softmax(X), rtol=1e-6)
    assert Logistic().name == "logistic"
    assert sigmoid_activation().name == "sigmoid_activation"
    assert softmax_activation().name == "softmax_activation"


# --- gradients (float64 central differences) ----------------------------------------------


def _check_layer_grads(model, X, make_dY_and_loss):
    """Compare backprop with central differences of a scalar loss through model.predict."""
    Y, backprop = model.begin_update(X)
    dY, loss_of = make_dY_and_loss(Y)

    def loss():
        return loss_of(model.predict(X))

    dX = backprop(dY)
    if isinstance(X, tuple):
        for part, d_part in zip(X, dX):
            numpy.testing.assert_allclose(d_part, _numeric_grad(loss, part), rtol=1e-5, atol=1e-7)
    else:
        numpy.testing.assert_allclose(dX, _numeric_grad(loss, X), rtol=1e-5, atol=1e-7)
    _check_param_grads(model, loss)


def _weighted_sum(seed=5):
    """Loss sum(Y * R) for a fixed random R: its gradient with respect to Y is R."""

    def make(Y):
        R = _rng(seed).normal(size=Y.shape)
        return R, lambda Y2: float((Y2 * R).sum())

    return make


@pytest.mark.parametrize("name", list(DENSE))
def test_dense_gradients(name):
    X = _rng(2).normal(size=(nB, nI))
    model = _float64_model(DENSE[name][0](nO, nI), X)
    _check_layer_grads(model, X, _weighted_sum())


@pytest.mark.parametrize("name", WITH_EXTRAS)
def test_dense_gradients_with_layernorm(name):
    X = _rng(2).normal(size=(nB, nI))
    model = _float64_model(DENSE[name][0](nO, nI, normalize=True), X)
    _check_layer_grads(model, X, _weighted_sum())


def test_dish_gradient_when_nI_differs_from_nO():
    # Thinc 8.3 passes the layer input (not the preactivation) to backprop_dish, which fails
    # or is wrong here; plait differentiates the preactivation.
    X = _rng(2).normal(size=(nB, 2))
    model = _float64_model(Dish(6, 2), X)
    _check_layer_grads(model, X, _weighted_sum())


def test_layernorm_gradients():
    X = _rng(2).normal(size=(nB, 6)) * 3 + 1
    model = _float64_model(LayerNorm(), X)
    _check_layer_grads(model, X, _weighted_sum())


def test_maxout_gradients():
    X = _rng(2).normal(size=(nB, nI))
    model = _float64_model(Maxout(nO, nI, nP=3), X)
    _check_layer_grads(model, X, _weighted_sum())


def test_cauchy_similarity_gradients():
    rng = _rng(2)
    X = (rng.normal(size=(nB, nI)), rng.normal(size=(nB, nI)))
    model = _float64_model(CauchySimilarity(), X)
    _check_layer_grads(model, X, _weighted_sum())


@pytest.mark.parametrize("factory", [Logistic, sigmoid_activation, softmax_activation])
def test_activation_gradients(factory):
    X = _rng(2).normal(size=(nB, nI))
    model = factory()
    model.ops = NumpyOps()
    _check_layer_grads(model, X, _weighted_sum())


def _cross_entropy(groups, seed=7):
    """Categorical cross-entropy per output group; Softmax layers take dY = Y - truth."""

    def make(Y):
        rng = _rng(seed)
        truth = numpy.zeros_like(Y)
        for start, stop in groups:
            truth[numpy.arange(Y.shape[0]), rng.integers(start, stop, size=Y.shape[0])] = 1.0
        return Y - truth, lambda Y2: float(-(truth * numpy.log(Y2)).sum())

    return make


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_softmax_gradient_is_cross_entropy_gradient(temperature):
    X = _rng(2).normal(size=(nB, nI))
    model = _float64_model(Softmax_v2(nO, nI, temperature=temperature), X)
    _check_layer_grads(model, X, _cross_entropy([(0, nO)]))


def test_multisoftmax_gradient_is_cross_entropy_gradient():
    X = _rng(2).normal(size=(nB, nI))
    model = _float64_model(MultiSoftmax((2, 3)), X)
    _check_layer_grads(model, X, _cross_entropy([(0, 2), (2, 5)]))


def test_sigmoid_gradient_uses_output():
    # dY through Sigmoid is scaled by Y * (1 - Y), unlike Softmax.
    X = _rng(2).normal(size=(nB, nI)).astype("float32")
    model = Sigmoid(nO, nI)
    model.initialize()
    Y, backprop = model.begin_update(X)
    numpy.testing.assert_allclose(Y, 0.5)
    dX = backprop(numpy.ones_like(Y))
    numpy.testing.assert_allclose(model.get_grad("b"), nB * 0.25)
    assert dX.shape == X.shape


# --- batch invariance -------------------------------------------------------------------------


def _all_models():
    models = {name: DENSE[name][0](nO, nI) for name in DENSE}
    models.update(
        LayerNorm=LayerNorm(nI), Maxout=Maxout(nO, nI), Softmax=Softmax(nO, nI),
        SoftmaxT=Softmax_v2(nO, nI, temperature=0.7), MultiSoftmax=MultiSoftmax((2, 3), nI),
        Logistic=Logistic(), sigmoid_activation=sigmoid_activation(), softmax_activation=softmax_activation(),
    )
    return models


@pytest.mark.parametrize("name", list(_all_models()))
def test_batch_invariance(name):
    rng = _rng(4)
    X = rng.normal(size=(7, nI)).astype("float32")
    model = _all_models()[name]
    model.initialize(X=X)
    _randomize(model, rng)
    Y = model.predict(X)
    rows = numpy.vstack([model.predict(X[i : i + 1]) for i in range(X.shape[0])])
    numpy.testing.assert_allclose(Y, rows, rtol=1e-5, atol=1e-6)
    assert model.predict(X[:0]).shape == (0,) + Y.shape[1:]


def test_cauchy_batch_invariance():
    rng = _rng(4)
    X1, X2 = rng.normal(size=(7, nI)).astype("float32"), rng.normal(size=(7, nI)).astype("float32")
    model = CauchySimilarity(nI)
    model.initialize()
    sim = model.predict((X1, X2))
    rows = numpy.concatenate([model.predict((X1[i : i + 1], X2[i : i + 1])) for i in range(7)])
    numpy.testing.assert_allclose(sim, rows, rtol=1e-6)


# --- structure, serialization, registry --------------------------------------------------------


@pytest.mark.parametrize("name", WITH_EXTRAS)
def test_normalize_and_dropout_chain(name):
    factory, node_name, _, _ = DENSE[name]
    model = factory(nO, nI, dropout=0.2, normalize=True)
    assert model.name == f"{node_name}>>layernorm>>dropout"
    assert [n.name for n in model.walk()] == [
        f"{node_name}>>layernorm>>dropout", f"{node_name}>>layernorm", "dropout", node_name, "layernorm",
    ]
    assert model.layers[1].attrs["dropout_rate"] == 0.2
    assert factory(nO, nI, normalize=True).name == f"{node_name}>>layernorm"
    assert factory(nO, nI, dropout=0.1).name == f"{node_name}>>dropout"
    X = _rng().normal(size=(nB, nI)).astype("float32")
    model.initialize(X=X)
    assert model.predict(X).shape == (nB, nO)
    ln = model.layers[0].layers[1]
    assert ln.get_dim("nI") == nO and ln.get_param("G").shape == (nO,)


def test_clipped_linear_attrs():
    assert ClippedLinear().attrs == {"slope": 1.0, "offset": 0.0, "min_val": 0.0, "max_val": 1.0}
    assert HardSigmoid().attrs == {"slope": 0.2, "offset": 0.5, "min_val": 0.0, "max_val": 1.0}
    assert HardTanh().attrs == {"slope": 1.0, "offset": 0.0, "min_val": -1.0, "max_val": 1.0}
    assert ReluK(k=3.0).attrs == {"slope": 1.0, "offset": 0.0, "min_val": 0.0, "max_val": 3.0}


def test_to_bytes_round_trip():
    rng = _rng()
    X = rng.normal(size=(nB, nI)).astype("float32")
    for name, model in _all_models().items():
        model.initialize(X=X)
        _randomize(model, rng)
        fresh = _all_models()[name]
        fresh.from_bytes(model.to_bytes())
        numpy.testing.assert_array_equal(fresh.predict(X), model.predict(X), err_msg=name)
    ms = MultiSoftmax((2, 3))
    ms.initialize(X=X)
    loaded = MultiSoftmax((2, 3)).from_bytes(ms.to_bytes())
    assert list(loaded.attrs["nOs"]) == [2, 3]
    numpy.testing.assert_array_equal(loaded.predict(X), ms.predict(X))


@pytest.mark.parametrize("name", WITH_EXTRAS + ["Sigmoid"])
def test_dense_layers_pickle_and_copy(name):
    factory, node_name, _, _ = DENSE[name]
    kwargs = {} if name == "Sigmoid" else {"normalize": True, "dropout": 0.1}
    rng = _rng(3)
    X = rng.normal(size=(nB, nI)).astype("float32")
    model = _randomize(factory(nO, nI, **kwargs).initialize(X=X), rng)
    expected = model.predict(X)
    for other in (pickle.loads(pickle.dumps(model)), model.copy()):
        assert [n.name for n in other.walk()] == [n.name for n in model.walk()]
        numpy.testing.assert_array_equal(other.predict(X), expected)
        Y, backprop = other.begin_update(X)
        dX = backprop(numpy.ones_like(Y))
        assert dX.shape == X.shape
        dense = next(n for n in other.walk() if n.name == node_name)
        assert dense.get_grad("W").shape == (nO, nI) and numpy.any(dense.get_grad("W") != 0)
    # The copy owns its weights: training it leaves the original alone.
    copy = model.copy()
    dense = next(n for n in copy.walk() if n.name == node_name)
    dense.get_param("W")[...] += 1.0
    numpy.testing.assert_array_equal(model.predict(X), expected)


def test_clipped_linear_reads_its_attrs_at_call_time():
    X = _rng().normal(size=(nB, nI)).astype("float32")
    model = _randomize(ClippedLinear(nO, nI, min_val=-9.0, max_val=9.0).initialize(X=X), _rng(2))
    W, b = model.get_param("W"), model.get_param("b")
    model.attrs["slope"] = 2.0
    model.attrs["max_val"] = 0.25
    expected = numpy.clip(2.0 * (X @ W.T + b), -9.0, 0.25)
    Y, backprop = model.begin_update(X)
    numpy.testing.assert_allclose(Y, expected, rtol=1e-6)
    # The gradient uses the edited constants too: 2 inside the clip window, 0 outside it.
    dZ = numpy.where((2.0 * (X @ W.T + b) > -9.0) & (2.0 * (X @ W.T + b) < 0.25), 2.0, 0.0)
    numpy.testing.assert_allclose(backprop(numpy.ones_like(Y)), dZ @ W, rtol=1e-5, atol=1e-6)


REGISTERED = {
    "Linear.v1": Linear, "Relu.v1": Relu, "Sigmoid.v1": Sigmoid, "Swish.v1": Swish, "Gelu.v1": Gelu,
    "Dish.v1": Dish, "Mish.v1": Mish, "HardSwish.v1": HardSwish, "HardSwishMobilenet.v1": HardSwishMobilenet,
    "ClippedLinear.v1": ClippedLinear, "HardSigmoid.v1": HardSigmoid, "HardTanh.v1": HardTanh, "ReluK.v1": ReluK,
    "Logistic.v1": Logistic, "Softmax.v1": Softmax, "Softmax.v2": Softmax_v2, "MultiSoftmax.v1": MultiSoftmax,
    "LayerNorm.v1": LayerNorm, "Maxout.v1": Maxout, "sigmoid_activation.v1": sigmoid_activation,
    "softmax_activation.v1": softmax_activation, "CauchySimilarity.v1": CauchySimilarity,
}


def test_registered_names():
    for name, func in REGISTERED.items():
        assert registry.layers.get(name) is func


def test_build_from_config():
    cfg = Config().from_str(
        """
        [model]
        @layers = "Relu.v1"
        nO = 5
        nI = 3
        dropout = 0.1
        normalize = true
        """
    )
    model = registry.resolve(cfg)["model"]
    assert model.name == "relu>>layernorm>>dropout"
    cfg = Config().from_str('[model]\n@layers = "Softmax.v2"\nnO = 4\ntemperature = 2.0\n')
    assert registry.resolve(cfg)["model"].attrs["softmax_temperature"] == 2.0


# --- errors ------------------------------------------------------------------------------------


def test_missing_dims_name_layer_and_dim():
    with pytest.raises(ValueError, match=r"'nO'.*'linear'"):
        Linear(nI=3).initialize()
    with pytest.raises(ValueError, match=r"'nI'.*'maxout'"):
        Maxout(4).initialize()
    with pytest.raises(ValueError, match=r"'nI'.*'layernorm'"):
        LayerNorm().initialize()
    with pytest.raises(ValueError, match=r"'W'.*'relu'"):
        Relu(4, 3).predict(numpy.zeros((2, 3), dtype="float32"))


@pytest.mark.parametrize("name", ["Linear", "Relu", "Sigmoid", "Swish", "HardTanh"])
def test_bad_inputs(name):
    model = DENSE[name][0](nO, nI)
    model.initialize()
    node = DENSE[name][1]
    with pytest.raises(ValueError, match=rf"'{node}'.*nI=3.*\(4, 7\)"):
        model.predict(numpy.zeros((4, 7), dtype="float32"))
    with pytest.raises(ValueError, match=node):
        model.predict(numpy.zeros((3,), dtype="float32"))
    with pytest.raises(TypeError, match="float"):
        model.predict(numpy.zeros((4, 3), dtype="int32"))
    with pytest.raises(TypeError, match=node):
        model.predict([[0.0, 1.0, 2.0]])


def test_initialize_with_conflicting_width_raises():
    model = Relu(nO, nI)
    with pytest.raises(ValueError, match=r"'nI'.*'relu'.*3 to 7"):
        model.initialize(X=numpy.zeros((2, 7), dtype="float32"))


def test_output_layers_keep_set_dims():
    # Softmax and Sigmoid ignore sample widths for dims already set (Y may be integer labels).
    labels = numpy.asarray([0, 1], dtype="int32")
    for model in (Softmax(nO, nI), Sigmoid(nO, nI)):
        model.initialize(X=numpy.zeros((2, nI), dtype="float32"), Y=labels)
        assert model.get_dim("nO") == nO


def test_data_validation_on_initialize():
    with data_validation(True), pytest.raises(DataValidationError):
        Linear(nO, nI).initialize(X=numpy.zeros((nI,), dtype="float32"))
    with data_validation(True), pytest.raises(DataValidationError):
        CauchySimilarity(nI).initialize(X=numpy.zeros((2, nI), dtype="float32"))
    with data_validation(True):
        sigmoid_activation().initialize(X=numpy.zeros((2, 2, 2), dtype="float32"))


def test_creation_errors():
    with pytest.raises(ValueError, match="temperature"):
        Softmax_v2(temperature=0.0)
    with pytest.raises(ValueError, match="temperature"):
        Softmax_v2(temperature=-1)
    model = Softmax_v2(nO, nI)
    model.initialize()
    model.attrs["softmax_temperature"] = 0.0
    with pytest.raises(ValueError, match="temperature"):
        model.predict(numpy.zeros((1, nI), dtype="float32"))
    with pytest.raises(ValueError, match="min_val"):
        ClippedLinear(min_val=2.0, max_val=1.0)
    with pytest.raises(ValueError, match="nOs"):
        MultiSoftmax((2, 0))
    with pytest.raises(ValueError, match="nOs"):
        MultiSoftmax(())
    with pytest.raises(TypeError, match="nOs"):
        MultiSoftmax(5)
    with pytest.raises(ValueError, match="dropout"):
        Relu(nO, nI, dropout=1.5)


def test_softmax_backprop_checks_gradient_shape():
    model = Softmax(nO, nI)
    model.initialize()
    Y, backprop = model.begin_update(numpy.zeros((2, nI), dtype="float32"))
    with pytest.raises(ValueError, match="Shape mismatch"):
        backprop(numpy.zeros((3, nO), dtype="float32"))


def test_cauchy_bad_inputs():
    model = CauchySimilarity(nI)
    model.initialize()
    X = numpy.zeros((2, nI), dtype="float32")
    with pytest.raises(TypeError, match="pair"):
        model.predict(X)
    with pytest.raises(ValueError, match="X2"):
        model.predict((X, numpy.zeros((2, nI + 1), dtype="float32")))
    with pytest.raises(ValueError, match="same shape"):
        model.predict((X, numpy.zeros((3, nI), dtype="float32")))


# --- differential tests against thinc 8.3 ------------------------------------------------------

# (plait factory, thinc name, args, kwargs)
DIFF_CASES = [
    (Linear, "Linear", (nO, nI), {}),
    (Relu, "Relu", (nO, nI), {}),
    (Relu, "Relu", (nO, nI), {"normalize": True, "dropout": 0.2}),
    (Sigmoid, "Sigmoid", (nO, nI), {}),
    (Swish, "Swish", (nO, nI), {"normalize": True}),
    (Gelu, "Gelu", (nO, nI), {}),
    (Dish, "Dish", (nO, nI), {}),
    (Mish, "Mish", (nO, nI), {"dropout": 0.1}),
    (HardSwish, "HardSwish", (nO, nI), {}),
    (HardSwishMobilenet, "HardSwishMobilenet", (nO, nI), {}),
    (ClippedLinear, "ClippedLinear", (nO, nI), {"slope": 0.7, "offset": 0.1, "min_val": -0.5, "max_val": 0.8}),
    (HardSigmoid, "HardSigmoid", (nO, nI), {"normalize": True}),
    (HardTanh, "HardTanh", (nO, nI), {}),
    (ReluK, "ReluK", (nO, nI), {"k": 2.0}),
    (Softmax, "Softmax", (nO, nI), {}),
    (Softmax_v2, "Softmax_v2", (nO, nI), {"temperature": 0.5}),
    (Softmax_v2, "Softmax_v2", (nO, nI), {"normalize_outputs": False}),
    (MultiSoftmax, "MultiSoftmax", ((2, 3), nI), {}),
    (LayerNorm, "LayerNorm", (nI,), {}),
    (Maxout, "Maxout", (nO, nI), {"nP": 2, "normalize": True}),
    (Logistic, "Logistic", (), {}),
    (sigmoid_activation, "sigmoid_activation", (), {}),
    (softmax_activation, "softmax_activation", (), {}),
]
# thinc 8.3 computes Dish's gradient from the layer input instead of the preactivation.
THINC_GRADIENT_BUGS = {"Dish"}


def _thinc_factory(name):
    thinc_layers = pytest.importorskip("thinc.layers")
    if name == "Softmax_v2":
        from thinc.layers.softmax import Softmax_v2 as factory

        return factory
    return getattr(thinc_layers, name)


def _thinc_predict(thinc_model, X):
    Y = thinc_model.predict(X)
    if thinc_model.name == "multisoftmax":
        # NOTE: thinc 8.3's MultiSoftmax returns the raw logits (its ops.softmax ignores
        # inplace=True); plait normalises each group as documented. Compare on the groups.
        start, groups = 0, []
        for size in thinc_model.attrs["nOs"]:
            groups.append(_softmax(Y[:, start : start + size]))
            start += size
        Y = numpy.hstack(groups)
    return Y


def _tree(model):
    return [
        (
            node.name,
            dict(node._dims),
            {name: tuple(node.get_param(name).shape) for name in node.param_names if node.has_param(name)},
            {key: list(v) if isinstance(v, tuple) else v for key, v in node.attrs.items()},
        )
        for node in model.walk()
    ]


@pytest.mark.parametrize("case", DIFF_CASES, ids=lambda c: f"{c[1]}{sorted(c[3])}")
def test_matches_thinc(case):
    pytest.importorskip("thinc")
    factory, thinc_name, args, kwargs = case
    rng = _rng(9)
    X = rng.normal(size=(nB, nI)).astype("float32")
    thinc_model = _thinc_factory(thinc_name)(*args, **kwargs)
    plait_model = factory(*args, **kwargs)
    # Same seed, same numpy draws: the default initialisations must agree exactly.
    fix_random_seed(11)
    thinc_model.initialize(X=X)
    fix_random_seed(11)
    plait_model.initialize(X=X)
    assert _tree(plait_model) == _tree(thinc_model)
    for t_node, p_node in zip(thinc_model.walk(), plait_model.walk()):
        for name in t_node.param_names:
            numpy.testing.assert_array_equal(p_node.get_param(name), t_node.get_param(name))
    _randomize(thinc_model, rng)
    plait_model.from_bytes(thinc_model.to_bytes())
    numpy.testing.assert_allclose(plait_model.predict(X), _thinc_predict(thinc_model, X), rtol=1e-5, atol=1e-6)
    if "dropout" not in kwargs and kwargs.get("normalize_outputs", True) and thinc_name not in THINC_GRADIENT_BUGS:
        Yt, backprop_t = thinc_model.begin_update(X)
        Yp, backprop_p = plait_model.begin_update(X)
        dY = rng.normal(size=Yt.shape).astype("float32")
        numpy.testing.assert_allclose(backprop_p(dY), backprop_t(dY), rtol=1e-4, atol=1e-5)
        for t_node, p_node in zip(thinc_model.walk(), plait_model.walk()):
            for name in t_node.param_names:
                numpy.testing.assert_allclose(
                    p_node.get_grad(name), t_node.get_grad(name), rtol=1e-4, atol=1e-5, err_msg=f"{t_node.name}.{name}"
                )
    # And back: thinc loads what plait saves.
    _randomize(plait_model, rng)
    thinc_again = _thinc_factory(thinc_name)(*args, **kwargs)
    thinc_again.from_bytes(plait_model.to_bytes())
    numpy.testing.assert_allclose(_thinc_predict(thinc_again, X), plait_model.predict(X), rtol=1e-5, atol=1e-6)


def test_cauchy_similarity_matches_thinc():
    thinc_layers = pytest.importorskip("thinc.layers")
    rng = _rng(9)
    X = (rng.normal(size=(nB, nI)).astype("float32"), rng.normal(size=(nB, nI)).astype("float32"))
    thinc_model = thinc_layers.CauchySimilarity(nI)
    thinc_model.initialize(X=X)
    thinc_model.set_param("W", rng.uniform(0.5, 2, size=nI).astype("float32"))
    plait_model = CauchySimilarity(nI)
    plait_model.from_bytes(thinc_model.to_bytes())
    assert _tree(plait_model) == _tree(thinc_model)
    numpy.testing.assert_allclose(plait_model.predict(X), thinc_model.predict(X), rtol=1e-6)
    d_sim = rng.normal(size=nB).astype("float32")
    dt = thinc_model.begin_update(X)[1](d_sim)
    dp = plait_model.begin_update(X)[1](d_sim)
    for a, b in zip(dp, dt):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    numpy.testing.assert_allclose(plait_model.get_grad("W"), thinc_model.get_grad("W"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_weight_gradient_accumulates_in_its_own_array(dtype):
    """From the second backprop on, Linear adds dW into the gradient array it already has (one
    BLAS call with beta=1); the sums are those of separate products."""
    rng = numpy.random.default_rng(3)
    model = Linear(nO=5, nI=7)
    model.initialize()
    if dtype == "float64":
        for name in ("W", "b"):
            model.set_param(name, model.get_param(name).astype(dtype))
    X1, X2 = rng.normal(size=(4, 7)).astype(dtype), rng.normal(size=(6, 7)).astype(dtype)
    dY1, dY2 = rng.normal(size=(4, 5)).astype(dtype), rng.normal(size=(6, 5)).astype(dtype)
    _, backprop = model.begin_update(X1)
    backprop(dY1)
    first = model.get_grad("W")
    _, backprop = model.begin_update(X2)
    backprop(dY2)
    assert model.get_grad("W") is first  # the same array, updated in place
    numpy.testing.assert_allclose(first, dY1.T @ X1 + dY2.T @ X2, rtol=1e-5, atol=1e-6)


def test_linear_weight_gradient_goes_through_an_overridden_inc_grad():
    calls = []

    class Watched(type(Linear(nO=2, nI=3))):
        __slots__ = ()

        def inc_grad(self, name, value):
            calls.append(name)
            super().inc_grad(name, value)

    model = Linear(nO=2, nI=3)
    model.__class__ = Watched
    model.initialize()
    X = numpy.ones((4, 3), "f")
    for _ in range(2):
        _, backprop = model.begin_update(X)
        backprop(numpy.ones((4, 2), "f"))
    assert calls == ["b", "W", "b", "W"]
    assert model.get_grad("W").tolist() == [[8.0] * 3] * 2


def test_linear_weight_gradient_falls_back_where_the_blas_cannot_add_in_place():
    # A read-only gradient array the user set: inc_grad's `+=` raises as before, with numpy's
    # message, instead of the BLAS writing into it.
    model = Linear(nO=2, nI=3)
    model.initialize()
    grad = numpy.zeros((2, 3), "f")
    grad.flags.writeable = False
    model.set_grad("W", grad)
    _, backprop = model.begin_update(numpy.ones((4, 3), "f"))
    with pytest.raises(ValueError, match="read-only"):
        backprop(numpy.ones((4, 2), "f"))
    # A non-contiguous one is added to (through inc_grad), not replaced.
    model = Linear(nO=2, nI=3)
    model.initialize()
    grad = numpy.ones((3, 2), "f").T
    model.set_grad("W", grad)
    _, backprop = model.begin_update(numpy.ones((4, 3), "f"))
    backprop(numpy.ones((4, 2), "f"))
    assert model.get_grad("W") is grad and grad.tolist() == [[5.0] * 3] * 2


def test_gradient_accumulation_never_hands_the_blas_an_operand_as_its_output():
    ops = NumpyOps()
    A = numpy.ones((4, 4), "f")
    assert not ops._gemm_accumulate(A, numpy.ones((4, 4), "f"), A)
    assert not ops._gemm_accumulate(numpy.ones((4, 4), "f"), A[:, :], A)
    out = numpy.ones((4, 4), "f")
    assert ops._gemm_accumulate(A, A, out) and (out == 5).all()
