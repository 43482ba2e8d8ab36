"""Differentiable functions on Variables (chainer.functions): the lowercase wrappers and their classes."""
from .activation.leaky_relu import LeakyReLU, leaky_relu
from .activation.log_softmax import LogSoftmax, log_softmax
from .activation.relu import ReLU, relu
from .activation.sigmoid import Sigmoid, sigmoid
from .activation.softmax import Softmax, softmax
from .activation.tanh import Tanh, tanh
from .connection.bilinear import BilinearFunction, bilinear
from .connection.convolution_2d import Convolution2DFunction, convolution_2d
from .connection.deconvolution_2d import Deconvolution2DFunction, deconvolution_2d
from .connection.embed_id import EmbedIDFunction, embed_id
from .connection.linear import LinearFunction, linear
from .evaluation.accuracy import Accuracy, accuracy
from .evaluation.binary_accuracy import BinaryAccuracy, binary_accuracy
from .loss.mean_squared_error import MeanSquaredError, mean_squared_error
from .loss.softmax_cross_entropy import SoftmaxCrossEntropy, softmax_cross_entropy
from .math.exponential import Exp, Log, exp, log
from .math.identity import Identity, identity
from .math.matmul import MatMul, matmul
from .math.sum import Sum, sum  # noqa: A004 - chainer's name
from .math.trigonometric import Cos, Sin, cos, sin
from .activation.clipped_relu import ClippedReLU, clipped_relu
from .activation.elu import ELU, elu
from .activation.lstm import LSTM, lstm
from .activation.maxout import maxout
from .activation.prelu import prelu
from .activation.slstm import SLSTM, slstm
from .activation.softplus import Softplus, softplus
from .array.broadcast import Broadcast, BroadcastTo, broadcast, broadcast_to
from .array.concat import Concat, concat
from .array.copy import Copy, copy
from .array.expand_dims import ExpandDims, expand_dims
from .array.reshape import Reshape, reshape
from .array.select_item import SelectItem, select_item
from .array.split_axis import SplitAxis, split_axis
from .array.swapaxes import Swapaxes, swapaxes
from .array.transpose import Transpose, transpose
from .array.where import Where, where
from .loss.contrastive import Contrastive, contrastive
from .loss.cross_covariance import CrossCovariance, cross_covariance
from .loss.hinge import Hinge, hinge
from .loss.sigmoid_cross_entropy import SigmoidCrossEntropy, sigmoid_cross_entropy
from .loss.vae import bernoulli_nll, gaussian_kl_divergence, gaussian_nll
from .loss.ctc import ConnectionistTemporalClassification, connectionist_temporal_classification
from .loss.hierarchical_softmax import BinaryHierarchicalSoftmaxFunction
from .loss.negative_sampling import NegativeSamplingFunction, negative_sampling
from .math.batch_l2_norm_squared import BatchL2NormSquared, batch_l2_norm_squared
from .math.batch_matmul import BatchMatMul, batch_matmul
from .math.inv import BatchInv, Inv, batch_inv, inv
from .math.det import BatchDet, batch_det, det
from .math.minmax import Max, Min, max, min  # noqa: A004 - chainer's names
from .noise.dropout import Dropout, dropout
from .pooling.average_pooling_2d import AveragePooling2D, average_pooling_2d
from .pooling.max_pooling_2d import MaxPooling2D, max_pooling_2d
from .pooling.spatial_pyramid_pooling_2d import SpatialPyramidPooling2D, spatial_pyramid_pooling_2d
from .pooling.unpooling_2d import Unpooling2D, unpooling_2d
from .noise.gaussian import Gaussian, gaussian
from .normalization.batch_normalization import batch_normalization, fixed_batch_normalization
from .normalization.local_response_normalization import LocalResponseNormalization, local_response_normalization

# Parameterised "functions" became links in Chainer 1.5; the old names stay here for old code.
from ..links.activation.prelu import PReLU  # noqa: E402
from ..links.connection.bilinear import Bilinear  # noqa: E402
from ..links.connection.convolution_2d import Convolution2D  # noqa: E402
from ..links.connection.deconvolution_2d import Deconvolution2D  # noqa: E402
from ..links.connection.embed_id import EmbedID  # noqa: E402
from ..links.connection.linear import Linear  # noqa: E402
from ..links.connection.parameter import Parameter  # noqa: E402
from ..links.normalization.batch_normalization import BatchNormalization  # noqa: E402
from ..links.loss.hierarchical_softmax import BinaryHierarchicalSoftmax  # noqa: E402
from ..links.loss.negative_sampling import NegativeSampling  # noqa: E402
from ..links.connection.inception import Inception  # noqa: E402
from ..links.connection.inceptionbn import InceptionBN  # noqa: E402

# Modules that Chainer 1.7.2 leaves reachable from here (`from chainer.functions import
# basic_math`, `F.vae.gaussian_nll`); the others are shadowed by their function of the same name.
from .loss import ctc, vae  # noqa: E402
from .math import basic_math, det as _det_module, exponential, minmax, trigonometric  # noqa: E402
from ..links.activation import prelu as links_prelu  # noqa: E402
from ..links.connection import bilinear as links_bilinear  # noqa: E402
from ..links.connection import convolution_2d as links_convolution_2d  # noqa: E402
from ..links.connection import embed_id as links_embed_id  # noqa: E402
from ..links.connection import inception, inceptionbn, parameter  # noqa: E402
from ..links.connection import linear as links_linear  # noqa: E402
from ..links.loss import hierarchical_softmax  # noqa: E402
from ..links.loss import negative_sampling as links_negative_sampling  # noqa: E402
from ..links.normalization import batch_normalization as links_batch_normalization  # noqa: E402

__all__ = [
    "LeakyReLU", "leaky_relu", "LogSoftmax", "log_softmax", "ReLU", "relu", "Sigmoid",
    "sigmoid", "Softmax", "softmax", "Tanh", "tanh", "LinearFunction", "linear", "Accuracy",
    "accuracy", "MeanSquaredError", "mean_squared_error", "SoftmaxCrossEntropy",
    "softmax_cross_entropy", "Exp", "Log", "exp", "log", "Identity", "identity", "MatMul",
    "matmul", "Sum", "sum", "Cos", "Sin", "cos", "sin", "Linear",
    "BilinearFunction", "bilinear", "EmbedIDFunction", "embed_id",
    "PReLU", "Bilinear", "EmbedID", "Parameter", "BatchNormalization",
    "Convolution2DFunction", "convolution_2d", "Deconvolution2DFunction", "deconvolution_2d",
    "AveragePooling2D", "average_pooling_2d", "MaxPooling2D", "max_pooling_2d",
    "SpatialPyramidPooling2D", "spatial_pyramid_pooling_2d", "Unpooling2D", "unpooling_2d",
    "Convolution2D", "Deconvolution2D",
    "ClippedReLU", "clipped_relu", "ELU", "elu", "LSTM", "lstm", "maxout", "prelu", "SLSTM", "slstm",
    "Softplus", "softplus",
    "Broadcast", "BroadcastTo", "broadcast", "broadcast_to", "Concat", "concat", "Copy", "copy",
    "ExpandDims", "expand_dims", "Reshape", "reshape", "SelectItem", "select_item", "SplitAxis",
    "split_axis", "Swapaxes", "swapaxes", "Transpose", "transpose", "Where", "where",
    "Contrastive", "contrastive", "CrossCovariance", "cross_covariance", "Hinge", "hinge",
    "SigmoidCrossEntropy", "sigmoid_cross_entropy", "bernoulli_nll", "gaussian_kl_divergence",
    "gaussian_nll",
    "BatchL2NormSquared", "batch_l2_norm_squared", "BatchMatMul", "batch_matmul", "BatchInv", "Inv",
    "batch_inv", "inv", "Max", "Min", "max", "min",
    "Dropout", "dropout", "Gaussian", "gaussian",
    "batch_normalization", "fixed_batch_normalization", "LocalResponseNormalization",
    "local_response_normalization",
    "ConnectionistTemporalClassification", "connectionist_temporal_classification",
    "BinaryHierarchicalSoftmaxFunction", "NegativeSamplingFunction", "negative_sampling",
    "BinaryHierarchicalSoftmax", "NegativeSampling", "BatchDet", "batch_det", "det",
    "BinaryAccuracy", "binary_accuracy", "Inception", "InceptionBN",
]
