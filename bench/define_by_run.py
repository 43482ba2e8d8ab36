"""Define-by-run training: the Chainer tutorial's MNIST MLP, plait.chainer vs chainer 7.8.1 vs torch.

    .venv/bin/python bench/define_by_run.py [--threads 1] [--rounds 3] [--peers all] [--quick] [--net cnn]

Model (the tutorial's): Linear 784 -> 1000 -> ReLU -> Linear 1000 -> ReLU -> Linear 10, inside
`links.Classifier` (softmax cross-entropy and accuracy), `optimizers.Adam()` with its defaults,
minibatches of 100 shuffled images, `optimizer.update(model, x, t)` per batch. plait and chainer
run literally the same code (the child imports `plait.chainer` or `chainer`); torch gets the
same network, Adam(lr=0.001) and cross-entropy in eager mode. The table shows training and
prediction throughput (images/s), both also per CPU-second, the child's peak RSS and the test
accuracy.

`--net cnn` trains a LeNet instead (the same in all three): Convolution2D 1 -> 20, 5x5 -> ReLU
-> 2x2 max pooling -> Convolution2D 20 -> 50, 5x5 -> ReLU -> 2x2 max pooling -> Linear 800 ->
500 -> ReLU -> Linear 10 (`--units` is the MLP's only).
"""

from __future__ import annotations

import sys
from typing import Any, Dict

import numpy

import _harness as H

FRAMEWORKS = ("plait", "chainer", "torch")
DEFAULTS = dict(n_train=20000, n_test=10000, units=1000, batch=100, epochs=1, net="mlp")
QUICK = dict(n_train=500, n_test=200, units=64, batch=50, epochs=1, net="mlp")
NETS = ("mlp", "cnn")

COLUMNS = [
    H.Column("train_per_s", "train img/s", higher_is_better=True),
    H.Column("train_per_cpu_s", "train img/CPU-s", higher_is_better=True),
    H.Column("predict_per_s", "predict img/s", higher_is_better=True),
    H.Column("predict_per_cpu_s", "predict img/CPU-s", higher_is_better=True),
    H.Column("peak_mb", "peak MB", "{:,.0f}", higher_is_better=False),
    H.Column("accuracy", "accuracy", "{:.4f}"),
]


def work(framework: str, p: Dict[str, Any]) -> Dict[str, Any]:
    Xtr, ytr, Xte, yte = H.load_mnist(p["n_train"], p["n_test"])
    ytr = ytr.astype("int32")
    yte = yte.astype("int32")
    if framework == "torch":
        return _torch(p, Xtr, ytr, Xte, yte)
    if framework == "plait":
        import plait.chainer as chainer
    else:
        import chainer
    F, L, optimizers = chainer.functions, chainer.links, chainer.optimizers
    n_units = p["units"]

    class MLP(chainer.Chain):
        """The tutorial's network."""

        def __init__(self) -> None:
            super().__init__()
            # Chainer >= 2 registers links in init_scope; 1.7.2 (and plait) take add_link.
            for name, link in (("l1", L.Linear(784, n_units)), ("l2", L.Linear(n_units, n_units)),
                               ("l3", L.Linear(n_units, 10))):
                self.add_link(name, link)

        def __call__(self, x):
            h1 = F.relu(self.l1(x))
            h2 = F.relu(self.l2(h1))
            return self.l3(h2)

    class LeNet(chainer.Chain):
        def __init__(self) -> None:
            super().__init__()
            for name, link in (("c1", L.Convolution2D(1, 20, 5)), ("c2", L.Convolution2D(20, 50, 5)),
                               ("l1", L.Linear(800, 500)), ("l2", L.Linear(500, 10))):
                self.add_link(name, link)

        def __call__(self, x):
            h = F.max_pooling_2d(F.relu(self.c1(x)), 2)
            h = F.max_pooling_2d(F.relu(self.c2(h)), 2)
            return self.l2(F.relu(self.l1(h)))

    if p["net"] == "cnn":
        Xtr, Xte = Xtr.reshape(-1, 1, 28, 28), Xte.reshape(-1, 1, 28, 28)
    model = L.Classifier(LeNet() if p["net"] == "cnn" else MLP())
    optimizer = optimizers.Adam()
    optimizer.setup(model)
    rng = numpy.random.default_rng(p["seed"])
    n_seen = 0
    with H.Clock() as train:
        for _ in range(p["epochs"]):
            for idx in H.batches(len(Xtr), p["batch"], rng):
                x = chainer.Variable(Xtr[idx])
                t = chainer.Variable(ytr[idx])
                optimizer.update(model, x, t)
                n_seen += len(idx)
    correct = 0
    with H.Clock() as pred:
        for idx in H.batches(len(Xte), 1000):
            y = model.predictor(chainer.Variable(Xte[idx]))
            correct += int((y.data.argmax(axis=1) == yte[idx]).sum())
    return _result(n_seen, train, len(Xte), pred, correct)


def _torch(p, Xtr, ytr, Xte, yte) -> Dict[str, Any]:
    import torch
    from torch import nn

    torch.manual_seed(p["seed"])
    n_units = p["units"]
    if p["net"] == "cnn":
        Xtr, Xte = Xtr.reshape(-1, 1, 28, 28), Xte.reshape(-1, 1, 28, 28)
        model = nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5),
                              nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                              nn.Linear(500, 10))
    else:
        model = nn.Sequential(nn.Linear(784, n_units), nn.ReLU(), nn.Linear(n_units, n_units),
                              nn.ReLU(), nn.Linear(n_units, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    Xtr_t, ytr_t = torch.from_numpy(Xtr), torch.from_numpy(ytr.astype("int64"))
    rng = numpy.random.default_rng(p["seed"])
    n_seen = 0
    model.train()
    with H.Clock() as train:
        for _ in range(p["epochs"]):
            for idx in H.batches(len(Xtr), p["batch"], rng):
                i = torch.from_numpy(idx)
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(Xtr_t[i]), ytr_t[i])
                loss.backward()
                optimizer.step()
                n_seen += len(idx)
    model.eval()
    correct = 0
    with H.Clock() as pred, torch.no_grad():
        for idx in H.batches(len(Xte), 1000):
            y = model(torch.from_numpy(Xte[idx]))
            correct += int((y.argmax(dim=1).numpy() == yte[idx]).sum())
    return _result(n_seen, train, len(Xte), pred, correct)


def _result(n_seen, train, n_pred, pred, correct) -> Dict[str, Any]:
    out = H.throughput_fields("train", n_seen, train)
    out.update(H.throughput_fields("predict", n_pred, pred))
    out["accuracy"] = correct / n_pred
    return out


def main(argv=None) -> None:
    parsed = H.sized_command_line(argv, __doc__, DEFAULTS, QUICK, work)
    if parsed is None:  # a child: work() ran
        return
    parser, args, params = parsed
    if params["net"] not in NETS:
        parser.error(f"--net must be one of {', '.join(NETS)}, got {params['net']!r}")
    title = "Chainer tutorial MLP" if params["net"] == "mlp" else "LeNet on MNIST"
    H.parent_main(__file__, args, params, f"{title}, define-by-run (bench/define_by_run.py)",
                  COLUMNS, known=FRAMEWORKS)


if __name__ == "__main__":
    main(sys.argv[1:])
