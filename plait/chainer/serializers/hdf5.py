"""HDF5 serialization (needs the optional h5py package): the hierarchy maps onto HDF5 groups."""
import contextlib
from typing import Any, Iterator

import numpy

from ..._safeio import DamagedFileError, atomic_path, open_hdf5, read_hdf5_dataset
from ...util import is_cupy_array
from ..serializer import Serializer
from .npz import _check_declared, _naming_file, _TwoPhaseDeserializer

__all__ = ["HDF5Serializer", "HDF5Deserializer", "save_hdf5", "load_hdf5"]


def _load_h5py() -> Any:
    # h5py is optional and slow to import, so it is imported on first use, not with the face;
    # `_available` and `h5py` then become ordinary module globals (mock.patch can set them).
    g = globals()
    if "_available" not in g:
        try:
            import h5py as module
        except ImportError:
            module = None
        g.setdefault("h5py", module)
        g["_available"] = module is not None
    return g.get("h5py")


def __getattr__(name: str) -> Any:
    if name in ("_available", "h5py"):
        _load_h5py()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check_available() -> None:
    """Raise RuntimeError (as Chainer does) when h5py is not installed."""
    _load_h5py()
    if not globals()["_available"]:
        raise RuntimeError(
            "plait.chainer.serializers: HDF5 files need the optional 'h5py' package, which is "
            "not installed. Install it (pip install h5py, or plait's 'hdf5' extra), or use "
            "save_npz/load_npz instead."
        )


def _h5py() -> Any:
    _check_available()
    return globals()["h5py"]


class HDF5Serializer(Serializer):
    """Writes values as datasets of an h5py group; children become subgroups."""

    def __init__(self, group: Any, compression: int = 4) -> None:
        _h5py()
        self.group = group
        self.compression = compression

    def __getitem__(self, key: str) -> "HDF5Serializer":
        return HDF5Serializer(self.group.require_group(key.strip("/")), self.compression)

    def __call__(self, key: str, value: Any) -> Any:
        arr = value.get() if is_cupy_array(value) else numpy.asarray(value)
        # gzip cannot compress scalars (HDF5 refuses chunked 0-d datasets).
        compression = self.compression if arr.ndim > 0 and arr.size > 1 else None
        self.group.create_dataset(key, data=arr, compression=compression)
        return value


class HDF5Deserializer(_TwoPhaseDeserializer):
    """Reads values from the datasets of an h5py group (load() is all or nothing)."""

    def __init__(self, group: Any) -> None:
        _h5py()
        self.group = group

    def __getitem__(self, key: str) -> "HDF5Deserializer":
        name = key.strip("/")
        with _damaged_h5(f"{self.group.name.rstrip('/')}/{name}"):
            present = name in self.group
            group = self.group[name] if present else None
        if not present:
            raise KeyError(f"HDF5Deserializer: group {name!r} is not in {self.group.name!r}.")
        return self._adopt(HDF5Deserializer(group))

    def _where(self, key: str) -> str:
        return f"{self.group.name.rstrip('/')}/{key}"

    def _lookup(self, key: str, value: Any) -> Any:
        where = self._where(key)
        with _damaged_h5(where):
            present = key in self.group
            dataset = self.group[key] if present else None
            if not present:
                held = sorted(self.group.keys())
        if not present:
            raise KeyError(
                f"HDF5Deserializer: dataset {key!r} is not in group {self.group.name!r} (it holds {held})."
            )
        if not isinstance(dataset, _h5py().Dataset):
            raise ValueError(f"HDF5Deserializer: {where!r} is a group in the file, not a dataset.")
        return read_hdf5_dataset(
            dataset, "the HDF5 file",
            expect=lambda name, shape, dtype: _check_declared(where, shape, dtype, value),
        )


@contextlib.contextmanager
def _damaged_h5(where: str) -> Iterator[None]:
    """h5py's errors on a damaged file (KeyError, OSError, RuntimeError ...) as DamagedFileError."""
    try:
        yield
    except Exception as err:
        raise DamagedFileError(
            "the HDF5 file", where, f"it cannot be read ({' '.join(str(err).split())})",
            "the file is damaged; restore it from a good copy",
        ) from None


def save_hdf5(filename: Any, obj: Any, compression: int = 4) -> None:
    """Save obj (a Link or an Optimizer) to an HDF5 file, atomically."""
    h5py = _h5py()
    with atomic_path(filename) as tmp:
        with h5py.File(tmp, "w") as f:
            HDF5Serializer(f, compression=compression).save(obj)


def load_hdf5(filename: Any, obj: Any) -> None:
    """Load obj (a Link or an Optimizer) in place from an HDF5 file.

    The file is read through plait._safeio: a regular file within the size limit, refused when
    it holds external links, external raw storage or virtual datasets (data from other files);
    each dataset's declared shape and dtype checked against obj before its data are read. All or
    nothing: on any error obj is left as it was.
    """
    _h5py()
    with open_hdf5(filename) as f:
        with _naming_file(getattr(filename, "name", None) or str(filename)):
            HDF5Deserializer(f).load(obj)
