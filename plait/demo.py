"""`make demo` / `python -m plait`: what plait is, then a small MLP trained with raw Ops calls on MNIST.

Until the command line lands, this shows the backend end to end: gemm, relu, softmax, their
backprops, the dropout mask, minibatching and the fused Adam step, on the real digits.
"""
import argparse
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy

from .about import __version__

_DATA_CANDIDATES = [
    Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist.npz",
    Path.cwd().parent / "shared" / "data" / "mnist.npz",
]


def _find_mnist(path: Optional[str]) -> Path:
    candidates = [Path(path)] if path else _DATA_CANDIDATES
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        "MNIST not found at " + ", ".join(str(c) for c in candidates)
        + ". Pass --data PATH/TO/mnist.npz (the repository expects ../shared/data/mnist.npz)."
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m plait", description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="path to mnist.npz (default: ../shared/data/mnist.npz)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--n-train", type=int, default=60000, help="training examples to use")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from .backends import NumpyOps
    from .backends._kernels_cpu import openmp_info

    print(f"plait {__version__}: one backend (Ops), three faces (Thinc, Chainer, Neon).")
    print(f"  backend: NumpyOps, compiled kernels with OpenMP={openmp_info.has_openmp()} "
          f"({openmp_info.openmp_max_threads()} threads)")
    try:
        data_path = _find_mnist(args.data)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    ops = NumpyOps()
    numpy.random.seed(args.seed)
    with numpy.load(data_path) as d:
        X_train = ops.asarray2f(d["x_train"][: args.n_train].reshape(-1, 784) / 255.0)
        y_train = d["y_train"][: args.n_train].astype("int64")
        X_test = ops.asarray2f(d["x_test"].reshape(-1, 784) / 255.0)
        y_test = d["y_test"].astype("int64")
    print(f"  data: {data_path} ({len(X_train)} train / {len(X_test)} test digits)")

    rng = numpy.random.default_rng(args.seed)
    nI, nH, nO = 784, args.hidden, 10
    params = {
        "W1": ops.asarray2f(rng.normal(0, numpy.sqrt(2.0 / nI), (nH, nI))),
        "b1": ops.alloc1f(nH),
        "W2": ops.asarray2f(rng.normal(0, numpy.sqrt(1.0 / nH), (nO, nH))),
        "b2": ops.alloc1f(nO),
    }
    moments = {k: (ops.alloc_f(v.shape), ops.alloc_f(v.shape)) for k, v in params.items()}
    beta1, beta2, eps, lr = 0.9, 0.999, 1e-8, 0.001

    def predict(X):
        return ops.softmax(ops.affine(ops.relu(ops.affine(X, params["W1"], params["b1"])), params["W2"], params["b2"]))

    step = 0
    for epoch in range(args.epochs):
        start = time.perf_counter()
        total_loss = 0.0
        for X, y in ops.multibatch(args.batch_size, X_train, y_train, shuffle=True):
            H = ops.relu(ops.affine(X, params["W1"], params["b1"]))
            mask = ops.get_dropout_mask(H.shape, 0.2)
            Hd = H * mask
            P = ops.softmax(ops.affine(Hd, params["W2"], params["b2"]))
            total_loss -= float(numpy.log(P[numpy.arange(len(y)), y] + 1e-8).sum())
            dZ2 = P.copy()
            dZ2[numpy.arange(len(y)), y] -= 1.0
            dZ2 /= len(y)
            grads = {"W2": ops.gemm(dZ2, Hd, trans1=True), "b2": dZ2.sum(axis=0)}
            dH = ops.backprop_relu(ops.gemm(dZ2, params["W2"]) * mask, H)
            grads["W1"] = ops.gemm(dH, X, trans1=True)
            grads["b1"] = dH.sum(axis=0)
            step += 1
            rate = lr * numpy.sqrt(1 - beta2**step) / (1 - beta1**step)
            for key, W in params.items():
                m1, m2 = moments[key]
                ops.adam(W.reshape(-1), grads[key].reshape(-1), m1.reshape(-1), m2.reshape(-1),
                         beta1, beta2, eps, rate)
        seconds = time.perf_counter() - start
        accuracy = float((predict(X_test).argmax(axis=1) == y_test).mean())
        print(f"  epoch {epoch + 1}: loss {total_loss / len(X_train):.4f}  test accuracy {accuracy:.4f}  "
              f"({len(X_train) / seconds:,.0f} examples/s)")
    print(f"test accuracy: {accuracy:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
