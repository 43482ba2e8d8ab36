"""spaCy 3.8 training, evaluation and nlp.pipe on plait (through the thinc alias) vs thinc 8.3.14.

    .venv/bin/python bench/spacy_train.py [--pipelines pipeline,beam] [--steps N] [--rounds 3]
                                          [--threads 1] [--quick] [--json PATH]

Both contenders run in the same spaCy venv (bench/.venvs/spacy, `bash bench/setup_peers.sh spacy`;
or --spacy-python / $PLAIT_SPACY_PYTHON), with the same config and seed: plait's child is started
as `python -m plait.thinc_alias bench/spacy_train.py --child plait ...` (the checkout on
PYTHONPATH), thinc's as plain `python bench/spacy_train.py --child thinc83 ...`. Rounds alternate
plait, thinc, plait, ... per pipeline; the tables show medians.

Pipelines (bench/spacy/*.cfg): `pipeline` = tok2vec, tagger, morphologizer, parser, ner, textcat
on the mixed corpus of bench/spacy/convert.py (Turkish treebank, Japanese NER, Rotten Tomatoes);
`beam` = tok2vec, beam_parser, beam_ner on its treebank and Japanese part. Per child:

* train: spaCy's own training step (spacy.training.loop.train_while_improving: nlp.update,
  finish_update, schedules) for --steps steps of --batch-words words (default 1000, the size the
  configs' schedule reaches after ~2300 steps and keeps), without dev evaluations; words =
  spaCy's count.
* evaluate: nlp.evaluate on the held-out test files (gold tokens), words = tokens;
* pipe: in a child of its own, as a user runs it: spacy.load, one untimed pass of nlp.pipe
  over the raw test texts (the vocabulary then holds their words), then --pipe-passes timed
  passes (default 3: one pass is about a CPU-second, short enough for a neighbour on the machine
  to move it by 15%); words per CPU-second over the timed passes. --pipe-after-training pipes
  in the training child instead, after evaluate (the measurement before 2026-11-26 evening):
  every full garbage collection there also walks the trained pipeline;
  both on one saved pipeline that every child loads (spacy.load): a pipeline trained once with
  thinc before the rounds (--reference-steps), or the one --reference names. Each library's own
  training would give another pipeline (their dropout draws differ), and what a beam costs
  depends on the model more than on the library.

Per CPU-second divides by the child's process time (all threads) over the same block; peak MB
is the child's ru_maxrss at exit. The reference pipeline's held-out scores are printed as each
library computes them (they must agree); the score comparison of full trainings is
bench/spacy_scores.py's.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import _harness as H

SPACY_DIR = H.BENCH_DIR / "spacy"
PIPELINES = {
    # name: (config, train file, dev file, test files)
    "pipeline": ("pipeline.cfg", "train.spacy", "dev.spacy", ("tr", "ja", "rt")),
    "beam": ("beam.cfg", "train_trja.spacy", "dev_trja.spacy", ("tr", "ja")),
    # The Japanese NER alone, greedy and beam (bench/spacy_scores.py compares them over seeds).
    "ner_ja": ("ner_ja.cfg", "train_ja.spacy", "dev_ja.spacy", ("ja",)),
    "beam_ner_ja": ("beam_ner_ja.cfg", "train_ja.spacy", "dev_ja.spacy", ("ja",)),
}
DEFAULT_STEPS = {"pipeline": 150, "beam": 60, "ner_ja": 150, "beam_ner_ja": 60}
QUICK_STEPS = {"pipeline": 6, "beam": 3, "ner_ja": 6, "beam_ner_ja": 3}
# Training steps of the pipeline that every child evaluates and pipes (trained once, with thinc).
REFERENCE_STEPS = {"pipeline": 400, "beam": 200, "ner_ja": 400, "beam_ner_ja": 200}
# The batch size the configs' schedule (compounding 100 -> 1000 words) settles at after ~2300
# steps, and where a full training spends most of its steps.
DEFAULT_BATCH_WORDS = 1000
FRAMEWORKS = ("plait", "thinc83")

COLUMNS = [
    H.Column("train_per_cpu_s", "train words/CPU-s", higher_is_better=True),
    H.Column("train_per_s", "train words/s", higher_is_better=True),
    H.Column("evaluate_per_cpu_s", "evaluate words/CPU-s", higher_is_better=True),
    H.Column("pipe_per_cpu_s", "pipe words/CPU-s", higher_is_better=True),
    H.Column("pipe_per_s", "pipe words/s", higher_is_better=True),
    H.Column("peak_mb", "peak MB", "{:,.0f}", higher_is_better=False),
]
# The scores each test source is annotated for.
SCORE_KEYS = {"tr": ("tag_acc", "pos_acc", "morph_acc", "dep_uas", "dep_las"),
              "ja": ("tag_acc", "ents_f"), "rt": ("cats_score",)}


def spacy_python(explicit: Optional[str]) -> str:
    """The interpreter of the spaCy venv: --spacy-python, $PLAIT_SPACY_PYTHON, bench/.venvs/spacy."""
    return explicit or os.environ.get("PLAIT_SPACY_PYTHON") or str(H.VENVS_DIR / "spacy" / "bin" / "python")


def child_env(framework: str, threads: int) -> Dict[str, str]:
    """The harness's environment (thread variables, no PYTHONPATH); plait's child gets the checkout.

    threads=0 leaves every thread variable unset: each library's own default (plait claims
    cores, numpy's OpenBLAS starts a thread per core), the setting a user gets.
    """
    env = H._child_env(max(threads, 1))
    if threads == 0:
        for var in H.THREAD_ENV_VARS + ("BENCH_THREADS",):
            env.pop(var, None)
    env.pop("PLAIT_AS_THINC", None)
    if framework == "plait":
        env["PYTHONPATH"] = str(H.REPO_DIR)
    return env


def run_child(python: str, framework: str, params: Dict[str, Any], threads: int,
              timeout: float) -> Dict[str, Any]:
    script = str(Path(__file__).resolve())
    alias = ["-m", "plait.thinc_alias"] if framework == "plait" else []
    cmd = [python, *alias, script, "--child", framework, "--params", json.dumps(params)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(framework, threads),
                              cwd=str(H.REPO_DIR), timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(H.RESULT_PREFIX):
            return json.loads(line[len(H.RESULT_PREFIX):])
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-20:])
    return {"error": f"child exited {proc.returncode} without a result:\n{tail}"}


# ---------------------------------------------------------------------------------------
# Child


def thinc_directory_modules() -> List[str]:
    """Modules loaded from a real thinc's directory (none may be, under the alias)."""
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if f"{os.sep}thinc{os.sep}" in path:
            found.append(f"{name} ({path})")
    return found


def pipe_work(framework: str, p: Dict[str, Any]) -> Dict[str, Any]:
    """The pipe phase, in a process of its own: spacy.load, then nlp.pipe, as a user runs it."""
    import spacy
    import thinc

    if framework == "plait" and thinc.__name__ != "plait":
        raise RuntimeError("bench: the plait child imported the real thinc; the alias is not on")
    tests = PIPELINES[p["pipeline"]][3]
    with H.Clock() as load:
        loaded = spacy.load(p["reference"])
    with open(Path(p["corpus"]) / "texts.jsonl", encoding="utf8") as f:
        rows = [json.loads(line) for line in f]
    texts = [row["text"] for row in rows if row["source"] in tests]
    # One untimed pass first: the vocabulary then holds the texts' words, as in a process that
    # has been piping for a while; every timed pass costs what the next one would.
    for _ in loaded.pipe(texts):
        pass
    with H.Clock() as pipe:
        n_pipe = sum(len(doc) for _ in range(p.get("pipe_passes", 1)) for doc in loaded.pipe(texts))
    result: Dict[str, Any] = {"load_s": load.wall, "pipe_words": n_pipe}
    result.update(H.throughput_fields("pipe", n_pipe, pipe))
    result["thinc_modules"] = thinc_directory_modules()
    return result


def work(framework: str, p: Dict[str, Any]) -> Dict[str, Any]:
    if p.get("phase") == "pipe":
        return pipe_work(framework, p)
    t0 = time.perf_counter()
    import spacy
    from spacy.training import Corpus
    from spacy.training.initialize import init_nlp
    from spacy.training.loop import create_train_batches, train_while_improving
    from spacy.util import load_config, registry, resolve_dot_names
    from spacy.schemas import ConfigSchemaTraining
    import thinc

    import_s = time.perf_counter() - t0
    if framework == "plait" and thinc.__name__ != "plait":
        raise RuntimeError("bench: the plait child imported the real thinc; the alias is not on")
    corpus = Path(p["corpus"])
    cfg_name, train_file, dev_file, tests = PIPELINES[p["pipeline"]]
    overrides = {"paths.train": str(corpus / train_file), "paths.dev": str(corpus / dev_file),
                 "system.seed": p["seed"], "training.max_steps": p["steps"]}
    if p.get("batch_words"):
        overrides["training.batcher.size"] = p["batch_words"]
    config = load_config(SPACY_DIR / cfg_name, overrides=overrides, interpolate=False)
    with H.Clock() as init:
        nlp = init_nlp(config)
    config = nlp.config.interpolate()
    T = registry.resolve(config["training"], schema=ConfigSchemaTraining)
    (train_corpus,) = resolve_dot_names(config, [T["train_corpus"]])
    batches = create_train_batches(nlp, train_corpus, T["batcher"], T["max_epochs"])
    steps = train_while_improving(
        nlp, T["optimizer"], batches, lambda: (0.0, {}), dropout=T["dropout"],
        eval_frequency=p["steps"] + 1, accumulate_gradient=T["accumulate_gradient"],
        patience=0, max_steps=p["steps"], exclude=T["frozen_components"],
        annotating_components=T["annotating_components"], before_update=T["before_update"])
    words = 0
    with H.Clock() as train:
        for _, info, _ in steps:
            words = info["words"]
    result: Dict[str, Any] = {"import_s": import_s, "init_s": init.wall, "train_words": words,
                              "steps": p["steps"]}
    result.update(H.throughput_fields("train", words, train))
    if p.get("save"):  # the parent's reference pipeline: trained here, timed nowhere
        nlp.to_disk(p["save"])
        return result
    del nlp

    # Evaluation and nlp.pipe run the same saved pipeline in every child: two trainings give two
    # pipelines (plait's and thinc's dropout draws differ), and the beam components' cost depends
    # on the model far more than on the library.
    with H.Clock() as load:
        loaded = spacy.load(p["reference"])
    examples = {t: list(Corpus(corpus / f"test_{t}.spacy", gold_preproc=True)(loaded)) for t in tests}
    n_eval = sum(len(eg.reference) for egs in examples.values() for eg in egs)
    scores: Dict[str, Any] = {}
    with H.Clock() as evaluate:
        for t, egs in examples.items():
            scores[t] = loaded.evaluate(egs)
    result.update(H.throughput_fields("evaluate", n_eval, evaluate))
    for t, s in scores.items():
        for key in SCORE_KEYS[t]:
            if isinstance(s.get(key), float):
                result[f"{t}_{key}"] = 100.0 * s[key]

    result["load_s"] = load.wall
    if p.get("pipe_after_training"):
        # The former measurement: nlp.pipe in this process, after training and evaluate. The
        # trained pipeline (still held by the training loop's generator) and the loaded one are
        # then both walked by every full garbage collection, which a process that only pipes
        # never pays; the evaluation's examples are freed first.
        del examples
        gc.collect()
        with open(corpus / "texts.jsonl", encoding="utf8") as f:
            rows = [json.loads(line) for line in f]
        texts = [row["text"] for row in rows if row["source"] in tests]
        with H.Clock() as pipe:
            n_pipe = sum(len(doc) for _ in range(p.get("pipe_passes", 1)) for doc in loaded.pipe(texts))
        result["pipe_words"] = n_pipe
        result.update(H.throughput_fields("pipe", n_pipe, pipe))
    result["thinc_modules"] = thinc_directory_modules()
    result["spacy_version"] = spacy.__version__
    return result


# ---------------------------------------------------------------------------------------
# Parent


def convert_corpus(python: str, out: Path, limit: Optional[int]) -> None:
    cmd = [python, str(SPACY_DIR / "convert.py"), str(out)] + (["--limit", str(limit)] if limit else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env("thinc83", 1))
    if proc.returncode != 0:
        raise SystemExit(f"bench: converting the corpus failed:\n{proc.stderr[-3000:]}")


def probe(python: str) -> str:
    """Why the spaCy venv cannot run the benchmark ('' when it can)."""
    if not Path(python).exists():
        return (f"no spaCy venv at {python}; create it with `bash bench/setup_peers.sh spacy` "
                "or name one with --spacy-python")
    code = "import spacy, thinc, importlib.metadata as m; print(spacy.__version__, m.version('thinc'))"
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=child_env("thinc83", 1))
    if proc.returncode != 0:
        return f"{python} cannot import spacy and thinc:\n{proc.stderr[-1500:]}"
    spacy_v, thinc_v = proc.stdout.split()
    if not spacy_v.startswith("3.8.") or thinc_v != "8.3.14":
        return f"{python} has spacy {spacy_v} and thinc {thinc_v}; the benchmark wants spacy 3.8.x, thinc 8.3.14"
    return ""


def score_table(medians: Dict[str, Dict[str, Any]], tests) -> str:
    keys = [f"{t}_{k}" for t in tests for k in SCORE_KEYS[t] if any(f"{t}_{k}" in m for m in medians.values())]
    rows = []
    for name in FRAMEWORKS:
        if name in medians:
            rows.append([name] + [H.format_value(medians[name].get(k), "{:.2f}") for k in keys])
    return H.render_table(["held-out score"] + keys, rows)


def main(argv=None) -> None:
    parser = H.make_parser(__doc__.splitlines()[0])
    parser.add_argument("--pipelines", default="pipeline,beam",
                        help="comma list of " + ", ".join(PIPELINES) + " (default both)")
    parser.add_argument("--steps", type=int, default=0,
                        help="training steps per child (default: pipeline 150, beam 60)")
    parser.add_argument("--batch-words", type=int, default=DEFAULT_BATCH_WORDS,
                        help="words per training batch, constant (default 1000: where the configs' "
                             "schedule settles); 0 keeps the configs' compounding schedule")
    parser.add_argument("--reference", default=None, metavar="DIR",
                        help="a saved pipeline to evaluate and pipe instead of training one; "
                             "'{name}' in it becomes the pipeline's name (pipeline, beam)")
    parser.add_argument("--reference-steps", type=int, default=0,
                        help="steps of the reference pipeline trained with thinc (default: pipeline "
                             "400, beam 200)")
    parser.add_argument("--spacy-python", default=None,
                        help="interpreter of a venv with spaCy 3.8 and thinc 8.3.14")
    parser.add_argument("--pipe-passes", type=int, default=3,
                        help="passes of nlp.pipe over the test texts in each child (default 3)")
    parser.add_argument("--pipe-after-training", action="store_true",
                        help="pipe in the training child, after training and evaluate (the former "
                             "measurement), instead of in a fresh child that only loads and pipes")
    parser.add_argument("--limit", type=int, default=0,
                        help="documents per source and split of the corpus (default: all)")
    parser.set_defaults(peers="thinc83")
    args = parser.parse_args(argv)
    if args.child:
        return H.child_main(args.child, args.params, work)
    python = spacy_python(args.spacy_python)
    why = probe(python)
    if why:
        raise SystemExit(f"bench: {why}")
    names = [n.strip() for n in args.pipelines.split(",") if n.strip()]
    unknown = [n for n in names if n not in PIPELINES]
    if unknown:
        raise KeyError(f"bench: unknown pipeline(s) {unknown}; known: {', '.join(PIPELINES)}")
    frameworks = ["plait"] + ([] if args.peers == "none" else ["thinc83"])
    rounds = 1 if args.quick else args.rounds
    args.rounds = rounds
    limit = 60 if args.quick else (args.limit or None)
    all_runs: Dict[str, Any] = {}
    all_medians: Dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="plait-spacy-bench-") as tmp:
        corpus = Path(tmp) / "corpus"
        convert_corpus(python, corpus, limit)
        for name in names:
            steps = args.steps or (QUICK_STEPS if args.quick else DEFAULT_STEPS)[name]
            batch_words = 100 if args.quick else args.batch_words
            params = {"pipeline": name, "steps": steps, "batch_words": batch_words,
                      "seed": args.seed, "corpus": str(corpus),
                      "pipe_passes": 1 if args.quick else max(1, args.pipe_passes),
                      "pipe_after_training": bool(args.pipe_after_training)}
            if args.reference:
                params["reference"] = args.reference.format(name=name)
            else:
                ref_steps = args.reference_steps or (QUICK_STEPS if args.quick else REFERENCE_STEPS)[name]
                params["reference"] = str(Path(tmp) / f"reference-{name}")
                ref = run_child(python, "thinc83", dict(params, steps=ref_steps, save=params["reference"]),
                                1, args.timeout)
                if "error" in ref:
                    raise SystemExit(f"bench: training the reference {name} pipeline with thinc failed:\n{ref['error']}")
                print(f"[{name}] reference pipeline: trained with thinc, {ref_steps} steps of {batch_words} words",
                      flush=True)
            runs: Dict[str, List[Dict[str, Any]]] = {fw: [] for fw in frameworks}
            for r in range(rounds):
                for fw in frameworks:
                    t0 = time.perf_counter()
                    res = run_child(python, fw, params, args.threads, args.timeout)
                    if "error" not in res and not args.pipe_after_training:
                        piped = run_child(python, fw, dict(params, phase="pipe"), args.threads, args.timeout)
                        if "error" in piped:
                            res = {"error": "the nlp.pipe child: " + piped["error"]}
                        else:
                            res["thinc_modules"] = res.get("thinc_modules", []) + piped.pop("thinc_modules", [])
                            res["peak_mb"] = max(res.get("peak_mb", 0.0), piped.pop("peak_mb", 0.0))
                            res.update(piped)
                    took = time.perf_counter() - t0
                    if "error" not in res and fw == "plait" and res.get("thinc_modules"):
                        res = {"error": "modules loaded from thinc's directory under the alias: "
                                        + ", ".join(res["thinc_modules"][:5])}
                    status = "FAILED" if "error" in res else "ok"
                    print(f"[{name} round {r + 1}/{rounds}] {fw}: {status} ({took:.1f} s)"
                          + (f"\n{res['error']}" if "error" in res else ""), flush=True)
                    runs[fw].append(res)
            medians = H.median_results(runs)
            all_runs[name], all_medians[name] = runs, medians
            shown = {k: v for k, v in params.items() if k not in ("corpus", "reference")}
            shown["evaluated and piped"] = (args.reference.format(name=name) if args.reference else
                                            f"one pipeline trained with thinc ({ref_steps} steps)")
            shown["threads"] = args.threads if args.threads else "library defaults"
            H.print_report(f"spaCy {name} ({PIPELINES[name][0]}): bench/spacy_train.py", args,
                           shown, medians, COLUMNS, frameworks)
            print()
            print("Held-out scores of that one pipeline, as each library computes them (they must agree):")
            print(score_table(medians, PIPELINES[name][3]))
    H.write_json(args.json, __file__, args, {"pipelines": names, "steps": args.steps},
                 all_runs, all_medians)
    if any("plait" not in m for m in all_medians.values()):
        raise SystemExit("bench: plait produced no result (see the FAILED lines above)")


if __name__ == "__main__":
    main()
