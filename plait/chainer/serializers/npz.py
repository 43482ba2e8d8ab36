"""NPZ serialization: a flat dict of arrays keyed by hierarchy path, written with numpy.savez."""
from typing import Any, Optional

import numpy

from ..._safeio import write_file_atomically
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


class NpzDeserializer(Deserializer):
    """Reads values from a loaded NPZ (or any mapping of arrays), starting at `path`."""

    def __init__(self, npz: Any, path: str = "", strict: bool = True) -> None:
        self.npz = npz
        self.path = path
        self.strict = strict

    def __getitem__(self, key: str) -> "NpzDeserializer":
        return NpzDeserializer(self.npz, self.path + key.strip("/") + "/", self.strict)

    def __call__(self, key: str, value: Any) -> Any:
        full = self.path + key.lstrip("/")
        try:
            dataset = self.npz[full]
        except KeyError:
            if not self.strict:
                return value
            keys = sorted(getattr(self.npz, "files", None) or list(self.npz.keys()))
            shown = ", ".join(keys[:10]) + (", ..." if len(keys) > 10 else "")
            raise KeyError(
                f"NpzDeserializer: key {full!r} is not in the file (it holds {len(keys)} keys: "
                f"{shown}). The file was saved from a different model or with other link names."
            ) from None
        return _restore(full, dataset, value)


def _restore(key: str, dataset: Any, value: Any) -> Any:
    dataset = numpy.asarray(dataset)
    if value is None:
        return dataset
    if isinstance(value, numpy.ndarray) or is_cupy_array(value):
        if tuple(dataset.shape) != tuple(value.shape):
            raise ValueError(
                f"Deserializer: {key!r} has shape {tuple(dataset.shape)} in the file but the target "
                f"array has shape {tuple(value.shape)}; the model does not match the file."
            )
        if isinstance(value, numpy.ndarray):
            numpy.copyto(value, dataset, casting="unsafe")
        else:
            value.set(numpy.ascontiguousarray(dataset, dtype=value.dtype))
        return value
    if isinstance(value, (bool, numpy.bool_)):
        return type(value)(dataset.item())
    if isinstance(value, (int, float, complex, str, numpy.generic)):
        return type(value)(dataset.item())
    return dataset


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


def load_npz(filename: Any, obj: Any) -> None:
    """Load obj (a Link or an Optimizer) in place from an NPZ file written by save_npz or Chainer."""
    with numpy.load(filename, allow_pickle=False) as f:
        NpzDeserializer(f).load(obj)
