"""Beam and MaxViolation from Python: the attributes spaCy and thinc users read, and errors.

Beams that have been searched are made by the compiled client in test_spacy_abi_consumer.py
(their probs, scores, histories, len and check_crf are compared there, with thinc and with the
spec page); here are the Python-level surface and its differences from thinc, on beams made
from Python.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from plait.extra.search import Beam, MaxViolation, _softmax


def _thinc_search():
    search = pytest.importorskip("thinc.extra.search")
    if search.__name__.startswith("plait"):
        pytest.skip("thinc is served by plait in this process")
    return search


# NOTE: thinc's Beam calls a NULL del_func when it is freed without initialize (a crash), so
# thinc's beams are made in a subprocess that keeps them alive and leaves with os._exit.
_IN_THINC = """
import json, os, sys
import thinc.extra.search as search
_keep = []
exec(sys.stdin.read())
print("@@" + json.dumps(run(search)))
sys.stdout.flush()
os._exit(0)
"""


def _run_in_thinc(code):
    _thinc_search()
    env = {k: v for k, v in os.environ.items() if k != "PLAIT_AS_THINC"}
    done = subprocess.run([sys.executable, "-c", _IN_THINC], input=code, capture_output=True,
                          text=True, env=env, timeout=120)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("@@")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][2:])


def _run_in_plait(code):
    import plait.extra.search as ours

    namespace = {"_keep": []}
    exec(code, namespace)
    return json.loads(json.dumps(namespace["run"](ours)))


SURFACE = """
def run(search):
    out = []
    for nr_class, width, kw in [(3, 2, {}), (1, 1, {}), (40, 16, {"min_density": 0.003})]:
        beam = search.Beam(nr_class, width, **kw)
        _keep.append(beam)
        row = [len(beam), beam.score, beam.min_score, beam.loss, beam.probs, beam.scores,
               beam.histories, beam.min_density, beam.is_done]
        beam.min_density = 0.1  # float32: 0.10000000149011612
        row.append(beam.min_density)
        out.append(row)
    mv = search.MaxViolation()
    pred, gold = search.Beam(3, 2), search.Beam(3, 1)
    _keep.extend([pred, gold])
    # loss 0: no violation to record, either way
    out.append([mv.check_crf(pred, gold), mv.check(pred, gold), mv.p_hist, mv.g_probs, mv.p_score, mv.Z])
    out.append([sorted(n for n in dir(getattr(search, name)) if not n.startswith("_"))
                for name in ("Beam", "MaxViolation")])
    out.append([search._softmax(nums) for nums in
                ([], [0.5], [1.0, 2.0, 3.0], [-3.25, 7.5, 7.5, 0.0], [1e3, -1e3, 2.5])])
    return out
"""


def test_python_surface_matches_thinc():
    theirs = _run_in_thinc(SURFACE)
    ours = _run_in_plait(SURFACE)
    assert ours[:-2] == theirs[:-2]
    # plait's types have every public name of thinc's (and `cost`, `delta` on MaxViolation)
    for plait_names, thinc_names in zip(ours[-2], theirs[-2]):
        assert set(thinc_names) <= set(plait_names)
    assert ours[-1] == theirs[-1]


def test_new_beam():
    beam = Beam(5, 3, min_density=0.25)
    assert len(beam) == 1 and beam.score == 0.0 and beam.loss == 0.0 and beam.min_score == 0.0
    assert beam.probs == [1.0] and beam.scores == [0.0]
    assert beam.histories == [[], [], []] and beam.histories is beam.histories
    assert beam.min_density == 0.25 and beam.is_done is False
    beam.min_density = 1 / 3
    assert beam.min_density == pytest.approx(1 / 3, rel=1e-7) and beam.min_density != 1 / 3  # float32
    with pytest.raises(AttributeError):
        beam.is_done = True
    # Positional and keyword, as spaCy calls it
    assert Beam(2, 1, 0.5).min_density == 0.5


@pytest.mark.parametrize("args", [(0, 3), (3, 0)])
def test_beam_needs_classes_and_width(args):
    # thinc asserts; plait says which argument is wrong.
    with pytest.raises(ValueError, match="nr_class and width must be >= 1"):
        Beam(*args)
    with pytest.raises(OverflowError):
        Beam(-1, 2)


def test_beam_init_runs_once():
    beam = Beam(2, 2)
    with pytest.raises(TypeError, match="already set up"):
        beam.__init__(2, 2)


def test_max_violation_defaults_and_readonly():
    mv = MaxViolation()
    assert (mv.cost, mv.delta, mv.p_score, mv.g_score, mv.Z, mv.gZ) == (0.0, -1.0, 0.0, 0.0, 0.0, 0.0)
    assert (mv.p_hist, mv.g_hist, mv.p_probs, mv.g_probs) == ([], [], [], [])
    for name in ("p_score", "g_score", "Z", "gZ", "p_hist", "g_hist", "p_probs", "g_probs", "cost"):
        with pytest.raises(AttributeError):
            setattr(mv, name, 1)


def test_max_violation_refuses_none():
    mv = MaxViolation()
    with pytest.raises(TypeError, match="check_crf: pred and gold must be Beams"):
        mv.check_crf(None, Beam(2, 2))
    with pytest.raises(TypeError, match="check: pred and gold must be Beams"):
        mv.check(Beam(2, 2), None)
    with pytest.raises(TypeError):
        mv.check_crf(Beam(2, 2), object())


def test_softmax():
    assert _softmax([]) == []
    assert _softmax([None]) == [None]
    probs = _softmax([1.0, None, 3.0])
    assert probs[1] is None and math.isclose(probs[0] + probs[2], 1.0)
    assert math.isclose(probs[2] / probs[0], math.exp(2.0))
    # The max is subtracted first: large scores do not overflow
    assert _softmax([1000.0, 1000.0]) == [0.5, 0.5]
