"""HDF5 serialization (needs the optional h5py package): the hierarchy maps onto HDF5 groups."""
import os
import tempfile
from typing import Any

import numpy

from ...util import is_cupy_array
from . import Deserializer, Serializer
from .npz import _restore

__all__ = ["HDF5Serializer", "HDF5Deserializer", "save_hdf5", "load_hdf5"]


def _h5py() -> Any:
    try:
        import h5py
    except ImportError:
        raise ImportError(
            "plait.chainer.serializers: HDF5 files need the optional 'h5py' package, which is "
            "not installed. Install it (pip install h5py), or use save_npz/load_npz instead."
        ) from None
    return h5py


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


class HDF5Deserializer(Deserializer):
    """Reads values from the datasets of an h5py group."""

    def __init__(self, group: Any) -> None:
        _h5py()
        self.group = group

    def __getitem__(self, key: str) -> "HDF5Deserializer":
        name = key.strip("/")
        if name not in self.group:
            raise KeyError(f"HDF5Deserializer: group {name!r} is not in {self.group.name!r}.")
        return HDF5Deserializer(self.group[name])

    def __call__(self, key: str, value: Any) -> Any:
        if key not in self.group:
            raise KeyError(
                f"HDF5Deserializer: dataset {key!r} is not in group {self.group.name!r} (it holds "
                f"{sorted(self.group.keys())})."
            )
        return _restore(f"{self.group.name}/{key}", self.group[key][()], value)


def save_hdf5(filename: Any, obj: Any, compression: int = 4) -> None:
    """Save obj (a Link or an Optimizer) to an HDF5 file, atomically."""
    h5py = _h5py()
    filename = os.fspath(filename)
    folder = os.path.dirname(os.path.abspath(filename))
    fd, tmp = tempfile.mkstemp(prefix=".plait-", suffix=".h5.tmp", dir=folder)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            HDF5Serializer(f, compression=compression).save(obj)
        os.replace(tmp, filename)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_hdf5(filename: Any, obj: Any) -> None:
    """Load obj (a Link or an Optimizer) in place from an HDF5 file."""
    h5py = _h5py()
    with h5py.File(filename, "r") as f:
        HDF5Deserializer(f).load(obj)
