"""NPZ serialization: a flat dict of arrays keyed by hierarchy path, written with numpy.savez."""
import contextlib
from typing import Any, Iterator, Optional

import numpy

from ..._safeio import FileFormatError, NpzArchive, write_file_atomically
from ...util import is_cupy_array
from ..serializer import Deserializer, Serializer

__all__ = ["DictionarySerializer", "NpzDeserializer", "save_npz", "load_npz"]


class DictionarySerializer(Serializer):
    """Collects values into a flat dict {'path/to/key': numpy array}, ready for numpy.savez."""

    def __init__(self, target: Optional[dict] = None, path: str = "") -> None:
        self.target = {} if target is None else target
        self.path = path

    def __getitem__(self, key: str) -> "DictionarySerializer":
        return DictionarySerializer(self.target, self.path + key.strip("/") + "/")

    def __call__(self, key: str, value: Any) -> Any:
        full = self.path + key.lstrip("/")
        if value is None:
            raise TypeError(
                f"DictionarySerializer: cannot save None at {full!r}; NPZ files hold arrays and "
                f"scalars only."
            )
        arr = value.get() if is_cupy_array(value) else numpy.asarray(value)
        self.target[full] = arr
        return value


_MISSING = object()


class _Session:
    """Shared by a deserializer and its children during load().

    mode "plan": read and check every value, change nothing (results kept by key);
    mode "apply": write the checked results;
    mode "once": one walk, the in-place array writes held back in `pending` until it ends.
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.results: dict = {}
        self.pending: list = []


def _serialize_is_plaits(obj: Any) -> bool:
    """Whether obj.serialize is plait's own (a Link, Chain, ChainList or Optimizer that does not
    override it), which has no side effects beyond the values it is handed: safe to walk twice."""
    fn = getattr(type(obj), "serialize", None)
    return getattr(fn, "__module__", "").startswith("plait.chainer.")


class _TwoPhaseDeserializer(Deserializer):
    """load(obj): all or nothing.

    For plait's own Links and Optimizers, obj is walked twice: first every value is read and
    checked (nothing changes, scalars such as an optimizer's `t` included), then the checked
    values are written. Any other obj (a class with its own serialize) is walked once, as
    Chainer does: every value is read and checked as it is asked for, the arrays to overwrite in
    place are written only after the walk ended without an error, and scalars go back to the
    caller at once (it assigns them itself).
    """

    _session: Optional[_Session] = None

    def _where(self, key: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _lookup(self, key: str, value: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _adopt(self, child: "_TwoPhaseDeserializer") -> "_TwoPhaseDeserializer":
        child._session = self._session
        return child

    def __call__(self, key: str, value: Any) -> Any:
        where = self._where(key)
        session = self._session
        if session is not None and session.mode == "apply":
            if where not in session.results:
                return value
            return _apply(session.results[where], value)
        dataset = self._lookup(key, value)
        if dataset is _MISSING:
            return value
        converted = _convert(where, dataset, value)
        if session is None:
            return _apply(converted, value)
        if session.mode == "plan":
            session.results[where] = converted
            return value
        if isinstance(value, numpy.ndarray) or is_cupy_array(value):
            session.pending.append((converted, value))
            return value
        return _apply(converted, value)

    def load(self, obj: Any) -> None:
        """Load obj in place, all or nothing (see the class)."""
        twice = _serialize_is_plaits(obj)
        session = _Session("plan" if twice else "once")
        self._session = session
        try:
            obj.serialize(self)
            if twice:
                session.mode = "apply"
                obj.serialize(self)
        finally:
            self._session = None
        for converted, value in session.pending:
            _apply(converted, value)


class NpzDeserializer(_TwoPhaseDeserializer):
    """Reads values from a loaded NPZ (or any mapping of arrays), starting at `path`."""

    def __init__(self, npz: Any, path: str = "", strict: bool = True) -> None:
        self.npz = npz
        self.path = path
        self.strict = strict

    def __getitem__(self, key: str) -> "NpzDeserializer":
        return self._adopt(NpzDeserializer(self.npz, self.path + key.strip("/") + "/", self.strict))

    def _where(self, key: str) -> str:
        return self.path + key.lstrip("/")

    def _lookup(self, key: str, value: Any) -> Any:
        full = self._where(key)
        if full not in self.npz:
            if not self.strict:
                return _MISSING
            keys = sorted(getattr(self.npz, "files", None) or list(self.npz.keys()))
            shown = ", ".join(keys[:10]) + (", ..." if len(keys) > 10 else "")
            raise KeyError(
                f"NpzDeserializer: key {full!r} is not in the file (it holds {len(keys)} keys: "
                f"{shown}). The file was saved from a different model or with other link names."
            )
        if isinstance(self.npz, NpzArchive):
            return self.npz.read(full, expect=lambda name, shape, dtype: _check_declared(name, shape, dtype, value))
        return self.npz[full]


def _describe(value: Any) -> str:
    if isinstance(value, numpy.ndarray) or is_cupy_array(value):
        return f"an array of shape {tuple(value.shape)} and dtype {value.dtype}"
    return f"a {type(value).__name__}"


def _check_declared(key: str, shape: Any, dtype: numpy.dtype, value: Any) -> None:
    """Refuse a file's array by its declared shape and dtype, before its data are read."""
    if isinstance(value, numpy.ndarray) or is_cupy_array(value):
        if tuple(shape) != tuple(value.shape):
            raise ValueError(
                f"Deserializer: {key!r} has shape {tuple(shape)} in the file but the target "
                f"array has shape {tuple(value.shape)}; the model does not match the file."
            )
    _check_kind(key, numpy.dtype(dtype), value)


_NUMERIC = "biuf"


def _check_kind(key: str, dtype: numpy.dtype, value: Any) -> None:
    if isinstance(value, numpy.ndarray) or is_cupy_array(value) or isinstance(value, numpy.generic):
        target = numpy.dtype(value.dtype)
        ok = dtype.kind in _NUMERIC + "c" and numpy.can_cast(dtype, target, casting="same_kind")
        if target.kind in "US":
            ok = dtype.kind in "US"
    elif isinstance(value, (bool, numpy.bool_)):
        ok = dtype.kind in "biu"
    elif isinstance(value, int):
        ok = dtype.kind in "biu"
    elif isinstance(value, float):
        ok = dtype.kind in _NUMERIC
    elif isinstance(value, complex):
        ok = dtype.kind in _NUMERIC + "c"
    elif isinstance(value, str):
        ok = dtype.kind in "US"
    else:
        ok = dtype.kind in _NUMERIC + "c"
    if not ok:
        raise ValueError(
            f"Deserializer: {key!r} has dtype {dtype} in the file, which cannot be loaded safely into "
            f"{_describe(value)} (only same-kind casts: no complex, strings, dates or objects into "
            f"numbers, no floats into integers); the file does not match the model."
        )


def _convert(key: str, dataset: Any, value: Any) -> Any:
    """The value to store for `value` from the file's `dataset`, checked; nothing is changed."""
    dataset = numpy.asarray(dataset)
    if dataset.dtype.hasobject:
        raise ValueError(f"Deserializer: {key!r} holds Python objects; plait never loads them.")
    _check_declared(key, dataset.shape, dataset.dtype, value)
    if value is None:
        return dataset.copy()
    if isinstance(value, numpy.ndarray) or is_cupy_array(value):
        return numpy.array(dataset, dtype=value.dtype, copy=True)
    if dataset.size != 1:
        raise ValueError(
            f"Deserializer: {key!r} has shape {tuple(dataset.shape)} in the file where {_describe(value)} "
            f"(one value) is expected; the model does not match the file."
        )
    if isinstance(value, numpy.generic):
        return value.dtype.type(dataset.reshape(())[()])
    if isinstance(value, (bool, numpy.bool_, int, float, complex, str)):
        return type(value)(dataset.item())
    return dataset.copy()


def _apply(converted: Any, value: Any) -> Any:
    if isinstance(value, numpy.ndarray):
        numpy.copyto(value, converted)
        return value
    if is_cupy_array(value):
        value.set(numpy.ascontiguousarray(converted, dtype=value.dtype))
        return value
    return converted


def _atomic_write(filename: Any, write: Any) -> None:
    """Write through plait's one atomic writer (plait._safeio); a file object is written directly."""
    if hasattr(filename, "write"):
        write(filename)
        return
    write_file_atomically(filename, write)


def save_npz(filename: Any, obj: Any, compression: bool = True) -> None:
    """Save obj (a Link or an Optimizer) to an NPZ file, atomically; no '.npz' is appended."""
    s = DictionarySerializer()
    s.save(obj)
    savez = numpy.savez_compressed if compression else numpy.savez
    _atomic_write(filename, lambda f: savez(f, **s.target))


def load_npz(filename: Any, obj: Any, path: str = "", strict: bool = True) -> None:
    """Load obj (a Link or an Optimizer) in place from an NPZ file written by save_npz or Chainer.

    The file is read through plait._safeio (a regular file within the size limit; each array's
    declared shape and dtype checked against obj before its data are read; never a pickle), and
    the load is all or nothing: on any error obj is left as it was.
    """
    with NpzArchive(filename) as archive:
        with _naming_file(archive.name):
            NpzDeserializer(archive, path=path, strict=strict).load(obj)


@contextlib.contextmanager
def _naming_file(name: str) -> Iterator[None]:
    """Prefix the file's name to a mismatch found while loading (file errors name it already)."""
    try:
        yield
    except FileFormatError:
        raise
    except ValueError as err:
        raise ValueError(f"Cannot load {name!r}: {err}") from None
