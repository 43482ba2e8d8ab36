"""The old home of CaffeFunction (chainer.functions.caffe), kept for old code."""
from ...links.caffe import caffe_function
from ...links.caffe.caffe_function import CaffeFunction

__all__ = ["CaffeFunction", "caffe_function"]
