"""Numerical gradients and the checks that compare them with backward (chainer.gradient_check)."""
from typing import Any, Callable, Sequence

import numpy

from ..util import is_cupy_array
from . import cuda
from ._errors import AssertValueError
from .variable import Variable

__all__ = ["numerical_grad", "assert_allclose", "check_backward"]


def _as_tuple(x: Any) -> tuple:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def numerical_grad(f: Callable[[], Sequence[Any]], inputs: Sequence[Any], grad_outputs: Sequence[Any], eps: float = 1e-3) -> tuple:
    """Central-difference gradients of sum(f() * grad_outputs) with respect to each input array.

    f takes no arguments and reads the input arrays, which are perturbed in place (and
    restored) one element at a time. CPU and GPU arrays cannot be mixed.
    """
    if not eps > 0:
        raise AssertValueError(f"numerical_grad: eps must be > 0, got {eps}.")
    inputs = tuple(inputs)
    grad_outputs = tuple(grad_outputs)
    arrays = [a for a in inputs + grad_outputs if a is not None and not numpy.isscalar(a)]
    on_gpu = [not isinstance(a, numpy.ndarray) for a in arrays]
    if any(on_gpu) and not all(on_gpu):
        raise RuntimeError(
            "numerical_grad: inputs and grad_outputs mix numpy and cupy arrays; put them all on "
            "one device (cuda.to_cpu / cuda.to_gpu)."
        )
    xp = cuda.get_array_module(*arrays)
    grads = tuple(xp.zeros(x.shape, dtype=numpy.float64) for x in inputs)
    for x, gx in zip(inputs, grads):
        # Indexed element by element, so views and non-contiguous arrays are perturbed in place too.
        for i in numpy.ndindex(x.shape):
            orig = x[i].copy()
            x[i] = orig + eps
            ys_plus = [None if y is None else xp.array(y, dtype=numpy.float64) for y in _as_tuple(f())]
            x[i] = orig - eps
            ys_minus = [None if y is None else xp.array(y, dtype=numpy.float64) for y in _as_tuple(f())]
            x[i] = orig
            total = 0.0
            for y1, y2, gy in zip(ys_plus, ys_minus, grad_outputs):
                if gy is None or y1 is None:
                    continue
                total += float(((y1 - y2) * gy).sum())
            gx[i] = total / (2 * eps)
    return tuple(g.astype(x.dtype, copy=False) if x.dtype.kind == "f" else g for x, g in zip(inputs, grads))


def _host_array(a: Any) -> Any:
    return cuda.to_cpu(a) if is_cupy_array(a) else numpy.asarray(a)


def assert_allclose(x: Any, y: Any, atol: float = 1e-5, rtol: float = 1e-4, verbose: bool = True) -> None:
    """Assert |x - y| <= atol + rtol * |y| elementwise; x and y may be numpy or cupy arrays (or Variables)."""
    x = _host_array(x.data if isinstance(x, Variable) else x)
    y = _host_array(y.data if isinstance(y, Variable) else y)
    # As numpy.testing.assert_allclose: a 0-d side is compared with every element of the other.
    if x.shape != y.shape and x.shape != () and y.shape != ():
        raise AssertionError(f"assert_allclose: shapes differ: {x.shape} vs {y.shape}.")
    if x.shape != y.shape:
        x, y = numpy.broadcast_arrays(x, y)
    try:
        numpy.testing.assert_allclose(x, y, atol=atol, rtol=rtol, verbose=verbose)
    except AssertionError as e:
        if not verbose:
            raise
        err = numpy.abs(x.astype(numpy.float64) - y.astype(numpy.float64))
        worst = numpy.unravel_index(int(numpy.argmax(err - rtol * numpy.abs(y))), x.shape) if x.size else ()
        raise AssertionError(
            f"{e}\n\nassert_allclose: atol={atol}, rtol={rtol}; worst element at index {worst}: "
            f"x={x[worst] if x.size else x}, y={y[worst] if y.size else y}\nx:\n{x}\ny:\n{y}"
        ) from None


def check_backward(
    func: Callable,
    x_data: Any,
    y_grad: Any,
    params: Any = (),
    eps: float = 1e-3,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> None:
    """Check func's backward against numerical gradients, for its inputs and `params`.

    func takes Variables and returns a Variable or a tuple of them (a Function, a Link or a
    plain function). y_grad is the output gradient (a tuple for several outputs, None for a
    loss returning one element). Integer inputs are not checked. func is called many times,
    so it must be deterministic.
    """
    x_data = _as_tuple(x_data)
    params = _as_tuple(params)
    xs = [Variable(x if x.flags.c_contiguous else cuda.get_array_module(x).ascontiguousarray(x)) for x in x_data]
    ys = _as_tuple(func(*xs))
    if not ys or not all(isinstance(y, Variable) for y in ys):
        raise TypeError(
            f"check_backward: func must return a Variable or a tuple of Variables, got "
            f"{', '.join(type(y).__name__ for y in ys) or 'nothing'}."
        )
    if y_grad is None:
        if len(ys) != 1 or ys[0].data.size != 1:
            raise ValueError(
                "check_backward: y_grad is None, which is only allowed when func returns one "
                f"one-element Variable (a loss); it returned {len(ys)} output(s) of shapes "
                f"{[y.data.shape for y in ys]}."
            )
        xp = cuda.get_array_module(ys[0].data)
        y_grads = (xp.ones_like(ys[0].data),)
    else:
        y_grads = _as_tuple(y_grad)
        if len(y_grads) != len(ys):
            raise ValueError(
                f"check_backward: func returned {len(ys)} outputs but y_grad has {len(y_grads)} arrays."
            )

    for x in xs:
        x.cleargrad()
    for p in params:
        p.cleargrad()
    # One Identity node joins several outputs so that a single backward covers them all.
    from .functions.math.identity import Identity

    joined = _as_tuple(Identity()(*ys)) if len(ys) > 1 else ys
    for y, gy in zip(joined, y_grads):
        y.grad = gy
    joined[0].backward()

    from .function import no_backprop_mode

    def f() -> tuple:
        with no_backprop_mode():
            return tuple(y.data for y in _as_tuple(func(*xs)))

    checked = [(f"input {i}", x) for i, x in enumerate(xs) if x.data.dtype.kind == "f"]
    checked += [(f"param {p.name or i}", p) for i, p in enumerate(params)]
    if not checked:
        return
    arrays = tuple(v.data for _, v in checked)
    numeric = numerical_grad(f, arrays, y_grads, eps=eps)
    for (what, v), gx in zip(checked, numeric):
        analytic = v.grad
        if analytic is None:
            analytic = cuda.get_array_module(v.data).zeros_like(v.data)
        try:
            assert_allclose(gx, analytic, atol=atol, rtol=rtol)
        except AssertionError as e:
            raise AssertionError(f"check_backward: the gradient of {what} differs from the numerical one.\n{e}") from None
