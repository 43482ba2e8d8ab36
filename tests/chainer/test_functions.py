"""Every function of the slice: forward against a NumPy formula, backward against numerical gradients."""
import numpy
import pytest

import plait.chainer as chainer
import plait.chainer.functions as F
from plait.chainer import Variable, gradient_check
from plait.chainer.utils import type_check


def _rand(*shape, low=-1.0, high=1.0, dtype=numpy.float64, seed=0):
    return numpy.random.RandomState(seed).uniform(low, high, shape).astype(dtype)


def _away_from_zero(x, margin=0.1):
    # Kinks (relu, abs, leaky_relu) make central differences wrong within eps of 0.
    x = x.copy()
    x[numpy.abs(x) < margin] = margin
    return x


def _np_softmax(x, axis=1):
    e = numpy.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# name -> (function of Variables, numpy reference, input arrays (float64), output-grad shape or None for scalars)
def _cases():
    x23 = _rand(2, 3)
    y23 = _rand(2, 3, seed=1)
    pos23 = _rand(2, 3, low=0.5, high=2.0, seed=2)
    x34 = _away_from_zero(_rand(3, 4, seed=3))
    x3_4_2 = _rand(3, 4, 2, seed=4)
    W = _rand(5, 8, seed=5)
    b = _rand(5, seed=6)
    x3_2_4 = _rand(3, 2, 4, seed=7)  # flattens to (3, 8)
    t = numpy.array([0, 3, 1], dtype=numpy.int32)
    t_ignore = numpy.array([0, -1, 2], dtype=numpy.int32)
    t_nd = numpy.array([[0, 3], [1, 1], [2, 0]], dtype=numpy.int32)
    a = _rand(3, 4, seed=8)
    bm = _rand(4, 2, seed=9)
    return {
        "relu": (F.relu, lambda x: numpy.maximum(x, 0), (x34,), (3, 4)),
        "sigmoid": (F.sigmoid, lambda x: 1 / (1 + numpy.exp(-x)), (x23,), (2, 3)),
        "tanh": (F.tanh, numpy.tanh, (x23,), (2, 3)),
        "softmax": (F.softmax, _np_softmax, (x34,), (3, 4)),
        "softmax_3d": (F.softmax, _np_softmax, (x3_4_2,), (3, 4, 2)),
        "log_softmax": (F.log_softmax, lambda x: numpy.log(_np_softmax(x)), (x34,), (3, 4)),
        "log_softmax_3d": (F.log_softmax, lambda x: numpy.log(_np_softmax(x)), (x3_4_2,), (3, 4, 2)),
        "leaky_relu": (lambda x: F.leaky_relu(x, 0.3), lambda x: numpy.where(x >= 0, x, 0.3 * x), (x34,), (3, 4)),
        "linear": (F.linear, lambda x, W, b: x.reshape(3, -1) @ W.T + b, (x3_2_4, W, b), (3, 5)),
        "linear_nobias": (F.linear, lambda x, W: x.reshape(3, -1) @ W.T, (x3_2_4, W), (3, 5)),
        "softmax_cross_entropy": (
            F.softmax_cross_entropy,
            lambda x, t: -numpy.log(_np_softmax(x))[numpy.arange(3), t].mean(),
            (x34, t), None,
        ),
        "softmax_cross_entropy_ignore": (
            F.softmax_cross_entropy,
            lambda x, t: -numpy.log(_np_softmax(x))[[0, 2], [0, 2]].sum() / 2,
            (x34, t_ignore), None,
        ),
        "softmax_cross_entropy_unnormalized": (
            lambda x, t: F.softmax_cross_entropy(x, t, normalize=False),
            lambda x, t: -numpy.log(_np_softmax(x))[[0, 2], [0, 2]].sum() / 3,
            (x34, t_ignore), None,
        ),
        "softmax_cross_entropy_3d": (
            F.softmax_cross_entropy,
            lambda x, t: -numpy.mean([numpy.log(_np_softmax(x))[i, t[i, j], j] for i in range(3) for j in range(2)]),
            (x3_4_2, t_nd), None,
        ),
        "mean_squared_error": (F.mean_squared_error, lambda a, b: ((a - b) ** 2).mean(), (x23, y23), None),
        "sum_all": (F.sum, lambda x: x.sum(), (x23,), None),
        "sum_axis": (lambda x: F.sum(x, axis=1), lambda x: x.sum(axis=1), (x3_4_2,), (3, 2)),
        "sum_axes": (lambda x: F.sum(x, axis=(0, -1)), lambda x: x.sum(axis=(0, 2)), (x3_4_2,), (4,)),
        "exp": (F.exp, numpy.exp, (x23,), (2, 3)),
        "log": (F.log, numpy.log, (pos23,), (2, 3)),
        "sin": (F.sin, numpy.sin, (x23,), (2, 3)),
        "cos": (F.cos, numpy.cos, (x23,), (2, 3)),
        "matmul": (F.matmul, lambda a, b: a @ b, (a, bm), (3, 2)),
        "matmul_transa": (lambda a, b: F.matmul(a, b, transa=True), lambda a, b: a.T @ b, (a.T.copy(), bm), (3, 2)),
        "matmul_transb": (lambda a, b: F.matmul(a, b, transb=True), lambda a, b: a @ b.T, (a, bm.T.copy()), (3, 2)),
        "matmul_both": (
            lambda a, b: F.matmul(a, b, transa=True, transb=True), lambda a, b: a.T @ b.T,
            (a.T.copy(), bm.T.copy()), (3, 2),
        ),
        "matmul_vectors": (F.matmul, lambda a, b: a.reshape(3, 1) @ b.reshape(1, 4),
                           (_rand(3, seed=10), _rand(1, 4, seed=11)), (3, 4)),
        "add": (lambda a, b: a + b, numpy.add, (x23, y23), (2, 3)),
        "sub": (lambda a, b: a - b, numpy.subtract, (x23, y23), (2, 3)),
        "mul": (lambda a, b: a * b, numpy.multiply, (x23, y23), (2, 3)),
        "div": (lambda a, b: a / b, numpy.divide, (x23, pos23), (2, 3)),
        "pow": (lambda a, b: a ** b, numpy.power, (pos23, y23), (2, 3)),
        "neg": (lambda a: -a, numpy.negative, (x23,), (2, 3)),
        "abs": (abs, numpy.abs, (_away_from_zero(x23),), (2, 3)),
        "add_const": (lambda a: a + 2.5, lambda a: a + 2.5, (x23,), (2, 3)),
        "radd_const": (lambda a: 2.5 + a, lambda a: 2.5 + a, (x23,), (2, 3)),
        "sub_const": (lambda a: a - 2.5, lambda a: a - 2.5, (x23,), (2, 3)),
        "rsub_const": (lambda a: 2.5 - a, lambda a: 2.5 - a, (x23,), (2, 3)),
        "mul_const": (lambda a: a * 3.0, lambda a: a * 3.0, (x23,), (2, 3)),
        "rmul_array": (lambda a: numpy.array([1.0, 2.0, 3.0]) * a, lambda a: a * [1.0, 2.0, 3.0], (x23,), (2, 3)),
        "div_const": (lambda a: a / 4.0, lambda a: a / 4.0, (x23,), (2, 3)),
        "rdiv_const": (lambda a: 2.0 / a, lambda a: 2.0 / a, (pos23,), (2, 3)),
        "pow_const": (lambda a: a ** 3, lambda a: a ** 3, (x23,), (2, 3)),
        "rpow_const": (lambda a: 2.0 ** a, lambda a: 2.0 ** a, (x23,), (2, 3)),
        "matmul_op": (lambda a, b: a @ b, lambda a, b: a @ b, (a, bm), (3, 2)),
        "identity": (F.identity, lambda x: x, (x23,), (2, 3)),
    }


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_numpy(name):
    fn, ref, inputs, _ = CASES[name]
    y = fn(*[Variable(x.copy()) for x in inputs])
    expected = ref(*inputs)
    assert isinstance(y, Variable)
    assert y.data.dtype == numpy.float64
    assert y.data.shape == numpy.shape(expected)
    numpy.testing.assert_allclose(y.data, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_matches_numerical_gradient(name):
    fn, _, inputs, gy_shape = CASES[name]
    gy = None if gy_shape is None else _rand(*gy_shape, seed=42)
    gradient_check.check_backward(fn, tuple(x.copy() for x in inputs), gy, eps=1e-6, atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "exp", "mul"])
def test_float32_stays_float32(name):
    fn, ref, inputs, gy_shape = CASES[name]
    xs = [Variable(x.astype(numpy.float32)) for x in inputs]
    y = fn(*xs)
    assert y.data.dtype == numpy.float32
    numpy.testing.assert_allclose(y.data, ref(*inputs), rtol=1e-5, atol=1e-6)
    y.grad = numpy.ones(y.data.shape, dtype=numpy.float32)
    y.backward()
    for x in xs:
        assert x.grad.dtype == numpy.float32 and x.grad.shape == x.data.shape


def test_linear_gradients_are_the_textbook_formulas():
    x = _rand(4, 3)
    W = _rand(2, 3, seed=1)
    b = _rand(2, seed=2)
    gy = _rand(4, 2, seed=3)
    xv, Wv, bv = Variable(x), Variable(W), Variable(b)
    y = F.linear(xv, Wv, bv)
    y.grad = gy
    y.backward()
    numpy.testing.assert_allclose(xv.grad, gy @ W)
    numpy.testing.assert_allclose(Wv.grad, gy.T @ x)
    numpy.testing.assert_allclose(bv.grad, gy.sum(axis=0))


def test_log_softmax_is_stable_for_large_scores():
    x = numpy.array([[1000.0, 0.0, -1000.0]], dtype=numpy.float32)
    y = F.log_softmax(Variable(x)).data
    assert numpy.isfinite(y).all()
    numpy.testing.assert_allclose(y, [[0.0, -1000.0, -2000.0]], rtol=1e-6)


def test_softmax_cross_entropy_all_ignored_is_zero_and_has_zero_grad():
    x = Variable(_rand(2, 3).astype(numpy.float32))
    t = Variable(numpy.array([-1, -1], dtype=numpy.int32))
    loss = F.softmax_cross_entropy(x, t)
    assert float(loss.data) == 0.0
    loss.backward()
    assert not x.grad.any()


def test_softmax_cross_entropy_rejects_out_of_range_labels():
    x = Variable(_rand(2, 3).astype(numpy.float32))
    with pytest.raises(ValueError, match=r"labels must be in \[0, 3\)"):
        F.softmax_cross_entropy(x, Variable(numpy.array([0, 3], dtype=numpy.int32)))


def test_softmax_cross_entropy_label_has_no_gradient():
    x = Variable(_rand(3, 4).astype(numpy.float32))
    t = Variable(numpy.array([0, 1, 2], dtype=numpy.int32))
    F.softmax_cross_entropy(x, t).backward()
    assert t.grad is None
    assert x.grad is not None


def test_accuracy_forward_and_no_gradient():
    y = numpy.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]], dtype=numpy.float32)
    t = numpy.array([1, 0, 0, 1], dtype=numpy.int32)
    yv = Variable(y)
    acc = F.accuracy(yv, Variable(t))
    assert acc.data.shape == ()
    assert acc.data.dtype == numpy.float32
    assert float(acc.data) == pytest.approx(0.5)
    assert float(F.accuracy(yv, Variable(numpy.array([1, 0, -1, -1], dtype=numpy.int32)), ignore_label=-1).data) == 1.0
    # Not differentiable: backward leaves no gradient on the scores.
    acc.backward()
    assert yv.grad is None


def test_accuracy_nd_labels():
    y = numpy.zeros((2, 3, 2), dtype=numpy.float32)
    y[0, 1, 0] = y[0, 2, 1] = y[1, 0, 0] = y[1, 0, 1] = 1
    t = numpy.array([[1, 2], [0, 1]], dtype=numpy.int32)
    assert float(F.accuracy(Variable(y), Variable(t)).data) == pytest.approx(0.75)


def test_mean_squared_error_is_not_halved():
    a = Variable(numpy.array([1.0, 2.0], dtype=numpy.float32))
    b = Variable(numpy.array([0.0, 0.0], dtype=numpy.float32))
    assert float(F.mean_squared_error(a, b).data) == pytest.approx(2.5)


@pytest.mark.parametrize(
    "call, expect",
    [
        (lambda: F.relu(Variable(numpy.zeros(3, dtype=numpy.int32))), "in_types[0].dtype.kind == f"),
        (lambda: F.softmax(Variable(numpy.zeros(3, dtype=numpy.float32))), "in_types[0].ndim > 1"),
        (
            lambda: F.linear(Variable(numpy.zeros((2, 3), "f")), Variable(numpy.zeros((4, 5), "f"))),
            "prod(in_types[0].shape[1:]) == in_types[1].shape[1]",
        ),
        (
            lambda: F.linear(Variable(numpy.zeros((2, 3), "f")), Variable(numpy.zeros((4, 3), "f")), Variable(numpy.zeros(5, "f"))),
            "in_types[2].shape[0] == in_types[1].shape[0]",
        ),
        (
            lambda: F.softmax_cross_entropy(Variable(numpy.zeros((2, 3), "f")), Variable(numpy.zeros(2, "f"))),
            "in_types[1].dtype.kind == i",
        ),
        (
            lambda: F.accuracy(Variable(numpy.zeros((2, 3), "f")), Variable(numpy.zeros(3, "i"))),
            "in_types[0].shape[0] == in_types[1].shape[0]",
        ),
        (
            lambda: F.mean_squared_error(Variable(numpy.zeros(2, "f")), Variable(numpy.zeros(3, "f"))),
            "in_types[0].shape == in_types[1].shape",
        ),
        (lambda: F.matmul(Variable(numpy.zeros((2, 3), "f")), Variable(numpy.zeros((2, 3), "f"))), "inner dimensions agree"),
        (lambda: F.sum(Variable(numpy.zeros((2, 3), "f")), axis=2), "in_types[0].ndim > 2"),
    ],
)
def test_type_check_failures_are_readable(call, expect):
    with pytest.raises(type_check.InvalidType) as info:
        call()
    text = str(info.value)
    assert text.startswith("Invalid operation is performed in: ")
    assert "(Forward)" in text
    assert f"Expect: {expect}" in text
    assert "\nActual: " in text


def test_type_check_message_layout():
    with pytest.raises(type_check.InvalidType) as info:
        F.linear(Variable(numpy.zeros((2, 3), "f")), Variable(numpy.zeros((4, 5), "f")))
    assert str(info.value) == (
        "Invalid operation is performed in: LinearFunction (Forward)\n\n"
        "Expect: prod(in_types[0].shape[1:]) == in_types[1].shape[1]\n"
        "Actual: 3 != 5"
    )


def test_type_check_can_be_switched_off(monkeypatch):
    monkeypatch.setattr(chainer.Function, "type_check_enable", False)
    # Without the check the bad call reaches numpy, which fails differently.
    with pytest.raises(Exception) as info:
        F.linear(Variable(numpy.zeros((2, 3), "f")), Variable(numpy.zeros((4, 5), "f")))
    assert not isinstance(info.value, type_check.InvalidType)


def test_function_classes_are_exported_under_chainer_module_paths():
    from plait.chainer.functions.activation.relu import ReLU, relu
    from plait.chainer.functions.connection.linear import LinearFunction
    from plait.chainer.functions.loss.softmax_cross_entropy import softmax_cross_entropy
    from plait.chainer.functions.evaluation.accuracy import accuracy
    from plait.chainer.functions.math import basic_math

    assert F.relu is relu and F.ReLU is ReLU and F.LinearFunction is LinearFunction
    assert F.softmax_cross_entropy is softmax_cross_entropy and F.accuracy is accuracy
    assert hasattr(basic_math, "install_variable_arithmetics")
    # The old name of the Linear link stays in functions.
    assert F.Linear is chainer.links.Linear


def test_basic_math_labels_and_reflected_variable_operands():
    from plait.chainer.functions.math import basic_math

    assert basic_math._convert_value_to_string(-2) == "(-2)"
    assert basic_math._convert_value_to_string(numpy.float32(2)) == "2.0"
    assert basic_math._convert_value_to_string(Variable(numpy.zeros(2, "f"))) == "constant array"
    assert basic_math.SubFromConstant(2.0).label == "2.0 - _"
    assert basic_math.PowConstVar(-1.5).label == "(-1.5) ** _"
    a = Variable(numpy.array([3.0, 4.0], "f"))
    b = Variable(numpy.array([1.0, 2.0], "f"))
    # __rsub__ and friends called with a Variable (as `b.__rsub__(a)`) compute a - b etc.
    numpy.testing.assert_array_equal(b.__rsub__(a).data, [2.0, 2.0])
    numpy.testing.assert_array_equal(b.__rtruediv__(a).data, [3.0, 2.0])
    numpy.testing.assert_allclose(b.__rpow__(a).data, [3.0, 16.0])
    with pytest.raises(NotImplementedError):
        a < b  # noqa: B015
    with pytest.raises(NotImplementedError):
        bool(a)
