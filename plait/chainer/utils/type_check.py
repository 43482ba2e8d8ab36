"""Lazy type checks for Function inputs: expressions that remember how they were written.

`in_types[0].ndim == 2` builds a small expression tree instead of a bool; `expect(...)`
evaluates it and, when it is false, raises InvalidType showing both the written condition
and the values it saw ("Expect: in_types[0].ndim == 2\nActual: 3 != 2"), formatted as
Chainer 1.7.2 formats them.

Operator priorities follow Python's (larger binds tighter): `|` 0, `^` 1, `&` 2, shifts 3,
`+ -` 4, `* / // %` 5, unary `- + ~` 6, `**` 7, atoms 8; comparisons are -1.
"""
import operator
from typing import Any, Callable, Sequence

import numpy

from .._errors import AssertTypeError

__all__ = [
    "Expr", "Atom", "Constant", "Variable", "GetAttr", "GetItem", "Call", "UnaryOperator",
    "BinaryOperator", "Testable", "BoolBinaryOperator", "InvalidType", "TypeInfo",
    "TypeInfoTuple", "get_types", "expect", "eval", "prod", "same_types",
]


class InvalidType(Exception):
    """A type check failed: `expect` is the written condition, `actual` the values seen."""

    def __init__(self, expect: str, actual: str, msg: Any = None) -> None:
        if msg is None:
            msg = f"Expect: {expect}\nActual: {actual}"
        super().__init__(msg)
        self.expect = expect
        self.actual = actual

    def __reduce__(self):
        return (type(self), (self.expect, self.actual, str(self)))


class TypeInfo:
    """Shape and dtype of one array (host or device); `ndim` follows from the shape.

    A gradient that was not given is TypeInfo((), None).
    """

    def __init__(self, shape: Sequence[int], dtype: Any) -> None:
        self.shape = tuple(shape)
        self.dtype = dtype if dtype is None else numpy.dtype(dtype)
        self.ndim = len(self.shape)

    @property
    def size(self) -> int:
        return int(numpy.prod(self.shape, dtype=numpy.int64))

    def __repr__(self) -> str:
        return f"TypeInfo(shape={self.shape}, dtype={self.dtype})"


class TypeInfoTuple(tuple):
    """A tuple of Variable expressions, one per input array; `size()` is its length as an Expr."""

    name: str = "in_types"

    def size(self) -> "Variable":
        return Variable(len(self), f"{self.name}.size")


# Priorities (see the module docstring).
_OR, _XOR, _AND, _SHIFT, _ADD, _MUL, _UNARY, _POWER, _ATOM = range(9)
_COMPARE = -1


def _eval_expr(value: Any) -> Any:
    """The value of an expression; lists, tuples and slices are evaluated item by item."""
    if isinstance(value, Expr):
        return value.eval()
    if isinstance(value, list):
        return [_eval_expr(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_eval_expr(v) for v in value)
    if isinstance(value, slice):
        return slice(_eval_expr(value.start), _eval_expr(value.stop), _eval_expr(value.step))
    return value


def _repr(value: Any) -> str:
    """How a value is written inside an expression: expressions as written, others by repr."""
    if isinstance(value, Expr):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_repr(v) for v in value) + "]"
    if isinstance(value, tuple):
        if len(value) == 1:
            return f"({_repr(value[0])},)"
        return "(" + ", ".join(_repr(v) for v in value) + ")"
    return repr(value)


def _str_subscript(key: Any) -> str:
    if key is Ellipsis:
        return "..."
    if isinstance(key, slice):
        text = ":".join("" if v is None else _repr(v) for v in (key.start, key.stop))
        return text if key.step is None else f"{text}:{_repr(key.step)}"
    if isinstance(key, tuple):
        return ", ".join(_str_subscript(k) for k in key)
    return _repr(key)


class Expr:
    """An unevaluated expression: operators on it build larger expressions.

    `eval()` computes its value, `str()` gives it as written. It cannot be used as a bool
    (`x == y and y == z` would silently test only `y == z`): pass conditions to `expect`.
    """

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

    def __getattr__(self, name: str) -> "GetAttr":
        # Dunder lookups (copy, pickle, numpy's protocols) must not turn into expressions.
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return GetAttr(self, name)

    def __getitem__(self, key: Any) -> "GetItem":
        return GetItem(self, key)

    def __call__(self, *args: Any) -> "Call":
        return Call(self, args)

    __hash__ = None  # type: ignore[assignment]


def _bool_operator(symbol: str, inverse: str, fn: Callable) -> Callable:
    def method(self: Expr, other: Any) -> "BoolBinaryOperator":
        return BoolBinaryOperator(self, other, symbol, inverse, fn)

    return method


def _bin_operator(symbol: str, priority: int, fn: Callable, right_associative: bool = False) -> tuple:
    def forward(self: Expr, other: Any) -> "BinaryOperator":
        return BinaryOperator(priority, self, other, symbol, fn, right_associative)

    def reflected(self: Expr, other: Any) -> "BinaryOperator":
        return BinaryOperator(priority, other, self, symbol, fn, right_associative)

    return forward, reflected


def _un_operator(symbol: str, fn: Callable) -> Callable:
    def method(self: Expr) -> "UnaryOperator":
        return UnaryOperator(_UNARY, self, symbol, fn)

    return method


for _name, _symbol, _inverse, _fn in [
    ("eq", "==", "!=", operator.eq), ("ne", "!=", "==", operator.ne),
    ("lt", "<", ">=", operator.lt), ("le", "<=", ">", operator.le),
    ("gt", ">", "<=", operator.gt), ("ge", ">=", "<", operator.ge),
]:
    setattr(Expr, f"__{_name}__", _bool_operator(_symbol, _inverse, _fn))

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
    _f, _r = _bin_operator(_symbol, _prio, _fn, _right)
    setattr(Expr, f"__{_name}__", _f)
    setattr(Expr, f"__r{_name}__", _r)

for _name, _symbol, _fn in [
    ("neg", "-", operator.neg), ("pos", "+", operator.pos), ("invert", "~", operator.invert),
]:
    setattr(Expr, f"__{_name}__", _un_operator(_symbol, _fn))

del _name, _symbol, _inverse, _prio, _fn, _right, _f, _r


class Atom(Expr):
    """An expression that binds tightest (a name, a constant, an attribute, an item, a call)."""

    def __init__(self) -> None:
        super().__init__(_ATOM)


class Constant(Atom):
    """A literal value in an expression."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value

    def __str__(self) -> str:
        return _repr(self.value)

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


class GetAttr(Atom):
    """`obj.name` on an expression; the name may be a str, a Constant str or an expression."""

    def __init__(self, obj: Any, name: Any) -> None:
        super().__init__()
        self.obj = obj
        self.name = name

    def __str__(self) -> str:
        if isinstance(self.name, str):
            return f"{_repr(self.obj)}.{self.name}"
        if isinstance(self.name, Constant) and isinstance(self.name.value, str):
            return f"{_repr(self.obj)}.{self.name.value}"
        return f"getattr({_repr(self.obj)}, {_repr(self.name)})"

    def eval(self) -> Any:
        return getattr(_eval_expr(self.obj), _eval_expr(self.name))


class GetItem(Atom):
    """`obj[key]` on an expression (the key may be an int, a slice, a tuple or an expression)."""

    def __init__(self, obj: Any, key: Any) -> None:
        super().__init__()
        self.obj = obj
        self.key = key

    def __str__(self) -> str:
        return f"{_repr(self.obj)}[{_str_subscript(self.key)}]"

    def eval(self) -> Any:
        return _eval_expr(self.obj)[_eval_expr(self.key)]


class Call(Atom):
    """`fn(*args)` on an expression, evaluated lazily."""

    def __init__(self, obj: Any, args: tuple) -> None:
        if not isinstance(args, tuple):
            raise AssertTypeError(f"type_check.Call: args must be a tuple, got {type(args).__name__}.")
        super().__init__()
        self.obj = obj
        self.args = args

    def __str__(self) -> str:
        return f"{_repr(self.obj)}({', '.join(_repr(a) for a in self.args)})"

    def eval(self) -> Any:
        return _eval_expr(self.obj)(*[_eval_expr(a) for a in self.args])


class UnaryOperator(Expr):
    """`exp term` (for example `-x`), parenthesising a term that binds looser."""

    def __init__(self, priority: int, term: Any, exp: str, func: Callable) -> None:
        super().__init__(priority)
        self.term = term
        self.exp = exp
        self.func = func

    def eval(self) -> Any:
        return self.func(_eval_expr(self.term))

    def __str__(self) -> str:
        text = _repr(self.term)
        if isinstance(self.term, Expr) and self.term.priority < self.priority:
            text = f"({text})"
        return self.exp + text


class BinaryOperator(Expr):
    """`lhs exp rhs`, parenthesising operands as Python's precedence and associativity need."""

    def __init__(
        self, priority: int, lhs: Any, rhs: Any, exp: str, func: Callable,
        right_associative: bool = False,
    ) -> None:
        super().__init__(priority)
        self.lhs = lhs
        self.rhs = rhs
        self.exp = exp
        self.func = func
        self.right_associative = right_associative

    def _eval_left(self) -> Any:
        return _eval_expr(self.lhs)

    def _eval_right(self) -> Any:
        return _eval_expr(self.rhs)

    def eval(self) -> Any:
        return self.func(self._eval_left(), self._eval_right())

    def __str__(self) -> str:
        left = _repr(self.lhs)
        if isinstance(self.lhs, Expr) and (
            self.priority > self.lhs.priority
            or (self.right_associative and self.priority == self.lhs.priority)
        ):
            left = f"({left})"
        right = _repr(self.rhs)
        if isinstance(self.rhs, Expr) and (
            self.priority > self.rhs.priority
            or (not self.right_associative and self.priority == self.rhs.priority)
        ):
            right = f"({right})"
        return f"{left} {self.exp} {right}"


class Testable:
    """Something `expect` can test: `expect()` raises InvalidType when it does not hold."""

    def expect(self) -> None:
        raise NotImplementedError


class BoolBinaryOperator(BinaryOperator, Testable):
    """A comparison; when false it reports the values with the opposite operator (3 != 2)."""

    def __init__(self, lhs: Any, rhs: Any, exp: str, inv: str, func: Callable) -> None:
        super().__init__(_COMPARE, lhs, rhs, exp, func)
        self.inv = inv

    def expect(self) -> None:
        left = self._eval_left()
        right = self._eval_right()
        if not self.func(left, right):
            # Written with str(), as Chainer does: numpy.float32 shows as <class 'numpy.float32'>.
            raise InvalidType(f"{self.lhs} {self.exp} {self.rhs}", f"{left} {self.inv} {right}")


def _get_type(name: str, index: int, array: Any, accept_none: bool) -> Variable:
    label = f"{name}[{index}]"
    if accept_none and array is None:
        return Variable(TypeInfo((), None), label)
    if not hasattr(array, "shape") or not hasattr(array, "dtype"):
        raise AssertTypeError(
            f"type_check: {label} must be a numpy or cupy array, got {type(array).__name__}"
            + (" (a Variable without data?)" if array is None else "") + "."
        )
    return Variable(TypeInfo(array.shape, array.dtype), label)


def get_types(data: tuple, name: str, accept_none: bool) -> TypeInfoTuple:
    """The TypeInfoTuple of a tuple of arrays, each a Variable named '<name>[i]'."""
    if not isinstance(data, tuple):
        raise AssertTypeError(
            f"type_check.get_types: data must be a tuple of arrays, got {type(data).__name__}."
        )
    info = TypeInfoTuple(_get_type(name, i, x, accept_none) for i, x in enumerate(data))
    info.name = name
    return info


def expect(*bool_exprs: Any) -> None:
    """Test each condition in order; raise InvalidType at the first that does not hold.

    Conditions are comparisons of expressions (Testable); plain bools and other expressions
    are accepted too and reported as written.
    """
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
            raise AssertTypeError(
                f"type_check.expect: expected comparisons on type expressions (such as "
                f"x_type.ndim == 2) or bools, got {type(cond).__name__}: {cond!r}."
            )


def eval(exp: Any) -> Any:  # noqa: A001 - later Chainer's type_check.eval
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
