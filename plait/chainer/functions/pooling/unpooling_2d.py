"""unpooling_2d: spread each value over its pooling window (pooling's inverse in shape)."""
from typing import Any

from ... import cuda
from ....backends._conv import conv_outsize
from ...utils import type_check
from .pooling_2d import Pooling2D


class Unpooling2D(Pooling2D):
    """x (n, c, h, w) -> (n, c, out_H, out_W)"""

    def __init__(
        self, ksize: Any, stride: Any = None, pad: Any = 0, outsize: Any = None, cover_all: bool = True
    ) -> None:
        super().__init__(ksize, stride, pad, cover_all)
        self.outh, self.outw = (None, None) if outsize is None else tuple(outsize)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_type = in_types[0]
        type_check.expect(x_type.dtype.kind == "f", x_type.ndim == 4)
        if self.outh is not None:
            # outsize must pool back to x's own size.
            expected_h = conv_outsize(self.outh, self.kh, self.sy, self.ph, self.cover_all)
            expected_w = conv_outsize(self.outw, self.kw, self.sx, self.pw, self.cover_all)
            type_check.expect(x_type.shape[2] == expected_h, x_type.shape[3] == expected_w)

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        ops = cuda._ops_for(x)
        outsize = None if self.outh is None else (self.outh, self.outw)
        return ops.unpool_nd(x, outsize=outsize, cover_all=self.cover_all, **self._settings()),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x = inputs[0]
        ops = cuda._ops_for(x)
        return ops.backprop_unpool_nd(grad_outputs[0], x.shape, cover_all=self.cover_all, **self._settings()),


def unpooling_2d(
    x: Any, ksize: Any, stride: Any = None, pad: Any = 0, outsize: Any = None, cover_all: bool = True
) -> Any:
    """Copy each value of x over its (k_H, k_W) window of the output, summing where windows overlap.

    x (n, c, h, w) -> (n, c, out_H, out_W); outsize defaults to the smallest size that
    max_pooling_2d with the same settings maps back to (h, w).
    """
    return Unpooling2D(ksize, stride, pad, outsize, cover_all)(x)
