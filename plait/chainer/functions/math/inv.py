"""inv and batch_inv: the inverse of a square matrix, or of each matrix in a batch."""
from typing import Any

from ... import cuda, function
from ...utils import type_check


def _invert(xp: Any, a: Any, where: str) -> Any:
    try:
        out = xp.linalg.inv(a)
    except Exception as e:  # numpy: LinAlgError; cupy reports singularity its own way
        if type(e).__name__ != "LinAlgError":
            raise
        raise ValueError(
            f"{where}: the input (shape {a.shape}) has a singular matrix, which has no inverse."
        ) from None
    return out.astype(a.dtype, copy=False)


def _transpose_last(a: Any) -> Any:
    return a.swapaxes(-1, -2)


class Inv(function.Function):
    """(n, n) -> (n, n) inverse"""

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        a_type, = in_types
        type_check.expect(a_type.dtype.kind == "f", a_type.ndim == 2, a_type.shape[0] == a_type.shape[1])

    def forward(self, inputs: tuple) -> tuple:
        a = inputs[0]
        self.inv_a = _invert(cuda.get_array_module(a), a, "inv")
        return self.inv_a,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        # d(A^-1) = -A^-1 dA A^-1, so dL/dA = -A^-T G A^-T.
        ops = cuda._ops_for(self.inv_a)
        g = ops.gemm(ops.gemm(self.inv_a, grad_outputs[0], trans1=True), self.inv_a, trans2=True)
        return -g,


class BatchInv(function.Function):
    """(m, n, n) -> (m, n, n), each matrix inverted"""

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        a_type, = in_types
        type_check.expect(a_type.dtype.kind == "f", a_type.ndim == 3, a_type.shape[-1] == a_type.shape[-2])

    def forward(self, inputs: tuple) -> tuple:
        a = inputs[0]
        self.inv_a = _invert(cuda.get_array_module(a), a, "batch_inv")
        return self.inv_a,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        inv_t = _transpose_last(self.inv_a)
        xp = cuda.get_array_module(inv_t)
        return -xp.matmul(xp.matmul(inv_t, grad_outputs[0]), inv_t),


def inv(a: Any) -> Any:
    """The inverse of the square matrix a (n, n). Raises ValueError if a is singular."""
    return Inv()(a)


def batch_inv(a: Any) -> Any:
    """The inverse of each matrix of a (m, n, n). Raises ValueError if one is singular."""
    return BatchInv()(a)
