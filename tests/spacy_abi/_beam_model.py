"""The beam search rules of ../shared/spec/spacy-c-abi.md (3.3), written out in Python.

`run_model` plays the same game as `abi_consumer.run_search` (toy states, the same callbacks)
and returns the same trace, so a compiled Beam can be checked against the page's prose without
thinc. float32 arithmetic is done in numpy float32, as the C code does it.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

import numpy

F = numpy.float32
MASK = (1 << 64) - 1


class _Slot:
    __slots__ = ("content", "score", "loss", "i", "t", "is_done")

    def __init__(self) -> None:
        self.content: Optional[int] = None
        self.score = F(0)
        self.loss = F(0)
        self.i = 0
        self.t = 0
        self.is_done = 0


def softmax(nums: List[Optional[float]]) -> List[Optional[float]]:
    present = [x for x in nums if x is not None]
    if not present:
        return list(nums)
    top = max(present)
    exps = [None if x is None else math.exp(x - top) for x in nums]
    total = sum([e for e in exps if e is not None])
    return [None if e is None else e / total for e in exps]


class ModelBeam:
    def __init__(self, nr_class: int, width: int, min_density: float) -> None:
        self.nr_class, self.width = nr_class, width
        self.min_density = float(F(min_density))
        self.size, self.t, self.is_done = 1, 0, 0
        self.states = [_Slot() for _ in range(width)]
        self.parents = [_Slot() for _ in range(width)]
        self.histories: List[List[int]] = [[] for _ in range(width)]
        self.parent_histories: List[List[int]] = [[] for _ in range(width)]
        self.toys: Dict[int, Dict[str, int]] = {}
        self._zero_tables()

    def _zero_tables(self) -> None:
        self.scores = numpy.zeros((self.width, self.nr_class), F)
        self.is_valid = numpy.zeros((self.width, self.nr_class), numpy.int32)
        self.costs = numpy.zeros((self.width, self.nr_class), F)

    def initialize(self, length: int) -> None:
        for i in range(self.width):
            for slot in (self.states[i], self.parents[i]):
                slot.content = len(self.toys)
                self.toys[slot.content] = {"length": length, "n_moves": 0, "last": -1, "sig": 0}

    def check_done(self, stop_class: int) -> None:
        for i in range(self.size):
            s = self.states[i]
            if not s.is_done:
                toy = self.toys[s.content]
                s.is_done = int(toy["n_moves"] >= toy["length"] or (toy["n_moves"] > 0 and toy["last"] == stop_class))
        self.is_done = int(all(self.states[i].is_done for i in range(self.size)))

    def advance(self, cfg: Dict[str, Any]) -> None:
        nr = self.nr_class
        cands = []
        for i in range(self.size):
            s = self.states[i]
            if s.is_done:
                value = s.score + s.score / F(self.t) if self.histories[i] else s.score
                cands.append((F(value), i * nr))
            else:
                for j in range(nr):
                    if self.is_valid[i, j]:
                        cands.append((F(s.score + self.scores[i, j]), i * nr + j))
        if self.min_density != 0.0 and cands:
            top = max(float(v) for v, _ in cands)
            cands = [c for c in cands if math.exp(float(c[0]) - top) >= self.min_density]
        if not cands:
            raise ValueError("no candidate")
        self.states, self.parents = self.parents, self.states
        self.histories, self.parent_histories = self.parent_histories, self.histories
        cands.sort(key=lambda c: (float(c[0]), c[1]), reverse=True)
        i = 0
        seen = set()
        for value, index in cands:
            if i >= self.width:
                break
            p, clas = divmod(index, nr)
            parent = self.parents[p]
            if parent.is_done:
                moved = parent
                self.parents[p] = self.states[i]
                self.states[i] = moved
                self.parents[p].i = moved.i
                self.parents[p].t = moved.t
                self.parents[p].is_done = moved.t
                moved.score = value
                self.histories[i] = list(self.parent_histories[p])
                i += 1
                continue
            state = self.states[i]
            src, dest = self.toys[parent.content], self.toys[state.content]
            if clas == cfg["raise_class"]:
                raise ValueError(f"toy transition refused class {clas}")
            dest.update(length=src["length"], n_moves=src["n_moves"] + 1, last=clas,
                        sig=(src["sig"] * 1000003 + clas + 1) & MASK)
            if cfg["use_hash"]:
                key = dest["sig"] % cfg["hash_mod"] + 1
                if key > 1:
                    if key in seen:
                        continue
                    seen.add(key)
            state.score = value
            state.loss = F(parent.loss + self.costs[p, clas])
            self.histories[i] = list(self.parent_histories[p]) + [clas]
            i += 1
        self.size = i
        self._zero_tables()
        self.t += 1

    def _slot(self, s: _Slot) -> Dict[str, Any]:
        toy = self.toys.get(s.content) if s.content is not None else None
        return {
            "id": s.content, "n_moves": toy and toy["n_moves"], "sig": toy and toy["sig"],
            "last": toy and toy["last"], "score": float(s.score), "loss": float(s.loss),
            "i": s.i, "t": s.t, "is_done": bool(s.is_done),
        }

    @property
    def py_scores(self) -> List[float]:
        return [float(self.states[i].score) for i in range(self.size)]

    def snapshot(self) -> Dict[str, Any]:
        return {
            "size": self.size, "is_done": bool(self.is_done), "t": self.t, "nr_class": self.nr_class,
            "width": self.width, "min_density": self.min_density, "tables_zero": True,
            "states": [self._slot(s) for s in self.states],
            "parents": [self._slot(s) for s in self.parents],
            "histories": [list(h) for h in self.histories],
            "at": [self.states[i].content for i in range(self.size)],
            "py": {"len": self.size, "score": float(self.states[0].score),
                   "loss": float(self.states[0].loss), "probs": softmax(self.py_scores),
                   "scores": self.py_scores, "min_score": float(self.states[self.size - 1].score),
                   "is_done": bool(self.is_done), "histories": [list(h) for h in self.histories],
                   "min_density": self.min_density},
        }

    def fill(self, S, V, C) -> None:
        self.scores = numpy.array(S, F)
        self.is_valid = numpy.array(V, numpy.int32)
        self.costs = numpy.array(C, F)


def run_model(nr_class: int, width: int, min_density: float, length: int, steps, *,
              fill_mode: int = 1, use_hash: bool = False, hash_mod: int = 1, stop_class: int = -1,
              raise_class: int = -1) -> Dict[str, Any]:
    """The trace `abi_consumer.run_search` must produce for these arguments."""
    beam = ModelBeam(nr_class, width, min_density)
    cfg = {"use_hash": use_hash, "hash_mod": hash_mod, "raise_class": raise_class}
    trace = []
    error = None
    try:
        beam.initialize(length)
        trace.append(beam.snapshot())
        for S, V, C in steps:
            beam.check_done(stop_class)
            if beam.is_done:
                break
            beam.fill(S, V, C)
            beam.advance(cfg)
            trace.append(beam.snapshot())
        beam.check_done(stop_class)
        trace.append(beam.snapshot())
    except ValueError as err:
        error = f"ValueError: {err}"
    return {"trace": trace, "error": error, "n_init": 2 * width, "live_after": 0, "events": []}


def check_crf(mv: Dict[str, Any], pred: Dict[str, Any], gold: Dict[str, Any]) -> Dict[str, Any]:
    """MaxViolation.check_crf on snapshots (the page's rules); returns the updated fields."""
    mv = dict(mv)
    d = pred["py"]["score"] - gold["py"]["score"]
    gold_set = {tuple(gold["histories"][i]) for i in range(gold["size"])}
    if pred["py"]["loss"] > 0 and (mv["cost"] == 0 or d > mv["delta"]):
        p_scores, p_hist, g_scores, g_hist = [], [], [], []
        for i in range(pred["size"]):
            s, h = pred["states"][i], pred["histories"][i]
            if s["loss"] > 0:
                p_scores.append(s["score"])
                p_hist.append(list(h))
            elif s["loss"] <= 0 and tuple(h) not in gold_set:
                g_scores.append(s["score"])
                g_hist.append(list(h))
        for i in range(gold["size"]):
            s = gold["states"][i]
            if s["loss"] == 0:
                g_scores.append(s["score"])
                g_hist.append(list(gold["histories"][i]))
        joint = softmax(p_scores + g_scores)
        alone = softmax(g_scores)
        mv.update(cost=float(F(pred["py"]["loss"])), delta=float(F(d)), p_hist=p_hist, g_hist=g_hist,
                  p_probs=joint[:len(p_scores)],
                  g_probs=[x - y for x, y in zip(joint[len(p_scores):], alone)])
    return mv
