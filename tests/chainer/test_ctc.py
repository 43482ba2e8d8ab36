"""connectionist_temporal_classification (plait.chainer) and its backend core plait.backends._ctc.

Forward against a brute-force sum over every alignment, float64 gradient checks through the
list of inputs, readable errors, and a differential test against chainer 7.8.1 when it is
available in its own interpreter.
"""
import itertools
import subprocess
import textwrap

import numpy
import pytest

from plait.backends._ctc import ctc_check_inputs, ctc_loss_and_grad
from plait.chainer import Variable, gradient_check
from plait.chainer.functions.loss.ctc import (
    ConnectionistTemporalClassification,
    connectionist_temporal_classification as ctc,
)
from plait.chainer.utils import type_check


def _collapse(path, blank):
    out = []
    prev = None
    for c in path:
        if c != prev and c != blank:
            out.append(c)
        prev = c
    return out


def _brute_nll(scores, label, blank):
    """-log p(label | scores) for scores (nT, nV), summing softmax path products over all V**T paths."""
    nT, nV = scores.shape
    p = numpy.exp(scores - scores.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(nV), repeat=nT):
        if _collapse(path, blank) == list(label):
            total += numpy.prod([p[t, c] for t, c in enumerate(path)])
    return -numpy.log(total)


def _scores(nT, nB, nV, seed=0, dtype=numpy.float64):
    rs = numpy.random.RandomState(seed)
    return [rs.randn(nB, nV).astype(dtype) for _ in range(nT)]


# ------------------------------------------------------------------ forward against brute force

@pytest.mark.parametrize("blank", [0, 3])
def test_forward_matches_brute_force_with_repeats(blank):
    nT, nV = 5, 4
    others = [c for c in range(nV) if c != blank]
    a, b, c = others
    t = numpy.array([[a, a], [a, b], [c, c], [a, b]], numpy.int32)  # repeats need a blank between them
    xs = _scores(nT, len(t), nV, seed=1)
    loss = ctc([Variable(x) for x in xs], t, blank)
    expected = numpy.mean([_brute_nll(numpy.stack(xs)[:, i], t[i], blank) for i in range(len(t))])
    assert loss.data.shape == ()
    numpy.testing.assert_allclose(loss.data, expected, rtol=1e-10)


def test_forward_matches_brute_force_with_length_masks():
    nT, nV, blank = 5, 3, 0
    # Padding past label_length holds junk (even out-of-range -1 and the blank): it must be ignored.
    t = numpy.array([[1, 1, 2], [2, -1, -1], [1, 2, 0], [2, 2, 2], [1, 0, 0]], numpy.int32)
    in_len = numpy.array([5, 2, 3, 5, 1], numpy.int32)
    lab_len = numpy.array([3, 1, 2, 2, 0], numpy.int32)
    xs = _scores(nT, len(t), nV, seed=2)
    loss = ctc(xs, t, blank, input_length=in_len, label_length=lab_len)
    X = numpy.stack(xs)
    per = [_brute_nll(X[: in_len[i], i], t[i, : lab_len[i]], blank) for i in range(len(t))]
    numpy.testing.assert_allclose(loss.data, numpy.mean(per), rtol=1e-10)


def test_backend_per_sample_loss_and_gradient_zero_past_input_length():
    nT, nB, nV, blank = 4, 3, 3, 2
    rs = numpy.random.RandomState(3)
    X = rs.randn(nT, nB, nV)
    log_probs = X - numpy.log(numpy.exp(X).sum(axis=2, keepdims=True))
    labels = numpy.array([[0, 1], [1, 1], [0, 0]], numpy.int64)
    in_len = numpy.array([4, 3, 2], numpy.int64)
    lab_len = numpy.array([2, 2, 1], numpy.int64)
    loss, d = ctc_loss_and_grad(log_probs, labels, in_len, lab_len, blank)
    assert loss.shape == (nB,) and d.shape == (nT, nB, nV)
    for b in range(nB):
        numpy.testing.assert_allclose(loss[b], _brute_nll(X[: in_len[b], b], labels[b, : lab_len[b]], blank),
                                      rtol=1e-10)
    assert not d[3:, 1].any() and not d[2:, 2].any()
    # Each live step's gradient is softmax minus a distribution: it sums to zero over classes.
    numpy.testing.assert_allclose(d[:3, 1].sum(axis=-1), 0, atol=1e-12)
    # A single path with probability one contributes nothing: label [c] over one step of a sure c.
    lp = numpy.log(numpy.array([[[1e-300, 1.0, 1e-300]]]))
    loss1, d1 = ctc_loss_and_grad(lp, numpy.array([[1]]), numpy.array([1]), numpy.array([1]), 0)
    numpy.testing.assert_allclose(loss1, 0, atol=1e-12)
    numpy.testing.assert_allclose(d1, 0, atol=1e-12)


def test_empty_input_with_empty_label_has_zero_loss():
    xs = _scores(3, 2, 3, seed=4)
    t = numpy.array([[1], [2]], numpy.int32)
    loss = ctc([Variable(x) for x in xs], t, 0, input_length=numpy.array([0, 3], numpy.int32),
               label_length=numpy.array([0, 1], numpy.int32))
    expected = (0.0 + _brute_nll(numpy.stack(xs)[:, 1], [2], 0)) / 2
    numpy.testing.assert_allclose(loss.data, expected, rtol=1e-10)


def test_float32_and_variable_labels_and_lengths():
    xs = _scores(4, 2, 3, seed=5, dtype=numpy.float32)
    t = numpy.array([[1, 2], [2, 2]], numpy.int32)
    vs = [Variable(x) for x in xs]
    loss = ctc(vs, Variable(t), 0, input_length=Variable(numpy.array([4, 3], numpy.int32)),
               label_length=Variable(numpy.array([2, 2], numpy.int32)))
    assert loss.data.dtype == numpy.float32
    X = numpy.stack(xs).astype(numpy.float64)
    expected = (_brute_nll(X[:, 0], [1, 2], 0) + _brute_nll(X[:3, 1], [2, 2], 0)) / 2
    numpy.testing.assert_allclose(loss.data, expected, rtol=1e-5)
    loss.backward()
    assert all(v.grad is not None and v.grad.dtype == numpy.float32 for v in vs)
    assert not vs[3].grad[1].any()


def test_float16_is_computed_in_float32_and_returned_as_float16():
    xs = _scores(4, 2, 3, seed=12, dtype=numpy.float16)
    t = numpy.array([[1, 2], [2, 1]], numpy.int32)
    vs = [Variable(x) for x in xs]
    loss = ctc(vs, t, 0)
    loss.backward()
    assert loss.data.dtype == numpy.float16 and vs[0].grad.dtype == numpy.float16
    X = numpy.stack(xs).astype(numpy.float64)
    expected = (_brute_nll(X[:, 0], [1, 2], 0) + _brute_nll(X[:, 1], [2, 1], 0)) / 2
    numpy.testing.assert_allclose(float(loss.data), expected, rtol=2e-3)


def test_long_sequence_stays_finite():
    # Products of 200 probabilities underflow in linear space; the log-space recursion must not.
    xs = _scores(200, 2, 5, seed=6, dtype=numpy.float32)
    t = numpy.random.RandomState(7).randint(1, 5, size=(2, 30)).astype(numpy.int32)
    vs = [Variable(x) for x in xs]
    loss = ctc(vs, t, 0)
    loss.backward()
    assert numpy.isfinite(loss.data) and loss.data > 0
    assert all(numpy.isfinite(v.grad).all() for v in vs)


# ------------------------------------------------------------------ gradients

@pytest.mark.parametrize("with_lengths", [False, True])
def test_check_backward_through_the_list_of_inputs(with_lengths):
    nT, nV, blank = 5, 4, 1
    t = numpy.array([[0, 0, 2], [3, 2, 0], [2, 3, 3]], numpy.int32)
    if with_lengths:
        in_len = numpy.array([5, 3, 4], numpy.int32)
        lab_len = numpy.array([3, 1, 2], numpy.int32)
    else:
        in_len = lab_len = None
    xs = tuple(_scores(nT, len(t), nV, seed=8))

    def f(*vs):
        return ctc(list(vs), t, blank, input_length=in_len, label_length=lab_len)

    gradient_check.check_backward(f, xs, None, eps=1e-6, atol=1e-7, rtol=1e-6)
    # A non-unit output gradient scales every input gradient.
    gradient_check.check_backward(f, xs, numpy.array(2.5), eps=1e-6, atol=1e-7, rtol=1e-6)


def test_labels_and_lengths_get_no_gradient():
    xs = [Variable(x) for x in _scores(3, 1, 3, seed=9)]
    t = Variable(numpy.array([[1]], numpy.int32))
    in_len = Variable(numpy.array([3], numpy.int32))
    ctc(xs, t, 0, input_length=in_len).backward()
    assert t.grad is None and in_len.grad is None


# ------------------------------------------------------------------ errors

def _good():
    return [Variable(x) for x in _scores(3, 2, 4, seed=10)], numpy.array([[1, 2], [3, 1]], numpy.int32)


@pytest.mark.parametrize("change, match", [
    (lambda xs, t: ([Variable(x.data.astype(numpy.int32)) for x in xs], t), r"in_types\[3\].dtype.kind == f"),
    (lambda xs, t: (xs[:2] + [Variable(numpy.zeros((2, 5)))], t), r"shape == "),
    (lambda xs, t: (xs[:2] + [Variable(xs[2].data.astype(numpy.float32))], t), r"dtype == "),
    (lambda xs, t: (xs, t.astype(numpy.float32)), r"in_types\[2\].dtype.kind == i"),
    (lambda xs, t: (xs, t[:1]), r"in_types\[3\].shape\[0\] == in_types\[2\].shape\[0\]"),
    (lambda xs, t: (xs, t[:, 0]), "ndim == 2"),
    (lambda xs, t: ([Variable(numpy.zeros((2, 4, 1)))] * 3, t), "ndim == 2"),
])
def test_type_check_errors_are_readable(change, match):
    xs, t = change(*_good())
    with pytest.raises(type_check.InvalidType, match=match) as info:
        ctc(xs, t, 0)
    assert "Invalid operation is performed in: ConnectionistTemporalClassification" in str(info.value)


def test_blank_symbol_errors():
    xs, t = _good()
    with pytest.raises(type_check.InvalidType, match="blank_symbol"):
        ctc(xs, t, 4)
    with pytest.raises(ValueError, match="blank_symbol must be non-negative, got -1"):
        ctc(xs, t, -1)
    with pytest.raises(TypeError, match="blank_symbol must be an int, got float"):
        ConnectionistTemporalClassification(1.0)


def test_x_must_be_a_nonempty_list():
    xs, t = _good()
    with pytest.raises(TypeError, match=r"x must be a list or tuple of Variables \(.*\), got Variable"):
        ctc(xs[0], t, 0)
    with pytest.raises(TypeError, match="got ndarray"):
        ctc(numpy.stack([x.data for x in xs]), t, 0)
    with pytest.raises(ValueError, match="x is empty"):
        ctc([], t, 0)


def test_infeasible_alignment_names_the_sample():
    xs, _ = _good()
    t = numpy.array([[1, 2], [3, 3]], numpy.int32)  # [3, 3] needs 3 steps
    with pytest.raises(ValueError, match=r"sample 1 cannot be aligned: .*\[3, 3\] need at least 3 time "
                                         r"steps.*has 2"):
        ctc(xs, t, 0, input_length=numpy.array([3, 2], numpy.int32))
    ctc(xs, t, 0)  # three steps suffice


def test_lengths_of_the_wrong_shape_or_kind():
    xs, t = _good()
    # The function's inputs are (input_length, label_length, t, x_0, ...), as in Chainer 1.7.2.
    with pytest.raises(type_check.InvalidType, match=r"in_types\[0\].shape\[0\] == in_types\[2\].shape\[0\]"):
        ctc(xs, t, 0, input_length=numpy.array([3, 3, 3], numpy.int32))
    with pytest.raises(type_check.InvalidType, match=r"in_types\[1\].dtype.kind == i"):
        ctc(xs, t, 0, label_length=numpy.array([2.0, 2.0]))


@pytest.mark.parametrize("t, in_len, lab_len, match", [
    ([[1, 2], [3, 4]], None, None, r"sample 1 has label 4; labels must be in \[0, 4\)"),
    ([[1, 0], [3, 1]], None, None, r"sample 0 has label 0; .*blank symbol 0"),
    ([[1, 2], [3, -1]], None, [2, 2], "sample 1 has label -1"),
    ([[1, 2], [3, 1]], [3, 4], None, r"input_length\[1\] = 4 is outside \[0, 3\]"),
    ([[1, 2], [3, 1]], None, [-1, 2], r"label_length\[0\] = -1 is outside \[0, 2\]"),
])
def test_bad_values_raise_value_error(t, in_len, lab_len, match):
    xs, _ = _good()
    as_arr = lambda v: None if v is None else numpy.array(v, numpy.int32)  # noqa: E731
    with pytest.raises(ValueError, match=match):
        ctc(xs, numpy.array(t, numpy.int32), 0, input_length=as_arr(in_len), label_length=as_arr(lab_len))


def test_check_inputs_accepts_valid_batches():
    ctc_check_inputs(4, 3, numpy.array([[1, 1], [2, 0]]), numpy.array([3, 1]), numpy.array([2, 1]), 0)


# ------------------------------------------------------------------ against chainer 7.8.1

from _env import CHAINER_PEER as PEER, chainer_peer_available as _peer_available  # noqa: E402

_PEER_SCRIPT = """
import sys, numpy as np, chainer, chainer.functions as F
d = sys.argv[1]
inp = np.load(d + '/in.npz')
out = {}
for case in ('plain', 'lengths'):
    xs = [chainer.Variable(a) for a in inp['x']]
    kw = {}
    if case == 'lengths':
        kw = dict(input_length=inp['in_len'], label_length=inp['lab_len'])
    loss = F.connectionist_temporal_classification(xs, inp['t'], int(inp['blank']), **kw)
    loss.grad = np.array(1.5, loss.dtype)
    loss.backward()
    out[case + '_loss'] = loss.array
    out[case + '_grad'] = np.stack([v.grad for v in xs])
np.savez(d + '/out.npz', **out)
"""


@pytest.mark.skipif(not _peer_available(), reason=f"no Python with chainer at {PEER}")
@pytest.mark.parametrize("dtype, rtol", [(numpy.float64, 1e-10), (numpy.float32, 1e-4)])
def test_matches_chainer_781(tmp_path, dtype, rtol):
    nT, nB, nV, blank = 6, 3, 5, 2
    X = numpy.stack(_scores(nT, nB, nV, seed=11, dtype=dtype)) * 2
    t = numpy.array([[0, 0, 1], [3, 4, 4], [1, 3, 0]], numpy.int32)
    in_len = numpy.array([6, 5, 3], numpy.int32)
    lab_len = numpy.array([3, 2, 1], numpy.int32)
    numpy.savez(tmp_path / "in.npz", x=X, t=t, in_len=in_len, lab_len=lab_len, blank=blank)
    proc = subprocess.run([PEER, "-c", textwrap.dedent(_PEER_SCRIPT), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"the chainer peer failed:\n{proc.stdout}\n{proc.stderr}"
    ref = numpy.load(tmp_path / "out.npz")
    for case, kw in (("plain", {}), ("lengths", dict(input_length=in_len, label_length=lab_len))):
        vs = [Variable(a.copy()) for a in X]
        loss = ctc(vs, t, blank, **kw)
        loss.grad = numpy.array(1.5, dtype)
        loss.backward()
        assert loss.data.dtype == ref[case + "_loss"].dtype
        numpy.testing.assert_allclose(loss.data, ref[case + "_loss"], rtol=rtol, err_msg=case)
        grads = numpy.stack([v.grad for v in vs])
        numpy.testing.assert_allclose(grads, ref[case + "_grad"], rtol=rtol, atol=rtol * 1e-2, err_msg=case)
