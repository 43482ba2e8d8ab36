"""max_pooling_2d: the maximum of each spatial window, per channel."""
from typing import Any

from ... import cuda
from .pooling_2d import Pooling2D


class MaxPooling2D(Pooling2D):
    """x (n, c, h, w) -> (n, c, h_O, w_O); remembers which element won each window."""

    # Pooling2D.check_type_forward's conditions on the array (used only by this class).
    _types_ok = Pooling2D._one_float_4d

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        ops = cuda._ops_for(x)
        y, self.indexes = ops.max_pool_nd(x, cover_all=self.cover_all, **self._settings())
        return y,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x = inputs[0]
        ops = cuda._ops_for(x)
        gx = ops.backprop_max_pool_nd(
            grad_outputs[0], self.indexes, x.shape, cover_all=self.cover_all, **self._settings()
        )
        return gx,


def max_pooling_2d(
    x: Any, ksize: Any, stride: Any = None, pad: Any = 0, cover_all: bool = True, use_cudnn: bool = True
) -> Any:
    """Max over each (k_H, k_W) window; stride defaults to ksize, padding never wins.

    x (n, c, h, w) -> (n, c, h_O, w_O); with cover_all a last partial window covers the remainder.
    """
    return MaxPooling2D(ksize, stride, pad, cover_all, use_cudnn)(x)
