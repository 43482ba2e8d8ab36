"""spaCy 3.8 on plait through the thinc alias: training, evaluation and nlp.pipe (issue 14).

Runs in the spaCy venv that `make spacy-peer` (bench/setup_peers.sh spacy) builds, or the one
$PLAIT_SPACY_PYTHON names, through subprocesses (tests/spacy/_driver.py); skips, saying why,
where there is none. Small on purpose (80 documents per source, a few steps): the full trainings
and the score comparison are bench/spacy_scores.py's, the speed bench/spacy_train.py's.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DRIVER = HERE / "_driver.py"
CONFIGS = {"pipeline": REPO / "bench" / "spacy" / "pipeline.cfg", "beam": REPO / "bench" / "spacy" / "beam.cfg"}
DATA = Path(os.environ.get("PLAIT_BENCH_DATA", REPO.parent / "shared" / "data"))
SPACY_PYTHON = os.environ.get("PLAIT_SPACY_PYTHON", str(REPO / "bench" / ".venvs" / "spacy" / "bin" / "python"))
THINC_DIR_CHECK = (
    "import os, sys\n"
    "bad = [f'{n}: {m.__file__}' for n, m in list(sys.modules.items())\n"
    "       if os.sep + 'thinc' + os.sep in (getattr(m, '__file__', None) or '')]\n"
    "assert not bad, bad\n"
)


def _env(alias_env=False, checkout=True):
    env = {k: v for k, v in os.environ.items() if k not in ("PLAIT_AS_THINC", "PYTHONPATH")}
    # The venv of `make spacy-peer` links this checkout in; another one may not have plait.
    if checkout:
        env["PYTHONPATH"] = str(REPO)
    if alias_env:
        env["PLAIT_AS_THINC"] = "1"
    # Small runs: one thread each, as the rest of the suite.
    env.setdefault("PLAIT_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


def _why_not() -> str:
    if not Path(SPACY_PYTHON).exists():
        return (f"no spaCy venv at {SPACY_PYTHON}: `make spacy-peer` builds one (needs the package "
                "registry), or set PLAIT_SPACY_PYTHON to a python with spaCy 3.8 and thinc 8.3.14")
    if not (DATA / "turkish_web_treebank.jsonl").exists():
        return f"the shared data is not at {DATA} (set PLAIT_BENCH_DATA)"
    code = "import spacy, importlib.metadata as m; print(spacy.__version__, m.version('thinc'))"
    out = subprocess.run([SPACY_PYTHON, "-c", code], capture_output=True, text=True, env=_env(checkout=False),
                         timeout=300)
    if out.returncode != 0:
        return f"{SPACY_PYTHON} cannot import spacy: {out.stderr.strip()[-500:]}"
    spacy_v, thinc_v = out.stdout.split()
    if not spacy_v.startswith("3.8.") or not thinc_v.startswith("8.3."):
        return f"{SPACY_PYTHON} has spacy {spacy_v}, thinc {thinc_v}; these tests want spacy 3.8.x, thinc 8.3.x"
    return ""


_WHY = _why_not()
pytestmark = pytest.mark.skipif(bool(_WHY), reason=_WHY or "spaCy venv present")


def _run(args, *, env, timeout=600, cwd=None):
    return subprocess.run([SPACY_PYTHON, *args], capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=cwd)


def _driver(args, *, plait, tmp_path):
    """Run the driver on plait (alias from PLAIT_AS_THINC=1) or on the real thinc; its result."""
    out = _run([str(DRIVER), *args], env=_env(alias_env=plait), cwd=tmp_path)
    for line in out.stdout.splitlines():
        if line.startswith("DRIVER "):
            return json.loads(line[len("DRIVER "):])
    raise AssertionError(f"driver {args} on {'plait' if plait else 'thinc'} failed:\n{out.stderr[-4000:]}")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("spacy-corpus")
    result = _run([str(REPO / "bench" / "spacy" / "convert.py"), str(out), "--limit", "80"],
                  env=_env(checkout=False))
    assert result.returncode == 0, result.stderr
    return out


def test_import_spacy_under_the_alias_warns_nothing_and_loads_nothing_of_thinc(tmp_path):
    code = ("import spacy, thinc, thinc.api, plait\n"
            "assert thinc is plait and thinc.api is plait.api\n"
            "from thinc.backends.cblas import CBlas\n"
            "from spacy.pipeline._parser_internals import _beam_utils\n"
            "nlp = spacy.blank('xx')\n" + THINC_DIR_CHECK + "print('ok')")
    script = tmp_path / "probe.py"
    script.write_text(code)
    for args, env in ((["-W", "error", "-c", code], _env(alias_env=True)),
                      (["-W", "error", "-m", "plait.thinc_alias", str(script)], _env())):
        out = _run(args, env=env, timeout=300)
        assert out.returncode == 0 and out.stdout.strip() == "ok", (args[:4], out.stderr[-3000:])
        assert out.stderr == "", out.stderr


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_train_evaluate_and_pipe_on_plait(name, corpus, tmp_path):
    """spacy train, spacy evaluate (the CLI's code, in one process), spacy.load and nlp.pipe."""
    result = _driver(["run", str(CONFIGS[name]), str(corpus), str(tmp_path / "out"), "6"], plait=True,
                     tmp_path=tmp_path)
    assert result["thinc_is"] == "plait"
    assert result["thinc_directory_modules"] == []
    assert [w for w in result["warnings"] if f"{os.sep}plait{os.sep}" in w] == []
    assert result["docs"] == 40 and result["tokens"] > 200 and result["heads_set"]
    scores = result["scores"]
    assert scores["tr"]["dep_uas"] is not None and 0.0 <= scores["tr"]["dep_uas"] <= 1.0
    assert scores["ja"]["ents_f"] is not None
    if name == "pipeline":
        assert result["pipeline"] == ["tok2vec", "tagger", "morphologizer", "parser", "ner", "textcat"]
        for key in ("tag_acc", "pos_acc", "morph_acc"):
            assert 0.0 < scores["tr"][key] <= 1.0, (key, scores["tr"][key])
        assert scores["rt"]["cats_score"] is not None
    else:
        assert result["pipeline"] == ["tok2vec", "beam_parser", "beam_ner"]
    assert (tmp_path / "out" / "model-last" / "meta.json").exists()


def test_spacy_console_script_with_plait_as_thinc(corpus, tmp_path):
    """The `spacy` command itself, switched by the environment variable (the .pth hook)."""
    spacy_cmd = Path(SPACY_PYTHON).parent / "spacy"
    site = _run(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env=_env()).stdout.strip()
    if not (Path(site) / "plait-aliases.pth").exists():
        pytest.skip(f"{site} has no plait-aliases.pth (make spacy-peer installs it)")
    env = _env(alias_env=True)
    cfg = CONFIGS["pipeline"]
    train = subprocess.run(
        [str(spacy_cmd), "train", str(cfg), "--output", str(tmp_path / "out"),
         "--paths.train", str(corpus / "train.spacy"), "--paths.dev", str(corpus / "dev.spacy"),
         "--training.max_steps", "2", "--training.eval_frequency", "2"],
        capture_output=True, text=True, env=env, timeout=600)
    assert train.returncode == 0, train.stderr[-3000:] + train.stdout[-3000:]
    ev = subprocess.run(
        [str(spacy_cmd), "evaluate", str(tmp_path / "out" / "model-last"), str(corpus / "test_tr.spacy"),
         "--gold-preproc", "--output", str(tmp_path / "m.json")],
        capture_output=True, text=True, env=env, timeout=600)
    assert ev.returncode == 0, ev.stderr[-3000:]
    assert json.loads((tmp_path / "m.json").read_text())["tag_acc"] is not None


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_first_updates_equal_thincs(name, corpus, tmp_path):
    """Same config and seed: the same initial predictions and the same first losses as thinc 8.3.

    Both libraries draw the initial weights from the generators spaCy seeds, in the same order,
    and run the same forward pass, so the first update's losses agree to float rounding, for
    the beam components too (the first scores are all zero, so the beam's tie rules decide
    the predicted parses and entities). Later losses differ as dropout draws differ.
    """
    ours = _driver(["first-updates", str(CONFIGS[name]), str(corpus)], plait=True, tmp_path=tmp_path)
    theirs = _driver(["first-updates", str(CONFIGS[name]), str(corpus)], plait=False, tmp_path=tmp_path)
    assert ours["thinc_directory_modules"] == []
    assert theirs["thinc_directory_modules"], "the thinc run should have used the real thinc"
    assert ours["predicted"] == theirs["predicted"]
    first, first_thinc = ours["losses"][0], theirs["losses"][0]
    assert sorted(first) == sorted(first_thinc)
    for component, loss in first_thinc.items():
        assert first[component] == pytest.approx(loss, rel=1e-5, abs=1e-6), component


PREDICT = (
    "import json, sys, spacy, thinc\n"
    "nlp = spacy.load(sys.argv[1])\n"
    "texts = [json.loads(l)['text'] for l in open(sys.argv[2], encoding='utf8')][::5]\n"
    "out = [{'tags': [t.tag_ for t in d], 'heads': [t.head.i for t in d], 'deps': [t.dep_ for t in d],\n"
    "        'ents': [(e.start, e.end, e.label_) for e in d.ents], 'cats': {k: float(v) for k, v in d.cats.items()}}\n"
    "       for d in nlp.pipe(texts)]\n"
    "print(json.dumps({'thinc': thinc.__name__, 'docs': out}))\n"
)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_pipeline_trained_with_thinc_predicts_the_same_on_plait(name, corpus, tmp_path):
    """Saved pipelines carry over: trained and saved with thinc, loaded with plait's alias, the
    same tags, parses, entities and categories (to rounding) as thinc gives."""
    train, dev = ("train.spacy", "dev.spacy") if name == "pipeline" else ("train_trja.spacy", "dev_trja.spacy")
    out = _run(["-m", "spacy", "train", str(CONFIGS[name]), "--output", str(tmp_path / "out"),
                "--paths.train", str(corpus / train), "--paths.dev", str(corpus / dev),
                "--training.max_steps", "6", "--training.eval_frequency", "6"], env=_env())
    assert out.returncode == 0, out.stderr[-3000:]
    model, texts = str(tmp_path / "out" / "model-last"), str(corpus / "texts.jsonl")
    results = {}
    for plait in (True, False):
        res = _run(["-c", PREDICT, model, texts], env=_env(alias_env=plait))
        assert res.returncode == 0, res.stderr[-3000:]
        results[plait] = json.loads(res.stdout.strip().splitlines()[-1])
    assert results[True]["thinc"] == "plait" and results[False]["thinc"] == "thinc"
    ours, theirs = results[True]["docs"], results[False]["docs"]
    assert len(ours) == len(theirs) > 10
    for a, b in zip(ours, theirs):
        assert {k: a[k] for k in ("tags", "heads", "deps", "ents")} == {k: b[k] for k in ("tags", "heads", "deps", "ents")}
        assert a["cats"] == pytest.approx(b["cats"], abs=1e-5)


def test_bench_script_smoke(tmp_path):
    """bench/spacy_train.py --quick runs both pipelines on plait and prints its tables."""
    out = subprocess.run([sys.executable, str(REPO / "bench" / "spacy_train.py"), "--quick", "--peers", "none",
                          "--spacy-python", SPACY_PYTHON, "--json", str(tmp_path / "r.json")],
                         capture_output=True, text=True, timeout=900, cwd=str(REPO))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for title in ("spaCy pipeline (pipeline.cfg)", "spaCy beam (beam.cfg)"):
        assert title in out.stdout
    assert "train words/CPU-s" in out.stdout and "pipe words/CPU-s" in out.stdout
    medians = json.loads((tmp_path / "r.json").read_text())["medians"]
    for name in ("pipeline", "beam"):
        assert medians[name]["plait"]["train_per_cpu_s"] > 0 and medians[name]["plait"]["thinc_modules"] == []
        # nlp.pipe ran in a child of its own (spacy.load, then the passes): it reports its load time.
        assert medians[name]["plait"]["pipe_per_cpu_s"] > 0 and medians[name]["plait"]["load_s"] > 0
