"""The MNIST MLP of the Chainer 1.7.2 tutorial, with only the imports changed to plait.chainer.

784-1000-1000-10 rectifier network (the tutorial's MLP with the unit counts configurable, as
in its GPU section and examples/mnist), softmax cross entropy through L.Classifier, Adam,
minibatches of 100, then the tutorial's evaluation loop on the 10,000 test images.
Run: python examples/chainer_mnist_mlp.py [--epochs 1] [--units 1000] [--data ../shared/data/mnist.npz]
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

# The tutorial's imports, pointed at plait.
import plait.chainer as chainer
from plait.chainer import cuda, Function, gradient_check, Variable, optimizers, serializers, utils  # noqa: F401
from plait.chainer import Link, Chain, ChainList  # noqa: F401
import plait.chainer.functions as F
import plait.chainer.links as L

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist.npz"


class MLP(Chain):
    def __init__(self, n_in, n_units, n_out):
        super(MLP, self).__init__(
            l1=L.Linear(n_in, n_units),
            l2=L.Linear(n_units, n_units),
            l3=L.Linear(n_units, n_out),
        )

    def __call__(self, x):
        h1 = F.relu(self.l1(x))
        h2 = F.relu(self.l2(h1))
        y = self.l3(h2)
        return y


def load_mnist(path, n_train=60000, n_test=10000):
    """The tutorial's split: pixels scaled to [0, 1] as float32, labels as int32."""
    with np.load(path) as mnist:
        x_train = mnist["x_train"][:n_train].reshape(-1, 784).astype(np.float32) / 255
        y_train = mnist["y_train"][:n_train].astype(np.int32)
        x_test = mnist["x_test"][:n_test].reshape(-1, 784).astype(np.float32) / 255
        y_test = mnist["y_test"][:n_test].astype(np.int32)
    return x_train, y_train, x_test, y_test


def run(data=DEFAULT_DATA, epochs=1, n_units=1000, n_train=60000, n_test=10000, seed=0, log=print):
    """Train and evaluate; returns (mean test loss, mean test accuracy, seconds per epoch)."""
    np.random.seed(seed)
    x_train, y_train, x_test, y_test = load_mnist(data, n_train, n_test)

    model = L.Classifier(MLP(784, n_units, 10))
    optimizer = optimizers.Adam()
    optimizer.setup(model)

    batchsize = 100
    datasize = len(x_train)
    seconds = []
    for epoch in range(epochs):
        log('epoch %d' % epoch)
        start = time.perf_counter()
        indexes = np.random.permutation(datasize)
        for i in range(0, datasize, batchsize):
            x = Variable(x_train[indexes[i : i + batchsize]])
            t = Variable(y_train[indexes[i : i + batchsize]])
            optimizer.update(model, x, t)
        seconds.append(time.perf_counter() - start)

    sum_loss, sum_accuracy = 0, 0
    n_eval = len(x_test)
    for i in range(0, n_eval, batchsize):
        x = Variable(x_test[i : i + batchsize])
        t = Variable(y_test[i : i + batchsize])
        loss = model(x, t)
        sum_loss += loss.data * len(x.data)
        sum_accuracy += model.accuracy.data * len(x.data)
    mean_loss = float(sum_loss / n_eval)
    mean_accuracy = float(sum_accuracy / n_eval)
    per_epoch = sum(seconds) / max(len(seconds), 1)
    log('test loss %.4f, accuracy %.4f, %.1f s per epoch' % (mean_loss, mean_accuracy, per_epoch))
    return mean_loss, mean_accuracy, per_epoch


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--units", type=int, default=1000)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"no MNIST file at {args.data}; pass --data path/to/mnist.npz", file=sys.stderr)
        return 2
    run(args.data, epochs=args.epochs, n_units=args.units)
    return 0


if __name__ == "__main__":
    sys.exit(main())
