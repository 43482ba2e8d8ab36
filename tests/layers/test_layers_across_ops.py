"""The same layers on another backend give what they give on NumpyOps.

Several layers take a numpy-only shortcut and keep a generic path for other array modules (the
LSTM layer's Padded <-> packed conversions, Embed's and HashEmbed's rows added straight into the
gradient's array, Ops.list2padded). Each model here is built and initialised on NumpyOps, copied,
moved to the other backend, and run forward and backward on the same input; outputs, input
gradients, parameter gradients and the parameters after one Adam step must agree.

The other backends: the reference `Ops` (numpy arrays through the generic code, on every
machine) and CupyOps (marked gpu, skipped without CuPy and a device).
"""
import numpy
import pytest

from _env import HAS_GPU
from plait.api import (
    Adam,
    HashEmbed,
    chain,
    with_array,
    with_padded,
)
from plait.backends import NumpyOps, Ops
from plait.layers.embed import Embed
from plait.layers.lstm import LSTM
from plait.layers.maxout import Maxout
from plait.layers.softmax import Softmax
from plait.types import Padded, Ragged
from plait.util import to_numpy

OTHER_OPS = [
    pytest.param("reference", id="Ops"),
    pytest.param(
        "cupy",
        id="CupyOps",
        marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")],
    ),
]


def _moved(model, which):
    """A copy of `model` with its params on the other backend."""
    other = model.copy()
    if which == "cupy":
        other.to_gpu(0)
    else:
        other._to_ops(Ops())
    return other


def _host(x):
    """x (an array, Ragged, Padded, or a list of arrays) as numpy data for comparison."""
    if isinstance(x, (Ragged, Padded)):
        x = x.data
    if isinstance(x, (list, tuple)):
        return [_host(a) for a in x]
    return to_numpy(x)


def _to(model, x):
    """x moved to model's array module, keeping Ragged/Padded/list structure."""
    ops = model.ops
    if isinstance(x, list):
        return [_to(model, a) for a in x]
    if isinstance(x, Padded):
        return Padded(ops.asarray(x.data), x.size_at_t, x.lengths, x.indices)
    if isinstance(x, Ragged):
        return Ragged(ops.asarray(x.data), ops.asarray(x.lengths))
    return ops.asarray(x)


def _assert_close(a, b, what):
    a, b = _host(a), _host(b)
    if isinstance(a, list):
        assert len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_close(x, y, f"{what}[{i}]")
        return
    assert a.shape == b.shape, f"{what}: shapes {a.shape} and {b.shape}"
    assert a.dtype == b.dtype, f"{what}: dtypes {a.dtype} and {b.dtype}"
    numpy.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5, err_msg=what)


def _params(model, kind="param"):
    """{(node id, name): array} of every param (kind "param") or gradient (kind "grad") set."""
    return {
        (node.id, name): getattr(node, f"get_{kind}")(name)
        for node in model.walk()
        for name in node.param_names
        if getattr(node, f"has_{kind}")(name)
    }


def _run_both(model, X, dY_of, which):
    """Forward, backward and one Adam step on NumpyOps and on the other backend."""
    other = _moved(model, which)
    ids = [n.id for n in model.walk()]
    other_ids = [n.id for n in other.walk()]
    results = []
    for m in (model, other):
        Xm = _to(m, X)
        Y, backprop = m.begin_update(Xm)
        dX = backprop(_to(m, dY_of(Y)))
        grads = _params(m, "grad")
        optimizer = Adam(0.01)
        m.finish_update(optimizer)
        results.append((Y, dX, grads, _params(m)))
    (Y0, dX0, g0, p0), (Y1, dX1, g1, p1) = results
    _assert_close(Y0, Y1, "output")
    if dX0 is not None and not _is_int_input(X):
        _assert_close(dX0, dX1, "input gradient")
    key = dict(zip(ids, other_ids))
    assert len(g0) == len(g1) > 0
    for (nid, name), g in g0.items():
        _assert_close(g, g1[(key[nid], name)], f"gradient of {name}")
    for (nid, name), p in p0.items():
        _assert_close(p, p1[(key[nid], name)], f"{name} after one Adam step")


def _is_int_input(X):
    data = X.data if isinstance(X, (Ragged, Padded)) else X
    if isinstance(data, list):
        data = data[0]
    return numpy.asarray(data).dtype.kind in "iu"


def _dY_like(seed):
    def dY_of(Y):
        host = _host(Y)
        rng = numpy.random.default_rng(seed)
        if isinstance(host, list):
            return [rng.normal(size=h.shape).astype(h.dtype) for h in host]
        d = rng.normal(size=host.shape).astype(host.dtype)
        if isinstance(Y, Padded):
            return Padded(d, Y.size_at_t, Y.lengths, Y.indices)
        if isinstance(Y, Ragged):
            return Ragged(d, Y.lengths)
        return d

    return dY_of


def _padded_batch(lengths, nI, seed):
    """A Padded batch built by NumpyOps.list2padded (rows of padding stay zero)."""
    rng = numpy.random.default_rng(seed)
    seqs = [rng.normal(size=(n, nI)).astype("float32") for n in lengths]
    return NumpyOps().list2padded(seqs)


@pytest.mark.parametrize("which", OTHER_OPS)
def test_embed_with_repeated_ids(which):
    model = Embed(nO=6, nV=20)
    ids = numpy.array([3, 3, 0, 19, 7, 3], dtype="uint64")
    model.initialize(X=ids)
    _run_both(model, ids, _dY_like(1), which)


@pytest.mark.parametrize("which", OTHER_OPS)
def test_hashembed_with_repeated_keys(which):
    model = HashEmbed(nO=5, nV=16, seed=7)
    keys = numpy.array([11, 11, 2**40 + 3, 5, 11, 0], dtype="uint64")
    model.initialize(X=keys)
    _run_both(model, keys, _dY_like(2), which)


@pytest.mark.parametrize("which", OTHER_OPS)
@pytest.mark.parametrize("bi,depth", [(False, 1), (True, 2)])
def test_lstm_over_ragged_lengths(which, bi, depth):
    # Sequences of unequal length, an empty one among them: the padded steps hold fewer rows
    # as time goes on, and the packed conversions must keep the padding at zero.
    X = _padded_batch([5, 2, 0, 3], nI=4, seed=3)
    model = LSTM(nO=6, nI=4, bi=bi, depth=depth)
    model.initialize(X=X)
    _run_both(model, X, _dY_like(4), which)


@pytest.mark.parametrize("which", OTHER_OPS)
def test_maxout_softmax_chain(which):
    rng = numpy.random.default_rng(5)
    X = rng.normal(size=(9, 8)).astype("float32")
    model = chain(Maxout(nO=7, nP=3), Softmax(nO=4))
    model.initialize(X=X)
    _run_both(model, X, _dY_like(6), which)


@pytest.mark.parametrize("which", OTHER_OPS)
def test_tagger_over_a_list_of_sequences(which):
    # What a tagger does: hashed ids per token, a BiLSTM over the padded batch, a softmax per
    # token; the list goes through list2padded and padded2list on the backend under test.
    rng = numpy.random.default_rng(8)
    X = [rng.integers(0, 2**63, size=n, dtype="uint64") for n in (4, 1, 6)]
    model = chain(
        with_array(HashEmbed(nO=8, nV=32, seed=1)),
        with_padded(LSTM(nO=6, nI=8, bi=True)),
        with_array(Softmax(nO=5, nI=6)),
    )
    model.initialize(X=X)
    _run_both(model, X, _dY_like(9), which)
