"""InceptionBN: the batch-normalized inception block (Inception-v2) with a configurable pooling path."""
import numbers
from typing import Any, Optional

from ... import link
from ..._errors import AssertValueError
from ...functions.activation import relu as _relu
from ...functions.array import concat as _concat
from ...functions.pooling import average_pooling_2d as _avg_pool
from ...functions.pooling import max_pooling_2d as _max_pool
from ..normalization import batch_normalization as _bn
from . import _weights as _w
from . import convolution_2d as _conv

_POOLTYPES = ("max", "avg")


class InceptionBN(link.Chain):
    """The inception block with batch normalization. (n, c_I, h, w) -> (n, c_O, h_O, w_O)

    c_O = out1 + out3 + out33 + (proj_pool if proj_pool is not None else c_I), and
    h_O = (h - 1) // stride + 1 (likewise w_O). Paths: conv1 (1x1, only when out1 > 0);
    proj3 (1x1) -> conv3 (3x3, stride); proj33 (1x1) -> conv33a (3x3) -> conv33b (3x3, stride);
    3x3 'max' or 'avg' pooling (stride, pad 1), then poolp (1x1) unless proj_pool is None.
    Every convolution has no bias and is followed by its BatchNormalization link (named with an
    'n' suffix: conv1n, proj3n, conv3n, proj33n, conv33an, conv33bn, poolpn) and a ReLU.
    The BN links run in training mode unless the call passes test=True or `train` is False.
    """

    def __init__(self, in_channels: Optional[int], out1: int, proj3: int, out3: int, proj33: int,
                 out33: int, pooltype: str, proj_pool: Optional[int] = None, stride: int = 1) -> None:
        _w.check_positive("InceptionBN", "in_channels", in_channels, allow_none=True)
        if isinstance(out1, bool) or not isinstance(out1, numbers.Integral) or out1 < 0:
            raise ValueError(f"InceptionBN: out1 must be a non-negative int (0 drops the 1x1 path), got {out1!r}.")
        for name, value in (("proj3", proj3), ("out3", out3), ("proj33", proj33), ("out33", out33),
                            ("stride", stride)):
            _w.check_positive("InceptionBN", name, value)
        _w.check_positive("InceptionBN", "proj_pool", proj_pool, allow_none=True)
        if pooltype not in _POOLTYPES:
            raise NotImplementedError(f"InceptionBN: pooltype must be 'max' or 'avg', got {pooltype!r}.")
        # Chainer 1.7.2 asserts these two: the errors are ValueErrors and AssertionErrors.
        if out1 > 0 and stride != 1:
            raise AssertValueError(
                f"InceptionBN: the 1x1 path (out1={out1}) only exists at stride 1, got stride={stride!r}. "
                f"Pass out1=0 for a strided block."
            )
        if out1 > 0 and proj_pool is None:
            raise AssertValueError(
                f"InceptionBN: a block with the 1x1 path (out1={out1}) needs a pooling projection; "
                f"pass proj_pool=<int>, or out1=0."
            )
        conv = _conv.Convolution2D
        bn = _bn.BatchNormalization
        super().__init__(
            proj3=conv(in_channels, proj3, 1, nobias=True),
            conv3=conv(proj3, out3, 3, stride=stride, pad=1, nobias=True),
            proj33=conv(in_channels, proj33, 1, nobias=True),
            conv33a=conv(proj33, out33, 3, pad=1, nobias=True),
            conv33b=conv(out33, out33, 3, stride=stride, pad=1, nobias=True),
            proj3n=bn(proj3),
            conv3n=bn(out3),
            proj33n=bn(proj33),
            conv33an=bn(out33),
            conv33bn=bn(out33),
        )
        if out1 > 0:
            self.add_link("conv1", conv(in_channels, out1, 1, nobias=True))
            self.add_link("conv1n", bn(out1))
        if proj_pool is not None:
            self.add_link("poolp", conv(in_channels, proj_pool, 1, nobias=True))
            self.add_link("poolpn", bn(proj_pool))
        self.out1 = int(out1)
        self.proj_pool = proj_pool
        self.stride = int(stride)
        self.pooltype = pooltype
        self.train = True

    def __call__(self, x: Any, test: Optional[bool] = None) -> Any:
        """The concatenated outputs of the paths for x (n, c_I, h, w); test=None means `not self.train`."""
        if test is None:
            test = not self.train
        relu = _relu.relu

        def conv_bn_relu(conv: Any, norm: Any, h: Any) -> Any:
            return relu(norm(conv(h), test=test))

        ys = []
        if self.out1 > 0:
            ys.append(conv_bn_relu(self.conv1, self.conv1n, x))
        h3 = conv_bn_relu(self.proj3, self.proj3n, x)
        ys.append(conv_bn_relu(self.conv3, self.conv3n, h3))
        h33 = conv_bn_relu(self.proj33, self.proj33n, x)
        h33 = conv_bn_relu(self.conv33a, self.conv33an, h33)
        ys.append(conv_bn_relu(self.conv33b, self.conv33bn, h33))
        # NOTE: cover_all=False keeps the pooled size (h - 1) // stride + 1, equal to the strided
        # 3x3 convolutions'; cover_all=True would add a row for even h and break the concat.
        if self.pooltype == "max":
            p = _max_pool.max_pooling_2d(x, 3, stride=self.stride, pad=1, cover_all=False)
        else:
            p = _avg_pool.average_pooling_2d(x, 3, stride=self.stride, pad=1)
        if self.proj_pool is not None:
            p = conv_bn_relu(self.poolp, self.poolpn, p)
        ys.append(p)
        return _concat.concat(ys, axis=1)
