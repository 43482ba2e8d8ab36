"""Serializers (chainer.serializers): NPZ and HDF5 files in Chainer's key layout.

A (de)serializer is called as `s(key, value)` and indexed as `s[child]`; Link and Optimizer
`serialize` walk their hierarchy with it, so a parameter lands at 'predictor/l1/W' and an
optimizer state at 'predictor/l1/W/m'.
"""
from typing import Any


class AbstractSerializer:
    """Base of serializers and deserializers: `self[key]` is a child, `self(key, value)` a value."""

    def __getitem__(self, key: str) -> "AbstractSerializer":
        raise NotImplementedError(f"{type(self).__name__}.__getitem__ is not implemented.")

    def __call__(self, key: str, value: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.__call__ is not implemented.")


class Serializer(AbstractSerializer):
    """Base of serializers (writers)."""

    def save(self, obj: Any) -> None:
        """Serialize obj (calls obj.serialize(self))."""
        obj.serialize(self)


class Deserializer(AbstractSerializer):
    """Base of deserializers (readers)."""

    def load(self, obj: Any) -> None:
        """Load obj in place (calls obj.serialize(self))."""
        obj.serialize(self)


from .hdf5 import HDF5Deserializer, HDF5Serializer, load_hdf5, save_hdf5  # noqa: E402
from .npz import DictionarySerializer, NpzDeserializer, load_npz, save_npz  # noqa: E402

__all__ = [
    "AbstractSerializer", "Serializer", "Deserializer", "DictionarySerializer",
    "NpzDeserializer", "save_npz", "load_npz", "HDF5Serializer", "HDF5Deserializer",
    "save_hdf5", "load_hdf5",
]
