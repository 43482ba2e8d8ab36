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
    "local_response_normalization",
]


def test_every_exported_name_resolves():
    missing = [name for name in F.__all__ if not hasattr(F, name)]
    assert not missing


def test_documented_functions_are_exported_and_callable():
    for name in DOCUMENTED:
        assert name in F.__all__, name
        assert callable(getattr(F, name)), name
