"""A compiled client written against thinc-named headers, as spaCy's extensions are, runs on plait.

The client (`_abi_consumer.py`) is built once per header set: the spec page's layout written out
here ("own", C) and thinc 8.3.14's own installed headers ("thinc", C++, what spaCy compiles
against). Each test runs it in fresh interpreters: with the alias (plait serves `thinc.*`) and,
where thinc is installed, against the real thinc, and compares the two, and the beam search
with the page's rules written out in Python (`_beam_model.py`).
"""
from __future__ import annotations

import json

import numpy
import pytest

import _abi_consumer as abi
from _beam_model import check_crf as model_check_crf
from _beam_model import run_model

HEADERS = ["own", "thinc"]


@pytest.fixture(scope="module", params=HEADERS)
def consumer(request, tmp_path_factory):
    reason = abi.why_cannot_build(request.param)
    if reason:
        pytest.skip(reason)
    if request.param == "thinc" and abi.thinc_headers() is None:
        pytest.skip("thinc 8.3's .pxd files are not installed (pip install 'thinc>=8.3,<8.4')")
    return abi.build(tmp_path_factory.mktemp(f"abi_{request.param}"), request.param)


def _both(consumer, code, args=None):
    """{provider: out} for plait and, where installed, the real thinc."""
    results = {}
    for provider in abi.available_providers():
        got = abi.run_driver(provider, consumer, code, args)
        assert got["origin"]["search"] == f"{provider}.extra.search"
        assert got["origin"]["cblas"] == f"{provider}.backends.cblas"
        results[provider] = got["out"]
    return results


# --- BLAS ---------------------------------------------------------------------------------------

BLAS_CODE = r'''
def run(args):
    ops = __import__("thinc.api", fromlist=["NumpyOps"]).NumpyOps()
    cblas = ops.cblas()
    rng = numpy.random.default_rng(0)
    out = {"type_ok": type(C.as_cblas(cblas)).__name__, "none_ok": C.as_cblas(None) is None}
    try:
        C.as_cblas(object())
        out["rejects_other"] = False
    except TypeError:
        out["rejects_other"] = True
    errors = []
    for transA in (0, 1):
        for transB in (0, 1):
            for alpha, beta in ((1.0, 0.0), (0.5, 2.0)):
                A = rng.normal(size=(5, 7)).astype("f")   # op(A): 5x7
                B = rng.normal(size=(7, 3)).astype("f")   # op(B): 7x3
                A_in = numpy.ascontiguousarray(A.T) if transA else A
                B_in = numpy.ascontiguousarray(B.T) if transB else B
                Cm = rng.normal(size=(5, 3)).astype("f")
                want = alpha * (A @ B) + beta * Cm
                C.gemm(cblas, A_in, B_in, Cm, transA, transB, alpha, beta)
                errors.append(float(numpy.abs(Cm - want).max()))
    # spaCy's call: scores = hiddens @ W.T, beta 0 over a zeroed output
    hiddens = rng.normal(size=(6, 4)).astype("f")
    W = rng.normal(size=(9, 4)).astype("f")
    scores = numpy.zeros((6, 9), "f")
    C.gemm(cblas, hiddens, W, scores, 0, 1, 1.0, 0.0)
    errors.append(float(numpy.abs(scores - hiddens @ W.T).max()))
    X = numpy.arange(8, dtype="f")
    Y = numpy.ones(8, dtype="f")
    C.axpy(cblas, 8, 2.0, X, 1, Y, 1)
    out["axpy"] = Y.tolist()
    Y = numpy.zeros(8, dtype="f")
    C.axpy(cblas, 4, 1.0, X, 2, Y, 2)         # strided: even entries only
    out["axpy_strided"] = Y.tolist()
    Y64 = numpy.ones(3)
    C.axpy64(cblas, -1.0, numpy.array([1.0, 2.0, 3.0]), Y64)
    out["daxpy"] = Y64.tolist()
    Y = numpy.zeros(2, dtype="f")
    C.replace_saxpy_and_axpy(cblas, numpy.array([2.0, 4.0], "f"), Y)
    out["replaced"] = Y.tolist()
    Y = numpy.zeros(2, dtype="f")
    C.axpy(ops.cblas(), 2, 1.0, numpy.array([2.0, 4.0], "f"), 1, Y, 1)
    out["fresh_table"] = Y.tolist()
    out["gemm_max_error"] = max(errors)
    x = numpy.array([1.0, 0.0, 2.0], "f")
    out["vec"] = [C.vec_helpers(x, numpy.array([0.0, 3.0, 0.0], "f")), x.tolist()]
    return out
'''


def test_sgemm_and_saxpy_through_the_thinc_named_interface_without_the_gil(consumer):
    for provider, out in _both(consumer, BLAS_CODE).items():
        assert out["type_ok"] == "CBlas" and out["none_ok"] and out["rejects_other"], provider
        assert out["gemm_max_error"] < 1e-5, provider
        assert out["axpy"] == [1.0 + 2 * k for k in range(8)], provider
        assert out["axpy_strided"] == [0.0, 0, 2, 0, 4, 0, 6, 0], provider
        assert out["daxpy"] == [0.0, -1.0, -2.0], provider
        # set_saxpy changes what saxpy(cblas) returns for that object; a new table is unaffected
        assert out["replaced"] == [1.0, 2.0] and out["fresh_table"] == [2.0, 4.0], provider
        assert out["vec"] == [1, [1.0, 6.0, 2.0]], provider


# --- Beam search --------------------------------------------------------------------------------


def _steps(seed, n_steps, width, nr_class, *, levels=None, p_valid=0.7, spread=1.0):
    """(scores, is_valid, costs) tables for each step; `levels` quantizes scores to force ties."""
    rng = numpy.random.default_rng(seed)
    steps = []
    for _ in range(n_steps):
        S = rng.normal(scale=spread, size=(width, nr_class))
        if levels:
            S = numpy.round(S * levels) / levels
        V = (rng.random((width, nr_class)) < p_valid).astype(numpy.int32)
        V[:, rng.integers(nr_class)] = 1  # at least one valid class per row
        Cost = (rng.random((width, nr_class)) < 0.3).astype(numpy.float32)
        steps.append((S.astype(numpy.float32).tolist(), V.tolist(), Cost.tolist()))
    return steps


SCENARIOS = {
    "basic": dict(nr_class=4, width=3, min_density=0.0, length=5, steps=_steps(1, 6, 3, 4)),
    "ties_set_table": dict(nr_class=4, width=4, min_density=0.0, length=4,
                           steps=_steps(2, 5, 4, 4, levels=1, p_valid=0.9), fill_mode=0),
    "min_density_set_cell": dict(nr_class=6, width=5, min_density=0.05, length=5,
                                 steps=_steps(3, 6, 5, 6, spread=3.0), fill_mode=2),
    "finished_states_set_row": dict(nr_class=3, width=4, min_density=0.0, length=6,
                                    steps=_steps(4, 9, 4, 3, levels=2), fill_mode=3, stop_class=0),
    "hash_dedup": dict(nr_class=5, width=4, min_density=0.0, length=4,
                       steps=_steps(5, 5, 4, 5), use_hash=True, hash_mod=3),
    "width_one": dict(nr_class=3, width=1, min_density=0.0, length=3, steps=_steps(6, 4, 1, 3)),
    "transition_raises": dict(nr_class=4, width=3, min_density=0.0, length=5,
                              steps=_steps(7, 4, 3, 4, p_valid=1.0), raise_class=2),
    "mixed": dict(nr_class=10, width=8, min_density=0.001, length=10, steps=_steps(8, 12, 8, 10, levels=4),
                  stop_class=9, use_hash=True, hash_mod=50),
    # spaCy's sizes: hundreds of candidates for a beam of 8 or 32. Plenty of duplicates use up
    # the best `width` candidates, so the rest must come in the same order as the first ones.
    "wide_beam_density": dict(nr_class=40, width=32, min_density=0.01, length=12,
                              steps=_steps(9, 10, 32, 40, spread=2.0, levels=8), stop_class=39,
                              use_hash=True, hash_mod=400),
    "duplicates_beyond_the_best": dict(nr_class=30, width=8, min_density=0.0, length=8,
                                       steps=_steps(10, 8, 8, 30, levels=2), use_hash=True, hash_mod=6),
}

SEARCH_CODE = r'''
def run(scenarios):
    out = {}
    for name, kw in scenarios.items():
        kw = dict(kw)
        steps = [(numpy.array(S, "f"), numpy.array(V, "i"), numpy.array(Cost, "f")) for S, V, Cost in kw.pop("steps")]
        out[name] = C.run_search(kw.pop("nr_class"), kw.pop("width"), kw.pop("min_density"),
                                 kw.pop("length"), steps, **kw)
    if search.__name__.startswith("plait"):
        # thinc calls a NULL del_func for a beam that was never initialized (a crash)
        out["_unused"] = C.drop_unused_beam(3, 2)
    return out
'''


@pytest.fixture(scope="module")
def searches(consumer):
    return _both(consumer, SEARCH_CODE, SCENARIOS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_beam_search_follows_the_page(searches, name):
    kw = dict(SCENARIOS[name])
    want = run_model(kw.pop("nr_class"), kw.pop("width"), kw.pop("min_density"), kw.pop("length"),
                     kw.pop("steps"), **kw)
    got = searches["plait"][name]
    assert got["error"] == want["error"]
    assert len(got["trace"]) == len(want["trace"])
    for step, (g, w) in enumerate(zip(got["trace"], want["trace"])):
        assert g == w, f"{name}: step {step} differs from the page's rules"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_beam_search_matches_thinc(searches, name):
    if "thinc" not in searches:
        pytest.skip("thinc 8.3 is not installed: no differential run")
    assert searches["plait"][name]["error"] == searches["thinc"][name]["error"]
    assert searches["plait"][name]["trace"] == searches["thinc"][name]["trace"]


def test_scenarios_exercise_the_rules(searches):
    # The scenarios are worth their name: ties, pruning, finished states, duplicates, an error.
    plait = searches["plait"]
    last = plait["finished_states_set_row"]["trace"][-1]
    assert any(s["is_done"] for s in last["states"][: last["size"]])
    assert plait["transition_raises"]["error"] == "ValueError: toy transition refused class 2"
    pruned = plait["min_density_set_cell"]["trace"]
    assert any(snap["size"] < snap["width"] for snap in pruned[1:])
    tied = [snap["py"]["scores"] for snap in plait["ties_set_table"]["trace"]]
    assert any(len(set(scores)) < len(scores) for scores in tied)
    deduplicated = plait["hash_dedup"]["trace"]
    assert any(len({tuple(h) for h in snap["histories"][: snap["size"]]}) == snap["size"] for snap in deduplicated)


def test_every_state_is_released_exactly_once(searches):
    for provider, results in searches.items():
        for name, kw in SCENARIOS.items():
            got = results[name]
            assert got["n_init"] == 2 * kw["width"], (provider, name)
            assert got["live_after"] == 0 and got["events"] == [], (provider, name)
    assert searches["plait"]["_unused"] == []


RELEASE_CODE = r'''
def run(args):
    steps = [(numpy.zeros((2, 3), "f"), numpy.ones((2, 3), "i"), numpy.zeros((2, 3), "f"))]
    again = C.run_search(3, 2, 0.0, 2, steps, reinitialize=1)
    failing = C.run_search(3, 3, 0.0, 2, steps, fail_init_at=3)
    return {"again": [again["n_init"], again["live_after"], again["events"]],
            "failing": [failing["error"], failing["n_init"], failing["live_after"], failing["events"]]}
'''


def test_initialize_twice_or_failing_releases_what_it_made(consumer):
    # plait goes beyond thinc here (thinc leaks the first states), so plait alone is checked.
    got = abi.run_driver("plait", consumer, RELEASE_CODE)["out"]
    assert got["again"] == [8, 0, []]
    assert got["failing"] == ["MemoryError: toy init refused state 3", 3, 0, []]


# --- MaxViolation -------------------------------------------------------------------------------

VIOLATION_CODE = r'''
def run(args):
    pairs = []
    keep = []
    for pred_kw, gold_kw in args:
        beams = []
        for kw in (pred_kw, gold_kw):
            kw = dict(kw)
            steps = [(numpy.array(S, "f"), numpy.array(V, "i"), numpy.array(Cost, "f")) for S, V, Cost in kw.pop("steps")]
            beam, result = C.run_search(kw.pop("nr_class"), kw.pop("width"), kw.pop("min_density"),
                                        kw.pop("length"), steps, keep=True, **kw)
            beams.append((beam, result["trace"][-1]))
        pairs.append(beams)
        keep.append(beams)
    out = {"snapshots": [[p[1], g[1]] for (p, g) in pairs], "crf_c": [], "crf_py": [], "check": []}
    mv_c, mv_py, mv_check = search.MaxViolation(), search.MaxViolation(), search.MaxViolation()
    for (pred, _), (gold, _) in pairs:
        out["crf_c"].append(C.violation(mv_c, pred, gold, True))
        mv_py.check_crf(pred, gold)
        out["crf_py"].append({"p_hist": mv_py.p_hist, "g_hist": mv_py.g_hist, "p_probs": mv_py.p_probs,
                              "g_probs": mv_py.g_probs, "p_score": mv_py.p_score, "g_score": mv_py.g_score,
                              "Z": mv_py.Z, "gZ": mv_py.gZ})
        out["check"].append(C.violation(mv_check, pred, gold, False))

    class Override(search.MaxViolation):
        def check_crf(self, pred, gold):
            self.seen = (len(pred), len(gold))
            return 0

    mv = Override()
    (pred, _), (gold, _) = pairs[0]
    C.violation(mv, pred, gold, True)
    out["override"] = list(mv.seen)
    fresh = search.MaxViolation()
    out["fresh"] = [fresh.p_score, fresh.g_score, fresh.Z, fresh.gZ, fresh.p_hist, fresh.g_hist,
                    fresh.p_probs, fresh.g_probs]
    return out
'''


def _violation_pairs():
    """(pred, gold) beams: gold only takes the moves that cost nothing in pred's tables."""
    pairs = []
    for seed in range(4):
        steps = _steps(20 + seed, 4, 4, 4, levels=2 if seed % 2 else None)
        gold_steps = []
        for S, V, Cost in steps:
            valid = [[int(v and c == 0) for v, c in zip(vr, cr)] for vr, cr in zip(V, Cost)]
            valid = [row if any(row) else [1, 0, 0, 0] for row in valid]
            gold_steps.append((S, valid, [[0.0] * 4 for _ in range(4)]))
        pred = dict(nr_class=4, width=4, min_density=0.0, length=4, steps=steps)
        gold = dict(nr_class=4, width=2, min_density=0.0, length=4, steps=gold_steps)
        pairs.append((pred, gold))
    return pairs


@pytest.fixture(scope="module")
def violations(consumer):
    return _both(consumer, VIOLATION_CODE, _violation_pairs())


def test_check_crf_follows_the_page(violations):
    got = violations["plait"]
    mv = {"cost": 0.0, "delta": -1.0}
    updated = 0
    for (pred, gold), after in zip(got["snapshots"], got["crf_c"]):
        before = mv
        mv = model_check_crf(mv, pred, gold)
        for key in ("cost", "delta", "p_hist", "g_hist", "p_probs", "g_probs"):
            if key in mv:
                assert after[key] == mv[key], key
        updated += mv is not before and mv != before
    assert updated >= 1  # at least one pair is a violation worth recording
    # Called from Python or through the vtable, the same results
    for c_side, py_side in zip(got["crf_c"], got["crf_py"]):
        for key, value in py_side.items():
            assert c_side[key] == value, key


def test_max_violation_matches_thinc(violations):
    if "thinc" not in violations:
        pytest.skip("thinc 8.3 is not installed: no differential run")
    assert violations["plait"] == violations["thinc"]


def test_check_crf_through_the_vtable_honours_a_python_override(violations):
    for provider, got in violations.items():
        assert got["override"][0] >= 1, provider
        assert got["fresh"] == [0.0, 0.0, 0.0, 0.0, [], [], [], []], provider


def test_scenarios_are_plain_json():
    # The scenarios travel to the drivers as JSON: nothing numpy-typed may hide in them.
    json.dumps(SCENARIOS)
    json.dumps(_violation_pairs())
