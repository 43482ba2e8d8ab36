"""The MLP of the Thinc docs, written against plait.api exactly as it would be against thinc.api.

784 -> Relu 512 with dropout 0.2 -> Relu 512 -> Softmax 10, Adam(0.001), batch 128.
Run: python examples/thinc_mnist_mlp.py [--epochs 2] [--data ../shared/data/mnist.npz]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy

from plait.api import Adam, Relu, Softmax, chain, fix_random_seed

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist.npz"


def load_mnist(path: Path):
    with numpy.load(path) as data:
        X_train = data["x_train"].reshape(-1, 784).astype("f") / 255.0
        X_test = data["x_test"].reshape(-1, 784).astype("f") / 255.0
        Y_train = numpy.eye(10, dtype="f")[data["y_train"]]
        Y_test = numpy.eye(10, dtype="f")[data["y_test"]]
    return (X_train, Y_train), (X_test, Y_test)


def train(data_path: Path = DEFAULT_DATA, epochs: int = 2, batch_size: int = 128, seed: int = 0, log=print) -> float:
    """Train the MLP and return its test accuracy after the last epoch."""
    fix_random_seed(seed)
    (train_X, train_Y), (dev_X, dev_Y) = load_mnist(data_path)
    model = chain(
        Relu(nO=512, dropout=0.2),
        Relu(nO=512),
        Softmax(),
    )
    model.initialize(X=train_X[:5], Y=train_Y[:5])
    optimizer = Adam(0.001)
    accuracy = 0.0
    for epoch in range(epochs):
        batches = model.ops.multibatch(batch_size, train_X, train_Y, shuffle=True)
        for X, Y in batches:
            Yh, backprop = model.begin_update(X)
            backprop(Yh - Y)
            model.finish_update(optimizer)
        correct = total = 0
        for X, Y in model.ops.multibatch(batch_size * 8, dev_X, dev_Y):
            Yh = model.predict(X)
            correct += int((Yh.argmax(axis=1) == Y.argmax(axis=1)).sum())
            total += Yh.shape[0]
        accuracy = correct / total
        log(f"epoch {epoch + 1}: test accuracy {accuracy:.4f}")
    return accuracy


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"MNIST not found at {args.data}; pass --data PATH/TO/mnist.npz", file=sys.stderr)
        return 2
    train(args.data, epochs=args.epochs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
