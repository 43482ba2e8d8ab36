"""Data-parallel training over MPI (plait.distributed): scaling, allreduce rate, cost model.

    .venv/bin/python bench/distributed.py [--rounds 5] [--quick] [--json PATH]
    .venv/bin/python bench/distributed.py --cost-model [--from-json PATH] [--alpha-us 20] [--gbit 25]

Three parts (issue 16):

* **Scaling** (weak): the MLP (784 -> 512 -> 512 -> 10, Relu, Relu, Softmax, Adam) and the text
  CNN (HashEmbed(64, 5000 rows) -> expand_window(1) -> Maxout(64, 3 pieces, normalize) ->
  reduce_mean -> Softmax(2), Adam), trained by `DataParallel` with the same per-rank batch on
  1 rank and on 2 ranks, each rank with one BLAS thread (`mpiexec -n 1` / `-n 2`). The jobs
  alternate (their order rotates from round to round) and the table shows medians. Scaling
  efficiency = ex/s on 2 ranks / (2 x ex/s on 1 rank). More 2-rank jobs take the reduction
  apart: "overlap off" is DataParallel(overlap=False) where plait has that option (the reduction
  after backprop); "no allreduce" skips it (each rank trains on its own: what two busy processes
  cost each other on the machine); "raw Allreduce" replaces it with mpi4py's Allreduce of a
  float32 buffer as large as the gradients, with no packing (a timing stand-in for a copy-free
  reduction; the gradients are not averaged in that job). Only the loop is timed (begin_update,
  backprop, DataParallel.finish_update), after warm-up steps; ex/CPU-s divides by the ranks'
  summed process CPU time over the same loop.
* **Allreduce**: plait's `Communicator.allreduce_grads(model)` against mpi4py's
  `Allreduce(IN_PLACE, buf, op=SUM)` on a float32 buffer of as many values as the gradients, on
  2 ranks: the MLP's and the text CNN's gradients, and a sweep of 4 KB .. 64 MB (4 tensors each).
  Methods alternate; each figure is the median of blocks of calls, a block's time being the
  slowest rank's. GB/s are algorithmic: gradient bytes / time. Also: the small-message latency,
  the large-message rate, and the local work plait adds (packing into and out of its buckets).
* **Cost model** (`--cost-model`, also printed after a full run): the expected efficiency on 8, 64
  and 512 workers over a network of given latency and bandwidth, with and without overlapping the
  reduction with backprop, and the bucket size that maximises it. See bench/README.md.

Synthetic data of the benchmarks' shapes (MNIST-sized images; documents of 5-40 tokens, about
22 on average as in Rotten Tomatoes), so nothing needs downloading.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULT_PREFIX = "BENCH_RESULT "
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "PLAIT_NUM_THREADS")

DEFAULTS = dict(
    mlp_batch=128, mlp_steps=240, mlp_width=512,
    cnn_batch=64, cnn_steps=300, cnn_width=64, cnn_rows=5000, cnn_pieces=3,
    warmup=5, sizes_kb=[4, 64, 1024, 16384, 65536], ar_blocks=5, ar_block_s=0.04, cold_calls=6,
)
QUICK = dict(
    mlp_batch=64, mlp_steps=20, mlp_width=128,
    cnn_batch=32, cnn_steps=20, cnn_width=32, cnn_rows=1000, cnn_pieces=3,
    warmup=2, sizes_kb=[4, 1024], ar_blocks=3, ar_block_s=0.01, cold_calls=2,
)
# The training jobs of a round, whose order rotates from round to round.
# (name, ranks, what DataParallel.finish_update reduces with): plait's DataParallel as built by
# default (or as --overlap says); the same with overlap=False, where plait has the option (after
# backprop, through allreduce_grads); nothing (each rank trains alone: what two busy processes
# cost each other); or mpi4py's Allreduce of a float32 buffer as large as the gradients, with no
# packing (a timing stand-in for a copy-free reduction: the gradients are not averaged then).
# "MPI only" is plait's default with PLAIT_DIST_SHM=0: every byte through MPI, as before the
# shared-memory sums (plait/distributed/_shm.py), which ranks on one machine use by default.
# "sharded update" is DataParallel(shard_update=True): one copy of the weights and Adam's state
# in shared memory, each rank summing and stepping its slice of every parameter (_sharded.py).
CONFIGS = (("1 rank", 1, "plait"), ("2 ranks", 2, "plait"), ("2 ranks, sharded update", 2, "plait-shard"),
           ("2 ranks, overlap off", 2, "plait-off"),
           ("2 ranks, MPI only", 2, "plait-mpi"),
           ("2 ranks, no allreduce", 2, "none"), ("2 ranks, raw mpi4py Allreduce", 2, "mpi4py"))
MODELS = (("mlp", "MLP 784-512-512-10"), ("cnn", "text CNN"))


# ---------------------------------------------------------------------------------------
# Models and data (children only)


def build(kind: str, p: Dict[str, Any], rank: int, size: int):
    """(model, per-rank batches X, Y, loss, optimizer) for 'mlp' or 'cnn'."""
    import numpy
    from plait.api import (Adam, CategoricalCrossentropy, HashEmbed, Maxout, Relu, Softmax, chain,
                           expand_window, list2ragged, reduce_mean, with_array)
    from plait.distributed import shard

    rng = numpy.random.default_rng(1234)  # the same data on every rank, then sharded
    if kind == "mlp":
        B, n = p["mlp_batch"], p["mlp_batch"] * size * 8
        X = rng.random((n, 784), dtype="float32")
        Y = numpy.eye(10, dtype="float32")[rng.integers(0, 10, n)]
        model = chain(Relu(nO=p["mlp_width"]), Relu(nO=p["mlp_width"]), Softmax(nO=10))
    else:
        B, n = p["cnn_batch"], p["cnn_batch"] * size * 8
        X = [rng.integers(0, 2**40, int(rng.integers(5, 41))).astype("uint64") for _ in range(n)]
        Y = numpy.eye(2, dtype="float32")[rng.integers(0, 2, n)]
        model = chain(
            list2ragged(),
            with_array(HashEmbed(nO=p["cnn_width"], nV=p["cnn_rows"], seed=1)),
            expand_window(window_size=1),
            with_array(Maxout(nO=p["cnn_width"], nP=p["cnn_pieces"], normalize=True)),
            reduce_mean(),
            Softmax(nO=2),
        )
    model.initialize(X=X[:8], Y=Y[:8])
    Xs, Ys = shard(X, rank, size), shard(Y, rank, size)
    batches = [(Xs[i:i + B], Ys[i:i + B]) for i in range(0, len(Xs) - B + 1, B)]
    return model, batches, CategoricalCrossentropy(), Adam(0.001, use_averages=False)


def grad_entries(model) -> List[Tuple[str, int]]:
    """(label, bytes) of every parameter, in plait's walk order."""
    return [(f"{node.name}.{name}", int(node.get_param(name).nbytes))
            for node in model.walk() for name in node.param_names if node.has_param(name)]


# ---------------------------------------------------------------------------------------
# Child: one training job (every rank runs this)


def data_parallel(model, comm, mode: str, overlap: str):
    """DataParallel as plait builds it by default, or with overlap on/off where plait has the
    option. The jobs that swap the reduction ("none", "mpi4py") need it to go through
    allreduce_grads, so they ask for overlap=False."""
    import inspect

    from plait.distributed import DataParallel

    kwargs = {}
    if mode == "plait-shard":
        if "shard_update" not in inspect.signature(DataParallel).parameters:
            raise SystemExit("bench/distributed.py: this plait's DataParallel has no shard_update option")
        return DataParallel(model, comm, shard_update=True)
    if "overlap" in inspect.signature(DataParallel).parameters:
        if mode != "plait":  # plait-off, and the jobs that swap the reduction
            kwargs["overlap"] = False
        elif overlap != "auto":
            kwargs["overlap"] = overlap == "on"
    elif overlap == "on" and mode == "plait":
        raise SystemExit("bench/distributed.py: --overlap on, but this plait's DataParallel has no overlap option")
    return DataParallel(model, comm, **kwargs)


def child_train(p: Dict[str, Any]) -> None:
    import numpy
    from plait.distributed import get_communicator

    comm = get_communicator()
    rank, size = comm.rank, comm.size
    out: Dict[str, Any] = {"size": size}
    for kind in p["models"]:
        numpy.random.seed(7)
        model, batches, loss_fn, opt = build(kind, p, rank, size)
        mode = p["allreduce"]
        reduce_time = [0.0]
        if mode in ("mpi4py", "none"):
            # The stand-ins: the model's own passes, then mpi4py's Allreduce of a buffer as large
            # as the gradients (no packing, nothing averaged) or no reduction at all.
            dp = None
            begin_update = model.begin_update
            if mode == "mpi4py":
                from mpi4py import MPI
                raw = numpy.zeros(sum(b for _, b in grad_entries(model)) // 4, dtype="float32")

                def reduce(_raw=raw, _world=MPI.COMM_WORLD, _MPI=MPI):
                    _world.Allreduce(_MPI.IN_PLACE, _raw, op=_MPI.SUM)
            else:
                def reduce():
                    return None

            def finish_update(optimizer, _reduce=reduce):
                t = time.perf_counter()
                _reduce()
                reduce_time[0] += time.perf_counter() - t
                model.finish_update(optimizer)
        else:  # plait's DataParallel (overlap as built, or off)
            dp = data_parallel(model, comm, mode, p.get("overlap", "auto"))
            begin_update = dp.begin_update

            def finish_update(optimizer, _dp=dp, _fused=mode == "plait-shard"):
                # DataParallel.finish_update, in its two halves: the reduction (what is left of
                # it after backprop, when it overlaps), then the optimizer. The sharded update
                # does both in one (its reduction time is not apart: left at 0).
                t = time.perf_counter()
                if _fused:
                    _dp.finish_update(optimizer)
                elif hasattr(_dp, "allreduce_grads"):
                    _dp.allreduce_grads()
                    reduce_time[0] += time.perf_counter() - t
                    model.finish_update(optimizer)
                else:
                    _dp.finish_update(optimizer)
        steps = p[f"{kind}_steps"]
        for i in range(p["warmup"]):
            X, Y = batches[i % len(batches)]
            Yh, backprop = begin_update(X)
            backprop(loss_fn.get_grad(Yh, Y))
            finish_update(opt)
        reduce_time[0] = 0.0
        fwd = bwd = upd = 0.0
        n_ex = 0
        comm.barrier()
        c0, w0 = time.process_time(), time.perf_counter()
        for i in range(steps):
            X, Y = batches[i % len(batches)]
            t0 = time.perf_counter()
            Yh, backprop = begin_update(X)
            t1 = time.perf_counter()
            backprop(loss_fn.get_grad(Yh, Y))
            t2 = time.perf_counter()
            finish_update(opt)
            t3 = time.perf_counter()
            fwd += t1 - t0
            bwd += t2 - t1
            upd += t3 - t2
            n_ex += len(X)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        mine = {"wall": wall, "cpu": cpu, "n": n_ex, "fwd": fwd / steps, "bwd": bwd / steps,
                "finish": upd / steps, "reduce": reduce_time[0] / steps}
        ready = backprop_readiness(model, batches, loss_fn) if size == 1 else None
        every = comm.gather(mine)
        if rank == 0:
            n_total = sum(r["n"] for r in every)
            wall_max = max(r["wall"] for r in every)
            cpu_sum = sum(r["cpu"] for r in every)
            out[kind] = {
                "ex_per_s": n_total / wall_max,
                "ex_per_cpu_s": n_total / cpu_sum,
                "batch_per_rank": p[f"{kind}_batch"],
                "steps": steps,
                # Per step, the mean over ranks (ms).
                **{f"{k}_ms": 1e3 * statistics.fmean(r[k] for r in every) for k in ("fwd", "bwd", "finish", "reduce")},
                "overlap": bool(getattr(dp, "overlap", False)),
                # Buckets of the last update sent during backprop (plait's DataParallel says so).
                "overlapped_buckets": getattr(dp, "overlapped_buckets", None),
                "grad_bytes": sum(b for _, b in grad_entries(model)),
                "n_params": len(grad_entries(model)),
                "ready": ready,
            }
    if rank == 0:
        print(RESULT_PREFIX + json.dumps(out), flush=True)
    comm.barrier()


def backprop_readiness(model, batches, loss_fn) -> List[Tuple[str, int, float]]:
    """When each parameter's gradient is final, as a fraction of the backward pass.

    Each parameter-holding node's backprop callback is wrapped (on this node only, for a few
    extra steps after the timed loop) to note when it returns. (label, bytes, fraction) in the
    order backprop finishes them: what buckets filled during backprop would follow.
    """
    stamps: Dict[int, float] = {}
    originals = []
    for node in model.walk():
        if not any(node.has_param(n) for n in node.param_names):
            continue
        original = node._func

        def wrapped(m, X, is_train, _orig=original, _id=node.id):
            Y, bp = _orig(m, X, is_train)

            def bp2(dY):
                dX = bp(dY)
                stamps[_id] = time.perf_counter()
                return dX
            return Y, bp2
        node._func = wrapped
        originals.append((node, original))
    fractions: Dict[int, List[float]] = {}
    try:
        for i in range(5):
            X, Y = batches[i % len(batches)]
            Yh, backprop = model.begin_update(X)
            dY = loss_fn.get_grad(Yh, Y)
            stamps.clear()
            t0 = time.perf_counter()
            backprop(dY)
            t1 = time.perf_counter()
            for key, t in stamps.items():
                fractions.setdefault(key, []).append((t - t0) / (t1 - t0))
            for node in model.walk():  # drop the gradients: no optimizer step here
                for name in node.param_names:
                    if node.has_grad(name):
                        node.set_grad(name, 0.0)
    finally:
        for node, original in originals:
            node._func = original
    out = []
    for node in model.walk():
        for name in node.param_names:
            if node.has_param(name) and node.id in fractions:
                out.append((f"{node.name}.{name}", int(node.get_param(name).nbytes),
                            statistics.median(fractions[node.id])))
    out.sort(key=lambda e: e[2])
    return out


# ---------------------------------------------------------------------------------------
# Child: allreduce rates (2 ranks)


def child_allreduce(p: Dict[str, Any]) -> None:
    import numpy
    from mpi4py import MPI
    from plait.api import Model
    from plait.distributed import get_communicator

    comm = get_communicator()
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()

    def blob(nbytes: int, parts: int = 4):
        """A model of `parts` float32 tensors of nbytes in all, each with a gradient."""
        n = max(parts, nbytes // 4)
        sizes = [n // parts + (1 if i < n % parts else 0) for i in range(parts)]
        params = {f"W{i}": numpy.zeros(s, dtype="float32") for i, s in enumerate(sizes)}
        m = Model("blob", lambda model, X, is_train: (X, lambda dY: dY), params=params)
        for name, s in zip(params, sizes):
            m.set_grad(name, numpy.full(s, 1.0 + rank, dtype="float32"))
        return m

    def with_grads(kind: str):
        model, batches, loss_fn, _opt = build(kind, p, rank, size)
        X, Y = batches[0]
        Yh, backprop = model.begin_update(X)
        backprop(loss_fn.get_grad(Yh, Y))
        return model

    builders = [("MLP gradients", lambda: with_grads("mlp")), ("text CNN gradients", lambda: with_grads("cnn"))]
    builders += [(f"{kb:,} KB", lambda kb=kb: blob(kb * 1024)) for kb in p["sizes_kb"]]
    # Each case twice: the second model goes to a DataParallel on a communicator that moves
    # every byte through MPI (PLAIT_DIST_SHM=0's path), so the two never share gradient views.
    cases = [(label, build_case(), build_case()) for label, build_case in builders]
    from plait.distributed import Communicator

    mpi_only = Communicator()
    mpi_only._shm_on = False
    # In training the reduction follows backprop, whose working set has pushed the buckets and
    # MPI's shared-memory segments out of the caches; back-to-back calls keep them warm. The
    # "cold" figures overwrite 64 MB before each (single, timed) call of the models' cases.
    junk = numpy.zeros(16 * 2**20, dtype="float32")

    def n_values(model) -> int:
        return sum(node.get_param(n).size for node in model.walk() for n in node.param_names if node.has_param(n))

    def timed(fn, calls: int) -> float:
        world.Barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return world.allreduce((time.perf_counter() - t0) / calls, op=MPI.MAX)

    def timed_cold(fn, calls: int) -> List[float]:
        out = []
        for _ in range(calls):
            numpy.add(junk, 1.0, out=junk)
            world.Barrier()
            t0 = time.perf_counter()
            fn()
            out.append(world.allreduce(time.perf_counter() - t0, op=MPI.MAX))
        return out

    results = []
    for label, model, twin in cases:
        nv = n_values(model)
        buf = numpy.ones(nv, dtype="float32")
        ibuf = numpy.ones(nv, dtype="float32")
        grads = [(node, name) for node in model.walk() for name in node.param_names if node.has_param(name)]
        pack = numpy.empty(nv + len(grads), dtype="float32")
        scale = numpy.float32(1.0 / size)

        def local_copies():
            # What allreduce_grads does around the reduction: pack, then scale back out.
            offset = 0
            for node, name in grads:
                g = node.get_grad(name)
                numpy.copyto(pack[offset:offset + g.size], g.reshape(-1))
                offset += g.size
            offset = 0
            for node, name in grads:
                g = node.get_grad(name)
                numpy.multiply(pack[offset:offset + g.size].reshape(g.shape), scale, out=g)
                offset += g.size

        def iallreduce_wait():
            world.Iallreduce(MPI.IN_PLACE, ibuf, op=MPI.SUM).Wait()

        from plait.distributed import DataParallel

        dp = DataParallel(model, comm, broadcast=False, overlap=False)
        dp_mpi = DataParallel(twin, mpi_only, broadcast=False, overlap=False)

        def data_parallel_reduce(dp=dp):
            # DataParallel's reduction: the gradients are views of its buckets (after the first
            # call) and were divided by the number of ranks in backprop (said here by hand).
            dp._scaled = True
            dp.allreduce_grads()

        methods = {
            "plait": lambda: comm.allreduce_grads(model),
            "DataParallel": data_parallel_reduce,
            "DataParallel, MPI only": lambda: data_parallel_reduce(dp_mpi),
            "mpi4py": lambda: world.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM),
            "Iallreduce+Wait": iallreduce_wait,
            "local copies": local_copies,
        }
        for fn in methods.values():  # warm: plans, buffers, first-touch pages
            fn()
            fn()
        t_one = timed(methods["mpi4py"], 2)
        calls = world.bcast(max(2, min(2000, int(p["ar_block_s"] / max(t_one, 1e-7)))), root=0)
        times: Dict[str, List[float]] = {m: [] for m in methods}
        cold: Dict[str, List[float]] = {m: [] for m in ("plait", "mpi4py", "DataParallel", "DataParallel, MPI only")}
        names = list(methods)
        for b in range(p["ar_blocks"]):
            order = names[b % len(names):] + names[:b % len(names)]
            for m in order:
                times[m].append(timed(methods[m], calls))
                if m in cold and label.endswith("gradients"):
                    cold[m] += timed_cold(methods[m], p["cold_calls"])
            buf.fill(1.0)  # keep the sums finite
            ibuf.fill(1.0)
        results.append({"case": label, "bytes": nv * 4, "values": nv, "tensors": len(grads), "calls": calls,
                        **{f"{m}_s": statistics.median(t) for m, t in times.items()},
                        **{f"{m}_cold_s": statistics.median(t) for m, t in cold.items() if t},
                        **{f"{m}_all": t for m, t in times.items()}})
    # Latency: an 8-byte Allreduce (mpi4py), plait's allreduce_scalar; the local reduction rate.
    small = numpy.ones(2, dtype="float32")
    lat = {"mpi4py": [], "plait": []}
    for b in range(p["ar_blocks"]):
        lat["mpi4py"].append(timed(lambda: world.Allreduce(MPI.IN_PLACE, small, op=MPI.SUM), 2000))
        lat["plait"].append(timed(lambda: comm.allreduce_scalar(1.0), 2000))
    # 16 MB operands: out of the core's caches, as a large bucket's would be.
    a = numpy.ones(2**22, dtype="float32")
    c = numpy.ones(2**22, dtype="float32")
    add_t = []
    for _ in range(p["ar_blocks"]):
        t0 = time.perf_counter()
        for _ in range(5):
            numpy.add(a, c, out=a)
        add_t.append((time.perf_counter() - t0) / 5)
    if rank == 0:
        print(RESULT_PREFIX + json.dumps({
            "size": size, "cases": results,
            "latency_us": {k: 1e6 * statistics.median(v) for k, v in lat.items()},
            "reduce_gb_s": a.nbytes / statistics.median(add_t) / 1e9,
        }), flush=True)
    world.Barrier()


# ---------------------------------------------------------------------------------------
# Cost model


def ring_seconds(nbytes: float, n: int, alpha: float, beta: float, gamma: float) -> float:
    """Ring allreduce of nbytes over n workers: 2(n-1) steps of alpha + (nbytes/n)/beta each,
    plus the reduce-scatter half's additions, (n-1) x (nbytes/n) x gamma."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * (alpha + nbytes / n / beta) + (n - 1) * (nbytes / n) * gamma


def halving_doubling_seconds(nbytes: float, n: int, alpha: float, beta: float, gamma: float) -> float:
    """Reduce-scatter by recursive halving + allgather by recursive doubling (Rabenseifner; what
    MPICH picks for long messages): the ring's bandwidth term with 2 log2(n) latencies, not 2(n-1)."""
    if n <= 1:
        return 0.0
    return 2 * math.ceil(math.log2(n)) * alpha + 2 * (n - 1) / n * nbytes / beta + (n - 1) / n * nbytes * gamma


def pack_buckets(grads: Sequence[Tuple[int, float]], bucket: float) -> List[Tuple[int, float]]:
    """plait's packing (never splits a tensor; a new bucket when the next tensor would overflow
    it), in backprop order: (bucket bytes, fraction of backprop when its last tensor is ready)."""
    out: List[List[float]] = []
    for nbytes, ready in grads:
        if not out or (out[-1][0] and out[-1][0] + nbytes > bucket):
            out.append([0, 0.0])
        out[-1][0] += nbytes
        out[-1][1] = max(out[-1][1], ready)
    return [(int(b), r) for b, r in out]


def step_seconds(grads, n, bucket, t_fwd, t_bwd, t_opt, alpha, beta, gamma, overlap) -> float:
    """One training step on n workers (seconds). Without overlap the buckets are reduced one after
    another once backprop has ended (plait today). With overlap a bucket starts as soon as its
    last gradient is ready and the previous bucket is done; only what outlasts backprop shows."""
    buckets = pack_buckets(grads, bucket)
    if not overlap:
        return t_fwd + t_bwd + sum(ring_seconds(b, n, alpha, beta, gamma) for b, _ in buckets) + t_opt
    done = 0.0
    for nbytes, ready in buckets:
        done = max(done, ready * t_bwd) + ring_seconds(nbytes, n, alpha, beta, gamma)
    return t_fwd + max(t_bwd, done) + t_opt


BUCKET_GRID = [2 ** (k / 4) * 1024 for k in range(0, 4 * 17 + 1)]  # 1 KB .. 128 MB


def best_bucket(grads, n, t_fwd, t_bwd, t_opt, alpha, beta, gamma, overlap):
    """(efficiency, smallest and largest bucket of the grid that reach it, buckets of the plan)."""
    t1 = t_fwd + t_bwd + t_opt
    effs = [(t1 / step_seconds(grads, n, b, t_fwd, t_bwd, t_opt, alpha, beta, gamma, overlap), b)
            for b in BUCKET_GRID]
    best = max(e for e, _ in effs)
    good = [b for e, b in effs if e >= best * (1 - 1e-9)]
    return best, min(good), max(good), len(pack_buckets(grads, min(good)))


def uniform_grads(total: int, pieces: int = 512) -> List[Tuple[int, float]]:
    """The textbook case: gradients produced evenly over backprop, in tiny tensors."""
    return [(total // pieces, (i + 1) / pieces) for i in range(pieces)]


# The measured 1-rank figures that bench/README.md's cost-model table uses (a full run of this
# script prints the same table from its own measurements; --from-json reads a --json file).
README_INPUTS: Dict[str, Any] = {
    "measured": "2026-11-26, 2-core AMD EPYC, 1 rank, median of 5 rounds",
    "mlp": {"fwd_ms": 1.47, "bwd_ms": 2.90, "opt_ms": 0.34, "grads": [
        ["softmax.W", 20480, 0.016], ["softmax.b", 40, 0.016], ["relu.W", 1048576, 0.37],
        ["relu.b", 2048, 0.37], ["relu.W", 1605632, 1.0], ["relu.b", 2048, 1.0]]},
    "cnn": {"fwd_ms": 1.16, "bwd_ms": 1.02, "opt_ms": 0.19, "grads": [
        ["softmax.W", 512, 0.012], ["softmax.b", 8, 0.012], ["layernorm.G", 256, 0.095],
        ["layernorm.b", 256, 0.095], ["maxout.W", 147456, 0.892], ["maxout.b", 768, 0.892],
        ["hashembed.E", 1280000, 0.977]]},
}


def cost_model_inputs(train_medians: Dict[str, Any]) -> Dict[str, Any]:
    """The cost model's inputs from a run's 1-rank medians."""
    one = train_medians.get("1 rank", {})
    out: Dict[str, Any] = {"measured": time.strftime("%Y-%m-%d")}
    for kind, _ in MODELS:
        r = one.get(kind)
        if not r:
            continue
        out[kind] = {"fwd_ms": r["fwd_ms"], "bwd_ms": r["bwd_ms"], "opt_ms": r["finish_ms"],
                     "grads": [list(g) for g in (r.get("ready") or [])]}
    return out


def print_cost_model(inputs: Dict[str, Any], alpha_us: float, gbit: float, gamma_gbs: float,
                     workers: Sequence[int] = (8, 64, 512)) -> List[Dict[str, Any]]:
    alpha, beta = alpha_us * 1e-6, gbit * 1e9 / 8
    gamma = 1.0 / (gamma_gbs * 1e9) if gamma_gbs > 0 else 0.0
    print(f"\nCost model: ring allreduce, alpha = {alpha_us:g} us per step, beta = {gbit:g} Gbit/s "
          f"= {beta / 1e9:.3f} GB/s, reduction {gamma_gbs:g} GB/s (0: free); step times from "
          f"the 1-rank runs ({inputs.get('measured', '?')}), same per-worker batch (weak scaling)\n")
    headers = ["model", "workers", "grad MiB", "step ms (1 worker)", "comm ms (1 bucket)",
               "no overlap, 1 bucket", "overlap: best", "bucket (overlap)", "buckets",
               "ideal overlap: best", "bucket (ideal)", "halving-doubling, no overlap"]
    rows, table = [], []
    for kind, label in MODELS:
        m = inputs.get(kind)
        if not m or not m.get("grads"):
            continue
        grads = [(int(b), float(r)) for _name, b, r in m["grads"]]
        total = sum(b for b, _ in grads)
        tf, tb, to = m["fwd_ms"] * 1e-3, m["bwd_ms"] * 1e-3, m["opt_ms"] * 1e-3
        t1 = tf + tb + to
        for n in workers:
            comm1 = ring_seconds(total, n, alpha, beta, gamma)
            e_none = t1 / (t1 + comm1)
            e_ov, lo, hi, nb = best_bucket(grads, n, tf, tb, to, alpha, beta, gamma, True)
            e_id, lo_i, hi_i, _ = best_bucket(uniform_grads(total), n, tf, tb, to, alpha, beta, gamma, True)
            e_hd = t1 / (t1 + halving_doubling_seconds(total, n, alpha, beta, gamma))
            rows.append([label, str(n), f"{total / 2**20:.2f}", f"{t1 * 1e3:.2f}", f"{comm1 * 1e3:.2f}",
                         f"{e_none:.1%}", f"{e_ov:.1%}", _bucket_range(lo, hi, total), str(nb),
                         f"{e_id:.1%}", _bucket_range(lo_i, hi_i, total), f"{e_hd:.1%}"])
            table.append({"model": kind, "workers": n, "eff_no_overlap": e_none, "eff_overlap": e_ov,
                          "bucket_lo": lo, "bucket_hi": hi, "eff_ideal": e_id, "bucket_ideal_lo": lo_i,
                          "bucket_ideal_hi": hi_i, "eff_halving_doubling": e_hd, "comm_ms": comm1 * 1e3,
                          "step_ms": t1 * 1e3})
    print(_render(headers, rows))
    print("\n'overlap' packs the measured per-tensor readiness (backprop order, tensors never split); "
          "'ideal' splits the same bytes into 512 pieces produced evenly over backprop. "
          "Without overlap one bucket is always best (each extra bucket only adds 2(n-1) latencies). "
          "'halving-doubling': the same bytes with 2 log2(n) latencies instead of the ring's 2(n-1), one bucket.")
    return table


def _bucket_range(lo: float, hi: float, total: int) -> str:
    def mb(x: float) -> str:
        return f"{x / 2**20:.3g} MiB" if x >= 2**20 else f"{x / 1024:.3g} KiB"
    if lo >= total:
        return f">= {mb(total)} (1)"
    return mb(lo) if abs(hi - lo) < 1 else f"{mb(lo)}-{mb(hi)}"


# ---------------------------------------------------------------------------------------
# Parent


def _render(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                           for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    sep = "|" + "|".join("-" * (w + 1) + ("-" if i == 0 else ":") for i, w in enumerate(widths)) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in rows])


def mpiexec_path() -> Optional[str]:
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def child_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    for var in THREAD_VARS:
        env[var] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_DIR), env.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


def run_job(n: int, kind: str, params: Dict[str, Any], timeout: float,
            env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    cmd = [mpiexec_path(), "-disable-auto-cleanup", "-n", str(n), sys.executable, str(Path(__file__).resolve()),
           "--child", kind, "--params", json.dumps(params)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(env), cwd=str(REPO_DIR),
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if RESULT_PREFIX in line:
            return json.loads(line[line.index(RESULT_PREFIX) + len(RESULT_PREFIX):])
    tail = "\n".join((proc.stderr + proc.stdout).strip().splitlines()[-15:])
    return {"error": f"`mpiexec -n {n}` exited {proc.returncode} without a result:\n{tail}"}


def check_mpi(timeout: float) -> Optional[str]:
    """Why 2 MPI ranks cannot run here, or None when they can."""
    try:
        import mpi4py  # noqa: F401
    except ImportError as error:
        return f"mpi4py is not installed ({error}); pip install 'plait[distributed]'"
    if mpiexec_path() is None:
        return "no mpiexec next to this python or on PATH; pip install mpich"
    code = "from mpi4py import MPI; c = MPI.COMM_WORLD; n = c.allreduce(1); c.rank or print(n)"
    try:
        proc = subprocess.run([mpiexec_path(), "-n", "2", sys.executable, "-c", code], capture_output=True,
                              text=True, timeout=timeout, env=child_env())
    except subprocess.TimeoutExpired:
        return f"`mpiexec -n 2` did not finish a one-number allreduce in {timeout:.0f} s"
    if proc.returncode != 0 or proc.stdout.split() != ["2"]:
        return f"MPI cannot start two ranks here (rc {proc.returncode}): {(proc.stderr or proc.stdout)[-300:]}"
    return None


def median_dict(results: List[Dict[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, first in results[0].items():
        values = [r[key] for r in results if key in r]
        if isinstance(first, bool) or not isinstance(first, (int, float)):
            out[key] = first
        else:
            out[key] = statistics.median(values)
    return out


def git_commit() -> str:
    """The checkout's commit, '+dirty' when plait/ has uncommitted changes (what was measured)."""
    try:
        head = subprocess.run(["git", "-C", str(REPO_DIR), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "--no-optional-locks", "-C", str(REPO_DIR), "status", "--porcelain",
                                "--untracked-files=no", "--", "plait"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (head or "?") + ("+dirty" if head and dirty else "")


def loadavg() -> str:
    try:
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds, medians shown (default 5, at least 3)")
    ap.add_argument("--quick", action="store_true", help="smoke run: small models, few steps, 3 rounds")
    ap.add_argument("--parts", default="scaling,allreduce,model", help="comma list of scaling, allreduce, model")
    ap.add_argument("--bucket-mb", type=float, default=None,
                    help="PLAIT_DIST_BUCKET_MB for the jobs (default: plait's)")
    ap.add_argument("--overlap", choices=("auto", "on", "off"), default="auto",
                    help="DataParallel(overlap=...) in the plait jobs, where plait has the option (auto: its default)")
    ap.add_argument("--json", default=None, metavar="PATH", help="write every job's result and the medians")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one mpiexec job may run")
    ap.add_argument("--cost-model", action="store_true", help="only print the cost model (no runs)")
    ap.add_argument("--from-json", default=None, metavar="PATH",
                    help="--cost-model inputs from a --json file of a full run (default: the README's)")
    ap.add_argument("--alpha-us", type=float, default=20.0, help="network latency per message step (us)")
    ap.add_argument("--gbit", type=float, default=25.0, help="network bandwidth (Gbit/s)")
    ap.add_argument("--reduce-gbs", type=float, default=None,
                    help="rate of the local float32 sum in GB/s; 0 = free (default: measured, else 0)")
    for key, value in DEFAULTS.items():
        if not isinstance(value, list):
            ap.add_argument("--" + key.replace("_", "-"), type=type(value), default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--params", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        params = json.loads(args.params)
        {"train": child_train, "allreduce": child_allreduce}[args.child](params)
        return 0
    if args.cost_model:
        inputs = README_INPUTS
        if args.from_json:
            inputs = json.loads(Path(args.from_json).read_text())["cost_model_inputs"]
        print_cost_model(inputs, args.alpha_us, args.gbit, args.reduce_gbs or 0.0)
        return 0

    params: Dict[str, Any] = dict(QUICK if args.quick else DEFAULTS)
    for key in DEFAULTS:
        value = getattr(args, key, None)
        if value is not None:
            params[key] = value
    rounds = 3 if args.quick else max(3, args.rounds)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    why = check_mpi(min(60.0, args.timeout))
    if why:
        print(f"bench/distributed.py: {why}", file=sys.stderr)
        return 2
    env = {"PLAIT_DIST_BUCKET_MB": str(args.bucket_mb)} if args.bucket_mb else {}
    load_before = loadavg()
    t_start = time.perf_counter()
    runs: Dict[str, List[Dict[str, Any]]] = {name: [] for name, _, _ in CONFIGS}
    runs["allreduce"] = []
    for r in range(rounds):
        jobs: List[Tuple[str, int, Optional[str]]] = []
        if "scaling" in parts or "model" in parts:
            order = list(CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)])
            if r % 2:
                order.reverse()
            jobs += [c for c in order if "scaling" in parts or c[1] == 1]
        if "allreduce" in parts:
            jobs.insert(r % (len(jobs) + 1), ("allreduce", 2, None))
        for name, n, reduce in jobs:
            t0 = time.perf_counter()
            if name == "allreduce":
                res = run_job(n, "allreduce", params, args.timeout, env)
            else:
                res = run_job(n, "train", {**params, "allreduce": reduce, "overlap": args.overlap,
                                           "models": [k for k, _ in MODELS]},
                              args.timeout, {**env, "PLAIT_DIST_SHM": "0"} if reduce == "plait-mpi" else env)
            took = time.perf_counter() - t0
            if "error" in res:
                print(f"[round {r + 1}/{rounds}] {name}: FAILED ({took:.1f} s)\n{res['error']}", flush=True)
            else:
                print(f"[round {r + 1}/{rounds}] {name}: {took:.1f} s  (load {loadavg()})", flush=True)
            runs[name].append(res)

    print(f"\n## Distributed (MPI): plait.distributed, {rounds} alternating rounds (median)")
    print(f"cpus={os.cpu_count()}  loadavg(1/5/15 min) before={load_before} after={loadavg()}  "
          f"elapsed={time.perf_counter() - t_start:.0f} s  bucket_mb={args.bucket_mb or 'default'}  "
          f"overlap={args.overlap}  1 BLAS thread per rank  plait@{git_commit()}")
    print("params: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    medians: Dict[str, Any] = {}
    failed = False
    for name, _, _ in CONFIGS:
        ok = [x for x in runs[name] if "error" not in x]
        if runs[name] and not ok:
            failed = True
        medians[name] = {kind: median_dict([x[kind] for x in ok if kind in x]) for kind, _ in MODELS
                         if any(kind in x for x in ok)}
    if "scaling" in parts and medians["1 rank"]:
        print_scaling(runs, medians)
    ar_ok = [x for x in runs["allreduce"] if "error" not in x]
    if runs["allreduce"] and not ar_ok:
        failed = True
    reduce_gbs = args.reduce_gbs
    if ar_ok:
        reduce_gbs = print_allreduce(ar_ok) if reduce_gbs is None else reduce_gbs
    inputs = cost_model_inputs(medians) if medians.get("1 rank") else README_INPUTS
    table = None
    if "model" in parts:
        table = print_cost_model(inputs, args.alpha_us, args.gbit, reduce_gbs or 0.0)
    if args.json:
        Path(args.json).write_text(json.dumps({"params": params, "rounds": rounds, "runs": runs, "medians": medians,
                                               "cost_model_inputs": inputs, "cost_model": table,
                                               "loadavg_before": load_before, "loadavg_after": loadavg()},
                                              indent=1))
    return 1 if failed else 0


def print_scaling(runs: Dict[str, List[Dict[str, Any]]], medians: Dict[str, Any]) -> None:
    print("\nWeak scaling: the same per-rank batch; efficiency = ex/s on 2 ranks / (2 x ex/s on 1 rank)\n")
    headers = ["model", "ranks", "batch/rank", "ex/s", "ex/CPU-s", "efficiency (wall)", "efficiency (CPU)",
               "best rounds", "fwd ms", "bwd ms", "finish_update ms", "of which allreduce", "per-round efficiency"]
    rows = []
    for kind, label in MODELS:
        one = medians["1 rank"].get(kind)
        if not one:
            continue
        per_round_one = [x[kind]["ex_per_s"] for x in runs["1 rank"] if kind in x]
        for name, n, mode in CONFIGS:
            r = medians[name].get(kind)
            if not r:
                continue
            eff = r["ex_per_s"] / (n * one["ex_per_s"])
            eff_cpu = r["ex_per_cpu_s"] / one["ex_per_cpu_s"]
            rounds = [x[kind]["ex_per_s"] for x in runs[name] if kind in x]
            best = max(rounds) / (n * max(per_round_one))
            # Per round: this round's job against the same round's 1-rank job.
            per_round = ", ".join(f"{a / (n * b):.0%}" for a, b in zip(rounds, per_round_one)) if n > 1 else ""
            overlap = ""
            if r.get("overlap"):
                sent = r.get("overlapped_buckets")
                overlap = " (overlap)" if sent is None else f" (overlap, {sent:.0f} early)"
            what = {"plait": overlap, "plait-shard": " (sharded update)", "plait-off": " (overlap off)", "plait-mpi": " (MPI only)",
                    "none": " (no allreduce)", "mpi4py": " (raw Allreduce)"}[mode]
            rows.append([label, f"{n}{what}", f"{r['batch_per_rank']:.0f}", f"{r['ex_per_s']:,.0f}",
                         f"{r['ex_per_cpu_s']:,.0f}",
                         f"{eff:.1%}" if n > 1 else "", f"{eff_cpu:.1%}" if n > 1 else "",
                         f"{best:.1%}" if n > 1 else "",
                         f"{r['fwd_ms']:.2f}", f"{r['bwd_ms']:.2f}", f"{r['finish_ms']:.2f}", f"{r['reduce_ms']:.3f}",
                         per_round])
    print(_render(headers, rows))
    print("\nex/s: all ranks' examples / the slowest rank's wall time; ex/CPU-s: / the ranks' summed CPU time "
          "(an MPI wait spins, so it counts). The ms columns are per step, mean over ranks: begin_update, "
          "backprop, the update (the reduction, then the optimizer; the sharded update does both at once and shows "
          "no part apart), and the part of it spent reducing "
          "(DataParallel.allreduce_grads: what is left after backprop when it overlaps, 'overlap, k early': k "
          "buckets of the last update were sent during backprop; the stand-ins' own Allreduce, or nothing). "
          "'best rounds': the fastest round of each job against each other (a busy spell only ever slows a "
          "job down).")


def print_allreduce(ar_runs: List[Dict[str, Any]]) -> float:
    print("\nGradient allreduce on 2 ranks: plait's Communicator.allreduce_grads(model) vs mpi4py's "
          "Allreduce(IN_PLACE) on a float32 buffer of as many values (median over rounds of the "
          "median block)\n")
    headers = ["buffer", "MB", "tensors", "plait ms", "mpi4py ms", "plait GB/s", "mpi4py GB/s", "plait/mpi4py",
               "DataParallel ms", "DataParallel/mpi4py", "DataParallel MPI-only ms", "MPI-only/mpi4py",
               "Iallreduce+Wait ms", "local copies ms", "cold: plait ms", "cold: mpi4py ms", "cold: plait/mpi4py",
               "cold: DataParallel ms", "cold: DataParallel MPI-only ms"]
    rows = []
    cases = [c["case"] for c in ar_runs[0]["cases"]]
    for i, case in enumerate(cases):
        one = [run["cases"][i] for run in ar_runs]
        med = lambda key: statistics.median(c[key] for c in one)
        nbytes = one[0]["bytes"]
        pl, mp = med("plait_s"), med("mpi4py_s")
        # The ratio per round, then its median: the two were timed side by side.
        ratio = statistics.median(c["mpi4py_s"] / c["plait_s"] for c in one)
        row = [case, f"{nbytes / 1e6:.3f}", str(one[0]["tensors"]), f"{pl * 1e3:.3f}", f"{mp * 1e3:.3f}",
               f"{nbytes / pl / 1e9:.2f}", f"{nbytes / mp / 1e9:.2f}", f"{ratio:.1%}",
               f"{med('DataParallel_s') * 1e3:.3f}",
               f"{statistics.median(c['mpi4py_s'] / c['DataParallel_s'] for c in one):.1%}",
               f"{med('DataParallel, MPI only_s') * 1e3:.3f}",
               f"{statistics.median(c['mpi4py_s'] / c['DataParallel, MPI only_s'] for c in one):.1%}",
               f"{med('Iallreduce+Wait_s') * 1e3:.3f}", f"{med('local copies_s') * 1e3:.3f}"]
        if "plait_cold_s" in one[0]:
            cold_ratio = statistics.median(c["mpi4py_cold_s"] / c["plait_cold_s"] for c in one)
            row += [f"{med('plait_cold_s') * 1e3:.3f}", f"{med('mpi4py_cold_s') * 1e3:.3f}", f"{cold_ratio:.1%}",
                    f"{med('DataParallel_cold_s') * 1e3:.3f}", f"{med('DataParallel, MPI only_cold_s') * 1e3:.3f}"]
        else:
            row += ["", "", "", "", ""]
        rows.append(row)
    print(_render(headers, rows))
    lat = {k: statistics.median(run["latency_us"][k] for run in ar_runs) for k in ("mpi4py", "plait")}
    big = [c for c in ar_runs[0]["cases"] if c["bytes"] == max(x["bytes"] for x in ar_runs[0]["cases"])][0]
    big_i = ar_runs[0]["cases"].index(big)
    t_big = statistics.median(run["cases"][big_i]["mpi4py_s"] for run in ar_runs)
    lat_s = lat["mpi4py"] * 1e-6
    beta = big["bytes"] / max(t_big - lat_s, 1e-12)
    reduce_gbs = statistics.median(run["reduce_gb_s"] for run in ar_runs)
    rates = [(statistics.median(c["bytes"] / run["cases"][i]["mpi4py_s"] for run in ar_runs), c["bytes"])
             for i, c in enumerate(ar_runs[0]["cases"])]
    best_rate, best_size = max(rates)
    print(f"\nlatency (8-byte Allreduce, 2 ranks): mpi4py {lat['mpi4py']:.1f} us, plait allreduce_scalar "
          f"{lat['plait']:.1f} us; large-message rate ({big['bytes'] / 2**20:.0f} MB): {beta / 1e9:.2f} GB/s "
          f"(bytes / (time - latency)); best rate {best_rate / 1e9:.2f} GB/s ({best_size / 1e6:.2f} MB); "
          f"local float32 sum (numpy.add, 16 MB): {reduce_gbs:.1f} GB/s")
    print("plait/mpi4py = mpi4py time / plait time (1 = as fast as the raw call). plait also reduces one flag "
          "per tensor. 'DataParallel': the reduction as DataParallel does it in training (the gradients are views "
          "of its buckets and were divided by the number of ranks in backprop: no copy in or out); on one machine its sums go "
          "through shared memory, 'MPI only' through MPI (PLAIT_DIST_SHM=0). 'local copies' is the packing into plait's bucket and the scaled copy back out, timed alone "
          "(what plait adds on top of the reduction). 'cold': one call at a time after 64 MB of other memory "
          "traffic, as after a backward pass (back-to-back calls keep the buffers in cache).")
    return reduce_gbs


if __name__ == "__main__":
    sys.exit(main())
