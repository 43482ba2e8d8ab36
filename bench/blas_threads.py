#!/usr/bin/env python
"""When does a threaded BLAS product pay for itself? The measurement behind _threads.SERIAL_WORK.

After a threaded product OpenBLAS's workers spin (up to about 0.1 s) waiting for the next one,
so a process running T threads burns CPU for the whole gap between products, not only for the
product. This script makes one float32 product (numpy.matmul on numpy's OpenBLAS, the call
NumpyOps.gemm makes) and then `--gap` milliseconds of other single-threaded work (a
busy loop, as a model's other layers would be), over and over, with the BLAS held to 1 thread
and to `--threads` threads (threadpoolctl), the two alternating in every round. Per product and
gap: wall milliseconds, process CPU milliseconds (all threads), and what the threads changed:
wall time saved and CPU time added, medians of `--rounds` rounds.

    .venv/bin/python bench/blas_threads.py                    # ~1 minute
    .venv/bin/python bench/blas_threads.py --threads 2 --gaps 2,20 --json /tmp/threads.json

The products are those of bench/spacy (tok2vec 910x288x288, parser precompute up to 3553x128x3072)
and two larger ones. Run it with the workplace's OpenBLAS pins unset, as every benchmark here.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H  # noqa: E402

SHAPES: List[Tuple[str, int, int, int]] = [
    ("spaCy tok2vec", 910, 288, 288),
    ("spaCy parser, short batch", 1226, 128, 3072),
    ("spaCy parser, long batch", 3553, 128, 3072),
    ("2048x2048 @ 2048x1024", 2048, 2048, 1024),
    ("4096x2048 @ 2048x2048", 4096, 2048, 2048),
]


def busy(ms: float) -> None:
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def measure(A: numpy.ndarray, B: numpy.ndarray, gap: float, threads: int, seconds: float) -> Dict[str, float]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(threads, user_api="blas"):
        A @ B  # wake (or start) the workers, then let them go idle
        busy(min(150.0, seconds * 250))
        start = time.perf_counter()
        numpy.matmul(A, B)
        once = time.perf_counter() - start
        reps = max(5, int(seconds / (once + gap / 1e3)))
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(reps):
            numpy.matmul(A, B)
            busy(gap)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"wall_ms": wall / reps * 1e3, "cpu_ms": cpu / reps * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="the threaded case's BLAS threads")
    parser.add_argument("--gaps", default="2,20", help="milliseconds of other work after each product")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.6, help="time per measurement")
    parser.add_argument("--json", default=None)
    parser.add_argument("--quick", action="store_true", help="smoke run: two small products, one round")
    args = parser.parse_args()
    shapes = SHAPES[:2] if args.quick else SHAPES
    if args.quick:
        args.rounds, args.seconds, args.gaps = 1, 0.05, "1"
    gaps = [float(g) for g in args.gaps.split(",")]
    rng = numpy.random.default_rng(0)
    results: Dict[str, Dict[str, List[Dict[str, float]]]] = {}
    for rnd in range(args.rounds):
        for name, M, K, N in shapes:
            A = rng.random((M, K), dtype=numpy.float32)
            B = rng.random((K, N), dtype=numpy.float32)
            for gap in gaps:
                key = f"{name}|{gap:g}"
                order = (1, args.threads) if rnd % 2 == 0 else (args.threads, 1)
                for t in order:
                    results.setdefault(key, {}).setdefault(str(t), []).append(
                        measure(A, B, gap, t, args.seconds))
        print(f"round {rnd + 1} done", file=sys.stderr, flush=True)
    rows = []
    for name, M, K, N in shapes:
        for gap in gaps:
            key = f"{name}|{gap:g}"
            med = {t: {f: statistics.median(r[f] for r in runs) for f in ("wall_ms", "cpu_ms")}
                   for t, runs in results[key].items()}
            one, many = med["1"], med[str(args.threads)]
            rows.append([
                name, f"{M * K * N / 1e9:.2f}G", f"{gap:g}",
                f"{one['wall_ms']:.2f}", f"{many['wall_ms']:.2f}", f"{one['cpu_ms']:.2f}", f"{many['cpu_ms']:.2f}",
                f"{(1 - many['wall_ms'] / one['wall_ms']) * 100:+.0f}%".replace("+-", "-"),
                f"{(many['cpu_ms'] / one['cpu_ms'] - 1) * 100:+.0f}%",
            ])
    t = args.threads
    print(H.render_table(
        ["product", "multiply-adds", "gap ms", "wall 1T", f"wall {t}T", "CPU 1T", f"CPU {t}T",
         "wall saved", "CPU added"], rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": H.machine_summary(), "threads": t,
                                               "results": results}, indent=1))


if __name__ == "__main__":
    main()
