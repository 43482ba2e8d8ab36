"""The fast type checks (`_types_ok`) accept exactly what the full `check_type_forward` accepts.

A fast check that let through something the full check rejects would skip a documented error;
one that rejected valid inputs would only be slow. Both directions are tested on valid inputs
and on every single-step corruption of them (a dtype, one dimension, an axis, an input).
"""
import numpy
import pytest

from plait.chainer import Function
from plait.chainer.functions.activation.relu import ReLU
from plait.chainer.functions.connection.convolution_2d import Convolution2DFunction
from plait.chainer.functions.connection.deconvolution_2d import Deconvolution2DFunction
from plait.chainer.functions.connection.linear import LinearFunction
from plait.chainer.functions.evaluation.accuracy import Accuracy
from plait.chainer.functions.loss.softmax_cross_entropy import SoftmaxCrossEntropy
from plait.chainer.functions.pooling.average_pooling_2d import AveragePooling2D
from plait.chainer.functions.pooling.max_pooling_2d import MaxPooling2D
from plait.chainer.utils import type_check

DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint8", "bool")


def _full_check_passes(func, arrays):
    try:
        func.check_type_forward(type_check.get_types(arrays, "in_types", False))
    except type_check.InvalidType:
        return False
    return True


def _corruptions(arrays):
    """Each input with another dtype, one axis longer or shorter, one axis more or less; one
    input fewer or one more."""
    yield arrays
    for i, a in enumerate(arrays):
        for dt in DTYPES:
            if dt != a.dtype:
                yield arrays[:i] + (numpy.empty(a.shape, dt),) + arrays[i + 1:]
        for ax in range(a.ndim):
            for delta in (-1, 1):
                shape = list(a.shape)
                shape[ax] = max(shape[ax] + delta, 0)
                yield arrays[:i] + (numpy.empty(shape, a.dtype),) + arrays[i + 1:]
        for shape in (a.shape + (2,), a.shape[:-1], (1,) + a.shape):
            yield arrays[:i] + (numpy.empty(shape, a.dtype),) + arrays[i + 1:]
    yield arrays[:-1]
    yield arrays + (arrays[-1],)


def _e(shape, dtype="float32"):
    return numpy.empty(shape, dtype)


VALID = {
    LinearFunction: [
        (_e((4, 3)), _e((5, 3)), _e((5,))),
        (_e((4, 3)), _e((5, 3))),
        (_e((4, 2, 3), "float64"), _e((5, 6), "float64"), _e((5,), "float64")),
        (_e((2, 3, 1, 2), "float16"), _e((1, 6), "float16")),
        (_e((0, 3)), _e((5, 3))),
    ],
    ReLU: [(_e((4, 3)),), (_e(()),), (_e((2, 0, 3), "float64"),)],
    SoftmaxCrossEntropy: [
        (_e((4, 3)), _e((4,), "int32")),
        (_e((4, 3, 2, 5), "float64"), _e((4, 2, 5), "int64")),
        (_e((0, 3)), _e((0,), "int32")),
    ],
    Accuracy: [
        (_e((4, 3)), _e((4,), "int32")),
        (_e((2, 3, 7)), _e((2, 7), "int8")),
    ],
    Convolution2DFunction: [
        (_e((2, 3, 6, 5)), _e((4, 3, 3, 2)), _e((4,))),
        (_e((2, 3, 6, 5), "float64"), _e((4, 3, 3, 2), "float64")),
        (_e((0, 1, 2, 2), "float16"), _e((2, 1, 1, 1), "float16")),
    ],
    Deconvolution2DFunction: [
        (_e((2, 3, 6, 5)), _e((3, 4, 3, 2)), _e((4,))),
        (_e((2, 3, 6, 5), "float64"), _e((3, 4, 3, 2), "float64")),
    ],
    MaxPooling2D: [(_e((2, 3, 4, 4)),), (_e((1, 1, 3, 5), "float64"),)],
    AveragePooling2D: [(_e((2, 3, 4, 4)),), (_e((0, 2, 2, 2), "float16"),)],
}
# Functions whose constructor needs arguments.
MAKE = {MaxPooling2D: lambda: MaxPooling2D(2), AveragePooling2D: lambda: AveragePooling2D(2)}


@pytest.mark.parametrize("cls", list(VALID), ids=lambda c: c.__name__)
def test_fast_check_agrees_with_the_full_check(cls):
    func = MAKE.get(cls, cls)()
    outcomes = set()
    for valid in VALID[cls]:
        assert func._types_ok(valid), [a.shape for a in valid]
        for arrays in _corruptions(valid):
            full = _full_check_passes(func, arrays)
            assert func._types_ok(arrays) == full, (
                [(a.shape, str(a.dtype)) for a in arrays], full
            )
            outcomes.add(full)
    assert outcomes == {True, False}


def test_every_fast_check_is_covered_here():
    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)

    import plait.chainer.functions  # noqa: F401  (defines them all)

    with_fast = {c for c in subclasses(Function) if "_types_ok" in c.__dict__}
    assert with_fast == set(VALID)


def test_a_subclass_with_its_own_check_is_not_let_through_by_the_parent_fast_check():
    class OnlyTwoRows(LinearFunction):
        def check_type_forward(self, in_types):
            super().check_type_forward(in_types)
            type_check.expect(in_types[0].shape[0] == 2)

    x, W = numpy.ones((3, 4), "f"), numpy.ones((5, 4), "f")
    with pytest.raises(type_check.InvalidType, match=r"in_types\[0\].shape\[0\] == 2"):
        OnlyTwoRows()(x, W)


@pytest.mark.parametrize("cls, arrays, message", [
    (LinearFunction, (_e((4, 3)), _e((5, 2))), r"prod\(in_types\[0\].shape\[1:\]\) == in_types\[1\].shape\[1\]"),
    (ReLU, (_e((2,), "int32"),), r"in_types\[0\].dtype.kind == f"),
    (SoftmaxCrossEntropy, (_e((4, 3)), _e((5,), "int32")), r"in_types\[0\].shape\[0\] == in_types\[1\].shape\[0\]"),
])
def test_rejected_inputs_still_get_the_full_message(cls, arrays, message):
    with pytest.raises(type_check.InvalidType, match="Invalid operation is performed in: " + cls.__name__) as e:
        cls()(*arrays)
    assert e.match(message)
