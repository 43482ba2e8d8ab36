"""Run Thinc 8.3.14's or Chainer 1.7.2's own tests against plait on a CUDA machine.

The upstream runners (../shared/upstream/*/run.sh) measure the faces on the CPU: Chainer's
leaves out every test tagged attr.gpu / attr.cudnn / attr.multi_gpu, and Thinc's tests add
CupyOps to their parametrizations only where a GPU is visible. This tool runs them on a GPU, in
two steps, because the GPU machine may not have ../shared:

    python tools/upstream_gpu_suite.py prepare chainer DIR   # here: the tests, rewritten to plait, in DIR
    python tools/upstream_gpu_suite.py prepare thinc DIR
    python tools/upstream_gpu_suite.py run DIR [PYTEST ARGS...]   # there: one pytest per test file

`prepare` uses the suite's own harness to copy and rewrite the tests (the copy the CPU runs
use). For Chainer it adds a pytest plugin that keeps only the GPU-tagged tests (not those of
'_'-named base classes, which nose never collected, nor multi-GPU ones needing more GPUs than
NGPU, default: the devices cupy sees); Thinc's tests choose for themselves. `run` starts one
pytest per test file under a wall-clock limit (RUN_FILE_TIMEOUT, default 300 s), RUN_JOBS files at
a time (default 1), so a file that hangs is named and the others still run, and prints each file's
counts as it ends and the total. It needs cupy, a CUDA device and pytest; Chainer's tests also
use `mock` and `six`.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = Path(os.environ.get("UPSTREAM_SUITES", ROOT.parent / "shared" / "upstream"))
THINC_TESTS_DEFAULT = "/tmp/upstream-thinc-8.3.14"  # the thinc suite's reference venv

CHAINER_PLUGIN = '''"""pytest plugin written by tools/upstream_gpu_suite.py: keep only the GPU-tagged tests."""
import os

TAGS = ("gpu", "cudnn")


def _n_gpus():
    if "NGPU" in os.environ:
        return int(os.environ["NGPU"])
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def _tag(item):
    for obj in (getattr(item, "obj", None), getattr(item, "cls", None)):
        for name in TAGS:
            value = getattr(obj, name, False) if obj is not None else False
            if value is not False and value is not None and not callable(value) and value:
                return value
    return None


def pytest_collection_modifyitems(config, items):
    n_gpus = _n_gpus()
    keep, drop = [], []
    for item in items:
        tag = _tag(item)
        cls = getattr(item, "cls", None)
        base = cls is not None and cls.__name__.startswith("_")
        too_many = tag is not None and tag is not True and isinstance(tag, int) and tag > n_gpus
        (keep if tag is not None and not base and not too_many else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
'''
PLUGIN = CHAINER_PLUGIN  # the name the tests import


def _fail(message: str) -> int:
    print(f"upstream_gpu_suite: {message}", file=sys.stderr)
    return 2


def _thinc_tests() -> Path:
    if os.environ.get("THINC_TESTS"):
        return Path(os.environ["THINC_TESTS"])
    found = sorted(Path(THINC_TESTS_DEFAULT).glob("lib/python*/site-packages/thinc/tests"))
    return found[0] if found else Path(THINC_TESTS_DEFAULT) / "thinc" / "tests"


def prepare(kind: str, dest: Path) -> int:
    harness = UPSTREAM / f"{kind}-suite" / "harness.py"
    if not harness.exists():
        return _fail(f"no harness at {harness}; set UPSTREAM_SUITES to the folder holding {kind}-suite")
    if dest.exists() and any(dest.iterdir()):
        return _fail(f"{dest} is not empty; give a new or empty folder")
    dest.mkdir(parents=True, exist_ok=True)
    if kind == "chainer":
        src = subprocess.run([sys.executable, str(harness), "locate", str(harness.parent / "tests")],
                             capture_output=True, text=True, check=True).stdout.strip()
        subprocess.run([sys.executable, str(harness), "rewrite", src, str(dest), "plait.chainer", "target"],
                       check=True)
        (dest / "chainer_gpu_only.py").write_text(CHAINER_PLUGIN)
        tests, plugins = "chainer_tests", ["chainer_gpu_only"]
    else:
        src = _thinc_tests()
        if not src.is_dir():
            return _fail(f"no thinc tests at {src}: run ../shared/upstream/thinc-suite/run.sh once "
                         f"(it makes the reference venv), or set THINC_TESTS")
        subprocess.run([sys.executable, str(harness), "rewrite", str(src), str(dest), "plait",
                        "upstream_thinc_tests"], check=True)
        (dest / "pytest.ini").write_text("[pytest]\n")  # as the thinc runner does: pytest's defaults
        tests, plugins = "upstream_thinc_tests", []
    (dest / "gpu_suite.json").write_text(json.dumps({"kind": kind, "tests": tests, "plugins": plugins}))
    print(f"upstream_gpu_suite: {kind}'s tests rewritten to plait in {dest}; next, on a GPU machine: "
          f"python tools/upstream_gpu_suite.py run {dest}")
    return 0


_COUNTS = re.compile(r"(\d+) (passed|failed|error|errors|skipped|deselected)")


def run(dest: Path, extra: List[str]) -> int:
    try:
        spec = json.loads((dest / "gpu_suite.json").read_text())
    except (OSError, ValueError):
        return _fail(f"{dest} was not made by `prepare`")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(dest), str(ROOT), env.get("PYTHONPATH", "")) if p)
    try:
        limit = float(os.environ.get("RUN_FILE_TIMEOUT", "300"))
        jobs = max(1, int(os.environ.get("RUN_JOBS", "1")))
    except ValueError:
        return _fail(f"RUN_FILE_TIMEOUT ({os.environ.get('RUN_FILE_TIMEOUT')!r}) must be a number of "
                     f"seconds and RUN_JOBS ({os.environ.get('RUN_JOBS')!r}) a whole number, e.g. "
                     "RUN_JOBS=8 RUN_FILE_TIMEOUT=150")
    files = sorted((dest / spec["tests"]).rglob("test_*.py"))

    def one(path: Path):
        rel = path.relative_to(dest)
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", str(dest / "pytest.ini"),
               "--rootdir", str(dest), "-q", "-rfE", "-W", "ignore::DeprecationWarning"]
        for plugin in spec["plugins"]:
            cmd += ["-p", plugin]
        cmd += [*extra, str(rel)]
        started = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True, timeout=limit)
            last = (proc.stdout.strip().splitlines() or [""])[-1]
            counts = {("error" if kind == "errors" else kind): int(n) for n, kind in _COUNTS.findall(last)}
            if proc.returncode not in (0, 1, 5) and not counts.keys() - {"passed", "skipped", "deselected"}:
                counts["crashed"] = 1  # pytest itself failed (usage, collection, a signal)
            failures = [line for line in proc.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
        except subprocess.TimeoutExpired:
            counts, failures, last = {"timed out": 1}, [], f"no result within {limit:.0f} s"
        return rel, counts, failures, last, time.monotonic() - started

    total: Dict[str, int] = {}
    # RUN_JOBS files at a time (each its own pytest); a line per file as it ends, in end order
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for rel, counts, failures, last, took in (f.result() for f in
                                                  as_completed([pool.submit(one, p) for p in files])):
            for kind, n in counts.items():
                total[kind] = total.get(kind, 0) + n
            if counts.keys() - {"passed", "skipped", "deselected"} or not counts:
                print(f"{rel}: {last}", flush=True)
                for line in failures:
                    print("  " + line[:240], flush=True)
            else:
                print(f"{rel}: {last} ({took:.0f} s)", flush=True)
    print("total: " + ", ".join(f"{n} {kind}" for kind, n in sorted(total.items())))
    return 1 if total.keys() - {"passed", "skipped", "deselected"} else 0


def main(argv: List[str]) -> int:
    if len(argv) >= 4 and argv[1] == "prepare" and argv[2] in ("chainer", "thinc"):
        return prepare(argv[2], Path(argv[3]).resolve())
    if len(argv) >= 3 and argv[1] == "run":
        return run(Path(argv[2]).resolve(), argv[3:])
    print(__doc__.strip().split("\n\n")[2], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
