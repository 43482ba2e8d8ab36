"""slstm: one step of an S-LSTM cell, which merges two children of a binary tree."""
from typing import Any

from ... import cuda, function
from ...utils import type_check
from .lstm import _check_cell, _join_gates, _split_gates


class SLSTM(function.Function):
    """c_prev1, c_prev2 (nB, nH, ...), x1, x2 (nB, 4 * nH, ...) -> c, h (nB, nH, ...)"""

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 4)
        c1_type, c2_type, x1_type, x2_type = in_types
        _check_cell(c1_type, x1_type)
        type_check.expect(
            c2_type.dtype == c1_type.dtype,
            x2_type.dtype == x1_type.dtype,
            c2_type.shape == c1_type.shape,
            x2_type.shape == x1_type.shape,
        )

    def forward(self, inputs: tuple) -> tuple:
        c1, c2, x1, x2 = inputs
        xp = cuda.get_array_module(x1)
        ops = cuda._ops_for(x1)
        a1, i1, f1, o1 = _split_gates(x1)
        a2, i2, f2, o2 = _split_gates(x2)
        A1, A2 = xp.tanh(a1), xp.tanh(a2)
        I1, I2 = ops.sigmoid(i1), ops.sigmoid(i2)
        F1, F2 = ops.sigmoid(f1), ops.sigmoid(f2)
        O = ops.sigmoid(o1 + o2)  # noqa: E741 - the gate's name
        c = A1 * I1
        c += A2 * I2
        c += F1 * c1
        c += F2 * c2
        tanh_c = xp.tanh(c)
        self._saved = (A1, I1, F1, A2, I2, F2, O, tanh_c)
        return c, O * tanh_c

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        c1, c2, x1, x2 = inputs
        gc, gh = grad_outputs
        xp = cuda.get_array_module(x1)
        ops = cuda._ops_for(x1)
        A1, I1, F1, A2, I2, F2, O, tanh_c = self._saved  # noqa: E741
        gc_total = xp.zeros_like(c1) if gc is None else gc.copy()
        if gh is not None:
            gc_total += gh * O * ops.dtanh(tanh_c)
            # o enters as o1 + o2, so both children's o get the same gradient.
            go = gh * tanh_c * ops.dsigmoid(O)
        else:
            go = xp.zeros_like(c1)
        gx1 = _join_gates(
            xp, x1, gc_total * I1 * ops.dtanh(A1), gc_total * A1 * ops.dsigmoid(I1),
            gc_total * c1 * ops.dsigmoid(F1), go,
        )
        gx2 = _join_gates(
            xp, x2, gc_total * I2 * ops.dtanh(A2), gc_total * A2 * ops.dsigmoid(I2),
            gc_total * c2 * ops.dsigmoid(F2), go,
        )
        return gc_total * F1, gc_total * F2, gx1, gx2


def slstm(c_prev1: Any, c_prev2: Any, x1: Any, x2: Any) -> Any:
    """One S-LSTM step over two children: (c, h) from their cell states and gate inputs.

    x1 and x2 are laid out as in lstm (a, i, f, o interleaved per unit). Then
    c = tanh(a1) * sigmoid(i1) + tanh(a2) * sigmoid(i2) + c_prev1 * sigmoid(f1)
    + c_prev2 * sigmoid(f2) and h = tanh(c) * sigmoid(o1 + o2).

    NOTE: Chainer's documentation writes the cell input as tanh(a1 + a2) * sigmoid(i1 + i2),
    but Chainer computes the per-child sum above (checked against Chainer 7.8.1); plait
    computes what Chainer computes, so that trained models give the same results.
    """
    return SLSTM()(c_prev1, c_prev2, x1, x2)
