"""The function library, part 2, against the real Chainer (7.8.1, run in its own interpreter).

Chainer 7 kept these functions' math from 1.7.2 (it added `reduce=` options whose defaults
give the old results). Both sides get the same float64 inputs and output gradients; outputs
and input gradients must agree. Skips when the Chainer interpreter is missing.
"""
import subprocess
import textwrap

import numpy
import pytest

from plait.chainer import Variable
from plait.chainer.functions.activation.clipped_relu import clipped_relu
from plait.chainer.functions.activation.elu import elu
from plait.chainer.functions.activation.lstm import lstm
from plait.chainer.functions.activation.maxout import maxout
from plait.chainer.functions.activation.prelu import prelu
from plait.chainer.functions.activation.slstm import slstm
from plait.chainer.functions.activation.softplus import softplus
from plait.chainer.functions.array.select_item import select_item
from plait.chainer.functions.array.split_axis import split_axis
from plait.chainer.functions.loss.contrastive import contrastive
from plait.chainer.functions.loss.cross_covariance import cross_covariance
from plait.chainer.functions.loss.hinge import hinge
from plait.chainer.functions.loss.sigmoid_cross_entropy import sigmoid_cross_entropy
from plait.chainer.functions.loss.vae import bernoulli_nll, gaussian_kl_divergence, gaussian_nll
from plait.chainer.functions.math.batch_l2_norm_squared import batch_l2_norm_squared
from plait.chainer.functions.math.batch_matmul import batch_matmul
from plait.chainer.functions.math.det import batch_det, det
from plait.chainer.functions.math.inv import batch_inv
from plait.chainer.functions.math.minmax import max as f_max
from plait.chainer.functions.normalization.batch_normalization import (
    batch_normalization,
    fixed_batch_normalization,
)
from plait.chainer.functions.normalization.local_response_normalization import local_response_normalization

from _env import CHAINER_PEER as PEER, chainer_peer_available as _peer_available  # noqa: E402


pytestmark = pytest.mark.skipif(not _peer_available(), reason=f"no Python with chainer at {PEER}")


def _r(*shape, seed, low=-1.0, high=1.0):
    return numpy.random.RandomState(seed).uniform(low, high, shape)


def _labels(*values):
    return numpy.array(values, dtype=numpy.int32)


# name -> (plait call, the same call as Chainer 7 source text, inputs); every output gets a gradient.
CASES = {
    "clipped_relu": (lambda x: clipped_relu(x, 0.7), "F.clipped_relu(x0, 0.7)", (_r(3, 4, seed=1),)),
    "elu": (lambda x: elu(x, 0.5), "F.elu(x0, 0.5)", (_r(3, 4, seed=2),)),
    "softplus": (lambda x: softplus(x, 2.0), "F.softplus(x0, 2.0)", (_r(3, 4, seed=3, low=-5, high=5),)),
    "lstm": (lstm, "F.lstm(x0, x1)", (_r(2, 3, seed=4), _r(2, 12, seed=5))),
    "slstm": (slstm, "F.slstm(x0, x1, x2, x3)",
              (_r(2, 3, seed=6), _r(2, 3, seed=7), _r(2, 12, seed=8), _r(2, 12, seed=9))),
    "maxout": (lambda x: maxout(x, 3), "F.maxout(x0, 3)", (_r(2, 6, 2, seed=10),)),
    "prelu": (prelu, "F.prelu(x0, x1)", (_r(2, 3, 4, seed=11), _r(3, seed=12))),
    "select_item": (select_item, "F.select_item(x0, x1)", (_r(3, 4, seed=13), _labels(1, 0, 3))),
    "split_axis": (lambda x: split_axis(x, [1, 3], 1), "F.split_axis(x0, [1, 3], 1)", (_r(2, 5, seed=14),)),
    "batch_l2_norm_squared": (batch_l2_norm_squared, "F.batch_l2_norm_squared(x0)", (_r(3, 2, 2, seed=15),)),
    "batch_matmul": (lambda a, b: batch_matmul(a, b, transa=True), "F.matmul(x0, x1, transa=True)",
                     (_r(2, 4, 3, seed=16), _r(2, 4, 5, seed=17))),
    "batch_inv": (batch_inv, "F.batch_inv(x0)", (_r(2, 3, 3, seed=18) + 3 * numpy.eye(3),)),
    "batch_det": (batch_det, "F.batch_det(x0)", (_r(3, 4, 4, seed=42) + 2 * numpy.eye(4),)),
    "det": (det, "F.det(x0)", (_r(3, 3, seed=43) + 2 * numpy.eye(3),)),
    "max": (lambda x: f_max(x, axis=1), "F.max(x0, axis=1)", (_r(3, 4, 2, seed=19),)),
    "batch_normalization": (lambda x, g, b: batch_normalization(x, g, b, eps=1e-3),
                            "F.batch_normalization(x0, x1, x2, eps=1e-3)",
                            (_r(5, 3, 2, seed=20), _r(3, seed=21), _r(3, seed=22))),
    "fixed_batch_normalization": (
        lambda x, g, b, m, v: fixed_batch_normalization(x, g, b, m, v, eps=1e-3),
        "F.fixed_batch_normalization(x0, x1, x2, x3, x4, eps=1e-3)",
        (_r(5, 3, 2, seed=23), _r(3, seed=24), _r(3, seed=25), _r(3, seed=26), _r(3, seed=27, low=0.5, high=2))),
    "local_response_normalization": (
        lambda x: local_response_normalization(x, n=3, k=1.5, alpha=0.3, beta=0.6),
        "F.local_response_normalization(x0, n=3, k=1.5, alpha=0.3, beta=0.6)", (_r(2, 6, 3, seed=28),)),
    "sigmoid_cross_entropy": (sigmoid_cross_entropy, "F.sigmoid_cross_entropy(x0, x1)",
                              (_r(2, 3, seed=29), numpy.array([[0, 1, -1], [1, 1, 0]], dtype=numpy.int32))),
    "sigmoid_cross_entropy_unnormalized": (
        lambda x, t: sigmoid_cross_entropy(x, t, normalize=False), "F.sigmoid_cross_entropy(x0, x1, normalize=False)",
        (_r(2, 3, seed=29), numpy.array([[0, 1, -1], [1, 1, 0]], dtype=numpy.int32))),
    "hinge_L1": (hinge, "F.hinge(x0, x1)", (_r(3, 4, seed=30), _labels(0, 2, 3))),
    "hinge_L2": (lambda x, t: hinge(x, t, "L2"), "F.hinge(x0, x1, 'L2')", (_r(3, 4, seed=30), _labels(0, 2, 3))),
    "contrastive": (lambda a, b, y: contrastive(a, b, y, margin=1.2), "F.contrastive(x0, x1, x2, margin=1.2)",
                    (_r(4, 3, seed=31), _r(4, 3, seed=32), _labels(0, 1, 0, 1))),
    "cross_covariance": (cross_covariance, "F.cross_covariance(x0, x1)", (_r(5, 3, seed=33), _r(5, 2, seed=34))),
    "bernoulli_nll": (bernoulli_nll, "F.bernoulli_nll(x0, x1)", (_r(2, 3, seed=35, low=0, high=1), _r(2, 3, seed=36))),
    "gaussian_kl_divergence": (gaussian_kl_divergence, "F.gaussian_kl_divergence(x0, x1)",
                               (_r(2, 3, seed=37), _r(2, 3, seed=38))),
    "gaussian_nll": (gaussian_nll, "F.gaussian_nll(x0, x1, x2)", (_r(2, 3, seed=39), _r(2, 3, seed=40), _r(2, 3, seed=41))),
}

_PEER_SCRIPT = """
import json, sys, warnings, numpy as np, chainer, chainer.functions as F
warnings.simplefilter('ignore')
d = sys.argv[1]
calls = json.load(open(d + '/calls.json'))
for name, call in calls.items():
    data = np.load(d + '/in_' + name + '.npz')
    n_in = sum(1 for k in data.files if k.startswith('x'))
    xs = [chainer.Variable(data['x%d' % i]) for i in range(n_in)]
    ys = eval(call, {'F': F}, {('x%d' % i): xs[i] for i in range(n_in)})
    ys = ys if isinstance(ys, tuple) else (ys,)
    chainer.backward(list(ys), [chainer.Variable(data['gy%d' % i]) for i in range(len(ys))])
    out = {('y%d' % i): y.array for i, y in enumerate(ys)}
    out.update({('gx%d' % i): x.grad for i, x in enumerate(xs) if x.array.dtype.kind == 'f'})
    np.savez(d + '/out_' + name + '.npz', **out)
"""


@pytest.fixture(scope="module")
def plait_and_peer(tmp_path_factory):
    d = tmp_path_factory.mktemp("peer_more")
    ours = {}
    for name, (fn, _, inputs) in CASES.items():
        xs = [Variable(x.copy()) for x in inputs]
        ys = fn(*xs)
        ys = ys if isinstance(ys, tuple) else (ys,)
        gys = [_r(*y.data.shape, seed=100 + i) for i, y in enumerate(ys)]
        for y, gy in zip(ys, gys):
            y.grad = gy
        ys[0].backward()
        ours[name] = ([y.data for y in ys], {i: x.grad for i, x in enumerate(xs) if x.data.dtype.kind == "f"})
        arrays = {f"x{i}": x for i, x in enumerate(inputs)}
        arrays.update({f"gy{i}": gy for i, gy in enumerate(gys)})
        numpy.savez(d / f"in_{name}.npz", **arrays)
    import json

    (d / "calls.json").write_text(json.dumps({name: call for name, (_, call, _) in CASES.items()}))
    proc = subprocess.run([PEER, "-c", textwrap.dedent(_PEER_SCRIPT), str(d)],
                          capture_output=True, text=True, timeout=300, cwd="/")
    if proc.returncode != 0:
        raise AssertionError(f"the chainer peer failed:\n{proc.stdout}\n{proc.stderr}")
    return ours, d


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_chainer(plait_and_peer, name):
    ours, d = plait_and_peer
    ys, gxs = ours[name]
    theirs = numpy.load(d / f"out_{name}.npz")
    assert len([k for k in theirs.files if k.startswith("y")]) == len(ys)
    for i, y in enumerate(ys):
        numpy.testing.assert_allclose(y, theirs[f"y{i}"], rtol=1e-9, atol=1e-12, err_msg=f"{name}: output {i}")
    assert sorted(gxs) == sorted(int(k[2:]) for k in theirs.files if k.startswith("gx"))
    for i, gx in gxs.items():
        numpy.testing.assert_allclose(gx, theirs[f"gx{i}"], rtol=1e-9, atol=1e-12, err_msg=f"{name}: grad {i}")
