"""Links with parameters (chainer.links)."""
from .connection.linear import Linear
from .model.classifier import Classifier

__all__ = ["Linear", "Classifier"]
