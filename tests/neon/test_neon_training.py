"""plait.neon end to end: a small MLP written against the backend API alone learns a toy task,
with hand-written backprop (compound_dot, op-tree updates) and with Autodiff's gradients."""
import numpy as np
import pytest

from plait.neon import Autodiff, gen_backend


def _data(n=512, d=8, classes=3, seed=0):
    rs = np.random.RandomState(seed)
    centers = rs.randn(classes, d) * 3
    y = rs.randint(0, classes, size=n)
    X = centers[y] + rs.randn(n, d)
    return X.astype(np.float32), y


@pytest.mark.parametrize("fuse", ["0", "1"])
def test_mlp_trains_with_compound_dot_and_op_tree_updates(monkeypatch, fuse):
    monkeypatch.setenv("PLAIT_NEON_FUSE", fuse)
    X, y = _data()
    bsz, d, hidden, classes = 64, X.shape[1], 16, 3
    be = gen_backend(rng_seed=0, batch_size=bsz)
    W1 = be.array(be.rng.randn(hidden, d) * 0.3)
    W2 = be.array(be.rng.randn(classes, hidden) * 0.3)
    b1, b2 = be.zeros((hidden, 1)), be.zeros((classes, 1))
    x, h, o, t = be.iobuf(d), be.iobuf(hidden), be.iobuf(classes), be.iobuf(classes)
    dh, do = be.iobuf(hidden), be.iobuf(classes)
    dW1, dW2, db1, db2 = be.empty_like(W1), be.empty_like(W2), be.empty_like(b1), be.empty_like(b2)
    labels = be.empty((1, bsz), dtype=np.int32)
    lr = 0.5
    for epoch in range(6):
        for i in range(0, len(X), bsz):
            x.set(X[i:i + bsz].T)
            labels.set(y[i:i + bsz].reshape(1, -1))
            be.onehot(labels, axis=0, out=t)
            be.compound_dot(W1, x, h)
            h[:] = be.maximum(h + b1, 0)
            be.compound_dot(W2, h, o)
            o[:] = be.exp(o + b2 - be.max(o + b2, axis=0))
            o[:] = o / be.sum(o, axis=0)
            do[:] = (o - t) / bsz
            be.compound_dot(do, h.T, dW2)
            be.update_fc_bias(do, db2)
            be.compound_dot(W2.T, do, dh)
            dh[:] = dh * (h > 0)
            be.compound_dot(dh, x.T, dW1)
            be.update_fc_bias(dh, db1)
            for p, g in ((W1, dW1), (W2, dW2), (b1, db1), (b2, db2)):
                p[:] = p - lr * g
    # accuracy on the whole set
    correct = 0
    pred = be.empty((1, bsz))
    for i in range(0, len(X), bsz):
        x.set(X[i:i + bsz].T)
        be.compound_dot(W1, x, h)
        h[:] = be.maximum(h + b1, 0)
        be.compound_dot(W2, h, o)
        be.argmax(o + b2, axis=0, out=pred)
        correct += int((pred.get().ravel() == y[i:i + bsz]).sum())
    assert correct / len(X) > 0.95


def test_logistic_regression_with_autodiff_gradients(monkeypatch):
    monkeypatch.setenv("PLAIT_NEON_FUSE", "0")
    X, y = _data(n=256, classes=2, seed=1)
    be = gen_backend(rng_seed=1, batch_size=256)
    x = be.array(X.T)
    target = be.array(y.reshape(1, -1).astype(np.float32))
    w = be.zeros((1, X.shape[1]))
    b = be.zeros((1, 1))
    gw, gb = be.empty_like(w), be.empty_like(b)
    # mean cross-entropy of sig(w . x + b)
    p = be.sig(be.dot(w, x) + b)
    loss = be.mean(-(target * be.safelog(p) + (1.0 - target) * be.safelog(1.0 - p)), axis=1)
    ad = Autodiff(loss, be)
    for _ in range(60):
        ad.back_prop_grad([w, b], [gw, gb])  # the trees re-evaluate on the current w, b
        w[:] = w - 1.0 * gw
        b[:] = b - 1.0 * gb
    out = be.empty((1, 256))
    out[:] = be.sig(be.dot(w, x) + b) > 0.5
    assert (out.get().ravel() == y).mean() > 0.95
