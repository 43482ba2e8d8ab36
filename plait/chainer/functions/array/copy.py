"""copy: the variable's array copied to a device (-1: host memory); gradients go back."""
from typing import Any

from ... import cuda, function
from ...utils import type_check
from ....util import is_cupy_array


def _device_id(device: Any) -> int:
    if device is None:
        return -1
    return int(getattr(device, "id", device))


class Copy(function.Function):
    """(any shape) on any device -> (same shape) on `out_device` (-1 for the host)."""

    def __init__(self, out_device: Any) -> None:
        self.out_device = out_device

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        if _device_id(self.out_device) < 0:
            return (cuda.to_cpu(x) if is_cupy_array(x) else x.copy()),
        if is_cupy_array(x):
            return cuda.copy(x, out_device=self.out_device),
        return cuda.to_gpu(x, device=self.out_device),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        # The gradient goes back to wherever the input lives, whatever device the output is on.
        x, gy = inputs[0], grad_outputs[0]
        if is_cupy_array(x):
            if is_cupy_array(gy):
                return cuda.copy(gy, out_device=x.device),
            return cuda.to_gpu(gy, device=x.device),
        return (cuda.to_cpu(gy) if is_cupy_array(gy) else gy.copy()),


def copy(x: Any, dst: Any) -> Any:
    """A copy of x on device `dst` (a GPU id, or -1 for host memory); differentiable."""
    return Copy(dst)(x)
