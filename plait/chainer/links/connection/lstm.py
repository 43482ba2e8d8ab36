"""LSTM: a fully-connected, stateful LSTM layer (upward and lateral Linear links + lstm)."""
from typing import Any

from ... import link
from ...functions.activation import lstm as _lstm
from ...variable import Variable
from . import linear as _linear


class LSTM(link.Chain):
    """One LSTM step per call, keeping the cell state c and output h. (nB, in_size) -> (nB, out_size)

    upward maps x to the 4 * out_size gate inputs (gates interleaved per unit, see
    functions.lstm); lateral (no bias) adds the previous output h from the second call on.
    reset_state() sets c and h back to None.
    """

    def __init__(self, in_size: int, out_size: int) -> None:
        super().__init__(
            upward=_linear.Linear(in_size, 4 * out_size),
            lateral=_linear.Linear(out_size, 4 * out_size, nobias=True),
        )
        self.state_size = out_size
        self.reset_state()

    def to_cpu(self) -> "LSTM":
        super().to_cpu()
        for state in (self.c, self.h):
            if state is not None:
                state.to_cpu()
        return self

    def to_gpu(self, device: Any = None) -> "LSTM":
        super().to_gpu(device)
        for state in (self.c, self.h):
            if state is not None:
                state.to_gpu(device)
        return self

    def reset_state(self) -> None:
        """Forget the state: c and h become None."""
        self.c = self.h = None

    def __call__(self, x: Any) -> Any:
        """Advance one step on the batch x and return the new output h."""
        gates = self.upward(x)
        if self.h is not None:
            gates = gates + self.lateral(self.h)
        if self.c is None:
            data = gates.data
            self.c = Variable(self.xp.zeros((len(data), self.state_size), dtype=data.dtype), volatile="auto")
        self.c, self.h = _lstm.lstm(self.c, gates)
        return self.h
