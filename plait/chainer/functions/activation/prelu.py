"""prelu: x where x >= 0, W * x elsewhere, with a learned slope per channel."""
from typing import Any

from ... import cuda, function, utils
from ...utils import type_check


def _slope_shape(x: Any, W: Any) -> tuple:
    # W covers the axes right after the batch axis; the trailing axes share its values.
    return (1,) + W.shape + (1,) * (x.ndim - W.ndim - 1)


class PReLUFunction(function.Function):
    """x (nB, d1, ..., dk, ...), W (d1, ..., dk) -> (same shape as x)"""

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        x_type, W_type = in_types
        type_check.expect(
            x_type.dtype.kind == "f",
            W_type.dtype == x_type.dtype,
            x_type.ndim >= W_type.ndim + 1,
            x_type.shape[1:1 + W_type.ndim.eval()] == W_type.shape,
        )

    def forward(self, inputs: tuple) -> tuple:
        x, W = inputs
        xp = cuda.get_array_module(x)
        slope = W.reshape(_slope_shape(x, W))
        return utils.force_array(xp.where(x >= 0, x, x * slope)),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, W = inputs
        gy = grad_outputs[0]
        xp = cuda.get_array_module(x)
        slope = W.reshape(_slope_shape(x, W))
        gx = xp.where(x >= 0, gy, gy * slope)
        shared = (0,) + tuple(range(W.ndim + 1, x.ndim))
        gW = xp.where(x >= 0, 0, gy * x).sum(axis=shared).astype(W.dtype, copy=False)
        return utils.force_array(gx), utils.force_array(gW.reshape(W.shape))


def prelu(x: Any, W: Any) -> Any:
    """Parametric ReLU max(x, W * x), W shared over the batch axis and the axes after W's.

    W's shape must equal the axes of x right after the batch axis: W (2, 3) goes with
    x (nB, 2, 3, ...).
    """
    return PReLUFunction()(x, W)
