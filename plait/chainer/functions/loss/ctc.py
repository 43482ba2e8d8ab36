"""connectionist_temporal_classification: CTC loss of label sequences under per-step class scores.

The numeric core (log-space forward-backward, batched) is plait.backends._ctc; this module
checks types, applies the softmax and wires the result into the graph.

An alignment that cannot exist (labels longer than the input allows) raises ValueError naming
the sample. Chainer 7.8.1 instead returns a loss of about 1e10 for such a sample (its stand-in
for log 0) with meaningless gradients; an error is easier to act on than a huge loss.
"""
import numbers
from typing import Any, Optional, Sequence

import numpy

from ....backends._ctc import ctc_check_inputs, ctc_loss_and_grad
from ... import cuda, function
from ...utils import type_check
from ...variable import Variable
from ..activation.log_softmax import _log_softmax

_NAME = "connectionist_temporal_classification"


class ConnectionistTemporalClassification(function.Function):
    """input_length (nB,) int, label_length (nB,) int, t (nB, nL) int, x_0..x_{nT-1} (nB, nV) -> () loss.

    The inputs come in Chainer 1.7.2's order (lengths, labels, then the steps' scores).

    The loss is the sum over the batch of -log p(t[b] | x[:, b]) divided by nB; only the x
    inputs receive gradients.
    """

    def __init__(self, blank_symbol: int) -> None:
        if isinstance(blank_symbol, bool) or not isinstance(blank_symbol, numbers.Integral):
            raise TypeError(
                f"{_NAME}: blank_symbol must be an int, got {type(blank_symbol).__name__}: {blank_symbol!r}."
            )
        if blank_symbol < 0:
            raise ValueError(f"{_NAME}: blank_symbol must be non-negative, got {blank_symbol}.")
        self.blank_symbol = int(blank_symbol)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() >= 4)
        in_len_type, lab_len_type, t_type = in_types[:3]
        x0 = in_types[3]
        # Scores and labels first: the lengths are filled in from them when not given.
        type_check.expect(
            x0.dtype.kind == "f",
            x0.ndim == 2,
            t_type.dtype.kind == "i",
            t_type.ndim == 2,
            x0.shape[0] == t_type.shape[0],
            x0.shape[1] > type_check.Variable(self.blank_symbol, "blank_symbol"),
            in_len_type.dtype.kind == "i",
            in_len_type.ndim == 1,
            in_len_type.shape[0] == t_type.shape[0],
            lab_len_type.dtype.kind == "i",
            lab_len_type.ndim == 1,
            lab_len_type.shape[0] == t_type.shape[0],
        )
        for x_type in in_types[4:]:
            type_check.expect(x_type.dtype == x0.dtype, x_type.shape == x0.shape)

    def forward(self, inputs: tuple) -> tuple:
        input_length, label_length, t = inputs[:3]
        xs = inputs[3:]
        xp = cuda.get_array_module(*xs)
        nT = len(xs)
        nB, nV = xs[0].shape
        ctc_check_inputs(nT, nV, t, input_length, label_length, self.blank_symbol, where=_NAME)
        log_probs = _log_softmax(xp.stack(xs).reshape(nT * nB, nV)).reshape(nT, nB, nV)
        loss, self._d_scores = ctc_loss_and_grad(log_probs, t, input_length, label_length, self.blank_symbol)
        total = loss.sum(dtype=loss.dtype) / loss.dtype.type(nB)
        return xp.asarray(total, dtype=xs[0].dtype).reshape(()),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        xs = inputs[3:]
        nB = xs[0].shape[0]
        gloss = grad_outputs[0]
        scale = gloss / xs[0].dtype.type(nB)
        d = (self._d_scores * scale).astype(xs[0].dtype, copy=False)
        return (None, None, None) + tuple(d[i] for i in range(len(xs)))


def _lengths(v: Any, n: int, nB: int, xp: Any) -> Any:
    if v is None:
        return xp.full((nB,), n, dtype=numpy.int32)
    return v


def connectionist_temporal_classification(
    x: Sequence[Any],
    t: Any,
    blank_symbol: int,
    input_length: Optional[Any] = None,
    label_length: Optional[Any] = None,
) -> Any:
    """CTC loss of label sequences t under the unnormalised scores x; a scalar Variable.

    x: a list of nT Variables (or arrays), x[i] (nB, nV) the scores at step i (softmax is applied
    here, so pass raw scores). t (nB, nL) int labels. input_length, label_length (nB,) int
    (optional): steps >= input_length[b] and labels >= label_length[b] of sample b are ignored.
    Returns sum_b -log p(t[b] | x[:, b]) / nB. Raises ValueError when a sample's labels need more
    steps than its input has.
    """
    if not isinstance(x, (list, tuple)):
        raise TypeError(
            f"{_NAME}: x must be a list or tuple of Variables (one (batch, classes) array per time "
            f"step), got {type(x).__name__}."
        )
    if len(x) == 0:
        raise ValueError(f"{_NAME}: x is empty; it needs at least one time step.")
    first = x[0].data if isinstance(x[0], Variable) else x[0]
    t_data = t.data if isinstance(t, Variable) else t
    xp = cuda.get_array_module(first)
    nB = first.shape[0] if getattr(first, "ndim", 0) >= 1 else 0
    nL = t_data.shape[1] if getattr(t_data, "ndim", 0) == 2 else 0
    input_length = _lengths(input_length, len(x), nB, xp)
    label_length = _lengths(label_length, nL, nB, xp)
    return ConnectionistTemporalClassification(blank_symbol)(input_length, label_length, t, *x)
