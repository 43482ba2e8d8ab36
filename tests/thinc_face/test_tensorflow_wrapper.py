"""TensorFlowWrapper / TensorFlowShim on TensorFlow 2 with Keras 3.

The tests that need TensorFlow skip without it (the `tf` fixture). The reference for training
is the same Keras model stepped by hand in TensorFlow, with the same gradients of the output
and the same update rule.
"""
import os

import numpy
import pytest
import srsly
from _env import installed

from plait import compat
from plait.api import Adam, Model, SGD, TensorFlowWrapper, chain, keras_model_fns, keras_subclass, noop
from plait.shims.tensorflow import maybe_handshake_model


@pytest.fixture
def tf(monkeypatch):
    tensorflow = pytest.importorskip("tensorflow")
    # enable_tensorflow() sets module globals; restore them so other tests see plait as before.
    for name in ("tensorflow", "has_tensorflow", "has_tensorflow_gpu"):
        monkeypatch.setattr(compat, name, getattr(compat, name))
    compat.enable_tensorflow()
    return tensorflow


# --- without TensorFlow ---------------------------------------------------------------------


@pytest.mark.skipif(installed("tensorflow"), reason="tensorflow is installed")
def test_wrapper_without_tensorflow_names_the_package():
    with pytest.raises(ImportError, match="pip install"):
        TensorFlowWrapper(object())


def test_handshake_asks_for_keras_subclass():
    with pytest.raises(ValueError, match="keras_subclass"):
        maybe_handshake_model(object())


def test_keras_subclass_registers_the_class_and_keeps_its_arguments():
    X, Y = numpy.zeros((1, 2), "f"), numpy.zeros((1, 1), "f")

    @keras_subclass("plait-test-plain.v1", X=X, Y=Y, input_shape=(1, 2), compile_args={"loss": "mae"})
    class Plain:
        def __init__(self, width, **kwargs):
            self.width = width

    model = Plain(3, name="p")
    assert model.catalogue_name == "plait-test-plain.v1" and model.eg_shape == (1, 2)
    assert model.eg_x is X and model.eg_y is Y
    assert model.eg_compile == {"optimizer": "adam", "loss": "mae"}
    assert model.eg_args.args == (3,) and model.eg_args.kwargs == {"name": "p"}
    rebuilt = keras_model_fns.get("plait-test-plain.v1")(4)
    assert isinstance(rebuilt, Plain) and rebuilt.width == 4
    with pytest.raises(ValueError, match="JSON-serializable"):
        Plain(object())


# --- with TensorFlow ------------------------------------------------------------------------


def _keras_mlp(tf, nI=5, nH=7, nO=3, seed=0):
    tf.keras.utils.set_random_seed(seed)
    return tf.keras.Sequential(
        [
            tf.keras.Input((nI,)),
            tf.keras.layers.Dense(nH, activation="tanh"),
            tf.keras.layers.LayerNormalization(),
            tf.keras.layers.Dense(nO),
        ]
    )


def _twin(tf, keras_model):
    """An independent Keras model with the same architecture and weights."""
    twin = tf.keras.models.clone_model(keras_model)
    twin.set_weights(keras_model.get_weights())
    return twin


def _data(nB=4, nI=5, nO=3, seed=1):
    rng = numpy.random.default_rng(seed)
    return rng.normal(size=(nB, nI)).astype("f"), rng.normal(size=(nB, nO)).astype("f")


def _weights(keras_model):
    return [numpy.asarray(w) for w in keras_model.get_weights()]


def test_sgd_training_matches_the_same_steps_in_tensorflow(tf):
    X, T = _data()
    wrapped = TensorFlowWrapper(_keras_mlp(tf))
    reference = _twin(tf, wrapped.shims[0]._model)
    learn_rate = 0.05
    optimizer = SGD(learn_rate, L2=0.0, grad_clip=0.0, use_averages=False)
    for _ in range(3):
        Y, backprop = wrapped.begin_update(X)
        dY = (Y - T) / X.shape[0]
        dX = backprop(dY)
        wrapped.finish_update(optimizer)

        X_tf = tf.constant(X)
        with tf.GradientTape() as tape:
            tape.watch(X_tf)
            Y_ref = reference(X_tf, training=True)
        grads = tape.gradient(Y_ref, [X_tf] + reference.trainable_variables, output_gradients=tf.constant(dY))
        for variable, grad in zip(reference.trainable_variables, grads[1:]):
            variable.assign_sub(learn_rate * grad)

        numpy.testing.assert_allclose(Y, Y_ref.numpy(), rtol=1e-5, atol=1e-6)
        numpy.testing.assert_allclose(dX, grads[0].numpy(), rtol=1e-5, atol=1e-6)
    for ours, theirs in zip(_weights(wrapped.shims[0]._model), _weights(reference)):
        numpy.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_gradients_of_several_backprops_are_summed_until_finish_update(tf):
    X, T = _data(nB=6)
    wrapped = TensorFlowWrapper(_keras_mlp(tf))
    reference = _twin(tf, wrapped.shims[0]._model)
    for half in (slice(0, 3), slice(3, 6)):
        Y, backprop = wrapped.begin_update(X[half])
        backprop(Y - T[half])
    wrapped.finish_update(SGD(1.0, L2=0.0, grad_clip=0.0, use_averages=False))
    assert wrapped.shims[0].gradients is None

    with tf.GradientTape() as tape:
        Y_ref = reference(X, training=True)
    grads = tape.gradient(Y_ref, reference.trainable_variables, output_gradients=Y_ref - T)
    for variable, grad in zip(reference.trainable_variables, grads):
        variable.assign_sub(grad)
    for ours, theirs in zip(_weights(wrapped.shims[0]._model), _weights(reference)):
        numpy.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_finish_update_without_gradients_says_what_to_do(tf):
    wrapped = TensorFlowWrapper(_keras_mlp(tf))
    with pytest.raises(ValueError, match="backprop"):
        wrapped.shims[0].finish_update(SGD(0.1))


def test_predict_runs_keras_in_inference_mode(tf):
    tf.keras.utils.set_random_seed(0)
    keras_model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dropout(0.5)])
    wrapped = TensorFlowWrapper(keras_model)
    X = numpy.ones((3, 4), dtype="f")
    numpy.testing.assert_array_equal(wrapped.predict(X), X)
    Y, _ = wrapped.begin_update(numpy.ones((50, 4), dtype="f"))
    assert (Y == 0).any()


def test_shim_bytes_round_trip_into_a_fresh_model(tf):
    X, T = _data()
    trained = TensorFlowWrapper(_keras_mlp(tf, seed=0))
    Y, backprop = trained.begin_update(X)
    backprop(Y - T)
    trained.finish_update(Adam(0.01))
    fresh = TensorFlowWrapper(_keras_mlp(tf, seed=1))
    assert not numpy.allclose(fresh.predict(X), trained.predict(X))

    fresh.shims[0].from_bytes(trained.shims[0].to_bytes())
    for ours, theirs in zip(_weights(fresh.shims[0]._model), _weights(trained.shims[0]._model)):
        numpy.testing.assert_array_equal(ours, theirs)
    numpy.testing.assert_array_equal(fresh.predict(X), trained.predict(X))


def test_model_bytes_and_disk_round_trip(tf, tmp_path):
    X, _ = _data()
    saved = chain(TensorFlowWrapper(_keras_mlp(tf, seed=0)), noop())
    loaded = chain(TensorFlowWrapper(_keras_mlp(tf, seed=2)), noop())
    loaded.from_bytes(saved.to_bytes())
    numpy.testing.assert_array_equal(loaded.predict(X), saved.predict(X))

    path = tmp_path / "model.bin"
    saved.to_disk(path)
    on_disk = TensorFlowWrapper(_keras_mlp(tf, seed=3))
    chain(on_disk, noop()).from_disk(path)
    numpy.testing.assert_array_equal(on_disk.predict(X), saved.predict(X))


def test_from_bytes_refuses_another_architecture(tf):
    small = TensorFlowWrapper(_keras_mlp(tf, nH=7))
    other = TensorFlowWrapper(_keras_mlp(tf, nH=8))
    with pytest.raises(ValueError, match="shape"):
        other.shims[0].from_bytes(small.shims[0].to_bytes())
    fewer = TensorFlowWrapper(tf.keras.Sequential([tf.keras.Input((5,)), tf.keras.layers.Dense(3)]))
    with pytest.raises(ValueError, match="architecture"):
        fewer.shims[0].from_bytes(small.shims[0].to_bytes())


def test_from_bytes_refuses_non_numeric_and_foreign_data(tf):
    shim = TensorFlowWrapper(_keras_mlp(tf)).shims[0]
    record = srsly.msgpack_loads(shim.to_bytes())
    record["weights"][0][1] = numpy.dtype(object).str
    with pytest.raises(ValueError, match="non-numeric"):
        shim.from_bytes(srsly.msgpack_dumps(record))
    with pytest.raises(ValueError, match="Keras weights"):
        shim.from_bytes(srsly.msgpack_dumps({"nodes": []}))
    with pytest.raises(ValueError, match="msgpack"):
        shim.from_bytes(b"\xc1 not msgpack")


# Keras' own HDF5 writer calls numpy.array(x, copy=False) on its variables (a numpy 2 warning).
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_from_bytes_reads_the_weights_of_a_keras_hdf5_file(tf, tmp_path):
    # Thinc (with Keras 2) saved a wrapped model as an HDF5 model file; only its weights are read.
    X, _ = _data()
    source = _keras_mlp(tf, seed=0)
    path = os.path.join(tmp_path, "model.h5")
    source.save(path)
    with open(path, "rb") as file_:
        data = file_.read()
    wrapped = TensorFlowWrapper(_keras_mlp(tf, seed=4))
    wrapped.shims[0].from_bytes(data)
    numpy.testing.assert_array_equal(wrapped.predict(X), source(X).numpy())


def test_use_params_swaps_in_the_averages_and_restores(tf):
    X, T = _data()
    wrapped = TensorFlowWrapper(_keras_mlp(tf))
    optimizer = Adam(0.05)
    for _ in range(3):
        Y, backprop = wrapped.begin_update(X)
        backprop(Y - T)
        wrapped.finish_update(optimizer)
    before = wrapped.predict(X)
    key = (wrapped.shims[0].id, "tensorflow-shim")
    assert key in optimizer.averages
    with wrapped.use_params(optimizer.averages):
        averaged = wrapped.predict(X)
        flat = numpy.concatenate([numpy.ravel(v.numpy()) for v in wrapped.shims[0]._model.trainable_variables])
        numpy.testing.assert_allclose(flat, optimizer.averages[key], rtol=1e-6)
    assert not numpy.allclose(averaged, before)
    numpy.testing.assert_array_equal(wrapped.predict(X), before)


def test_copy_is_independent(tf):
    X, T = _data()
    wrapped = TensorFlowWrapper(_keras_mlp(tf))
    copied = wrapped.copy()
    numpy.testing.assert_array_equal(copied.predict(X), wrapped.predict(X))
    assert copied.shims[0]._model is not wrapped.shims[0]._model
    Y, backprop = copied.begin_update(X)
    backprop(Y - T)
    copied.finish_update(SGD(0.5))
    assert not numpy.allclose(copied.predict(X), wrapped.predict(X))


def test_to_cpu_keeps_the_weights(tf):
    X, _ = _data()
    wrapped = TensorFlowWrapper(_keras_mlp(tf))
    before = wrapped.predict(X)
    wrapped.to_cpu()
    numpy.testing.assert_array_equal(wrapped.predict(X), before)


def test_to_device_keeps_a_model_already_there_and_needs_a_gpu(tf):
    shim = TensorFlowWrapper(_keras_mlp(tf)).shims[0]
    keras_model = shim._model
    shim.to_device("cpu", -1)
    assert shim._model is keras_model
    if not tf.config.list_logical_devices("GPU"):
        with pytest.raises(ValueError, match="no GPU"):
            shim.to_device("gpu", 0)
    with pytest.raises(ValueError, match="device type"):
        shim.to_device("tpu", 0)


def test_subclassed_models_need_keras_subclass(tf):
    class Undecorated(tf.keras.Model):
        def call(self, inputs):
            return inputs

    with pytest.raises(ValueError, match="keras_subclass"):
        TensorFlowWrapper(Undecorated())


def test_keras_subclass_model_trains_copies_and_round_trips(tf):
    X, T = _data()

    @keras_subclass("plait-test-mlp.v1", X=X, Y=T, input_shape=X.shape, compile_args={"loss": "mae"})
    class SmallMLP(tf.keras.Model):
        def __init__(self, width, note=None, **kwargs):
            super().__init__(**kwargs)
            self.hidden = tf.keras.layers.Dense(width, activation="relu")
            self.out = tf.keras.layers.Dense(T.shape[1])

        def call(self, inputs):
            return self.out(self.hidden(inputs))

    wrapped = TensorFlowWrapper(SmallMLP(6))
    keras_model = wrapped.shims[0]._model
    assert keras_model.loss == "mae" and keras_model.eg_args.args == (6,)
    assert len(keras_model.weights) == 4
    Y, backprop = wrapped.begin_update(X)
    backprop(Y - T)
    wrapped.finish_update(SGD(0.1))

    copied = wrapped.copy()
    assert isinstance(copied.shims[0]._model, SmallMLP)
    numpy.testing.assert_allclose(copied.predict(X), wrapped.predict(X), rtol=1e-6)
    fresh = TensorFlowWrapper(SmallMLP(6))
    fresh.from_bytes(wrapped.to_bytes())
    numpy.testing.assert_array_equal(fresh.predict(X), wrapped.predict(X))

    with pytest.raises(ValueError, match="JSON-serializable"):
        SmallMLP(6, note=object())


def test_wrapper_rejects_other_models_and_keeps_model_class_and_name(tf):
    with pytest.raises(ValueError, match="tf.keras.Model"):
        TensorFlowWrapper(Model("x", lambda model, X, is_train: (X, lambda dY: dY)))

    class Custom(Model):
        pass

    wrapped = TensorFlowWrapper(_keras_mlp(tf), model_class=Custom, model_name="keras-mlp")
    assert isinstance(wrapped, Custom) and wrapped.name == "keras-mlp"


def test_dict_inputs_get_dict_gradients(tf):
    a = tf.keras.Input((3,), name="a")
    b = tf.keras.Input((3,), name="b")
    keras_model = tf.keras.Model({"a": a, "b": b}, tf.keras.layers.Add()([a, b * 2.0]))

    def convert_inputs(model, X, is_train):
        from plait.api import ArgsKwargs, tensorflow2xp, xp2tensorflow

        inputs = {k: xp2tensorflow(v, requires_grad=is_train) for k, v in X.items()}
        return ArgsKwargs(args=(inputs,), kwargs={}), lambda dX: {k: tensorflow2xp(v) for k, v in dX.args[0].items()}

    wrapped = TensorFlowWrapper(keras_model, convert_inputs=convert_inputs)
    X = {"a": numpy.ones((2, 3), "f"), "b": numpy.ones((2, 3), "f")}
    Y, backprop = wrapped.begin_update(X)
    numpy.testing.assert_array_equal(Y, numpy.full((2, 3), 3.0, "f"))
    dX = backprop(numpy.ones((2, 3), "f"))
    numpy.testing.assert_array_equal(dX["a"], numpy.ones((2, 3), "f"))
    numpy.testing.assert_array_equal(dX["b"], numpy.full((2, 3), 2.0, "f"))
