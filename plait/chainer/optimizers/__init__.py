"""The optimizers of the Chainer face (chainer.optimizers)."""
from .ada_delta import AdaDelta
from .ada_grad import AdaGrad
from .adam import Adam
from .momentum_sgd import MomentumSGD
from .nesterov_ag import NesterovAG
from .rmsprop import RMSprop
from .rmsprop_graves import RMSpropGraves
from .sgd import SGD

__all__ = ["AdaDelta", "AdaGrad", "Adam", "MomentumSGD", "NesterovAG", "RMSprop", "RMSpropGraves", "SGD"]
