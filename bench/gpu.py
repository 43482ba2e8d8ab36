"""GPU benchmarks: plait's CupyOps vs thinc 8.3's CupyOps vs torch on CUDA, in one process.

    python bench/gpu.py [--rounds 3] [--parts ops,mlp] [--json PATH] [--quick]

Needs CuPy and a CUDA device; thinc and torch are peers that are skipped when they do not
import. Two parts:

* ``ops``: the hot Ops of bench/ops_micro.py (same inputs, same calls) with the arrays on
  the GPU. Each call is timed with the device synchronised before and after, median of
  five repeats, each as many calls as fill ``--target-ms``. The table gives microseconds
  per call, plait's speed against each peer (peer us / plait us: >1 means plait is faster)
  and whether the outputs agree (sum relative to the absolute sum, tolerance 1e-3).
* ``mlp``: the MNIST MLP of bench/mlp.py (Relu, Relu, Softmax; Adam; cross-entropy) trained
  on the GPU at two sizes, with training and prediction examples per second and the test
  accuracy.

The frameworks alternate within each round (plait, thinc, torch, plait, ...), so a slow
spell of the machine hits each alike; the tables show the median over rounds. Host CPU
time per call is recorded beside wall time: on a GPU it is the launch overhead.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _harness as H  # noqa: E402
import ops_micro as M  # noqa: E402

FRAMEWORKS = ("plait", "thinc", "torch")
OPS_DEFAULTS = dict(M.DEFAULTS, nN=32768, n_docs=256, nB=1024, big_gemm=4096, lstm_B=256,
                    n_adam=10_000_000, target_ms=20.0, repeat=5)
OPS_QUICK = dict(M.QUICK, target_ms=2.0, repeat=2)
MLP_SIZES = ((512, 256), (2048, 1024))  # (width, batch)
MLP_QUICK_SIZES = ((64, 64),)


class Peer:
    """One framework on the GPU: how to make its op calls, how to wait for the device."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name == "torch":
            import torch

            if not torch.cuda.is_available():
                raise ImportError("torch sees no CUDA device")
            # The op calls of ops_micro.torch_ops allocate with torch's defaults.
            torch.set_default_device("cuda")
            self.torch = torch
            self.version = torch.__version__
        else:
            import cupy

            self.cupy = cupy
            if name == "plait":
                import plait.api as api
            else:
                import thinc.api as api
            self.api = api
            self.ops = api.CupyOps()
            mod = sys.modules["plait" if name == "plait" else "thinc"]
            self.version = getattr(mod, "__version__", "?")

    def sync(self) -> None:
        if self.name == "torch":
            self.torch.cuda.synchronize()
        else:
            self.cupy.cuda.Device().synchronize()

    def op_calls(self, inp: M.Inputs, p: Dict[str, Any]) -> Dict[str, Callable[[], Any]]:
        if self.name == "torch":
            return M.torch_ops(inp, p, device="cuda")
        return M.thinc_face_ops(self.api, _on_device(inp, self.ops), p, ops=self.ops)


def _on_device(inp: M.Inputs, ops) -> M.Inputs:
    """A copy of `inp` whose arrays live on the GPU (lstm's size_at_t stays on the host)."""
    out = M.Inputs.__new__(M.Inputs)
    for key, value in vars(inp).items():
        if key == "size_at_t":
            setattr(out, key, value)
        elif isinstance(value, numpy.ndarray):
            setattr(out, key, ops.asarray(value))
        elif isinstance(value, tuple):
            setattr(out, key, tuple(ops.asarray(v) for v in value))
        else:
            setattr(out, key, value)
    return out


def _host(x: Any) -> Optional[numpy.ndarray]:
    while isinstance(x, (tuple, list)):
        x = x[0] if len(x) else None
    if x is None:
        return None
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    if hasattr(x, "get"):
        return x.get()
    return numpy.asarray(x)


def _checksum(out: Any) -> Optional[List[float]]:
    arr = _host(out)
    if arr is None or arr.dtype.kind not in "fiu":
        return None
    arr = arr.astype("float64")
    return [float(arr.sum()), float(numpy.abs(arr).sum())]


def time_gpu(fn: Callable[[], Any], sync: Callable[[], None], target_s: float, repeat: int):
    """Median (wall us, host CPU us) per call, the device drained before and after each run."""
    for _ in range(2):
        fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    once = max(time.perf_counter() - t0, 1e-7)
    number = max(1, int(target_s / once))
    walls, cpus = [], []
    for _ in range(repeat):
        sync()
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(number):
            fn()
        sync()
        walls.append((time.perf_counter() - w0) / number * 1e6)
        cpus.append((time.process_time() - c0) / number * 1e6)
    return statistics.median(walls), statistics.median(cpus)


def run_ops(peer: Peer, p: Dict[str, Any]) -> Dict[str, Any]:
    inp = M.Inputs(p)
    calls = peer.op_calls(inp, p)
    results: Dict[str, Any] = {}
    for name in p["only"] or M.OPS:
        fn = calls.get(name)
        if fn is None:
            continue
        try:
            check = None if name in M.NO_CHECK else _checksum(fn())
            peer.sync()
            us, cpu_us = time_gpu(fn, peer.sync, p["target_ms"] / 1000.0, p["repeat"])
        except Exception as err:  # one failing op must not hide the others' figures
            results[name] = {"error": f"{type(err).__name__}: {err}"[:300]}
            continue
        results[name] = {"us": us, "cpu_us": cpu_us}
        if check is not None:
            results[name]["sum"], results[name]["abs_sum"] = check
    return {"ops": results}


def run_mlp(peer: Peer, p: Dict[str, Any], data) -> Dict[str, Any]:
    Xtr, ytr, Xte, yte = data
    width, batch = p["width"], p["batch"]
    rng = numpy.random.default_rng(p["seed"])
    order = [idx for _ in range(p["epochs"]) for idx in H.batches(len(Xtr), batch, rng)]
    if peer.name == "torch":
        return _mlp_torch(peer, p, data, order)
    api, ops = peer.api, peer.ops
    api.set_current_ops(ops)
    try:
        model = api.chain(*[api.Relu(nO=width, dropout=p["dropout"]) for _ in range(p["depth"])],
                          api.Softmax())
        gX, gY = ops.asarray(Xtr), ops.asarray(H.one_hot(ytr, 10))
        gXte = ops.asarray(Xte)
        model.initialize(X=gX[:8], Y=gY[:8])
        optimizer = api.Adam(p["learn_rate"], use_averages=False)
        loss = api.CategoricalCrossentropy()
        gorder = [ops.asarray(idx) for idx in order]
        peer.sync()
        t0, c0 = time.perf_counter(), time.process_time()
        for idx in gorder:
            Yh, backprop = model.begin_update(gX[idx])
            backprop(loss.get_grad(Yh, gY[idx]))
            model.finish_update(optimizer)
        peer.sync()
        train = (time.perf_counter() - t0, time.process_time() - c0)
        t0 = time.perf_counter()
        guesses = [model.predict(gXte[i:i + 1024]).argmax(axis=1) for i in range(0, len(Xte), 1024)]
        peer.sync()
        pred_s = time.perf_counter() - t0
        guess = numpy.concatenate([_host(g) for g in guesses])
    finally:
        api.set_current_ops(api.NumpyOps())
    return _mlp_result(sum(len(i) for i in order), train, len(Xte), pred_s,
                       float((guess == yte).mean()))


def _mlp_torch(peer: Peer, p, data, order) -> Dict[str, Any]:
    torch = peer.torch
    from torch import nn

    Xtr, ytr, Xte, yte = data
    torch.manual_seed(p["seed"])
    mods: List[Any] = []
    nI = Xtr.shape[1]
    for _ in range(p["depth"]):
        mods += [nn.Linear(nI, p["width"]), nn.ReLU(), nn.Dropout(p["dropout"])]
        nI = p["width"]
    model = nn.Sequential(*mods, nn.Linear(nI, 10)).cuda()
    # Thinc's Adam: decoupled L2 of 1e-6, gradients clipped to norm 1.0.
    optimizer = torch.optim.AdamW(model.parameters(), lr=p["learn_rate"], weight_decay=1e-6)
    gX, gy = torch.from_numpy(Xtr).cuda(), torch.from_numpy(ytr).cuda()
    gXte = torch.from_numpy(Xte).cuda()
    gorder = [torch.from_numpy(idx).cuda() for idx in order]
    model.train()
    peer.sync()
    t0, c0 = time.perf_counter(), time.process_time()
    for idx in gorder:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(gX[idx]), gy[idx])
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    peer.sync()
    train = (time.perf_counter() - t0, time.process_time() - c0)
    model.eval()
    t0 = time.perf_counter()
    with torch.no_grad():
        guesses = [torch.softmax(model(gXte[i:i + 1024]), dim=1).argmax(dim=1)
                   for i in range(0, len(Xte), 1024)]
    peer.sync()
    pred_s = time.perf_counter() - t0
    guess = numpy.concatenate([g.cpu().numpy() for g in guesses])
    return _mlp_result(sum(len(i) for i in order), train, len(Xte), pred_s,
                       float((guess == yte).mean()))


def _mlp_result(n_seen, train, n_pred, pred_s, accuracy) -> Dict[str, Any]:
    return {"train_per_s": n_seen / train[0], "train_cpu_s": train[1],
            "predict_per_s": n_pred / pred_s, "accuracy": accuracy}


def _median(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Key-wise median of numeric leaves over rounds; an error from any round is kept."""
    out: Dict[str, Any] = {}
    for key in runs[0]:
        vals = [r.get(key) for r in runs]
        if all(isinstance(v, dict) for v in vals):
            out[key] = _median(vals)
        elif all(isinstance(v, (int, float)) for v in vals):
            out[key] = statistics.median(vals)
        else:
            out[key] = next((v for v in vals if isinstance(v, str)), vals[0])
    for r in runs:  # ops that failed in some round only
        for key, v in r.items():
            out.setdefault(key, v)
    return out


def ops_table(med: Dict[str, Dict[str, Any]], names: List[str], only: List[str]) -> str:
    peers = [n for n in names if n != "plait"]
    headers = (["op"] + [f"{n} us" for n in names] + [f"plait/{n}" for n in peers]
               + ["plait host CPU us", "agree"])
    rows = []
    for op in only or M.OPS:
        cells = [op]
        res = {n: med[n].get("ops", {}).get(op, {}) for n in names}
        if not any(res.values()):
            continue
        for n in names:
            cells.append("error" if "error" in res[n] else H.format_value(res[n].get("us"), "{:,.1f}"))
        for n in peers:
            cells.append(H.format_value(H.ratio(res["plait"].get("us"), res[n].get("us"), False),
                                        "{:.2f}x"))
        cells.append(H.format_value(res["plait"].get("cpu_us"), "{:,.1f}"))
        cells.append(M.agreement(med, op))
        rows.append(cells)
    return H.render_table(headers, rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parts", default="ops,mlp")
    ap.add_argument("--only", default="", help="comma list of ops (default: all)")
    ap.add_argument("--json", default="", help="also write the raw and median results here")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one round (a smoke test)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        import cupy

        n_dev = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:
        print(f"bench/gpu.py: needs CuPy and a CUDA device ({type(err).__name__}: {err}); "
              "nothing measured.", file=sys.stderr)
        return 2
    if not n_dev:
        print("bench/gpu.py: CuPy sees no CUDA device; nothing measured.", file=sys.stderr)
        return 2
    peers: List[Peer] = []
    for name in FRAMEWORKS:
        try:
            peers.append(Peer(name))
        except Exception as err:
            if name == "plait":
                raise
            print(f"peer {name} skipped: {type(err).__name__}: {err}", file=sys.stderr)
    names = [p.name for p in peers]
    rounds = 1 if args.quick else args.rounds
    parts = [s.strip() for s in args.parts.split(",") if s.strip()]
    only = [o.strip() for o in args.only.split(",") if o.strip()]
    props = cupy.cuda.runtime.getDeviceProperties(0)
    header = (f"device: {props['name'].decode()}, CuPy {cupy.__version__}, numpy "
              f"{numpy.__version__}, Python {platform.python_version()}; "
              + ", ".join(f"{p.name} {p.version}" for p in peers) + f"; {rounds} rounds")
    print(header, flush=True)
    raw: Dict[str, Any] = {"header": header}

    if "ops" in parts:
        p = dict(OPS_QUICK if args.quick else OPS_DEFAULTS, seed=args.seed, only=only)
        runs: Dict[str, List[Dict[str, Any]]] = {n: [] for n in names}
        for r in range(rounds):
            for peer in peers:
                t0 = time.perf_counter()
                try:
                    runs[peer.name].append(run_ops(peer, p))
                except Exception:
                    traceback.print_exc()
                print(f"ops round {r + 1} {peer.name}: {time.perf_counter() - t0:.1f} s", flush=True)
        med = {n: _median(v) for n, v in runs.items() if v}
        raw["ops"] = {"params": {k: v for k, v in p.items()}, "runs": runs, "median": med}
        print("\n## Hot Ops on the GPU (bench/gpu.py)\n" + header)
        print(ops_table(med, [n for n in names if n in med], only))
        for n in med:
            errs = {op: r["error"] for op, r in med[n].get("ops", {}).items() if "error" in r}
            for op, e in errs.items():
                print(f"  {n} {op}: {e}")

    if "mlp" in parts:
        try:
            data = H.load_mnist(60000, 10000)
            source = "MNIST"
        except FileNotFoundError:
            rng = numpy.random.default_rng(args.seed)
            data = (rng.random((60000, 784), dtype="float32"), rng.integers(0, 10, 60000),
                    rng.random((10000, 784), dtype="float32"), rng.integers(0, 10, 10000))
            source = "random data (set PLAIT_BENCH_DATA for MNIST; accuracy is meaningless)"
        raw["mlp"] = {}
        lines = []
        for width, batch in (MLP_QUICK_SIZES if args.quick else MLP_SIZES):
            p = dict(width=width, batch=batch, depth=2, dropout=0.2, epochs=1 if args.quick else 2,
                     learn_rate=0.001, seed=args.seed)
            runs = {n: [] for n in names}
            for r in range(rounds):
                for peer in peers:
                    try:
                        runs[peer.name].append(run_mlp(peer, p, data))
                    except Exception:
                        traceback.print_exc()
            med = {n: _median(v) for n, v in runs.items() if v}
            raw["mlp"][f"{width}x{batch}"] = {"params": p, "runs": runs, "median": med}
            for n in names:
                if n not in med:
                    continue
                m = med[n]
                vs = "" if n == "plait" or "plait" not in med else (
                    f" | {med['plait']['train_per_s'] / m['train_per_s']:.2f}x")
                lines.append(f"| {width} | {batch} | {n} | {m['train_per_s']:,.0f} | "
                             f"{m['predict_per_s']:,.0f} | {m['accuracy']:.4f}{vs or ' | -'} |")
        print(f"\n## MNIST MLP on the GPU (bench/gpu.py), {source}\n" + header)
        print("| width | batch | framework | train ex/s | predict ex/s | accuracy | plait/peer train |")
        print("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
        print("\n".join(lines))

    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
