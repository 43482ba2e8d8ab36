"""clone: chain n copies of a layer, each with its own weights."""
from __future__ import annotations

import operator
from typing import List, TypeVar, cast

from ..config import registry
from ..model import Model
from .chain import chain
from .noop import noop

InT = TypeVar("InT")
OutT = TypeVar("OutT")


@registry.layers("clone.v1")
def clone(orig: Model[InT, OutT], n: int) -> Model[InT, OutT]:
    """f''(f'(f(X))) for n = 3: `orig` followed by n - 1 independent copies of it.

    n = 0 gives noop(), n = 1 gives `orig` itself.
    """
    if not isinstance(orig, Model):
        raise TypeError(f"Cannot clone: expected a Model, got {type(orig).__name__}.")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(
            f"Cannot clone model '{orig.name}': n must be an int, got {type(n).__name__} ({n!r})."
        ) from None
    if n < 0:
        raise ValueError(f"Cannot clone model '{orig.name}': n must be >= 0, got {n}.")
    if n == 0:
        return cast(Model[InT, OutT], noop())
    if n == 1:
        return orig
    layers: List[Model] = [orig] + [orig.copy() for _ in range(n - 1)]
    return cast(Model[InT, OutT], chain(*layers))
