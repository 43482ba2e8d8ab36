"""Convolution2D: a 2-D convolution layer holding W (c_O, c_I, k_H, k_W) and b (c_O,)."""
from typing import Any, Optional

import numpy

from ....backends._conv import as_nd_tuple
from ... import link
from ...functions.connection import convolution_2d as _conv
from . import _weights as _w


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
        _w.check_positive("Convolution2D", "in_channels", in_channels, allow_none=True)
        _w.check_positive("Convolution2D", "out_channels", out_channels)
        self.ksize = as_nd_tuple(ksize, 2, "ksize", "Convolution2D")
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
        _w.init_bias(self, "Convolution2D", self.out_channels, nobias, bias, initial_bias)

    def _initialize_params(self, in_channels: int) -> None:
        _w.init_weight(self, "Convolution2D", "W", (self.out_channels, in_channels) + self.ksize,
                       in_channels * self.ksize[0] * self.ksize[1], self._wscale, self._initialW)

    def __call__(self, x: Any) -> Any:
        """Apply the convolution to x of shape (n, in_channels, h, w)."""
        if self.W is None:
            data = _w.input_array(x)
            self._initialize_params(int(data.shape[1]))
        return _conv.convolution_2d(x, self.W, self.b, self.stride, self.pad, self.use_cudnn)
