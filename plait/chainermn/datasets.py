"""`scatter_dataset`: split root's dataset into one equal-length share per rank.

As in ChainerMN 1.3: the dataset (after an optional permutation) is cut into `size`
contiguous blocks of ceil(n / size) examples, block i starting at floor(n * i / size); so every
rank gets the same number of examples, and neighbouring blocks share one example when size does
not divide n. Unlike ChainerMN, which broadcasts the whole dataset to every rank, root sends each
rank only its block (one bounded MPI scatter).
"""
from __future__ import annotations

from typing import Any, List, Optional

import numpy


class DataSizeError(RuntimeError):
    """A dataset that cannot be split as asked (kept for ChainerMN's name)."""


def _block(n: int, size: int, i: int) -> slice:
    share = (n + size - 1) // size
    start = n * i // size
    return slice(start, start + share)


def _take(dataset: Any, indices: numpy.ndarray) -> Any:
    """The examples at `indices`: an array for an array dataset, a list otherwise."""
    if isinstance(dataset, numpy.ndarray):
        return dataset[indices]
    if type(dataset).__module__.split(".", 1)[0] == "cupy":
        import cupy

        return cupy.asnumpy(dataset[cupy.asarray(indices)])
    return [dataset[int(i)] for i in indices]


def scatter_dataset(dataset: Any, comm: Any, root: int = 0, shuffle: bool = False, seed: Optional[int] = None,
                    max_buf_len: Optional[int] = None) -> Any:
    """Rank `root`'s dataset split across the ranks of `comm`; returns this rank's share.

    comm: a communicator of create_communicator (bounded by PLAIT_DIST_TIMEOUT), or an mpi4py
      communicator.
    dataset: on root, anything with len() and integer indexing (a list, a numpy array, a
      Chainer dataset); ignored (may be None) on the other ranks.
    shuffle: permute the examples first (numpy.random.RandomState(seed).permutation, on root).
      To split several aligned datasets (inputs and labels) alike, give them the same seed.
    max_buf_len: accepted for ChainerMN's signature; plait sends any size in one message.

    Returns, on every rank, ceil(n / size) examples: a numpy array of them when the dataset is
    a numpy array (so Chainer 1.7.2 code can index it with an array of indices; a CuPy array
    comes back as CuPy on the current device), otherwise a list. Each share is in dataset
    order (or permutation order); the i-th rank's is block i.
    """
    size, rank = comm.size, comm.rank
    if not isinstance(root, (int, numpy.integer)) or not 0 <= int(root) < size:
        raise ValueError(f"scatter_dataset: root {root!r} is not a rank in 0..{size - 1}")
    shares: Optional[List[Any]] = None
    on_gpu = False
    if rank == root:
        try:
            if dataset is None:
                raise ValueError(f"scatter_dataset: rank {root} (the root) was given no dataset")
            n = len(dataset)
            order = numpy.random.RandomState(seed).permutation(n) if shuffle else numpy.arange(n)
            on_gpu = type(dataset).__module__.split(".", 1)[0] == "cupy"
            shares = [_take(dataset, order[_block(n, size, i)]) for i in range(size)]
        except (TypeError, ValueError):
            if hasattr(comm, "_refuse"):  # the other ranks raise too, pointing to the root
                comm._refuse(lambda: comm._scatter_obj(None, int(root), "scatter_dataset"))
            raise
    objs = None if shares is None else [(share, on_gpu) for share in shares]
    if hasattr(comm, "_scatter_obj"):
        mine, on_gpu = comm._scatter_obj(objs, int(root), "scatter_dataset")
    else:  # an mpi4py communicator (ChainerMN accepts one too): its own, unbounded, scatter
        mine, on_gpu = comm.scatter(objs, root=int(root))
    if on_gpu:
        import cupy

        return cupy.asarray(mine)
    return mine


def create_empty_dataset(dataset: Any) -> List[tuple]:
    """A dataset of len(dataset) empty tuples (for models that take no input, as ChainerMN's)."""
    return [()] * len(dataset)


__all__ = ["DataSizeError", "create_empty_dataset", "scatter_dataset"]
