"""What the weight-holding links share: argument checks, initial values and lazy sizing.

Linear, Convolution2D, Deconvolution2D and Bilinear all draw W from N(0, wscale * sqrt(1 / fan_in))
unless the caller gives initialW, start b at `bias` unless initial_bias is given, and (the first
three) may create W on the first call from the input's size.
"""
import math
from typing import Any, Tuple

import numpy

from ... import variable
from ..._errors import AssertValueError


def check_positive(where: str, name: str, value: Any, allow_none: bool = False) -> None:
    """A positive int (or None when allowed), else ValueError naming the link, argument and value."""
    if allow_none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, numpy.integer)) or value <= 0:
        kind = "a positive int or None" if allow_none else "a positive int"
        raise ValueError(f"{where}: {name} must be {kind}, got {value!r}.")


def fill(where: str, param: Any, name: str, value: Any) -> None:
    """Copy an initial value (scalar or array of the param's shape) into a param."""
    value = numpy.asarray(value) if isinstance(value, (list, tuple)) else value
    if hasattr(value, "shape") and value.ndim and tuple(value.shape) != param.data.shape:
        # Chainer asserts the shape of an initial value (Bilinear) or fails to broadcast it.
        raise AssertValueError(
            f"{where}: initial value for {name} has shape {tuple(value.shape)}, expected {param.data.shape}."
        )
    param.data[...] = value


def init_weight(link: Any, where: str, name: str, shape: Tuple[int, ...], fan_in: int,
                wscale: float, initial: Any) -> None:
    """Register param `name` and set it: `initial` if given, else N(0, wscale * sqrt(1 / fan_in))."""
    # A lazily sized link holds None under this name until its first call.
    link.__dict__.pop(name, None)
    link.add_param(name, shape)
    param = getattr(link, name)
    if initial is None:
        W = numpy.random.normal(0, wscale * math.sqrt(1.0 / fan_in), shape)
        param.data[...] = W if link._cpu else link.xp.asarray(W)
    else:
        fill(where, param, name, initial)


def init_bias(link: Any, where: str, size: int, nobias: bool, bias: Any, initial_bias: Any) -> None:
    """Register b (size,) starting at `bias` (or initial_bias), or set b = None with nobias."""
    if nobias:
        link.b = None
        return
    link.add_param("b", size)
    if initial_bias is None:
        link.b.data[...] = bias
    else:
        fill(where, link.b, "b", initial_bias)


def input_array(x: Any) -> Any:
    """The array of a Variable or of a raw array input (a numpy array's own .data is a memoryview)."""
    return x.data if isinstance(x, variable.Variable) else x
