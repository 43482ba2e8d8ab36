"""Data parallelism for the Thinc face: averaged gradients before every optimizer step."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

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

    overlap=True (the default with two ranks or more) reduces the gradients during backprop: the
    buckets are laid out in backprop order (last layer first) and each is sent as soon as every
    parameter in it has received its gradient, while the earlier layers are still computing. It
    expects one `begin_update` and its backprop per `finish_update`; gradient accumulation over
    several begin_update calls needs overlap=False (refused with that advice otherwise).
    """

    def __init__(self, model: Any, comm: Optional[Any] = None, *, broadcast: bool = True, overlap: bool = True) -> None:
        self.model = model
        self.comm = get_communicator() if comm is None else comm
        if broadcast:
            self.comm.bcast_params(model)
        self.overlap = bool(overlap) and self.comm.size > 1 and hasattr(self.comm, "_start")
        self._session: Optional[_OverlapSession] = None
        #: How many gradient buckets of the last update were sent during backprop (overlap).
        self.overlapped_buckets = 0

    def __repr__(self) -> str:
        return f"DataParallel({self.model.name!r}, {self.comm!r})"

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def size(self) -> int:
        return self.comm.size

    def begin_update(self, X: Any) -> Tuple[Any, Callable]:
        if not self.overlap:
            return self.model.begin_update(X)
        if self._session is not None:
            session, self._session = self._session, None
            session.abandon()
            raise RuntimeError(
                "DataParallel(overlap=True): begin_update was called again before finish_update. Overlapped "
                "reduction sends each gradient as soon as backprop finishes it, so it expects one "
                "begin_update (and its backprop) per finish_update. To accumulate gradients over several "
                "batches, build DataParallel(model, comm, overlap=False)."
            )
        self._session = _OverlapSession(self.comm, self.model)
        return self._session.forward(X)

    def __call__(self, X: Any, is_train: bool) -> Tuple[Any, Callable]:
        if is_train:
            return self.begin_update(X)
        return self.model(X, is_train)

    def predict(self, X: Any) -> Any:
        return self.model.predict(X)

    def finish_update(self, optimizer: Any) -> None:
        session, self._session = self._session, None
        if not self.overlap:
            distributed_finish_update(self.model, optimizer, self.comm)
            return
        if session is None:
            # No forward on this rank (an empty share of the batch): the same buckets, in the
            # same order, as the ranks that overlapped, all sent now.
            session = _OverlapSession(self.comm, self.model)
        try:
            self.overlapped_buckets = session.finish()
        finally:
            session.close()
        self.model.finish_update(optimizer)


class _OverlapSession:
    """One update's overlapped gradient reduction (see DataParallel's overlap).

    During the forward pass, the number of times each node runs is counted (its _func wrapped);
    during backprop, the gradients each node's parameter store receives (inc_grad/set_grad). A parameter is ready when it got
    as many gradient contributions as its node ran; buckets, in backprop order, are packed and
    posted strictly in order as soon as all of theirs are ready, so that every rank posts the
    same reductions in the same order whatever its data. What is not ready by finish_update
    (a parameter without a gradient, a layer run in an unusual way) goes then, with the flags.
    """

    def __init__(self, comm: Any, model: Any) -> None:
        from ._comm import _labels, _param_entries

        self.comm = comm
        self.model = model
        # Backprop runs the layers last to first: the walk reversed fills the first buckets first.
        entries = list(reversed(_param_entries(model)))
        self.entries = entries
        self.like = [param for _node, _name, param in entries]
        self.labels = _labels(entries)
        self.plan = comm._plan(self.like, with_flags=True)
        self.flags = self.plan[-1].buffer[self.plan[-1].flags_at:]
        self.index_of: Dict[Tuple[int, str], int] = {(node.id, name): i for i, (node, name, _p) in enumerate(entries)}
        self.runs: Dict[int, int] = {}
        self.got = [0] * len(entries)
        self.bucket_of = [0] * len(entries)
        for b, bucket in enumerate(self.plan):
            for index, _offset, _size in bucket.items:
                self.bucket_of[index] = b
        self.posted = 0  # buckets posted so far (in order)
        self.requests: List[Any] = []
        self.late: Optional[str] = None
        self._saved: List[Tuple[Any, str, Any]] = []
        comm._begin("allreduce_grads (overlapped)")

    # --- hooks ---------------------------------------------------------------------------

    def forward(self, X: Any) -> Tuple[Any, Callable]:
        nodes = list(self.model.walk())
        for node in nodes:
            self._patch(node, "_func", self._counting(node, node._func))
        try:
            Y, backprop = self.model.begin_update(X)
        finally:
            self._restore("_func")
        for node in nodes:
            if node.id in self.runs and node.param_names:
                self._patch(node, "_params", _CountingStore(node._params, self._received))
        return Y, backprop

    def _patch(self, node: Any, attr: str, value: Any) -> None:
        # Model keeps these in slots (no instance __dict__): swapped, and swapped back.
        self._saved.append((node, attr, getattr(node, attr)))
        setattr(node, attr, value)

    def _restore(self, only: Optional[str] = None) -> None:
        keep = []
        for node, attr, previous in reversed(self._saved):
            if only is not None and attr != only:
                keep.append((node, attr, previous))
            else:
                setattr(node, attr, previous)
        self._saved = list(reversed(keep))

    def _counting(self, node: Any, func: Callable) -> Callable:
        runs = self.runs

        def run(model: Any, X: Any, is_train: bool) -> Any:
            runs[node.id] = runs.get(node.id, 0) + 1
            return func(model, X, is_train=is_train)

        return run

    def _received(self, model_id: int, name: str) -> None:
        index = self.index_of.get((model_id, name))
        if index is None:
            return
        self.got[index] += 1
        if self.bucket_of[index] < self.posted and self.late is None:
            self.late = self.labels[index]
        if self.got[index] == self.runs.get(model_id, 0):
            self._advance()
        elif self.requests:
            self.comm._MPI.Request.Testall(self.requests)  # let posted reductions progress

    # --- posting -------------------------------------------------------------------------

    def _ready(self, b: int) -> bool:
        for index, _offset, _size in self.plan[b].items:
            node = self.entries[index][0]
            if self.got[index] < self.runs.get(node.id, 0) or self.got[index] == 0:
                return False
        return True

    def _grads(self) -> List[Optional[Any]]:
        return [node.get_grad(name) if node.has_grad(name) else None for node, name, _p in self.entries]

    def _post(self, b: int, grads: List[Optional[Any]]) -> None:
        self.comm._pack(self.plan[b], grads, self.flags, self.labels, self.like)
        self.requests += self.comm._start(self.plan[b], "sum")
        self.posted = b + 1

    def _advance(self) -> None:
        # The last bucket carries every parameter's flag: it goes at finish_update.
        grads = None
        while self.posted < len(self.plan) - 1 and self._ready(self.posted):
            grads = self._grads() if grads is None else grads
            self._post(self.posted, grads)
        if self.requests:
            self.comm._MPI.Request.Testall(self.requests)

    def finish(self) -> int:
        """Send what is left, wait, and put the means in place; returns how many buckets overlapped."""
        early = self.posted
        grads = self._grads()
        # Flags of the buckets already sent were set when they were packed; the rest now.
        while self.posted < len(self.plan):
            self._post(self.posted, grads)
        self.comm._complete(self.plan, self.requests)
        if self.late is not None:
            raise RuntimeError(
                f"DataParallel(overlap=True): parameter {self.late} received a gradient after its bucket "
                "had been sent (a layer that adds to a gradient more often than it runs forward). The "
                "update is not applied; build DataParallel(model, comm, overlap=False) for this model."
            )
        result = self.comm._unpack(self.plan, grads, self.like, self.flags)
        self.close()
        for (node, name, _param), before, after in zip(self.entries, grads, result):
            if after is not None and after is not before:
                node.set_grad(name, after)
        return early

    def abandon(self) -> None:
        """Give up this update: wait for what was sent (every rank sent it too), restore hooks."""
        try:
            if self.requests:
                self.comm._complete(self.plan[: self.posted], self.requests)
        finally:
            self.close()

    def close(self) -> None:
        self._restore()


class _CountingStore:
    """A node's parameter store during an overlapped update: tells the session of each gradient."""

    __slots__ = ("_store", "_tell")

    def __init__(self, store: Any, tell: Callable[[int, str], None]) -> None:
        self._store = store
        self._tell = tell

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._store, attr)

    def inc_grad(self, model_id: int, name: str, value: Any) -> None:
        self._store.inc_grad(model_id, name, value)
        self._tell(model_id, name)

    def set_grad(self, model_id: int, name: str, value: Any) -> None:
        self._store.set_grad(model_id, name, value)
        self._tell(model_id, name)


def distributed_finish_update(model: Any, optimizer: Any, comm: Optional[Any] = None) -> None:
    """Average `model`'s gradients over the ranks of `comm`, then `model.finish_update(optimizer)`."""
    (get_communicator() if comm is None else comm).allreduce_grads(model)
    model.finish_update(optimizer)
