"""CaffeFunction: Chainer 1.7.2 read Caffe models only on Python 2 (its protobuf module was
compiled for Python 2), and on Python 3 its constructor raised RuntimeError. plait runs on
Python 3 only, so it keeps that behaviour: `available` is False."""
from typing import Any

from ...link import Chain

__all__ = ["CaffeFunction", "available"]

available = False


class CaffeFunction(Chain):
    """A Caffe network as a Chain; not available on Python 3 (the constructor raises)."""

    def __init__(self, model_path: Any) -> None:
        raise RuntimeError(
            f"CaffeFunction({model_path!r}): loading Caffe models is not supported on Python 3 "
            "(as in Chainer 1.7.2). Convert the model's weights to NPZ and load them into "
            "equivalent links with serializers.load_npz."
        )
