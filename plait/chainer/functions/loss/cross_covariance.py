"""cross_covariance: half the sum of squares of the cross-covariance of two batches."""
from typing import Any

from ... import cuda, function, utils
from ...utils import type_check


class CrossCovariance(function.Function):
    """y (nB, nI), z (nB, nJ) -> () 0.5 * sum(C**2), C = (y - mean y)^T (z - mean z) / nB"""

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        y_type, z_type = in_types
        type_check.expect(
            y_type.dtype.kind == "f",
            z_type.dtype == y_type.dtype,
            y_type.ndim == 2,
            z_type.ndim == 2,
            y_type.shape[0] == z_type.shape[0],
        )

    def forward(self, inputs: tuple) -> tuple:
        y, z = inputs
        ops = cuda._ops_for(y)
        self._yc = y - y.mean(axis=0, keepdims=True)
        self._zc = z - z.mean(axis=0, keepdims=True)
        self._cov = ops.gemm(self._yc, self._zc, trans1=True)  # (nI, nJ)
        self._cov *= y.dtype.type(1.0 / len(y))
        cost = (self._cov * self._cov).sum(dtype=y.dtype) * y.dtype.type(0.5)
        return utils.force_array(cost, dtype=y.dtype).reshape(()),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        y = inputs[0]
        ops = cuda._ops_for(y)
        g = grad_outputs[0] * y.dtype.type(1.0 / len(y))
        # The column means drop out: the centred columns of the other side already sum to 0.
        gy = ops.gemm(self._zc, self._cov, trans2=True) * g  # (nB, nI)
        gz = ops.gemm(self._yc, self._cov) * g  # (nB, nJ)
        return gy, gz


def cross_covariance(y: Any, z: Any) -> Any:
    """Cross-covariance penalty 0.5 * ||C||_F^2 of y (nB, nI) and z (nB, nJ), C their covariance."""
    return CrossCovariance()(y, z)
