"""Held-out scores of spaCy 3.8 trained on plait (through the thinc alias) and on thinc 8.3.14.

    .venv/bin/python bench/spacy_scores.py [--pipelines pipeline,beam] [--seeds 0,1,2]
                                           [--steps N] [--out DIR]

For each pipeline (bench/spacy/*.cfg), seed and library: `python -m spacy train` (the config's
max_steps, or --steps), `python -m spacy evaluate --gold-preproc` of model-best on each held-out
file of bench/spacy/convert.py, then `spacy.load` + `nlp.pipe` over the raw test texts. Both run
in the spaCy venv (bench/.venvs/spacy): plait's with PLAIT_AS_THINC=1, thinc's without; one
thread each. Every plait process records the modules it loaded at exit: none may come from a
real thinc's directory (the script fails if one does). Runs already in --out are reused.

Same config and seed do not mean the same training: the first update is the same (tests/spacy),
but plait draws a dropout mask from a 64-bit key where thinc draws a float per value, so the two
trainings go on as two seeds of one library would. Hence several seeds: the table shows each
seed's scores and their means.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402
import spacy_train as S  # noqa: E402

FRAMEWORKS = ("plait", "thinc")
# What each held-out file is annotated for, per pipeline.
SCORES = {
    "pipeline": [("tr", "tag_acc"), ("tr", "pos_acc"), ("tr", "morph_acc"), ("tr", "dep_uas"),
                 ("tr", "dep_las"), ("ja", "tag_acc"), ("ja", "ents_f"), ("rt", "cats_score")],
    "beam": [("tr", "dep_uas"), ("tr", "dep_las"), ("ja", "ents_f")],
    "ner_ja": [("ja", "ents_f"), ("ja", "ents_p"), ("ja", "ents_r")],
    "beam_ner_ja": [("ja", "ents_f"), ("ja", "ents_p"), ("ja", "ents_r")],
}
# `python -m spacy ...` with a record, at exit, of the modules loaded from a thinc directory.
WRAPPER = (
    "import atexit, json, os, runpy, sys\n"
    "def _record(path=sys.argv[1]):\n"
    "    found = sorted(f'{n}: {m.__file__}' for n, m in list(sys.modules.items())\n"
    "                   if os.sep + 'thinc' + os.sep in (getattr(m, '__file__', None) or ''))\n"
    "    open(path, 'w').write(json.dumps(found))\n"
    "atexit.register(_record)\n"
    "sys.argv = ['spacy'] + sys.argv[2:]\n"
    "runpy.run_module('spacy', run_name='__main__', alter_sys=True)\n"
)
PIPE = (
    "import json, sys, os, spacy\n"
    "nlp = spacy.load(sys.argv[1])\n"
    "texts = [json.loads(l)['text'] for l in open(sys.argv[2], encoding='utf8')\n"
    "         if json.loads(l)['source'] in sys.argv[3].split(',')]\n"
    "docs = list(nlp.pipe(texts))\n"
    "found = [n for n, m in list(sys.modules.items()) if os.sep + 'thinc' + os.sep in (getattr(m, '__file__', None) or '')]\n"
    "print(json.dumps({'docs': len(docs), 'words': sum(len(d) for d in docs), 'ents': sum(len(d.ents) for d in docs),\n"
    "                  'thinc_is': __import__('thinc').__name__, 'thinc_modules': found}))\n"
)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def env_for(framework: str) -> Dict[str, str]:
    env = S.child_env("plait" if framework == "plait" else "thinc83", 1)
    if framework == "plait":
        env["PLAIT_AS_THINC"] = "1"
    return env


def run_spacy(python: str, framework: str, args: List[str], record: Path, log: Path) -> None:
    with open(log, "a", encoding="utf8") as f:
        proc = subprocess.run([python, "-c", WRAPPER, str(record), *args], env=env_for(framework),
                              stdout=f, stderr=subprocess.STDOUT, cwd=str(H.REPO_DIR))
    if proc.returncode != 0:
        raise SystemExit(f"spacy {args[0]} failed on {framework} (exit {proc.returncode}); see {log}")
    found = json.loads(record.read_text())
    if framework == "plait" and found:
        raise SystemExit(f"plait run loaded modules from thinc's directory: {found[:5]}")
    if framework == "thinc" and not found:
        raise SystemExit(f"the thinc run of spacy {args[0]} did not use the real thinc; see {log}")


def one_run(python: str, corpus: Path, out: Path, name: str, framework: str, seed: int,
            steps: int) -> Dict[str, Any]:
    cfg, train, dev, tests = S.PIPELINES[name]
    run_dir = out / f"{name}-{framework}-s{seed}"
    done = run_dir / "result.json"
    if done.exists():
        return json.loads(done.read_text())
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "log.txt"
    args = ["train", str(S.SPACY_DIR / cfg), "--output", str(run_dir), "--paths.train", str(corpus / train),
            "--paths.dev", str(corpus / dev), "--system.seed", str(seed)]
    if steps:
        args += ["--training.max_steps", str(steps)]
    result: Dict[str, Any] = {"train_cpu_s": None, "train_wall_s": None, "scores": {}}
    if not (run_dir / "model-best" / "meta.json").exists():  # else trained before: reused
        before, t0 = _children_cpu(), time.perf_counter()
        run_spacy(python, framework, args, run_dir / "modules-train.json", log)
        result.update(train_cpu_s=_children_cpu() - before, train_wall_s=time.perf_counter() - t0)
    for source in tests:
        metrics = run_dir / f"metrics-{source}.json"
        run_spacy(python, framework, ["evaluate", str(run_dir / "model-best"), str(corpus / f"test_{source}.spacy"),
                                      "--gold-preproc", "--output", str(metrics)],
                  run_dir / f"modules-evaluate-{source}.json", log)
        result["scores"][source] = json.loads(metrics.read_text())
    proc = subprocess.run([python, "-c", PIPE, str(run_dir / "model-best"), str(corpus / "texts.jsonl"), ",".join(tests)],
                          env=env_for(framework), capture_output=True, text=True, cwd=str(H.REPO_DIR))
    if proc.returncode != 0:
        raise SystemExit(f"spacy.load + nlp.pipe failed on {framework}:\n{proc.stderr[-3000:]}")
    result["pipe"] = json.loads(proc.stdout.strip().splitlines()[-1])
    if framework == "plait" and (result["pipe"]["thinc_modules"] or result["pipe"]["thinc_is"] != "plait"):
        raise SystemExit(f"plait's nlp.pipe used thinc: {result['pipe']}")
    done.write_text(json.dumps(result))
    return result


def table(name: str, results: Dict[int, Dict[str, Any]]) -> str:
    seeds = sorted(results)
    headers = ["held-out score"]
    for seed in seeds:
        headers += [f"plait s{seed}", f"thinc s{seed}"]
    headers += ["plait mean", "thinc mean", "mean diff", "max seed diff"]
    rows = []
    for source, key in SCORES[name]:
        row = [f"{source} {key}"]
        ours, theirs = [], []
        for seed in seeds:
            a = results[seed]["plait"]["scores"][source].get(key)
            b = results[seed]["thinc"]["scores"][source].get(key)
            ours.append(100 * a)
            theirs.append(100 * b)
            row += [f"{100 * a:.2f}", f"{100 * b:.2f}"]
        diffs = [x - y for x, y in zip(ours, theirs)]
        row += [f"{statistics.mean(ours):.2f}", f"{statistics.mean(theirs):.2f}",
                f"{statistics.mean(ours) - statistics.mean(theirs):+.2f}",
                f"{max(diffs, key=abs):+.2f}"]
        rows.append(row)
    return H.render_table(headers, rows)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pipelines", default="pipeline,beam")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--steps", type=int, default=0, help="training steps (default: the config's max_steps)")
    p.add_argument("--out", default=str(H.VENVS_DIR / "spacy-scores"),
                   help="where runs go and are reused from (default bench/.venvs/spacy-scores)")
    p.add_argument("--spacy-python", default=None)
    p.add_argument("--limit", type=int, default=0, help="documents per source and split (default all)")
    args = p.parse_args(argv)
    python = S.spacy_python(args.spacy_python)
    why = S.probe(python)
    if why:
        raise SystemExit(f"bench: {why}")
    out = Path(args.out)
    corpus = out / "corpus"
    if not (corpus / "texts.jsonl").exists():
        S.convert_corpus(python, corpus, args.limit or None)
    seeds = [int(s) for s in args.seeds.split(",")]
    for name in [n.strip() for n in args.pipelines.split(",") if n.strip()]:
        results: Dict[int, Dict[str, Any]] = {}
        for seed in seeds:
            results[seed] = {}
            for fw in FRAMEWORKS:
                print(f"[{name} seed {seed}] {fw} ...", flush=True)
                results[seed][fw] = one_run(python, corpus, out, name, fw, seed, args.steps)
        print()
        print(f"## {name} ({S.PIPELINES[name][0]}), seeds {args.seeds}: bench/spacy_scores.py")
        print(table(name, results))
        cpu = {fw: [results[s][fw]["train_cpu_s"] for s in seeds if results[s][fw]["train_cpu_s"]] for fw in FRAMEWORKS}
        if cpu["plait"] and cpu["thinc"]:
            print(f"spacy train CPU-seconds (mean of the runs trained here; evaluations on dev included, one "
                  f"thread): plait {statistics.mean(cpu['plait']):.0f}, thinc {statistics.mean(cpu['thinc']):.0f}")


if __name__ == "__main__":
    main()
