"""Bilinear: a link holding W (J, K, L) and, unless nobias, V1 (J, L), V2 (K, L), b (L,)."""
import math
from typing import Any

import numpy

from ... import link
from ..._errors import AssertValueError
from ...functions.connection import bilinear as _bilinear
from . import _weights as _w


class Bilinear(link.Link):
    """The bilinear (tensor) layer of functions.bilinear. (nB, J), (nB, K) -> (nB, L)

    W is drawn from N(0, sqrt(1 / (J * K * L))) unless initialW is given. Unless nobias, V1
    and V2 are drawn from N(0, sqrt(1 / J)) and N(0, sqrt(1 / K)) and b is 0, unless
    initial_bias = (V1, V2, b) is given.
    """

    def __init__(
        self,
        left_size: int,
        right_size: int,
        out_size: int,
        nobias: bool = False,
        initialW: Any = None,
        initial_bias: Any = None,
    ) -> None:
        super().__init__()
        for name, value in (("left_size", left_size), ("right_size", right_size), ("out_size", out_size)):
            _w.check_positive("Bilinear", name, value)
        J, K, L = int(left_size), int(right_size), int(out_size)
        self.in_sizes = (J, K)
        self.nobias = nobias
        self.add_param("W", (J, K, L))
        if initialW is None:
            initialW = numpy.random.normal(0, math.sqrt(1.0 / (J * K * L)), (J, K, L))
        _w.fill("Bilinear", self.W, "W", initialW)
        if nobias:
            return  # initial_bias is ignored, as in Chainer
        self.add_param("V1", (J, L))
        self.add_param("V2", (K, L))
        self.add_param("b", (L,))
        if initial_bias is None:
            initial_bias = (
                numpy.random.normal(0, math.sqrt(1.0 / J), (J, L)),
                numpy.random.normal(0, math.sqrt(1.0 / K), (K, L)),
                0,
            )
        elif not isinstance(initial_bias, (tuple, list)) or len(initial_bias) != 3:
            raise AssertValueError(
                f"Bilinear: initial_bias must be a tuple (V1, V2, b) of shapes {(J, L)}, {(K, L)}, "
                f"{(L,)}; got {type(initial_bias).__name__} {initial_bias!r}."
            )
        for name, value in zip(("V1", "V2", "b"), initial_bias):
            _w.fill("Bilinear", getattr(self, name), name, value)

    def __call__(self, e1: Any, e2: Any) -> Any:
        """The bilinear layer applied to the left input e1 and the right input e2."""
        if self.nobias:
            return _bilinear.bilinear(e1, e2, self.W)
        return _bilinear.bilinear(e1, e2, self.W, self.V1, self.V2, self.b)

    def zero_grads(self) -> None:
        """Set every gradient to zero (the pre-1.5 name of zerograds)."""
        self.zerograds()
