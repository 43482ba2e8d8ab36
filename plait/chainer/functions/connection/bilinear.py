"""bilinear: y_il = sum_jk e1_ij e2_ik W_jkl (+ e1 V1 + e2 V2 + b), the Neural Tensor Network layer."""
from typing import Any

from ... import cuda, function
from ...utils import type_check


def _as_mat(x: Any) -> Any:
    # Axes after the batch axis form one feature axis: (nB, ...) -> (nB, n).
    return x if x.ndim == 2 else x.reshape(len(x), -1)


def _outer(e1: Any, e2: Any) -> Any:
    """Per-row outer products flattened: (nB, J), (nB, K) -> (nB, J * K)."""
    return (e1[:, :, None] * e2[:, None, :]).reshape(len(e1), -1)


class BilinearFunction(function.Function):
    """e1 (nB, J...), e2 (nB, K...), W (J, K, L) [, V1 (J, L), V2 (K, L), b (L,)] -> (nB, L)"""

    def check_type_forward(self, in_types: Any) -> None:
        n_in = in_types.size().eval()
        if n_in not in (3, 6):
            raise type_check.InvalidType(
                "in_types.size() == 3 or in_types.size() == 6", f"in_types.size() == {n_in}"
            )
        e1_type, e2_type, W_type = in_types[:3]
        type_check.expect(
            e1_type.dtype.kind == "f",
            e1_type.ndim >= 2,
            e2_type.ndim >= 2,
            e1_type.dtype == e2_type.dtype,
            W_type.dtype == e1_type.dtype,
            W_type.ndim == 3,
            e1_type.shape[0] == e2_type.shape[0],
            type_check.prod(e1_type.shape[1:]) == W_type.shape[0],
            type_check.prod(e2_type.shape[1:]) == W_type.shape[1],
        )
        if n_in == 6:
            V1_type, V2_type, b_type = in_types[3:]
            type_check.expect(
                V1_type.dtype == e1_type.dtype,
                V2_type.dtype == e1_type.dtype,
                b_type.dtype == e1_type.dtype,
                V1_type.ndim == 2,
                V2_type.ndim == 2,
                b_type.ndim == 1,
                V1_type.shape[0] == W_type.shape[0],
                V1_type.shape[1] == W_type.shape[2],
                V2_type.shape[0] == W_type.shape[1],
                V2_type.shape[1] == W_type.shape[2],
                b_type.shape[0] == W_type.shape[2],
            )

    def forward(self, inputs: tuple) -> tuple:
        e1, e2, W = _as_mat(inputs[0]), _as_mat(inputs[1]), inputs[2]
        ops = cuda._ops_for(e1)
        J, K, L = W.shape
        Y = ops.gemm(_outer(e1, e2), W.reshape(J * K, L))  # (nB, L)
        if len(inputs) == 6:
            V1, V2, b = inputs[3:]
            Y += ops.gemm(e1, V1)
            Y += ops.gemm(e2, V2)
            Y += b
        return Y,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        e1, e2, W = _as_mat(inputs[0]), _as_mat(inputs[1]), inputs[2]
        gy = grad_outputs[0]  # (nB, L)
        ops = cuda._ops_for(e1)
        J, K, L = W.shape
        gW = ops.gemm(_outer(e1, e2), gy, trans1=True).reshape(J, K, L)
        g_outer = ops.gemm(gy, W.reshape(J * K, L), trans2=True).reshape(len(e1), J, K)
        ge1 = (g_outer * e2[:, None, :]).sum(axis=2)  # (nB, J)
        ge2 = (g_outer * e1[:, :, None]).sum(axis=1)  # (nB, K)
        if len(inputs) == 3:
            return ge1.reshape(inputs[0].shape), ge2.reshape(inputs[1].shape), gW
        V1, V2 = inputs[3], inputs[4]
        ge1 += ops.gemm(gy, V1, trans2=True)
        ge2 += ops.gemm(gy, V2, trans2=True)
        gV1 = ops.gemm(e1, gy, trans1=True)
        gV2 = ops.gemm(e2, gy, trans1=True)
        return ge1.reshape(inputs[0].shape), ge2.reshape(inputs[1].shape), gW, gV1, gV2, gy.sum(axis=0)


def bilinear(e1: Any, e2: Any, W: Any, V1: Any = None, V2: Any = None, b: Any = None) -> Any:
    """y_il = sum_jk e1_ij e2_ik W_jkl + sum_j e1_ij V1_jl + sum_k e2_ik V2_kl + b_l.

    V1, V2 and b come together or not at all. e1 and e2 may have more than two axes; the
    axes after the batch axis are flattened.
    """
    linear_terms = (V1, V2, b)
    if all(t is None for t in linear_terms):
        return BilinearFunction()(e1, e2, W)
    if any(t is None for t in linear_terms):
        raise ValueError(
            "bilinear: V1, V2 and b must be given together or not at all; got "
            + ", ".join(f"{n}={'None' if t is None else 'set'}" for n, t in zip(("V1", "V2", "b"), linear_terms))
            + "."
        )
    return BilinearFunction()(e1, e2, W, V1, V2, b)
