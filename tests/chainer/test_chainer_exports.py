"""chainer.functions' flat namespace: every exported name resolves, and the spec's function
entries that this layer covers are all there."""
import plait.chainer.functions as F

# Functions the 1.7.2 reference manual documents that plait.chainer provides so far.
DOCUMENTED = [
    "clipped_relu", "elu", "leaky_relu", "log_softmax", "lstm", "maxout", "prelu", "relu", "sigmoid",
    "slstm", "softmax", "softplus", "tanh", "broadcast", "broadcast_to", "concat", "copy",
    "expand_dims", "reshape", "select_item", "split_axis", "swapaxes", "transpose", "where",
    "linear", "accuracy", "bernoulli_nll", "contrastive", "cross_covariance",
    "gaussian_kl_divergence", "gaussian_nll", "hinge", "mean_squared_error",
    "sigmoid_cross_entropy", "softmax_cross_entropy", "batch_inv", "batch_l2_norm_squared",
    "batch_matmul", "cos", "exp", "identity", "inv", "log", "matmul", "max", "min", "sin", "sum",
    "dropout", "gaussian", "batch_normalization", "fixed_batch_normalization",
    "local_response_normalization", "convolution_2d", "deconvolution_2d", "max_pooling_2d",
    "average_pooling_2d", "unpooling_2d", "spatial_pyramid_pooling_2d", "embed_id", "bilinear",
    "connectionist_temporal_classification", "negative_sampling",
]


def test_every_exported_name_resolves():
    missing = [name for name in F.__all__ if not hasattr(F, name)]
    assert not missing


def test_documented_functions_are_exported_and_callable():
    for name in DOCUMENTED:
        assert name in F.__all__, name
        assert callable(getattr(F, name)), name


def test_linear_sizes_itself_from_a_raw_array():
    # A numpy array's own .data is a memoryview: the link must read the array itself.
    import numpy

    import plait.chainer.links as L

    layer = L.Linear(None, 3)
    y = layer(numpy.ones((2, 5), dtype="float32"))
    assert layer.W.data.shape == (3, 5) and y.data.shape == (2, 3)


def test_links_namespace():
    import plait.chainer.links as L

    for name in ("Linear", "Classifier", "PReLU", "Bilinear", "EmbedID", "GRU", "StatefulGRU",
                 "LSTM", "Maxout", "Parameter", "BatchNormalization", "Convolution2D",
                 "Deconvolution2D", "Inception", "InceptionBN", "MLPConvolution2D",
                 "BinaryHierarchicalSoftmax", "NegativeSampling"):
        assert hasattr(L, name), name
    # F.LSTM stays the function class; the old link names live beside it.
    assert F.LSTM is not L.LSTM
    assert F.EmbedID is L.EmbedID and F.BatchNormalization is L.BatchNormalization
