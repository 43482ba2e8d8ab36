"""The arithmetic behind Variable's operators: + - * / ** @, negation and abs.

Two Variables must have one shape and dtype (use broadcast functions to align them). A
constant operand (a scalar, or an array that broadcasts to the Variable's shape) is cast to
the Variable's dtype, so float32 stays float32 with Python floats and numpy float64 scalars.
"""
from typing import Any

import numpy

from ... import cuda, function, utils
from ...utils import type_check
from ...variable import Variable

_fa = utils.force_array


def _is_array(value: Any) -> bool:
    if isinstance(value, numpy.ndarray):
        return True
    from ....util import is_cupy_array

    return is_cupy_array(value)


def _check_constant_type(value: Any) -> None:
    if numpy.isscalar(value) and not isinstance(value, (str, bytes)):
        return
    if _is_array(value):
        return
    raise ValueError(
        f"Variable arithmetic: the other operand must be a scalar, a numpy/cupy array or a "
        f"Variable, got {type(value).__name__}. Wrap lists and tuples with numpy.asarray(...)."
    )


def _convert_value_to_string(value: Any) -> str:
    """How a constant appears in a function's label: '2.0', '(-2)' or 'constant array'."""
    if isinstance(value, Variable):
        value = value.data
    if numpy.isscalar(value):
        return f"({value})" if value < 0 else str(value)
    if _is_array(value):
        return "constant array"
    raise ValueError(
        f"Variable arithmetic: a constant must be a scalar, an array or a Variable, got "
        f"{type(value).__name__}."
    )


def _preprocess_const(x: Any, value: Any) -> Any:
    """value in x's dtype; an array must broadcast to x's shape without growing it."""
    if numpy.isscalar(value):
        return x.dtype.type(value)
    if cuda.get_array_module(value) is not cuda.get_array_module(x):
        where = "GPU (cupy)" if cuda.get_array_module(x) is not numpy else "host (numpy)"
        raise TypeError(
            f"Variable arithmetic: the variable's data is on the {where} but the constant array "
            f"is not; cupy and numpy arrays cannot be mixed. Move the constant with "
            f"cuda.to_gpu()/cuda.to_cpu() first."
        )
    if value.dtype != x.dtype:
        value = value.astype(x.dtype)
    if numpy.broadcast_shapes(x.shape, value.shape) != x.shape:
        raise type_check.InvalidType(
            f"constant of shape {value.shape} broadcasts to the variable's shape {x.shape}",
            f"broadcast shape is {numpy.broadcast_shapes(x.shape, value.shape)}",
            msg=(
                f"Variable arithmetic: a constant array of shape {value.shape} does not broadcast "
                f"to the variable's shape {x.shape} (the result would have shape "
                f"{numpy.broadcast_shapes(x.shape, value.shape)}). Reshape the constant, or "
                f"wrap it in a Variable and broadcast explicitly."
            ),
        )
    return value


_const_label = _convert_value_to_string


class _Unary(function.Function):
    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)


class _Binary(function.Function):
    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        a, b = in_types
        type_check.expect(a.dtype == b.dtype, a.shape == b.shape)


class Neg(_Unary):
    @property
    def label(self) -> str:
        return "__neg__"

    def forward(self, x: tuple) -> tuple:
        return _fa(-x[0]),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        return _fa(-gy[0]),


class Absolute(_Unary):
    @property
    def label(self) -> str:
        return "|_|"

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, x: tuple) -> tuple:
        return _fa(abs(x[0])),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        xp = cuda.get_array_module(x[0])
        return _fa(xp.sign(x[0]) * gy[0]),


class Add(_Binary):
    @property
    def label(self) -> str:
        return "_ + _"

    def forward(self, x: tuple) -> tuple:
        return _fa(x[0] + x[1]),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        return gy[0], gy[0]


class AddConstant(_Unary):
    def __init__(self, value: Any) -> None:
        self.value = value

    @property
    def label(self) -> str:
        return f"_ + {_const_label(self.value)}"

    def forward(self, x: tuple) -> tuple:
        return _fa(x[0] + _preprocess_const(x[0], self.value)),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        return gy[0],


class Sub(_Binary):
    @property
    def label(self) -> str:
        return "_ - _"

    def forward(self, x: tuple) -> tuple:
        return _fa(x[0] - x[1]),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        return gy[0], _fa(-gy[0])


class SubFromConstant(_Unary):
    def __init__(self, value: Any) -> None:
        self.value = value

    @property
    def label(self) -> str:
        return f"{_const_label(self.value)} - _"

    def forward(self, x: tuple) -> tuple:
        return _fa(_preprocess_const(x[0], self.value) - x[0]),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        return _fa(-gy[0]),


class Mul(_Binary):
    @property
    def label(self) -> str:
        return "_ * _"

    def forward(self, x: tuple) -> tuple:
        return _fa(x[0] * x[1]),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        return _fa(gy[0] * x[1]), _fa(gy[0] * x[0])


class MulConstant(_Unary):
    def __init__(self, value: Any) -> None:
        self.value = value

    @property
    def label(self) -> str:
        return f"_ * {_const_label(self.value)}"

    def forward(self, x: tuple) -> tuple:
        return _fa(_preprocess_const(x[0], self.value) * x[0]),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        return _fa(_preprocess_const(x[0], self.value) * gy[0]),


class Div(_Binary):
    @property
    def label(self) -> str:
        return "_ / _"

    def forward(self, x: tuple) -> tuple:
        return _fa(x[0] / x[1]),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        gx0 = _fa(gy[0] / x[1])
        return gx0, _fa(-gx0 * x[0] / x[1])


class DivFromConstant(_Unary):
    def __init__(self, value: Any) -> None:
        self.value = value

    @property
    def label(self) -> str:
        # NOTE: Chainer 1.7.2 labels c / x as '_ / c' (its tests assert it); kept for graphs
        # and hooks that match on labels.
        return f"_ / {_const_label(self.value)}"

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, x: tuple) -> tuple:
        return _fa(_preprocess_const(x[0], self.value) / x[0]),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        value = _preprocess_const(x[0], self.value)
        return _fa(-value * gy[0] / (x[0] * x[0])),


class PowVarVar(_Binary):
    @property
    def label(self) -> str:
        return "_ ** _"

    def check_type_forward(self, in_types: Any) -> None:
        super().check_type_forward(in_types)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, x: tuple) -> tuple:
        self.y = _fa(x[0] ** x[1])
        return self.y,

    def backward(self, x: tuple, gy: tuple) -> tuple:
        xp = cuda.get_array_module(x[0])
        one = x[1].dtype.type(1)
        gx0 = _fa(x[1] * x[0] ** (x[1] - one) * gy[0])
        gx1 = _fa(xp.log(x[0]) * self.y * gy[0])
        return gx0, gx1


class PowVarConst(_Unary):
    def __init__(self, value: Any) -> None:
        self.value = value

    @property
    def label(self) -> str:
        return f"_ ** {_const_label(self.value)}"

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, x: tuple) -> tuple:
        return _fa(x[0] ** _preprocess_const(x[0], self.value)),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        value = _preprocess_const(x[0], self.value)
        return _fa(value * x[0] ** (value - x[0].dtype.type(1)) * gy[0]),


class PowConstVar(_Unary):
    def __init__(self, value: Any) -> None:
        self.value = value

    @property
    def label(self) -> str:
        return f"{_const_label(self.value)} ** _"

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, x: tuple) -> tuple:
        self.y = _fa(_preprocess_const(x[0], self.value) ** x[0])
        return self.y,

    def backward(self, x: tuple, gy: tuple) -> tuple:
        xp = cuda.get_array_module(x[0])
        value = _preprocess_const(x[0], self.value)
        return _fa(xp.log(value) * self.y * gy[0]),


def neg(x: Any) -> Any:
    return Neg()(x)


def absolute(x: Any) -> Any:
    return Absolute()(x)


def add(lhs: Any, rhs: Any) -> Any:
    if isinstance(rhs, Variable):
        return Add()(lhs, rhs)
    _check_constant_type(rhs)
    return AddConstant(rhs)(lhs)


def sub(lhs: Any, rhs: Any) -> Any:
    if isinstance(rhs, Variable):
        return Sub()(lhs, rhs)
    _check_constant_type(rhs)
    return AddConstant(-rhs)(lhs)


def rsub(lhs: Any, rhs: Any) -> Any:
    if isinstance(rhs, Variable):
        return Sub()(rhs, lhs)
    _check_constant_type(rhs)
    return SubFromConstant(rhs)(lhs)


def mul(lhs: Any, rhs: Any) -> Any:
    if isinstance(rhs, Variable):
        return Mul()(lhs, rhs)
    _check_constant_type(rhs)
    return MulConstant(rhs)(lhs)


def div(lhs: Any, rhs: Any) -> Any:
    if isinstance(rhs, Variable):
        return Div()(lhs, rhs)
    _check_constant_type(rhs)
    # NOTE: x / c is computed as x * (1 / c), as Chainer does; it may differ from x / c in the last bit.
    return MulConstant(1.0 / rhs)(lhs)


def rdiv(lhs: Any, rhs: Any) -> Any:
    if isinstance(rhs, Variable):
        return Div()(rhs, lhs)
    _check_constant_type(rhs)
    return DivFromConstant(rhs)(lhs)


def pow(lhs: Any, rhs: Any) -> Any:  # noqa: A001 - the name of the operator it implements
    if isinstance(rhs, Variable):
        return PowVarVar()(lhs, rhs)
    _check_constant_type(rhs)
    return PowVarConst(rhs)(lhs)


def rpow(lhs: Any, rhs: Any) -> Any:
    if isinstance(rhs, Variable):
        return PowVarVar()(rhs, lhs)
    _check_constant_type(rhs)
    return PowConstVar(rhs)(lhs)


def matmul(lhs: Any, rhs: Any) -> Any:
    from .matmul import matmul as _matmul

    return _matmul(lhs, rhs)


def rmatmul(lhs: Any, rhs: Any) -> Any:
    from .matmul import matmul as _matmul

    return _matmul(rhs, lhs)


def install_variable_arithmetics() -> None:
    """Give Variable its operators (+ - * / ** @, unary - and abs, with reflected forms)."""
    Variable.__neg__ = neg
    Variable.__abs__ = absolute
    Variable.__add__ = add
    Variable.__radd__ = add
    Variable.__sub__ = sub
    Variable.__rsub__ = rsub
    Variable.__mul__ = mul
    Variable.__rmul__ = mul
    Variable.__truediv__ = div
    Variable.__rtruediv__ = rdiv
    Variable.__pow__ = pow
    Variable.__rpow__ = rpow
    Variable.__matmul__ = matmul
    Variable.__rmatmul__ = rmatmul
