"""Shim: the base class that lets a Model hold a model of another framework."""
from __future__ import annotations

import contextlib
import copy
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Tuple, Union

from ..util import _write_bytes_atomically


class Shim:
    """Wrap a model of another framework (PyTorch, TensorFlow, ...) for use inside a Model.

    A subclass converts inputs and gradients between plait's arrays and the framework's
    tensors, and forwards optimizer steps and serialization to the framework. The
    base class keeps the wrapped object and a process-unique id; the framework-facing
    methods raise NotImplementedError until a subclass supplies them.
    """

    global_id: int = 0
    global_id_lock: threading.Lock = threading.Lock()

    cfg: Any
    _model: Any
    _optimizer: Optional[Any]

    def __init__(self, model: Any, config: Any = None, optimizer: Any = None) -> None:
        with Shim.global_id_lock:
            Shim.global_id += 1
            self.id = Shim.global_id
        self.cfg = config
        self._model = model
        self._optimizer = optimizer

    def _missing(self, what: str) -> NotImplementedError:
        return NotImplementedError(
            f"{type(self).__name__} does not implement {what}: a Shim subclass for the wrapped "
            f"framework must provide it."
        )

    def __call__(self, inputs: Any, is_train: bool) -> Tuple[Any, Callable[..., Any]]:
        raise self._missing("__call__")

    def predict(self, fwd_args: Any) -> Any:
        Y, _ = self(fwd_args, is_train=False)
        return Y

    def begin_update(self, fwd_args: Any) -> Tuple[Any, Callable[..., Any]]:
        return self(fwd_args, is_train=True)

    def finish_update(self, optimizer: Any) -> None:
        raise self._missing("finish_update")

    @contextlib.contextmanager
    def use_params(self, params: Any) -> Iterator[None]:
        # The base class holds no parameters of its own, so there is nothing to swap.
        yield

    def copy(self) -> "Shim":
        return copy.deepcopy(self)

    def to_device(self, device_type: str, device_id: int) -> None:
        raise self._missing("to_device")

    def to_disk(self, path: Union[str, Path]) -> None:
        _write_bytes_atomically(path, self.to_bytes())

    def from_disk(self, path: Union[str, Path]) -> "Shim":
        from .._safeio import read_bytes

        # A regular file only, within plait's size limit (a FIFO or device would block or never end).
        return self.from_bytes(read_bytes(path))

    def to_bytes(self) -> bytes:
        raise self._missing("to_bytes")

    def from_bytes(self, data: bytes) -> "Shim":
        raise self._missing("from_bytes")


__all__ = ["Shim"]
