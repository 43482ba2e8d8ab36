"""Binary hierarchical softmax: -log p(t | x) as a product of sigmoid decisions down a binary tree.

A tree is nested 2-tuples whose leaves are word IDs, e.g. ((3, 1), (2, 0)). Its internal nodes
are numbered in pre-order (the root is 0, then the left subtree, then the right one); row n of
W scores node n. Going left at a node counts as code +1, going right as -1, and a word's
probability is the product of sigmoid(code * W[node] . x) along its path.
"""
from typing import Any, Dict, List, Tuple

import numpy

from ... import cuda, function
from ...utils import type_check


class _PathTables:
    """Every word's path through a tree, flattened: node IDs, codes and each word's offset.

    paths (nP,) int32 and codes (nP,) float32 hold the paths one after another, word w's at
    begins[w]:begins[w + 1]; words that are not leaves of the tree have empty paths.
    """

    def __init__(self, tree: Any) -> None:
        node_paths: Dict[int, Tuple[List[int], List[float]]] = {}
        self.n_nodes = _walk(tree, node_paths)
        if not node_paths:
            raise ValueError(f"BinaryHierarchicalSoftmax: the tree {tree!r} has no leaves.")
        self.n_vocab = max(node_paths) + 1
        lengths = numpy.zeros(self.n_vocab, dtype=numpy.int32)
        for word, (nodes, _) in node_paths.items():
            lengths[word] = len(nodes)
        begins = numpy.zeros(self.n_vocab + 1, dtype=numpy.int32)
        numpy.cumsum(lengths, out=begins[1:])
        paths = numpy.zeros(int(begins[-1]), dtype=numpy.int32)
        codes = numpy.zeros(int(begins[-1]), dtype=numpy.float32)
        for word, (nodes, signs) in node_paths.items():
            paths[begins[word]:begins[word + 1]] = nodes
            codes[begins[word]:begins[word + 1]] = signs
        is_leaf = numpy.zeros(self.n_vocab, dtype=bool)
        is_leaf[list(node_paths)] = True
        self.paths, self.codes, self.begins, self.is_leaf = paths, codes, begins, is_leaf
        self.max_depth = int(lengths.max())

    def to_gpu(self, device: Any = None) -> None:
        for name in ("paths", "codes", "begins", "is_leaf"):
            setattr(self, name, cuda.to_gpu(getattr(self, name), device))

    def to_cpu(self) -> None:
        for name in ("paths", "codes", "begins", "is_leaf"):
            setattr(self, name, cuda.to_cpu(getattr(self, name)))


def _walk(tree: Any, out: Dict[int, Tuple[List[int], List[float]]]) -> int:
    """Record each leaf's (node IDs, codes) in `out`; returns the number of internal nodes."""
    n_nodes = 0
    nodes: List[int] = []
    signs: List[float] = []
    # An explicit stack: trees as deep as the vocabulary is large (skewed Huffman trees) would
    # overflow Python's recursion limit.
    stack: List[Any] = [("visit", tree)]
    while stack:
        action, node = stack.pop()
        if action == "pop":
            nodes.pop()
            signs.pop()
        elif action == "right":
            signs[-1] = -1.0
            stack.append(("visit", node))
        elif isinstance(node, tuple):
            if len(node) != 2:
                raise ValueError(
                    f"BinaryHierarchicalSoftmax: every internal node of the tree must be a 2-tuple "
                    f"(left, right), got a {len(node)}-tuple {node!r}."
                )
            nodes.append(n_nodes)
            signs.append(1.0)
            n_nodes += 1
            stack.extend([("pop", None), ("right", node[1]), ("visit", node[0])])
        else:
            if isinstance(node, bool) or not isinstance(node, (int, numpy.integer)) or node < 0:
                raise TypeError(
                    f"BinaryHierarchicalSoftmax: tree leaves must be word IDs (ints >= 0), got "
                    f"{type(node).__name__} {node!r}; build the tree with create_huffman_tree or "
                    f"map words to IDs first."
                )
            word = int(node)
            if word in out:
                raise ValueError(f"BinaryHierarchicalSoftmax: word {word} appears twice among the tree's leaves.")
            out[word] = (list(nodes), list(signs))
    return n_nodes


class BinaryHierarchicalSoftmaxFunction(function.Function):
    """x (nB, nI), t (nB,) int, W (n_nodes, nI) -> () summed -log p(t | x) over the batch."""

    def __init__(self, tree: Any) -> None:
        self.tables = tree if isinstance(tree, _PathTables) else _PathTables(tree)

    # Chainer's attribute names for the tables: every leaf's internal nodes (`paths`) and their
    # signs (`codes`) concatenated, leaf w's run being [begins[w], begins[w + 1]).
    @property
    def paths(self) -> Any:
        return self.tables.paths

    @property
    def codes(self) -> Any:
        return self.tables.codes

    @property
    def begins(self) -> Any:
        return self.tables.begins

    @property
    def parser_size(self) -> int:
        """The number of internal nodes (rows of W)."""
        return self.tables.n_nodes

    def to_gpu(self, device: Any = None) -> None:
        """Keep the path tables on a GPU (for inputs on that GPU)."""
        self.tables.to_gpu(device)

    def to_cpu(self) -> None:
        """Keep the path tables on the host."""
        self.tables.to_cpu()

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 3)
        x_type, t_type, w_type = in_types
        type_check.expect(
            x_type.dtype.kind == "f",
            x_type.ndim == 2,
            t_type.dtype.kind == "i",
            t_type.ndim == 1,
            x_type.shape[0] == t_type.shape[0],
            w_type.dtype == x_type.dtype,
            w_type.ndim == 2,
            w_type.shape[0] == self.tables.n_nodes,
            w_type.shape[1] == x_type.shape[1],
        )

    def _batch_paths(self, t: Any) -> Tuple[Any, Any]:
        """(node IDs (nB, nL) int32, codes (nB, nL)) for the words t; padding has code 0."""
        tab = self.tables
        xp = cuda.get_array_module(t)
        if tab.paths.shape[0] and cuda.get_array_module(tab.paths) is not xp:
            raise ValueError(
                "BinaryHierarchicalSoftmax: the path tables and the inputs live on different devices; "
                "move the link (or function) with to_gpu()/to_cpu() to where x and t are."
            )
        # Checked on the host only: on a GPU the test would synchronise every step.
        if xp is numpy and t.size:
            bad = (t < 0) | (t >= tab.n_vocab)
            bad[~bad] = ~tab.is_leaf[t[~bad]]
            if bad.any():
                raise ValueError(
                    f"BinaryHierarchicalSoftmax: label {int(t[bad][0])} is not a leaf of the tree "
                    f"(leaves are word IDs in 0..{tab.n_vocab - 1}); every label must be a word of the tree."
                )
        starts = tab.begins[t]
        lengths = tab.begins[t + 1] - starts
        nL = int(lengths.max()) if t.size else 0
        steps = xp.arange(nL, dtype=numpy.int32)
        valid = steps[None, :] < lengths[:, None]
        where = xp.where(valid, starts[:, None] + steps[None, :], 0)
        if not tab.paths.shape[0]:
            shape = (t.shape[0], nL)
            return xp.zeros(shape, dtype=numpy.int32), xp.zeros(shape, dtype=numpy.float32)
        return tab.paths[where], tab.codes[where] * valid

    def forward(self, inputs: tuple) -> tuple:
        x, t, W = inputs
        xp = cuda.get_array_module(x)
        nodes, codes = self._batch_paths(t)
        codes = codes.astype(x.dtype, copy=False)
        # (nB, nL): the score of each decision on the path, signed so that the step taken is +.
        z = xp.einsum("bln,bn->bl", W[nodes], x) * codes
        self._retained = (nodes, codes, z)
        # -log sigmoid(z) = log(1 + e^-z), taken without overflow; padding (code 0) gives log 2,
        # so it is masked out.
        loss = (xp.logaddexp(0, -z) * (codes != 0)).sum(dtype=x.dtype)
        return xp.asarray(loss, dtype=x.dtype).reshape(()),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, t, W = inputs
        xp = cuda.get_array_module(x)
        nodes, codes, z = self._retained
        gloss = grad_outputs[0]
        # d/dz [-log sigmoid(z)] = -sigmoid(-z) = -exp(-log(1 + e^z)); dz/d(W.x) = code.
        g = -xp.exp(-xp.logaddexp(0, z)) * codes * gloss  # (nB, nL), 0 on padding
        g = g.astype(x.dtype, copy=False)
        w = W[nodes]  # (nB, nL, nI)
        dx = xp.einsum("bl,bln->bn", g, w).astype(x.dtype, copy=False)
        dW = xp.zeros_like(W)
        if nodes.size:
            values = xp.ascontiguousarray(g[:, :, None] * x[:, None, :], dtype=W.dtype)
            # Nodes shared by several words of the batch must accumulate.
            cuda._ops_for(W).scatter_add(dW, xp.ascontiguousarray(nodes), values)
        return dx, None, dW
