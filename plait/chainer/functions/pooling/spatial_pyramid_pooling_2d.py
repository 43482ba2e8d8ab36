"""spatial_pyramid_pooling_2d: pool at 1, 2x2, 4x4, ... bins and concatenate (a fixed-length feature)."""
import math
from typing import Any

from ... import cuda, function
from ...utils import type_check
from ...variable import Variable
from .max_pooling_2d import MaxPooling2D


def _levels(h: int, w: int, pyramid_height: int) -> list:
    # Level i splits each axis into 2**i bins: ksize rounds up, the overshoot is padded evenly.
    levels = []
    for i in range(pyramid_height):
        bins = 2 ** i
        kh, kw = int(math.ceil(h / bins)), int(math.ceil(w / bins))
        levels.append(((kh, kw), ((kh * bins - h) // 2, (kw * bins - w) // 2)))
    return levels


class SpatialPyramidPooling2D(function.Function):
    """x (n, c, h, w) -> (n, c * sum(4**i for i < pyramid_height), 1, 1)"""

    def __init__(self, x_shape: Any, pyramid_height: int, pooling_class: Any, use_cudnn: bool = True) -> None:
        if isinstance(pyramid_height, bool) or not isinstance(pyramid_height, int) or pyramid_height < 1:
            raise ValueError(
                f"spatial_pyramid_pooling_2d: pyramid_height must be a positive int, got {pyramid_height!r}."
            )
        if pooling_class is not MaxPooling2D:
            raise NotImplementedError(
                f"spatial_pyramid_pooling_2d: only MaxPooling2D is supported as pooling_class, got "
                f"{getattr(pooling_class, '__name__', pooling_class)!r}."
            )
        self.pyramid_height = pyramid_height
        self.pooling_class = pooling_class
        self.use_cudnn = use_cudnn
        # x_shape is (c, h, w), the input's shape without the batch axis, as in Chainer; a full
        # (n, c, h, w) shape is taken too.
        if len(x_shape) not in (3, 4):
            raise ValueError(
                f"spatial_pyramid_pooling_2d: x_shape must be the input's (c, h, w), got {tuple(x_shape)!r}."
            )
        self.levels = _levels(int(x_shape[-2]), int(x_shape[-1]), pyramid_height)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_type = in_types[0]
        type_check.expect(x_type.dtype.kind == "f", x_type.ndim == 4)

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        ops = cuda._ops_for(x)
        xp = ops.xp
        n = x.shape[0]
        ys, self.indexes, self.out_shapes = [], [], []
        for ksize, pad in self.levels:
            y, which = ops.max_pool_nd(x, ksize, None, pad, cover_all=True)
            self.indexes.append(which)
            self.out_shapes.append(y.shape)
            ys.append(y.reshape(n, -1, 1, 1))
        return xp.concatenate(ys, axis=1),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x = inputs[0]
        ops = cuda._ops_for(x)
        gy = grad_outputs[0]
        gx = None
        start = 0
        for (ksize, pad), which, shape in zip(self.levels, self.indexes, self.out_shapes):
            size = int(shape[1] * shape[2] * shape[3])
            g = gy[:, start : start + size].reshape(shape)
            start += size
            part = ops.backprop_max_pool_nd(g, which, x.shape, ksize, None, pad, cover_all=True)
            gx = part if gx is None else gx + part
        return gx,


def spatial_pyramid_pooling_2d(x: Any, pyramid_height: int, pooling_class: Any, use_cudnn: bool = True) -> Any:
    """Max-pool x into 1, 2x2, 4x4, ... bins (one level each) and concatenate the flattened results.

    x (n, c, h, w) -> (n, c * sum(4**i for i in range(pyramid_height)), 1, 1)
    """
    shape = x.data.shape if isinstance(x, Variable) else x.shape
    return SpatialPyramidPooling2D(shape[1:], pyramid_height, pooling_class, use_cudnn)(x)
