"""deconvolution_2d: the transpose of convolution_2d (a learnable upsampling)."""
from typing import Any

from ... import cuda, function
from ....backends._conv import as_nd_tuple
from ...utils import type_check


class Deconvolution2DFunction(function.Function):
    """x (n, c_I, h, w), W (c_I, c_O, k_H, k_W) [, b (c_O,)] -> (n, c_O, h_O, w_O)"""

    def __init__(self, stride: Any = 1, pad: Any = 0, outsize: Any = None, use_cudnn: bool = True) -> None:
        self.sy, self.sx = as_nd_tuple(stride, 2, "stride", "deconvolution_2d")
        self.ph, self.pw = as_nd_tuple(pad, 2, "pad", "deconvolution_2d", minimum=0)
        self.outh, self.outw = (None, None) if outsize is None else tuple(outsize)
        self.use_cudnn = use_cudnn

    def check_type_forward(self, in_types: Any) -> None:
        n_in = in_types.size()
        type_check.expect(2 <= n_in, n_in <= 3)
        x_type, w_type = in_types[:2]
        type_check.expect(
            x_type.dtype.kind == "f",
            w_type.dtype == x_type.dtype,
            x_type.ndim == 4,
            w_type.ndim == 4,
            x_type.shape[1] == w_type.shape[0],
        )
        if n_in.eval() == 3:
            b_type = in_types[2]
            type_check.expect(
                b_type.dtype == x_type.dtype,
                b_type.ndim == 1,
                b_type.shape[0] == w_type.shape[1],
            )

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
