"""plait: one backend (Ops), three faces (Thinc, Chainer, Neon).

`import plait` stays cheap: it never imports torch, tensorflow, cupy or mpi4py. `plait.registry`
(thinc's top-level `registry`) is loaded on first use.
"""
from typing import Any

from .about import __version__

__all__ = ["registry", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "registry":
        from .config import registry

        return registry
    raise AttributeError(f"module 'plait' has no attribute {name!r}")
