"""Links with parameters (chainer.links)."""
from .activation import maxout, prelu
from .connection import (
    bilinear, convolution_2d, deconvolution_2d, embed_id, gru, inception, inceptionbn, linear,
    lstm, mlp_convolution_2d, parameter,
)
from .loss import hierarchical_softmax, negative_sampling
from .model import classifier
from .normalization import batch_normalization
from . import caffe  # noqa: F401 - chainer.links.caffe (unavailable on Python 3, as in 1.7.2)

from .activation.maxout import Maxout
from .activation.prelu import PReLU
from .connection.bilinear import Bilinear
from .connection.convolution_2d import Convolution2D
from .connection.deconvolution_2d import Deconvolution2D
from .connection.embed_id import EmbedID
from .connection.gru import GRU, StatefulGRU
from .connection.inception import Inception
from .connection.inceptionbn import InceptionBN
from .connection.linear import Linear
from .connection.lstm import LSTM
from .connection.mlp_convolution_2d import MLPConvolution2D
from .connection.parameter import Parameter
from .loss.hierarchical_softmax import BinaryHierarchicalSoftmax
from .loss.negative_sampling import NegativeSampling
from .model.classifier import Classifier
from .normalization.batch_normalization import BatchNormalization

__all__ = [
    "Linear", "Classifier", "PReLU", "Bilinear", "EmbedID", "GRU", "StatefulGRU", "LSTM", "Maxout",
    "Parameter", "BatchNormalization", "Convolution2D", "Deconvolution2D",
    "Inception", "InceptionBN", "MLPConvolution2D", "BinaryHierarchicalSoftmax", "NegativeSampling",
]
