"""Vector and matrix helpers under thinc's module path (thinc.backends.linalg).

In thinc these are C-level inline functions that spaCy's compiled code cimports; they carry no
Python-level behaviour. plait does not provide the C-level interface yet, so this module only
makes `thinc.backends.linalg` importable; its types cannot be created.
"""
from __future__ import annotations

from typing import Any

_MISSING = (
    "plait has no compiled thinc.backends.linalg yet: these types only serve C code (spaCy's "
    "extensions) that cimports them. Use numpy, or plait's Ops, from Python."
)


class _CLevelOnly:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__}: {_MISSING}")


class Matrix(_CLevelOnly):
    """A C-level float matrix (C code only)."""


class Vec(_CLevelOnly):
    """C-level vector operations (C code only)."""


class VecVec(_CLevelOnly):
    """C-level operations on pairs of vectors (C code only)."""


class Mat(_CLevelOnly):
    """C-level matrix row statistics (C code only)."""


__all__ = ["Matrix", "Vec", "VecVec", "Mat"]
