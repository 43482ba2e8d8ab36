"""broadcast and broadcast_to: numpy broadcasting as graph nodes (gradients sum back)."""
from typing import Any, Sequence

from ... import cuda, function, utils
from ...utils import type_check


def _sum_to(gy: Any, shape: tuple) -> Any:
    """gy summed over the axes that broadcasting added or stretched, down to `shape`."""
    lead = gy.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and gy.shape[lead + i] != 1
    )
    if axes:
        gy = gy.sum(axis=axes, keepdims=True)
    if lead:
        gy = gy.reshape(shape)
    return utils.force_array(gy)


def _check_broadcastable(shapes: Sequence[tuple], what: str) -> None:
    ndim = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    for dims in zip(*padded):
        n = max(dims)
        if any(d != n and d != 1 for d in dims):
            raise type_check.InvalidType(
                "each dimension has the same size or is 1",
                f"{what}: " + ", ".join(str(tuple(s)) for s in shapes),
            )


class Broadcast(function.Function):
    """Any number of arrays -> the same arrays broadcast to their common shape."""

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() > 0)
        _check_broadcastable([t.eval().shape for t in in_types], "shapes")

    def forward(self, inputs: tuple) -> tuple:
        xp = cuda.get_array_module(*inputs)
        return tuple(xp.broadcast_arrays(*inputs))

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        return tuple(
            None if gy is None else _sum_to(gy, x.shape) for x, gy in zip(inputs, grad_outputs)
        )


class BroadcastTo(function.Function):
    """(any shape) -> `shape`, which the input's shape must broadcast to."""

    def __init__(self, shape: Sequence[int]) -> None:
        self._shape = tuple(int(d) for d in shape)

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        x_shape = in_types[0].shape.eval()
        target = self._shape
        if len(x_shape) > len(target):
            raise type_check.InvalidType(
                f"in_types[0].ndim <= {len(target)} (the length of shape {target})",
                f"in_types[0].ndim == {len(x_shape)} (shape {x_shape})",
            )
        for i, d in enumerate(x_shape):
            t = target[len(target) - len(x_shape) + i]
            if d != t and d != 1:
                raise type_check.InvalidType(
                    f"in_types[0].shape[{i}] == {t} or in_types[0].shape[{i}] == 1",
                    f"in_types[0].shape is {x_shape}, target shape is {target}",
                )

    def forward(self, inputs: tuple) -> tuple:
        x = inputs[0]
        return cuda.get_array_module(x).broadcast_to(x, self._shape),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        return _sum_to(grad_outputs[0], inputs[0].shape),


def broadcast(*args: Any) -> Any:
    """Broadcast the variables to one shape; a tuple of Variables (one Variable for one input)."""
    return Broadcast()(*args)


def broadcast_to(x: Any, shape: Sequence[int]) -> Any:
    """x broadcast to `shape` (numpy rules: axes of size 1 stretch, missing leading axes are added)."""
    return BroadcastTo(shape)(x)
