"""deconvolution_2d: the transpose of convolution_2d (a learnable upsampling)."""
from typing import Any

from ... import cuda, function
from ....backends._conv import as_nd_tuple
from .convolution_2d import check_filter_types, filter_types_ok


class Deconvolution2DFunction(function.Function):
    """x (n, c_I, h, w), W (c_I, c_O, k_H, k_W) [, b (c_O,)] -> (n, c_O, h_O, w_O)"""

    def __init__(self, stride: Any = 1, pad: Any = 0, outsize: Any = None, use_cudnn: bool = True) -> None:
        self.sy, self.sx = as_nd_tuple(stride, 2, "stride", "deconvolution_2d")
        self.ph, self.pw = as_nd_tuple(pad, 2, "pad", "deconvolution_2d", minimum=0)
        self.outh, self.outw = (None, None) if outsize is None else tuple(outsize)
        self.use_cudnn = use_cudnn

    def check_type_forward(self, in_types: Any) -> None:
        # W is (c_I, c_O, k_H, k_W): the transpose of convolution_2d's layout.
        check_filter_types(in_types, w_in_axis=0, w_out_axis=1)

    def _types_ok(self, in_data: tuple) -> bool:
        return filter_types_ok(in_data, w_in_axis=0, w_out_axis=1)

    def forward(self, inputs: tuple) -> tuple:
        x, W = inputs[:2]
        b = inputs[2] if len(inputs) == 3 else None
        ops = cuda._ops_for(x)
        outsize = None if self.outh is None else (self.outh, self.outw)
        y = ops.deconv_nd(x, W, b, stride=(self.sy, self.sx), pad=(self.ph, self.pw), outsize=outsize)
        return y,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, W = inputs[:2]
        ops = cuda._ops_for(x)
        gx, gW, gb = ops.backprop_deconv_nd(
            grad_outputs[0], x, W, stride=(self.sy, self.sx), pad=(self.ph, self.pw)
        )
        if len(inputs) == 3:
            return gx, gW, gb
        return gx, gW


def deconvolution_2d(
    x: Any, W: Any, b: Any = None, stride: Any = 1, pad: Any = 0, outsize: Any = None, use_cudnn: bool = True
) -> Any:
    """2-D deconvolution (transposed convolution) of x with the filters W, plus b per output channel.

    x (n, c_I, h, w), W (c_I, c_O, k_H, k_W), b (c_O,) -> (n, c_O, h_O, w_O) with
    h_O = s_Y (h - 1) + k_H - 2 p_H unless outsize = (h_O, w_O) is given.
    """
    func = Deconvolution2DFunction(stride, pad, outsize, use_cudnn)
    if b is None:
        return func(x, W)
    return func(x, W, b)
