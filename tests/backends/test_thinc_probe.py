"""Every public Ops method of Thinc 8.3, on odd-but-plausible inputs: plait answers as Thinc does.

The cases and the comparison live in _thinc_probe.py (run it as a script for a report). For
each case: where Thinc returns, plait returns the same (values, dtype, shape, and what it
wrote into its arguments); where Thinc raises, plait raises a clear error (a TypeError,
ValueError, IndexError or NotImplementedError that names the op). The exceptions are listed in
_thinc_probe.MARKS with their reasons: where Thinc crashes, corrupts memory or data, or
truncates floats silently, plait refuses; where Thinc's refusal is an accident of its formula,
plait may accept. Skipped without thinc.
"""
import pytest

from plait.backends import NumpyOps, Ops

try:
    from . import _thinc_probe as probe
except ImportError:  # tests/ is not a package: pytest puts this folder on sys.path
    import _thinc_probe as probe  # type: ignore[no-redef]

CLEAR_ERRORS = (TypeError, ValueError, IndexError, NotImplementedError, KeyError)


@pytest.fixture(scope="module")
def thinc_api():
    return pytest.importorskip("thinc.api")


def _unexplained(backend, method):
    bad = []
    for v in probe.probe(backend, method):
        if v.error is not None:
            message = str(v.error)
            if not isinstance(v.error, CLEAR_ERRORS) or "Ops." not in message:
                bad.append(f"{v.case}: unclear error {type(v.error).__name__}: {message[:200]}")
                continue
        if v.status in ("same", "both-raise"):
            continue
        if probe.mark_for(method, v.case, v.status) is None:
            bad.append(f"{v.case}: {v.status} [{v.oracle}] {v.detail}")
    return bad


@pytest.mark.parametrize("backend", [NumpyOps, Ops], ids=["NumpyOps", "Ops"])
@pytest.mark.parametrize("method", probe.methods())
def test_same_outcome_as_thinc(thinc_api, backend, method):
    bad = _unexplained(backend(), method)
    assert not bad, f"{method}: {len(bad)} cases differ from Thinc:\n" + "\n".join(bad)


def test_every_thinc_method_is_probed(thinc_api):
    ops = thinc_api.NumpyOps()
    public = {n for n in dir(ops) if not n.startswith("_") and callable(getattr(ops, n))}
    # cblas returns a table of C function pointers, which only Cython code can compare.
    assert public - set(probe.methods()) == {"cblas"}


def test_marks_are_all_used(thinc_api):
    """A mark that no case needs any more is stale: the difference it explains is gone."""
    used = set()
    for method in probe.methods():
        for backend in (NumpyOps(), Ops()):
            for v in probe.probe(backend, method):
                for i, (m, c, statuses, _) in enumerate(probe.MARKS):
                    if v.status in statuses and probe.fnmatch.fnmatchcase(method, m) and probe.fnmatch.fnmatchcase(v.case, c):
                        used.add(i)
    stale = [probe.MARKS[i][:2] for i in range(len(probe.MARKS)) if i not in used]
    assert not stale, stale
