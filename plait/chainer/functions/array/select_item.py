"""select_item: y[i] = x[i, t[i]], one entry per row picked by an integer index."""
from typing import Any

import numpy

from ... import cuda, function
from ...utils import type_check


class SelectItem(function.Function):
    """x (nB, nC), t (nB,) ints in [0, nC) -> (nB,)"""

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        x_type, t_type = in_types
        type_check.expect(
            t_type.dtype.kind == "i",
            x_type.ndim == 2,
            t_type.ndim == 1,
            x_type.shape[0] == t_type.shape[0],
        )

    def forward(self, inputs: tuple) -> tuple:
        x, t = inputs
        xp = cuda.get_array_module(x)
        # Checked on the host only: on a GPU the test would synchronise every call.
        if xp is numpy and t.size and (int(t.min()) < 0 or int(t.max()) >= x.shape[1]):
            bad = t[(t < 0) | (t >= x.shape[1])]
            raise ValueError(
                f"select_item: indices in t must be in [0, {x.shape[1]}) (the columns of x, shape "
                f"{x.shape}); got {int(bad[0])}."
            )
        return x[xp.arange(len(t)), t],

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, t = inputs
        xp = cuda.get_array_module(x)
        gx = xp.zeros_like(x)
        gx[xp.arange(len(t)), t] = grad_outputs[0]
        return gx, None


def select_item(x: Any, t: Any) -> Any:
    """The t[i]-th element of each row of x: y[i] == x[i, t[i]]. Differentiable in x only."""
    return SelectItem()(x, t)
