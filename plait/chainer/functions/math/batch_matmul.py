"""batch_matmul: one matrix product per example of a batch."""
from typing import Any

from ... import cuda, function
from ...utils import type_check


def _as_batch_mat(x: Any) -> Any:
    # (nB, N) is a batch of column vectors: (nB, N, 1).
    return x.reshape(x.shape + (1,)) if x.ndim == 2 else x


def _op(x: Any, trans: bool) -> Any:
    return x.swapaxes(-1, -2) if trans else x


class BatchMatMul(function.Function):
    """a (nB, M, K) or (nB, K), b (nB, K, N) or (nB, K) [each optionally transposed] -> (nB, M, N)"""

    def __init__(self, transa: bool = False, transb: bool = False) -> None:
        self.transa = transa
        self.transb = transb

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        a_type, b_type = in_types
        type_check.expect(
            a_type.dtype.kind == "f",
            b_type.dtype == a_type.dtype,
            a_type.ndim >= 2, a_type.ndim <= 3,
            b_type.ndim >= 2, b_type.ndim <= 3,
            a_type.shape[0] == b_type.shape[0],
        )
        a_shape = a_type.shape.eval()
        b_shape = b_type.shape.eval()
        a_mat = (a_shape + (1,))[1:3]
        b_mat = (b_shape + (1,))[1:3]
        a_cols = a_mat[0 if self.transa else 1]
        b_rows = b_mat[1 if self.transb else 0]
        if a_cols != b_rows:
            raise type_check.InvalidType(
                f"inner dimensions agree: columns of each a{'.T' if self.transa else ''} == rows of "
                f"each b{'.T' if self.transb else ''}",
                f"a has shape {a_shape} and b has shape {b_shape}: {a_cols} != {b_rows}",
            )

    def forward(self, inputs: tuple) -> tuple:
        a, b = _as_batch_mat(inputs[0]), _as_batch_mat(inputs[1])
        xp = cuda.get_array_module(a)
        return xp.matmul(_op(a, self.transa), _op(b, self.transb)),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        a, b = _as_batch_mat(inputs[0]), _as_batch_mat(inputs[1])
        gy = grad_outputs[0]  # (nB, M, N)
        xp = cuda.get_array_module(a)
        A, B = _op(a, self.transa), _op(b, self.transb)
        gA = xp.matmul(gy, B.swapaxes(-1, -2))  # (nB, M, K)
        gB = xp.matmul(A.swapaxes(-1, -2), gy)  # (nB, K, N)
        ga = _op(gA, self.transa).reshape(inputs[0].shape)
        gb = _op(gB, self.transb).reshape(inputs[1].shape)
        return xp.ascontiguousarray(ga), xp.ascontiguousarray(gb)


def batch_matmul(a: Any, b: Any, transa: bool = False, transb: bool = False) -> Any:
    """a[i] @ b[i] for each i of the batch, as a (nB, M, N) array.

    A 2-D operand (nB, N) is read as nB column vectors (N, 1); transa / transb transpose each
    matrix of a / b first.
    """
    return BatchMatMul(transa, transb)(a, b)
