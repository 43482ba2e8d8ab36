#!/usr/bin/env python
"""The LSTM's whole-sequence products: the LSTM kernels' own against the BLAS NumpyOps uses.

The compiled LSTM (plait/backends/_kernels_cpu/lstm.pyx) makes four products over all of a
batch's tokens besides the time steps' small ones: the input projection X @ Wx.T forward, and
backward the weight gradients dG.T @ X and dG.T @ Hprev and the input gradient dG @ Wx. They
go to the BLAS of NumpyOps' products (plait.backends.cblas's table: plait's dense kernels
where `PLAIT_BLAS=auto` takes them, else the BLAS) below AVX-512, and with AVX-512 from a size
set per processor (`_numpy_lstm.BLAS_AVX512_WORK`). This script times both sides on the
tagger's shapes (N tokens, nI inputs, 4nO gates), one thread, in one process with the build
`PLAIT_ISA` picks: rounds alternate the two; each figure is the median over rounds of the
best of `--repeat` timings, in ms of CPU time. The kernel's side includes what it does per
product in a pass (the input projection's copy of Wx into panels; a transposed A's copies).

It prints every shape with the ratio table/kernel (below 1: the BLAS is faster) and, for the
weight gradients (A transposed) and for the other two, the smallest power of two from which the
BLAS is faster in at least 90% of the larger shapes (what the per-processor sizes in
`BLAS_AVX512_WORK` should be on this machine), and the rule installed here.

    .venv/bin/python bench/lstm_products.py                 # ~3 minutes
    PLAIT_ISA=avx2 .venv/bin/python bench/lstm_products.py  # the AVX2 build on an AVX-512 CPU
    .venv/bin/python bench/lstm_products.py --quick         # a few shapes, seconds
"""
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import numpy  # noqa: E402

import _harness as H  # noqa: E402

# Tokens per batch of the Turkish tagger at batches 16, 64 and 256; (nI, nO) of its BiLSTM at
# widths 64-512 with hidden 1x and 2x the width (nO = hidden / 2 per direction).
GRID = dict(N=[211, 940, 4156], shapes=[(64, 32), (64, 64), (128, 64), (128, 128), (256, 128),
                                        (256, 256), (512, 256), (512, 512)])
QUICK = dict(N=[211], shapes=[(64, 32), (128, 128)])
PRODUCTS = ("input", "dW", "dWh", "dX")


def _interleaved(W: numpy.ndarray, nO: int) -> numpy.ndarray:
    """Wx's rows in the gates' interleaved order (row 4u + g = row g*nO + u), as the kernels use."""
    return numpy.ascontiguousarray(W.reshape(4, nO, -1).transpose(1, 0, 2).reshape(4 * nO, -1))


def _cases(N: int, nI: int, nO: int, rng) -> Dict[str, tuple]:
    """product -> (multiply-adds, kernel call, table call)."""
    from plait.backends import cblas
    from plait.backends._numpy_lstm import _compiled as lstm

    table = cblas.CBlas()
    four = 4 * nO
    X = rng.standard_normal((N, nI), dtype="float32")
    H_ = rng.standard_normal((N, nO), dtype="float32")
    dG = rng.standard_normal((N, four), dtype="float32")
    W = rng.standard_normal((four, nI), dtype="float32")
    WI = _interleaved(W, nO)
    WIT = numpy.ascontiguousarray(WI.T)
    G = numpy.empty((N, four), "float32")
    dW = numpy.empty((four, nI), "float32")
    dWh = numpy.empty((four, nO), "float32")
    dX = numpy.empty((N, nI), "float32")
    return {
        "input": (N * four * nI, lambda: lstm._product(False, X, WIT, G, False, True, False),
                  lambda: table.gemm(X, WI, out=G, trans2=True)),
        "dW": (four * nI * N, lambda: lstm._product(True, dG, X, dW, False, False, True),
               lambda: table.gemm(dG, X, out=dW, trans1=True)),
        "dWh": (four * nO * N, lambda: lstm._product(True, dG, H_, dWh, False, False, True),
                lambda: table.gemm(dG, H_, out=dWh, trans1=True)),
        "dX": (N * nI * four, lambda: lstm._product(False, dG, W, dX, False, False, False),
               lambda: table.gemm(dG, W, out=dX)),
    }


def _best_ms(fn: Callable[[], object], repeat: int, calls: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        c0 = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - c0) / calls)
    return best * 1e3


def installed_rule() -> Optional[List[int]]:
    """The fewest multiply-adds NumpyOps sends to the BLAS now, of the input projection and
    input gradient and of the weight gradients (0: all; -1: none), after one float32 LSTM call
    has installed the routine; None without the compiled kernels."""
    from plait.backends import NumpyOps
    from plait.backends._numpy_lstm import _compiled as lstm

    if lstm is None:
        return None
    ops = NumpyOps()
    nO, nI = 2, 3
    params = numpy.zeros(4 * nO * (nI + nO + 2), "float32")
    ops.lstm_forward_inference(params, numpy.zeros((1, 1, nO), "float32"), numpy.zeros((1, 1, nO), "float32"),
                               numpy.zeros((2, nI), "float32"), [1, 1])
    return [int(lstm.blas_min_work()), int(lstm.blas_min_work(weight_gradients=True))]


def measure(grid: Dict, rounds: int, repeat: int) -> List[Dict]:
    from plait.backends import cblas
    from plait.backends._numpy_lstm import _compiled as lstm

    if lstm is None:
        raise SystemExit("bench: the compiled LSTM kernels are not built (make install).")
    from plait.backends import NumpyOps

    NumpyOps()  # chooses the BLAS (and where plait's dense kernels take products) as for any user
    cblas._follow_plait_blas()  # the table computes as NumpyOps' products do
    rng = numpy.random.default_rng(0)
    rows = []
    for N, (nI, nO) in itertools.product(grid["N"], grid["shapes"]):
        for name, (macs, kernel, table) in _cases(N, nI, nO, rng).items():
            calls = max(1, int(5e7 / macs))
            kernel(), table()
            got: Dict[str, List[float]] = {"kernel": [], "table": []}
            for _ in range(rounds):
                got["kernel"].append(_best_ms(kernel, repeat, calls))
                got["table"].append(_best_ms(table, repeat, calls))
            rows.append(dict(product=name, N=N, nI=nI, nO=nO, macs=macs,
                             kernel_ms=statistics.median(got["kernel"]),
                             table_ms=statistics.median(got["table"])))
    return rows


def threshold(rows: List[Dict], share: float = 0.9) -> Optional[int]:
    """The smallest power of two T such that the table is faster in at least `share` of the
    shapes of T multiply-adds or more; None where no T works."""
    for bits in range(10, 40):
        big = [r for r in rows if r["macs"] >= 1 << bits]
        if not big:
            return None
        if sum(r["table_ms"] < r["kernel_ms"] for r in big) >= share * len(big):
            return 1 << bits
    return None


KINDS = (("the input projection and input gradient", ("input", "dX")),
         ("the weight gradients", ("dW", "dWh")))


def report(rows: List[Dict], rule: Optional[List[int]]) -> None:
    table = [[r["product"], str(r["N"]), str(r["nI"]), str(4 * r["nO"]), f"{r['macs'] / 1e6:,.0f}",
              f"{r['kernel_ms']:.3f}", f"{r['table_ms']:.3f}", f"{r['table_ms'] / r['kernel_ms']:.2f}"]
             for r in sorted(rows, key=lambda r: (r["macs"], r["product"]))]
    print(H.render_table(["product", "N", "nI", "4nO", "M MACs", "kernel ms", "table ms", "table/kernel"], table))
    ratios = [r["table_ms"] / r["kernel_ms"] for r in rows]
    print(f"\ntable/kernel over {len(rows)} shapes: median {statistics.median(ratios):.2f}, "
          f"lowest {min(ratios):.2f}, highest {max(ratios):.2f}; the table is faster in "
          f"{sum(x < 1 for x in ratios)}.")
    for (label, products), installed in zip(KINDS, rule or [None, None]):
        t = threshold([r for r in rows if r["product"] in products])
        print(f"For {label}, the table is faster in at least 90% of the shapes from "
              + (f"2**{t.bit_length() - 1} multiply-adds ({t:,}) on." if t else "no size on (keep the kernels')."))
        if installed is not None:
            what = {0: "all of them", -1: "none"}.get(installed, f"those of at least {installed:,} multiply-adds")
            print(f"  installed here (this build, this processor): the BLAS takes {what}.")


def main(argv=None) -> None:
    args = H.grid_arguments(__doc__.splitlines()[0], repeat=3, argv=argv)
    rounds = 1 if args.quick else args.rounds
    rows = measure(QUICK if args.quick else GRID, rounds, args.repeat)
    rule = installed_rule()
    summary = H.machine_summary()
    from plait.backends import _kernels_cpu

    print(f"\n## The LSTM's whole-sequence products: bench/lstm_products.py\ncpu={summary['cpu']}  "
          f"build={_kernels_cpu.ISA}  1 thread  rounds={rounds} (median)  environment pins: "
          f"{summary['blas_env'] or 'none'}  plait@{summary['plait_commit']}\n")
    report(rows, rule)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "rule": rule,
                                               "threshold": [threshold([r for r in rows if r["product"] in p])
                                                             for _, p in KINDS],
                                               "build": _kernels_cpu.ISA, "machine": summary}, indent=1))


if __name__ == "__main__":
    main()
