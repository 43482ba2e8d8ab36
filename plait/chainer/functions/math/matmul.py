"""matmul: the product of two matrices (vectors count as column matrices)."""
from typing import Any

from ... import cuda, function
from ...utils import type_check


def _as_mat(x: Any) -> Any:
    return x.reshape(len(x), 1) if x.ndim == 1 else x


class MatMul(function.Function):
    """a (M, K) or (K,), b (K, N) or (K,) [each optionally transposed] -> (M, N)"""

    def __init__(self, transa: bool = False, transb: bool = False) -> None:
        self.transa = transa
        self.transb = transb

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        a_type, b_type = in_types
        type_check.expect(
            a_type.dtype.kind == "f",
            a_type.dtype == b_type.dtype,
            a_type.ndim >= 1, a_type.ndim <= 2,
            b_type.ndim >= 1, b_type.ndim <= 2,
        )
        a_shape = a_type.shape.eval()
        b_shape = b_type.shape.eval()
        a_cols = (a_shape + (1,))[:2][0 if self.transa else 1]
        b_rows = (b_shape + (1,))[:2][1 if self.transb else 0]
        if a_cols != b_rows:
            raise type_check.InvalidType(
                f"inner dimensions agree: columns of a{'.T' if self.transa else ''} == rows of "
                f"b{'.T' if self.transb else ''}",
                f"a has shape {a_shape} and b has shape {b_shape}: {a_cols} != {b_rows}",
            )

    def forward(self, inputs: tuple) -> tuple:
        a, b = _as_mat(inputs[0]), _as_mat(inputs[1])
        ops = cuda._ops_for(a)
        return ops.gemm(a, b, trans1=self.transa, trans2=self.transb),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        a, b = _as_mat(inputs[0]), _as_mat(inputs[1])
        gy = grad_outputs[0]
        ops = cuda._ops_for(a)
        # With A = op(a), B = op(b): dA = gy B^T and dB = A^T gy, transposed back where op was a transpose.
        if self.transa:
            ga = ops.gemm(b, gy, trans1=self.transb, trans2=True)
        else:
            ga = ops.gemm(gy, b, trans2=not self.transb)
        if self.transb:
            gb = ops.gemm(gy, a, trans1=True, trans2=self.transa)
        else:
            gb = ops.gemm(a, gy, trans1=not self.transa)
        return ga.reshape(inputs[0].shape), gb.reshape(inputs[1].shape)


def matmul(a: Any, b: Any, transa: bool = False, transb: bool = False) -> Any:
    """a @ b as 2-D matrices, with a 1-D array (N,) read as an (N, 1) matrix."""
    return MatMul(transa, transb)(a, b)


from .batch_matmul import BatchMatMul, batch_matmul  # noqa: E402,F401 - chainer keeps them here
