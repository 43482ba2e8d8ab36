"""GRU (stateless) and StatefulGRU: gated recurrent units built from six Linear links."""
from typing import Any, Optional

import numpy

from ... import link, variable
from ...functions.activation import sigmoid as _sigmoid
from ...functions.activation import tanh as _tanh
from . import linear as _linear


class GRUBase(link.Chain):
    """The six Linear links W_r, W_z, W (n_inputs -> n_units) and U_r, U_z, U (n_units -> n_units)."""

    def __init__(self, n_units: int, n_inputs: Optional[int] = None) -> None:
        if n_inputs is None:
            n_inputs = n_units
        super().__init__(
            W_r=_linear.Linear(n_inputs, n_units),
            U_r=_linear.Linear(n_units, n_units),
            W_z=_linear.Linear(n_inputs, n_units),
            U_z=_linear.Linear(n_units, n_units),
            W=_linear.Linear(n_inputs, n_units),
            U=_linear.Linear(n_units, n_units),
        )


class GRU(GRUBase):
    """Stateless GRU step: h' from (h, x). (nB, n_units), (nB, n_inputs) -> (nB, n_units)

    r = sigmoid(W_r x + U_r h), z = sigmoid(W_z x + U_z h),
    h_bar = tanh(W x + U (r * h)), h' = (1 - z) * h + z * h_bar.
    """

    def __call__(self, h: Any, x: Any) -> Any:
        """The next hidden state from the previous one h and the input x."""
        r = _sigmoid.sigmoid(self.W_r(x) + self.U_r(h))
        z = _sigmoid.sigmoid(self.W_z(x) + self.U_z(h))
        h_bar = _tanh.tanh(self.W(x) + self.U(r * h))
        return (1 - z) * h + z * h_bar


class StatefulGRU(GRUBase):
    """GRU that keeps its hidden state h between calls. (nB, in_size) -> (nB, out_size)

    With no state yet (h is None) the step is h' = z * h_bar with z = sigmoid(W_z x) and
    h_bar = tanh(W x), which is the GRU step for h = 0.
    """

    def __init__(self, in_size: int, out_size: int) -> None:
        super().__init__(out_size, in_size)
        self.state_size = out_size
        self.reset_state()

    def to_cpu(self) -> "StatefulGRU":
        super().to_cpu()
        if self.h is not None:
            self.h.to_cpu()
        return self

    def to_gpu(self, device: Any = None) -> "StatefulGRU":
        super().to_gpu(device)
        if self.h is not None:
            self.h.to_gpu(device)
        return self

    def set_state(self, h: Any) -> None:
        """Replace the hidden state with the Variable h (nB, out_size), moved to this link's device."""
        if not isinstance(h, variable.Variable):
            raise TypeError(
                f"StatefulGRU.set_state: the state must be a chainer Variable, got {type(h).__name__}; "
                f"wrap the array first (Variable(h))."
            )
        if self.xp is numpy:
            h.to_cpu()
        else:
            h.to_gpu()
        self.h = h

    def reset_state(self) -> None:
        """Forget the hidden state (h becomes None)."""
        self.h = None

    def __call__(self, x: Any) -> Any:
        """Advance one step on the batch x; returns (and keeps) the new hidden state."""
        z = self.W_z(x)
        h_bar = self.W(x)
        if self.h is not None:
            r = _sigmoid.sigmoid(self.W_r(x) + self.U_r(self.h))
            z = z + self.U_z(self.h)
            h_bar = h_bar + self.U(r * self.h)
        z = _sigmoid.sigmoid(z)
        h_new = z * _tanh.tanh(h_bar)
        if self.h is not None:
            h_new = h_new + (1 - z) * self.h
        self.h = h_new
        return h_new
