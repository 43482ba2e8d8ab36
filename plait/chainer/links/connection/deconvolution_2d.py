"""Deconvolution2D: a 2-D transposed convolution layer holding W (c_I, c_O, k_H, k_W) and b (c_O,)."""
from typing import Any, Optional

import numpy

from ....backends._conv import as_nd_tuple
from ... import link
from ...functions.connection import deconvolution_2d as _deconv
from . import _weights as _w


class Deconvolution2D(link.Link):
    """2-D deconvolution layer. (n, in_channels, h, w) -> (n, out_channels, h_O, w_O)

    W is drawn from N(0, wscale * sqrt(1 / (in_channels * k_H * k_W))) unless initialW is given;
    b starts at `bias` unless initial_bias is given; nobias=True drops b. outsize fixes
    (h_O, w_O) where the stride leaves it ambiguous. With in_channels=None, W is created on the
    first call from the input's channel count.
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
        outsize: Any = None,
        use_cudnn: bool = True,
        initialW: Any = None,
        initial_bias: Any = None,
    ) -> None:
        super().__init__()
        _w.check_positive("Deconvolution2D", "in_channels", in_channels, allow_none=True)
        _w.check_positive("Deconvolution2D", "out_channels", out_channels)
        self.ksize = as_nd_tuple(ksize, 2, "ksize", "Deconvolution2D")
        self.stride = stride
        self.pad = pad
        self.outsize = outsize
        self.use_cudnn = use_cudnn
        self.out_channels = int(out_channels)
        self._wscale = wscale
        self._initialW = initialW
        if in_channels is None:
            self.W = None
        else:
            self._initialize_params(int(in_channels))
        _w.init_bias(self, "Deconvolution2D", self.out_channels, nobias, bias, initial_bias)

    def _initialize_params(self, in_channels: int) -> None:
        # W is (c_I, c_O, k_H, k_W); its fan-in is counted over the input side, as in Chainer.
        _w.init_weight(self, "Deconvolution2D", "W", (in_channels, self.out_channels) + self.ksize,
                       in_channels * self.ksize[0] * self.ksize[1], self._wscale, self._initialW)

    def __call__(self, x: Any) -> Any:
        """Apply the deconvolution to x of shape (n, in_channels, h, w)."""
        if self.W is None:
            data = _w.input_array(x)
            self._initialize_params(int(data.shape[1]))
        return _deconv.deconvolution_2d(x, self.W, self.b, self.stride, self.pad, self.outsize, self.use_cudnn)
