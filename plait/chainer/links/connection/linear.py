"""Linear: a fully-connected layer holding W (out_size, in_size) and b (out_size,)."""
import math
from typing import Any, Optional

import numpy

from ... import link, variable
from ...functions.connection import linear as _linear


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
        if not isinstance(out_size, (int, numpy.integer)) or out_size <= 0:
            raise ValueError(f"Linear: out_size must be a positive int, got {out_size!r}.")
        if in_size is not None and (not isinstance(in_size, (int, numpy.integer)) or in_size <= 0):
            raise ValueError(f"Linear: in_size must be a positive int or None, got {in_size!r}.")
        self.out_size = int(out_size)
        self._wscale = wscale
        self._initialW = initialW
        if in_size is None:
            self.W = None
        else:
            self._initialize_params(int(in_size))
        if nobias:
            self.b = None
        else:
            self.add_param("b", self.out_size)
            if initial_bias is None:
                self.b.data[...] = bias
            else:
                self._fill("b", initial_bias)

    def _fill(self, name: str, value: Any) -> None:
        param = getattr(self, name)
        value = numpy.asarray(value) if isinstance(value, (list, tuple)) else value
        if hasattr(value, "shape") and tuple(value.shape) != param.data.shape:
            raise ValueError(
                f"Linear: initial value for {name} has shape {tuple(value.shape)}, expected "
                f"{param.data.shape}."
            )
        param.data[...] = value

    def _initialize_params(self, in_size: int) -> None:
        # W is registered in place of the None placeholder of a lazily sized layer.
        self.__dict__.pop("W", None)
        self.add_param("W", (self.out_size, in_size))
        if self._initialW is None:
            std = self._wscale * math.sqrt(1.0 / in_size)
            W = numpy.random.normal(0, std, (self.out_size, in_size))
            self.W.data[...] = W if self._cpu else self.xp.asarray(W)
        else:
            self._fill("W", self._initialW)

    def __call__(self, x: Any) -> Any:
        """Apply the layer to a batch x of shape (nB, in_size) (or (nB, ...) flattening to it)."""
        if self.W is None:
            # NOTE: not getattr(x, "data", x): a numpy array's own .data is a memoryview.
            data = x.data if isinstance(x, variable.Variable) else x
            self._initialize_params(int(numpy.prod(data.shape[1:], dtype=numpy.int64)))
        return _linear.linear(x, self.W, self.b)
