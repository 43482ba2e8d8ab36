"""Inception: GoogLeNet's four-path block (1x1, 1x1 -> 3x3, 1x1 -> 5x5, 3x3 max pool -> 1x1)."""
from typing import Any, Optional

from ... import link
from ...functions.activation import relu as _relu
from ...functions.array import concat as _concat
from ...functions.pooling import max_pooling_2d as _max_pool
from . import _weights as _w
from . import convolution_2d as _conv


class Inception(link.Chain):
    """The GoogLeNet inception block. (n, in_channels, h, w) -> (n, out1 + out3 + out5 + proj_pool, h, w)

    Child links (their names are the npz keys): conv1 (1x1), proj3 (1x1) and conv3 (3x3, pad 1),
    proj5 (1x1) and conv5 (5x5, pad 2), projp (1x1 after a 3x3 stride-1 pad-1 max pooling).
    ReLU follows each projection and, once, the concatenation of the four paths.
    """

    def __init__(self, in_channels: Optional[int], out1: int, proj3: int, out3: int, proj5: int,
                 out5: int, proj_pool: int) -> None:
        _w.check_positive("Inception", "in_channels", in_channels, allow_none=True)
        for name, value in (("out1", out1), ("proj3", proj3), ("out3", out3), ("proj5", proj5),
                            ("out5", out5), ("proj_pool", proj_pool)):
            _w.check_positive("Inception", name, value)
        conv = _conv.Convolution2D
        super().__init__(
            conv1=conv(in_channels, out1, 1),
            proj3=conv(in_channels, proj3, 1),
            conv3=conv(proj3, out3, 3, pad=1),
            proj5=conv(in_channels, proj5, 1),
            conv5=conv(proj5, out5, 5, pad=2),
            projp=conv(in_channels, proj_pool, 1),
        )

    def __call__(self, x: Any) -> Any:
        """The concatenated, rectified outputs of the four paths for x (n, in_channels, h, w)."""
        relu = _relu.relu
        y1 = self.conv1(x)
        y3 = self.conv3(relu(self.proj3(x)))
        y5 = self.conv5(relu(self.proj5(x)))
        # cover_all is irrelevant here: with k=3, s=1, p=1 both modes keep h and w.
        yp = self.projp(_max_pool.max_pooling_2d(x, 3, stride=1, pad=1))
        return relu(_concat.concat((y1, y3, y5, yp), axis=1))
