"""Run Chainer 1.7.2's own GPU-tagged tests against plait.chainer on a CUDA machine.

The upstream runner (../shared/upstream/chainer-suite/run.sh) measures the CPU suite and
deselects every test tagged attr.gpu / attr.cudnn / attr.multi_gpu. This tool runs exactly
those, in two steps, because the GPU machine may not have ../shared:

    python tools/chainer_gpu_suite.py prepare DIR   # here: rewrite the tests to plait.chainer into DIR
    python tools/chainer_gpu_suite.py run DIR [PYTEST ARGS...]   # there: only the GPU-tagged tests

`prepare` uses the suite's own harness to copy and rewrite the tests (the same copy the CPU
runs use) and adds a pytest plugin that keeps the GPU-tagged tests and drops the rest, tests
of '_'-named base classes (nose never collected them) and multi-GPU tests needing more GPUs
than NGPU (default: the devices cupy sees). `run` needs cupy, a CUDA device, pytest, and the
tests' helpers `mock` and `six`.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = Path(os.environ.get("CHAINER_SUITE", ROOT.parent / "shared" / "upstream" / "chainer-suite"))

PLUGIN = '''"""pytest plugin written by tools/chainer_gpu_suite.py: keep only the GPU-tagged tests."""
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


def prepare(dest: Path) -> int:
    harness = SUITE / "harness.py"
    if not harness.exists():
        print(f"chainer_gpu_suite: no harness at {harness}; set CHAINER_SUITE to the chainer-suite folder",
              file=sys.stderr)
        return 2
    if dest.exists() and any(dest.iterdir()):
        print(f"chainer_gpu_suite: {dest} is not empty; give a new or empty folder", file=sys.stderr)
        return 2
    dest.mkdir(parents=True, exist_ok=True)
    src = subprocess.run([sys.executable, str(harness), "locate", str(SUITE / "tests")],
                         capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, str(harness), "rewrite", src, str(dest), "plait.chainer", "target"],
                   check=True)
    (dest / "chainer_gpu_only.py").write_text(PLUGIN)
    print(f"chainer_gpu_suite: tests rewritten to plait.chainer in {dest}; next, on a GPU machine: "
          f"python tools/chainer_gpu_suite.py run {dest}")
    return 0


def run(dest: Path, extra: list) -> int:
    if not (dest / "chainer_gpu_only.py").exists():
        print(f"chainer_gpu_suite: {dest} was not made by `prepare`", file=sys.stderr)
        return 2
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(dest), str(ROOT), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "pytest", "-p", "chainer_gpu_only", "-p", "no:cacheprovider",
           "-c", str(dest / "pytest.ini"), "--rootdir", str(dest), "-q", "-rfE",
           "-W", "ignore::DeprecationWarning", *extra, str(dest / "chainer_tests")]
    return subprocess.run(cmd, cwd=dest, env=env).returncode


def main(argv: list) -> int:
    if len(argv) < 3 or argv[1] not in ("prepare", "run"):
        print(__doc__.strip().split("\n\n")[2], file=sys.stderr)
        return 2
    dest = Path(argv[2]).resolve()
    return prepare(dest) if argv[1] == "prepare" else run(dest, argv[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
