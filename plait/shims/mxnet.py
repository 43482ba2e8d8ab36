"""MXNetShim: the name Thinc exports, which plait cannot back with MXNet (see _unavailable)."""
from __future__ import annotations

from typing import Any

import numpy

from .shim import Shim


def _unavailable(what: str) -> ImportError:
    """The error for every MXNet entry point: what failed, why, and what to do instead."""
    return ImportError(
        f"{what}: plait has no MXNet support. MXNet's last release (1.9.1; the project was "
        f"retired by Apache in 2023) requires numpy<2 and fails to import with numpy 2, while "
        f"plait requires numpy 2 (numpy {numpy.__version__} is installed). To run an MXNet model, "
        f"use thinc 8.3 with mxnet in an environment with numpy<2; to keep it in plait, port the "
        f"model to PyTorch and wrap it with PyTorchWrapper (or to Keras and use TensorFlowWrapper)."
    )


class MXNetShim(Shim):
    """Adapter between plait arrays and an MXNet Gluon block, as in Thinc.

    Creating one raises ImportError: MXNet cannot run with numpy 2 (see _unavailable).
    """

    def __init__(self, model: Any, config: Any = None, optimizer: Any = None) -> None:
        raise _unavailable(type(self).__name__)


__all__ = ["MXNetShim"]
