"""Chainer 1.7.2 modules and behaviours that plait.chainer mirrors: utils.conv / utils.array,
det / batch_det, binary_accuracy, the Caffe stub, the HDF5 availability flag and the helpers
that 1.7.2 code and tests reach for (TreeParser, DotNode, logsumexp, fixed negative samples)."""
import copy
import warnings

import numpy
import pytest

import plait.chainer as chainer
import plait.chainer.functions as F
import plait.chainer.links as L
from plait.chainer import Variable, cuda, gradient_check
from plait.chainer.utils import array as uarray
from plait.chainer.utils import conv


def _rng(seed=0):
    return numpy.random.RandomState(seed)


# ------------------------------------------------------------------ utils.conv / utils.array

@pytest.mark.parametrize("size, k, s, p", [(10, 4, 3, 2), (10, 4, 4, 2), (7, 3, 1, 0), (5, 5, 2, 1)])
def test_conv_outsize_and_its_inverse(size, k, s, p):
    out = conv.get_conv_outsize(size, k, s, p)
    assert (out - 1) * s + k <= size + 2 * p < out * s + k
    cover = conv.get_conv_outsize(size, k, s, p, cover_all=True)
    assert (cover - 2) * s + k < size + 2 * p <= (cover - 1) * s + k
    assert conv.get_conv_outsize(conv.get_deconv_outsize(out, k, s, p), k, s, p) == out


@pytest.mark.parametrize("kh, kw, sy, sx, ph, pw", [(1, 1, 1, 1, 0, 0), (3, 2, 1, 2, 1, 0), (2, 3, 2, 1, 0, 1)])
def test_im2col_reads_each_window_and_pads_with_pval(kh, kw, sy, sx, ph, pw):
    img = _rng().uniform(-1, 1, (2, 3, 5, 6)).astype(numpy.float32)
    col = conv.im2col_cpu(img, kh, kw, sy, sx, ph, pw, pval=-7)
    oh, ow = conv.get_conv_outsize(5, kh, sy, ph), conv.get_conv_outsize(6, kw, sx, pw)
    assert col.shape == (2, 3, kh, kw, oh, ow) and col.dtype == numpy.float32
    padded = numpy.pad(img, ((0, 0), (0, 0), (ph, ph + kh), (pw, pw + kw)), constant_values=-7)
    for dy in range(kh):
        for dx in range(kw):
            expected = padded[:, :, dy:dy + sy * oh:sy, dx:dx + sx * ow:sx]
            numpy.testing.assert_array_equal(col[:, :, dy, dx], expected)


def test_col2im_is_the_adjoint_of_im2col():
    rng = _rng(1)
    img = rng.normal(size=(2, 2, 6, 5))
    args = (3, 2, 2, 1, 1, 1)  # kh, kw, sy, sx, ph, pw
    col = conv.im2col_cpu(img, *args)
    other = rng.normal(size=col.shape)
    back = conv.col2im_cpu(other, 2, 1, 1, 1, 6, 5)
    assert back.shape == img.shape
    # <im2col(img), other> == <img, col2im(other)>
    numpy.testing.assert_allclose((col * other).sum(), (img * back).sum(), rtol=1e-12)


def test_conv_helpers_reject_wrong_ranks_and_need_cupy_on_gpu():
    with pytest.raises(ValueError, match="4-d"):
        conv.im2col_cpu(numpy.zeros((3, 4, 4)), 2, 2, 1, 1, 0, 0)
    with pytest.raises(ValueError, match="6-d"):
        conv.col2im_cpu(numpy.zeros((1, 1, 2, 2)), 1, 1, 0, 0, 3, 3)
    if not cuda.available:
        with pytest.raises(RuntimeError, match="CuPy is not available"):
            conv.im2col_gpu(numpy.zeros((1, 1, 3, 3)), 2, 2, 1, 1, 0, 0)


def test_array_helpers():
    x = numpy.arange(24).reshape(2, 3, 4)
    assert uarray.as_vec(x).shape == (24,)
    assert uarray.as_mat(x).shape == (2, 12)
    e = uarray.empty_like(x)
    assert e.shape == x.shape and e.dtype == x.dtype and isinstance(e, numpy.ndarray)


def test_walker_alias_module_path():
    from plait.chainer.utils import walker_alias

    assert walker_alias.WalkerAlias is chainer.utils.WalkerAlias
    draws = walker_alias.WalkerAlias([0.0, 1.0]).sample((5,))
    assert draws.dtype == numpy.int32 and (draws == 1).all()


# ------------------------------------------------------------------ det / batch_det

def test_det_values_and_shapes():
    a = _rng(2).uniform(0.5, 1, (4, 3, 3)).astype(numpy.float32)
    y = F.batch_det(a)
    assert y.data.shape == (4,) and y.data.dtype == numpy.float32
    numpy.testing.assert_allclose(y.data, numpy.linalg.det(a), rtol=1e-5)
    one = F.det(Variable(a[0]))
    assert one.data.shape == () and one.data.dtype == numpy.float32
    numpy.testing.assert_allclose(one.data, numpy.linalg.det(a[0]), rtol=1e-5)
    assert F.BatchDet().label == "det"


@pytest.mark.parametrize("fn, shape, gy_shape", [(F.batch_det, (3, 4, 4), (3,)), (F.det, (3, 3), ())])
def test_det_gradient(fn, shape, gy_shape):
    rng = _rng(3)
    x = rng.uniform(0.5, 1, shape) + 2 * numpy.eye(shape[-1])
    gradient_check.check_backward(fn, x, rng.uniform(-1, 1, gy_shape), eps=1e-6, rtol=1e-6)


def test_det_of_a_singular_matrix_is_zero_but_has_no_gradient():
    x = Variable(numpy.zeros((2, 2, 2), numpy.float32))
    y = F.batch_det(x)
    numpy.testing.assert_array_equal(y.data, [0, 0])
    y.grad = numpy.ones(2, numpy.float32)
    with pytest.raises(ValueError, match="singular"):
        y.backward()


def test_det_type_checks():
    with pytest.raises(chainer.utils.type_check.InvalidType, match="ndim == 3"):
        F.batch_det(numpy.zeros((2, 2), numpy.float32))
    with pytest.raises(chainer.utils.type_check.InvalidType, match=r"shape\[-1\] == in_types\[0\].shape\[-2\]"):
        F.batch_det(numpy.zeros((1, 2, 3), numpy.float32))


# ------------------------------------------------------------------ binary_accuracy

def test_binary_accuracy_counts_signs_and_skips_ignored_labels():
    y = numpy.array([[0.5, -1.0], [0.0, -0.1]], numpy.float32)
    t = numpy.array([[1, 1], [1, -1]], numpy.int32)
    acc = F.binary_accuracy(y, t)
    assert acc.data.dtype == numpy.float32 and acc.data.shape == ()
    numpy.testing.assert_allclose(acc.data, 2 / 3)
    none = F.binary_accuracy(y, numpy.full((2, 2), -1, numpy.int32))
    assert float(none.data) == 0.0
    with pytest.raises(chainer.utils.type_check.InvalidType):
        F.binary_accuracy(y, t[:1])
    with pytest.raises(chainer.utils.type_check.InvalidType):
        F.binary_accuracy(y, t.astype(numpy.float32))


# ------------------------------------------------------------------ Caffe stub, HDF5 flag, cuda

def test_caffe_function_is_unavailable_on_python_3_as_in_chainer():
    assert L.caffe.caffe_function.available is False
    with pytest.raises(RuntimeError, match="not supported on Python 3"):
        L.caffe.CaffeFunction("model.caffemodel")
    from plait.chainer.functions import caffe

    assert caffe.CaffeFunction is L.caffe.CaffeFunction


def test_hdf5_availability_flag_and_its_error(monkeypatch):
    from plait.chainer.serializers import hdf5

    try:
        import h5py  # noqa: F401
        installed = True
    except ImportError:
        installed = False
    assert hdf5._available is installed
    monkeypatch.setattr(hdf5, "_available", False)
    with pytest.raises(RuntimeError, match="optional 'h5py' package"):
        hdf5._check_available()
    with pytest.raises(RuntimeError):
        hdf5.HDF5Serializer(None)


def test_cuda_init_is_deprecated_and_to_cpu_takes_arrays_only():
    if not cuda.available:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with pytest.raises(RuntimeError):
                cuda.init()
    with pytest.raises(TypeError, match="variable.data"):
        cuda.to_cpu(Variable(numpy.zeros(2)))
    with pytest.raises(TypeError):
        cuda.to_cpu([1, 2])


# ------------------------------------------------------------------ helpers of 1.7.2's modules

def test_tree_parser_numbers_internal_nodes_in_preorder():
    from plait.chainer.links.loss.hierarchical_softmax import TreeParser

    parser = TreeParser()
    parser.parse(((0, 1), 2))
    assert parser.size() == 2
    numpy.testing.assert_array_equal(parser.get_paths()[1], [0, 1])
    numpy.testing.assert_array_equal(parser.get_codes()[1], [1.0, -1.0])
    numpy.testing.assert_array_equal(parser.get_codes()[2], [-1.0])
    assert parser.get_paths()[2].dtype == numpy.int32


def test_dot_node_labels():
    from plait.chainer.computational_graph import DotNode

    x = Variable(numpy.zeros((2, 3), numpy.float32))
    y = F.relu(x)
    assert DotNode(x).label == f'{id(x)} [label="(2, 3), float32",shape="oval"];'
    assert DotNode(y.creator).label == f'{id(y.creator)} [label="ReLU",shape="box"];'
    with pytest.raises(TypeError):
        DotNode(3)


def test_logsumexp_helpers():
    from plait.chainer.functions.activation.log_softmax import logsumexp
    from plait.chainer.functions.loss.softmax_cross_entropy import softmax_log

    x = _rng(4).normal(size=(3, 5, 2))
    expected = numpy.log(numpy.exp(x).sum(axis=1, keepdims=True))
    numpy.testing.assert_allclose(logsumexp(x), expected, rtol=1e-12)
    numpy.testing.assert_allclose(softmax_log(x, True), x - expected, rtol=1e-12)


def test_negative_sampling_keeps_and_reuses_its_samples():
    from plait.chainer.functions.loss.negative_sampling import NegativeSamplingFunction

    link = L.NegativeSampling(3, [10, 5, 2, 5, 2], 2)
    x = _rng(5).uniform(-1, 1, (2, 3)).astype(numpy.float32)
    t = numpy.array([0, 2], numpy.int32)
    y = link(Variable(x), Variable(t))
    samples = y.creator.samples
    assert samples.shape == (2, 3) and (samples[:, 0] == t).all()
    NegativeSamplingFunction.samples = samples
    try:
        again = link(Variable(x), Variable(t))
        assert again.creator.samples is samples
        numpy.testing.assert_array_equal(again.data, y.data)
    finally:
        del NegativeSamplingFunction.samples


def test_spatial_pyramid_pooling_takes_the_shape_without_batch():
    x = _rng(6).uniform(size=(2, 3, 9, 8)).astype(numpy.float32)
    func = F.SpatialPyramidPooling2D(x.shape[1:], 2, F.MaxPooling2D)
    y = func(x)
    assert y.data.shape == (2, 3 * 5, 1, 1)
    numpy.testing.assert_array_equal(y.data, F.spatial_pyramid_pooling_2d(x, 2, F.MaxPooling2D).data)


def test_ctc_function_takes_lengths_labels_then_steps():
    rng = _rng(7)
    xs = [rng.normal(size=(2, 3)).astype(numpy.float32) for _ in range(4)]
    t = numpy.array([[0, 1], [1, 0]], numpy.int32)
    lengths = numpy.full(2, 4, numpy.int32), numpy.full(2, 2, numpy.int32)
    direct = F.ConnectionistTemporalClassification(2)(*lengths, t, *xs)
    numpy.testing.assert_array_equal(direct.data, F.connectionist_temporal_classification(xs, t, 2).data)


# ------------------------------------------------------------------ Variable, FunctionSet, checks

def test_variable_text_forms_and_undefined_comparisons():
    v = Variable(numpy.ones((2, 2), numpy.float32), name="v")
    assert repr(v) == "<variable v>" and str(v) == "v"
    anon = Variable(numpy.ones(1, numpy.float32))
    assert repr(anon) == f"<variable at 0x{id(anon):x}>" and str(anon) == f"<var@{id(anon):x}>"
    lines = v.debug_print().splitlines()
    assert lines[0] == "<variable v>" and lines[3] == "- backend: <class 'numpy.ndarray'>"
    assert lines[4] == "- shape: (2, 2)" and lines[-1] == "- grad: None"
    for op in ("__lt__", "__le__", "__eq__", "__ne__", "__gt__", "__ge__"):
        with pytest.raises(NotImplementedError):
            getattr(v, op)(anon)
    assert +v is v and len({v, anon}) == 2


def test_function_set_setters_assign_and_check_counts():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        fs = chainer.FunctionSet(a=L.Linear(2, 3))
    W = numpy.zeros((3, 2), numpy.float32)
    b = numpy.ones(3, numpy.float32)
    fs.parameters = (W, b)
    assert fs.a.W.data is W and fs.a.b.data is b
    fs.gradients = (W.copy(), b.copy())
    numpy.testing.assert_array_equal(fs.a.b.grad, b)
    for values in ((W,), (W, b, b)):
        with pytest.raises(ValueError, match="arrays for 2 parameters"):
            fs.parameters = values
        with pytest.raises(AssertionError):
            fs.gradients = values


def test_numerical_grad_on_views_and_scalar_output_grads():
    base = numpy.arange(12, dtype=numpy.float64).reshape(3, 4)
    view = base[:, ::2]  # not contiguous: perturbed in place through the view
    gx, = gradient_check.numerical_grad(lambda: (view * view,), (view,), (1,))
    numpy.testing.assert_allclose(gx, 2 * view, rtol=1e-6)
    with pytest.raises(ValueError, match="eps must be > 0"):
        gradient_check.numerical_grad(lambda: (view,), (view,), (1,), eps=0)
    gradient_check.assert_allclose(numpy.ones((2, 3)), 1)
    with pytest.raises(AssertionError, match="shapes differ"):
        gradient_check.assert_allclose(numpy.ones(2), numpy.ones(3))


def test_scalar_results_of_zero_dim_arithmetic_become_arrays():
    class Halve(chainer.Function):
        def forward(self, inputs):
            return inputs[0] * numpy.float32(0.5),  # a numpy scalar for a 0-d input

        def backward(self, inputs, grad_outputs):
            return grad_outputs[0] * numpy.float32(0.5),

    x = Variable(numpy.array(3.0, numpy.float32))
    y = Halve()(x)
    assert isinstance(y.data, numpy.ndarray) and y.data.shape == ()
    y.backward()
    assert isinstance(x.grad, numpy.ndarray) and float(x.grad) == 0.5


def test_link_copy_shares_data_and_starts_without_grads():
    link = L.Linear(2, 3)
    twin = link.copy()
    assert twin.W is not link.W and twin.W.data is link.W.data and twin.W.grad is None
    assert copy.copy(link.W).name == "W"
