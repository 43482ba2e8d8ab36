"""Convolution2D: a 2-D convolution layer holding W (c_O, c_I, k_H, k_W) and b (c_O,)."""
import math
from typing import Any, Optional

import numpy

from ... import link, variable
from ...functions.connection import convolution_2d as _conv


def _pair(v: Any) -> tuple:
    return tuple(v) if isinstance(v, (list, tuple)) else (v, v)


def _check_positive(where: str, name: str, value: Any, allow_none: bool = False) -> None:
    if allow_none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, numpy.integer)) or value <= 0:
        kind = "a positive int or None" if allow_none else "a positive int"
        raise ValueError(f"{where}: {name} must be {kind}, got {value!r}.")


def _fill(where: str, param: Any, name: str, value: Any) -> None:
    value = numpy.asarray(value) if isinstance(value, (list, tuple)) else value
    if hasattr(value, "shape") and tuple(value.shape) != param.data.shape:
        raise ValueError(
            f"{where}: initial value for {name} has shape {tuple(value.shape)}, expected {param.data.shape}."
        )
    param.data[...] = value


class Convolution2D(link.Link):
    """2-D convolution layer. (n, in_channels, h, w) -> (n, out_channels, h_O, w_O)

    W is drawn from N(0, wscale * sqrt(1 / (in_channels * k_H * k_W))) unless initialW is given;
    b starts at `bias` unless initial_bias is given; nobias=True drops b. With in_channels=None,
    W is created on the first call from the input's channel count.
    """

    def __init__(
        self,
        in_channels: Optional[int],
        out_channels: int,
        ksize: Any,
        stride: Any = 1,
        pad: Any = 0,
        wscale: float = 1,
        bias: float = 0,
        nobias: bool = False,
        use_cudnn: bool = True,
        initialW: Any = None,
        initial_bias: Any = None,
    ) -> None:
        super().__init__()
        _check_positive("Convolution2D", "in_channels", in_channels, allow_none=True)
        _check_positive("Convolution2D", "out_channels", out_channels)
        kh, kw = _pair(ksize)
        _check_positive("Convolution2D", "ksize", kh)
        _check_positive("Convolution2D", "ksize", kw)
        self.ksize = (int(kh), int(kw))
        self.stride = stride
        self.pad = pad
        self.use_cudnn = use_cudnn
        self.out_channels = int(out_channels)
        self._wscale = wscale
        self._initialW = initialW
        if in_channels is None:
            self.W = None
        else:
            self._initialize_params(int(in_channels))
        if nobias:
            self.b = None
        else:
            self.add_param("b", self.out_channels)
            if initial_bias is None:
                self.b.data[...] = bias
            else:
                _fill("Convolution2D", self.b, "b", initial_bias)

    def _initialize_params(self, in_channels: int) -> None:
        # W is registered in place of the None placeholder of a lazily sized layer.
        self.__dict__.pop("W", None)
        shape = (self.out_channels, in_channels) + self.ksize
        self.add_param("W", shape)
        if self._initialW is None:
            std = self._wscale * math.sqrt(1.0 / (in_channels * self.ksize[0] * self.ksize[1]))
            W = numpy.random.normal(0, std, shape)
            self.W.data[...] = W if self._cpu else self.xp.asarray(W)
        else:
            _fill("Convolution2D", self.W, "W", self._initialW)

    def __call__(self, x: Any) -> Any:
        """Apply the convolution to x of shape (n, in_channels, h, w)."""
        if self.W is None:
            data = x.data if isinstance(x, variable.Variable) else x
            self._initialize_params(int(data.shape[1]))
        return _conv.convolution_2d(x, self.W, self.b, self.stride, self.pad, self.use_cudnn)
