"""ChainerMN's communicator API over plait.distributed.

A communicator wraps one plait.distributed communicator (the backend):

* under an MPI launcher (mpiexec, mpirun, srun; or PLAIT_DIST_MPI=1), or when an mpi4py
  communicator is given, a `plait.distributed.Communicator` (or, for the GPU names, a
  `NcclCommunicator`) over it: every collective bounded by PLAIT_DIST_TIMEOUT;
* otherwise a `plait.distributed.LocalCommunicator`: a world of one process whose collectives
  return at once, without importing mpi4py (ChainerMN itself always needs MPI).

Model methods (`bcast_data`, `allreduce_grad`) go through the backend's bucketed array
collectives; the `*_obj` methods and the array methods (`bcast`, `gather`, `allgather`,
`allreduce`, `scatter`, `alltoall`, `send`/`recv`) through its methods for picklable objects
(`bcast`, `gather`, `allgather`, `scatter`, `alltoall`, `send`/`recv`), all bounded by its
timeout. Arrays travel as (numpy array, whether it came from a GPU) pairs; the backend's
send/recv carries large arrays out of band, without copying them into the pickle.
"""
from __future__ import annotations

import copy
import functools
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy


def _is_gpu_array(x: Any) -> bool:
    return type(x).__module__.split(".", 1)[0] == "cupy"


def _to_host(x: Any, what: str) -> Tuple[numpy.ndarray, bool]:
    """(a numpy array holding x, whether x was on a GPU)."""
    if isinstance(x, numpy.ndarray):
        return x, False
    if _is_gpu_array(x):
        import cupy

        return cupy.asnumpy(x), True
    if isinstance(x, (numpy.generic, int, float, complex, bool)):
        return numpy.asarray(x), False
    raise TypeError(
        f"chainermn {what}: expected a numpy or cupy array, got {type(x).__module__}.{type(x).__name__}"
        " (use the *_obj methods for other Python objects)"
    )


def _to_device(a: numpy.ndarray, on_gpu: bool) -> Any:
    if on_gpu:
        import cupy

        return cupy.asarray(a)  # onto the current device, as ChainerMN places received arrays
    return a


def sorted_params(model: Any) -> List[Tuple[str, Any]]:
    """(path, parameter) of every parameter of a link, sorted by path (the order of every rank)."""
    return sorted(model.namedparams(), key=lambda item: item[0])


def _owned_grad(param: Any) -> Any:
    """param's gradient as an array this parameter owns (copied first if a backward shared it)."""
    writable = getattr(param, "_writable_grad", None)
    if writable is not None and param.grad is not None:
        return writable()
    return param.grad


class CommunicatorBase:
    """The interface of a ChainerMN communicator; `create_communicator` returns its subclasses.

    Ranks: `rank`, `size`; `intra_rank`, `intra_size` (within this machine); `inter_rank`,
    `inter_size` (machines). Model methods: `bcast_data(model)`, `allreduce_grad(model)`.
    Arrays: `send`, `recv`, `bcast`, `gather`, `allgather`, `allreduce` (sum), `scatter`,
    `alltoall`. Objects: `send_obj`, `recv_obj`, `bcast_obj`, `gather_obj`, `allreduce_obj`
    (sum). `split(color, key)`. `mpi_comm`: the mpi4py communicator.
    """

    #: The name `create_communicator` knows this communicator by.
    name = ""

    def __init__(self, mpi_comm: Any = None) -> None:
        self._init_world(mpi_comm)

    # --- the world ----------------------------------------------------------------------

    def _make_backend(self, mpi_comm: Any) -> Any:
        from plait.distributed import Communicator

        return Communicator(mpi_comm)

    def _init_world(self, mpi_comm: Any, local: bool = False) -> None:
        from plait.distributed import LocalCommunicator, launched_by_mpi

        if local or (mpi_comm is None and not launched_by_mpi()):
            self._backend = LocalCommunicator()
            self._mpi_comm = None
            self._intra = (0, 1, 0, 1)
        else:
            self._backend = self._make_backend(mpi_comm)
            if mpi_comm is None:
                from mpi4py import MPI

                mpi_comm = MPI.COMM_WORLD
            self._mpi_comm = mpi_comm
            self._intra = self._node_ranks()

    def _node_ranks(self) -> Tuple[int, int, int, int]:
        """(intra_rank, intra_size, inter_rank, inter_size) from every rank's processor name."""
        from mpi4py import MPI

        names = self._backend.allgather(MPI.Get_processor_name())
        ranks_of: Dict[str, List[int]] = {}
        for rank, name in enumerate(names):
            ranks_of.setdefault(name, []).append(rank)
        # Machines are numbered in the order of their lowest rank, ranks on a machine by rank.
        nodes = sorted(ranks_of, key=lambda name: ranks_of[name][0])
        mine = ranks_of[names[self.rank]]
        return mine.index(self.rank), len(mine), nodes.index(names[self.rank]), len(nodes)

    @property
    def _local(self) -> bool:
        return self._mpi_comm is None

    def __repr__(self) -> str:
        return f"<chainermn {self.name or type(self).__name__} communicator: rank {self.rank} of {self.size}>"

    @property
    def rank(self) -> int:
        """This process's rank, 0 .. size - 1."""
        return self._backend.rank

    @property
    def size(self) -> int:
        """The number of processes."""
        return self._backend.size

    @property
    def intra_rank(self) -> int:
        """This process's rank among the processes on its machine."""
        return self._intra[0]

    @property
    def intra_size(self) -> int:
        """The number of processes on this machine."""
        return self._intra[1]

    @property
    def inter_rank(self) -> int:
        """This machine's number, 0 .. inter_size - 1 (machines in the order of their first rank)."""
        return self._intra[2]

    @property
    def inter_size(self) -> int:
        """The number of machines."""
        return self._intra[3]

    @property
    def mpi_comm(self) -> Any:
        """The mpi4py communicator. In a one-process world (no MPI launcher), reading it imports
        mpi4py and gives MPI.COMM_WORLD, a world of one."""
        if self._mpi_comm is None:
            try:
                from mpi4py import MPI
            except ImportError as error:
                raise ImportError(
                    f"chainermn: this one-process communicator uses no MPI, and mpi_comm needs mpi4py, "
                    f"which cannot be imported ({error}). pip install 'plait[distributed]'"
                ) from error
            return MPI.COMM_WORLD
        return self._mpi_comm

    def split(self, color: int, key: int) -> "CommunicatorBase":
        """A communicator of the same kind over the ranks that gave the same color (MPI_Comm_split),
        ranked by key. Like building any communicator, the split itself waits without a bound."""
        new = copy.copy(self)
        if self._local:
            new._init_world(None, local=True)
        else:
            new._init_world(self._mpi_comm.Split(int(color), int(key)))
        return new

    # --- model parameters ---------------------------------------------------------------

    def bcast_data(self, model: Any) -> None:
        """Copy rank 0's parameter values into every rank's `model` (a link).

        The ranks first compare their parameters (paths, shapes, dtypes): a mismatch raises
        ValueError on every rank, naming the ranks that differ.
        """
        named = sorted_params(model)
        arrays = [param.data for _, param in named]
        values = self._backend.bcast_arrays(arrays, root=0, labels=[path for path, _ in named])
        for (_, param), before, after in zip(named, arrays, values):
            if after is not before:
                param.data = after

    def broadcast_data(self, model: Any) -> None:
        """The old name of `bcast_data`."""
        self.bcast_data(model)

    def allreduce_grad(self, model: Any) -> None:
        """Replace the gradient of every parameter of `model` by its mean over all ranks."""
        raise NotImplementedError(f"{type(self).__name__}.allreduce_grad")

    def _allreduce_grad(self, model: Any, per_param: bool, dtype: Any = None) -> None:
        if self.size == 1:
            return
        named = sorted_params(model)
        params = [param for _, param in named]
        labels = [path for path, _ in named]
        grads = [_owned_grad(param) for param in params]
        likes = [param.data for param in params]
        if dtype is not None:
            # Reduce in another dtype (pure_nccl's allreduce_grad_dtype), then cast back.
            grads = [None if g is None else g.astype(dtype) for g in grads]
            xp = [numpy if isinstance(p, numpy.ndarray) else __import__("cupy") for p in likes]
            likes = [m.empty(p.shape, dtype=dtype) for m, p in zip(xp, likes)]
        if per_param:
            means: List[Any] = []
            for g, like, label in zip(grads, likes, labels):
                means.extend(self._backend.allreduce_mean([g], [like], labels=[label]))
        else:
            means = self._backend.allreduce_mean(grads, likes, labels=labels)
        for param, before, after in zip(params, grads, means):
            if after is None:
                continue
            if dtype is not None:
                after = after.astype(param.data.dtype)
            elif after is before:
                continue
            param.grad = after

    # --- arrays -------------------------------------------------------------------------

    def _check_peer(self, peer: int, what: str) -> int:
        if not isinstance(peer, (int, numpy.integer)) or not 0 <= int(peer) < self.size:
            raise ValueError(f"chainermn {what}: rank {peer!r} is not in 0..{self.size - 1}")
        if int(peer) == self.rank:
            raise ValueError(f"chainermn {what}: rank {peer} is this process; give another rank")
        return int(peer)

    def send(self, data: Any, dest: int, tag: int = 0) -> None:
        """Send an array, or a tuple/list of arrays, to rank `dest`, which receives it with recv()."""
        dest = self._check_peer(dest, "send")
        if isinstance(data, (tuple, list)):
            pieces = [_to_host(x, "send") for x in data]
            payload = ("arrays", True, [a for a, _ in pieces], [g for _, g in pieces])
        else:
            array, on_gpu = _to_host(data, "send")
            payload = ("arrays", False, [array], [on_gpu])
        self._backend.send(payload, dest, tag)

    def recv(self, source: int, tag: Optional[int] = None) -> Any:
        """The array (or tuple of arrays) rank `source` sent with send(); tag None takes any tag."""
        source = self._check_peer(source, "recv")
        kind, is_tuple, arrays, gpus = self._backend.recv(source, tag)
        if kind != "arrays":
            raise TypeError(f"chainermn recv: rank {source} sent an object with send_obj(); receive it with recv_obj()")
        out = [_to_device(a, g) for a, g in zip(arrays, gpus)]
        return tuple(out) if is_tuple else out[0]

    def bcast(self, x: Any, root: int = 0) -> Any:
        """Root's array `x` on every rank (ignored elsewhere)."""
        if self.rank == root:
            message = _to_host(x, "bcast")
        else:
            message = None
        array, on_gpu = self._backend.bcast(message, root=root)
        return x if self.rank == root else _to_device(array, on_gpu)

    def gather(self, x: Any, root: int = 0) -> Optional[Tuple[Any, ...]]:
        """Every rank's array, in rank order, as a tuple on `root`; None elsewhere."""
        gathered = self._backend.gather(_to_host(x, "gather"), root=root)
        if gathered is None:
            return None
        return tuple(_to_device(a, g) for a, g in gathered)

    def allgather(self, x: Any) -> Tuple[Any, ...]:
        """Every rank's array, in rank order, as a tuple on every rank."""
        return tuple(_to_device(a, g) for a, g in self._backend.allgather(_to_host(x, "allgather")))

    def allreduce(self, x: Any) -> Any:
        """The sum over ranks of the array `x` (same shape everywhere), on every rank.

        Summed in rank order, so every rank gets the same bits.
        """
        array, on_gpu = _to_host(x, "allreduce")
        arrays = [a for a, _ in self._backend.allgather((array, on_gpu))]
        shapes = {a.shape for a in arrays}
        if len(shapes) > 1:
            raise ValueError(f"chainermn allreduce: the ranks gave arrays of different shapes {[a.shape for a in arrays]}")
        total = functools.reduce(lambda a, b: a + b, arrays)
        return _to_device(numpy.asarray(total, dtype=numpy.result_type(*arrays)), on_gpu)

    def scatter(self, xs: Any, root: int = 0) -> Any:
        """On root, `xs` is a tuple of `size` arrays, or an array whose first axis has `size`
        entries; rank i receives the i-th (xs is ignored elsewhere).

        When root's `xs` is refused, root raises why and the other ranks a ValueError
        pointing to it (they do not wait for the timeout)."""
        objs: Optional[List[Any]] = None
        if self.rank == root:
            try:
                if isinstance(xs, (tuple, list)):
                    pieces = [_to_host(x, "scatter") for x in xs]
                else:
                    array, on_gpu = _to_host(xs, "scatter")
                    if array.ndim == 0:
                        raise ValueError("chainermn scatter: give a tuple of arrays or an array with one row per rank")
                    pieces = [(row, on_gpu) for row in array]
                if len(pieces) != self.size:
                    raise ValueError(f"chainermn scatter: {len(pieces)} arrays for {self.size} ranks")
            except (TypeError, ValueError):
                self._refuse(lambda: self._scatter_obj(None, root, "scatter"))
                raise
            objs = pieces
        array, on_gpu = self._scatter_obj(objs, root, "scatter")
        return _to_device(array, on_gpu)

    @staticmethod
    def _refuse(collective: Any) -> None:
        """Take part in `collective` with refused arguments: the backend then raises on every
        rank (the others naming this one); here its error gives way to the caller's own."""
        try:
            collective()
        except (TypeError, ValueError):
            pass

    def alltoall(self, xs: Sequence[Any]) -> Tuple[Any, ...]:
        """Send xs[i] (an array) to rank i; returns the arrays every rank sent to this one, in rank order.

        When a rank's `xs` is refused, it raises why and the other ranks a ValueError naming it."""
        try:
            if len(xs) != self.size:
                raise ValueError(f"chainermn alltoall: {len(xs)} arrays for {self.size} ranks; give one per rank")
            pieces = [_to_host(x, "alltoall") for x in xs]
        except (TypeError, ValueError):
            self._refuse(lambda: self._backend.alltoall(None))
            raise
        return tuple(_to_device(*piece) for piece in self._backend.alltoall(pieces))

    # --- Python objects -----------------------------------------------------------------

    def send_obj(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Send a picklable object to rank `dest`, which receives it with recv_obj()."""
        dest = self._check_peer(dest, "send_obj")
        payload = ("object", obj)
        self._backend.send(payload, dest, tag)

    def recv_obj(self, source: int, tag: Optional[int] = None) -> Any:
        """The object rank `source` sent with send_obj(); tag None takes any tag."""
        source = self._check_peer(source, "recv_obj")
        payload = self._backend.recv(source, tag)
        if payload[0] != "object":
            raise TypeError(f"chainermn recv_obj: rank {source} sent arrays with send(); receive them with recv()")
        return payload[1]

    def bcast_obj(self, obj: Any, max_buf_len: Optional[int] = None, root: int = 0) -> Any:
        """Root's picklable `obj` on every rank. max_buf_len is accepted for ChainerMN's
        signature; plait sends any size in one message."""
        return self._backend.bcast(obj, root=root)

    def gather_obj(self, obj: Any, root: int = 0) -> Optional[List[Any]]:
        """Every rank's `obj`, in rank order, as a list on `root`; None elsewhere."""
        return self._backend.gather(obj, root=root)

    def allreduce_obj(self, obj: Any) -> Any:
        """The sum (`+`) of every rank's `obj`, in rank order, on every rank."""
        return functools.reduce(lambda a, b: a + b, self._backend.allgather(obj))

    def allgather_obj(self, obj: Any) -> List[Any]:
        """Every rank's `obj`, in rank order, on every rank (a later ChainerMN's name)."""
        return self._backend.allgather(obj)

    def _scatter_obj(self, objs: Optional[Sequence[Any]], root: int, what: str) -> Any:
        """objs[i] (given on root) to rank i, each rank receiving only its own."""
        if not isinstance(root, (int, numpy.integer)) or not 0 <= int(root) < self.size:
            raise ValueError(f"chainermn {what}: root {root!r} is not a rank in 0..{self.size - 1}")
        return self._backend.scatter(objs, int(root))


class NaiveCommunicator(CommunicatorBase):
    """`naive`: one mean-allreduce per parameter gradient (on CPU arrays, or GPU arrays staged
    through the host)."""

    name = "naive"

    def allreduce_grad(self, model: Any) -> None:
        self._allreduce_grad(model, per_param=True)


class FlatCommunicator(CommunicatorBase):
    """`flat`: all gradients packed into contiguous buffers (plait's buckets of
    PLAIT_DIST_BUCKET_MB, one dtype each), one nonblocking allreduce per buffer."""

    name = "flat"

    def allreduce_grad(self, model: Any) -> None:
        self._allreduce_grad(model, per_param=False)


class DummyCommunicator(CommunicatorBase):
    """`dummy`: allreduce_grad sends nothing and leaves each rank's gradients as they are (to
    measure what the communication costs; training is then not data-parallel)."""

    name = "dummy"

    def allreduce_grad(self, model: Any) -> None:
        return None
