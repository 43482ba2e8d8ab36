#!/usr/bin/env python
"""plait's hot Ops on each build of its kernels (PLAIT_ISA=avx512 / avx2 / portable, docs/isa.md).

Runs bench/ops_micro.py's plait child once per build this CPU runs, alternating the builds for
--rounds rounds, and prints each op's median CPU microseconds per call on each build, with the
ratio to the widest build. The products are numpy's BLAS in every build (the builds change
plait's own kernels only).

    .venv/bin/python bench/isa_compare.py                  # ~3 minutes
    .venv/bin/python bench/isa_compare.py --only maxout,seq2col --rounds 5
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import _harness as H  # noqa: E402
import ops_micro  # noqa: E402

ISAS = ("avx512", "avx2", "portable")


def runnable() -> List[str]:
    """The builds this CPU runs, asked of a child (importing plait here would fix one build)."""
    code = "from plait.backends import _kernels_cpu as K; print(','.join(K.runnable()))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=H._child_env(1), cwd=str(H.REPO_DIR))
    if proc.returncode != 0:
        raise SystemExit(f"bench: cannot list plait's kernel builds:\n{proc.stderr[-1500:]}")
    return proc.stdout.strip().split(",")


def run_build(isa: str, params: Dict[str, Any], threads: int, timeout: float) -> Dict[str, Any]:
    env = H._child_env(threads)
    env["PLAIT_ISA"] = isa
    cmd = [sys.executable, str(BENCH_DIR / "ops_micro.py"), "--child", "plait", "--params", json.dumps(params)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(H.REPO_DIR), timeout=timeout)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(H.RESULT_PREFIX):
            return json.loads(line[len(H.RESULT_PREFIX):])
    raise SystemExit(f"bench: the {isa} child failed:\n{(proc.stderr or proc.stdout)[-2000:]}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", default="", help="comma list of ops_micro ops (default: all)")
    parser.add_argument("--quick", action="store_true", help="ops_micro's tiny sizes, one round")
    parser.add_argument("--json", default=None, metavar="PATH")
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args(argv)
    params: Dict[str, Any] = dict(ops_micro.QUICK if args.quick else ops_micro.DEFAULTS)
    params["seed"] = 0
    params["only"] = [o.strip() for o in args.only.split(",") if o.strip()]
    rounds = 1 if args.quick else args.rounds
    builds = [isa for isa in ISAS if isa in runnable()]
    runs: Dict[str, List[Dict[str, Any]]] = {isa: [] for isa in builds}
    for r in range(rounds):
        for isa in builds:
            runs[isa].append(run_build(isa, params, args.threads, args.timeout))
        print(f"[round {r + 1}/{rounds}] done", flush=True)
    ops = [op for op in (params["only"] or ops_micro.OPS) if op in runs[builds[0]][0]["ops"]]
    med = {isa: {op: statistics.median(run["ops"][op]["cpu_us"] for run in runs[isa]) for op in ops}
           for isa in builds}
    agree = {op: all(abs(runs[isa][0]["ops"][op].get("sum", 0.0) - runs[builds[0]][0]["ops"][op].get("sum", 0.0))
                     <= 1e-4 * max(1.0, abs(runs[builds[0]][0]["ops"][op].get("abs_sum", 1.0)))
                     for isa in builds) for op in ops}
    widest = builds[0]
    print(f"\n## plait's hot Ops per kernel build: bench/isa_compare.py\n{H.header_line(args)}\n")
    headers = ["op"] + [f"{isa} CPU us" for isa in builds] + [f"{isa}/{widest}" for isa in builds[1:]] + ["sums agree"]
    rows = []
    for op in ops:
        rows.append([op] + [f"{med[isa][op]:,.1f}" for isa in builds]
                    + [f"{med[isa][op] / med[widest][op]:.2f}x" for isa in builds[1:]]
                    + ["ok" if agree[op] else "DIFFER"])
    print(H.render_table(headers, rows))
    print(f"\n(x > 1: that build takes longer than {widest}; CPU time per call, median of {rounds} rounds.)")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "medians": med, "machine": H.machine_summary()}, indent=1))


if __name__ == "__main__":
    main()
