"""The (de)serializer interface (chainer.serializer): `s[key]` is a child, `s(key, value)` a value.

Link.serialize and Optimizer.serialize walk their hierarchy with one, so a parameter lands at
'predictor/l1/W' and an optimizer state at 'predictor/l1/W/m'; chainer.serializers has the
NPZ and HDF5 ones.
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


__all__ = ["AbstractSerializer", "Serializer", "Deserializer"]
