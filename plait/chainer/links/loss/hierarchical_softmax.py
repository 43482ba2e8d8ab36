"""BinaryHierarchicalSoftmax: a link holding one weight row per internal node of a word tree."""
import heapq
from typing import Any, Mapping

import numpy

from ... import link
from ...functions.loss import hierarchical_softmax as _hsm
from ..connection import _weights as _w


BinaryHierarchicalSoftmaxFunction = _hsm.BinaryHierarchicalSoftmaxFunction


class TreeParser:
    """Each leaf's path through a tree of nested 2-tuples: the internal node IDs (pre-order)
    and the codes (+1 left, -1 right) on the way down."""

    def __init__(self) -> None:
        self.next_id = 0
        self.paths: dict = {}
        self.codes: dict = {}

    def size(self) -> int:
        """The number of internal nodes of the last parsed tree."""
        return self.next_id

    def get_paths(self) -> dict:
        return self.paths

    def get_codes(self) -> dict:
        return self.codes

    def parse(self, tree: Any) -> None:
        found: dict = {}
        self.next_id = _hsm._walk(tree, found)
        self.paths = {w: numpy.array(nodes, dtype=numpy.int32) for w, (nodes, _) in found.items()}
        self.codes = {w: numpy.array(signs, dtype=numpy.float32) for w, (_, signs) in found.items()}


class BinaryHierarchicalSoftmax(link.Link):
    """Hierarchical softmax loss over a binary tree of word IDs. x (nB, in_size), t (nB,) -> ()

    W (n_nodes, in_size), one row per internal node of `tree` (nested 2-tuples with word IDs
    at the leaves), starts uniform in [-1, 1). The loss is the batch's summed -log p(t | x).
    """

    def __init__(self, in_size: int, tree: Any) -> None:
        super().__init__()
        _w.check_positive("BinaryHierarchicalSoftmax", "in_size", in_size)
        self._func = _hsm.BinaryHierarchicalSoftmaxFunction(tree)
        self.add_param("W", (self._func.tables.n_nodes, int(in_size)))
        self.W.data[...] = numpy.random.uniform(-1, 1, self.W.data.shape)

    def to_gpu(self, device: Any = None) -> "BinaryHierarchicalSoftmax":
        """Move W and the path tables to a GPU; returns self."""
        was_cpu = self._cpu
        super().to_gpu(device)
        if was_cpu:
            self._func.to_gpu(self._device_id)
        return self

    def to_cpu(self) -> "BinaryHierarchicalSoftmax":
        """Move W and the path tables to the host; returns self."""
        super().to_cpu()
        self._func.to_cpu()
        return self

    def __call__(self, x: Any, t: Any) -> Any:
        """The summed loss of words t (nB,) int32 given inputs x (nB, in_size)."""
        # A Function node remembers its inputs, so every call gets its own (sharing the tables).
        return _hsm.BinaryHierarchicalSoftmaxFunction(self._func.tables)(x, t, self.W)

    @staticmethod
    def create_huffman_tree(word_counts: Mapping[Any, float]) -> Any:
        """The Huffman tree (nested 2-tuples of the keys) of a {word: count} dict.

        The two lightest subtrees merge first, the lighter one on the left. Equal counts are
        ordered by the dict's iteration order, and a merged subtree takes the earlier position
        of its two parts, so the result is deterministic: {0: 8, 1: 5, 2: 6, 3: 4} gives
        ((3, 1), (2, 0)).
        """
        if not word_counts:
            raise ValueError("BinaryHierarchicalSoftmax.create_huffman_tree: word_counts is empty; give at least one word.")
        heap = []
        for order, (word, count) in enumerate(word_counts.items()):
            if not numpy.isfinite(count) or count < 0:
                raise ValueError(
                    f"BinaryHierarchicalSoftmax.create_huffman_tree: the count of word {word!r} must be "
                    f"finite and >= 0, got {count!r}."
                )
            heap.append((count, order, word))
        heapq.heapify(heap)
        # (count, order) is unique per entry, so the trees themselves are never compared.
        while len(heap) > 1:
            count1, order1, left = heapq.heappop(heap)
            count2, order2, right = heapq.heappop(heap)
            heapq.heappush(heap, (count1 + count2, min(order1, order2), (left, right)))
        return heap[0][2]
