"""Micro-benchmarks of the hot Ops: plait NumpyOps vs thinc 9.1 / 8.3 NumpyOps vs torch.

    .venv/bin/python bench/ops_micro.py [--threads 1] [--rounds 3] [--peers all] [--quick]
                                        [--only seq2col,maxout,...]

Every child builds the same float32 inputs (numpy's PCG64 from one seed), calls each op
until `--target-ms` has passed, five times, and reports the median microseconds per call
(wall and CPU). plait and thinc run the identical `ops.<method>(...)` call; torch runs
its nearest equivalent (named in the table's notes). The table gives microseconds per
call, plait's speed relative to each peer (peer time / plait time: >1 means plait is
faster) and whether the peers' outputs agree with plait's (sum of the output relative
to its absolute sum, tolerance 1e-3).
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy

import _harness as H

DEFAULTS = dict(nN=4096, nI=128, n_docs=64, nP=3, n_rows=20000, n_keys=16384, n_adam=1_000_000,
                nB=128, gemm_nI=784, gemm_nO=256, big_gemm=1024, lstm_T=20, lstm_B=32,
                lstm_nI=64, lstm_nO=64, act_nO=256, target_ms=40.0, repeat=5)
QUICK = dict(nN=256, nI=16, n_docs=8, nP=3, n_rows=500, n_keys=512, n_adam=4096,
             nB=16, gemm_nI=64, gemm_nO=32, big_gemm=128, lstm_T=5, lstm_B=4,
             lstm_nI=8, lstm_nO=8, act_nO=32, target_ms=2.0, repeat=2)

AGREE_TOL = 1e-3

# What each op is called with, for the table's notes: (shapes, torch equivalent).
DESCRIBE = {
    "seq2col": ("X (nN, nI), nW=1, n_docs lengths", "index gather of [prev, self, next] rows"),
    "backprop_seq2col": ("dY (nN, 3*nI)", "index_add_ of the three column blocks"),
    "maxout": ("X (nN, nI, nP)", "X.max(dim=2)"),
    "backprop_maxout": ("dY (nN, nI), which", "zeros().scatter_(2, which, dY)"),
    "maxout_layer_backprop": ("Maxout's dX, dW, db: dY (nN, nI), X (nN, nI), W (nI, nP, nI); "
                              "thinc: backprop_maxout + 2 gemms + sum", "n/a (autograd)"),
    "reduce_sum": ("X (nN, nI), n_docs lengths", "torch.segment_reduce('sum')"),
    "backprop_reduce_sum": ("dY (n_docs, nI)", "repeat_interleave"),
    "reduce_mean": ("X (nN, nI)", "torch.segment_reduce('mean')"),
    "backprop_reduce_mean": ("dY (n_docs, nI)", "repeat_interleave(dY / lengths)"),
    "reduce_max": ("X (nN, nI)", "scatter into padded -inf, .max(dim=1)"),
    "backprop_reduce_max": ("dY (n_docs, nI), which", "index_put_ at the argmax rows"),
    "hash": ("uint64 ids (n_keys,), seed 1", "n/a (no MurmurHash in torch)"),
    "gather_add": ("table (n_rows, nI), idx (n_keys, 4)", "F.embedding_bag(mode='sum')"),
    "scatter_add": ("table (n_rows, nI) += values (n_keys, nI)", "index_add_"),
    "get_dropout_mask": ("(nN, act_nO), drop 0.2", "empty().bernoulli_(0.8).div_(0.8)"),
    "adam": ("n_adam float32 weights", "torch.optim.Adam.step() on one tensor"),
    "gemm": ("X (nB, gemm_nI) @ W (gemm_nO, gemm_nI).T", "torch.mm(X, W.t())"),
    "affine": ("X (nB, gemm_nI), W, b", "F.linear"),
    "gemm_big": ("(big, big) @ (big, big)", "torch.mm"),
    "lstm_forward_training": ("T steps x B seqs, nI -> nO, 1 layer", "nn.LSTM forward (grad on)"),
    "backprop_lstm": ("dY (T*B, nO)", "autograd.grad through nn.LSTM"),
    "lstm_forward_inference": ("as above", "nn.LSTM forward under no_grad"),
    "relu": ("X (nN, act_nO)", "torch.relu"),
    "backprop_relu": ("dY, Y", "aten.threshold_backward"),
    "gelu": ("X (nN, act_nO)", "F.gelu (erf)"),
    "backprop_gelu": ("dY, X", "aten.gelu_backward"),
    "swish": ("X (nN, act_nO)", "F.silu"),
    "backprop_swish": ("dY, X, Y", "aten.silu_backward"),
    "mish": ("X (nN, act_nO)", "F.mish"),
    "backprop_mish": ("dY, X", "aten.mish_backward"),
    "sigmoid": ("X (nN, act_nO)", "torch.sigmoid"),
    "softmax": ("X (nN, act_nO)", "torch.softmax(dim=-1)"),
    "backprop_softmax": ("Y, dY", "aten._softmax_backward_data"),
}
OPS = list(DESCRIBE)
# Outputs that are random, or whose torch version uses other weights: no agreement check.
NO_CHECK = {"get_dropout_mask"}
NO_TORCH_CHECK = {"lstm_forward_training", "backprop_lstm", "lstm_forward_inference", "adam"}


class Inputs:
    """The same arrays in every child: drawn from one PCG64 stream in a fixed order."""

    def __init__(self, p: Dict[str, Any]) -> None:
        rng = numpy.random.default_rng(p["seed"])
        f = lambda *shape: rng.standard_normal(shape, dtype="float32")  # noqa: E731
        nN, nI, nP = p["nN"], p["nI"], p["nP"]
        cuts = numpy.sort(rng.choice(numpy.arange(1, nN), p["n_docs"] - 1, replace=False))
        self.lengths = numpy.diff(numpy.concatenate([[0], cuts, [nN]])).astype("int32")
        self.X = f(nN, nI)
        self.dY_seq2col = f(nN, 3 * nI)
        self.X_maxout = f(nN, nI, nP)
        self.W_maxout = f(nI, nP, nI)
        self.dY_rows = f(nN, nI)
        self.dY_docs = f(p["n_docs"], nI)
        self.ids = rng.integers(0, 2**63, p["n_keys"], dtype="uint64")
        self.table = f(p["n_rows"], nI)
        self.idx2 = rng.integers(0, p["n_rows"], (p["n_keys"], 4)).astype("int32")
        self.idx1 = rng.integers(0, p["n_rows"], p["n_keys"]).astype("int32")
        self.values = f(p["n_keys"], nI)
        n = p["n_adam"]
        self.adam = (f(n), f(n), numpy.zeros(n, "float32"), numpy.zeros(n, "float32"))
        self.gX = f(p["nB"], p["gemm_nI"])
        self.gW = f(p["gemm_nO"], p["gemm_nI"])
        self.gb = f(p["gemm_nO"])
        self.A, self.B = f(p["big_gemm"], p["big_gemm"]), f(p["big_gemm"], p["big_gemm"])
        T, Bq, lI, lO = p["lstm_T"], p["lstm_B"], p["lstm_nI"], p["lstm_nO"]
        self.lstm_X = f(T * Bq, lI)
        self.lstm_params = f(4 * lO * lI + 4 * lO + 4 * lO * lO + 4 * lO) * 0.1
        self.lstm_dY = f(T * Bq, lO)
        self.size_at_t = numpy.full((T,), Bq, dtype="int32")
        self.act = f(nN, p["act_nO"])
        self.dY_act = f(nN, p["act_nO"])


def maxout_layer_backprop(ops, inp: Inputs, which, nP: int):
    """The gradients a Maxout layer's backprop computes (dX, dW, db), by each library's best path."""
    if hasattr(ops, "backprop_maxout_affine"):  # plait: one fused op that skips the zero pieces
        return ops.backprop_maxout_affine(inp.dY_rows, which, inp.X, inp.W_maxout)
    nO, _, nI = inp.W_maxout.shape
    dZ = ops.backprop_maxout(inp.dY_rows, which, nP).reshape((-1, nO * nP))
    return (ops.gemm(dZ, inp.W_maxout.reshape((nO * nP, nI))), ops.gemm(dZ, inp.X, trans1=True),
            dZ.sum(axis=0))


def thinc_face_ops(api, inp: Inputs, p: Dict[str, Any], ops=None) -> Dict[str, Callable[[], Any]]:
    """op name -> a no-argument call of that op on `inp`, for plait and thinc alike.

    `ops` defaults to the library's NumpyOps; bench/gpu.py passes a CupyOps and an `inp`
    whose arrays are already on the device.
    """
    ops = api.NumpyOps() if ops is None else ops
    L = inp.lengths
    nP = p["nP"]
    _, which_maxout = ops.maxout(inp.X_maxout)
    _, which_max = ops.reduce_max(inp.X, L)
    relu_Y = ops.relu(inp.act)
    swish_Y = ops.swish(inp.act)
    soft_Y = ops.softmax(inp.act)
    lstm_H0 = ops.alloc((1, 1, p["lstm_nO"]), dtype="float32")
    lstm_C0 = ops.alloc((1, 1, p["lstm_nO"]), dtype="float32")
    lstm_args = (inp.lstm_params, lstm_H0, lstm_C0, inp.lstm_X, inp.size_at_t)
    _, lstm_state = ops.lstm_forward_training(*lstm_args)
    table = inp.table.copy()
    w, g, m1, m2 = (a.copy() for a in inp.adam)
    return {
        "seq2col": lambda: ops.seq2col(inp.X, 1, lengths=L),
        "backprop_seq2col": lambda: ops.backprop_seq2col(inp.dY_seq2col, 1, lengths=L),
        "maxout": lambda: ops.maxout(inp.X_maxout),
        "backprop_maxout": lambda: ops.backprop_maxout(inp.dY_rows, which_maxout, nP),
        "maxout_layer_backprop": lambda: maxout_layer_backprop(ops, inp, which_maxout, nP),
        "reduce_sum": lambda: ops.reduce_sum(inp.X, L),
        "backprop_reduce_sum": lambda: ops.backprop_reduce_sum(inp.dY_docs, L),
        "reduce_mean": lambda: ops.reduce_mean(inp.X, L),
        "backprop_reduce_mean": lambda: ops.backprop_reduce_mean(inp.dY_docs, L),
        "reduce_max": lambda: ops.reduce_max(inp.X, L),
        "backprop_reduce_max": lambda: ops.backprop_reduce_max(inp.dY_docs, which_max, L),
        "hash": lambda: ops.hash(inp.ids, 1),
        "gather_add": lambda: ops.gather_add(inp.table, inp.idx2),
        "scatter_add": lambda: ops.scatter_add(table, inp.idx1, inp.values),
        "get_dropout_mask": lambda: ops.get_dropout_mask((p["nN"], p["act_nO"]), 0.2),
        "adam": lambda: ops.adam(w, g, m1, m2, 0.9, 0.999, 1e-8, 0.001),
        "gemm": lambda: ops.gemm(inp.gX, inp.gW, trans2=True),
        "affine": lambda: ops.affine(inp.gX, inp.gW, inp.gb),
        "gemm_big": lambda: ops.gemm(inp.A, inp.B),
        "lstm_forward_training": lambda: ops.lstm_forward_training(*lstm_args),
        "backprop_lstm": lambda: ops.backprop_lstm(inp.lstm_dY, inp.size_at_t,
                                                   inp.lstm_params, lstm_state),
        "lstm_forward_inference": lambda: ops.lstm_forward_inference(*lstm_args),
        "relu": lambda: ops.relu(inp.act),
        "backprop_relu": lambda: ops.backprop_relu(inp.dY_act, relu_Y),
        "gelu": lambda: ops.gelu(inp.act),
        "backprop_gelu": lambda: ops.backprop_gelu(inp.dY_act, inp.act),
        "swish": lambda: ops.swish(inp.act),
        "backprop_swish": lambda: ops.backprop_swish(inp.dY_act, inp.act, swish_Y),
        "mish": lambda: ops.mish(inp.act),
        "backprop_mish": lambda: ops.backprop_mish(inp.dY_act, inp.act),
        "sigmoid": lambda: ops.sigmoid(inp.act),
        "softmax": lambda: ops.softmax(inp.act),
        "backprop_softmax": lambda: ops.backprop_softmax(soft_Y, inp.dY_act),
    }


def torch_ops(inp: Inputs, p: Dict[str, Any], device: str = "cpu") -> Dict[str, Callable[[], Any]]:
    """The nearest torch equivalent of each op (None where torch has none).

    With `device="cuda"` the caller also sets torch's default device, so that the tensors
    the calls allocate live there too.
    """
    import torch
    from torch import nn
    import torch.nn.functional as F

    def t(a):
        return torch.from_numpy(a).to(device)
    aten = torch.ops.aten
    L = t(inp.lengths.astype("int64"))
    X = t(inp.X)
    nN, nI = inp.X.shape
    n_docs = len(inp.lengths)
    starts = torch.cumsum(L, 0) - L

    def window_index():
        pos = torch.arange(nN) - torch.repeat_interleave(starts, L)
        doc_len = torch.repeat_interleave(L, L)
        ar = torch.arange(nN)
        pad_row = torch.full_like(pos, nN)
        prev = torch.where(pos > 0, ar - 1, pad_row)
        nxt = torch.where(pos < doc_len - 1, ar + 1, pad_row)
        return prev, nxt

    def seq2col():
        prev, nxt = window_index()
        Xz = torch.cat([X, X.new_zeros((1, nI))])
        return torch.cat([Xz[prev], X, Xz[nxt]], dim=1)

    dY_s2c = t(inp.dY_seq2col)

    def backprop_seq2col():
        prev, nxt = window_index()
        dX = dY_s2c[:, nI:2 * nI].clone()
        dXz = torch.zeros((nN + 1, nI))
        dXz.index_add_(0, prev, dY_s2c[:, :nI])
        dXz.index_add_(0, nxt, dY_s2c[:, 2 * nI:])
        return dX + dXz[:nN]

    Xm = t(inp.X_maxout)
    dY_rows = t(inp.dY_rows)
    which_m = Xm.max(dim=2).indices

    def backprop_maxout():
        return torch.zeros(Xm.shape).scatter_(2, which_m.unsqueeze(2), dY_rows.unsqueeze(2))

    dY_docs = t(inp.dY_docs)
    Lmax = int(L.max())
    doc_of = torch.repeat_interleave(torch.arange(n_docs), L)
    pos_of = torch.arange(nN) - torch.repeat_interleave(starts, L)

    def reduce_max():
        padded = X.new_full((n_docs, Lmax, nI), float("-inf"))
        padded[doc_of, pos_of] = X
        return padded.max(dim=1)

    which_max = reduce_max().indices

    def backprop_reduce_max():
        dX = torch.zeros((nN, nI))
        rows = starts.unsqueeze(1) + which_max
        cols = torch.arange(nI).expand(n_docs, nI)
        return dX.index_put_((rows, cols), dY_docs)

    table = t(inp.table.copy())
    idx2 = t(inp.idx2.astype("int64"))
    idx1 = t(inp.idx1.astype("int64"))
    values = t(inp.values)
    w = nn.Parameter(t(inp.adam[0].copy()))
    w.grad = t(inp.adam[1].copy())
    adam = torch.optim.Adam([w], lr=0.001, betas=(0.9, 0.999), eps=1e-8)
    gX, gW, gb = t(inp.gX), t(inp.gW), t(inp.gb)
    A, B = t(inp.A), t(inp.B)

    lstm = nn.LSTM(p["lstm_nI"], p["lstm_nO"], num_layers=1)
    lX = t(inp.lstm_X).reshape(p["lstm_T"], p["lstm_B"], p["lstm_nI"]).requires_grad_()
    l_dY = t(inp.lstm_dY).reshape(p["lstm_T"], p["lstm_B"], p["lstm_nO"])
    lY, _ = lstm(lX)
    l_inputs = [lX] + list(lstm.parameters())

    def lstm_inference():
        with torch.no_grad():
            return lstm(lX)[0]

    act, dY_act = t(inp.act), t(inp.dY_act)
    relu_Y = torch.relu(act)
    soft_Y = torch.softmax(act, dim=-1)
    dropout_shape = (p["nN"], p["act_nO"])

    return {
        "seq2col": seq2col,
        "backprop_seq2col": backprop_seq2col,
        "maxout": lambda: Xm.max(dim=2),
        "backprop_maxout": backprop_maxout,
        "maxout_layer_backprop": None,
        "reduce_sum": lambda: torch.segment_reduce(X, "sum", lengths=L),
        "backprop_reduce_sum": lambda: torch.repeat_interleave(dY_docs, L, dim=0),
        "reduce_mean": lambda: torch.segment_reduce(X, "mean", lengths=L),
        "backprop_reduce_mean": lambda: torch.repeat_interleave(
            dY_docs / L.unsqueeze(1).to(torch.float32), L, dim=0),
        "reduce_max": reduce_max,
        "backprop_reduce_max": backprop_reduce_max,
        "hash": None,
        "gather_add": lambda: F.embedding_bag(idx2, table, mode="sum"),
        "scatter_add": lambda: table.index_add_(0, idx1, values),
        "get_dropout_mask": lambda: torch.empty(dropout_shape).bernoulli_(0.8).div_(0.8),
        "adam": adam.step,
        "gemm": lambda: torch.mm(gX, gW.t()),
        "affine": lambda: F.linear(gX, gW, gb),
        "gemm_big": lambda: torch.mm(A, B),
        "lstm_forward_training": lambda: lstm(lX)[0],
        "backprop_lstm": lambda: torch.autograd.grad(lY, l_inputs, l_dY, retain_graph=True),
        "lstm_forward_inference": lstm_inference,
        "relu": lambda: torch.relu(act),
        "backprop_relu": lambda: aten.threshold_backward(dY_act, relu_Y, 0.0),
        "gelu": lambda: F.gelu(act),
        "backprop_gelu": lambda: aten.gelu_backward(dY_act, act),
        "swish": lambda: F.silu(act),
        "backprop_swish": lambda: aten.silu_backward(dY_act, act),
        "mish": lambda: F.mish(act),
        "backprop_mish": lambda: aten.mish_backward(dY_act, act),
        "sigmoid": lambda: torch.sigmoid(act),
        "softmax": lambda: torch.softmax(act, dim=-1),
        "backprop_softmax": lambda: aten._softmax_backward_data(dY_act, soft_Y, -1, torch.float32),
    }


def _first_array(out: Any) -> Optional[numpy.ndarray]:
    """The main output of an op as numpy (the first of a tuple; torch tensors converted)."""
    # torch's (values, indices) results are tuples too.
    while isinstance(out, (tuple, list)):
        out = out[0] if len(out) else None
    if out is None:
        return None
    if hasattr(out, "detach"):
        out = out.detach().numpy()
    return numpy.asarray(out)


def checksum(out: Any) -> Optional[Tuple[float, float]]:
    """(sum, sum of |x|) of the op's main output, in float64."""
    arr = _first_array(out)
    if arr is None or arr.dtype.kind not in "fiu":
        return None
    arr = arr.astype("float64")
    return float(arr.sum()), float(numpy.abs(arr).sum())


def time_op(fn: Callable[[], Any], target_s: float, repeat: int) -> Tuple[float, float]:
    """Median (wall us, CPU us) per call over `repeat` runs of about `target_s` each."""
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    number = max(1, int(target_s / once))
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(number):
            fn()
        walls.append((time.perf_counter() - w0) / number * 1e6)
        cpus.append((time.process_time() - c0) / number * 1e6)
    return sorted(walls)[len(walls) // 2], sorted(cpus)[len(cpus) // 2]


def work(framework: str, p: Dict[str, Any]) -> Dict[str, Any]:
    inp = Inputs(p)
    wanted = p["only"] or OPS
    if framework == "torch":
        calls = torch_ops(inp, p)
    else:
        calls = thinc_face_ops(H.import_api(framework), inp, p)
    results: Dict[str, Any] = {}
    for name in wanted:
        fn = calls.get(name)
        if fn is None:
            continue
        # The checksum comes from a first call, before timing mutates any state.
        check = None if name in NO_CHECK else checksum(fn())
        wall_us, cpu_us = time_op(fn, p["target_ms"] / 1000.0, p["repeat"])
        results[name] = {"us": wall_us, "cpu_us": cpu_us}
        if check is not None:
            results[name]["sum"], results[name]["abs_sum"] = check
    return {"ops": results}


def agreement(medians: Dict[str, Dict[str, Any]], op: str) -> str:
    """'ok', or the peers whose output sum differs from plait's beyond AGREE_TOL."""
    base = medians.get("plait", {}).get("ops", {}).get(op, {})
    if op in NO_CHECK or "sum" not in base:
        return "-"
    bad = []
    checked = 0
    for name, res in medians.items():
        if name == "plait" or (name == "torch" and op in NO_TORCH_CHECK):
            continue
        other = res.get("ops", {}).get(op, {})
        if "sum" not in other:
            continue
        checked += 1
        scale = max(base["abs_sum"], 1e-12)
        rel = abs(other["sum"] - base["sum"]) / scale
        if rel > AGREE_TOL:
            bad.append(f"{name} {rel:.1e}")
    if not checked:
        return "-"
    return "ok" if not bad else "DIFF: " + ", ".join(bad)


def render(medians: Dict[str, Dict[str, Any]], frameworks: List[str], p: Dict[str, Any],
           metric: str = "us") -> str:
    """The per-op table; `metric` 'us' (wall) or 'cpu_us' (process CPU time)."""
    present = [f for f in frameworks if f in medians]
    peers = [f for f in present if f != "plait"]
    unit = "us" if metric == "us" else "CPU us"
    headers = ["op"] + [f"{f} {unit}" for f in present] + [f"plait/{f}" for f in peers] + ["agree"]
    rows = []
    for op in (p["only"] or OPS):
        cells = [op]
        times = {f: medians[f].get("ops", {}).get(op, {}).get(metric) for f in present}
        if all(v is None for v in times.values()):
            continue
        cells += [H.format_value(times[f], "{:,.1f}") for f in present]
        cells += [H.format_value(H.ratio(times.get("plait"), times[f], False), "{:.2f}x")
                  for f in peers]
        cells.append(agreement(medians, op))
        rows.append(cells)
    return H.render_table(headers, rows)


def main(argv=None) -> None:
    parser = H.make_parser(__doc__.splitlines()[0])
    for key, value in DEFAULTS.items():
        parser.add_argument("--" + key.replace("_", "-"), type=type(value), default=None,
                            help=f"default {value} (--quick: {QUICK[key]})")
    parser.add_argument("--only", default="", help="comma list of ops to run (default: all)")
    parser.add_argument("--cpu-table", action="store_true",
                        help="also print the table in CPU microseconds per call (steadier "
                             "than wall time when the machine is busy)")
    args = parser.parse_args(argv)
    if args.child:
        return H.child_main(args.child, args.params, work)
    base = QUICK if args.quick else DEFAULTS
    params: Dict[str, Any] = {k: (getattr(args, k) if getattr(args, k) is not None else v)
                              for k, v in base.items()}
    params["seed"] = args.seed
    only = [o.strip() for o in args.only.split(",") if o.strip()]
    unknown = [o for o in only if o not in DESCRIBE]
    if unknown:
        raise SystemExit(f"ops_micro: unknown op(s) {unknown} in --only; known: {', '.join(OPS)}")
    params["only"] = only

    frameworks = H.resolve_frameworks(args.peers)
    names = [f.name for f in frameworks]
    args.rounds = 1 if args.quick else args.rounds
    runs = H.run_suite(__file__, frameworks, params, args.rounds, args.threads, args.timeout)
    medians = H.median_results(runs)
    print()
    print("## Hot Ops micro-benchmarks (bench/ops_micro.py)")
    print(H.header_line(args))
    print("params: " + ", ".join(f"{k}={v}" for k, v in params.items() if k != "only"))
    print()
    print(render(medians, names, params))
    if args.cpu_table:
        print()
        print("The same in process CPU time per call:")
        print(render(medians, names, params, metric="cpu_us"))
    print()
    print("plait/<peer> = peer us / plait us (>1: plait is faster). "
          "agree: output sum vs plait's, relative to its absolute sum.")
    if "gemm_big" in medians.get("plait", {}).get("ops", {}):
        n = params["big_gemm"]
        gf = {f: 2.0 * n ** 3 / (medians[f]["ops"]["gemm_big"]["us"] * 1e3)
              for f in names if "gemm_big" in medians.get(f, {}).get("ops", {})}
        print(f"gemm_big ({n}^3) GFLOP/s: " + ", ".join(f"{f} {v:.1f}" for f, v in gf.items()))
    shares = []
    for f in names:
        per_op = medians.get(f, {}).get("ops", {}).values()
        frac = [o["cpu_us"] / o["us"] for o in per_op if o.get("us") and o.get("cpu_us")]
        if frac:
            shares.append(f"{f} {sorted(frac)[len(frac) // 2]:.2f}")
    if shares:
        # Below 1 with --threads 1 means the child waited for a core: a busy machine.
        print("CPU share (CPU us / wall us, median over ops): " + ", ".join(shares))
    mem = ", ".join(f"{f} {medians[f]['peak_mb']:.0f}" for f in names if f in medians)
    print(f"peak MB per child: {mem}")
    if "torch" in medians:
        print("torch equivalents:")
        for op in params["only"] or OPS:
            print(f"  {op}: {DESCRIBE[op][1]}")
    H.write_json(args.json, __file__, args, params, runs, medians)
    if "plait" not in medians:
        raise SystemExit("bench: plait produced no result (see the FAILED lines above)")


if __name__ == "__main__":
    main(sys.argv[1:])
