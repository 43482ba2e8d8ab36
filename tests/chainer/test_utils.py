"""utils.type_check, gradient_check, cuda without CuPy, computational_graph and WalkerAlias."""
import numpy
import pytest

import plait.chainer as chainer
import plait.chainer.functions as F
from plait.chainer import Variable, cuda, gradient_check
from plait.chainer import computational_graph as c
from plait.chainer.utils import WalkerAlias, force_array, type_check
from plait.chainer.utils import type_check as T


# ------------------------------------------------------------------ type_check

def _types(*arrays):
    return T.get_types(arrays, "in_types", False)


def test_expr_str_and_eval():
    x = T.Variable(1, "x")
    y = T.Variable(1, "y")
    cond = x == y
    assert cond.eval() is True and str(cond) == "x == y"
    assert (x == 1).eval()
    assert str(x + y * 2) == "x + y * 2"
    assert str((x + y) * 2) == "(x + y) * 2"
    assert str(x - (y - 1)) == "x - (y - 1)"
    assert str(2 ** (x ** y)) == "2 ** x ** y"
    assert str((2 ** x) ** y) == "(2 ** x) ** y"
    assert str(-(x + 1)) == "-(x + 1)"
    assert (x * 3 + 4).eval() == 7


def test_expr_is_not_a_bool():
    x, y, z = T.Variable(1, "x"), T.Variable(1, "y"), T.Variable(1, "z")
    with pytest.raises(RuntimeError, match="cannot be used as a bool"):
        x == y and y == z  # noqa: B015


def test_expect_messages():
    x_type, y_type = _types(numpy.zeros((3, 4, 5), "f"), numpy.zeros((1, 2), "i"))
    cases = [
        (x_type.ndim == 2, "in_types[0].ndim == 2", "3 != 2"),
        # Chainer 1.7.2 writes both sides with str(): a type shows as <class '...'>.
        (x_type.dtype == numpy.float64, "in_types[0].dtype == <class 'numpy.float64'>",
         "float32 != <class 'numpy.float64'>"),
        (x_type.shape[0] == y_type.shape[0] * 4, "in_types[0].shape[0] == in_types[1].shape[0] * 4", "3 != 4"),
        (x_type.shape[0] > 5, "in_types[0].shape[0] > 5", "3 <= 5"),
        (x_type.dtype.kind == "i", "in_types[0].dtype.kind == i", "f != i"),
    ]
    for cond, expect, actual in cases:
        with pytest.raises(T.InvalidType) as info:
            T.expect(cond)
        assert info.value.expect == expect
        assert info.value.actual == actual
        assert str(info.value) == f"Expect: {expect}\nActual: {actual}"


def test_call_and_named_values():
    x_type, = _types(numpy.zeros((3, 4), "f"))
    total = T.Variable(numpy.sum, "sum")
    with pytest.raises(T.InvalidType, match=r"Expect: sum\(in_types\[0\].shape\) == 10\nActual: 7 != 10"):
        T.expect(total(x_type.shape) == 10)
    with pytest.raises(T.InvalidType, match="Expect: in_types\\[0\\].shape\\[0\\] == in_size\nActual: 3 != 4"):
        T.expect(x_type.shape[0] == T.Variable(4, "in_size"))
    T.expect(T.prod(x_type.shape) == 12, x_type.shape[1:] == (4,))


def test_conditions_are_checked_in_order_and_lazily():
    in_types = _types(numpy.zeros(2, "f"))
    calls = []
    probe = T.Variable(lambda: calls.append(1) or 0, "probe")
    with pytest.raises(T.InvalidType, match="in_types.size == 2"):
        T.expect(in_types.size() == 2, probe() == 0)
    assert calls == []  # the second condition was never evaluated
    T.expect(in_types.size() == 1, probe() == 0)
    assert calls == [1]


def test_eval_and_manual_invalid_type():
    x_type, = _types(numpy.zeros((2, 3), "f"))
    assert x_type.shape.eval() == (2, 3)
    info = x_type.eval()
    assert isinstance(info, T.TypeInfo) and info.ndim == 2 and info.dtype == numpy.float32
    err = T.InvalidType("Shape is expected to be ...", "Shape is ...")
    assert str(err) == "Expect: Shape is expected to be ...\nActual: Shape is ..."
    with pytest.raises(TypeError, match="expected comparisons"):
        T.expect("yes")


def test_get_types_rejects_none_unless_allowed():
    # Chainer 1.7.2 asserts here: the error is both a TypeError and an AssertionError.
    with pytest.raises(TypeError, match="must be a numpy or cupy array"):
        T.get_types((None,), "in_types", False)
    with pytest.raises(AssertionError):
        T.get_types([numpy.zeros(1)], "in_types", False)
    missing = T.get_types((None,), "grads", True)[0].eval()
    assert missing.shape == () and missing.dtype is None


# ------------------------------------------------------------------ gradient_check

def test_tutorial_numerical_grad():
    x = numpy.random.randn(4, 3).astype(numpy.float32)
    gy = numpy.ones((4, 3), dtype=numpy.float32)
    gx, = gradient_check.numerical_grad(lambda: (x * x,), (x,), (gy,))
    numpy.testing.assert_allclose(gx, 2 * x, atol=1e-2)
    assert gx.dtype == numpy.float32


def test_tutorial_relu_test():
    x = Variable(numpy.random.randn(3, 2).astype(numpy.float32))
    x.data[numpy.abs(x.data) < 0.05] = 0.5
    y = F.relu(x)
    y.grad = numpy.random.randn(3, 2).astype(numpy.float32)
    y.backward()
    gx, = gradient_check.numerical_grad(lambda: (F.relu(x).data,), (x.data,), (y.grad,))
    gradient_check.assert_allclose(gx, x.grad)


def test_assert_allclose_defaults_and_message():
    gradient_check.assert_allclose(numpy.array([1.0]), numpy.array([1.0 + 5e-6]))
    with pytest.raises(AssertionError, match="worst element at index"):
        gradient_check.assert_allclose(numpy.array([1.0, 2.0]), numpy.array([1.0, 2.1]))
    with pytest.raises(AssertionError, match="shapes differ"):
        gradient_check.assert_allclose(numpy.zeros(2), numpy.zeros(3))


def test_check_backward_catches_a_wrong_gradient():
    class WrongSquare(chainer.Function):
        def forward(self, inputs):
            return inputs[0] ** 2,

        def backward(self, inputs, grad_outputs):
            return inputs[0] * grad_outputs[0],  # should be 2 * x * gy

    x = numpy.random.RandomState(0).rand(3)
    with pytest.raises(AssertionError, match="gradient of input 0 differs"):
        gradient_check.check_backward(WrongSquare(), x, numpy.ones(3), eps=1e-6)


def test_check_backward_multiple_outputs_and_loss():
    class Both(chainer.Function):
        def forward(self, inputs):
            x, = inputs
            return x * 2, x * x

        def backward(self, inputs, grad_outputs):
            x, = inputs
            g1, g2 = grad_outputs
            return 2 * g1 + 2 * x * g2,

    rs = numpy.random.RandomState(0)
    gradient_check.check_backward(Both(), rs.rand(3), (rs.rand(3), rs.rand(3)), eps=1e-6, atol=1e-7)
    gradient_check.check_backward(lambda x: F.sum(x * x), rs.rand(3), None, eps=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="func returned 2 outputs but y_grad has 1"):
        gradient_check.check_backward(Both(), rs.rand(3), rs.rand(3))
    with pytest.raises(ValueError, match="y_grad is None"):
        gradient_check.check_backward(lambda x: x * 2, rs.rand(3), None)


def test_check_backward_skips_integer_inputs():
    x = numpy.random.RandomState(0).randn(3, 4)
    t = numpy.array([0, 1, 3], numpy.int32)
    gradient_check.check_backward(F.softmax_cross_entropy, (x, t), None, eps=1e-6, atol=1e-7)


# ------------------------------------------------------------------ cuda without CuPy

def test_cuda_helpers_on_the_cpu():
    a = numpy.ones(3)
    assert cuda.get_array_module(a) is numpy and cuda.get_array_module(Variable(a)) is numpy
    assert cuda.to_cpu(a) is a
    dev = cuda.get_device(a)
    assert dev is cuda.DummyDevice
    with dev:
        dev.use()
    assert int(cuda.DummyDevice) == -1
    assert cuda.memoize()(len) is len or not cuda.available


def test_cuda_gpu_paths_fail_clearly_without_cupy():
    if cuda.available:
        pytest.skip("CuPy is available here")
    assert cuda.cupy is None and cuda.Device is None
    assert not isinstance(numpy.ones(1), cuda.ndarray)
    for call in (
        lambda: cuda.to_gpu(numpy.ones(2)),
        lambda: cuda.get_device(0),
        lambda: cuda.elementwise("T x", "T y", "y = x", "copy"),
        lambda: cuda.zeros((2,)),
        lambda: Variable(numpy.ones(2)).to_gpu(),
    ):
        with pytest.raises(RuntimeError, match="CuPy is not available"):
            call()


def test_importing_the_face_does_not_import_gpu_frameworks():
    import subprocess
    import sys

    code = (
        "import sys, plait.chainer, plait.chainer.functions, plait.chainer.links, "
        "plait.chainer.optimizers, plait.chainer.serializers\n"
        "bad = [m for m in ('cupy', 'torch', 'tensorflow', 'mxnet', 'h5py') if m in sys.modules]\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------ computational graph

def test_build_computational_graph():
    x = Variable(numpy.ones(2, "f"), name="x")
    y = F.relu(x)
    z = F.sigmoid(x)
    g = c.build_computational_graph([y])
    assert {type(n).__name__ for n in g.nodes} == {"Variable", "ReLU"}
    assert len(g.nodes) == 3 and len(g.edges) == 2
    full = c.build_computational_graph([y, z])
    assert len(full.nodes) == 5 and len(full.edges) == 4
    dot = full.dump()
    # Chainer 1.7.2's text: one line, nodes then edges, oval variables and box functions.
    assert dot.startswith("digraph graphname{") and dot.endswith("}") and "\n" not in dot
    assert f'{id(x)} [label="(2), float32",shape="oval"];' in dot
    assert f'{id(y.creator)} [label="ReLU",shape="box"];' in dot
    assert f"{id(x)} -> {id(y.creator)};" in dot
    assert c.build_computational_graph([y, z], False).dump() == dot  # no Split nodes to keep
    # Later Chainer's options: styled nodes, named variables, a direction.
    styled = c.build_computational_graph([y, z], variable_style={"shape": "octagon"}, rankdir="LR").dump()
    assert "rankdir=LR;" in styled and 'shape="octagon",label="x: (2), float32"' in styled
    with pytest.raises(NotImplementedError):
        full.dump("png")
    y.unchain_backward()
    assert len(c.build_computational_graph([y]).nodes) == 1


# ------------------------------------------------------------------ utils

def test_force_array():
    assert isinstance(force_array(numpy.float32(1)), numpy.ndarray)
    assert force_array(numpy.float32(1)).dtype == numpy.float32
    a = numpy.ones(2)
    assert force_array(a) is a


def test_walker_alias_distribution():
    numpy.random.seed(0)
    probs = [0.1, 0.0, 0.5, 0.4]
    sampler = WalkerAlias(probs)
    draws = sampler.sample((20000,))
    assert draws.dtype == numpy.int32 and draws.shape == (20000,)
    freq = numpy.bincount(draws, minlength=4) / draws.size
    numpy.testing.assert_allclose(freq, probs, atol=0.015)
    assert sampler.sample((2, 3)).shape == (2, 3)
    with pytest.raises(ValueError, match="sums to 0"):
        WalkerAlias([0, 0])
    with pytest.raises(ValueError, match="must be finite and >= 0"):
        WalkerAlias([1, -1])


def test_walker_alias_tables_and_seeded_draws_are_chainer_1_7_2s():
    # Reference values printed by the real Chainer 1.7.2 (NumPy 1.26) for the same input and seed:
    # a seeded word2vec run with negative sampling draws the same noise words on both.
    sampler = WalkerAlias(numpy.power(numpy.array([5, 3, 2, 7, 1, 4], numpy.float32), 0.75))
    numpy.testing.assert_array_equal(
        sampler.threshold,
        numpy.array([0.3886779248714447, 0.6536757349967957, 0.8859939575195312, 0.48802509903907776,
                     0.9532986879348755, 0.9999997615814209], numpy.float32))
    numpy.testing.assert_array_equal(sampler.values, [4, 5, 2, 0, 1, 3, 5, 3, 0, 3, 3, 0])
    numpy.random.seed(3)
    draws = sampler.sample((5, 3))
    assert draws.dtype == numpy.int32
    numpy.testing.assert_array_equal(draws.ravel(), [5, 0, 0, 5, 3, 3, 5, 2, 4, 1, 4, 1, 3, 0, 0])


def test_type_check_nodes_have_chainers_signatures_and_priorities():
    x, y = T.Variable(2, "x"), T.Variable(3, "y")
    assert str(T.GetAttr(x, "real")) == "x.real" and T.GetAttr(x, "real").eval() == 2
    assert str(T.GetAttr(x, T.Constant("imag"))) == "x.imag"
    assert str(T.GetAttr(x, 3)) == "getattr(x, 3)"
    assert str(T.BinaryOperator(8, x, y, "+", lambda a, b: a + b)) == "x + (y)"
    assert str(T.BinaryOperator(8, x, y, "+", lambda a, b: a + b, True)) == "(x) + y"
    assert str(T.UnaryOperator(9, x, "-", lambda a: -a)) == "-(x)"
    cond = T.BoolBinaryOperator(x, y, "<", ">=", lambda a, b: a < b)
    assert cond.eval() is True
    assert (x | y).priority < (x ^ y).priority < (x & y).priority < (x << y).priority
    assert (x + y).priority < (x * y).priority < (-x).priority < (x ** y).priority < x.priority
    # ** is a power (Chainer 1.7.2 computed x % y here).
    assert (x ** y).eval() == 8 and str(-x ** y) == "-x ** y" and str((-x) ** y) == "(-x) ** y"


def test_type_check_lists_and_tuples_hold_expressions():
    zero = T.Constant(0)
    assert (T.Constant([0, 1]) == [zero, 1]).eval()
    assert (T.Constant((0,)) == (zero,)).eval()
    assert T._repr([[zero]]) == "[[0]]" and T._repr((zero,)) == "(0,)" and T._repr(()) == "()"
    assert str(T.Call(T.Variable(sum, "sum"), ([1, zero],))) == "sum([1, 0])"
    items = T.Variable([1, 2, 3], "v")
    assert str(items[1:]) == "v[1:]" and str(items[..., 0]) == "v[..., 0]"
