"""batch_l2_norm_squared: the squared L2 norm of each example (no reduction over the batch)."""
from typing import Any

from ... import function, utils
from ...utils import type_check


class BatchL2NormSquared(function.Function):
    """(nB, ...) -> (nB,), sum of squares over everything but the batch axis."""

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_type, = in_types
        type_check.expect(x_type.dtype.kind == "f", x_type.ndim >= 2)

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        X = x.reshape(len(x), -1)  # (nB, nI)
        return utils.force_array((X * X).sum(axis=1)),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, gy = inputs[0], grad_outputs[0]
        g = gy.reshape((len(x),) + (1,) * (x.ndim - 1)) * x.dtype.type(2)
        return utils.force_array(g * x),


def batch_l2_norm_squared(x: Any) -> Any:
    """Squared L2 norm of each example: (nB, ...) -> (nB,); axes after the first are flattened."""
    return BatchL2NormSquared()(x)
