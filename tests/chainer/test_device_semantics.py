"""Where Chainer 1.7.2's own GPU tests showed plait.chainer differing from Chainer on a device.

Found by running Chainer 1.7.2's GPU-tagged tests (attr.gpu / attr.cudnn), rewritten to
plait.chainer, on an H100: constants of the other array module, labels checked in debug mode,
StatefulGRU's state following the link, empty cupy arrays having no device, and the
hierarchical softmax's table names. The host-only parts run everywhere; the rest are marked gpu.
"""
import numpy
import pytest

import plait.chainer as chainer
from plait.chainer import Variable, cuda
from plait.chainer import functions as F
from plait.chainer import links as L
from plait.chainer.functions.loss.hierarchical_softmax import BinaryHierarchicalSoftmaxFunction

from _env import HAS_GPU

requires_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
TREE = ((0, 1), ((2, 3), 4))


def test_hierarchical_softmax_function_has_chainers_table_names():
    f = BinaryHierarchicalSoftmaxFunction(TREE)
    # Leaf w's internal nodes are paths[begins[w]:begins[w + 1]], with their signs in codes.
    numpy.testing.assert_array_equal(f.begins, [0, 2, 4, 7, 10, 12])
    assert f.paths[f.begins[2]:f.begins[3]].tolist() == [0, 2, 3]
    assert f.codes[f.begins[4]:f.begins[5]].tolist() == [-1.0, -1.0]
    assert f.parser_size == 4


def test_stateful_gru_set_state_keeps_the_variable_and_refuses_arrays():
    gru = L.StatefulGRU(3, 2)
    h = Variable(numpy.ones((1, 2), numpy.float32))
    gru.set_state(h)
    assert gru.h is h and isinstance(gru.h.data, numpy.ndarray)
    with pytest.raises(TypeError, match="Variable"):
        gru.set_state(numpy.ones((1, 2), numpy.float32))


@pytest.mark.parametrize("op", ["add", "radd", "sub", "rsub", "mul", "div", "rdiv", "pow"])
@pytest.mark.parametrize("var_on_gpu", [True, False])
@pytest.mark.gpu
@requires_gpu
def test_constants_of_the_other_array_module_raise_type_error(op, var_on_gpu):
    import cupy

    x = numpy.array([1.0, 2.0], numpy.float32)
    c = numpy.array([3.0, 4.0], numpy.float32)
    x, c = (cupy.asarray(x), c) if var_on_gpu else (x, cupy.asarray(c))
    fn = {
        "add": lambda v: v + c, "radd": lambda v: c + v, "sub": lambda v: v - c,
        "rsub": lambda v: c - v, "mul": lambda v: v * c, "div": lambda v: v / c,
        "rdiv": lambda v: c / v, "pow": lambda v: v ** c,
    }[op]
    with pytest.raises(TypeError, match="cannot be mixed"):
        fn(Variable(x))
    # The same module on both sides is fine.
    same = cupy.asarray(c) if var_on_gpu else cupy.asnumpy(c)
    y = {"add": lambda v: v + same, "pow": lambda v: v ** same}.get(op, lambda v: v * same)(Variable(x))
    assert cuda.get_array_module(y.data) is cuda.get_array_module(x)


@pytest.mark.gpu
@requires_gpu
def test_labels_on_the_gpu_are_checked_in_debug_mode():
    import cupy

    x = cupy.zeros((2, 3), numpy.float32)
    t = cupy.asarray(numpy.array([3, 0], numpy.int32))
    before = chainer.is_debug()
    chainer.set_debug(True)
    try:
        with pytest.raises(ValueError, match=r"\[0, 3\)"):
            F.softmax_cross_entropy(Variable(x), Variable(t))
        F.softmax_cross_entropy(Variable(x), Variable(cupy.asarray(numpy.array([2, -1], numpy.int32))))
    finally:
        chainer.set_debug(before)


@pytest.mark.gpu
@requires_gpu
def test_stateful_gru_moves_the_state_to_the_links_device():
    import cupy

    gru = L.StatefulGRU(3, 2).to_gpu()
    gru.set_state(Variable(numpy.ones((1, 2), numpy.float32)))
    assert isinstance(gru.h.data, cupy.ndarray)
    gru.to_cpu()
    gru.set_state(Variable(cupy.ones((1, 2), numpy.float32)))
    assert isinstance(gru.h.data, numpy.ndarray)
    y = gru(Variable(numpy.ones((1, 3), numpy.float32)))
    assert y.data.shape == (1, 2)


@pytest.mark.gpu
@requires_gpu
def test_empty_cupy_arrays_have_no_device_and_the_tables_travel():
    import cupy

    assert cuda.get_device(cupy.zeros((0, 10), numpy.float32)) is cuda.DummyDevice
    assert cuda.get_device(cupy.zeros((0, 10)), cupy.zeros(1)) == cupy.cuda.Device(0)
    link = L.BinaryHierarchicalSoftmax(3, TREE)
    begins = link._func.begins.copy()
    link.to_gpu()
    assert isinstance(link._func.begins, cupy.ndarray)
    link.to_cpu()
    assert isinstance(link._func.begins, numpy.ndarray)
    numpy.testing.assert_array_equal(link._func.begins, begins)
