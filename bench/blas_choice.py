#!/usr/bin/env python
"""Which BLAS should plait's float32 products use on this CPU? Measured, not assumed (issue 19).

Each candidate runs in its own child process (OpenBLAS reads OPENBLAS_CORETYPE once, when it
loads), single-threaded, over the products the benchmarked models make:

* numpy's OpenBLAS with its own kernel choice (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset);
* numpy's OpenBLAS with the AVX2 "Haswell" kernels, and, where the CPU has AVX-512, the
  "SkylakeX" ones;
* plait's private OpenBLAS (the scipy-openblas32 wheel, plait/backends/_blas.py) with its own
  choice and with "Haswell";
* what plait's default (`PLAIT_BLAS=auto`) gives in a plain process, under the environment this
  script was started with;
* where the CPU has AVX-512, plait's own products (_kernels_cpu/dense_gemm.pyx) for every shape
  (`PLAIT_BLAS=plait`; `auto` takes them below 2**28 multiply-adds on the processors of
  `_blas.OWN_KERNEL_CPUS`);
* where bench/setup_peers.sh made the thinc91 venv, BLIS as thinc 9.1 calls it (the `blis`
  package's `blis.py.gemm`, with its own kernel choice or the one BLIS_ARCH_TYPE forces): the
  peer's BLAS, measured as one more well-kept library, not one plait loads.

Rounds alternate the candidates; the table shows each product's median GFLOP per CPU-second
(process time, steadier than wall time on a shared machine) and marks the best. The last lines
say what `auto` chooses on this CPU and how far that is from the best candidate.

    .venv/bin/python bench/blas_choice.py                 # ~1 minute
    .venv/bin/python bench/blas_choice.py --rounds 5 --json /tmp/blas.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))
import _harness as H  # noqa: E402

# (name, M, K, N, transpose B): the products behind the figures in bench/README.md.
SHAPES: List[Tuple[str, int, int, int, bool]] = [
    ("MLP 128x784 @ 784x512", 128, 784, 512, True),
    ("MLP 256x512 @ 512x512", 256, 512, 512, True),
    ("MLP dX 128x512 @ 512x784", 128, 512, 784, False),
    ("MLP dW 512x256 @ 256x512", 512, 256, 512, False),
    ("text CNN 1024x192 @ 192x64", 1024, 192, 64, True),
    ("spaCy parser 3553x128 @ 128x3072", 3553, 128, 3072, True),
    ("spaCy tok2vec 910x288 @ 288x288", 910, 288, 288, True),
    ("small 32x256 @ 256x1024", 32, 256, 1024, False),
    ("square 1024^3", 1024, 1024, 1024, False),
]
PINS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
#: A candidate's environment key naming another Python to run it in (BLIS: the thinc91 venv's).
PYTHON = "python executable"


def candidates(has_avx512: bool) -> List[Tuple[str, Dict[str, Optional[str]]]]:
    """(name, environment changes: None removes the variable) per candidate."""
    unpinned = {k: None for k in PINS}
    found = [
        ("numpy, own choice", dict(unpinned, PLAIT_BLAS="numpy")),
        ("numpy, Haswell", dict(unpinned, PLAIT_BLAS="numpy", OPENBLAS_CORETYPE="Haswell")),
    ]
    if has_avx512:
        found.append(("numpy, SkylakeX", dict(unpinned, PLAIT_BLAS="numpy", OPENBLAS_CORETYPE="SkylakeX")))
    found += [
        ("private, own choice", dict(unpinned, PLAIT_BLAS="openblas")),
        ("private, Haswell", dict(unpinned, PLAIT_BLAS="openblas", OPENBLAS_CORETYPE="Haswell")),
    ]
    if H._peer_python("thinc91").exists():
        found.append(("BLIS, thinc91's", {PYTHON: str(H._peer_python("thinc91"))}))
    found += [
        ("plait auto, this environment", {}),
    ]
    if has_avx512:
        # plait's own AVX-512 products for every float32 shape (auto takes them for some).
        found.append(("plait's own kernels", dict(unpinned, PLAIT_BLAS="plait")))
    return found


def _rates(gemm: Any, repeat: int) -> Dict[str, float]:
    """Best-of-`repeat` GFLOP per CPU-second of each product through gemm(A, B, trans2, out)."""
    import numpy

    rng = numpy.random.default_rng(0)
    rates: Dict[str, float] = {}
    for name, M, K, N, trans in SHAPES:
        A = rng.standard_normal((M, K), dtype="float32")
        B = rng.standard_normal((N, K) if trans else (K, N), dtype="float32")
        out = numpy.empty((M, N), "float32")
        flops = 2.0 * M * N * K
        gemm(A, B, trans, out)  # loads the private BLAS where it is chosen
        calls = max(1, int(1e9 / flops))  # about 5-10 ms per timing
        best = 0.0
        for _ in range(repeat):
            c0 = time.process_time()
            for _ in range(calls):
                gemm(A, B, trans, out)
            best = max(best, flops * calls / max(time.process_time() - c0, 1e-9) / 1e9)
        rates[name] = best
    return rates


def measure_blis(repeat: int) -> Dict[str, Any]:
    """In a child of a Python with the `blis` package (thinc's): the products through BLIS."""
    from blis.py import gemm

    arch = os.environ.get("BLIS_ARCH_TYPE")
    return {"shapes": _rates(lambda A, B, trans, out: gemm(A, B, trans2=trans, out=out), repeat),
            "kernels": f"BLIS_ARCH_TYPE={arch}" if arch else "its own choice",
            "library": "BLIS (blis.py.gemm)", "reason": "the peer's BLAS"}


def measure(repeat: int) -> Dict[str, Any]:
    """In a child: best-of-`repeat` GFLOP per CPU-second of each product, through NumpyOps.gemm."""
    from plait.backends import NumpyOps, _blas

    ops = NumpyOps()
    result: Dict[str, Any] = {"shapes": _rates(lambda A, B, trans, out: ops.gemm(A, B, trans2=trans, out=out),
                                               repeat)}
    info = _blas.info()
    kernels = info.get("corename")
    if not info.get("library"):
        from threadpoolctl import threadpool_info

        names = [lib.get("architecture") for lib in threadpool_info() if lib.get("internal_api") == "openblas"]
        kernels = names[0] if names else None
    result["kernels"] = kernels
    result["library"] = "private OpenBLAS" if info.get("library") else "numpy's OpenBLAS"
    if info.get("own_kernels", "off") != "off":
        result["library"] = f"plait's kernels ({info['own_kernels']}), else the {result['library']}"
    result["reason"] = info.get("reason")
    return result


def run_candidate(changes: Dict[str, Optional[str]], repeat: int, timeout: float) -> Dict[str, Any]:
    env = H._child_env(1)
    python = changes.get(PYTHON) or sys.executable
    for key, value in changes.items():
        if key == PYTHON:
            continue
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    how = "measure_blis" if PYTHON in changes else "measure"
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import blas_choice; "
            f"print(json.dumps(blas_choice.{how}({int(repeat)})))")
    proc = subprocess.run([python, "-c", code, str(BENCH_DIR)], capture_output=True, text=True,
                          env=env, cwd=str(REPO_DIR), timeout=timeout)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-1500:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cpu_has_avx512() -> bool:
    """Whether OpenBLAS's AVX-512 kernels can run here: plait's own probe (x86-64-v4)."""
    from plait.backends._kernels_cpu import isa

    return isa.cpu_runs(4)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; medians (default 3)")
    parser.add_argument("--repeat", type=int, default=5, help="timings per product in a child; best kept")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the raw results to PATH")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args(argv)
    found = candidates(cpu_has_avx512())
    runs: Dict[str, List[Dict[str, Any]]] = {name: [] for name, _ in found}
    for r in range(args.rounds):
        for name, changes in found:
            res = run_candidate(changes, args.repeat, args.timeout)
            if "error" in res:
                raise SystemExit(f"bench: candidate {name!r} failed:\n{res['error']}")
            runs[name].append(res)
        print(f"[round {r + 1}/{args.rounds}] done", flush=True)
    medians = {name: {shape: statistics.median(run["shapes"][shape] for run in rs) for shape, *_ in SHAPES}
               for name, rs in runs.items()}
    kernels = {name: rs[0].get("kernels") for name, rs in runs.items()}
    summary = H.machine_summary()
    print(f"\n## BLAS choice: bench/blas_choice.py\ncpu={summary['cpu']}  avx512={cpu_has_avx512()}  "
          f"rounds={args.rounds} (median)  1 thread  environment pins: {summary['blas_env'] or 'none'}  "
          f"plait@{summary['plait_commit']}\n")
    names = [name for name, _ in found]
    headers = ["product (float32)"] + [f"{n} [{kernels[n]}]" for n in names]
    rows = []
    for shape, *_ in SHAPES:
        best = max(medians[n][shape] for n in names)
        rows.append([shape] + [f"**{medians[n][shape]:.0f}**" if medians[n][shape] == best
                               else f"{medians[n][shape]:.0f}" for n in names])
    print("GFLOP per CPU-second:\n")
    print(H.render_table(headers, rows))
    auto = runs["plait auto, this environment"][0]
    shortfalls = [medians["plait auto, this environment"][s] / max(medians[n][s] for n in names)
                  for s, *_ in SHAPES]
    print(f"\nplait auto in this environment: {auto['library']} with {auto['kernels']} kernels "
          f"({auto['reason']}); per product {min(shortfalls):.0%}-{max(shortfalls):.0%} of the best "
          f"candidate, median {statistics.median(shortfalls):.0%}.")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "medians": medians, "kernels": kernels,
                                               "machine": summary}, indent=1))


if __name__ == "__main__":
    main()
