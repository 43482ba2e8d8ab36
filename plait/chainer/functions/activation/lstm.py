"""lstm: one step of an LSTM cell, applied to pre-computed gate inputs (c_prev, x -> c, h)."""
from typing import Any, List

from ... import cuda, function
from ...utils import type_check


def _split_gates(x: Any) -> List[Any]:
    """The four gate inputs a, i, f, o of x (nB, 4 * nH, ...), each (nB, nH, ...).

    NOTE: the gates are interleaved, not stacked: unit j's a, i, f, o sit at columns
    4j, 4j+1, 4j+2, 4j+3. This is Chainer's layout, which trained LSTM weights depend on.
    """
    r = x.reshape((x.shape[0], x.shape[1] // 4, 4) + x.shape[2:])
    return [r[:, :, k] for k in range(4)]


def _join_gates(xp: Any, like: Any, ga: Any, gi: Any, gf: Any, go: Any) -> Any:
    """The inverse of _split_gates: a (nB, 4 * nH, ...) array shaped like `like`."""
    gx = xp.empty(like.shape, dtype=like.dtype)
    r = gx.reshape((like.shape[0], like.shape[1] // 4, 4) + like.shape[2:])
    for k, g in enumerate((ga, gi, gf, go)):
        r[:, :, k] = g
    return gx


def _check_cell(c_type: Any, x_type: Any) -> None:
    type_check.expect(
        c_type.dtype.kind == "f",
        x_type.dtype == c_type.dtype,
        c_type.ndim >= 2,
        x_type.ndim == c_type.ndim,
        x_type.shape[0] == c_type.shape[0],
        x_type.shape[1] == 4 * c_type.shape[1],
        x_type.shape[2:] == c_type.shape[2:],
    )


class LSTM(function.Function):
    """c_prev (nB, nH, ...), x (nB, 4 * nH, ...) -> c (nB, nH, ...), h (nB, nH, ...)"""

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        _check_cell(in_types[0], in_types[1])

    def forward(self, inputs: tuple) -> tuple:
        c_prev, x = inputs
        xp = cuda.get_array_module(x)
        ops = cuda._ops_for(x)
        a, i, f, o = _split_gates(x)
        A = xp.tanh(a)
        I = ops.sigmoid(i)  # noqa: E741 - the gate's name
        F = ops.sigmoid(f)
        O = ops.sigmoid(o)  # noqa: E741
        c = A * I
        c += F * c_prev
        tanh_c = xp.tanh(c)
        self._saved = (A, I, F, O, tanh_c)
        return c, O * tanh_c

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        c_prev, x = inputs
        gc, gh = grad_outputs
        xp = cuda.get_array_module(x)
        ops = cuda._ops_for(x)
        A, I, F, O, tanh_c = self._saved  # noqa: E741
        # The cell state reaches the loss directly (gc) and through h = O * tanh(c).
        gc_total = xp.zeros_like(c_prev) if gc is None else gc.copy()
        if gh is not None:
            gc_total += gh * O * ops.dtanh(tanh_c)
            go = gh * tanh_c * ops.dsigmoid(O)
        else:
            go = xp.zeros_like(c_prev)
        ga = gc_total * I * ops.dtanh(A)
        gi = gc_total * A * ops.dsigmoid(I)
        gf = gc_total * c_prev * ops.dsigmoid(F)
        return gc_total * F, _join_gates(xp, x, ga, gi, gf, go)


def lstm(c_prev: Any, x: Any) -> Any:
    """One LSTM step: (c, h) from the previous cell state and the gate inputs x.

    x (nB, 4 * nH, ...) holds the cell input a and the input, forget and output gates i, f, o,
    interleaved per unit (a, i, f, o of unit j at columns 4j .. 4j+3). Then
    c = tanh(a) * sigmoid(i) + c_prev * sigmoid(f) and h = tanh(c) * sigmoid(o).
    """
    return LSTM()(c_prev, x)
