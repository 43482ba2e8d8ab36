"""Beam search (thinc.extra.search).

spaCy's beam parser drives `Beam` and `MaxViolation` from compiled code, through their C-level
layout (see ../shared/spec/spacy-c-abi.md). That compiled implementation is not in plait yet: this
module exists so that `thinc.extra.search` imports resolve, `MaxViolation()` can be created and
`_softmax` works; creating a `Beam` or running a violation check raises NotImplementedError.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence

_MISSING = (
    "plait has no compiled beam search yet (the C-level Beam that spaCy's beam parser and "
    "beam NER drive). Use spaCy's greedy parser/ner, or thinc for beam training."
)


def _softmax(nums: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Softmax of a list of scores, max subtracted first; None entries stay None; [] -> []."""
    present = [x for x in nums if x is not None]
    if not present:
        return list(nums)
    top = max(present)
    exps = [None if x is None else math.exp(x - top) for x in nums]
    total = sum(e for e in exps if e is not None)
    return [None if e is None else e / total for e in exps]


class Beam:
    """A beam of parser states (not available yet in plait: see the module docstring)."""

    def __init__(self, nr_class: int, width: int, min_density: float = 0.0) -> None:
        raise NotImplementedError(f"Beam({nr_class!r}, {width!r}): {_MISSING}")


class MaxViolation:
    """The largest margin violation between a predicted and a gold beam seen so far."""

    def __init__(self) -> None:
        self.cost = 0.0
        self.delta = -1.0
        self.p_score = 0.0
        self.g_score = 0.0
        self.Z = 0.0
        self.gZ = 0.0
        self.n = 0
        self.p_hist: List[List[int]] = []
        self.g_hist: List[List[int]] = []
        self.p_probs: List[float] = []
        self.g_probs: List[float] = []

    def check(self, pred: Any, gold: Any) -> int:
        raise NotImplementedError(f"MaxViolation.check: {_MISSING}")

    def check_crf(self, pred: Any, gold: Any) -> int:
        raise NotImplementedError(f"MaxViolation.check_crf: {_MISSING}")


__all__ = ["Beam", "MaxViolation"]
