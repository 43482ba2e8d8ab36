"""Pooling2D: the settings and type check shared by the 2-D pooling functions."""
from typing import Any

from ... import function
from ....backends._conv import as_nd_tuple
from ...utils import type_check


class Pooling2D(function.Function):
    """Base of the pooling functions over the last two axes of x (n, c, h, w)."""

    def __init__(
        self, ksize: Any, stride: Any = None, pad: Any = 0, cover_all: bool = True, use_cudnn: bool = True
    ) -> None:
        if stride is None:
            stride = ksize
        self.kh, self.kw = as_nd_tuple(ksize, 2, "ksize", "Pooling2D")
        self.sy, self.sx = as_nd_tuple(stride, 2, "stride", "Pooling2D")
        self.ph, self.pw = as_nd_tuple(pad, 2, "pad", "Pooling2D", minimum=0)
        self.cover_all = cover_all
        self.use_cudnn = use_cudnn

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_type = in_types[0]
        type_check.expect(x_type.dtype.kind == "f", x_type.ndim == 4)

    def _one_float_4d(self, in_data: tuple) -> bool:
        return len(in_data) == 1 and in_data[0].dtype.kind == "f" and in_data[0].ndim == 4

    def _settings(self) -> dict:
        return dict(ksize=(self.kh, self.kw), stride=(self.sy, self.sx), pad=(self.ph, self.pw))
