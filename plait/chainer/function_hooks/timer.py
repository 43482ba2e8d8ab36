"""TimerHook: wall time of each function's forward and backward."""
import time
from typing import Any, List, Tuple

from ..function import Function, FunctionHook


def _sync(arrays: Any) -> None:
    # GPU kernels run asynchronously: wait for them so the time covers the work.
    from ...util import is_cupy_array

    for a in arrays:
        if is_cupy_array(a):
            a.device.synchronize()
            return


class TimerHook(FunctionHook):
    """Records (function, seconds) for every forward and backward run under it."""

    name = "TimerHook"

    def __init__(self) -> None:
        self.call_history: List[Tuple[Function, float]] = []
        self._start = 0.0

    def _begin(self, in_data: Any) -> None:
        _sync(in_data)
        self._start = time.perf_counter()

    def _end(self, function: Function, in_data: Any) -> None:
        _sync(in_data)
        self.call_history.append((function, time.perf_counter() - self._start))

    def forward_preprocess(self, function: Function, in_data: Any) -> None:
        self._begin(in_data)

    def forward_postprocess(self, function: Function, in_data: Any) -> None:
        self._end(function, in_data)

    def backward_preprocess(self, function: Function, in_data: Any, out_grad: Any) -> None:
        self._begin(in_data)

    def backward_postprocess(self, function: Function, in_data: Any, out_grad: Any) -> None:
        self._end(function, in_data)

    def total_time(self) -> float:
        """Total recorded seconds."""
        return sum(t for _, t in self.call_history)
