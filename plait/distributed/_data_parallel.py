"""Data parallelism for the Thinc face: averaged gradients before every optimizer step."""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy

from . import _sharded
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
    (`begin_update`, `predict`, calling the wrapper).

    The wrapper owns the gradient buckets of its model: after the first update each gradient is
    a view into them, so layers accumulate straight into the buffers that are reduced (no copy
    in, no copy out), and the backprop callback of `begin_update` divides the incoming gradient
    by the number of ranks, so that the sum over ranks is already the mean (backprop is linear;
    the gradient it returns for the input is the caller's as without the wrapper). A rank that
    ran its backprop without the wrapper is found out and its sums scaled after the reduction.

    overlap=True (the default) also reduces during backprop when the model spans several
    buckets: laid out last layer first, each is sent as soon as every parameter in it has its
    gradient, while earlier layers still compute. It expects one `begin_update` and its backprop
    per `finish_update`; gradient accumulation over several begin_update calls needs
    overlap=False (refused with that advice otherwise).

    shard_update=True: when every rank runs on this machine (shared memory) and the optimizer
    is plait's Adam or RAdam, the ranks keep one copy of the weights and of the optimizer's
    moments and averages in shared memory, and each rank sums and steps only its slice of every
    parameter (see _sharded.py): half the memory traffic and a 1/size share of the optimizer's
    arithmetic per rank, with the same result as the plain update up to the rounding of the
    clipping norm. While it lasts, the ranks' models and optimizers share those arrays: change
    them only through `finish_update` (or call `detach()` first, on every rank). Elsewhere (across
    machines, another optimizer, GPU arrays) it takes the plain path, which detaches. `sharded`
    tells whether the last update was sharded.
    """

    def __init__(self, model: Any, comm: Optional[Any] = None, *, broadcast: bool = True, overlap: bool = True,
                 shard_update: bool = False) -> None:
        self.model = model
        self.comm = get_communicator() if comm is None else comm
        if broadcast:
            self.comm.bcast_params(model)
        self.distributed = self.comm.size > 1 and hasattr(self.comm, "_start")
        self.overlap = bool(overlap) and self.distributed
        self._layout: Optional[_Layout] = None
        self._session: Optional[_OverlapSession] = None
        self._scaled: Optional[bool] = None  # this update's gradients: divided by size (True), raw (False), none yet
        #: How many gradient buckets of the last update were sent during backprop (overlap).
        self.overlapped_buckets = 0
        self.shard_update = bool(shard_update) and self.distributed
        self._state: Optional[Any] = None  # _sharded.ShardedState of the current layout
        self._state_failed = False  # no shared mapping could be made for it
        #: Whether the last update was sharded (shard_update=True where it applies).
        self.sharded = False

    def __repr__(self) -> str:
        return f"DataParallel({self.model.name!r}, {self.comm!r})"

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def size(self) -> int:
        return self.comm.size

    def _layout_now(self) -> "_Layout":
        from ._comm import _param_entries

        layout = self._layout
        if layout is not None:
            # The same nodes holding the same parameter arrays as last time (the usual case):
            # no checks to redo. (Read from the stores directly: this runs at every step.)
            if tuple(self.model.walk()) == layout.nodes and all(
                store.get(key) is param for store, key, param in zip(layout.stores, layout.keys, layout.like)
            ):
                return layout
        entries = _param_entries(self.model)
        if layout is None or not layout.fits(entries):
            self.detach()  # the shared arrays belong to the old layout
            self._state, self._state_failed = None, False
            layout = self._layout = _Layout(self.comm, entries)
        else:
            layout.like = [param for _node, _name, param in reversed(entries)]
        layout.nodes = tuple(self.model.walk())
        return layout

    def begin_update(self, X: Any) -> Tuple[Any, Callable]:
        if not self.distributed:
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
        layout = self._layout_now()
        # The sharded update sums at finish_update, with the step: nothing to overlap.
        if self.overlap and len(layout.plan) > 1 and not (self.shard_update and _sharded.can_share(layout)):
            self._session = _OverlapSession(self.comm, self.model, layout)
            Y, backprop = self._session.forward(X)
        else:
            Y, backprop = self.model.begin_update(X)
        size = self.comm.size

        def backprop_mean(dY: Any) -> Any:
            # Backprop is linear in dY: the gradients of dY / size summed over the ranks are the
            # mean; the input gradient is scaled back, as the caller expects it.
            self._scaled = True if self._scaled in (None, True) else self._scaled
            dX = backprop(_times(dY, 1.0 / size))
            return _times(dX, float(size))

        return Y, backprop_mean

    def __call__(self, X: Any, is_train: bool) -> Tuple[Any, Callable]:
        if is_train:
            return self.begin_update(X)
        return self.model(X, is_train)

    def predict(self, X: Any) -> Any:
        return self.model.predict(X)

    def allreduce_grads(self) -> None:
        """Average the gradients over the ranks now: what finish_update does before the optimizer.

        For code that looks at the mean gradients before stepping (clipping, logging); then
        call `model.finish_update(optimizer)` itself. Every rank must call it.
        """
        session, self._session = self._session, None
        scaled, self._scaled = self._scaled, None
        self.sharded = False
        if not self.distributed:
            return
        self.detach()  # the plain update steps private arrays on every rank
        layout = session.layout if session is not None else self._layout_now()
        if session is None:
            # No overlap (or no forward on this rank, an empty share of the batch): every
            # bucket now, the same ones in the same order as on the ranks that overlapped.
            session = _OverlapSession(self.comm, self.model, layout, hooks=False)
        try:
            self.overlapped_buckets = session.finish(scaled)
        finally:
            session.close()

    def finish_update(self, optimizer: Any) -> None:
        """Average the gradients over the ranks, then `model.finish_update(optimizer)`.

        With shard_update=True, where it applies, the same step sharded over the ranks."""
        if self.shard_update and self._session is None and _sharded.shardable(optimizer):
            layout = self._layout_now()
            if _sharded.can_share(layout) and self._shared_state(layout) is not None:
                self._sharded_update(layout, optimizer)
                return
        self.allreduce_grads()
        self.model.finish_update(optimizer)

    def detach(self) -> None:
        """Give this rank private copies of the weights and the optimizer state (shard_update).

        Every rank must call it at the same point (between updates). The next sharded update
        shares them again."""
        if self._state is not None:
            self._state.detach()

    def _shared_state(self, layout: "_Layout") -> Optional[Any]:
        """The layout's ShardedState, made on first use (collective), or None where the shared
        mapping cannot be made (every rank then sees None, and the plain update goes on)."""
        if self._state is None and not self._state_failed:
            try:
                self._state = _sharded.ShardedState(self.comm, layout)
            except _sharded.NoSharedMemory:
                self._state_failed = True
        return self._state

    def _sharded_update(self, layout: "_Layout", optimizer: Any) -> None:
        scaled, self._scaled = self._scaled, None
        self.sharded = True
        self.overlapped_buckets = 0
        state = self._state
        if state.optimizer is not None and state.optimizer is not optimizer:
            state.detach()  # the former optimizer keeps its state (copied out before READY)
        session = _OverlapSession(self.comm, self.model, layout, hooks=False)
        try:
            for b in range(len(layout.plan)):
                session._pack(b)
            if scaled is None and session._has_raw_gradients():
                scaled = False
        finally:
            session.close()
        layout.counts[0] = 1 if scaled is True else 0
        layout.counts[1] = 1 if scaled is False else 0
        state.barrier(_sharded._READY, "DataParallel's sharded update (gradients written)")
        last = layout.plan[-1]
        n = len(layout.entries)
        at = last.flags_at
        flags = numpy.zeros(n + 2, dtype=numpy.float64)
        for region in last.shared.regions:
            flags += region[at:at + n + 2]
        n_scaled, n_raw = int(flags[n]), int(flags[n + 1])
        _check_gradient_kinds(n_scaled, n_raw)
        active = [i for i in range(n) if flags[i] > 0 and layout.like[i].size > 0]
        state.attach(optimizer)
        state.step(optimizer, active, 1.0 / self.comm.size if n_raw else 1.0)
        if not session.all_views:
            for index, (node, name, _param) in enumerate(layout.entries):
                view = layout.views[index]
                if node.has_grad(name) and node._params.get_grad(node.id, name) is not view:
                    node.set_grad(name, view)  # from now on, backprop accumulates into the bucket


def _check_gradient_kinds(n_scaled: int, n_raw: int) -> None:
    """Refuse a step whose ranks mixed divided (wrapper) and raw (bare model) gradients."""
    if n_scaled and n_raw:
        raise RuntimeError(
            f"DataParallel: {n_raw} rank(s) ran backprop without the wrapper (model.begin_update) and "
            f"{n_scaled} with it (DataParallel.begin_update): their gradients cannot be averaged together. "
            "Use the same one on every rank."
        )


def _times(value: Any, factor: float) -> Any:
    """An array (or a list/tuple of arrays, a Ragged/Padded-like object with .data) times factor."""
    if factor == 1.0 or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_times(v, factor) for v in value)
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return value * value.dtype.type(factor) if value.dtype.kind == "f" else value
    data = getattr(value, "data", None)
    if data is not None and hasattr(data, "dtype") and dataclasses.is_dataclass(value):
        # Ragged, Padded and the like: a shallow copy with the data scaled, lengths shared.
        out = copy.copy(value)
        out.data = _times(data, factor)
        return out
    raise TypeError(
        f"DataParallel: cannot scale a gradient of type {type(value).__name__} by 1/size; pass arrays, lists of "
        "arrays or Ragged/Padded/ArraysXd values to backprop, or use DataParallel(..., overlap=False) with "
        "model.begin_update and plait.distributed.distributed_finish_update."
    )


class _Layout:
    """A model's gradient buckets, owned by its DataParallel (views into them are its gradients)."""

    def __init__(self, comm: Any, entries: List[Tuple[Any, str, Any]]) -> None:
        from ._comm import _labels, _make_plan

        # Backprop runs the layers last to first: the walk reversed fills the first buckets first.
        self.entries = list(reversed(entries))
        self.like = [param for _node, _name, param in self.entries]
        self.labels = _labels(self.entries)
        self.signature = self._signature(entries)
        # Flags, then two counters: ranks whose gradients were divided by size, and raw ones.
        self.plan = _make_plan(self.like, comm.bucket_bytes, with_flags=True, extra=2,
                               shared=getattr(comm, "_shared_bucket", None))
        for bucket in self.plan:
            bucket.buffer[...] = 0  # zero gradients until the first ones arrive (see _has_raw_gradients)
        last = self.plan[-1]
        n = len(self.entries)
        self.flags = last.buffer[last.flags_at:last.flags_at + n]
        self.counts = last.buffer[last.flags_at + n:]
        self.views: List[Any] = [None] * n
        self.bucket_of = [0] * n
        for b, bucket in enumerate(self.plan):
            for index, offset, size in bucket.items:
                self.views[index] = bucket.buffer[offset:offset + size].reshape(self.like[index].shape)
                self.bucket_of[index] = b
        self.index_of: Dict[Tuple[int, str], int] = {(node.id, name): i for i, (node, name, _p) in enumerate(self.entries)}
        # For the per-step check that nothing changed (DataParallel._layout_now).
        self.nodes: Tuple[Any, ...] = ()
        self.stores = [getattr(node._params, "_params", {}) for node, _name, _p in self.entries]
        self.grad_stores = [getattr(node._params, "_grads", None) for node, _name, _p in self.entries]
        self.keys = [(node.id, name) for node, name, _p in self.entries]

    @staticmethod
    def _signature(entries: List[Tuple[Any, str, Any]]) -> Tuple:
        return tuple((node.id, name, param.shape, param.dtype.str, type(param)) for node, name, param in entries)

    def fits(self, entries: List[Tuple[Any, str, Any]]) -> bool:
        return self._signature(entries) == self.signature


class _OverlapSession:
    """One update's gradient reduction over a _Layout (see DataParallel).

    With hooks, during the forward pass the number of times each node runs is counted (its _func
    wrapped), and during backprop the gradients each node's parameter store receives
    (inc_grad/set_grad). A parameter is ready when it got as many gradient contributions as its
    node ran; buckets, in backprop order, are posted strictly in order as soon as all of theirs
    are ready, so that every rank posts the same reductions in the same order whatever its data.
    What is not ready by finish_update (a parameter without a gradient, a layer that writes its
    gradient in place without telling its store) goes then, with the flags and counters.
    """

    def __init__(self, comm: Any, model: Any, layout: _Layout, hooks: bool = True) -> None:
        self.comm = comm
        self.model = model
        self.layout = layout
        self.plan = layout.plan
        self.runs: Dict[int, int] = {}
        self.got = [0] * len(layout.entries)
        self.posted = 0  # buckets posted so far (in order)
        self.requests: List[Any] = []
        self.late: Optional[str] = None
        self.all_views = True  # every gradient was already a view of its bucket
        self._saved: List[Tuple[Any, str, Any]] = []
        self.hooks = hooks
        comm._begin("allreduce_grads (overlapped)" if hooks else "allreduce_grads")

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
        index = self.layout.index_of.get((model_id, name))
        if index is None:
            return
        self.got[index] += 1
        if self.layout.bucket_of[index] < self.posted and self.late is None:
            self.late = self.layout.labels[index]
        if self.got[index] == self.runs.get(model_id, 0):
            self._advance()
        elif self.requests:
            self.comm._test_all(self.requests)  # let posted reductions progress

    # --- posting -------------------------------------------------------------------------

    def _ready(self, b: int) -> bool:
        for index, _offset, _size in self.plan[b].items:
            node = self.layout.entries[index][0]
            if self.got[index] == 0 or self.got[index] < self.runs.get(node.id, 0):
                return False
        return True

    def _pack(self, b: int) -> None:
        """The bucket's gradients into its buffer: nothing to copy for those that are views of it."""
        layout = self.layout
        flags = layout.flags
        for index, _offset, _size in self.plan[b].items:
            view = layout.views[index]
            grads = layout.grad_stores[index]
            if grads is not None and grads.get(layout.keys[index]) is view:
                flags[index] = 1  # the usual case, read straight from the store: nothing to copy
                continue
            node, name, _param = layout.entries[index]
            grad = node._params.get_grad(node.id, name) if node.has_grad(name) else None
            if grad is view:
                flags[index] = 1
                continue
            self.all_views = False
            if grad is None:
                view[...] = 0
                flags[index] = 0
            else:
                if tuple(grad.shape) != tuple(view.shape):
                    raise ValueError(
                        f"DataParallel: the gradient of {layout.labels[index]!r} has shape {tuple(grad.shape)}, "
                        f"its parameter {tuple(view.shape)}"
                    )
                view[...] = grad
                flags[index] = 1

    def _post(self, b: int) -> None:
        self._pack(b)
        self.requests += self.comm._start(self.plan[b], "sum")
        self.posted = b + 1

    def _advance(self) -> None:
        # The last bucket carries every parameter's flag: it goes at finish_update.
        while self.posted < len(self.plan) - 1 and self._ready(self.posted):
            self._post(self.posted)
        if self.requests:
            self.comm._test_all(self.requests)

    def finish(self, scaled: Optional[bool]) -> int:
        """Send what is left, wait, and leave the means in place; returns how many buckets overlapped.

        scaled: True when this rank's gradients were divided by the number of ranks (the
        wrapper's backprop), False when they are raw sums, None when it computed none.
        """
        early = self.posted
        layout = self.layout
        if scaled is None and self._has_raw_gradients():
            # Gradients that did not come through the wrapper's backprop (model.begin_update
            # called directly, or set by hand): raw, to be divided after the sum.
            scaled = False
        layout.counts[0] = 1 if scaled is True else 0
        layout.counts[1] = 1 if scaled is False else 0
        while self.posted < len(self.plan):
            self._post(self.posted)
        self.comm._complete(self.plan, self.requests)
        self.close()
        if self.late is not None:
            raise RuntimeError(
                f"DataParallel(overlap=True): parameter {self.late} received a gradient after its bucket "
                "had been sent (a layer that adds to a gradient more often than it runs forward). The "
                "update is not applied; build DataParallel(model, comm, overlap=False) for this model."
            )
        n_scaled, n_raw = int(layout.counts[0]), int(layout.counts[1])
        _check_gradient_kinds(n_scaled, n_raw)
        if n_raw:
            for bucket in self.plan:
                values = bucket.buffer[:bucket.n_values]
                values *= bucket.dtype.type(1.0 / self.comm.size)
        if self.all_views:
            return early  # the means are in place already
        for index, (node, name, _param) in enumerate(layout.entries):
            if layout.flags[index] == 0:
                continue  # no rank had a gradient for it: no step for it
            view = layout.views[index]
            if not node.has_grad(name) or node._params.get_grad(node.id, name) is not view:
                node.set_grad(name, view)  # from now on, backprop accumulates into the bucket
        return early

    def _has_raw_gradients(self) -> bool:
        """Whether this rank holds gradients that its wrapper's backprop did not divide.

        A gradient that is not (yet) a view of its bucket came from elsewhere; the views are
        zero after the optimizer's step, so a non-zero one was accumulated since, without the
        wrapper. A rank that ran no backprop (an empty share of the batch) has neither.
        """
        layout = self.layout
        for index, (node, name, _param) in enumerate(layout.entries):
            if node.has_grad(name) and node._params.get_grad(node.id, name) is not layout.views[index]:
                return True
        return any(bool(bucket.buffer[:bucket.n_values].any()) for bucket in self.plan)

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

    def grad_buffer(self, model_id: int, name: str) -> None:
        # Lends no buffer to add into in place: every contribution must come through inc_grad,
        # which counts it (Model._inc_grad_product then calls inc_grad).
        return None

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
