"""Links with parameters (chainer.links)."""
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
from .connection.maxout import Maxout
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
