"""Every code example of thinc-concept-and-design.txt and thinc-layers.md, with thinc replaced by plait.

The concept page's snippets use free names (`uniform`, `zeros`, `X`); they are defined here
as the page implies (numpy helpers and small sample arrays). Each test asserts what the
page says the snippet shows.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import numpy
import pytest

from plait.types import Floats2d, Floats3d


def uniform(shape):
    return numpy.random.uniform(-1.0, 1.0, shape).astype("f")


def zeros(shape):
    return numpy.zeros(shape, dtype="f")


# --- thinc-concept-and-design.txt -------------------------------------------------------


class UncomposableModel:
    def __init__(self, W):
        self.W = W

    def predict(self, inputs):
        return inputs @ self.W.T

    def update(self, inputs, targets, learn_rate=0.001):
        guesses = self.predict(inputs)
        d_guesses = (guesses - targets) / targets.shape[0]
        d_inputs = d_guesses @ self.W
        dW = d_guesses.T @ inputs
        self.W -= learn_rate * dW
        return d_inputs


def test_uncomposable_model_update_reduces_loss():
    W = uniform((3, 4))
    model = UncomposableModel(W.copy())
    X = uniform((8, 4))
    targets = X @ uniform((3, 4)).T
    before = ((model.predict(X) - targets) ** 2).sum()
    for _ in range(50):
        d_inputs = model.update(X, targets, learn_rate=0.1)
    assert d_inputs.shape == X.shape
    assert ((model.predict(X) - targets) ** 2).sum() < before


def backprop_two_layers(W1, W2, inputs, targets):
    hiddens = inputs @ W1.T
    guesses = hiddens @ W2.T
    d_guesses = (guesses-targets) / targets.shape[0]  # gradient of loss w.r.t. output
    dW2 = d_guesses @ hiddens.T
    d_hiddens = d_guesses @ W2
    dW1 = d_hiddens @ inputs.T
    d_inputs = d_hiddens @ W1
    return dW1, dW2, d_inputs


def test_backprop_two_layers_runs_as_written():
    # The page's snippet, verbatim. Its weight gradients multiply (batch, width) by
    # (width, batch), so they only line up when batch and widths agree: run it that way.
    n = 4
    W1, W2 = uniform((n, n)), uniform((n, n))
    inputs, targets = uniform((n, n)), uniform((n, n))
    dW1, dW2, d_inputs = backprop_two_layers(W1, W2, inputs, targets)
    assert dW1.shape == W1.shape and dW2.shape == W2.shape and d_inputs.shape == inputs.shape
    d_guesses = (inputs @ W1.T @ W2.T - targets) / n
    numpy.testing.assert_allclose(d_inputs, d_guesses @ W2 @ W1, rtol=1e-4, atol=1e-6)


def reduce_sum(X: Floats3d) -> Tuple[Floats2d, Callable[[Floats2d], Floats3d]]:
    Y = X.sum(axis=1)
    X_shape = X.shape

    def backprop_reduce_sum(dY: Floats2d) -> Floats3d:
        dX = zeros(X_shape)
        dX += dY.reshape((dY.shape[0], 1, dY.shape[1]))
        return dX

    return Y, backprop_reduce_sum


def relu(inputs: Floats2d) -> Tuple[Floats2d, Callable[[Floats2d], Floats2d]]:
    mask = inputs >= 0

    def backprop_relu(d_outputs: Floats2d) -> Floats2d:
        return d_outputs * mask

    return inputs * mask, backprop_relu


def chain(layer1, layer2):
    def forward_chain(X):
        Y, get_dX = layer1(X)
        Z, get_dY = layer2(Y)

        def backprop_chain(dZ):
            dY = get_dY(dZ)
            dX = get_dX(dY)
            return dX

        return Z, backprop_chain

    return forward_chain


def test_callback_chain_of_reduce_sum_and_relu():
    chained = chain(reduce_sum, relu)
    X = uniform((2, 10, 6))
    dZ = uniform((2, 6))
    Z, get_dX = chained(X)
    dX = get_dX(dZ)
    assert dX.shape == X.shape
    numpy.testing.assert_allclose(Z, numpy.maximum(X.sum(axis=1), 0), rtol=1e-6)


class CannotBeImplementedError(NotImplementedError):
    pass


def chain_no_callback(layer1, layer2):
    def chain_forward_no_callback(X, dZ):
        raise CannotBeImplementedError()

    return chain_forward_no_callback


def test_chain_without_callbacks_cannot_be_implemented():
    with pytest.raises(CannotBeImplementedError):
        chain_no_callback(None, None)(uniform((2, 3)), uniform((2, 3)))


def Linear_as_written(W, b, dW, db):
    def forward_linear(X):

        def backward_linear(dY):
            dW += dY.T @ X
            db += dY.sum(axis=0)
            return dY @ W

        return X @ W.T + b, backward_linear
    return forward_linear


def test_closure_linear_as_written_needs_in_place_updates():
    # Verbatim, the page's closure rebinds dW inside backward_linear, which Python
    # treats as a new local: the backward pass raises UnboundLocalError.
    W, b = uniform((3, 2)), uniform((3,))
    linear = Linear_as_written(W, b, zeros(W.shape), zeros(b.shape))
    Y, get_dX = linear(uniform((4, 2)))
    with pytest.raises(UnboundLocalError):
        get_dX(uniform((4, 3)))


def Linear_closure(W, b, dW, db):
    # The page's closure with the increments written in place (dW[...] +=), as intended.
    def forward_linear(X):
        def backward_linear(dY):
            dW[...] += dY.T @ X
            db[...] += dY.sum(axis=0)
            return dY @ W

        return X @ W.T + b, backward_linear

    return forward_linear


def test_closure_linear_training_step():
    n_batch, n_in, n_out = 128, 16, 32
    W = uniform((n_out, n_in))
    b = uniform((n_out,))
    dW = zeros(W.shape)
    db = zeros(b.shape)
    X = uniform((n_batch, n_in))
    Y_true = uniform((n_batch, n_out))
    linear = Linear_closure(W, b, dW, db)
    Y_out, get_dX = linear(X)
    dY = (Y_out - Y_true) / Y_true.shape[0]
    dX = get_dX(dY)
    assert dX.shape == X.shape
    numpy.testing.assert_allclose(dW, dY.T @ X, rtol=1e-5)
    W_before = W.copy()
    W -= 0.001 * dW
    b -= 0.001 * db
    dW.fill(0.0)
    db.fill(0.0)
    assert not numpy.allclose(W, W_before) and not dW.any()


def test_model_constructor_and_init_from_page():
    from plait.api import Model, glorot_uniform_init
    from plait.util import get_width

    def forward(model: Model, X: Floats2d, is_train: bool):
        W, b = model.get_param("W"), model.get_param("b")
        Y = X @ W.T + b

        def backprop(dY: Floats2d) -> Floats2d:
            model.inc_grad("W", dY.T @ X)
            model.inc_grad("b", dY.sum(axis=0))
            return dY @ W

        return Y, backprop

    def init(model: Model, X: Optional[Floats2d] = None, Y: Optional[Floats2d] = None) -> None:
        if X is not None:
            model.set_dim("nI", get_width(X))
        if Y is not None:
            model.set_dim("nO", get_width(Y))
        W = model.ops.alloc2f(model.get_dim("nO"), model.get_dim("nI"))
        b = model.ops.alloc1f(model.get_dim("nO"))
        glorot_uniform_init(model.ops, W.shape)
        model.set_param("W", W)
        model.set_param("b", b)

    nO, nI = None, None
    model = Model("linear", forward, init=init, dims={"nO": nO, "nI": nI}, params={"W": None, "b": None})
    model.initialize(X=uniform((4, 3)), Y=uniform((4, 2)))
    assert model.get_param("W").shape == (2, 3)
    Y, backprop = model(uniform((4, 3)), is_train=True)
    assert Y.shape == (4, 2)
    assert backprop(uniform((4, 2))).shape == (4, 3)
    assert model.get_grad("W").shape == (2, 3)


def test_chain_of_linears_infers_hidden_dims():
    from plait.api import Linear, chain as plait_chain

    n_hidden = 7
    model = plait_chain(Linear(nO=n_hidden), Linear())
    model.initialize(X=uniform((5, 3)), Y=uniform((5, 2)))
    assert model.layers[0].get_dim("nI") == 3
    assert model.layers[1].get_dim("nI") == n_hidden
    assert model.layers[1].get_dim("nO") == 2


# --- thinc-layers.md --------------------------------------------------------------------


def test_dropout_example():
    from plait.api import Dropout, Linear, chain as plait_chain

    X = uniform((4, 2))
    model = plait_chain(Linear(10, 2), Dropout(0.2))
    model.initialize(X=X)
    Y, backprop = model(X, is_train=True)
    for node in model.walk():
        if node.name == "dropout":
            node.attrs["dropout_rate"] = 0.5
    assert Y.shape == (4, 10)
    assert [n.attrs["dropout_rate"] for n in model.walk() if n.name == "dropout"] == [0.5]


def test_linear_example():
    from plait.api import Linear

    model = Linear(10, 5)
    model.initialize()
    Y = model.predict(model.ops.alloc2f(2, 5))
    assert Y.shape == (2, 10)


def test_with_debug_example(capsys):
    from plait.api import Linear, with_debug

    def on_init(model, X, Y):
        print(f"X: {type(Y)}, Y ({type(Y)})")

    model = with_debug(Linear(2, 5), on_init=on_init)
    model.initialize()
    assert "X: <class 'NoneType'>" in capsys.readouterr().out


def test_pytorch_wrapper_sketch():
    # The wrappers section's snippet: convert_inputs, the shim, convert_outputs, and the
    # three callbacks in reverse for the backward pass.
    torch = pytest.importorskip("torch")
    from plait.api import PyTorchWrapper

    module = torch.nn.Linear(3, 2)
    model = PyTorchWrapper(module)
    X = uniform((4, 3))
    is_train = True
    Xtorch, get_dX = model.attrs["convert_inputs"](model, X, is_train)
    Ytorch, torch_backprop = model.shims[0](Xtorch, is_train)
    Y, get_dYtorch = model.attrs["convert_outputs"](model, (X, Ytorch), is_train)
    dX = get_dX(torch_backprop(get_dYtorch(numpy.ones_like(Y))))
    W = module.weight.detach().numpy()
    numpy.testing.assert_allclose(Y, X @ W.T + module.bias.detach().numpy(), rtol=1e-5, atol=1e-6)
    numpy.testing.assert_allclose(dX, numpy.ones((4, 2), dtype="f") @ W, rtol=1e-5, atol=1e-6)
    numpy.testing.assert_allclose(model.predict(X), Y, rtol=1e-6)
