"""MNIST MLP: plait vs thinc 9.1 / thinc 8.3 (the same model code) vs torch.

    .venv/bin/python bench/mlp.py [--threads 1] [--rounds 3] [--peers all] [--quick]

--min-updates N trains more epochs than --epochs where they make fewer than N updates
(bench/matrix.py asks for 1,000: at batch 256 the default 2 epochs are 157 updates, a third of a
second at width 64, too short a round for this shared machine).

Model: Relu(nH, dropout) -> Relu(nH, dropout) -> Softmax(10), Adam, cross-entropy,
minibatches of `batch` shuffled examples. The table shows training and prediction
throughput (examples/s), training examples per CPU-second, the child's peak RSS and test
accuracy, and what fraction of the GEMM ceiling (one large 1-thread sgemm, measured in
a separate child) the training loop reaches.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List

import numpy

import _harness as H

DEFAULTS = dict(n_train=20000, n_test=10000, width=256, depth=2, dropout=0.2,
                batch=128, epochs=2, min_updates=0, learn_rate=0.001)
QUICK = dict(n_train=512, n_test=256, width=64, depth=2, dropout=0.2,
             batch=64, epochs=1, min_updates=0, learn_rate=0.001)

COLUMNS = [
    H.Column("train_per_s", "train ex/s", higher_is_better=True),
    H.Column("train_per_cpu_s", "train ex/CPU-s", higher_is_better=True),
    H.Column("predict_per_s", "predict ex/s", higher_is_better=True),
    H.Column("peak_mb", "peak MB", "{:,.0f}", higher_is_better=False),
    H.Column("accuracy", "accuracy", "{:.4f}"),
    H.Column("train_gflops", "train GFLOP/s", "{:.1f}"),
    H.Column("ceiling_frac", "of GEMM ceiling", "{:.1%}"),
    H.Column("ceiling_frac_cpu", "of ceiling, per CPU-s", "{:.1%}"),
]


def train_flops_per_example(width: int, depth: int, nI: int = 784, nO: int = 10) -> float:
    """Nominal FLOPs of one training example: forward, dX and dW GEMMs, 2 FLOPs per MAC.

    Elementwise work (relu, dropout, softmax, Adam) is left out: it is not GEMM work.
    """
    dims = [nI] + [width] * depth + [nO]
    macs = sum(a * b for a, b in zip(dims[:-1], dims[1:]))
    return 3 * 2.0 * macs


def build_model(api, p: Dict[str, Any]):
    """The one model definition plait and thinc share."""
    layers = [api.Relu(nO=p["width"], dropout=p["dropout"]) for _ in range(p["depth"])]
    return api.chain(*layers, api.Softmax())


def training_parts(api, p: Dict[str, Any], Xtr, ytr):
    """(model initialized, loss, batch(idx) -> (X, Y)) on the training split: what every
    thinc-face framework trains, here and in step_phases.py."""
    model = build_model(api, p)
    Ytr = H.one_hot(ytr, 10)
    model.initialize(X=Xtr[:8], Y=Ytr[:8])
    return model, api.CategoricalCrossentropy(), lambda idx: (Xtr[idx], Ytr[idx])


def work(framework: str, p: Dict[str, Any]) -> Dict[str, Any]:
    Xtr, ytr, Xte, yte = H.load_mnist(p["n_train"], p["n_test"])
    p = dict(p, epochs=H.epochs_for(p, len(Xtr)))
    if framework == "torch":
        return _torch(p, Xtr, ytr, Xte, yte)
    api = H.import_api(framework)
    api.set_current_ops(api.NumpyOps())
    model, loss, batch = training_parts(api, p, Xtr, ytr)
    optimizer = api.Adam(p["learn_rate"], use_averages=False)
    rng = numpy.random.default_rng(p["seed"])
    n_seen = 0
    with H.Clock() as train:
        for _ in range(p["epochs"]):
            for idx in H.batches(len(Xtr), p["batch"], rng):
                X, Y = batch(idx)
                Yh, backprop = model.begin_update(X)
                backprop(loss.get_grad(Yh, Y))
                model.finish_update(optimizer)
                n_seen += len(idx)
    correct = 0
    with H.Clock() as pred:
        for idx in H.batches(len(Xte), 1024):
            correct += int((model.predict(Xte[idx]).argmax(axis=1) == yte[idx]).sum())
    return _result(p, n_seen, train, len(Xte), pred, correct)


def _torch(p, Xtr, ytr, Xte, yte) -> Dict[str, Any]:
    import torch
    from torch import nn

    torch.manual_seed(p["seed"])
    mods: List[Any] = []
    nI = Xtr.shape[1]
    for _ in range(p["depth"]):
        mods += [nn.Linear(nI, p["width"]), nn.ReLU(), nn.Dropout(p["dropout"])]
        nI = p["width"]
    model = nn.Sequential(*mods, nn.Linear(nI, 10))
    # Thinc's Adam: decoupled L2 of 1e-6, gradients clipped to norm 1.0.
    optimizer = torch.optim.AdamW(model.parameters(), lr=p["learn_rate"], weight_decay=1e-6)
    tXtr, tytr = torch.from_numpy(Xtr), torch.from_numpy(ytr)
    tXte, tyte = torch.from_numpy(Xte), torch.from_numpy(yte)
    rng = numpy.random.default_rng(p["seed"])
    n_seen = 0
    model.train()
    with H.Clock() as train:
        for _ in range(p["epochs"]):
            for idx in H.batches(len(Xtr), p["batch"], rng):
                tidx = torch.from_numpy(idx)
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(tXtr[tidx]), tytr[tidx])
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                n_seen += len(idx)
    model.eval()
    correct = 0
    with H.Clock() as pred, torch.no_grad():
        for idx in H.batches(len(Xte), 1024):
            tidx = torch.from_numpy(idx)
            guess = torch.softmax(model(tXte[tidx]), dim=1).argmax(dim=1)
            correct += int((guess == tyte[tidx]).sum())
    return _result(p, n_seen, train, len(Xte), pred, correct)


def _result(p, n_seen, train, n_pred, pred, correct) -> Dict[str, Any]:
    out: Dict[str, Any] = {"examples": n_seen, "accuracy": correct / n_pred, "epochs": p["epochs"]}
    out.update(H.throughput_fields("train", n_seen, train))
    out.update(H.throughput_fields("predict", n_pred, pred))
    flops = train_flops_per_example(p["width"], p["depth"])
    out["train_gflops"] = out["train_per_s"] * flops / 1e9
    out["train_gflops_per_cpu_s"] = out["train_per_cpu_s"] * flops / 1e9
    return out


def main(argv=None) -> None:
    parsed = H.sized_command_line(argv, __doc__, DEFAULTS, QUICK, work)
    if parsed is None:  # a child: work() ran
        return
    _, args, params = parsed
    n_gemm = 512 if args.quick else 2048
    before = H.gemm_ceiling(args.threads, n=n_gemm)
    flops = train_flops_per_example(params["width"], params["depth"])
    # The ceiling is measured before and after the suite and the best kept: it stands for
    # what the core can do, and this machine is shared.
    after: Dict[str, Dict[str, float]] = {}

    def add_ceiling(medians):
        after.update(H.gemm_ceiling(args.threads, n=n_gemm))
        ceiling = H.merge_ceilings(before, after)
        best_wall = max(v["wall"] for v in ceiling.values())
        best_cpu = max(v["cpu"] for v in ceiling.values())
        for res in medians.values():
            if res.get("train_gflops"):
                res["ceiling_frac"] = res["train_gflops"] / best_wall
            if res.get("train_gflops_per_cpu_s"):
                res["ceiling_frac_cpu"] = res["train_gflops_per_cpu_s"] / best_cpu
        found = ", ".join(f"{k} {v['wall']:.1f}" for k, v in ceiling.items())
        return [
            "",
            f"GEMM ceiling ({args.threads} thread(s), float32 {n_gemm}^3 matmul, best of 8, "
            f"before and after the suite): {best_wall:.1f} GFLOP/s by wall clock ({found}); "
            f"{best_cpu:.1f} GFLOP per CPU-second.",
            f"MLP training FLOPs per example (forward + dX + dW GEMMs, 6 x MACs): "
            f"{flops / 1e6:.2f} MFLOP. 'of GEMM ceiling' = train ex/s x that / wall ceiling; "
            "'per CPU-s' = train ex/CPU-s x that / CPU ceiling (steadier on a busy machine).",
        ]

    H.parent_main(__file__, args, params, "MNIST MLP (bench/mlp.py)", COLUMNS,
                  notes_fn=add_ceiling,
                  extra={"gemm_ceiling_before": before, "gemm_ceiling_after": after,
                         "train_flops_per_example": flops})


if __name__ == "__main__":
    main(sys.argv[1:])
