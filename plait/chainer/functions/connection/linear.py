"""linear: y = x W^T + b, the affine map of a fully-connected layer."""
import math
from typing import Any

from ... import cuda, function
from ...utils import type_check
from ...variable import DeferredGrad, deferral_fits


def _as_mat(x: Any) -> Any:
    # Everything after the batch axis is one feature axis: (nB, ...) -> (nB, nI).
    return x if x.ndim == 2 else x.reshape(len(x), -1)


class LinearFunction(function.Function):
    """(nB, nI...) , W (nO, nI) [, b (nO,)] -> (nB, nO)"""

    def check_type_forward(self, in_types: Any) -> None:
        n_in = in_types.size()
        type_check.expect(2 <= n_in, n_in <= 3)
        x_type, w_type = in_types[:2]
        # x must have W's dtype; written with W's scalar type so that for float32 weights the
        # message is Chainer 1.7.2's ("in_types[0].dtype == <class 'numpy.float32'>").
        type_check.expect(
            x_type.dtype == w_type.dtype.eval().type,
            w_type.dtype.kind == "f",
            x_type.ndim >= 2,
            w_type.ndim == 2,
            type_check.prod(x_type.shape[1:]) == w_type.shape[1],
        )
        if n_in.eval() == 3:
            b_type = in_types[2]
            type_check.expect(
                b_type.dtype == x_type.dtype,
                b_type.ndim == 1,
                b_type.shape[0] == w_type.shape[0],
            )

    def _types_ok(self, in_data: tuple) -> bool:
        n = len(in_data)
        if n != 2 and n != 3:
            return False
        x, W = in_data[0], in_data[1]
        xs, ws = x.shape, W.shape
        if x.dtype.kind != "f" or W.dtype != x.dtype or len(xs) < 2 or len(ws) != 2:
            return False
        if (xs[1] if len(xs) == 2 else math.prod(xs[1:])) != ws[1]:
            return False
        if n == 3:
            b = in_data[2]
            return b.dtype == x.dtype and len(b.shape) == 1 and b.shape[0] == ws[0]
        return True

    def forward(self, inputs: tuple) -> tuple:
        x = _as_mat(inputs[0])
        W = inputs[1]
        ops = cuda._ops_for(x)
        y = ops.gemm(x, W, trans2=True)  # (nB, nO)
        if len(inputs) == 3:
            y += inputs[2]
        return y,

    _deferrable_inputs = (0,)
    _grad_into_inputs = (1,)

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x = _as_mat(inputs[0])
        W = inputs[1]
        gy = grad_outputs[0]  # (nB, nO)
        ops = cuda._ops_for(x)
        if self._lazy_grads and deferral_fits(gy.nbytes + W.nbytes):
            # x is a root (the data, typically): its gradient waits until someone reads x.grad.
            # NOTE: private copies, since the optimizer updates W in place right after this.
            gx = DeferredGrad(_input_grad, (ops, gy.copy(), W.copy(), inputs[0].shape), inputs[0].shape, x.dtype)
        else:
            gx = _input_grad(ops, gy, W, inputs[0].shape)  # (nB, nI)
        into = self._grad_into
        out = into[1] if into else None
        if out is not None and (out.dtype != gy.dtype or out.shape != W.shape or not out.flags.c_contiguous):
            out = None
        gW = ops.gemm(gy, x, out=out, trans1=True)  # (nO, nI)
        if len(inputs) == 3:
            return gx, gW, gy.sum(axis=0)
        return gx, gW


def _input_grad(ops: Any, gy: Any, W: Any, shape: tuple) -> Any:
    with cuda.get_device(gy):
        return ops.gemm(gy, W).reshape(shape)


def linear(x: Any, W: Any, b: Any = None) -> Any:
    """Affine map Y = x W^T + b; x's axes after the first are flattened into one of size W.shape[1]."""
    if b is None:
        return LinearFunction()(x, W)
    return LinearFunction()(x, W, b)
