"""Gradient sums through memory shared by the ranks of one machine.

When every rank of a job runs on the same machine, a bucket's buffers live in one shared
mapping (a file in /dev/shm, unlinked as soon as every rank has mapped it, so nothing is left
behind if a rank dies). A sum then takes two short phases instead of MPI's copies through its
own shared-memory cells:

1. every rank says its gradients are written (counter `ready`);
2. rank r adds up slice r of the bucket over all ranks' buffers, in rank order, into its own
   buffer, writes that sum into slice r of every other rank's buffer while it is still in its
   caches, and says so (`summed`). A rank returns once all have: its buffer then holds every
   slice's sum, and no other rank reads or writes it any more until the next reduction (the
   next backprop may overwrite it).

Rank r reads only slice r of the others' buffers and writes only slice r into them, so the
ranks never touch the same values at once. Each slice is summed once, so every rank gets the
same bits. The counters live on their own
cache lines and go up by one per reduction of the bucket (every rank reduces the same buckets in
the same order). Waiting is `Communicator._wait`'s: bounded by the timeout, with the pings that
name a dead or hung rank. Measured on 2 ranks of a 2-core AMD EPYC (bench/README.md): 2.7 MB of
gradients in about 0.2 ms after a backward pass, where the same through MPICH takes about 0.57 ms.

PLAIT_DIST_SHM=0 turns it off (MPI then moves every byte); it is off by itself when the ranks
span several machines, on GPU buckets, and where /dev/shm cannot be used.
"""
from __future__ import annotations

import mmap
import os
import tempfile
from typing import Any, List, Optional, Tuple

import numpy

_LINE = 64  # bytes per counter: one cache line each
_PAGE = 4096
_ALIGN = 16  # slice bounds in values: 64-byte aligned for float32
_READY, _SUMMED = 0, 1
SHM_DIR = "/dev/shm"


def enabled_by_env() -> bool:
    value = os.environ.get("PLAIT_DIST_SHM", "1").strip().lower()
    if value in ("0", "off", "false", "no"):
        return False
    if value in ("", "1", "on", "true", "yes", "auto"):
        return True
    raise ValueError(
        f"PLAIT_DIST_SHM must be 1 (use shared memory between the ranks of one machine) or 0 "
        f"(MPI only), got {value!r}"
    )


def _round_up(n: int, to: int) -> int:
    return (n + to - 1) // to * to


class SharedBucket:
    """One bucket's buffers on every rank of this machine, and the counters of its sums."""

    def __init__(self, mapping: mmap.mmap, rank: int, size: int, n_values: int, dtype: numpy.dtype) -> None:
        from . import _shmsync

        self._sync = _shmsync
        self._mapping = mapping  # kept alive with the views
        self.rank, self.size, self.n_values, self.dtype = rank, size, n_values, numpy.dtype(dtype)
        control = _round_up(2 * size * _LINE, _PAGE)
        region = _round_up(n_values * self.dtype.itemsize, _PAGE)
        self.regions = [
            numpy.frombuffer(mapping, dtype=self.dtype, count=n_values, offset=control + r * region)
            for r in range(size)
        ]
        counters = numpy.frombuffer(mapping, dtype=numpy.uint8, count=control, offset=0)
        base = counters.ctypes.data
        self._counter_views = counters
        self._addr = [base + kind * size * _LINE for kind in (_READY, _SUMMED)]
        step = _round_up(-(-n_values // size), _ALIGN)
        self.bounds = [(min(r * step, n_values), min((r + 1) * step, n_values)) for r in range(size)]
        self.seq = 0
        self._scratch: Optional[numpy.ndarray] = None

    @staticmethod
    def nbytes(size: int, n_values: int, dtype: numpy.dtype) -> int:
        return _round_up(2 * size * _LINE, _PAGE) + size * _round_up(n_values * numpy.dtype(dtype).itemsize, _PAGE)

    @property
    def buffer(self) -> numpy.ndarray:
        """This rank's buffer (the bucket's values)."""
        return self.regions[self.rank]

    def start(self) -> "ShmSum":
        self.seq += 1
        self._sync.publish(self._addr[_READY] + self.rank * _LINE, self.seq)
        return ShmSum(self, self.seq)

    def _sum_own_slice(self) -> None:
        """Slice `rank` of the sum into this rank's buffer, then into every other rank's."""
        lo, hi = self.bounds[self.rank]
        if lo == hi:
            return
        out = self.regions[self.rank][lo:hi]
        self._scratch = sum_in_rank_order([region[lo:hi] for region in self.regions], out, self._scratch)
        for r, region in enumerate(self.regions):
            if r != self.rank:
                region[lo:hi] = out


def sum_in_rank_order(parts: List[numpy.ndarray], out: numpy.ndarray,
                      scratch: Optional[numpy.ndarray]) -> Optional[numpy.ndarray]:
    """out[...] = parts[0] + parts[1] + ... in that order (out is one of the parts), so that
    every rank that sums a slice gets the same bits; returns the scratch buffer, made or kept
    for the next call (more than two parts need one: out would be overwritten while read)."""
    if len(parts) == 2:
        numpy.add(parts[0], parts[1], out=out)  # out is one of them, element for element
        return scratch
    if scratch is None or scratch.size < out.size or scratch.dtype != out.dtype:
        scratch = numpy.empty(out.size, dtype=out.dtype)
    acc = scratch[:out.size]
    numpy.add(parts[0], parts[1], out=acc)
    for part in parts[2:]:
        acc += part
    out[...] = acc
    return scratch


class ShmRequest:
    """Work between the ranks of this machine that a wait advances with Test(), as an MPI request."""

    __slots__ = ()

    def Test(self) -> bool:  # pragma: no cover - every kind defines it
        raise NotImplementedError


class ShmSum(ShmRequest):
    """A sum in progress, with the Test() of an MPI request: True once this rank has the sum."""

    __slots__ = ("bucket", "seq", "phase")

    def __init__(self, bucket: SharedBucket, seq: int) -> None:
        self.bucket = bucket
        self.seq = seq
        self.phase = _READY

    def Test(self) -> bool:
        b = self.bucket
        while self.phase <= _SUMMED:
            # Every rank has reached this phase: do what follows it, then say so.
            if not b._sync.all_reached(b._addr[self.phase], b.size, _LINE, self.seq):
                return False
            if self.phase == _READY:
                b._sum_own_slice()
            self.phase += 1
            if self.phase <= _SUMMED:
                b._sync.publish(b._addr[self.phase] + b.rank * _LINE, self.seq)
        return True


def create_mapping(comm: Any, nbytes: int) -> Optional[mmap.mmap]:
    """A mapping of `nbytes` shared by every rank of `comm` (all on this machine), or None on every
    rank when any rank cannot make or map it. Collective: every rank calls it, in the same order."""
    path: Optional[str] = None
    fd = -1
    error = ""
    if comm.rank == 0:
        try:
            fd, path = tempfile.mkstemp(prefix="plait-dist-", dir=SHM_DIR)
            os.ftruncate(fd, nbytes)
            if hasattr(os, "posix_fallocate"):
                # Reserve the pages now: a full /dev/shm (64 MB in a default Docker container)
                # would otherwise kill the first rank to touch a missing page with SIGBUS.
                os.posix_fallocate(fd, 0, nbytes)
        except OSError as exc:
            error = f"{SHM_DIR}: {exc}"
            if path is not None:
                try:
                    os.close(fd)
                    os.unlink(path)
                except OSError:
                    pass
            fd, path = -1, None
    path = comm.bcast(path, root=0)
    mapping: Optional[mmap.mmap] = None
    if path is not None:
        try:
            if fd < 0:
                fd = os.open(path, os.O_RDWR)
            mapping = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, ValueError) as exc:
            error = f"{path}: {exc}"
            mapping = None
        finally:
            if fd >= 0:
                os.close(fd)
    # Every rank has mapped it (or failed): the name can go; the memory stays while mapped.
    failed = comm.allreduce_scalar(0.0 if mapping is not None else 1.0, op="sum")
    if comm.rank == 0 and path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass
    if failed:
        if mapping is not None:
            mapping.close()
        if error:
            import warnings

            warnings.warn(
                f"plait.distributed: shared memory between the ranks is not available ({error}); "
                "gradients go through MPI (slower on one machine). PLAIT_DIST_SHM=0 silences this.",
                RuntimeWarning,
                stacklevel=3,
            )
        return None
    return mapping


def shared_bucket(comm: Any, n_values: int, dtype: numpy.dtype) -> Optional[SharedBucket]:
    mapping = create_mapping(comm, SharedBucket.nbytes(comm.size, n_values, dtype))
    if mapping is None:
        return None
    return SharedBucket(mapping, comm.rank, comm.size, n_values, dtype)


def test_all(requests: List[Any], mpi_testall: Any) -> bool:
    """Whether every request (MPI requests and ShmSums mixed) has completed; advances them all."""
    done = True
    mpi: List[Any] = []
    for request in requests:
        if isinstance(request, ShmRequest):
            if not request.Test():
                done = False
        else:
            mpi.append(request)
    if mpi and not mpi_testall(mpi):
        done = False
    return done


__all__: Tuple[str, ...] = ("SharedBucket", "ShmRequest", "ShmSum", "enabled_by_env", "shared_bucket", "sum_in_rank_order",
                             "test_all")
