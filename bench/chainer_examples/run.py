"""Run Chainer 1.7.2's example programs on plait (through plait.chainer_alias) and on chainer 1.7.2.

    python bench/chainer_examples/run.py EXAMPLES_DIR [--only mnist,ptb,...] [--repeat N]

EXAMPLES_DIR is a copy of the ``examples/`` folder of Chainer 1.7.2 (it is Chainer's code and is
not part of plait: bring it yourself). The data come from ../shared/data through make_data.py.
Each example runs with its own command-line flags (the sizes below are the only reductions), in a
fresh folder per side, one side after the other, with the same environment (1 BLAS/OpenMP thread
by default): plait as ``PLAIT_PYTHON -m plait.chainer_alias SCRIPT ARGS``, Chainer as
``CHAINER_PYTHON SCRIPT ARGS`` (a numpy<2 venv with chainer==1.7.2, six and Pillow; the
chainer-suite harness makes one in /tmp/upstream-chainer-1.7.2). The table gives each program's
own final figures (parsed from what it prints) and the wall and CPU seconds of the whole process.

Where the file given is a later revision than 1.7.2 and calls what 1.7.2 does not have, the
runner rewrites that call back to its 1.7.2 form in the copy it runs (both sides run the same
text); ``ADAPTATIONS`` lists each, and the run prints them. It also says, file by file, whether
the copy given is the one behind the figures in docs/chainer-face.md (``MEASURED_FILES``).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import make_data  # noqa: E402

DEFAULT_PLAIT_PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
DEFAULT_CHAINER_PYTHON = "/tmp/upstream-chainer-1.7.2/bin/python"

# Chainer 1.7.2 uses names that Python 3.10/3.11 removed (collections.Iterable in its pooling
# functions, inspect.getargspec); its side gets them back, as the chainer-suite harness does.
CHAINER_COMPAT = """\
import collections, collections.abc, inspect
for _n in ("Iterable", "Iterator", "Sequence", "MutableSequence", "Mapping", "MutableMapping",
           "Callable", "Hashable", "Sized", "Container", "Set", "MutableSet", "Generator"):
    if not hasattr(collections, _n):
        setattr(collections, _n, getattr(collections.abc, _n))
if not hasattr(inspect, "getargspec"):
    def getargspec(func):
        s = inspect.getfullargspec(func)
        return (s.args, s.varargs, s.varkw, s.defaults)
    inspect.getargspec = getargspec
"""

# The files behind the figures in docs/chainer-face.md (sha256, first 12 hex digits) and where they
# came from: Chainer's own history as a public code index stores it (cupy/cupy keeps the history
# of the Chainer repository it was split from), at the commit named. None is verifiably the text
# of the v1.7.2 tag (commit 65810a1a): the index holds other versions of these files, not that one.
MEASURED_FILES = {
    "mnist/data.py": ("fa4c925e7ee4", "cupy/cupy@930611fb"),
    "mnist/net.py": ("1149e0f12e4a", "cupy/cupy@74e680a8"),
    "mnist/train_mnist.py": ("b954f6e14d19", "cupy/cupy@0212ca8c (after 1.8.1: graph styles)"),
    "ptb/net.py": ("4ce0809c9d05", "cupy/cupy@e7fc0fe1"),
    "ptb/train_ptb.py": ("75ccc57c3347", "cupy/cupy@0212ca8c"),
    "word2vec/train_word2vec.py": ("b23b8dfbd31c", "cupy/cupy@010feb85"),
    "sentiment/train_sentiment.py": ("eebc63302d06", "cupy/cupy@33b1b800 (1.15 or later: cleargrads)"),
    "imagenet/googlenet.py": ("8e5f7d57f21a", "cupy/cupy@4d0997f1"),
    "imagenet/train_imagenet.py": ("d60475b28c93", "a copy without repository in the index; pre-trainer layout"),
}

# (example folder, file, old text, new text, why)
ADAPTATIONS: List[Tuple[str, str, str, str, str]] = [
    ("mnist", "train_mnist.py",
     "                    (model.loss, ),\n"
     "                    variable_style=variable_style,\n"
     "                    function_style=function_style)\n",
     "                    (model.loss, ))\n",
     "build_computational_graph's variable_style/function_style came after 1.8.1"),
    ("sentiment", "train_sentiment.py",
     "            model.cleargrads()\n",
     "            model.zerograds()\n",
     "Link.cleargrads came in 1.15; 1.7.2's loop called zerograds"),
]

# name -> folder, script, args, data (make_data target), metrics [(label, regex)]; the last match counts.
EXAMPLES: Dict[str, dict] = {
    "mnist": dict(
        folder="mnist", script="train_mnist.py", data="mnist",
        args=["--epoch", "1", "--unit", "100"],
        metrics=[("test loss", r"test  mean loss=([-\d.e]+)"),
                 ("test accuracy", r"test  mean loss=[-\d.e]+, accuracy=([-\d.e]+)")]),
    "ptb": dict(
        folder="ptb", script="train_ptb.py", data="ptb",
        args=["--epoch", "1", "--unit", "100"],
        metrics=[("valid perplexity", r"validation perplexity: ([\d.]+)"),
                 ("test perplexity", r"test perplexity: ([\d.]+)")]),
    "word2vec": dict(
        folder="word2vec", script="train_word2vec.py", data="ptb", data_files=["ptb.train.txt"],
        args=["--epoch", "3", "--unit", "100"],
        metrics=[("last epoch loss", r"^\s*\[?([-\d.e+]+)\]?\s*$")]),
    "sentiment": dict(
        folder="sentiment", script="train_sentiment.py", data="sentiment",
        args=["--epoch", "4", "--epocheval", "2"],
        metrics=[("last epoch loss", r"^loss: ([\d.]+)"),
                 ("test node acc %", r"Test evaluateion\n Node accuracy: ([\d.]+)"),
                 ("test root acc %", r"Test evaluateion\n Node accuracy: [^\n]*\n Root accuracy: ([\d.]+)")]),
}
# train_imagenet.py prints its first figure (mean loss and error of the last 1000 updates) after
# 1000 updates: one epoch of the 1000 training images, one image an update.
for _arch in ("nin", "alex", "googlenet", "googlenetbn"):
    EXAMPLES["imagenet-" + _arch] = dict(
        folder="imagenet", script="train_imagenet.py", data="imagenet", model_file=_arch + ".py",
        args=["train.txt", "val.txt", "--arch", _arch, "--batchsize", "1", "--val_batchsize", "250",
              "--epoch", "1", "--loaderjob", "1", "--root", "."],
        metrics=[("train loss (1000 it)", r'"loss": ([-\d.e]+)'),
                 ("train error (1000 it)", r'"error": ([-\d.e]+)')])


def _sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:12]


def prepare(example: str, spec: dict, examples_dir: str, data_dir: str, work: str) -> str:
    src = os.path.join(examples_dir, spec["folder"])
    if not os.path.isfile(os.path.join(src, spec["script"])):
        raise SystemExit("run.py: %s not found under %s" % (spec["script"], src))
    if os.path.exists(work):
        shutil.rmtree(work)
    shutil.copytree(src, work)
    for folder, name, old, new, why in ADAPTATIONS:
        path = os.path.join(work, name)
        if folder != spec["folder"] or not os.path.exists(path):
            continue
        with open(path) as f:
            text = f.read()
        if old in text:
            with open(path, "w") as f:
                f.write(text.replace(old, new))
            print("  adapted %s/%s: %s" % (folder, name, why))
    data_src = os.path.join(data_dir, spec["data"])
    names = spec.get("data_files") or os.listdir(data_src)
    for name in names:
        s, d = os.path.join(data_src, name), os.path.join(work, name)
        if os.path.isdir(s):
            shutil.copytree(s, d)
        else:
            shutil.copy(s, d)
    return work


def run_one(cmd: Sequence[str], cwd: str, env: Dict[str, str], log: str,
            timeout: float) -> Tuple[int, float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log, "w") as out:
        try:
            rc = subprocess.run(list(cmd), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = -9
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(log, errors="replace") as f:
        return rc, wall, cpu, f.read()


def parse_metrics(spec: dict, text: str) -> Dict[str, Optional[float]]:
    found = {}
    for label, pattern in spec["metrics"]:
        matches = re.findall(pattern, text, re.MULTILINE)
        found[label] = float(matches[-1]) if matches else None
    return found


def _fmt(values: List[Optional[float]]) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    if len(vals) == 1:
        return "%.6g" % vals[0]
    return "%.5g (%s)" % (statistics.mean(vals), ", ".join("%.5g" % v for v in vals))


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("examples_dir", help="Chainer 1.7.2's examples/ folder")
    p.add_argument("--only", default=",".join(EXAMPLES), help="comma-separated: " + ",".join(EXAMPLES))
    p.add_argument("--work", default="/tmp/chainer-examples-run")
    p.add_argument("--data", default=make_data.DEFAULT_DATA, help="../shared/data")
    p.add_argument("--plait-python", default=DEFAULT_PLAIT_PYTHON)
    p.add_argument("--chainer-python", default=DEFAULT_CHAINER_PYTHON)
    p.add_argument("--sides", default="plait,chainer")
    p.add_argument("--repeat", type=int, default=1, help="runs per side (their spread is the noise)")
    p.add_argument("--threads", default="1", help="OMP/OPENBLAS/MKL threads for both sides")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--seed", type=int, default=None,
                   help="seed numpy.random and random at start-up on both sides (a sitecustomize on "
                        "PYTHONPATH; the programs stay as they are): plait draws its initial weights, "
                        "dropout masks and negative samples as Chainer 1.7.2 does, so seeded runs "
                        "differ by rounding only, until it grows")
    a = p.parse_args(argv)

    chosen = [e for e in a.only.split(",") if e]
    unknown = sorted(set(chosen) - set(EXAMPLES))
    if unknown:
        raise SystemExit("run.py: unknown example(s) %s; choose from %s" % (unknown, list(EXAMPLES)))
    sides = [s for s in a.sides.split(",") if s]
    pythons = {"plait": a.plait_python, "chainer": a.chainer_python}
    for side in sides:
        probe = "import six" + (", PIL" if any(c.startswith("imagenet") for c in chosen) else "")
        if side == "chainer":
            probe += "; import chainer; assert chainer.__version__ == '1.7.2', chainer.__version__"
        r = subprocess.run([pythons[side], "-c", probe], capture_output=True, text=True)
        if r.returncode:
            raise SystemExit("run.py: %s python %s cannot run the examples (%s). The examples import "
                             "six (a dependency of chainer 1.7.2) and the imagenet one Pillow: pip "
                             "install six pillow." % (side, pythons[side], r.stderr.strip().splitlines()[-1]))

    data_dir = os.path.join(a.work, "data")
    targets = sorted({EXAMPLES[e]["data"] for e in chosen})
    print("data -> %s (%s)" % (data_dir, ",".join(targets)))
    make_data.main([data_dir, "--data", a.data, "--only", ",".join(targets), "--sentiment-max", "1000"])

    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = a.threads
    env.update(PYTHONUTF8="1", PYTHONHASHSEED="0")
    env.pop("PLAIT_AS_CHAINER", None)

    seeding = "" if a.seed is None else (
        "import random, numpy\nrandom.seed(%d)\nnumpy.random.seed(%d)\n" % (a.seed, a.seed))
    side_env = {}
    for side, text in (("plait", seeding), ("chainer", CHAINER_COMPAT + seeding)):
        if not text:
            side_env[side] = env
            continue
        folder = os.path.join(a.work, "sitecustomize-" + side)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "sitecustomize.py"), "w") as f:
            f.write(text)
        side_env[side] = dict(env, PYTHONPATH=os.pathsep.join(
            p for p in (folder, env.get("PYTHONPATH")) if p))

    rows = []
    for example in chosen:
        spec = EXAMPLES[example]
        script = os.path.join(a.examples_dir, spec["folder"], spec["script"])
        model_file = spec.get("model_file")
        if model_file and not os.path.isfile(os.path.join(a.examples_dir, spec["folder"], model_file)):
            print("\n== %s: not run: %s is not in %s" % (example, model_file, a.examples_dir))
            rows.append((example, spec, {}))
            continue
        print("\n== %s: %s %s" % (example, spec["script"], " ".join(spec["args"])))
        folder = os.path.join(a.examples_dir, spec["folder"])
        for name in sorted(os.listdir(folder)):
            key = spec["folder"] + "/" + name
            if name.endswith(".py") and key in MEASURED_FILES:
                sha = _sha(os.path.join(folder, name))
                known, origin = MEASURED_FILES[key]
                print("  %s sha256 %s: %s" % (key, sha, "the file measured in the docs (%s)" % origin
                                               if sha == known else "NOT the file measured in the docs"))
        results = {s: [] for s in sides}
        for rep in range(a.repeat):
            for side in sides:  # one after the other, alternating
                work = os.path.join(a.work, side, example)
                prepare(example, spec, a.examples_dir, data_dir, work)
                if side == "plait":
                    cmd = [pythons[side], "-m", "plait.chainer_alias", spec["script"], *spec["args"]]
                else:
                    cmd = [pythons[side], spec["script"], *spec["args"]]
                log = os.path.join(a.work, "%s-%s-%d.log" % (example, side, rep))
                rc, wall, cpu, text = run_one(cmd, work, side_env[side], log, a.timeout)
                metrics = parse_metrics(spec, text)
                status = "ok" if rc == 0 else "FAILED rc=%d (see %s)" % (rc, log)
                print("  %-7s run %d: %s  wall %.1fs cpu %.1fs  %s" % (
                    side, rep + 1, status, wall, cpu,
                    "  ".join("%s=%s" % (k, v) for k, v in metrics.items())))
                if rc != 0:
                    print("    " + "\n    ".join(text.strip().splitlines()[-6:]))
                results[side].append((rc, wall, cpu, metrics))
        rows.append((example, spec, results))

    print("\n| example | flags | figure | plait | chainer 1.7.2 | plait wall / CPU s | chainer wall / CPU s |")
    print("|---|---|---|---|---|---|---|")
    for example, spec, results in rows:
        def times(side):
            runs = results.get(side) or []
            ok = [r for r in runs if r[0] == 0]
            if not runs:
                return "-"
            if not ok:
                return "failed"
            return "%.1f / %.1f" % (statistics.median(r[1] for r in ok), statistics.median(r[2] for r in ok))

        if not results:
            print("| %s | %s | not run: %s missing | - | - | - | - |" % (
                example, " ".join(spec["args"]), spec.get("model_file")))
            continue
        for i, (label, _) in enumerate(spec["metrics"]):
            vals = {s: [r[3][label] for r in results.get(s, []) if r[0] == 0] for s in ("plait", "chainer")}
            print("| %s | %s | %s | %s | %s | %s | %s |" % (
                example if i == 0 else "", " ".join(spec["args"]) if i == 0 else "", label,
                _fmt(vals["plait"]), _fmt(vals["chainer"]),
                times("plait") if i == 0 else "", times("chainer") if i == 0 else ""))
    failed = [e for e, _, res in rows for s in res for r in res[s] if r[0] != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
