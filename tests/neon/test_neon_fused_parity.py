"""The fused path against the numpy reference evaluator on seeded random op-trees.

Trees mix unary and binary elementwise ops, scalars, row/column broadcasting, strided and
transposed views and one reduction;
both paths must agree within float32 rounding (rtol 1e-4, atol 1e-5: the fused kernels may use
their own exp/log/tanh approximations, within a few ulps). Skipped when plait.neon._fuse is absent.
"""
import importlib

import numpy as np
import pytest

from plait.neon import NervanaCPU


def _fuse_available():
    try:
        return hasattr(importlib.import_module("plait.neon._fuse"), "execute")
    except ImportError:
        return False


pytestmark = pytest.mark.skipif(not _fuse_available(), reason="plait.neon._fuse not available")

UNARY = ["neg", "abs", "sqr", "tanh", "sig", "exp_small", "safelog_pos", "sqrt_pos", "sgn"]
BINARY = ["add", "sub", "mul", "div_safe", "maximum", "minimum", "gt", "le"]


def _random_tree(be, rs, leaves, depth):
    if depth == 0 or rs.rand() < 0.25:
        choice = rs.randint(4)
        if choice == 0:
            return float(np.round(rs.uniform(-2, 2), 3))
        return leaves[rs.randint(len(leaves))]
    if rs.rand() < 0.45:
        op = UNARY[rs.randint(len(UNARY))]
        x = _random_tree(be, rs, leaves, depth - 1)
        if isinstance(x, float):
            x = leaves[0] + x
        if op == "exp_small":
            return be.exp(be.tanh(x))
        if op == "safelog_pos":
            return be.safelog(be.absolute(x) + 0.1)
        if op == "sqrt_pos":
            return be.sqrt(be.absolute(x))
        return getattr(be, {"neg": "negative", "abs": "absolute", "sqr": "square", "tanh": "tanh",
                            "sig": "sig", "sgn": "sgn"}[op])(x)
    op = BINARY[rs.randint(len(BINARY))]
    a = _random_tree(be, rs, leaves, depth - 1)
    b = _random_tree(be, rs, leaves, depth - 1)
    if isinstance(a, float) and isinstance(b, float):
        a = leaves[0] * a
    if op == "div_safe":
        return a / (be.absolute(b) + 0.5) if not isinstance(b, float) else a / (abs(b) + 0.5)
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "maximum": lambda: be.maximum(a, b), "minimum": lambda: be.minimum(a, b),
            "gt": lambda: a > b, "le": lambda: a <= b}[op]()


@pytest.mark.parametrize("seed", range(12))
def test_random_trees_match_the_numpy_reference(monkeypatch, seed):
    rs = np.random.RandomState(seed)
    be = NervanaCPU(rng_seed=seed)
    m, n = 7, 33
    full = [be.array(rs.uniform(-2, 2, (m, n))) for _ in range(2)]
    col = be.array(rs.uniform(-2, 2, (m, 1)))
    row = be.array(rs.uniform(-2, 2, (1, n)))
    wide = be.array(rs.uniform(-2, 2, (m, n + 5)))
    tall = be.array(rs.uniform(-2, 2, (n, m)))
    views = [wide[:, 2:n + 2], tall.T]  # a strided slice and a transposed view
    tree = _random_tree(be, rs, full + [col, row] + views, depth=4)
    if isinstance(tree, float) or not hasattr(tree, "traverse"):
        tree = full[0] * 1.0 + tree
    reduce = rs.randint(3)
    if reduce == 1:
        tree = be.sum(tree, axis=0) * 0.5 + row
        shape = (1, n)
    elif reduce == 2:
        tree = be.max(tree, axis=1) - col
        shape = (m, 1)
    else:
        shape = (m, n)
    tree = tree + be.zeros(shape) if tuple(tree.shape) != shape else tree
    results = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("PLAIT_NEON_FUSE", mode)
        out = be.empty(shape)
        out[:] = tree
        results[mode] = out.get()
    np.testing.assert_allclose(results["1"], results["0"], rtol=1e-4, atol=1e-5,
                               err_msg=f"tree: {tree.pp()}")
