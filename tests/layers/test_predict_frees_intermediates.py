"""Model.predict keeps no backprop state, and Maxout reduces big batches block by block."""
import gc
import weakref

import numpy
import pytest

from plait.api import Maxout, Relu, Softmax, chain
from plait.layers import maxout as maxout_module


class _Tracked(numpy.ndarray):
    pass


def _tracking_layer(refs):
    """A layer that records weak references to the arrays it outputs."""
    from plait.model import Model

    def forward(model, X, is_train):
        Y = (X * 1.0).view(_Tracked)
        refs.append(weakref.ref(Y))
        # Like most layers, the backprop callback holds on to the layer's input.
        return Y, lambda dY: dY + 0 * X

    return Model("track", forward)


def test_predict_drops_each_intermediate_once_the_next_layer_ran():
    refs = []
    seen_alive = []

    def check(model, X, is_train):
        gc.collect()
        # While the last layer runs, the first tracked output (two layers back) is gone.
        seen_alive.append([r() is not None for r in refs])
        return X, lambda dY: dY

    from plait.model import Model

    model = chain(_tracking_layer(refs), _tracking_layer(refs), Model("check", check))
    X = numpy.ones((4, 3), "float32")
    model.predict(X)
    assert seen_alive == [[False, True]]
    # begin_update keeps everything its backprop needs.
    refs.clear()
    seen_alive.clear()
    Y, backprop = model.begin_update(X)
    assert seen_alive == [[True, True]]
    numpy.testing.assert_array_equal(backprop(numpy.ones_like(Y)), numpy.ones_like(X))


def test_predict_equals_the_training_forward_and_its_backprop_is_refused():
    model = chain(Relu(8, 5), Relu(6), Softmax(3))
    X = numpy.random.default_rng(0).standard_normal((7, 5)).astype("float32")
    model.initialize(X=X)
    numpy.testing.assert_array_equal(model.predict(X), model(X, is_train=False)[0])
    from plait.model import _predicting

    token = _predicting.set(True)
    try:
        _, backprop = model._func(model, X, is_train=False)
    finally:
        _predicting.reset(token)
    with pytest.raises(RuntimeError, match="Model.predict.*begin_update"):
        backprop(numpy.ones((7, 3), "float32"))


@pytest.mark.parametrize("nB", [1, 9, 10, 31, 64])
def test_maxout_blocked_pieces_equal_the_whole_batch(monkeypatch, nB):
    model = Maxout(nO=4, nP=3, nI=5)
    model.initialize()
    X = numpy.random.default_rng(nB).standard_normal((nB, 5)).astype("float32")
    whole, backprop_whole = model.begin_update(X)
    # 4 rows of pieces per block (4 x 12 float32 = 192 bytes): blocked from 9 rows on, in
    # blocks whose sizes differ by one row at most.
    monkeypatch.setattr(maxout_module, "_PIECES_BLOCK_BYTES", 4 * 4 * 3 * 4)
    monkeypatch.setattr(maxout_module, "_PIECES_MIN_ROWS", 1)
    blocked, backprop_blocked = model.begin_update(X)
    # NOTE: equal up to rounding, not bit for bit: OpenBLAS sends a one-row product (the last
    # block of 9 rows) through GEMV, which sums in another order than GEMM on some kernels
    # (OPENBLAS_CORETYPE=Haswell on Zen 5: 2e-7 apart).
    numpy.testing.assert_allclose(blocked, whole, rtol=1e-6, atol=1e-6)
    dY = numpy.random.default_rng(1).standard_normal(whole.shape).astype("float32")
    numpy.testing.assert_allclose(backprop_blocked(dY), backprop_whole(dY), rtol=1e-6, atol=1e-6)
    numpy.testing.assert_allclose(model.predict(X), whole, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("nB,min_rows,sizes", [
    (64, 1, [4] * 16),  # 1 MiB shrunk to 4 rows of pieces
    (10, 1, [3, 3, 4]),  # ceil(10 / 4) = 3 blocks of one size, give or take a row
    (64, 10, [9, 9, 9, 9, 9, 9, 10]),  # at least 10 rows: 7 blocks
    (20, 10, [20]),  # at most twice the block: whole
])
def test_maxout_blocks_have_at_least_a_size_and_no_thin_last_one(monkeypatch, nB, min_rows, sizes):
    model = Maxout(nO=4, nP=3, nI=5)
    model.initialize()
    monkeypatch.setattr(maxout_module, "_PIECES_BLOCK_BYTES", 4 * 4 * 3 * 4)
    monkeypatch.setattr(maxout_module, "_PIECES_MIN_ROWS", min_rows)
    seen = []
    affine = model.ops.affine
    monkeypatch.setattr(model.ops, "affine", lambda X, W, b: seen.append(X.shape[0]) or affine(X, W, b))
    X = numpy.random.default_rng(nB).standard_normal((nB, 5)).astype("float32")
    model.begin_update(X)
    assert seen == sizes
