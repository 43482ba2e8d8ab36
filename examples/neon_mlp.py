"""An MNIST MLP written against neon's backend API alone, run on plait.neon.

784-256-256-10 rectifier network, softmax output and cross entropy, SGD with momentum. It uses
only the backend: tensors in neon's batch-last layout (features x batch), `compound_dot` and
`be.dot` for the products, and lazy op-trees (computed on assignment, one fused pass each) for
the activations, the gradients and the updates.

Run: python examples/neon_mlp.py [--epochs 4] [--data ../shared/data/mnist.npz]
With PLAIT_AS_NEON=1 (or python -m plait.neon_alias) the same code runs with `neon.backends`
imports instead of `plait.neon`.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

from plait.neon import gen_backend

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist.npz"


def load_mnist(path, n_train=60000, n_test=10000):
    """Pixels scaled to [0, 1] (float32, one image per row) and integer labels."""
    with np.load(path, allow_pickle=False) as mnist:
        x_train = mnist["x_train"][:n_train].reshape(-1, 784).astype(np.float32) / 255
        y_train = mnist["y_train"][:n_train].astype(np.int64)
        x_test = mnist["x_test"][:n_test].reshape(-1, 784).astype(np.float32) / 255
        y_test = mnist["y_test"][:n_test].astype(np.int64)
    return x_train, y_train, x_test, y_test


class MLP:
    """Weights, their gradients and momenta as backend tensors; forward and backward by hand."""

    def __init__(self, be, sizes, batch_size):
        self.be = be
        rng = np.random.RandomState(0)
        self.W, self.b, self.dW, self.db, self.vW, self.vb = [], [], [], [], [], []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            scale = np.sqrt(2.0 / n_in)  # He initialisation for the rectifiers
            self.W.append(be.array(rng.normal(0.0, scale, (n_out, n_in))))
            self.b.append(be.zeros((n_out, 1)))
            self.dW.append(be.zeros((n_out, n_in)))
            self.db.append(be.zeros((n_out, 1)))
            self.vW.append(be.zeros((n_out, n_in)))
            self.vb.append(be.zeros((n_out, 1)))
        # Activations and deltas, allocated once for the batch size (batch on the last axis).
        self.h = [be.iobuf(n) for n in sizes]
        self.delta = [be.iobuf(n) for n in sizes]

    def forward(self, x):
        be, h = self.be, self.h
        h[0][:] = x
        last = len(self.W) - 1
        for i, (W, b) in enumerate(zip(self.W, self.b)):
            be.compound_dot(W, h[i], h[i + 1])            # h = W . h_prev
            if i < last:
                h[i + 1][:] = be.maximum(h[i + 1] + b, 0)  # relu(h + b), one fused pass
            else:
                z = h[i + 1]
                z[:] = z + b
                z[:] = be.exp(z - be.max(z, axis=0))       # softmax over the classes (axis 0)
                z[:] = z / be.sum(z, axis=0)
        return h[-1]

    def backward(self, targets):
        be, h, d = self.be, self.h, self.delta
        n = h[0].shape[1]
        d[-1][:] = (h[-1] - targets) / n                   # softmax + cross entropy
        for i in range(len(self.W) - 1, -1, -1):
            be.compound_dot(d[i + 1], h[i].T, self.dW[i])  # dW = delta . h_prev.T
            self.db[i][:] = be.sum(d[i + 1], axis=1)
            if i > 0:
                d[i][:] = be.dot(self.W[i].T, d[i + 1])
                d[i][:] = d[i] * (h[i] > 0)                # through the rectifier

    def update(self, learning_rate, momentum):
        be = self.be
        for W, dW, vW in zip(self.W, self.dW, self.vW):
            vW[:] = momentum * vW - learning_rate * dW
            W[:] = W + vW
        for b, db, vb in zip(self.b, self.db, self.vb):
            vb[:] = momentum * vb - learning_rate * db
            b[:] = b + vb


def run(data=DEFAULT_DATA, epochs=4, batch_size=128, learning_rate=0.1, momentum=0.9,
        n_train=60000, n_test=10000, seed=0, log=print):
    """Train and evaluate; returns (test accuracy, seconds per epoch)."""
    x_train, y_train, x_test, y_test = load_mnist(data, n_train, n_test)
    be = gen_backend(backend="cpu", rng_seed=seed, batch_size=batch_size)
    model = MLP(be, [784, 256, 256, 10], batch_size)
    x_buf, t_buf = be.iobuf(784), be.iobuf(10)
    onehot = np.eye(10, dtype=np.float32)
    order_rng = np.random.RandomState(seed)
    seconds = []
    for epoch in range(epochs):
        start = time.perf_counter()
        order = order_rng.permutation(len(x_train))
        # Full batches only: the buffers hold batch_size columns.
        for first in range(0, len(order) - batch_size + 1, batch_size):
            idx = order[first:first + batch_size]
            x_buf.set(np.ascontiguousarray(x_train[idx].T))
            t_buf.set(np.ascontiguousarray(onehot[y_train[idx]].T))
            model.forward(x_buf)
            model.backward(t_buf)
            model.update(learning_rate, momentum)
        seconds.append(time.perf_counter() - start)
        accuracy = evaluate(be, model, x_buf, x_test, y_test, batch_size)
        log(f"epoch {epoch + 1}: test accuracy {accuracy:.4f} ({seconds[-1]:.1f} s)")
    return accuracy, sum(seconds) / len(seconds)


def evaluate(be, model, x_buf, x_test, y_test, batch_size):
    correct, guess = 0, be.iobuf(1, dtype=np.float32)
    n_full = len(x_test) - len(x_test) % batch_size
    for first in range(0, n_full, batch_size):
        x_buf.set(np.ascontiguousarray(x_test[first:first + batch_size].T))
        guess[:] = be.argmax(model.forward(x_buf), axis=0)
        correct += int((guess.get().ravel() == y_test[first:first + batch_size]).sum())
    return correct / n_full


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="MNIST .npz (x_train, y_train, x_test, y_test)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--n-train", type=int, default=60000)
    args = parser.parse_args(argv)
    if not Path(args.data).is_file():
        print(f"neon_mlp: MNIST file {args.data!r} not found; pass --data PATH "
              "(an .npz with x_train, y_train, x_test, y_test).", file=sys.stderr)
        return 2
    accuracy, per_epoch = run(args.data, args.epochs, args.batch_size, n_train=args.n_train)
    print(f"final test accuracy {accuracy:.4f}, {per_epoch:.1f} s per epoch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
