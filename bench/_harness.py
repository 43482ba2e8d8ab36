"""Shared machinery of the side-by-side benchmarks: peers, child runs, data, tables.

Every benchmark script is both the parent and the child. The parent (no ``--child``)
runs the script again once per framework and round, alternating frameworks
(plait, thinc91, thinc83, torch, plait, ...) so that a slow spell of this shared
machine hits every framework alike, and prints the medians. A child
(``--child NAME --params JSON``) does the work for one framework and prints one
``BENCH_RESULT {json}`` line.

Only the standard library and numpy are imported at module level: the same file runs
inside the thinc venvs, which have neither plait nor torch.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
VENVS_DIR = BENCH_DIR / ".venvs"
RESULT_PREFIX = "BENCH_RESULT "
# The order a round runs the frameworks in; also the order of the table rows. The
# Thinc-face scripts compare against these; define_by_run.py passes its own list.
ALL_FRAMEWORKS = ("plait", "thinc91", "thinc83", "torch")
# Peers that live in their own venv under bench/.venvs/ (bench/setup_peers.sh makes them),
# with the module their children import.
VENV_PEERS = {"thinc91": "thinc", "thinc83": "thinc", "chainer": "chainer"}
THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def data_dir() -> Path:
    """The shared data folder: $PLAIT_BENCH_DATA, else ../shared/data beside the repo."""
    env = os.environ.get("PLAIT_BENCH_DATA")
    path = Path(env) if env else REPO_DIR.parent / "shared" / "data"
    if not path.is_dir():
        raise FileNotFoundError(
            f"bench: data folder {str(path)!r} not found. Set PLAIT_BENCH_DATA to the "
            "folder holding mnist.npz, rotten_tomatoes.jsonl and turkish_web_treebank.jsonl."
        )
    return path


# ---------------------------------------------------------------------------------------
# Frameworks and peers


@dataclass
class Framework:
    """One contender: which interpreter runs it and how its child imports it."""

    name: str
    python: str
    # 'thinc-face' children import `<module>.api`; 'torch' children import torch.
    kind: str
    module: str = ""
    missing: str = ""  # why it cannot run here (empty when it can)


def _peer_python(venv: str) -> Path:
    return VENVS_DIR / venv / "bin" / "python"


def _torch_importable(python: str) -> bool:
    probe = subprocess.run(
        [python, "-c", "import torch"], capture_output=True, text=True, env=_child_env(1)
    )
    return probe.returncode == 0


def resolve_frameworks(peers: str, known: Sequence[str] = ALL_FRAMEWORKS) -> List[Framework]:
    """plait plus the peers named in `peers` ('all', 'none' or a comma list) out of `known`.

    plait and torch run in the interpreter that runs the parent (the plait venv);
    each other peer (thinc 9.1, thinc 8.3, chainer) runs in its own venv under bench/.venvs/.
    """
    if peers in ("all", ""):
        wanted = list(known[1:])
    elif peers == "none":
        wanted = []
    else:
        wanted = [p.strip() for p in peers.split(",") if p.strip()]
        unknown = [p for p in wanted if p not in known[1:]]
        if unknown:
            raise KeyError(
                f"bench: unknown peer(s) {unknown} in --peers {peers!r}. "
                f"Known peers: {', '.join(known[1:])}; or 'all' / 'none'."
            )
    here = sys.executable
    out = [Framework("plait", here, "thinc-face", module="plait")]
    for name in known[1:]:
        if name not in wanted:
            continue
        if name == "torch":
            fw = Framework("torch", here, "torch")
            if not _torch_importable(here):
                fw.missing = (
                    f"torch is not importable from {here}; install the CPU wheel into the "
                    "plait venv (`make install` does, from /opt/wheels)"
                )
        else:
            python = _peer_python(name)
            module = VENV_PEERS.get(name, "thinc")
            fw = Framework(name, str(python), "thinc-face" if module == "thinc" else module, module=module)
            if not python.exists():
                fw.missing = (
                    f"no venv at {python.parent.parent}; create it with "
                    f"`bash bench/setup_peers.sh {name}`"
                )
        out.append(fw)
    return out


def import_api(framework: str):
    """The `api` module of a Thinc-face child: plait.api or thinc.api."""
    if framework == "plait":
        import plait.api as api
    elif framework.startswith("thinc"):
        import thinc.api as api
    else:
        raise KeyError(f"bench: framework {framework!r} has no Thinc face.")
    return api


def framework_version(framework: str) -> str:
    if framework == "torch":
        import torch

        return torch.__version__
    if framework == "chainer":
        import chainer

        return chainer.__version__
    mod = __import__("plait" if framework == "plait" else "thinc")
    about = getattr(mod, "__version__", None)
    if about is None:
        from importlib.metadata import version

        about = version(mod.__name__)
    return str(about)


# ---------------------------------------------------------------------------------------
# Command line, parent side


def make_parser(description: str) -> argparse.ArgumentParser:
    """The options every benchmark script shares; scripts add their own sizes."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--peers", default="all",
                   help="comma list of thinc91,thinc83,torch; 'all' (default) or 'none'")
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds of alternating child runs; the table shows medians (default 3)")
    p.add_argument("--threads", type=int, default=1,
                   help="threads for every child: OMP/OPENBLAS/MKL/BLIS env vars and "
                        "torch.set_num_threads (default 1)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: tiny subset, one round")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, metavar="PATH",
                   help="also write every child's raw result and the medians to PATH")
    p.add_argument("--timeout", type=float, default=1800.0,
                   help="seconds one child may run before it is killed (default 1800)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--params", default=None, help=argparse.SUPPRESS)
    return p


def grid_arguments(description: str, repeat: int, argv: Optional[Sequence[str]] = None,
                   blas_choice: bool = False) -> argparse.Namespace:
    """The options of the in-process grid scripts (dense_gemm_grid.py, lstm_products.py):
    --rounds, --repeat, --quick, --json (and --blas where blas_choice); then one thread for the
    BLAS and plait's kernels."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=repeat, help="timings per shape and round; best kept")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None, metavar="PATH")
    if blas_choice:
        parser.add_argument("--blas", choices=("openblas", "numpy"), default="openblas",
                            help="the BLAS side: plait's private OpenBLAS (default) or numpy's, "
                                 "as PLAIT_BLAS names them")
    args = parser.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from plait.backends import set_num_threads

    set_num_threads(1)
    return args


def sized_command_line(argv: Optional[Sequence[str]], doc: str, defaults: Dict[str, Any],
                       quick: Dict[str, Any], work: Callable[[str, Dict[str, Any]], Dict[str, Any]]):
    """A model script's command line: the shared options and one per size in `defaults`
    (--max-train for max_train, of the default's type; a max_* size of 0 means the whole split).
    `doc`'s first line describes the script. In a child, runs `work` and returns None; in the
    parent, returns (parser, args, params): the sizes given, the defaults (or --quick's) for the
    rest, and --seed."""
    parser = make_parser(doc.splitlines()[0])
    for key, value in defaults.items():
        extra = "; 0 = whole split" if key.startswith("max_") else ""
        parser.add_argument("--" + key.replace("_", "-"), type=type(value), default=None,
                            help=f"default {value} (--quick: {quick[key]}){extra}")
    args = parser.parse_args(argv)
    if args.child:
        child_main(args.child, args.params, work)
        return None
    base = quick if args.quick else defaults
    params = {k: (getattr(args, k) if getattr(args, k) is not None else v) for k, v in base.items()}
    params["seed"] = args.seed
    return parser, args, params


def _child_env(threads: int) -> Dict[str, str]:
    env = dict(os.environ)
    for var in THREAD_ENV_VARS:
        env[var] = str(threads)
    env["BENCH_THREADS"] = str(threads)
    # The children must see exactly one framework: never the checkout's plait through
    # a PYTHONPATH the caller happened to set.
    env.pop("PYTHONPATH", None)
    return env


def run_child(script: Path, fw: Framework, params: Dict[str, Any], threads: int,
              timeout: float) -> Dict[str, Any]:
    """Run `script --child` for one framework; its parsed result, or {'error': ...}."""
    cmd = [fw.python, str(script), "--child", fw.name, "--params", json.dumps(params)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_child_env(threads),
                              cwd=str(REPO_DIR), timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
    return {"error": f"child exited {proc.returncode} without a result:\n{tail}"}


def run_suite(script: str, frameworks: Sequence[Framework], params: Dict[str, Any],
              rounds: int, threads: int, timeout: float = 1800.0,
              log: Callable[[str], None] = print) -> Dict[str, List[Dict[str, Any]]]:
    """Alternate the frameworks' children for `rounds` rounds; {framework: [results]}."""
    script_path = Path(script).resolve()
    runs: Dict[str, List[Dict[str, Any]]] = {fw.name: [] for fw in frameworks}
    for fw in frameworks:
        if fw.missing:
            log(f"[skip] {fw.name}: {fw.missing}")
    live = [fw for fw in frameworks if not fw.missing]
    for r in range(rounds):
        for fw in live:
            t0 = time.perf_counter()
            res = run_child(script_path, fw, params, threads, timeout)
            took = time.perf_counter() - t0
            if "error" in res:
                log(f"[round {r + 1}/{rounds}] {fw.name}: FAILED ({took:.1f} s)\n{res['error']}")
            else:
                log(f"[round {r + 1}/{rounds}] {fw.name}: {took:.1f} s")
            runs[fw.name].append(res)
    return runs


def median_results(runs: Dict[str, List[Dict[str, Any]]]) -> Dict[str, Dict[str, Any]]:
    """Per framework, the median of every numeric field over its successful rounds.

    Nested dicts (ops_micro's per-op figures) are reduced field by field; other values
    are taken from the first successful round.
    """
    out: Dict[str, Dict[str, Any]] = {}
    for name, results in runs.items():
        ok = [r for r in results if "error" not in r]
        if ok:
            out[name] = _median_of(ok)
            out[name]["rounds"] = len(ok)
    return out


def _median_of(dicts: List[Dict[str, Any]]) -> Dict[str, Any]:
    merged: Dict[str, Any] = {}
    for key, first in dicts[0].items():
        values = [d[key] for d in dicts if key in d]
        if isinstance(first, bool) or not isinstance(first, (int, float, dict)):
            merged[key] = first
        elif isinstance(first, dict):
            merged[key] = _median_of([v for v in values if isinstance(v, dict)])
        else:
            nums = [v for v in values if isinstance(v, (int, float)) and v is not None]
            merged[key] = statistics.median(nums) if nums else None
    return merged


def write_json(path: Optional[str], script: str, args: argparse.Namespace,
               params: Dict[str, Any], runs: Dict[str, Any], medians: Dict[str, Any],
               extra: Optional[Dict[str, Any]] = None) -> None:
    if not path:
        return
    blob = {
        "script": Path(script).name,
        "threads": args.threads,
        "rounds": args.rounds,
        "params": params,
        "runs": runs,
        "medians": medians,
        "machine": machine_summary(),
    }
    if extra:
        blob.update(extra)
    Path(path).write_text(json.dumps(blob, indent=1, sort_keys=True))


def machine_summary() -> Dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    # Set on some machines to pin OpenBLAS to older kernels, or by hand to pin BLIS (thinc's
    # products) to them, as when an AVX-512 machine stands in for an AVX2-only one
    # (PLAIT_ISA=avx2 with BLIS_ARCH_TYPE=3, BLIS's 'haswell'); every child inherits them,
    # and they can halve the GEMM rate, so the figures must say so.
    blas_env = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "BLIS_ARCH_TYPE")
                if k in os.environ}
    # The build of plait's kernels the children run (docs/isa.md): they inherit PLAIT_ISA.
    isa = os.environ.get("PLAIT_ISA", "").strip().lower() or "auto"
    return {"cpus": os.cpu_count(), "cpu": cpu, "python": sys.version.split()[0],
            "loadavg": load, "plait_commit": _git_commit(), "blas_env": blas_env, "plait_isa": isa}


def _git_commit() -> str:
    """The checkout's commit, '+dirty' when the tree has uncommitted changes."""
    try:
        head = subprocess.run(["git", "-C", str(REPO_DIR), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        # --no-optional-locks: never write the index (others run git in this tree).
        dirty = subprocess.run(["git", "--no-optional-locks", "-C", str(REPO_DIR), "status",
                                "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return head + ("+dirty" if head and dirty else "")


# ---------------------------------------------------------------------------------------
# Tables


@dataclass
class Column:
    """One table column: `key` in a result dict, its header and a format."""

    key: str
    header: str
    fmt: str = "{:,.0f}"
    # For the ratio table: True when a bigger value is better (throughput), False when
    # smaller is (memory, time). The ratio printed is always "plait is this many times
    # better": >1 means plait wins.
    higher_is_better: Optional[bool] = None


def format_value(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table with right-aligned numbers (pastes into bench/README.md)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    def line(cells: Sequence[str]) -> str:
        parts = [c.ljust(w) if i == 0 else c.rjust(w)
                 for i, (c, w) in enumerate(zip(cells, widths))]
        return "| " + " | ".join(parts) + " |"
    sep = "|" + "|".join(
        "-" * (w + 1) + ("-" if i == 0 else ":") for i, w in enumerate(widths)
    ) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in rows])


def results_table(medians: Dict[str, Dict[str, Any]], columns: Sequence[Column],
                  frameworks: Sequence[str]) -> str:
    """Rows = frameworks, columns = `columns`, then one plait/peer ratio column per
    column that has `higher_is_better` set."""
    headers = ["framework"] + [c.header for c in columns]
    rows = []
    for name in frameworks:
        if name not in medians:
            continue
        res = medians[name]
        label = f"{name} {res.get('version', '')}".strip()
        rows.append([label] + [format_value(res.get(c.key), c.fmt) for c in columns])
    return render_table(headers, rows)


def ratio_table(medians: Dict[str, Dict[str, Any]], columns: Sequence[Column],
                frameworks: Sequence[str]) -> str:
    """plait versus each peer: for every ratio-able column, how many times better plait is
    (>1: plait wins; throughput = plait/peer, memory = peer/plait)."""
    ratio_cols = [c for c in columns if c.higher_is_better is not None]
    if "plait" not in medians or not ratio_cols:
        return ""
    base = medians["plait"]
    headers = ["plait vs"] + [c.header for c in ratio_cols]
    rows = []
    for name in frameworks:
        if name == "plait" or name not in medians:
            continue
        row = [name]
        for c in ratio_cols:
            row.append(format_value(ratio(base.get(c.key), medians[name].get(c.key),
                                          c.higher_is_better), "{:.2f}x"))
        rows.append(row)
    return render_table(headers, rows) if rows else ""


def ratio(plait_value: Any, peer_value: Any, higher_is_better: bool) -> Optional[float]:
    """How many times better plait is than the peer on one figure (None if unknown)."""
    if not isinstance(plait_value, (int, float)) or not isinstance(peer_value, (int, float)):
        return None
    if plait_value <= 0 or peer_value <= 0:
        return None
    return plait_value / peer_value if higher_is_better else peer_value / plait_value


def header_line(args: argparse.Namespace) -> str:
    """Threads, rounds and the machine, with its load: this machine is shared, and a
    load above the core count means the figures were taken on a busy machine."""
    ms = machine_summary()
    load = "/".join(str(x) for x in ms["loadavg"]) or "?"
    return (f"threads={args.threads}  rounds={args.rounds} (median)  cpus={ms['cpus']}  "
            f"cpu={ms['cpu'] or '?'}  loadavg(1/5/15 min, at the end)={load}  "
            f"plait@{ms['plait_commit'] or '?'}  PLAIT_ISA={ms['plait_isa']}"
            + "".join(f"  {k}={v}" for k, v in ms["blas_env"].items()))


def print_report(title: str, args: argparse.Namespace, params: Dict[str, Any],
                 medians: Dict[str, Dict[str, Any]], columns: Sequence[Column],
                 frameworks: Sequence[str], notes: Sequence[str] = ()) -> None:
    print()
    print(f"## {title}")
    print(header_line(args))
    print("params: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    print()
    print(results_table(medians, columns, frameworks))
    ratios = ratio_table(medians, columns, frameworks)
    if ratios:
        print()
        print("plait/peer ratios (>1 means plait is better: faster, or less memory):")
        print(ratios)
    for note in notes:
        print(note)
    missing = [f for f in frameworks if f not in medians]
    if missing:
        print(f"(no result for: {', '.join(missing)})")


def parent_main(script: str, args: argparse.Namespace, params: Dict[str, Any],
                title: str, columns: Sequence[Column],
                notes_fn: Optional[Callable[[Dict[str, Dict[str, Any]]], List[str]]] = None,
                extra: Optional[Dict[str, Any]] = None,
                known: Sequence[str] = ALL_FRAMEWORKS) -> Dict[str, Dict[str, Any]]:
    """Run all rounds, print the table (and ratios), write --json; the medians."""
    frameworks = resolve_frameworks(args.peers, known)
    names = [fw.name for fw in frameworks]
    rounds = 1 if args.quick else args.rounds
    args.rounds = rounds
    runs = run_suite(script, frameworks, params, rounds, args.threads, args.timeout)
    medians = median_results(runs)
    notes = notes_fn(medians) if notes_fn else []
    print_report(title, args, params, medians, columns, names, notes)
    write_json(args.json, script, args, params, runs, medians, extra)
    if "plait" not in medians:
        raise SystemExit("bench: plait produced no result (see the FAILED lines above)")
    return medians


# ---------------------------------------------------------------------------------------
# Child side


def child_main(framework: str, params_json: str,
               work: Callable[[str, Dict[str, Any]], Dict[str, Any]]) -> None:
    """Run `work(framework, params)` in this child and print its result line."""
    params = json.loads(params_json)
    threads = int(os.environ.get("BENCH_THREADS", "1"))
    if framework == "torch":
        import torch

        torch.set_num_threads(threads)
    # Not api.fix_random_seed: it imports torch wherever torch is installed, which the
    # plait venv has and the thinc venvs have not; that would bill plait ~2 s of import
    # and ~200 MB for nothing. The numpy backends draw only from these two generators.
    random.seed(params.get("seed", 0))
    numpy.random.seed(params.get("seed", 0))
    result = work(framework, params)
    result.setdefault("version", framework_version(framework))
    # Linux reports ru_maxrss in KiB: the child's own peak, imports included.
    result["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(RESULT_PREFIX + json.dumps(result), flush=True)


class Clock:
    """Wall-clock and process CPU seconds (all threads) of a block."""

    def __enter__(self) -> "Clock":
        self._w0 = time.perf_counter()
        self._c0 = time.process_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall = time.perf_counter() - self._w0
        self.cpu = time.process_time() - self._c0


def throughput_fields(prefix: str, n: float, clock: Clock) -> Dict[str, float]:
    """`n` items done in `clock`: per wall second and per CPU second."""
    return {
        f"{prefix}_per_s": n / clock.wall if clock.wall > 0 else None,
        f"{prefix}_per_cpu_s": n / clock.cpu if clock.cpu > 0 else None,
        f"{prefix}_wall_s": clock.wall,
        f"{prefix}_cpu_s": clock.cpu,
    }


def epochs_for(p: Dict[str, Any], n_train: int) -> int:
    """p["epochs"], or more where one epoch of n_train examples in batches of p["batch"] makes
    fewer than p["min_updates"] updates (0 or absent: p["epochs"])."""
    per_epoch = max(1, -(-n_train // p["batch"]))
    return max(p["epochs"], -(-p.get("min_updates", 0) // per_epoch))


def batches(n: int, size: int, rng: Optional[numpy.random.Generator] = None):
    """Index arrays of consecutive batches over range(n), shuffled when `rng` is given."""
    order = rng.permutation(n) if rng is not None else numpy.arange(n)
    for i in range(0, n, size):
        yield order[i:i + size]


# ---------------------------------------------------------------------------------------
# Data (the same preprocessing for every framework, done before the clock starts)


def load_mnist(n_train: int, n_test: int):
    """MNIST as float32 (n, 784) in [0, 1] and int labels; the first n of each split."""
    d = numpy.load(data_dir() / "mnist.npz")
    def prep(X, y, n):
        X = X[:n].reshape((-1, 28 * 28)).astype("float32") / 255.0
        return X, y[:n].astype("int64")
    return prep(d["x_train"], d["y_train"], n_train) + prep(d["x_test"], d["y_test"], n_test)


def read_jsonl(name: str) -> List[Dict[str, Any]]:
    with open(data_dir() / name, encoding="utf8") as f:
        return [json.loads(line) for line in f]


_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def tokenize(text: str) -> List[str]:
    return _TOKEN_RE.findall(text.lower())


def string_ids(tokens: Sequence[str]) -> numpy.ndarray:
    """Deterministic uint64 ids for strings (two crc32s), identical in every venv."""
    ids = numpy.empty((len(tokens),), dtype="uint64")
    for i, tok in enumerate(tokens):
        b = tok.encode("utf8")
        ids[i] = (zlib.crc32(b) << 32) | zlib.crc32(b, 0x9E3779B9)
    return ids


def load_rotten_tomatoes(max_train: Optional[int] = None, max_eval: Optional[int] = None):
    """(train_docs, train_y, dev_docs, dev_y): docs are uint64 token-id arrays, y 0/1.

    Empty documents get one padding token so that every document has a length.
    """
    rows = read_jsonl("rotten_tomatoes.jsonl")
    split: Dict[str, Any] = {"train": ([], []), "dev": ([], [])}
    for r in rows:
        if r["split"] not in split:
            continue
        toks = tokenize(r["text"]) or ["<empty>"]
        split[r["split"]][0].append(string_ids(toks))
        split[r["split"]][1].append(1 if r["label"] == "fresh" else 0)
    tr_docs, tr_y = split["train"]
    dv_docs, dv_y = split["dev"]
    tr_docs, tr_y = tr_docs[:max_train], tr_y[:max_train]
    dv_docs, dv_y = dv_docs[:max_eval], dv_y[:max_eval]
    return tr_docs, numpy.asarray(tr_y, dtype="int64"), dv_docs, numpy.asarray(dv_y, dtype="int64")


def load_turkish_tagging(max_train: Optional[int] = None, max_eval: Optional[int] = None):
    """UPOS tagging data: (train_X, train_Y, dev_X, dev_Y, n_words, n_tags).

    Words are lowercased and mapped to ids from the train split (0 = unknown); X and Y
    are lists of int32 arrays, one per sentence.
    """
    sents = read_jsonl("turkish_web_treebank.jsonl")
    train = [s for s in sents if s["split"] == "train"][:max_train]
    dev = [s for s in sents if s["split"] == "dev"][:max_eval]
    vocab: Dict[str, int] = {}
    for s in train:
        for w in s["words"]:
            vocab.setdefault(w.lower(), len(vocab) + 1)
    tags = sorted({t for s in sents for t in s["upos"]})
    tag_ids = {t: i for i, t in enumerate(tags)}
    def encode(group):
        X = [numpy.asarray([vocab.get(w.lower(), 0) for w in s["words"]], dtype="int32")
             for s in group]
        Y = [numpy.asarray([tag_ids[t] for t in s["upos"]], dtype="int32") for s in group]
        return X, Y
    trX, trY = encode(train)
    dvX, dvY = encode(dev)
    return trX, trY, dvX, dvY, len(vocab) + 1, len(tags)


def one_hot(y: numpy.ndarray, n: int) -> numpy.ndarray:
    out = numpy.zeros((len(y), n), dtype="float32")
    out[numpy.arange(len(y)), y] = 1.0
    return out


# ---------------------------------------------------------------------------------------
# The GEMM ceiling: what one large float32 matmul reaches with the configured threads


def _best_gflops(fn: Callable[[], Any], flops: float, repeat: int) -> Dict[str, float]:
    """Best GFLOP/s of `repeat` calls, by wall clock and by process CPU time.

    On a shared machine the wall figure drops whenever the process is descheduled; the
    CPU figure does not, so it is the steadier estimate of what the core can do.
    """
    fn()  # warm: first-touch pages and BLAS buffers
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, max(time.process_time() - c0, 1e-9))
    return {"wall": flops / best_wall / 1e9, "cpu": flops / best_cpu / 1e9}


def measure_gemm_ceiling(n: int = 2048, repeat: int = 8) -> Dict[str, Dict[str, float]]:
    """sgemm GFLOP/s of an (n, n) @ (n, n) float32 product: numpy, plait's ops.gemm and
    torch.mm (each where importable), best of `repeat`, by wall and by CPU time."""
    rng = numpy.random.default_rng(0)
    A = rng.random((n, n), dtype="float32")
    B = rng.random((n, n), dtype="float32")
    out = numpy.empty((n, n), dtype="float32")
    flops = 2.0 * n * n * n
    found = {"numpy": _best_gflops(lambda: numpy.matmul(A, B, out=out), flops, repeat)}
    try:
        from plait.backends import NumpyOps

        ops = NumpyOps()
        found["plait"] = _best_gflops(lambda: ops.gemm(A, B, out=out), flops, repeat)
    except ImportError:
        pass
    try:
        import torch

        torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
        tA, tB, tO = torch.from_numpy(A), torch.from_numpy(B), torch.from_numpy(out)
        found["torch"] = _best_gflops(lambda: torch.mm(tA, tB, out=tO), flops, repeat)
    except ImportError:
        pass
    return found


def gemm_ceiling(threads: int, n: int = 2048) -> Dict[str, Dict[str, float]]:
    """Run measure_gemm_ceiling in a fresh child of the plait venv with `threads`."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import _harness; "
            f"print(json.dumps(_harness.measure_gemm_ceiling({int(n)})))")
    proc = subprocess.run([sys.executable, "-c", code, str(BENCH_DIR)], capture_output=True,
                          text=True, env=_child_env(threads), cwd=str(REPO_DIR))
    if proc.returncode != 0:
        raise RuntimeError(f"bench: the GEMM ceiling child failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def merge_ceilings(*found: Dict[str, Dict[str, float]]) -> Dict[str, Dict[str, float]]:
    """Per implementation, the best wall and CPU figures over several measurements."""
    out: Dict[str, Dict[str, float]] = {}
    for one in found:
        for impl, figs in one.items():
            best = out.setdefault(impl, {"wall": 0.0, "cpu": 0.0})
            for k in ("wall", "cpu"):
                best[k] = max(best[k], figs[k])
    return out
