"""average_pooling_2d: the mean of each spatial window, per channel."""
from typing import Any

from ... import cuda
from .pooling_2d import Pooling2D


class AveragePooling2D(Pooling2D):
    """x (n, c, h, w) -> (n, c, h_O, w_O); padded elements count as zeros in the mean."""

    # Chainer's average pooling has no cover_all mode: windows never run past the padding.

    # Pooling2D.check_type_forward's conditions on the array (used only by this class).
    _types_ok = Pooling2D._one_float_4d

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        ops = cuda._ops_for(x)
        return ops.avg_pool_nd(x, cover_all=False, **self._settings()),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x = inputs[0]
        ops = cuda._ops_for(x)
        return ops.backprop_avg_pool_nd(grad_outputs[0], x.shape, cover_all=False, **self._settings()),


def average_pooling_2d(x: Any, ksize: Any, stride: Any = None, pad: Any = 0, use_cudnn: bool = True) -> Any:
    """Mean over each (k_H, k_W) window, divided by k_H * k_W even where it overlaps the padding.

    x (n, c, h, w) -> (n, c, (h + 2 p_H - k_H) // s_Y + 1, ...); stride defaults to ksize.
    """
    return AveragePooling2D(ksize, stride, pad, False, use_cudnn)(x)
