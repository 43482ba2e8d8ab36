"""neon op-trees: plait's fused assignment vs the same expression in eager numpy (and numexpr).

    .venv/bin/python bench/neon_optree.py [--rounds 5] [--size 1000] [--threads 1] [--quick]

Each expression is evaluated into a preallocated float32 `out` of size x size (1M by default):

* fused:   plait.neon._fuse.execute(op_tree, out) - one compiled pass (two with a reduction);
           the op-tree is built inside the timed call, as neon's Tensor arithmetic would.
* numpy:   out[:] = <expression>, eagerly, one numpy call per node: what neon's CPU backend did.
* numexpr: numexpr.evaluate("<expression>", out=out), when numexpr is installed (reductions
           first in numpy, numexpr has no axis reductions inside an expression).

Rounds alternate the methods (the order rotates every round) so that a slow spell of a
shared machine hits every method alike; each round times enough calls for ~0.1 s and the
table gives the median over rounds of milliseconds per call, by CPU time (process time, all
threads) and by wall clock, the speed-up over numpy per CPU-second, and the peak memory a call
needs beyond its inputs and out (the growth of VmHWM, reset through /proc/self/clear_refs,
and tracemalloc's peak, whichever is larger). `--threads 1` (the default) holds plait's
kernels, numpy's BLAS and numexpr to one thread.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _set_threads(n: int) -> None:
    for var in ("PLAIT_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMEXPR_NUM_THREADS", "NUMEXPR_MAX_THREADS"):
        os.environ[var] = str(n)


def _kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def peak_extra_mb(fn) -> float:
    """Peak memory one call of fn needs beyond what exists before it (MB).

    The larger of two views: tracemalloc's peak (every numpy array, even when malloc recycles
    the pages of an earlier call's temporaries, as glibc does for a repeated 4 MB block), and
    the growth of peak resident memory (VmHWM, reset through /proc/self/clear_refs), which also
    sees C-side allocations such as numexpr's.
    """
    import tracemalloc
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    traced = (tracemalloc.get_traced_memory()[1] - base) / 2**20
    tracemalloc.stop()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        rss0 = _kb("VmRSS")
        fn()
        rss = max(0, _kb("VmHWM") - rss0) / 1024.0
    except OSError:
        rss = 0.0
    return max(traced, rss)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=1000, help="out is size x size float32")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--target-s", type=float, default=0.1, help="time per method per round")
    ap.add_argument("--quick", action="store_true", help="3 rounds of 256 x 256, a smoke run")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.size, args.target_s = 3, 256, 0.02
    args.rounds = max(3, args.rounds)
    _set_threads(args.threads)

    import numpy as np
    from plait.neon import _fuse
    try:
        import numexpr as ne
        ne.set_num_threads(args.threads)
    except ImportError:
        ne = None

    if _fuse._get_toolchain() is None:
        print("bench/neon_optree.py: no C compiler, the fused path is unavailable", file=sys.stderr)
        return 1

    rs = np.random.RandomState(0)
    n = args.size
    a, b, c, d, w = (rs.uniform(-2, 2, (n, n)).astype(np.float32) for _ in range(5))
    v = rs.uniform(0.01, 2, (n, n)).astype(np.float32)
    lr, eps = np.float32(0.01), np.float32(1e-8)
    out = np.empty((n, n), np.float32)
    env = dict(a=a, b=b, c=c, d=d, w=w, v=v, lr=lr, eps=eps)

    def T(op, left=None, right=None, **kw):
        kw["op"] = op
        return (kw, left, right)

    # name, ops in the expression, fused, numpy, numexpr (None: not expressible)
    cases = [
        ("a + b", 1,
         lambda: _fuse.execute(T("add", a, b), out),
         lambda: out.__setitem__(slice(None), a + b),
         lambda: ne.evaluate("a + b", local_dict=env, out=out)),
        ("exp(a)", 1,
         lambda: _fuse.execute(T("exp", a), out),
         lambda: out.__setitem__(slice(None), np.exp(a)),
         lambda: ne.evaluate("exp(a)", local_dict=env, out=out)),
        ("tanh(a)", 1,
         lambda: _fuse.execute(T("tanh", a), out),
         lambda: out.__setitem__(slice(None), np.tanh(a)),
         lambda: ne.evaluate("tanh(a)", local_dict=env, out=out)),
        ("a * b + c", 2,
         lambda: _fuse.execute(T("add", T("mul", a, b), c), out),
         lambda: out.__setitem__(slice(None), a * b + c),
         lambda: ne.evaluate("a * b + c", local_dict=env, out=out)),
        ("(a - b)**2 * c + d", 4,
         lambda: _fuse.execute(T("add", T("mul", T("pow", T("sub", a, b), 2), c), d), out),
         lambda: out.__setitem__(slice(None), np.power(a - b, 2) * c + d),
         lambda: ne.evaluate("(a - b)**2 * c + d", local_dict=env, out=out)),
        ("sig(a * w + b)", 6,
         lambda: _fuse.execute(T("sig", T("add", T("mul", a, w), b)), out),
         lambda: out.__setitem__(slice(None), 1.0 / (1.0 + np.exp(-(a * w + b)))),
         lambda: ne.evaluate("1 / (1 + exp(-(a * w + b)))", local_dict=env, out=out)),
        ("a - lr * b / (sqrt(v) + eps)", 5,
         lambda: _fuse.execute(T("sub", a, T("div", T("mul", lr, b), T("add", T("sqrt", v), eps))), out),
         lambda: out.__setitem__(slice(None), a - lr * b / (np.sqrt(v) + eps)),
         lambda: ne.evaluate("a - lr * b / (sqrt(v) + eps)", local_dict=env, out=out)),
        ("exp(a - max(a, axis=0))", 3,
         lambda: _fuse.execute(T("exp", T("sub", a, T("max", a, axis=0))), out),
         lambda: out.__setitem__(slice(None), np.exp(a - np.max(a, axis=0, keepdims=True))),
         lambda: ne.evaluate("exp(a - m)", local_dict={"a": a, "m": np.max(a, axis=0, keepdims=True)},
                             out=out)),
    ]
    methods = ["fused", "numpy"] + (["numexpr"] if ne is not None else [])

    # Warm up (compiles the kernels), check agreement, measure peak memory.
    agree = {}
    mem = {}
    for name, _, *fns in cases:
        results = {}
        for m, fn in zip(methods, fns):
            fn()
            fn()
            if m == "fused":
                assert fn() is True, name
            results[m] = out.copy()
            mem[name, m] = peak_extra_mb(fn)
        ref = results["numpy"]
        scale = np.abs(ref).max()
        agree[name] = {m: float(np.abs(r - ref).max() / scale) for m, r in results.items()}

    times = {(name, m): ([], []) for name, *_ in cases for m in methods}
    for r in range(args.rounds):
        order = methods[r % len(methods):] + methods[:r % len(methods)]
        for name, _, *fns in cases:
            by = dict(zip(methods, fns))
            for m in order:
                fn = by[m]
                t0 = time.perf_counter()
                calls = 0
                while time.perf_counter() - t0 < args.target_s / 4:
                    fn()
                    calls += 1
                c0, w0 = time.process_time(), time.perf_counter()
                for _ in range(calls * 4):
                    fn()
                cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                times[name, m][0].append(cpu / (calls * 4) * 1e3)
                times[name, m][1].append(wall / (calls * 4) * 1e3)

    print(f"\nneon op-trees into a {n}x{n} float32 out ({n * n / 1e6:.2f}M elements), "
          f"{args.threads} thread(s), median of {args.rounds} alternating rounds\n")
    head = ("| expression | ops | method | ms/call (CPU) | ms/call (wall) | vs numpy (CPU) | "
            "peak extra MB | max rel. diff vs numpy |")
    print(head)
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for name, ops, *_ in cases:
        base = statistics.median(times[name, "numpy"][0])
        for m in methods:
            cpu = statistics.median(times[name, m][0])
            wall = statistics.median(times[name, m][1])
            print(f"| `{name}` | {ops} | {m} | {cpu:.3f} | {wall:.3f} | {base / cpu:.2f}x | "
                  f"{mem[name, m]:.3f} | {agree[name][m]:.1e} |")

    # Per-call overhead: the same trees on a small array, where the Python side dominates.
    small = 32
    sa, sb, sc = (rs.uniform(-2, 2, (small, small)).astype(np.float32) for _ in range(3))
    sout = np.empty((small, small), np.float32)
    tiny = [
        ("a * b + c", lambda: _fuse.execute(T("add", T("mul", sa, sb), sc), sout),
         lambda: sout.__setitem__(slice(None), sa * sb + sc)),
        ("sig(a * w + b)", lambda: _fuse.execute(T("sig", T("add", T("mul", sa, sb), sc)), sout),
         lambda: sout.__setitem__(slice(None), 1.0 / (1.0 + np.exp(-(sa * sb + sc))))),
    ]
    print(f"\nper-call cost on a {small}x{small} out (microseconds, median of {args.rounds})\n")
    print("| expression | fused | numpy |")
    print("|---|---:|---:|")
    for name, f_fn, n_fn in tiny:
        f_fn()
        res = {"fused": [], "numpy": []}
        for _ in range(args.rounds):
            for m, fn in (("fused", f_fn), ("numpy", n_fn)):
                k = 2000
                t0 = time.perf_counter()
                for _ in range(k):
                    fn()
                res[m].append((time.perf_counter() - t0) / k * 1e6)
        print(f"| `{name}` | {statistics.median(res['fused']):.1f} | {statistics.median(res['numpy']):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
