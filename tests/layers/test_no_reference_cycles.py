"""A training step leaves no reference cycles behind.

Whatever a step's backprop callbacks hold (the LSTM's gates and cells, padded batches, dropout
masks: tens of MB a step for a wide tagger) must go when the caller drops the callback, not at
the next cyclic garbage collection. A closure that named itself kept the LSTM's forward state
alive for several steps, so every step mapped fresh memory for it.
"""
import numpy
import pytest
from _cycles import assert_no_cycles

import plait.api as api
from plait.types import Padded, Ragged


def _seqs(rng, n=5, width=None, vocab=50):
    lengths = rng.integers(1, 7, size=n)
    if width is None:
        return [rng.integers(0, vocab, size=(int(L),)).astype("uint64") for L in lengths]
    return [rng.standard_normal((int(L), width)).astype("float32") for L in lengths]


def _ones_like(Y):
    if isinstance(Y, list):
        return [numpy.ones_like(y) for y in Y]
    if isinstance(Y, Ragged):
        return Ragged(numpy.ones_like(Y.data), Y.lengths)
    if isinstance(Y, Padded):
        return Padded(numpy.ones_like(Y.data), Y.size_at_t, Y.lengths, Y.indices)
    return numpy.ones_like(Y)


CASES = {
    "tagger: with_padded(LSTM) on lists": (
        lambda: api.chain(
            api.with_array(api.Embed(nO=8, nV=50)),
            api.with_padded(api.LSTM(nO=6, nI=8, bi=True, depth=2, dropout=0.1)),
            api.with_array(api.Softmax(nO=4, nI=6)),
        ),
        lambda rng: _seqs(rng),
    ),
    "LSTM on a Padded batch": (
        lambda: api.chain(api.list2padded(), api.LSTM(nO=6, nI=4), api.padded2list()),
        lambda rng: _seqs(rng, width=4),
    ),
    "bidirectional(LSTM)": (
        lambda: api.chain(
            api.with_padded(api.bidirectional(api.LSTM(nO=3, nI=4))),
            api.with_array(api.Linear(nO=2)),
        ),
        lambda rng: _seqs(rng, width=4),
    ),
    "text CNN": (
        lambda: api.chain(
            api.list2ragged(),
            api.with_array(api.HashEmbed(nO=8, nV=30, seed=1)),
            api.expand_window(window_size=1),
            api.with_array(api.Maxout(nO=8, nP=3, normalize=True, dropout=0.1)),
            api.reduce_mean(),
            api.Softmax(nO=2),
        ),
        lambda rng: _seqs(rng),
    ),
    "MLP with dropout and LayerNorm": (
        lambda: api.chain(
            api.Relu(nO=8, dropout=0.2),
            api.Relu(nO=8, dropout=0.2, normalize=True),
            api.Softmax(nO=3),
        ),
        lambda rng: rng.standard_normal((5, 4)).astype("float32"),
    ),
    "combinators": (
        lambda: api.chain(
            api.concatenate(api.Relu(nO=4), api.Linear(nO=3)),
            api.add(api.Linear(nO=3), api.Linear(nO=3)),
            api.residual(api.Mish(nO=3, nI=3)),
            api.clone(api.Linear(nO=3), 2),
        ),
        lambda rng: rng.standard_normal((5, 4)).astype("float32"),
    ),
    "attention and reductions": (
        lambda: api.chain(
            api.list2ragged(),
            api.with_array(api.Linear(nO=4, nI=4)),
            api.ParametricAttention(nO=4),
            api.reduce_max(),
            api.Linear(nO=2),
        ),
        lambda rng: _seqs(rng, width=4),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_training_step_leaves_no_garbage_cycles(name):
    make, data = CASES[name]
    rng = numpy.random.default_rng(0)
    model = make()
    model.initialize(X=data(rng))
    optimizer = api.Adam(0.001)

    def step():
        Y, backprop = model.begin_update(data(rng))
        backprop(_ones_like(Y))
        model.finish_update(optimizer)

    assert_no_cycles(step, name)
