"""Point-to-point messages, scatter and all-to-all of bytes, bounded like plait's collectives.

plait.distributed's Communicator offers broadcast, gather and all-gather of pickled objects but
no point-to-point messages, scatter or all-to-all, which ChainerMN's communicators have (and
which `scatter_dataset` needs to send each rank only its share). These are posted here as
nonblocking MPI operations on the Communicator's own duplicate of the MPI communicator and
waited for with its deadline-bounded wait: a dead or hung peer makes this rank name it and abort
the job after PLAIT_DIST_TIMEOUT seconds, as in every other collective. Collectives and
point-to-point messages never match each other in MPI, so this traffic cannot be confused with
plait's own.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy

_NEEDED = ("_comm", "_MPI", "_begin", "_wait")


class Wire:
    """Bounded point-to-point and scatter/all-to-all of byte strings over a plait Communicator."""

    def __init__(self, backend: Any) -> None:
        missing = [name for name in _NEEDED if not hasattr(backend, name)]
        if missing:
            raise NotImplementedError(
                f"plait.chainermn: {type(backend).__name__} lacks {', '.join(missing)}, through which "
                "point-to-point messages, scatter and all-to-all are sent; this plait.distributed "
                "does not support them."
            )
        self._backend = backend
        self._comm = backend._comm
        self._MPI = backend._MPI

    def _wait(self, what: str, requests: List[Any]) -> None:
        self._backend._begin(what)
        self._backend._wait(requests)

    def send(self, data: bytes, dest: int, tag: int, what: str) -> None:
        # A header (length, tag) and then the body, both with the tag: MPI delivers messages
        # between two ranks with matching tags in order, so a body always follows its header.
        header = numpy.array([len(data), tag], dtype=numpy.int64)
        body = numpy.frombuffer(data, dtype=numpy.uint8)
        self._wait(what, [self._comm.Isend(header, dest=dest, tag=tag), self._comm.Isend(body, dest=dest, tag=tag)])

    def recv(self, source: int, tag: Optional[int], what: str) -> bytes:
        header = numpy.empty(2, dtype=numpy.int64)
        any_tag = self._MPI.ANY_TAG if tag is None else tag
        self._wait(what, [self._comm.Irecv(header, source=source, tag=any_tag)])
        body = numpy.empty(int(header[0]), dtype=numpy.uint8)
        self._wait(what, [self._comm.Irecv(body, source=source, tag=int(header[1]))])
        return body.tobytes()

    def scatter(self, chunks: Optional[Sequence[bytes]], root: int, rank: int, what: str) -> bytes:
        """chunks[i] (given on root only) to rank i; returns this rank's chunk."""
        MPI = self._MPI
        mine = numpy.empty(1, dtype=numpy.int64)
        if rank == root:
            assert chunks is not None
            sizes = numpy.array([len(c) for c in chunks], dtype=numpy.int64)
            self._wait(what, [self._comm.Iscatter(sizes, mine, root=root)])
            offsets = numpy.concatenate([[0], numpy.cumsum(sizes)[:-1]]).astype(numpy.int64)
            send = numpy.frombuffer(b"".join(chunks), dtype=numpy.uint8)
            out = numpy.empty(int(mine[0]), dtype=numpy.uint8)
            self._wait(what, [self._comm.Iscatterv([send, (sizes, offsets), MPI.BYTE], out, root=root)])
        else:
            self._wait(what, [self._comm.Iscatter(None, mine, root=root)])
            out = numpy.empty(int(mine[0]), dtype=numpy.uint8)
            self._wait(what, [self._comm.Iscatterv(None, out, root=root)])
        return out.tobytes()

    def alltoall(self, chunks: Sequence[bytes], what: str) -> List[bytes]:
        """chunks[i] to rank i, from every rank; returns what each rank sent to this one."""
        MPI = self._MPI
        sizes = numpy.array([len(c) for c in chunks], dtype=numpy.int64)
        incoming = numpy.empty_like(sizes)
        self._wait(what, [self._comm.Ialltoall(sizes, incoming)])
        s_off = numpy.concatenate([[0], numpy.cumsum(sizes)[:-1]]).astype(numpy.int64)
        r_off = numpy.concatenate([[0], numpy.cumsum(incoming)[:-1]]).astype(numpy.int64)
        send = numpy.frombuffer(b"".join(chunks), dtype=numpy.uint8)
        out = numpy.empty(int(incoming.sum()), dtype=numpy.uint8)
        self._wait(what, [self._comm.Ialltoallv([send, (sizes, s_off), MPI.BYTE], [out, (incoming, r_off), MPI.BYTE])])
        return [out[o:o + n].tobytes() for o, n in zip(r_off.tolist(), incoming.tolist())]
