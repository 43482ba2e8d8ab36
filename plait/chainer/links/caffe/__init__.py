"""Caffe model import (chainer.links.caffe); unavailable on Python 3, as in Chainer 1.7.2."""
from . import caffe_function
from .caffe_function import CaffeFunction

__all__ = ["CaffeFunction", "caffe_function"]
