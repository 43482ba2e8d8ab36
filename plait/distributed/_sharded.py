"""DataParallel(shard_update=True): one copy of the weights and Adam's state per machine.

With every rank on one machine, DataParallel's plain update has each rank sum its slice of the
gradients into every rank's buffer and then run the whole optimizer step, the same step on
every rank, each on its own copy of the weights and moments. Here instead the weights, both
moments and the averages live once, in memory shared by the ranks, and the ranks split each
parameter into slices: rank r adds up slice r of the gradients over all ranks' buffers, steps
slice r of the weights and the optimizer state, and zeroes slice r of every rank's gradient.
Each value is read and written once per machine instead of once per rank, and the Adam
arithmetic is divided among the ranks. The update has the arithmetic of Optimizer's Adam and
RAdam step (coupled L2 or decoupled weight decay, clipping to the parameter's gradient norm,
the moving average), with the norm added up from the slices' sums of squares.

One step, on every rank (a barrier is a set of counters, one cache line per rank):

1. pack the gradients that are not already views of the buckets, set the flags; barrier READY
   (every rank's gradients are written and its backprop, which reads the weights, is over);
2. take each parameter's slice: the sum over the ranks (and, with clipping, its sum of squares);
   with clipping, barrier NORMS, and every rank adds the ranks' sums of squares of each parameter;
3. Adam on the slice of the weights, moments and average; zero the slice of the others'
   gradients; barrier DONE (no rank starts its next forward pass before every slice is stepped).

The price: the ranks of a machine share one set of weights and optimizer arrays. They must be
changed only through DataParallel.finish_update while it lasts; DataParallel gives every rank
private copies again (detach) when it takes the plain path, or on DataParallel.detach().
"""
from __future__ import annotations

import math
import weakref
from typing import Any, List, Optional, Tuple

import numpy

from . import _shm

_LINE = _shm._LINE
_PAGE = _shm._PAGE
_ALIGN = _shm._ALIGN
_READY, _NORMS, _DONE = 0, 1, 2
_KINDS = 3
_round_up = _shm._round_up


def _kernels() -> Optional[Any]:
    try:
        from ..backends._kernels_cpu import optim
    except ImportError:
        return None
    return optim if hasattr(optim, "adam_step_scaled") else None


def shardable(optimizer: Any) -> bool:
    """Whether the sharded update can do this optimizer's step: plait's Adam or RAdam."""
    from ..optimizers import Optimizer

    if type(optimizer) is not Optimizer:
        return False  # a subclass may step differently
    return bool(optimizer.use_radam or (optimizer._b1 > 0.0 and optimizer._b2 > 0.0))


class NoSharedMemory(OSError):
    """The ranks could not share a mapping (every rank gets it): the plain update takes over."""


class ShmBarrier(_shm.ShmRequest):
    """Reached once every rank has raised its counter of `kind` to `seq`."""

    __slots__ = ("state", "kind", "seq")

    def __init__(self, state: "ShardedState", kind: int, seq: int) -> None:
        self.state = state
        self.kind = kind
        self.seq = seq

    def Test(self) -> bool:
        s = self.state
        return bool(s._sync.all_reached(s._addr[self.kind], s.size, _LINE, self.seq))


class ShardedState:
    """The shared weights and optimizer arrays of a _Layout's parameters, and their slices."""

    def __init__(self, comm: Any, layout: Any) -> None:
        from . import _shmsync

        self._sync = _shmsync
        self.comm = comm
        self.rank, self.size = comm.rank, comm.size
        self.layout = layout
        entries = layout.entries
        n = len(entries)
        control = _round_up(_KINDS * self.size * _LINE, _PAGE)
        norms_at = control
        offsets = []
        at = _round_up(norms_at + self.size * max(n, 1) * 8, _PAGE)
        for _node, _name, param in entries:
            item = param.dtype.itemsize
            arrays = []
            for _kind in range(4):  # weights, mom1, mom2, averages
                arrays.append(at)
                at = _round_up(at + param.size * item, _LINE)
            offsets.append(arrays)
        nbytes = _round_up(at, _PAGE)
        mapping = _shm.create_mapping(comm, nbytes)  # collective; warns where it cannot
        if mapping is None:
            raise NoSharedMemory(f"{nbytes} bytes of memory shared by the ranks could not be made")
        self._mapping = mapping
        counters = numpy.frombuffer(mapping, dtype=numpy.uint8, count=control, offset=0)
        self._counter_views = counters
        base = counters.ctypes.data
        self._addr = [base + kind * self.size * _LINE for kind in range(_KINDS)]
        self.partial = numpy.frombuffer(mapping, dtype=numpy.float64, count=self.size * max(n, 1),
                                        offset=norms_at).reshape(self.size, max(n, 1))
        self.seq = [0] * _KINDS
        # Per parameter: the full arrays (the weights in the parameter's shape, moments flat as
        # Optimizer keeps them, the average in the parameter's shape), this rank's slice bounds,
        # and flat views of the slice in every array and in every rank's gradient bucket.
        self.weights: List[numpy.ndarray] = []
        self.mom1: List[numpy.ndarray] = []
        self.mom2: List[numpy.ndarray] = []
        self.averages: List[numpy.ndarray] = []
        self.bounds: List[Tuple[int, int]] = []
        self.slices: List[Tuple[numpy.ndarray, ...]] = []
        self.grad_parts: List[List[numpy.ndarray]] = []
        where = {}
        for bucket in layout.plan:
            for index, offset, _size in bucket.items:
                where[index] = (bucket, offset)
        for i, (_node, _name, param) in enumerate(entries):
            count = param.size
            w, m1, m2, a = (numpy.frombuffer(mapping, dtype=param.dtype, count=count, offset=o) for o in offsets[i])
            self.weights.append(w.reshape(param.shape))
            self.mom1.append(m1)
            self.mom2.append(m2)
            self.averages.append(a.reshape(param.shape))
            step = _round_up(-(-count // self.size), _ALIGN)
            lo, hi = min(self.rank * step, count), min((self.rank + 1) * step, count)
            self.bounds.append((lo, hi))
            self.slices.append((w[lo:hi], m1[lo:hi], m2[lo:hi], a[lo:hi]))
            bucket, offset = where[i]
            self.grad_parts.append([region[offset + lo:offset + hi] for region in bucket.shared.regions])
        self.optimizer: Optional[Any] = None  # the optimizer whose state lives here
        self.attached = False
        self._scratch: Optional[numpy.ndarray] = None
        _STATES.add(self)

    # --- barriers --------------------------------------------------------------------------

    def barrier(self, kind: int, what: str) -> None:
        self.seq[kind] += 1
        self._sync.publish(self._addr[kind] + self.rank * _LINE, self.seq[kind])
        request = ShmBarrier(self, kind, self.seq[kind])
        self.comm._begin(what)  # every rank begins the same ones (the count names a hang)
        if not request.Test():
            self.comm._wait([request])

    # --- attaching the model and the optimizer --------------------------------------------

    def attach(self, optimizer: Any) -> None:
        """Point the model's parameters and the optimizer's tables at the shared arrays.

        Runs after READY on every rank: where a parameter or a table entry is not the shared
        array (the first step, or replaced since: loaded weights, a restored optimizer), this
        rank copies its slice of the current values in (zeros for a moment the optimizer does
        not have yet), and DONE orders those writes before any rank reads them.
        """
        layout = self.layout
        self.optimizer = optimizer
        tables = [(optimizer.mom1, self.mom1, 1), (optimizer.mom2, self.mom2, 2)]
        if optimizer.averages is not None:
            tables.append((optimizer.averages, self.averages, 3))
        for i, (node, name, _param) in enumerate(layout.entries):
            lo, hi = self.bounds[i]
            shared = self.weights[i]
            current = layout.stores[i].get(layout.keys[i])
            if current is not shared:
                if current is None:
                    current = node.get_param(name)
                self.slices[i][0][...] = current.reshape(-1)[lo:hi]
                node.set_param(name, shared)
            key = layout.keys[i]
            for table, arrays, k in tables:
                current = table.get(key)
                if current is arrays[i]:
                    continue
                if current is not None and getattr(current, "size", -1) == shared.size and isinstance(current, numpy.ndarray):
                    self.slices[i][k][...] = current.reshape(-1)[lo:hi]
                else:
                    self.slices[i][k][...] = 0  # as Optimizer starts a moment (and an average)
                table[key] = arrays[i]
        self.attached = True

    def detach(self) -> None:
        """Give this rank private copies of the weights and the optimizer's arrays again.

        Collective in effect: every rank detaches at the same step, before its next READY, so
        that no rank copies while another steps."""
        if not self.attached:
            return
        layout = self.layout
        for i, (node, name, _param) in enumerate(layout.entries):
            if layout.stores[i].get(layout.keys[i]) is self.weights[i]:
                node.set_param(name, self.weights[i].copy())
        optimizer = self.optimizer
        if optimizer is not None:
            for table, arrays in ((optimizer.mom1, self.mom1), (optimizer.mom2, self.mom2),
                                  (optimizer.averages, self.averages)):
                if table is None:
                    continue
                for i, key in enumerate(layout.keys):
                    if table.get(key) is arrays[i]:
                        table[key] = arrays[i].copy()
        self.optimizer = None
        self.attached = False

    # --- the step -----------------------------------------------------------------------

    def _sum_slice(self, i: int, scale: float) -> numpy.ndarray:
        """Slice i of the gradients' sum over the ranks (times scale) into this rank's bucket."""
        parts = self.grad_parts[i]
        out = parts[self.rank]
        if out.size == 0:
            return out
        self._scratch = _shm.sum_in_rank_order(parts, out, self._scratch)
        if scale != 1.0:
            out *= out.dtype.type(scale)
        return out

    def step(self, optimizer: Any, active: List[int], scale: float) -> None:
        """Steps 2 and 3 of the module's protocol for the parameters `active` (the flagged ones)."""
        optim = _kernels()
        layout = self.layout
        clip = float(optimizer._grad_clip or 0.0)
        coupled_L2 = float(optimizer._L2) if not optimizer.L2_is_weight_decay else 0.0
        weight_decay = float(optimizer._learn_rate * optimizer._L2) if optimizer.L2_is_weight_decay else 0.0
        use_averages = optimizer.averages is not None
        grads = []
        for i in active:
            grad = self._sum_slice(i, scale)
            grads.append(grad)
            if clip > 0:
                w = self.slices[i][0]
                self.partial[self.rank, i] = optim.sumsq(grad, w, coupled_L2) if grad.size else 0.0
        factors = [1.0] * len(active)
        if clip > 0:
            self.barrier(_NORMS, "DataParallel's sharded update (gradient norms)")
            totals = self.partial.sum(axis=0)
            for j, i in enumerate(active):
                norm = math.sqrt(float(totals[i]))
                if norm >= clip and norm > 0.0:
                    factors[j] = clip / norm
        for j, i in enumerate(active):
            key = layout.keys[i]
            optimizer.nr_update[key] += 1
            nr_upd = optimizer.nr_update[key]
            if optimizer.use_radam:
                b1, b2, eps, lr, mod_rate = optimizer._radam_rates(float(optimizer._learn_rate), nr_upd)
            else:
                b1, b2, eps, lr, mod_rate = optimizer._adam_rates(self.weights[i], 1.0, nr_upd)
            grad = grads[j]
            if grad.size == 0:
                continue
            w, m1, m2, a = self.slices[i]
            done = optim.adam_step_scaled(
                w, grad, m1, m2, a if use_averages else None, b1, b2, eps, lr, mod_rate,
                coupled_L2, weight_decay, factors[j], nr_upd, 0.9999,
            )
            if not done:  # pragma: no cover - the arrays are made to suit it
                raise RuntimeError(f"DataParallel: the sharded Adam kernel declined {layout.labels[i]!r}")
            for r, part in enumerate(self.grad_parts[i]):
                if r != self.rank:
                    part[...] = 0
        self.barrier(_DONE, "DataParallel's sharded update (steps)")


# Every ShardedState of this process (weakly), for detach_shared.
_STATES: "weakref.WeakSet[ShardedState]" = weakref.WeakSet()


def detach_shared(entries: List[Tuple[Any, str, Any]]) -> None:
    """Detach every ShardedState that shares one of these (node, name, param) parameters.

    For the plain reduction (Communicator.allreduce_grads(model), distributed_finish_update),
    whose model.finish_update must step private arrays on every rank."""
    if not _STATES:
        return
    params = {id(param) for _node, _name, param in entries}
    for state in list(_STATES):
        if state.attached and any(id(w) in params for w in state.weights):
            state.detach()


def can_share(layout: Any) -> bool:
    """Whether every bucket of the layout is in memory shared by the ranks (one machine) and
    every parameter is float32 or float64 (what the compiled Adam step takes)."""
    return (
        _kernels() is not None
        and all(bucket.shared is not None for bucket in layout.plan)
        and all(param.dtype.char in "fd" for param in layout.like)
    )


__all__: Tuple[str, ...] = ("NoSharedMemory", "ShardedState", "can_share", "detach_shared", "shardable")
