#!/usr/bin/env python
"""plait's own float32 products (_kernels_cpu/dense_gemm) against the BLAS, over a grid of shapes.

Where does each win? The BLAS packs both operands into blocks before it multiplies, which pays
for big products and costs a copy of the weights at a dense layer's sizes; plait's kernels read
the operands in place. This script times both on every (M, K, N, layout) of the grid, single
threaded, in one process: the BLAS as plait's `openblas` mode runs it (the private OpenBLAS with
its own kernel choice; `--blas numpy`: numpy's OpenBLAS, which `auto` uses on Intel), plait's
kernels called directly. Rounds alternate the two; each shape's
figure is the median over rounds of the best of `--repeat` timings, in GFLOP per CPU-second.

It prints, per layout and over all shapes, the median and the lowest ratio (own / BLAS), and how
the two rules `PLAIT_BLAS=auto` applies do (dense_gemm.wanted: the full rule, below 2**28
multiply-adds, and the thin rule, which also asks for a thin side): the share of the best of
the two each gets; then which of them `auto` applies with this build on this processor, and
where it picks each side.

    .venv/bin/python bench/dense_gemm_grid.py                  # ~5 minutes
    .venv/bin/python bench/dense_gemm_grid.py --quick          # a few shapes, seconds
"""
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import numpy  # noqa: E402

import _harness as H  # noqa: E402

GRID = dict(M=[16, 64, 128, 256, 512, 1024, 3553], K=[64, 128, 288, 512, 784, 2048],
            N=[10, 64, 288, 512, 784, 3072])
QUICK = dict(M=[16, 128], K=[128, 784], N=[10, 512])
LAYOUTS = ("NN", "NT", "TN")


def measure(grid: Dict[str, List[int]], rounds: int, repeat: int, blas: str = "openblas") -> List[Dict]:
    from plait.backends import NumpyOps, _blas
    from plait.backends._kernels_cpu import dense_gemm

    if not dense_gemm.available():
        raise SystemExit("bench: plait's own products need an AVX2 or AVX-512 build and CPU.")
    _blas.configure(blas)  # the BLAS side: no own kernels inside NumpyOps.gemm
    dense_gemm.set_mode(2)  # the own side, called directly: every shape
    ops = NumpyOps()
    rng = numpy.random.default_rng(0)
    rows = []
    for M, K, N in itertools.product(grid["M"], grid["K"], grid["N"]):
        for layout in LAYOUTS:
            t1, t2 = layout[0] == "T", layout[1] == "T"
            x = rng.standard_normal((K, M) if t1 else (M, K), dtype="float32")
            y = rng.standard_normal((N, K) if t2 else (K, N), dtype="float32")
            out = numpy.zeros((M, N), "float32")
            flops = 2.0 * M * N * K
            calls = max(1, int(2e8 / flops))
            runs = {
                "blas": lambda: ops.gemm(x, y, trans1=t1, trans2=t2, out=out),
                "own": lambda: dense_gemm.gemm(x, y, out, t1, t2, False),
            }
            got: Dict[str, List[float]] = {"blas": [], "own": []}
            for fn in runs.values():
                fn()
            for _ in range(rounds):
                for name, fn in runs.items():
                    best = 0.0
                    for _ in range(repeat):
                        c0 = time.process_time()
                        for _ in range(calls):
                            fn()
                        best = max(best, flops * calls / max(time.process_time() - c0, 1e-9) / 1e9)
                    got[name].append(best)
            rows.append(dict(M=M, K=K, N=N, layout=layout, blas=statistics.median(got["blas"]),
                             own=statistics.median(got["own"]),
                             wanted=bool(dense_gemm.wanted(M, K, N, t1, t2, thin=False)),
                             wanted_thin=bool(dense_gemm.wanted(M, K, N, t1, t2, thin=True))))
    return rows


def auto_rule() -> str:
    """Which rule `PLAIT_BLAS=auto` applies with this build on this processor (_blas)."""
    from plait.backends import _blas
    from plait.backends._kernels_cpu import dense_gemm

    if dense_gemm.level() == 3 or (dense_gemm.level() == 4 and _blas.thin_own_kernels_cpu()):
        return "thin"
    if dense_gemm.level() == 4 and _blas.own_kernels_cpu():
        return "full"
    return "none"


def report(rows: List[Dict]) -> None:
    def summary(sel: List[Dict]) -> Tuple[float, float, int]:
        ratios = [r["own"] / r["blas"] for r in sel]
        return statistics.median(ratios), min(ratios), len(ratios)

    table = []
    for layout in LAYOUTS + ("all",):
        sel = [r for r in rows if layout == "all" or r["layout"] == layout]
        med, low, n = summary(sel)
        small = [r for r in sel if r["M"] * r["N"] * r["K"] < 1 << 28]
        smed, slow, sn = summary(small) if small else (float("nan"), float("nan"), 0)
        table.append([layout, str(n), f"{med:.2f}", f"{low:.2f}", str(sn), f"{smed:.2f}", f"{slow:.2f}"])
    print(H.render_table(["layout", "shapes", "median own/BLAS", "lowest", "shapes < 2**28 MACs",
                          "median there", "lowest there"], table))
    shares = {"full": [], "thin": [], "own": [], "blas": []}
    for r in rows:
        best = max(r["own"], r["blas"])
        shares["full"].append((r["own"] if r["wanted"] else r["blas"]) / best)
        shares["thin"].append((r["own"] if r["wanted_thin"] else r["blas"]) / best)
        shares["own"].append(r["own"] / best)
        shares["blas"].append(r["blas"] / best)
    print()
    for name, label in (("full", "the full rule (dense_gemm.wanted)"),
                        ("thin", "the thin rule (dense_gemm.wanted, thin=True)"),
                        ("own", "always plait's kernels"), ("blas", "always the BLAS")):
        v = shares[name]
        print(f"{label}: median {statistics.median(v):.0%} of the better of the two, geometric mean "
              f"{statistics.geometric_mean(v):.1%}, lowest {min(v):.0%}, below 90% in {sum(s < 0.9 for s in v)} "
              f"of {len(v)} shapes")
    rule = auto_rule()
    if rule == "none":
        print("auto's rule here: none (the BLAS takes every product with this build on this processor).")
        return
    picked = [r for r in rows if r["wanted" if rule == "full" else "wanted_thin"]]
    print(f"auto's rule here: the {rule} rule; it sends {len(picked)} of {len(rows)} shapes to plait's "
          f"kernels, where they run at median "
          f"{statistics.median(r['own'] / r['blas'] for r in picked) if picked else float('nan'):.2f}x the BLAS.")


def main(argv=None) -> None:
    args = H.grid_arguments(__doc__.splitlines()[0], repeat=2, argv=argv, blas_choice=True)
    rows = measure(QUICK if args.quick else GRID, 1 if args.quick else args.rounds, args.repeat, args.blas)
    summary = H.machine_summary()
    print(f"\n## plait's own products against the BLAS: bench/dense_gemm_grid.py\ncpu={summary['cpu']}  "
          f"1 thread  rounds={1 if args.quick else args.rounds} (median)  BLAS: {args.blas}  environment pins: "
          f"{summary['blas_env'] or 'none'}  plait@{summary['plait_commit']}\n")
    report(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "machine": summary}, indent=1))


if __name__ == "__main__":
    main()
