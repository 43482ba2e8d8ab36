"""Differentiable functions on Variables (chainer.functions): the lowercase wrappers and their classes."""
from .activation.leaky_relu import LeakyReLU, leaky_relu
from .activation.log_softmax import LogSoftmax, log_softmax
from .activation.relu import ReLU, relu
from .activation.sigmoid import Sigmoid, sigmoid
from .activation.softmax import Softmax, softmax
from .activation.tanh import Tanh, tanh
from .connection.linear import LinearFunction, linear
from .evaluation.accuracy import Accuracy, accuracy
from .loss.mean_squared_error import MeanSquaredError, mean_squared_error
from .loss.softmax_cross_entropy import SoftmaxCrossEntropy, softmax_cross_entropy
from .math.exponential import Exp, Log, exp, log
from .math.identity import Identity, identity
from .math.matmul import MatMul, matmul
from .math.sum import Sum, sum  # noqa: A004 - chainer's name
from .math.trigonometric import Cos, Sin, cos, sin

# Parameterised "functions" became links in Chainer 1.5; the old names stay here for old code.
from ..links.connection.linear import Linear  # noqa: E402

__all__ = [
    "LeakyReLU", "leaky_relu", "LogSoftmax", "log_softmax", "ReLU", "relu", "Sigmoid",
    "sigmoid", "Softmax", "softmax", "Tanh", "tanh", "LinearFunction", "linear", "Accuracy",
    "accuracy", "MeanSquaredError", "mean_squared_error", "SoftmaxCrossEntropy",
    "softmax_cross_entropy", "Exp", "Log", "exp", "log", "Identity", "identity", "MatMul",
    "matmul", "Sum", "sum", "Cos", "Sin", "cos", "sin", "Linear",
]
