#!/usr/bin/env python
"""Maxout's backward kernels alone: plait's sparse dW and dX against the BLAS's dense products.

Only the winning piece of each Maxout output has a gradient, so plait's kernels
(plait/backends/_kernels_cpu/maxout.pyx) do a third of the multiply-adds of Thinc's backward
(3 pieces): dW = dZ.T @ X and dX = dZ @ W over the (rows, nO * nP) piece gradients dZ. This
script times, in one process and one thread, at the text CNN's shapes (nO = width, nI = 3 x
width after expand_window), per round and in turn: `backprop_maxout_dw`, `backprop_maxout_dx`
and the dense alternatives NumpyOps would take instead: for dW the piece gradients dZ
(`backprop_maxout`), the product through the BLAS and db as dZ's column sums; for dX the product
alone (dZ made beforehand). With `--against DIR` it also times another
build of the maxout module (DIR holds a `maxout*.so`, e.g. copied from a build of an earlier
commit) in the same rounds, for an A/B of a kernel change. It prints the median milliseconds of
each, the GFLOP/s of the live multiply-adds (2 x rows x nO x nI; the dense products' own
arithmetic is nP times that), and the median over rounds of the per-round ratios, among them
the whole backward (dX + dW) with the sparse dW against it with the dense one, the choice
`maxout.sparse_dw_wanted` makes.

    .venv/bin/python bench/maxout_kernels.py [--widths 64,128,256,512] [--rows 350,1400]
        [--pieces 3] [--rounds 15] [--against DIR] [--json PATH]
    PLAIT_ISA=avx2 OPENBLAS_CORETYPE=Haswell .venv/bin/python bench/maxout_kernels.py
    .venv/bin/python bench/maxout_kernels.py --quick      # small shapes, seconds
"""
import argparse
import glob
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import numpy  # noqa: E402

import _harness as H  # noqa: E402


def _ints(text):
    return [int(v) for v in text.split(",") if v.strip()]


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--widths", type=_ints, default=[64, 128, 256, 512])
    p.add_argument("--rows", type=_ints, default=[350, 1400],
                   help="rows of a batch (the text CNN's tokens: ~350 at batch 16, ~1,400 at 64)")
    p.add_argument("--pieces", type=int, default=3)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--against", default=None, metavar="DIR",
                   help="a folder holding another build of the maxout module, timed in the same rounds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", default=None, metavar="PATH")
    args = p.parse_args(argv)
    if args.quick:
        args.widths, args.rows, args.rounds = [16, 40], [100], 3
    if args.rounds < 1 or args.pieces < 1 or min(args.widths + args.rows) < 1:
        p.error("--rounds, --pieces, --widths and --rows must be positive")
    return args


def _load_other(folder):
    """The maxout module built in `folder`, loaded beside the package's own."""
    found = sorted(glob.glob(os.path.join(folder, "maxout*.so"))
                   + glob.glob(os.path.join(folder, "maxout*.pyd")))
    if not found:
        sys.exit(f"bench/maxout_kernels.py: --against {folder!r} holds no maxout*.so; copy one there from "
                 f"plait/backends/_kernels_cpu/_<isa>/ of the build to compare")
    spec = importlib.util.spec_from_file_location("maxout", found[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _clock(fn):
    start = time.process_time()
    fn()
    return time.process_time() - start


def measure(maxout, other, ops, nO, nP, nI, nB, rounds, rng):
    dY = rng.standard_normal((nB, nO), dtype=numpy.float32)
    which = rng.integers(0, nP, (nB, nO)).astype(numpy.int32)
    X = rng.standard_normal((nB, nI), dtype=numpy.float32)
    W = rng.standard_normal((nO, nP, nI), dtype=numpy.float32)
    dZ = ops.backprop_maxout(dY, which, nP).reshape((nB, nO * nP))
    W2 = W.reshape(nO * nP, nI)

    calls = {
        "plait dW": lambda: maxout.backprop_maxout_dw(dY, which, X, nP),
        "plait dX": lambda: maxout.backprop_maxout_dx(dY, which, W),
        # NumpyOps' own dense path: the piece gradients, the product, db as their sums.
        "dense dW": lambda: ops._maxout_dw_dense(dY, which, X, nP),
        "BLAS dX": lambda: dZ @ W2,
    }
    if other is not None:
        calls["other dW"] = lambda: other.backprop_maxout_dw(dY, which, X, nP)
        calls["other dX"] = lambda: other.backprop_maxout_dx(dY, which, W)
    if maxout.backprop_maxout_dw(dY, which, X, nP) is None:
        sys.exit("bench/maxout_kernels.py: plait's dW kernel declined these inputs")
    for fn in calls.values():  # warm-up
        fn()
    times = {k: [] for k in calls}
    names = list(calls)
    for r in range(rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            times[k].append(_clock(calls[k]))
    live = 2.0 * nB * nO * nI

    def ratio(a, b):
        return statistics.median(x / y for x, y in zip(times[a], times[b]) if y > 0)

    # The whole Ops.backprop_maxout_affine on each dW path (dX is the sparse kernel's on both):
    # what `maxout.sparse_dw_wanted` decides between.
    op = statistics.median((x + w) / (x + d) for x, w, d in zip(times["plait dX"], times["plait dW"],
                                                               times["dense dW"]) if x + d > 0)
    row = dict(width=nO, nI=nI, pieces=nP, rows=nB, op_sparse_vs_dense_dw=op,
               ms={k: statistics.median(v) * 1e3 for k, v in times.items()},
               live_gflops={k: live / max(min(v), 1e-9) / 1e9 for k, v in times.items()},
               dw_vs_dense=ratio("plait dW", "dense dW"), dx_vs_blas=ratio("plait dX", "BLAS dX"))
    if other is not None:
        row["dw_vs_other"] = ratio("plait dW", "other dW")
        row["dx_vs_other"] = ratio("plait dX", "other dX")
    return row


def main(argv=None):
    args = _parse(argv)
    from plait.backends import NumpyOps, _kernels_cpu, set_num_threads
    from plait.backends._kernels_cpu import maxout

    set_num_threads(1)
    other = _load_other(args.against) if args.against else None
    ops = NumpyOps()
    rng = numpy.random.default_rng(args.seed)
    summary = H.machine_summary()
    print(f"# Maxout backward, {args.pieces} pieces, nI = 3 x width; CPU ms, median of {args.rounds} "
          f"rounds (calls in rotating order)\ncpu={summary['cpu']}  build={_kernels_cpu.ISA}  1 thread  "
          f"environment pins: {summary['blas_env'] or 'none'}  plait@{summary['plait_commit']}"
          + (f"  other build: {args.against}" if other else ""))
    head = ("| width | rows | plait dW | dense dW | dW / dense | plait dX | BLAS dX | dX / BLAS "
            "| live GFLOP/s dW, dX | op, sparse / dense dW |")
    if other:
        head += " dW / other | dX / other |"
    print(head)
    print("|" + "---:|" * (head.count("|") - 1))
    rows = []
    for width in args.widths:
        for nB in args.rows:
            row = measure(maxout, other, ops, width, args.pieces, 3 * width, nB, args.rounds, rng)
            rows.append(row)
            ms, gf = row["ms"], row["live_gflops"]
            line = (f"| {width} | {nB} | {ms['plait dW']:.2f} | {ms['dense dW']:.2f} | "
                    f"{row['dw_vs_dense']:.3f} | "
                    f"{ms['plait dX']:.2f} | {ms['BLAS dX']:.2f} | {row['dx_vs_blas']:.3f} | "
                    f"{gf['plait dW']:.0f}, {gf['plait dX']:.0f} | {row['op_sparse_vs_dense_dw']:.3f} |")
            if other:
                line += f" {row['dw_vs_other']:.3f} | {row['dx_vs_other']:.3f} |"
            print(line, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(dict(args=vars(args), rows=rows, build=_kernels_cpu.ISA,
                                                   machine=summary), indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
