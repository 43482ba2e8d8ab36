"""BinaryHierarchicalSoftmax and negative sampling (functions and links) of the Chainer face.

Forward results are compared with NumPy written out path by path / sum by sum, gradients with
central differences in float64, and (when a Python with chainer 7.8.1 is present) both with the
real Chainer on the same weights and the same noise words.
"""
import itertools
import subprocess
import textwrap

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.chainer import Variable, gradient_check, serializers
from plait.chainer.functions.loss.hierarchical_softmax import BinaryHierarchicalSoftmaxFunction
from plait.chainer.functions.loss.negative_sampling import NegativeSamplingFunction, negative_sampling
from plait.chainer.links.loss.hierarchical_softmax import BinaryHierarchicalSoftmax
from plait.chainer.links.loss.negative_sampling import NegativeSampling
from plait.chainer.utils import type_check

from _env import HAS_GPU

create_huffman_tree = BinaryHierarchicalSoftmax.create_huffman_tree


def _sigmoid(z):
    return 1.0 / (1.0 + numpy.exp(-z))


def _reference_paths(tree):
    """{word: [(node, sign), ...]} by plain recursion: nodes numbered in pre-order, left = +1."""
    out, counter = {}, itertools.count()

    def visit(node, path):
        if isinstance(node, tuple):
            k = next(counter)
            visit(node[0], path + [(k, 1.0)])
            visit(node[1], path + [(k, -1.0)])
        else:
            out[node] = path

    visit(tree, [])
    return out


def _reference_hsm_loss(x, t, W, tree):
    paths = _reference_paths(tree)
    total = 0.0
    for xb, word in zip(x, t):
        p = 1.0
        for node, sign in paths[int(word)]:
            p *= _sigmoid(sign * float(W[node] @ xb))
        total -= numpy.log(p)
    return total


def _hsm_loss(x, t, W, tree):
    return float(BinaryHierarchicalSoftmaxFunction(tree)(x, t, W).data)


TREE = ((0, (1, 2)), ((3, 4), (5, (6, 7))))  # 7 internal nodes, depths 2..4


# ---------------------------------------------------------------------------------------------
# Hierarchical softmax


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_hsm_forward_matches_explicit_path_products(dtype):
    rng = numpy.random.default_rng(0)
    x = rng.normal(size=(6, 5)).astype(dtype)
    W = rng.normal(size=(7, 5)).astype(dtype)
    t = numpy.array([0, 7, 3, 3, 6, 1], dtype=numpy.int32)
    y = BinaryHierarchicalSoftmaxFunction(TREE)(x, t, W)
    assert y.data.shape == () and y.data.dtype == dtype
    numpy.testing.assert_allclose(float(y.data), _reference_hsm_loss(x, t, W, TREE),
                                  rtol=1e-5 if dtype == numpy.float32 else 1e-12)


def test_hsm_path_tables_follow_preorder_and_left_plus():
    tables = BinaryHierarchicalSoftmaxFunction(((3, 1), (2, 0))).tables
    assert tables.n_nodes == 3 and tables.n_vocab == 4
    paths = {w: tables.paths[tables.begins[w]:tables.begins[w + 1]].tolist() for w in range(4)}
    codes = {w: tables.codes[tables.begins[w]:tables.begins[w + 1]].tolist() for w in range(4)}
    assert paths == {3: [0, 1], 1: [0, 1], 2: [0, 2], 0: [0, 2]}
    assert codes == {3: [1, 1], 1: [1, -1], 2: [-1, 1], 0: [-1, -1]}


def test_hsm_extreme_scores_stay_finite():
    x = numpy.array([[1.0]], dtype=numpy.float32)
    W = numpy.array([[200.0]], dtype=numpy.float32)
    # Word 1 goes right at the root: -log sigmoid(-200) = 200 (no overflow to inf).
    y = BinaryHierarchicalSoftmaxFunction((0, 1))(x, numpy.array([1], numpy.int32), W)
    numpy.testing.assert_allclose(float(y.data), 200.0, rtol=1e-6)
    y0 = BinaryHierarchicalSoftmaxFunction((0, 1))(x, numpy.array([0], numpy.int32), W)
    assert 0.0 <= float(y0.data) < 1e-30


def test_hsm_gradient_check_float64():
    rng = numpy.random.default_rng(1)
    x = rng.normal(size=(5, 4))
    W = rng.normal(size=(7, 4))
    t = numpy.array([7, 0, 4, 7, 2], dtype=numpy.int32)  # repeated word: shared nodes accumulate
    gradient_check.check_backward(lambda x, t, W: BinaryHierarchicalSoftmaxFunction(TREE)(x, t, W),
                                  (x, t, W), None, eps=1e-6, atol=1e-7, rtol=1e-6)


def test_hsm_gradient_scales_with_upstream_grad():
    rng = numpy.random.default_rng(2)
    x, W = Variable(rng.normal(size=(3, 4))), Variable(rng.normal(size=(7, 4)))
    t = numpy.array([1, 5, 6], dtype=numpy.int32)
    y = BinaryHierarchicalSoftmaxFunction(TREE)(x, t, W)
    y.grad = numpy.array(1.0)
    y.backward()
    gx1, gW1 = x.grad.copy(), W.grad.copy()
    x.cleargrad(), W.cleargrad()
    y = BinaryHierarchicalSoftmaxFunction(TREE)(x, t, W)
    y.grad = numpy.array(-2.5)
    y.backward()
    numpy.testing.assert_allclose(x.grad, -2.5 * gx1, rtol=1e-12)
    numpy.testing.assert_allclose(W.grad, -2.5 * gW1, rtol=1e-12)
    # Rows of nodes off every path get no gradient: word 1 passes nodes 0, 1, 2; word 5 nodes
    # 0, 3, 5; word 6 nodes 0, 3, 5, 6. Node 4 (parent of words 3 and 4) is on none.
    assert not W.grad[4].any() and all(W.grad[k].any() for k in (0, 1, 2, 3, 5, 6))


def test_huffman_tree_matches_spec_example():
    assert create_huffman_tree({0: 8, 1: 5, 2: 6, 3: 4}) == ((3, 1), (2, 0))


def test_huffman_tree_ties_follow_insertion_order():
    assert create_huffman_tree({"a": 1, "b": 1, "c": 1, "d": 1}) == (("a", "b"), ("c", "d"))
    assert create_huffman_tree({7: 3.5}) == 7
    with pytest.raises(ValueError, match="empty"):
        create_huffman_tree({})
    with pytest.raises(ValueError, match="word 2"):
        create_huffman_tree({1: 3, 2: -1})


def _codes_of(tables, word):
    return tuple(tables.codes[tables.begins[word]:tables.begins[word + 1]].tolist())


@settings(max_examples=25, deadline=None)
@given(counts=st.lists(st.integers(min_value=1, max_value=1000), min_size=2, max_size=40),
       seed=st.integers(0, 2**31 - 1))
def test_huffman_codes_prefix_free_optimal_and_probabilities_sum_to_one(counts, seed):
    word_counts = dict(enumerate(counts))
    tree = create_huffman_tree(word_counts)
    tables = BinaryHierarchicalSoftmaxFunction(tree).tables
    n = len(counts)
    assert tables.n_vocab == n and tables.n_nodes == n - 1 and tables.is_leaf.all()
    codes = [_codes_of(tables, w) for w in range(n)]
    for a, b in itertools.permutations(range(n), 2):
        assert codes[b][:len(codes[a])] != codes[a], f"code of word {a} is a prefix of word {b}'s"
    # Huffman: the count-weighted depth equals the sum of all merged weights.
    merged, pool = 0, sorted(counts)
    while len(pool) > 1:
        s = pool.pop(0) + pool.pop(0)
        merged += s
        pool = sorted(pool + [s])
    assert sum(c * len(code) for c, code in zip(counts, codes)) == merged
    # The leaf probabilities of any input form a distribution.
    rng = numpy.random.default_rng(seed)
    x = rng.normal(size=(1, 3))
    W = rng.normal(size=(n - 1, 3))
    f = BinaryHierarchicalSoftmaxFunction(tables)
    total = sum(numpy.exp(-float(BinaryHierarchicalSoftmaxFunction(f.tables)(x, numpy.array([w], numpy.int32), W).data))
                for w in range(n))
    numpy.testing.assert_allclose(total, 1.0, rtol=1e-10)


def test_hsm_rejects_bad_trees_labels_and_shapes():
    with pytest.raises(ValueError, match="2-tuple"):
        BinaryHierarchicalSoftmaxFunction((0, 1, 2))
    with pytest.raises(TypeError, match="word IDs"):
        BinaryHierarchicalSoftmaxFunction(("a", "b"))
    with pytest.raises(ValueError, match="twice"):
        BinaryHierarchicalSoftmaxFunction((0, (1, 0)))
    x = numpy.zeros((2, 3), numpy.float32)
    W = numpy.zeros((2, 3), numpy.float32)
    tree = (0, (2, 3))  # word 1 is not a leaf
    with pytest.raises(ValueError, match="label 1 is not a leaf"):
        BinaryHierarchicalSoftmaxFunction(tree)(x, numpy.array([0, 1], numpy.int32), W)
    with pytest.raises(ValueError, match="label 9 is not a leaf"):
        BinaryHierarchicalSoftmaxFunction(tree)(x, numpy.array([9, 0], numpy.int32), W)
    with pytest.raises(type_check.InvalidType):
        BinaryHierarchicalSoftmaxFunction(tree)(x, numpy.array([0, 2], numpy.int32), W[:1])
    with pytest.raises(type_check.InvalidType):
        BinaryHierarchicalSoftmaxFunction(tree)(x, numpy.array([0, 2], numpy.int32), W.astype(numpy.float64))


def test_hsm_deep_skewed_tree_needs_no_recursion():
    tree = 0
    for w in range(1, 3000):
        tree = (tree, w)
    tables = BinaryHierarchicalSoftmaxFunction(tree).tables
    assert tables.n_nodes == 2999 and tables.max_depth == 2999


def test_hsm_link_init_call_and_single_word_tree():
    numpy.random.seed(0)
    link = BinaryHierarchicalSoftmax(4, TREE)
    assert link.W.data.shape == (7, 4) and link.W.data.dtype == numpy.float32
    assert (link.W.data >= -1).all() and (link.W.data < 1).all() and link.W.data.std() > 0.3
    x = numpy.random.rand(3, 4).astype(numpy.float32)
    t = numpy.array([2, 5, 0], numpy.int32)
    link.cleargrads()
    y = link(x, t)
    numpy.testing.assert_allclose(float(y.data), _reference_hsm_loss(x, t, link.W.data, TREE), rtol=1e-5)
    y.backward()
    assert link.W.grad.shape == (7, 4) and numpy.isfinite(link.W.grad).all()
    # A vocabulary of one word: no decisions, probability 1, loss 0.
    single = BinaryHierarchicalSoftmax(4, create_huffman_tree({0: 5}))
    assert single.W.data.shape == (0, 4)
    xv = Variable(x[:2])
    y = single(xv, numpy.array([0, 0], numpy.int32))
    assert float(y.data) == 0.0
    y.backward()
    assert not xv.grad.any()
    with pytest.raises(ValueError, match="in_size"):
        BinaryHierarchicalSoftmax(0, TREE)


def test_hsm_link_npz_round_trip(tmp_path):
    numpy.random.seed(3)
    a = BinaryHierarchicalSoftmax(5, TREE)
    serializers.save_npz(str(tmp_path / "hsm.npz"), a)
    with numpy.load(tmp_path / "hsm.npz") as f:
        assert sorted(f.files) == ["W"]
    b = BinaryHierarchicalSoftmax(5, TREE)
    assert not numpy.array_equal(a.W.data, b.W.data)
    serializers.load_npz(str(tmp_path / "hsm.npz"), b)
    numpy.testing.assert_array_equal(a.W.data, b.W.data)
    x = numpy.random.rand(4, 5).astype(numpy.float32)
    t = numpy.array([1, 2, 3, 4], numpy.int32)
    assert float(a(x, t).data) == float(b(x, t).data)


# ---------------------------------------------------------------------------------------------
# Negative sampling


class _FixedSampler:
    """Returns the same drawn array on every call (a copy, so callers may write into it)."""

    def __init__(self, drawn):
        self.drawn = numpy.asarray(drawn, dtype=numpy.int32)
        self.shapes = []

    def __call__(self, shape):
        self.shapes.append(tuple(shape))
        return self.drawn.copy()


def _reference_ns_losses(x, t, W, drawn):
    out = []
    for b in range(len(x)):
        if t[b] == -1:
            out.append(0.0)
            continue
        row = -numpy.log(_sigmoid(float(W[t[b]] @ x[b])))
        for s in drawn[b, 1:]:
            row -= numpy.log(_sigmoid(-float(W[s] @ x[b])))
        out.append(row)
    return numpy.array(out)


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_negative_sampling_forward_matches_explicit_sums(dtype):
    rng = numpy.random.default_rng(4)
    x = rng.normal(size=(4, 3)).astype(dtype)
    W = rng.normal(size=(6, 3)).astype(dtype)
    t = numpy.array([1, 5, -1, 1], numpy.int32)
    drawn = rng.integers(0, 6, size=(4, 3))
    sampler = _FixedSampler(drawn)
    y = negative_sampling(x, t, W, sampler, 2)
    assert sampler.shapes == [(4, 3)]  # one column more than sample_size, as Chainer asks
    assert y.data.shape == () and y.data.dtype == dtype
    ref = _reference_ns_losses(x, t, W, drawn)
    tol = 1e-5 if dtype == numpy.float32 else 1e-12
    numpy.testing.assert_allclose(float(y.data), ref.sum(), rtol=tol)
    per_row = negative_sampling(x, t, W, sampler, 2, reduce="no")
    assert per_row.data.shape == (4,) and per_row.data[2] == 0
    numpy.testing.assert_allclose(per_row.data, ref, rtol=tol)
    numpy.testing.assert_array_equal(sampler.drawn, drawn)  # the sampler's array is not written


@pytest.mark.parametrize("reduce", ["sum", "no"])
def test_negative_sampling_gradient_check_float64(reduce):
    rng = numpy.random.default_rng(5)
    x = rng.normal(size=(5, 4))
    W = rng.normal(size=(7, 4))
    t = numpy.array([3, 3, 0, -1, 6], numpy.int32)
    drawn = rng.integers(0, 7, size=(5, 4))
    drawn[0, 1:] = 3  # the true word drawn as noise too: both terms reach row 3 of W
    sampler = _FixedSampler(drawn)
    y_grad = None if reduce == "sum" else rng.normal(size=5)
    gradient_check.check_backward(lambda x, t, W: negative_sampling(x, t, W, sampler, 3, reduce=reduce),
                                  (x, t, W), y_grad, eps=1e-6, atol=1e-7, rtol=1e-6)


def test_negative_sampling_ignored_rows_get_no_gradient():
    rng = numpy.random.default_rng(6)
    x = Variable(rng.normal(size=(2, 3)))
    W = Variable(rng.normal(size=(4, 3)))
    t = numpy.array([-1, 2], numpy.int32)
    drawn = numpy.array([[0, 1, 1], [0, 3, 3]])
    y = negative_sampling(x, t, W, _FixedSampler(drawn), 2)
    y.backward()
    assert not x.grad[0].any() and x.grad[1].any()
    assert not W.grad[0].any() and not W.grad[1].any() and W.grad[2].any() and W.grad[3].any()


def test_negative_sampling_argument_errors():
    x = numpy.zeros((2, 3), numpy.float32)
    W = numpy.zeros((4, 3), numpy.float32)
    t = numpy.array([0, 1], numpy.int32)
    with pytest.raises(ValueError, match="'reduce'"):
        negative_sampling(x, t, W, _FixedSampler(numpy.zeros((2, 3))), 2, reduce="mean")
    with pytest.raises(TypeError, match="sampler"):
        negative_sampling(x, t, W, 3, 2)
    with pytest.raises(ValueError, match="must return an int array of shape"):
        negative_sampling(x, t, W, _FixedSampler(numpy.zeros((2, 2))), 2)
    with pytest.raises(ValueError, match="lie in 0..3"):
        negative_sampling(x, t, W, _FixedSampler([[0, 9, 1], [0, 1, 1]]), 2)
    with pytest.raises(type_check.InvalidType):
        negative_sampling(x, t, W[:, :2], _FixedSampler(numpy.zeros((2, 3))), 2)
    with pytest.raises(ValueError, match="sample_size"):
        NegativeSamplingFunction(_FixedSampler(numpy.zeros((2, 3))), -1)


def test_negative_sampling_link_sampler_and_zero_init():
    numpy.random.seed(7)
    counts = [10, 0, 40, 5, 1]
    link = NegativeSampling(3, counts, 4)
    assert link.W.data.shape == (5, 3) and not link.W.data.any()
    assert link.sample_size == 4
    # With W = 0 every term is -log sigmoid(0) = log 2: 1 + sample_size terms per row.
    x = numpy.random.rand(6, 3).astype(numpy.float32)
    t = numpy.array([0, 2, 2, 3, 4, 0], numpy.int32)
    numpy.testing.assert_allclose(float(link(x, t).data), 6 * 5 * numpy.log(2), rtol=1e-6)
    # The sampler draws in proportion to counts ** 0.75 (never a zero-count word).
    drawn = link.sampler.sample((20000,))
    freq = numpy.bincount(drawn, minlength=5) / drawn.size
    p = numpy.power(numpy.array(counts, float), 0.75)
    numpy.testing.assert_allclose(freq, p / p.sum(), atol=0.02)
    assert freq[1] == 0
    with pytest.raises(ValueError, match="counts"):
        NegativeSampling(3, [], 2)


def test_negative_sampling_link_trains_and_round_trips(tmp_path):
    numpy.random.seed(8)
    link = NegativeSampling(4, [5, 5, 5, 5, 5, 5], 2)
    x = numpy.random.normal(size=(8, 4)).astype(numpy.float32)
    t = numpy.random.randint(0, 6, size=8).astype(numpy.int32)
    before = float(link(x, t, reduce="no").data.sum())
    for _ in range(30):
        link.cleargrads()
        link(x, t).backward()
        link.W.data -= 0.1 * link.W.grad
    numpy.random.seed(0)
    after = float(link(x, t).data)
    assert after < before
    serializers.save_npz(str(tmp_path / "ns.npz"), link)
    other = NegativeSampling(4, [5, 5, 5, 5, 5, 5], 2)
    serializers.load_npz(str(tmp_path / "ns.npz"), other)
    numpy.testing.assert_array_equal(other.W.data, link.W.data)
    numpy.random.seed(1)
    a = float(link(x, t).data)
    numpy.random.seed(1)
    assert float(other(x, t).data) == a


# ---------------------------------------------------------------------------------------------
# Against the real Chainer (7.8.1, in its own interpreter)

from _env import CHAINER_PEER as PEER, chainer_peer_available as _peer_available  # noqa: E402

_PEER_SCRIPT = """
import sys, json, numpy as np, chainer, chainer.functions as F, chainer.links as L
from chainer import serializers
d = sys.argv[1]
inp = np.load(d + '/inputs.npz')
tree = eval(open(d + '/tree.txt').read())
out = {}
out['huffman'] = repr(L.BinaryHierarchicalSoftmax.create_huffman_tree(json.loads(open(d + '/counts.json').read(), object_hook=lambda o: {int(k): v for k, v in o.items()})))
hsm = L.BinaryHierarchicalSoftmax(inp['x'].shape[1], tree)
hsm.W.array[...] = inp['W_hsm']
hsm.cleargrads()
x = chainer.Variable(inp['x'])
loss = hsm(x, inp['t_hsm'])
loss.backward()
res = dict(hsm_loss=loss.array, hsm_gx=x.grad, hsm_gW=hsm.W.grad)
serializers.save_npz(d + '/chainer_hsm.npz', hsm)
drawn = inp['drawn']
x2 = chainer.Variable(inp['x'])
W2 = chainer.Variable(inp['W_ns'])
loss2 = F.negative_sampling(x2, inp['t_ns'], W2, lambda shape: drawn.copy(), drawn.shape[1] - 1)
loss2.backward()
res.update(ns_loss=loss2.array, ns_gx=x2.grad, ns_gW=W2.grad)
ns = L.NegativeSampling(inp['x'].shape[1], [3, 1, 4, 1, 5, 9, 2, 6], 2)
res.update(ns_W0=ns.W.array)
np.savez(d + '/peer.npz', **res)
open(d + '/huffman.txt', 'w').write(out['huffman'])
"""


@pytest.mark.skipif(not _peer_available(), reason=f"no Python with chainer at {PEER}")
def test_against_chainer_781(tmp_path):
    import json

    rng = numpy.random.default_rng(9)
    counts = {int(i): int(c) for i, c in enumerate(rng.integers(1, 50, size=8))}
    counts[3] = counts[5]  # a tie, to pin the tie-breaking order too
    tree = create_huffman_tree(counts)
    x = rng.normal(size=(6, 5)).astype(numpy.float32)
    W_hsm = rng.uniform(-1, 1, size=(7, 5)).astype(numpy.float32)
    t_hsm = numpy.array([0, 7, 3, 3, 5, 1], numpy.int32)
    W_ns = rng.normal(size=(8, 5)).astype(numpy.float32)
    t_ns = numpy.array([2, 2, 7, 0, 5, 1], numpy.int32)
    drawn = rng.integers(0, 8, size=(6, 4)).astype(numpy.int32)
    numpy.savez(tmp_path / "inputs.npz", x=x, W_hsm=W_hsm, t_hsm=t_hsm, W_ns=W_ns, t_ns=t_ns, drawn=drawn)
    (tmp_path / "tree.txt").write_text(repr(tree))
    (tmp_path / "counts.json").write_text(json.dumps(counts))
    proc = subprocess.run([PEER, "-c", textwrap.dedent(_PEER_SCRIPT), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"the chainer peer failed:\n{proc.stdout}\n{proc.stderr}"
    assert (tmp_path / "huffman.txt").read_text() == repr(tree)
    peer = numpy.load(tmp_path / "peer.npz")

    hsm = BinaryHierarchicalSoftmax(5, tree)
    hsm.W.data[...] = W_hsm
    hsm.cleargrads()
    xv = Variable(x.copy())
    loss = hsm(xv, t_hsm)
    loss.backward()
    numpy.testing.assert_allclose(loss.data, peer["hsm_loss"], rtol=1e-5)
    numpy.testing.assert_allclose(xv.grad, peer["hsm_gx"], rtol=1e-4, atol=1e-6)
    numpy.testing.assert_allclose(hsm.W.grad, peer["hsm_gW"], rtol=1e-4, atol=1e-6)
    # Chainer's saved link loads into plait's.
    other = BinaryHierarchicalSoftmax(5, tree)
    serializers.load_npz(str(tmp_path / "chainer_hsm.npz"), other)
    numpy.testing.assert_array_equal(other.W.data, W_hsm)

    xv, Wv = Variable(x.copy()), Variable(W_ns.copy())
    loss = negative_sampling(xv, t_ns, Wv, _FixedSampler(drawn), drawn.shape[1] - 1)
    loss.backward()
    numpy.testing.assert_allclose(loss.data, peer["ns_loss"], rtol=1e-5)
    numpy.testing.assert_allclose(xv.grad, peer["ns_gx"], rtol=1e-4, atol=1e-6)
    numpy.testing.assert_allclose(Wv.grad, peer["ns_gW"], rtol=1e-4, atol=1e-6)
    ns = NegativeSampling(5, [3, 1, 4, 1, 5, 9, 2, 6], 2)
    numpy.testing.assert_array_equal(ns.W.data, peer["ns_W0"])


# ---------------------------------------------------------------------------------------------
# On a GPU (CupyOps): the same losses and gradients as on the host


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
def test_links_on_gpu_match_cpu():
    import cupy

    numpy.random.seed(10)
    x = numpy.random.normal(size=(5, 4)).astype(numpy.float32)
    t = numpy.array([0, 7, 3, 3, 6], numpy.int32)
    hsm = BinaryHierarchicalSoftmax(4, TREE)
    hsm.cleargrads()
    y_cpu = hsm(x, t)
    y_cpu.backward()
    gW_cpu = hsm.W.grad.copy()
    hsm.to_gpu()
    hsm.cleargrads()
    y_gpu = hsm(cupy.asarray(x), cupy.asarray(t))
    y_gpu.backward()
    numpy.testing.assert_allclose(float(y_gpu.data), float(y_cpu.data), rtol=1e-5)
    numpy.testing.assert_allclose(cupy.asnumpy(hsm.W.grad), gW_cpu, rtol=1e-4, atol=1e-6)
    hsm.to_cpu()
    numpy.testing.assert_allclose(float(hsm(x, t).data), float(y_cpu.data), rtol=1e-6)

    W = numpy.random.normal(size=(8, 4)).astype(numpy.float32)
    drawn = numpy.random.randint(0, 8, size=(5, 3)).astype(numpy.int32)
    xs, Ws = Variable(x.copy()), Variable(W.copy())
    negative_sampling(xs, t, Ws, _FixedSampler(drawn), 2).backward()
    xg, Wg = Variable(cupy.asarray(x)), Variable(cupy.asarray(W))
    y = negative_sampling(xg, cupy.asarray(t), Wg, lambda shape: cupy.asarray(drawn), 2)
    y.backward()
    numpy.testing.assert_allclose(cupy.asnumpy(xg.grad), xs.grad, rtol=1e-4, atol=1e-6)
    numpy.testing.assert_allclose(cupy.asnumpy(Wg.grad), Ws.grad, rtol=1e-4, atol=1e-6)
    ns = NegativeSampling(4, [1, 2, 3, 4, 5, 6, 7, 8], 2).to_gpu()
    assert isinstance(ns(cupy.asarray(x), cupy.asarray(t)).data, cupy.ndarray)
