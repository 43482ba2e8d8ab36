"""Deconvolution2D: a 2-D transposed convolution layer holding W (c_I, c_O, k_H, k_W) and b (c_O,)."""
import math
from typing import Any, Optional

import numpy

from ... import link, variable
from ...functions.connection import deconvolution_2d as _deconv
from .convolution_2d import _check_positive, _fill, _pair


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
        _check_positive("Deconvolution2D", "in_channels", in_channels, allow_none=True)
        _check_positive("Deconvolution2D", "out_channels", out_channels)
        kh, kw = _pair(ksize)
        _check_positive("Deconvolution2D", "ksize", kh)
        _check_positive("Deconvolution2D", "ksize", kw)
        self.ksize = (int(kh), int(kw))
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
        if nobias:
            self.b = None
        else:
            self.add_param("b", self.out_channels)
            if initial_bias is None:
                self.b.data[...] = bias
            else:
                _fill("Deconvolution2D", self.b, "b", initial_bias)

    def _initialize_params(self, in_channels: int) -> None:
        self.__dict__.pop("W", None)
        shape = (in_channels, self.out_channels) + self.ksize
        self.add_param("W", shape)
        if self._initialW is None:
            std = self._wscale * math.sqrt(1.0 / (in_channels * self.ksize[0] * self.ksize[1]))
            W = numpy.random.normal(0, std, shape)
            self.W.data[...] = W if self._cpu else self.xp.asarray(W)
        else:
            _fill("Deconvolution2D", self.W, "W", self._initialW)

    def __call__(self, x: Any) -> Any:
        """Apply the deconvolution to x of shape (n, in_channels, h, w)."""
        if self.W is None:
            data = x.data if isinstance(x, variable.Variable) else x
            self._initialize_params(int(data.shape[1]))
        return _deconv.deconvolution_2d(x, self.W, self.b, self.stride, self.pad, self.outsize, self.use_cudnn)
