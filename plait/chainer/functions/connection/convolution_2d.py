"""convolution_2d: 2-D cross-correlation of an image batch with a bank of filters."""
from typing import Any

from ... import cuda, function
from ....backends._conv import as_nd_tuple
from ...utils import type_check
from ...variable import DeferredGrad, deferral_fits


def check_filter_types(in_types: Any, w_in_axis: int, w_out_axis: int) -> None:
    """The type checks of (de)convolution_2d: x (n, c_I, h, w), a 4-d W whose axis w_in_axis
    is c_I, and an optional b with one value per c_O (W's axis w_out_axis)."""
    n_in = in_types.size()
    type_check.expect(2 <= n_in, n_in <= 3)
    x_type, w_type = in_types[:2]
    type_check.expect(
        x_type.dtype.kind == "f",
        w_type.dtype == x_type.dtype,
        x_type.ndim == 4,
        w_type.ndim == 4,
        x_type.shape[1] == w_type.shape[w_in_axis],
    )
    if n_in.eval() == 3:
        b_type = in_types[2]
        type_check.expect(
            b_type.dtype == x_type.dtype,
            b_type.ndim == 1,
            b_type.shape[0] == w_type.shape[w_out_axis],
        )


def filter_types_ok(in_data: tuple, w_in_axis: int, w_out_axis: int) -> bool:
    """check_filter_types' conditions on the arrays themselves (no expressions to build)."""
    n = len(in_data)
    if n != 2 and n != 3:
        return False
    x, W = in_data[0], in_data[1]
    if x.dtype.kind != "f" or W.dtype != x.dtype or x.ndim != 4 or W.ndim != 4:
        return False
    if x.shape[1] != W.shape[w_in_axis]:
        return False
    if n == 3:
        b = in_data[2]
        return b.dtype == x.dtype and b.ndim == 1 and b.shape[0] == W.shape[w_out_axis]
    return True


class Convolution2DFunction(function.Function):
    """x (n, c_I, h, w), W (c_O, c_I, k_H, k_W) [, b (c_O,)] -> (n, c_O, h_O, w_O)"""

    def __init__(self, stride: Any = 1, pad: Any = 0, use_cudnn: bool = True, cover_all: bool = False) -> None:
        self.sy, self.sx = as_nd_tuple(stride, 2, "stride", "convolution_2d")
        self.ph, self.pw = as_nd_tuple(pad, 2, "pad", "convolution_2d", minimum=0)
        self.use_cudnn = use_cudnn
        self.cover_all = cover_all

    def check_type_forward(self, in_types: Any) -> None:
        check_filter_types(in_types, w_in_axis=1, w_out_axis=0)

    def _types_ok(self, in_data: tuple) -> bool:
        return filter_types_ok(in_data, w_in_axis=1, w_out_axis=0)

    def _settings(self) -> dict:
        return dict(stride=(self.sy, self.sx), pad=(self.ph, self.pw), cover_all=self.cover_all)

    def forward(self, inputs: tuple) -> tuple:
        x, W = inputs[:2]
        b = inputs[2] if len(inputs) == 3 else None
        ops = cuda._ops_for(x)
        return ops.conv_nd(x, W, b, **self._settings()),

    _deferrable_inputs = (0,)

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, W = inputs[:2]
        gy = grad_outputs[0]
        ops = cuda._ops_for(x)
        if self._lazy_grads and deferral_fits(gy.nbytes + W.nbytes):
            # x is a root (the images, typically): its gradient, a transposed convolution, waits
            # until someone reads x.grad. NOTE: private copies; the optimizer updates W in place.
            _, gW, gb = ops.backprop_conv_nd(gy, x, W, **self._settings(), need_dX=False)
            args = (ops, gy.copy(), W.copy(), (self.sy, self.sx), (self.ph, self.pw), x.shape[2:])
            gx = DeferredGrad(_input_grad, args, x.shape, x.dtype)
        else:
            gx, gW, gb = ops.backprop_conv_nd(gy, x, W, **self._settings())
        if len(inputs) == 3:
            return gx, gW, gb
        return gx, gW


def _input_grad(ops: Any, gy: Any, W: Any, stride: tuple, pad: tuple, size: tuple) -> Any:
    # conv's input gradient is the transposed convolution of gy with the same filters.
    with cuda.get_device(gy):
        return ops.deconv_nd(gy, W, None, stride=stride, pad=pad, outsize=size)


def convolution_2d(
    x: Any, W: Any, b: Any = None, stride: Any = 1, pad: Any = 0, use_cudnn: bool = True, cover_all: bool = False
) -> Any:
    """2-D convolution (cross-correlation) of x with the filters W, plus b per output channel.

    x (n, c_I, h, w), W (c_O, c_I, k_H, k_W), b (c_O,) -> (n, c_O, h_O, w_O) with
    h_O = (h + 2 p_H - k_H) // s_Y + 1 (and likewise w_O); stride and pad are an int or a pair.
    """
    func = Convolution2DFunction(stride, pad, use_cudnn, cover_all)
    if b is None:
        return func(x, W)
    return func(x, W, b)
