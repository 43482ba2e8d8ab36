"""Linear: a fully-connected layer holding W (out_size, in_size) and b (out_size,)."""
from typing import Any, Optional

import numpy

from ... import link
from ...functions.connection import linear as _linear
from . import _weights as _w


class Linear(link.Link):
    """Fully-connected layer y = x W^T + b. (nB, in_size...) -> (nB, out_size)

    W is drawn from N(0, wscale * sqrt(1 / in_size)) unless initialW is given; b starts at
    `bias` unless initial_bias is given; nobias=True drops b. With in_size=None, W is created
    on the first call from the input's size.
    """

    def __init__(
        self,
        in_size: Optional[int],
        out_size: int,
        wscale: float = 1,
        bias: float = 0,
        nobias: bool = False,
        initialW: Any = None,
        initial_bias: Any = None,
    ) -> None:
        super().__init__()
        _w.check_positive("Linear", "out_size", out_size)
        _w.check_positive("Linear", "in_size", in_size, allow_none=True)
        self.out_size = int(out_size)
        self._wscale = wscale
        self._initialW = initialW
        if in_size is None:
            self.W = None
        else:
            self._initialize_params(int(in_size))
        _w.init_bias(self, "Linear", self.out_size, nobias, bias, initial_bias)

    def _initialize_params(self, in_size: int) -> None:
        _w.init_weight(self, "Linear", "W", (self.out_size, in_size), in_size, self._wscale, self._initialW)

    def __call__(self, x: Any) -> Any:
        """Apply the layer to a batch x of shape (nB, in_size) (or (nB, ...) flattening to it)."""
        if self.W is None:
            data = _w.input_array(x)
            self._initialize_params(int(numpy.prod(data.shape[1:], dtype=numpy.int64)))
        return _linear.linear(x, self.W, self.b)
