"""Data parallelism for the Thinc face: averaged gradients before every optimizer step."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from ._comm import get_communicator


def shard(data: Any, rank: int, size: int) -> Any:
    """Rank `rank`'s share of `data` (a list, tuple, numpy array or other sliceable sequence).

    The shard is strided, data[rank::size], after dropping the last len(data) % size items so
    that every rank gets the same number of items (and so takes the same number of steps). With
    a per-rank batch size B, the i-th batches of the ranks together hold exactly the items of the
    i-th batch of size B * size of the unsharded data: the run matches one process with the big
    batch. Shuffle before sharding with the same seed on every rank.
    """
    for label, value in (("rank", rank), ("size", size)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"shard: {label} must be an int, got {type(value).__name__}")
    if size < 1:
        raise ValueError(f"shard: size must be at least 1, got {size}")
    if not 0 <= rank < size:
        raise ValueError(f"shard: rank must be in 0..{size - 1}, got {rank}")
    try:
        n = len(data)
    except TypeError:
        raise TypeError(f"shard: data must be a sized, sliceable sequence (list, tuple, array), got {type(data).__name__}") from None
    usable = n - n % size
    try:
        return data[rank:usable:size]
    except TypeError:
        raise TypeError(f"shard: data of type {type(data).__name__} cannot be sliced") from None


class DataParallel:
    """Train one Thinc-face model on several ranks as if on one batch of all ranks' examples.

    Constructing it broadcasts rank 0's parameters to every rank (so all ranks start alike; the
    model must be initialized first). `finish_update(optimizer)` averages every gradient over the
    ranks and then calls `model.finish_update(optimizer)`: every rank takes the same step and so
    keeps identical weights and optimizer state. Forward and backward passes go to the model
    unchanged (`begin_update`, `predict`, calling the wrapper).
    """

    def __init__(self, model: Any, comm: Optional[Any] = None, *, broadcast: bool = True) -> None:
        self.model = model
        self.comm = get_communicator() if comm is None else comm
        if broadcast:
            self.comm.bcast_params(model)

    def __repr__(self) -> str:
        return f"DataParallel({self.model.name!r}, {self.comm!r})"

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def size(self) -> int:
        return self.comm.size

    def begin_update(self, X: Any) -> Tuple[Any, Callable]:
        return self.model.begin_update(X)

    def __call__(self, X: Any, is_train: bool) -> Tuple[Any, Callable]:
        return self.model(X, is_train)

    def predict(self, X: Any) -> Any:
        return self.model.predict(X)

    def finish_update(self, optimizer: Any) -> None:
        distributed_finish_update(self.model, optimizer, self.comm)


def distributed_finish_update(model: Any, optimizer: Any, comm: Optional[Any] = None) -> None:
    """Average `model`'s gradients over the ranks of `comm`, then `model.finish_update(optimizer)`."""
    (get_communicator() if comm is None else comm).allreduce_grads(model)
    model.finish_update(optimizer)
