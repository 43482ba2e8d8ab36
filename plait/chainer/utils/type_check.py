"""Lazy type checks for Function inputs: expressions that remember how they were written.

`in_types[0].ndim == 2` builds a small expression tree instead of a bool; `expect(...)`
evaluates it and, when it is false, raises InvalidType showing both the written condition
and the values it saw ("Expect: in_types[0].ndim == 2\nActual: 3 != 2").
"""
import operator
from typing import Any, Callable, Optional, Sequence

import numpy

__all__ = [
    "Expr", "Atom", "Constant", "Variable", "Member", "GetItem", "Call", "UnaryOperator",
    "BinaryOperator", "Testable", "BoolBinaryOperator", "InvalidType", "TypeInfo",
    "TypeInfoTuple", "get_types", "expect", "eval", "prod", "same_types",
]

_builtin_eval = eval


class InvalidType(Exception):
    """A type check failed: `expect` is the written condition, `actual` the values seen."""

    def __init__(self, expect: str, actual: str, msg: Optional[str] = None) -> None:
        if msg is None:
            msg = f"Expect: {expect}\nActual: {actual}"
        super().__init__(msg)
        self.expect = expect
        self.actual = actual

    def __reduce__(self):
        return (type(self), (self.expect, self.actual, str(self)))


class TypeInfo:
    """Shape and dtype of one array (host or device); `ndim` follows from the shape."""

    def __init__(self, shape: Sequence[int], dtype: Any) -> None:
        self.shape = tuple(shape)
        self.dtype = numpy.dtype(dtype)
        self.ndim = len(self.shape)

    @property
    def size(self) -> int:
        return int(numpy.prod(self.shape, dtype=numpy.int64))

    def __repr__(self) -> str:
        return f"TypeInfo(shape={self.shape}, dtype={self.dtype})"


class TypeInfoTuple(tuple):
    """A tuple of Variable expressions, one per input array; `size()` is its length as an Expr."""

    name: str = "in_types"

    def _get_types(self) -> tuple:
        return tuple(t.eval() for t in self)

    def size(self) -> "Variable":
        return Variable(len(self), f"{self.name}.size")


def _format_value(value: Any) -> str:
    # Types are shown by their dotted name (numpy.float32), not as "<class 'numpy.float32'>".
    if isinstance(value, type):
        module = value.__module__
        return value.__name__ if module == "builtins" else f"{module}.{value.__name__}"
    if isinstance(value, numpy.dtype):
        return str(value)
    return repr(value) if isinstance(value, str) else str(value)


# Binding strength for printing; smaller binds tighter (Python's precedence, reversed).
_ATOM, _POWER, _UNARY, _MUL, _ADD, _SHIFT, _AND, _XOR, _OR, _COMPARE = range(10)


class Expr:
    """An unevaluated expression: operators on it build larger expressions."""

    def __init__(self, priority: int) -> None:
        self.priority = priority

    def eval(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.eval is not implemented.")

    def __bool__(self) -> bool:
        raise RuntimeError(
            f"type_check: the expression '{self}' cannot be used as a bool (for example with "
            f"'and', 'or', 'not' or 'if'). Pass it to type_check.expect(...), or call .eval() "
            f"to get its value."
        )

    def __getattr__(self, name: str) -> "Member":
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Member(self, name)

    def __getitem__(self, key: Any) -> "GetItem":
        return GetItem(self, key)

    def __call__(self, *args: Any) -> "Call":
        return Call(self, args)

    # comparisons produce testable expressions
    def __eq__(self, other: Any) -> "BoolBinaryOperator":  # type: ignore[override]
        return BoolBinaryOperator("==", self, other, "!=", operator.eq)

    def __ne__(self, other: Any) -> "BoolBinaryOperator":  # type: ignore[override]
        return BoolBinaryOperator("!=", self, other, "==", operator.ne)

    def __lt__(self, other: Any) -> "BoolBinaryOperator":
        return BoolBinaryOperator("<", self, other, ">=", operator.lt)

    def __le__(self, other: Any) -> "BoolBinaryOperator":
        return BoolBinaryOperator("<=", self, other, ">", operator.le)

    def __gt__(self, other: Any) -> "BoolBinaryOperator":
        return BoolBinaryOperator(">", self, other, "<=", operator.gt)

    def __ge__(self, other: Any) -> "BoolBinaryOperator":
        return BoolBinaryOperator(">=", self, other, "<", operator.ge)

    __hash__ = None  # type: ignore[assignment]

    def __neg__(self) -> "UnaryOperator":
        return UnaryOperator(_UNARY, "-", self, operator.neg)

    def __pos__(self) -> "UnaryOperator":
        return UnaryOperator(_UNARY, "+", self, operator.pos)

    def __invert__(self) -> "UnaryOperator":
        return UnaryOperator(_UNARY, "~", self, operator.invert)


def _binary(symbol: str, priority: int, fn: Callable, right_assoc: bool = False) -> tuple:
    def forward(self: Expr, other: Any) -> "BinaryOperator":
        return BinaryOperator(priority, self, other, symbol, fn, right_assoc)

    def reflected(self: Expr, other: Any) -> "BinaryOperator":
        return BinaryOperator(priority, other, self, symbol, fn, right_assoc)

    return forward, reflected


for _name, _symbol, _prio, _fn, _right in [
    ("add", "+", _ADD, operator.add, False),
    ("sub", "-", _ADD, operator.sub, False),
    ("mul", "*", _MUL, operator.mul, False),
    ("truediv", "/", _MUL, operator.truediv, False),
    ("floordiv", "//", _MUL, operator.floordiv, False),
    ("mod", "%", _MUL, operator.mod, False),
    ("pow", "**", _POWER, operator.pow, True),
    ("lshift", "<<", _SHIFT, operator.lshift, False),
    ("rshift", ">>", _SHIFT, operator.rshift, False),
    ("and", "&", _AND, operator.and_, False),
    ("xor", "^", _XOR, operator.xor, False),
    ("or", "|", _OR, operator.or_, False),
]:
    _f, _r = _binary(_symbol, _prio, _fn, _right)
    setattr(Expr, f"__{_name}__", _f)
    setattr(Expr, f"__r{_name}__", _r)
del _name, _symbol, _prio, _fn, _right, _f, _r


def _eval_expr(value: Any) -> Any:
    return value.eval() if isinstance(value, Expr) else value


def _str_operand(value: Any, limit: int, tight: bool) -> str:
    """str(value), parenthesised if it binds looser than the operator it sits under."""
    if not isinstance(value, Expr):
        return _format_value(value)
    text = str(value)
    if value.priority > limit or (tight and value.priority == limit):
        return f"({text})"
    return text


class Atom(Expr):
    def __init__(self) -> None:
        super().__init__(_ATOM)


class Constant(Atom):
    """A literal value in an expression."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value

    def __str__(self) -> str:
        return _format_value(self.value)

    def eval(self) -> Any:
        return self.value


class Variable(Atom):
    """A named value: its name is what the error message shows (`Variable(self.in_size, 'in_size')`)."""

    def __init__(self, value: Any, name: str) -> None:
        super().__init__()
        self.value = value
        self.name = name

    def __str__(self) -> str:
        return self.name

    def eval(self) -> Any:
        return self.value


class Member(Atom):
    """`obj.name` on an expression."""

    def __init__(self, obj: Expr, name: str) -> None:
        super().__init__()
        self.obj = obj
        self.name = name

    def __str__(self) -> str:
        return f"{_str_operand(self.obj, _ATOM, False)}.{self.name}"

    def eval(self) -> Any:
        return getattr(_eval_expr(self.obj), self.name)


def _format_key(key: Any) -> str:
    if isinstance(key, slice):
        parts = ["" if v is None else _format_key(v) for v in (key.start, key.stop)]
        text = ":".join(parts)
        if key.step is not None:
            text += ":" + _format_key(key.step)
        return text
    if isinstance(key, tuple):
        return ", ".join(_format_key(k) for k in key)
    if key is Ellipsis:
        return "..."
    return str(key) if isinstance(key, Expr) else _format_value(key)


def _eval_key(key: Any) -> Any:
    if isinstance(key, slice):
        return slice(_eval_expr(key.start), _eval_expr(key.stop), _eval_expr(key.step))
    if isinstance(key, tuple):
        return tuple(_eval_key(k) for k in key)
    return _eval_expr(key)


class GetItem(Atom):
    """`obj[key]` on an expression (the key may be an int, a slice or an expression)."""

    def __init__(self, obj: Expr, key: Any) -> None:
        super().__init__()
        self.obj = obj
        self.key = key

    def __str__(self) -> str:
        return f"{_str_operand(self.obj, _ATOM, False)}[{_format_key(self.key)}]"

    def eval(self) -> Any:
        return _eval_expr(self.obj)[_eval_key(self.key)]


class Call(Atom):
    """`fn(*args)` on an expression, evaluated lazily."""

    def __init__(self, obj: Expr, args: Sequence[Any]) -> None:
        super().__init__()
        self.obj = obj
        self.args = tuple(args)

    def __str__(self) -> str:
        args = ", ".join(str(a) if isinstance(a, Expr) else _format_value(a) for a in self.args)
        return f"{_str_operand(self.obj, _ATOM, False)}({args})"

    def eval(self) -> Any:
        return _eval_expr(self.obj)(*[_eval_expr(a) for a in self.args])


class UnaryOperator(Expr):
    def __init__(self, priority: int, symbol: str, term: Any, fn: Callable) -> None:
        super().__init__(priority)
        self.symbol = symbol
        self.term = term
        self.fn = fn

    def __str__(self) -> str:
        return f"{self.symbol}{_str_operand(self.term, self.priority, False)}"

    def eval(self) -> Any:
        return self.fn(_eval_expr(self.term))


class BinaryOperator(Expr):
    def __init__(
        self, priority: int, lhs: Any, rhs: Any, symbol: str, fn: Callable, right_assoc: bool = False
    ) -> None:
        super().__init__(priority)
        self.lhs = lhs
        self.rhs = rhs
        self.symbol = symbol
        self.fn = fn
        self.right_assoc = right_assoc

    def __str__(self) -> str:
        left = _str_operand(self.lhs, self.priority, self.right_assoc)
        right = _str_operand(self.rhs, self.priority, not self.right_assoc)
        return f"{left} {self.symbol} {right}"

    def eval(self) -> Any:
        return self.fn(_eval_expr(self.lhs), _eval_expr(self.rhs))


class Testable:
    """Something `expect` can test: `expect()` raises InvalidType when it does not hold."""

    def expect(self) -> None:
        raise NotImplementedError


class BoolBinaryOperator(BinaryOperator, Testable):
    """A comparison; when false it reports the values with the opposite operator (3 != 2)."""

    def __init__(self, symbol: str, lhs: Any, rhs: Any, inverse: str, fn: Callable) -> None:
        super().__init__(_COMPARE, lhs, rhs, symbol, fn)
        self.inverse = inverse

    def expect(self) -> None:
        left = _eval_expr(self.lhs)
        right = _eval_expr(self.rhs)
        if not self.fn(left, right):
            raise InvalidType(
                str(self), f"{_format_value(left)} {self.inverse} {_format_value(right)}"
            )


def get_types(data: Sequence[Any], name: str, accept_none: bool) -> TypeInfoTuple:
    """The TypeInfoTuple of arrays, each a Variable named '<name>[i]'."""
    infos = []
    for i, a in enumerate(data):
        label = f"{name}[{i}]"
        if a is None:
            if not accept_none:
                raise InvalidType(f"{label} is an array", f"{label} is None")
            infos.append(Variable(None, label))
            continue
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            raise InvalidType(f"{label} is an array", f"{label} is {type(a).__name__}")
        infos.append(Variable(TypeInfo(a.shape, a.dtype), label))
    tup = TypeInfoTuple(infos)
    tup.name = name
    return tup


def expect(*bool_exprs: Any) -> None:
    """Test each condition in order; raise InvalidType at the first that does not hold."""
    for cond in bool_exprs:
        if isinstance(cond, Testable):
            cond.expect()
        elif isinstance(cond, Expr):
            if not cond.eval():
                raise InvalidType(str(cond), "False")
        elif isinstance(cond, (bool, numpy.bool_)):
            if not cond:
                raise InvalidType("a condition that holds", "False")
        else:
            raise TypeError(
                f"type_check.expect: expected comparisons on type expressions (such as "
                f"x_type.ndim == 2) or bools, got {type(cond).__name__}: {cond!r}."
            )


def eval(exp: Any) -> Any:  # noqa: A001 - mirrors chainer.utils.type_check.eval
    """The value of an expression (plain values are returned as they are)."""
    return _eval_expr(exp)


prod = Variable(numpy.prod, "prod")


def same_types(*arrays: Any) -> bool:
    """Whether all arrays are of one kind: all numpy or all cupy."""
    kinds = {type(a).__module__.split(".")[0] for a in arrays}
    return len(kinds) <= 1


def _scores_and_labels_ok(in_data: Sequence[Any]) -> bool:
    """The check of softmax_cross_entropy and accuracy on plain shapes, for their fast path:
    float scores (nB, nC, d1, ...) and int labels (nB, d1, ...)."""
    if len(in_data) != 2:
        return False
    x, t = in_data
    xs, ts = x.shape, t.shape
    return (
        x.dtype.kind == "f" and t.dtype.kind == "i" and len(xs) >= 2 and len(ts) == len(xs) - 1
        and xs[0] == ts[0] and xs[2:] == ts[1:]
    )
