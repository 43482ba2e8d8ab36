"""Array annotations and batch containers of the Thinc face (mirrors `thinc.types`).

The array classes (`Floats2d`, `Ints1d`, ...) are never instantiated: they name
numpy/cupy arrays by rank and dtype kind for annotations, and carry a `validate`
classmethod plus the hooks pydantic looks for, so data validation can check a
value without this module importing pydantic. `Ragged`, `Padded`, `Pairs`,
`ArgsKwargs`, `SizedGenerator` and `Unserializable` are the batch containers that
layers pass between each other.

Importing this module never imports cupy, torch, tensorflow, mxnet or pydantic.
"""
from __future__ import annotations

import importlib
from abc import abstractmethod
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    ClassVar,
    Container,
    Dict,
    Generic,
    Iterable,
    Iterator,
    List,
    Literal,
    Optional,
    Protocol,
    Sequence,
    Sized,
    Tuple,
    TypeVar,
    Union,
    cast,
)

import numpy

__all__ = [
    "ArgsKwargs",
    "Array1d",
    "Array1dT",
    "Array2d",
    "Array3d",
    "Array4d",
    "ArrayT",
    "ArrayXd",
    "Batchable",
    "DTypes",
    "DTypesFloat",
    "DTypesInt",
    "Decorator",
    "DeviceTypes",
    "Fal",
    "Floats1d",
    "Floats2d",
    "Floats3d",
    "Floats4d",
    "FloatsT",
    "FloatsXd",
    "FloatsXdT",
    "FourAx",
    "Generator",
    "Ints1d",
    "Ints2d",
    "Ints3d",
    "Ints4d",
    "IntsXd",
    "List1d",
    "List2d",
    "List3d",
    "List4d",
    "ListXd",
    "OneAx",
    "Padded",
    "Pairs",
    "Ragged",
    "SelfT",
    "Shape",
    "SizedGenerator",
    "Slicish",
    "ThreeAx",
    "Tru",
    "TwoAx",
    "Unserializable",
    "XY_XY_OutT",
    "XY_YZ_OutT",
    "Xp",
    "get_array_module",
    "validate_array",
]

# ---------------------------------------------------------------------------
# Plain aliases
# ---------------------------------------------------------------------------

XY_YZ_OutT = TypeVar("XY_YZ_OutT")
XY_XY_OutT = TypeVar("XY_XY_OutT")
ArrayT = TypeVar("ArrayT")
SelfT = TypeVar("SelfT")

DeviceTypes = Literal["cpu", "gpu", "tpu"]
Xp = Union["numpy", "cupy"]  # type: ignore[name-defined]
Shape = Tuple[int, ...]
DTypes = Literal["f", "i", "float16", "float32", "float64", "int32", "int64", "uint32", "uint64"]
DTypesFloat = Literal["f", "float32", "float16", "float64"]
DTypesInt = Literal["i", "int32", "int64", "uint32", "uint64"]

Tru = Literal[True]
Fal = Literal[False]
OneAx = Union[int, Tuple[int]]
TwoAx = Tuple[int, int]
ThreeAx = Tuple[int, int, int]
FourAx = Tuple[int, int, int, int]


# ---------------------------------------------------------------------------
# Finding the array module without importing cupy
# ---------------------------------------------------------------------------


def get_array_module(obj: Any) -> Any:
    """Return `cupy` for a cupy array (or cupyx sparse matrix), else `numpy`.

    A cupy object can only exist once cupy has been imported, so the lookup
    never triggers the import of cupy itself.
    """
    root = type(obj).__module__.partition(".")[0]
    if root in ("cupy", "cupyx"):
        return importlib.import_module("cupy")
    return numpy


def __getattr__(name: str) -> Any:
    # `thinc.types` re-exports `cupy` and `has_cupy` from its compat module.
    # Resolving them here on demand keeps `import plait.types` free of cupy.
    if name in ("cupy", "has_cupy"):
        try:
            compat = importlib.import_module(__name__.rpartition(".")[0] + ".compat")
        except ImportError as err:
            raise AttributeError(
                f"module {__name__!r} cannot provide {name!r}: plait.compat failed to import ({err})"
            ) from err
        return getattr(compat, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


class _KindError(TypeError, ValueError):
    """Raised when a value is of the wrong kind altogether.

    It is a `TypeError` by house style, and also a `ValueError` so that pydantic
    (which only converts `ValueError`/`AssertionError` raised by validators) and
    code written against `thinc.types.validate_array` both treat it as a
    validation failure.
    """


# Kinds in numpy's `dtype.kind` sense: "f" floating, "i" signed, "u" unsigned.
_KIND_NAMES = {"f": "a float", "i": "an integer"}
_KIND_CODES = {"f": ("f",), "i": ("i", "u")}


def validate_array(obj: Any, ndim: Optional[int] = None, dtype: Optional[str] = None, *, name: Optional[str] = None) -> Any:
    """Check that `obj` is a numpy/cupy array with `ndim` dims and dtype `dtype`; return it.

    `dtype` is a kind code (`"f"`: any float dtype, `"i"`: any signed or unsigned
    integer dtype) or a concrete dtype name such as `"float32"`. `name` is the
    annotation being checked and only appears in error messages.
    """
    what = name or "validate_array"
    xp = get_array_module(obj)
    if not isinstance(obj, xp.ndarray):
        raise _KindError(
            f"{what}: expected a numpy or cupy array, got {type(obj).__module__}.{type(obj).__qualname__}. "
            "Convert it first, e.g. with ops.asarray(...)."
        )
    errors = []
    if ndim is not None and obj.ndim != ndim:
        errors.append(f"expected {ndim} dimensions, got {obj.ndim} (shape {tuple(obj.shape)})")
    if dtype is not None:
        if dtype in _KIND_CODES:
            if obj.dtype.kind not in _KIND_CODES[dtype]:
                errors.append(f"expected {_KIND_NAMES[dtype]} dtype, got {obj.dtype}")
        elif obj.dtype != numpy.dtype(dtype):
            errors.append(f"expected dtype {dtype}, got {obj.dtype}")
    if errors:
        raise ValueError(f"{what}: wrong array: " + "; ".join(errors) + ". Reshape or cast the array (e.g. ops.asarray2f) before passing it.")
    return obj


# ---------------------------------------------------------------------------
# Array annotations
# ---------------------------------------------------------------------------


class _Array(Sized, Container):
    """A numpy or cupy array of any rank, as a static type; never instantiated.

    Subclasses set `_ndim` and `_kind`; `validate` checks a runtime value against
    them. The method stubs only describe the ndarray surface to type checkers.
    """

    _ndim: ClassVar[Optional[int]] = None
    _kind: ClassVar[Optional[str]] = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{cls.__name__} is an annotation for numpy/cupy arrays and cannot be instantiated. "
            "Create the array with numpy or an Ops method (e.g. ops.alloc2f) instead."
        )

    @classmethod
    def validate(cls, value: Any) -> Any:
        """Return `value` if it is an array of this rank and dtype kind, else raise."""
        return validate_array(value, ndim=cls._ndim, dtype=cls._kind, name=cls.__name__)

    @classmethod
    def __get_pydantic_core_schema__(cls, source_type: Any, handler: Any) -> Any:
        # Only pydantic calls this, so pydantic_core is importable at that point.
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(cls.validate)

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> Dict[str, Any]:
        desc = cls.__name__ if cls._ndim is None else f"{cls.__name__}: {cls._ndim}-dimensional array"
        return {"type": "array", "description": desc}

    @classmethod
    def __get_validators__(cls) -> Iterator[Callable[[Any], Any]]:
        # pydantic v1 protocol
        yield cls.validate

    # --- ndarray surface, for type checkers only -------------------------
    T: Any
    dtype: Any
    shape: Shape
    ndim: int
    size: int
    itemsize: int
    nbytes: int
    strides: Tuple[int, ...]
    flags: Any

    @abstractmethod
    def __len__(self) -> int: ...
    @abstractmethod
    def __contains__(self, key: Any) -> bool: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __getitem__(self, key: Any) -> Any: ...
    def __setitem__(self, key: Any, value: Any) -> None: ...
    def astype(self, dtype: Any, order: str = ..., casting: str = ..., subok: bool = ..., copy: bool = ...) -> Any: ...
    def copy(self: ArrayT, order: str = ...) -> ArrayT: ...
    def fill(self, value: Any) -> None: ...
    def reshape(self, *shape: Any, order: str = ...) -> Any: ...
    def transpose(self, *axes: Any) -> Any: ...
    def flatten(self, order: str = ...) -> Any: ...
    def ravel(self, order: str = ...) -> Any: ...
    def squeeze(self, axis: Any = ...) -> Any: ...
    def sum(self, axis: Any = ..., dtype: Any = ..., out: Any = ..., keepdims: bool = ...) -> Any: ...
    def mean(self, axis: Any = ..., dtype: Any = ..., out: Any = ..., keepdims: bool = ...) -> Any: ...
    def max(self, axis: Any = ..., out: Any = ..., keepdims: bool = ...) -> Any: ...
    def min(self, axis: Any = ..., out: Any = ..., keepdims: bool = ...) -> Any: ...
    def prod(self, axis: Any = ..., dtype: Any = ..., out: Any = ..., keepdims: bool = ...) -> Any: ...
    def var(self, axis: Any = ..., dtype: Any = ..., out: Any = ..., ddof: int = ..., keepdims: bool = ...) -> Any: ...
    def std(self, axis: Any = ..., dtype: Any = ..., out: Any = ..., ddof: int = ..., keepdims: bool = ...) -> Any: ...
    def argmax(self, axis: Any = ..., out: Any = ..., keepdims: bool = ...) -> Any: ...
    def argmin(self, axis: Any = ..., out: Any = ..., keepdims: bool = ...) -> Any: ...
    def cumsum(self, axis: Any = ..., dtype: Any = ..., out: Any = ...) -> Any: ...
    def all(self, axis: Any = ..., out: Any = ..., keepdims: bool = ...) -> Any: ...
    def any(self, axis: Any = ..., out: Any = ..., keepdims: bool = ...) -> Any: ...
    def clip(self, a_min: Any, a_max: Any, out: Any = ...) -> Any: ...
    def round(self, decimals: int = ..., out: Any = ...) -> Any: ...
    def nonzero(self) -> Any: ...
    def item(self, *args: Any) -> Any: ...
    def tolist(self) -> Any: ...
    def tobytes(self, order: str = ...) -> bytes: ...
    def get(self, *args: Any, **kwargs: Any) -> Any: ...
    def __array__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __bool__(self) -> bool: ...
    def __float__(self) -> float: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...
    def __neg__(self: ArrayT) -> ArrayT: ...
    def __pos__(self: ArrayT) -> ArrayT: ...
    def __abs__(self: ArrayT) -> ArrayT: ...
    def __invert__(self: ArrayT) -> ArrayT: ...
    def __lt__(self, other: Any) -> Any: ...
    def __le__(self, other: Any) -> Any: ...
    def __gt__(self, other: Any) -> Any: ...
    def __ge__(self, other: Any) -> Any: ...
    def __eq__(self, other: Any) -> Any: ...  # type: ignore[override]
    def __ne__(self, other: Any) -> Any: ...  # type: ignore[override]
    def __add__(self, other: Any) -> Any: ...
    def __radd__(self, other: Any) -> Any: ...
    def __iadd__(self: ArrayT, other: Any) -> ArrayT: ...
    def __sub__(self, other: Any) -> Any: ...
    def __rsub__(self, other: Any) -> Any: ...
    def __isub__(self: ArrayT, other: Any) -> ArrayT: ...
    def __mul__(self, other: Any) -> Any: ...
    def __rmul__(self, other: Any) -> Any: ...
    def __imul__(self: ArrayT, other: Any) -> ArrayT: ...
    def __truediv__(self, other: Any) -> Any: ...
    def __rtruediv__(self, other: Any) -> Any: ...
    def __itruediv__(self: ArrayT, other: Any) -> ArrayT: ...
    def __floordiv__(self, other: Any) -> Any: ...
    def __rfloordiv__(self, other: Any) -> Any: ...
    def __mod__(self, other: Any) -> Any: ...
    def __rmod__(self, other: Any) -> Any: ...
    def __pow__(self, other: Any) -> Any: ...
    def __rpow__(self, other: Any) -> Any: ...
    def __ipow__(self: ArrayT, other: Any) -> ArrayT: ...
    def __matmul__(self, other: Any) -> Any: ...
    def __rmatmul__(self, other: Any) -> Any: ...
    def __and__(self, other: Any) -> Any: ...
    def __or__(self, other: Any) -> Any: ...
    def __xor__(self, other: Any) -> Any: ...


class _Floats(_Array):
    """An array with a floating-point dtype."""

    _kind = "f"

    def fill(self, value: float) -> None: ...


class _Ints(_Array):
    """An array with an integer dtype."""

    _kind = "i"

    def fill(self, value: int) -> None: ...


class _Array1d(_Array):
    """1-dimensional array, `(n,)`."""

    _ndim = 1
    shape: Tuple[int]
    ndim: Literal[1]


class _Array2d(_Array):
    """2-dimensional array, `(n0, n1)`."""

    _ndim = 2
    shape: Tuple[int, int]
    ndim: Literal[2]


class _Array3d(_Array):
    """3-dimensional array, `(n0, n1, n2)`."""

    _ndim = 3
    shape: Tuple[int, int, int]
    ndim: Literal[3]


class _Array4d(_Array):
    """4-dimensional array, `(n0, n1, n2, n3)`."""

    _ndim = 4
    shape: Tuple[int, int, int, int]
    ndim: Literal[4]


class Floats1d(_Array1d, _Floats):
    """1-dimensional array of floats, `(n,)`."""

    T: Floats1d

    def __iter__(self) -> Iterator[float]: ...


class Ints1d(_Array1d, _Ints):
    """1-dimensional array of ints, `(n,)`."""

    T: Ints1d

    def __iter__(self) -> Iterator[int]: ...


class Floats2d(_Array2d, _Floats):
    """2-dimensional array of floats, `(n0, n1)`."""

    T: Floats2d

    def __iter__(self) -> Iterator[Floats1d]: ...


class Ints2d(_Array2d, _Ints):
    """2-dimensional array of ints, `(n0, n1)`."""

    T: Ints2d

    def __iter__(self) -> Iterator[Ints1d]: ...


class Floats3d(_Array3d, _Floats):
    """3-dimensional array of floats, `(n0, n1, n2)`."""

    T: Floats3d

    def __iter__(self) -> Iterator[Floats2d]: ...


class Ints3d(_Array3d, _Ints):
    """3-dimensional array of ints, `(n0, n1, n2)`."""

    T: Ints3d

    def __iter__(self) -> Iterator[Ints2d]: ...


class Floats4d(_Array4d, _Floats):
    """4-dimensional array of floats, `(n0, n1, n2, n3)`."""

    T: Floats4d

    def __iter__(self) -> Iterator[Floats3d]: ...


class Ints4d(_Array4d, _Ints):
    """4-dimensional array of ints, `(n0, n1, n2, n3)`."""

    T: Ints4d

    def __iter__(self) -> Iterator[Ints3d]: ...


# The unions name real classes (not strings) so that pydantic and
# typing.get_type_hints can resolve them from any module.
Array1d = Union[Floats1d, Ints1d]
Array2d = Union[Floats2d, Ints2d]
Array3d = Union[Floats3d, Ints3d]
Array4d = Union[Floats4d, Ints4d]
FloatsXd = Union[Floats1d, Floats2d, Floats3d, Floats4d]
IntsXd = Union[Ints1d, Ints2d, Ints3d, Ints4d]
ArrayXd = Union[FloatsXd, IntsXd]
List1d = Union[List[Floats1d], List[Ints1d]]
List2d = Union[List[Floats2d], List[Ints2d]]
List3d = Union[List[Floats3d], List[Ints3d]]
List4d = Union[List[Floats4d], List[Ints4d]]
ListXd = Union[List1d, List2d, List3d, List4d]

Array1dT = TypeVar("Array1dT", bound=Array1d)
FloatsXdT = TypeVar("FloatsXdT", Floats1d, Floats2d, Floats3d, Floats4d)
FloatsT = TypeVar("FloatsT", bound=_Floats)

Slicish = Union[slice, List[int], ArrayXd]


# ---------------------------------------------------------------------------
# Callables and iterables
# ---------------------------------------------------------------------------

_DIn = TypeVar("_DIn")


class Decorator(Protocol):
    """A registry-style decorator factory: `deco(name)(func)` returns `func` unchanged."""

    def __call__(self, name: str) -> Callable[[_DIn], _DIn]: ...


class Generator(Iterator):
    """Annotation for arguments that take an iterator/generator, with a pydantic validator."""

    @classmethod
    def validate(cls, value: Any) -> Any:
        """Return `value` if it can be iterated, else raise."""
        if not hasattr(value, "__iter__") and not hasattr(value, "__next__"):
            raise _KindError(
                f"Generator: expected an iterator or iterable, got {type(value).__qualname__}. "
                "Pass a generator, an iterator or a sequence."
            )
        return value

    @classmethod
    def __get_validators__(cls) -> Iterator[Callable[[Any], Any]]:
        yield cls.validate

    @classmethod
    def __get_pydantic_core_schema__(cls, source_type: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(cls.validate)

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> Dict[str, Any]:
        return {"description": "an iterator or iterable"}


@dataclass
class SizedGenerator:
    """An iterable with a known length that calls `get_items()` afresh on every pass."""

    get_items: Callable[[], Iterator[Any]]
    length: int

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[Any]:
        yield from self.get_items()


# ---------------------------------------------------------------------------
# Index helpers shared by Ragged and Padded
# ---------------------------------------------------------------------------


def _as_int_index(index: Any) -> Optional[int]:
    """Return `index` as a Python int if it is a scalar integer index, else None."""
    if isinstance(index, numpy.bool_):
        return None
    if isinstance(index, (int, numpy.integer)):
        return int(index)
    if getattr(index, "ndim", None) == 0 and getattr(getattr(index, "dtype", None), "kind", None) in ("i", "u"):
        return int(index)
    return None


def _normalize_int(i: int, n: int, owner: str) -> int:
    j = i + n if i < 0 else i
    if not 0 <= j < n:
        raise IndexError(f"{owner} index {i} is out of range for {n} sequences.")
    return j


def _positions(index: Any, n: int, xp: Any, owner: str) -> Any:
    """Turn an index list/array or boolean mask over `n` sequences into non-negative int positions."""
    if isinstance(index, (list, range)) or not hasattr(index, "dtype"):
        try:
            index = numpy.asarray(index)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{owner} cannot be indexed with {type(index).__qualname__}: {err}") from err
        if index.size == 0:
            index = index.astype("int64")
        index = xp.asarray(index)
    elif xp is not numpy and isinstance(index, numpy.ndarray):
        # Host indices into device data (Ops.minibatch draws its order with numpy).
        index = xp.asarray(index)
    if index.ndim != 1:
        raise IndexError(
            f"{owner} index arrays must be 1-dimensional, got shape {tuple(index.shape)}. "
            "Ragged and Padded only select whole sequences."
        )
    kind = index.dtype.kind
    if kind == "b":
        if index.shape[0] != n:
            raise IndexError(f"{owner} boolean mask has length {index.shape[0]}, expected {n} (one per sequence).")
        return xp.nonzero(index)[0]
    if kind not in "iu":
        raise TypeError(f"{owner} index arrays must hold integers or booleans, got dtype {index.dtype}.")
    if index.shape[0] == 0:
        return index.astype("int64")
    positions = xp.where(index < 0, index + n, index)
    # NOTE: a bounds check needs the min/max on the host, which syncs a GPU
    # array; out-of-range gathers would otherwise fail later with no context.
    lo, hi = int(positions.min()), int(positions.max())
    if lo < 0 or hi >= n:
        bad = int(index[int(xp.argmax((positions < 0) | (positions >= n)))])
        raise IndexError(f"{owner} index {bad} is out of range for {n} sequences.")
    return positions


# ---------------------------------------------------------------------------
# Batch containers
# ---------------------------------------------------------------------------


@dataclass
class Padded:
    """A batch of sequences padded to one length and sorted by decreasing length.

    data: (nS, nB, ...) time-major; size_at_t: (nS,) how many sequences are still
    running at step t; lengths: (nB,) the length of each column; indices: (nB,)
    each column's position in the original, unsorted batch.
    """

    data: Array3d
    size_at_t: Ints1d
    lengths: Ints1d
    indices: Ints1d

    def __post_init__(self) -> None:
        for field in ("data", "size_at_t", "lengths", "indices"):
            value = getattr(self, field)
            if not hasattr(value, "shape") or not hasattr(value, "ndim"):
                raise TypeError(
                    f"Padded.{field} must be a numpy or cupy array, got {type(value).__qualname__}. "
                    "Build Padded objects with ops.list2padded(...) or pass arrays."
                )
        # NOTE: no shape checks here. Thinc builds Padded objects whose lengths/indices do not
        # (yet) match the data, e.g. as placeholders for type dispatch, and code written for it
        # relies on that; the ops that read a Padded (padded2list, with_padded) check what they use.

    @property
    def dataXd(self) -> ArrayXd:
        """The padded data, `(nS, nB, ...)` (already in its full rank)."""
        return self.data

    def copy(self) -> Padded:
        """Return a Padded whose four arrays are copies."""
        return Padded(self.data.copy(), self.size_at_t.copy(), self.lengths.copy(), self.indices.copy())

    def __len__(self) -> int:
        return self.lengths.shape[0]

    def __getitem__(self, index: Union[int, slice, Ints1d, List[int]]) -> Padded:
        """Select sequences (batch columns); the result keeps all nS steps.

        An int keeps the batch axis (`p[i]` has nB == 1). Slices with step > 0
        give views; negative steps and index arrays are sorted first so the
        decreasing-length order and the data/indices alignment are kept.
        `size_at_t` is recomputed from the selected lengths.
        """
        n = len(self)
        xp = get_array_module(self.data)
        if isinstance(index, tuple):
            raise IndexError("Padded does not support multi-dimensional indexing; index sequences only, e.g. padded[1:3].")
        i = _as_int_index(index)
        if i is not None:
            j = _normalize_int(i, n, "Padded")
            index = slice(j, j + 1)
        if isinstance(index, slice):
            r = range(*index.indices(n))
            if r.step < 0:
                r = r[::-1] if len(r) else range(0, 0)
            sel: Any = slice(r.start, r.stop, r.step)
        else:
            sel = xp.sort(_positions(index, n, xp, "Padded"))
        lengths = self.lengths[sel]
        nS = self.data.shape[0]
        steps = xp.arange(nS, dtype=lengths.dtype)
        size_at_t = (lengths[None, :] > steps[:, None]).sum(axis=1).astype(self.size_at_t.dtype)
        return Padded(self.data[:, sel], size_at_t, lengths, self.indices[sel])


@dataclass
class Ragged:
    """A batch of variable-length sequences concatenated along axis 0.

    data: (sum(lengths), nF) with nF the product of the trailing dims of the
    array given; `dataXd` restores those dims. lengths: (nB,). Indexing selects
    sequences, as if indexing `lengths`, and brings their rows along.
    """

    data: Array2d
    lengths: Ints1d
    data_shape: Tuple[int, ...]
    starts_ends: Optional[Ints1d] = None

    def __init__(self, data: ArrayXd, lengths: Ints1d):
        if not hasattr(data, "shape") or not hasattr(data, "reshape"):
            raise TypeError(
                f"Ragged data must be a numpy or cupy array, got {type(data).__qualname__}. "
                "Concatenate the sequences first, e.g. with ops.flatten(seqs)."
            )
        if data.ndim == 0:
            raise ValueError("Ragged data must have at least 1 dimension (rows), got a 0-d array.")
        self.lengths = lengths
        self.data_shape = (-1,) + tuple(data.shape[1:])
        # NOTE: an explicit width instead of -1: numpy cannot infer -1 for
        # arrays of size 0, and (n, 0) data must keep its n rows.
        width = 1
        for dim in data.shape[1:]:
            width *= dim
        self.data = cast(Array2d, data.reshape((data.shape[0], width)))

    @classmethod
    def _from_2d(cls, data: Array2d, lengths: Ints1d, data_shape: Tuple[int, ...]) -> Ragged:
        """Build a Ragged from rows already in 2d layout, keeping the Xd shape."""
        obj = cls.__new__(cls)
        obj.data = data
        obj.lengths = lengths
        obj.data_shape = data_shape
        return obj

    @property
    def dataXd(self) -> ArrayXd:
        """The data with its original trailing dims, `(sum(lengths), ...)`."""
        return cast(ArrayXd, self.data.reshape((self.data.shape[0],) + tuple(self.data_shape[1:])))

    def __len__(self) -> int:
        return self.lengths.shape[0]

    def __getitem__(self, index: Union[int, slice, Array1d, List[int]]) -> Ragged:
        """Select sequences: an int or a step-1 slice gives a view, an index array or mask a copy."""
        if isinstance(index, tuple):
            raise IndexError("Ragged arrays do not support 2d indexing; index sequences only, e.g. ragged[1:3].")
        n = len(self)
        i = _as_int_index(index)
        if i is not None:
            j = _normalize_int(i, n, "Ragged")
            start, end = self._row_span(j, j + 1)
            return Ragged._from_2d(self.data[start:end], self.lengths[j : j + 1], self.data_shape)
        if isinstance(index, slice):
            if index.step not in (None, 1):
                raise ValueError(
                    f"Ragged does not support slices with a step (got step {index.step}): "
                    "the selected rows would not be contiguous. Use an index array, e.g. ragged[xp.arange(0, n, 2)]."
                )
            lo, hi, _ = index.indices(n)
            start, end = self._row_span(lo, hi)
            return Ragged._from_2d(self.data[start:end], self.lengths[lo:hi], self.data_shape)
        xp = get_array_module(self.data)
        pos = _positions(index, n, xp, "Ragged")
        lengths = self.lengths[pos]
        reps = [int(x) for x in lengths.tolist()]
        total = sum(reps)
        starts = self._get_starts()[pos].astype("int64")
        out_starts = xp.cumsum(lengths.astype("int64")) - lengths.astype("int64")
        # Row r of the output, inside selected sequence k, reads input row
        # starts[k] + (r - out_starts[k]).
        rows = xp.arange(total, dtype="int64") + xp.repeat(starts - out_starts, reps)
        return Ragged._from_2d(self.data[rows], lengths, self.data_shape)

    def _row_span(self, lo: int, hi: int) -> Tuple[int, int]:
        """Row range of sequences lo..hi-1 (hi > lo) in `data`; (0, 0) when empty."""
        if hi <= lo:
            return 0, 0
        se = self._get_starts_ends()
        return int(se[lo]), int(se[hi])

    def _get_starts_ends(self) -> Ints1d:
        """Cached `(nB + 1,)` int32 offsets: sequence b spans rows `[se[b], se[b+1])`."""
        if self.starts_ends is None:
            xp = get_array_module(self.lengths)
            starts_ends = xp.zeros(self.lengths.shape[0] + 1, dtype="int32")
            if self.lengths.shape[0]:
                starts_ends[1:] = xp.cumsum(self.lengths)
            self.starts_ends = cast(Ints1d, starts_ends)
        return cast(Ints1d, self.starts_ends)

    def _get_starts(self) -> Ints1d:
        """`(nB,)` first row of each sequence."""
        return self._get_starts_ends()[:-1]

    def _get_ends(self) -> Ints1d:
        """`(nB,)` one past the last row of each sequence."""
        return self._get_starts_ends()[1:]


_P = TypeVar("_P", bound=Sequence)


@dataclass
class Pairs(Generic[_P]):
    """Two aligned sequences that are indexed together: `pairs[i]` indexes both."""

    one: _P
    two: _P

    def __getitem__(self, index: Any) -> Pairs[_P]:
        return Pairs(self.one[index], self.two[index])

    def __len__(self) -> int:
        return len(self.one)


@dataclass
class ArgsKwargs:
    """Positional and keyword arguments to spread into a call: `f(*ak.args, **ak.kwargs)`."""

    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]

    @classmethod
    def from_items(cls, items: Sequence[Tuple[Union[int, str], Any]]) -> ArgsKwargs:
        """Inverse of `items()`: int keys become args (in the order given), str keys kwargs."""
        args: List[Any] = []
        kwargs: Dict[str, Any] = {}
        for key, value in items:
            if isinstance(key, int):
                args.append(value)
            else:
                kwargs[key] = value
        return cls(args=tuple(args), kwargs=kwargs)

    def keys(self) -> Iterable[Union[int, str]]:
        """Positions of the args, then the kwarg names."""
        yield from range(len(self.args))
        yield from self.kwargs.keys()

    def values(self) -> Iterable[Any]:
        """The args, then the kwarg values."""
        yield from self.args
        yield from self.kwargs.values()

    def items(self) -> Iterable[Tuple[Union[int, str], Any]]:
        """`(position, arg)` pairs, then `(name, value)` pairs."""
        yield from enumerate(self.args)
        yield from self.kwargs.items()


@dataclass
class Unserializable:
    """Wrapper marking an attribute value that serialization must skip."""

    obj: Any


Batchable = Union[Pairs, Ragged, Padded, ArrayXd, List, Tuple]
