"""The communicators behind plait.distributed: MPI (mpi4py) and the one-process world.

mpi4py is imported only when a process was started by an MPI launcher (or PLAIT_DIST_MPI=1):
`import plait.distributed` and a one-process run never load it.
"""
from __future__ import annotations

import collections
import collections.abc
import hashlib
import numbers
import os
import pickle
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy

from . import _shm

DEFAULT_TIMEOUT = 60.0
DEFAULT_BUCKET_MB = 25.0

# Environment variables that MPI launchers set in every rank they start: MPICH/Intel MPI
# (hydra: PMI_*), Open MPI (OMPI_*), PMIx-based launchers (PMIX_RANK), Slurm's srun with PMI2.
_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")

# Bucket plans a Communicator keeps (each holds its buffers: at most a copy of the gradients
# of the models it reduces, per layout).
_MAX_PLANS = 256

_TAG_PING = 31001
_TAG_PONG = 31002

# The tags a one-process world accepts: 0..32767, the least upper bound (TAG_UB) MPI allows, so
# that a script that runs alone does not fail on its tags under any MPI.
_LOCAL_TAG_UB = 32767
# send/recv: array (PickleBuffer) data of at least this many bytes travels out of band, in a
# message of its own straight from and into the array's memory, without copies.
_OUT_OF_BAND_MIN = 1 << 16


def _positive_from_env(name: str, default: float, unit: str) -> float:
    """The positive, finite number in environment variable `name` (default when unset or blank)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of {unit}, got {raw!r}") from None
    if not value > 0 or value == float("inf"):  # `not > 0` also refuses nan
        raise ValueError(f"{name} must be a positive, finite number of {unit}, got {raw!r}")
    return value


def _timeout_from_env() -> float:
    return _positive_from_env("PLAIT_DIST_TIMEOUT", DEFAULT_TIMEOUT, "seconds")


def _bucket_mb_from_env() -> float:
    return _positive_from_env("PLAIT_DIST_BUCKET_MB", DEFAULT_BUCKET_MB, "megabytes")


def launched_by_mpi() -> bool:
    """Whether this process was started by an MPI launcher (mpiexec, mpirun, srun)."""
    if os.environ.get("PLAIT_DIST_MPI", "").strip() == "1":
        return True
    return any(name in os.environ for name in _LAUNCHER_VARS)


def _import_mpi() -> Any:
    try:
        from mpi4py import MPI  # noqa: WPS433 (lazy on purpose)
    except ImportError as error:
        found = ", ".join(f"{n}={os.environ[n]}" for n in _LAUNCHER_VARS if n in os.environ) or "PLAIT_DIST_MPI=1"
        raise ImportError(
            f"plait.distributed: this process was started by an MPI launcher ({found}) but mpi4py "
            f"cannot be imported ({error}). Install it with: pip install 'plait[distributed]' "
            "(mpi4py and the mpich wheel, which provides mpiexec)."
        ) from error
    return MPI


def _param_entries(model: Any) -> List[Tuple[Any, str, Any]]:
    """(node, name, param) for every initialized parameter of the tree, in a fixed order."""
    entries = []
    for node in model.walk():
        if node.shims:
            raise NotImplementedError(
                f"plait.distributed: model '{node.name}' wraps another framework ({type(node.shims[0]).__name__}); "
                "averaging the gradients of shims (PyTorch, TensorFlow, MXNet) is not implemented yet."
            )
        if getattr(node._params, "proxy", None) is not None:
            raise NotImplementedError(
                f"plait.distributed: model '{node.name}' keeps its parameters on a parameter-server proxy; "
                "data parallelism over proxied parameters is not implemented."
            )
        for name in node.param_names:
            if not node.has_param(name):
                continue
            param = node.get_param(name)
            _check_array(param, f"parameter '{name}' of model '{node.name}'")
            entries.append((node, name, param))
    return entries


def _on_gpu(array: Any) -> bool:
    return type(array).__module__.split(".", 1)[0] == "cupy"


def _writable(array: Any) -> bool:
    # cupy arrays have no `writeable` flag: they always are.
    return getattr(array.flags, "writeable", True)


def _check_array(array: Any, what: str) -> None:
    if type(array) is not numpy.ndarray and not _on_gpu(array):
        raise NotImplementedError(
            f"plait.distributed: {what} is a {type(array).__module__}.{type(array).__name__}; only numpy "
            "(CPU) and cupy (GPU) arrays can be reduced."
        )
    if array.dtype.kind != "f":
        raise TypeError(
            f"plait.distributed: {what} has dtype {array.dtype}; only floating-point arrays can be averaged."
        )


class _Bucket:
    __slots__ = ("dtype", "on_gpu", "items", "n_values", "flags_at", "buffer", "host", "shared")

    def __init__(self, dtype: numpy.dtype, on_gpu: bool = False) -> None:
        self.dtype = dtype
        self.on_gpu = on_gpu
        self.items: List[Tuple[int, int, int]] = []  # (entry index, offset, size)
        self.n_values = 0
        self.flags_at: Optional[int] = None
        self.buffer: Optional[Any] = None  # numpy, or cupy for a GPU bucket
        self.host: Optional[numpy.ndarray] = None  # a GPU bucket's staging copy for MPI
        self.shared: Optional[Any] = None  # _shm.SharedBucket: buffer shared with this machine's ranks


def _make_plan(arrays: Sequence[Any], bucket_bytes: int, with_flags: bool, extra: int = 0,
               shared: Optional[Any] = None) -> List[_Bucket]:
    """Pack arrays (or (node, name, array) entries) into contiguous buckets of about bucket_bytes.

    One dtype and one device (CPU or GPU) per bucket. With with_flags, the last bucket carries
    one value per array after the values: 1 where this rank has a gradient for it, so that the
    ranks agree on which parameters were updated; then `extra` more values for the caller.
    shared(n_values, dtype): a CPU bucket's buffer in memory shared by the ranks of this
    machine (a _shm.SharedBucket), or None for a private one; collective, like the plan.
    """
    arrays = [a[2] if isinstance(a, tuple) else a for a in arrays]
    buckets: List[_Bucket] = []
    open_by_kind: Dict[Tuple[str, bool], _Bucket] = {}
    for index, param in enumerate(arrays):
        key = (param.dtype.str, _on_gpu(param))
        bucket = open_by_kind.get(key)
        nbytes = param.size * param.dtype.itemsize
        if bucket is None or (bucket.n_values and (bucket.n_values * param.dtype.itemsize + nbytes) > bucket_bytes):
            bucket = _Bucket(param.dtype, key[1])
            buckets.append(bucket)
            open_by_kind[key] = bucket
        bucket.items.append((index, bucket.n_values, param.size))
        bucket.n_values += param.size
    if with_flags:
        if not buckets or buckets[-1].on_gpu:
            # The flags travel in a host bucket: the ranks read them on the CPU.
            host = [b for b in buckets if not b.on_gpu]
            flag_bucket = host[-1] if host else _Bucket(numpy.dtype("float32"))
            if not host:
                buckets.append(flag_bucket)
            else:
                buckets.remove(flag_bucket)
                buckets.append(flag_bucket)
        buckets[-1].flags_at = buckets[-1].n_values
    for bucket in buckets:
        total = bucket.n_values + (len(arrays) + extra if bucket.flags_at is not None else 0)
        if bucket.on_gpu:
            import cupy

            bucket.buffer = cupy.empty(total, dtype=bucket.dtype)
        else:
            bucket.shared = shared(total, bucket.dtype) if shared is not None else None
            bucket.buffer = bucket.shared.buffer if bucket.shared is not None else numpy.empty(total, dtype=bucket.dtype)
    return buckets


def _labels(entries: Sequence[Tuple[Any, str, Any]]) -> List[str]:
    return [f"{node.name}.{name}" for node, name, _param in entries]


def _prepare_arrays(arrays: Sequence[Any], labels: Optional[Sequence[str]], what: str) -> List[str]:
    if labels is None:
        labels = [f"#{i}" for i in range(len(arrays))]
    elif len(labels) != len(arrays):
        raise ValueError(f"{what}: {len(labels)} labels for {len(arrays)} arrays; give one label per array")
    for label, array in zip(labels, arrays):
        _check_array(array, f"array {label!r}")
    return list(labels)


class LocalCommunicator:
    """The world of one process (no MPI launcher): every collective is a no-op, nothing is sent."""

    rank = 0
    size = 1
    local_rank = 0
    local_size = 1

    def __init__(self) -> None:
        self._mailbox = _Mailbox()

    def __repr__(self) -> str:
        return "LocalCommunicator(rank=0, size=1)"

    def barrier(self) -> None:
        return None

    def bcast_params(self, model: Any, root: int = 0) -> None:
        _check_root(root, 1)
        _param_entries(model)  # the same refusals (shims, GPU arrays) as with several ranks

    def bcast_arrays(self, arrays: Sequence[Any], root: int = 0, labels: Optional[Sequence[str]] = None) -> List[Any]:
        _check_root(root, 1)
        _prepare_arrays(arrays, labels, "bcast_arrays")
        return list(arrays)

    def allreduce_mean(self, grads: Sequence[Optional[Any]], like: Sequence[Any], labels: Optional[Sequence[str]] = None) -> List[Optional[Any]]:
        if len(grads) != len(like):
            raise ValueError(f"allreduce_mean: {len(grads)} gradients for {len(like)} parameters")
        return list(grads)

    def allreduce_grads(self, model: Any) -> None:
        # Nothing to average alone, and no walk of the model per step: what a multi-rank run
        # would refuse (shims, GPU arrays) was refused once, by bcast_params in DataParallel.
        return None

    def allreduce_scalar(self, value: float, op: str = "sum") -> float:
        _check_op(op)
        return float(value)

    def gather(self, obj: Any, root: int = 0) -> Optional[List[Any]]:
        _check_root(root, 1)
        return [obj]

    def allgather(self, obj: Any) -> List[Any]:
        return [obj]

    def bcast(self, obj: Any, root: int = 0) -> Any:
        _check_root(root, 1)
        return obj

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Keep a copy of `obj` for recv(0, tag): the only rank to send to is this one."""
        _check_rank(dest, 1, "send", "dest")
        tag = _check_tag(tag, _LOCAL_TAG_UB, "send")
        self._mailbox.put(tag, pickle.dumps(obj, protocol=5))

    def recv(self, source: int, tag: Optional[int] = None) -> Any:
        """The oldest object sent with this tag (any tag: None); RuntimeError when there is none."""
        _check_rank(source, 1, "recv", "source")
        tag = _check_tag(tag, _LOCAL_TAG_UB, "recv", allow_any=True)
        return pickle.loads(self._mailbox.take(tag, 0))

    def scatter(self, objs: Optional[Sequence[Any]], root: int = 0) -> Any:
        _check_rank(root, 1, "scatter", "root")
        return _check_items(objs, 1, "scatter", f"on the root (rank {root})")[0]

    def alltoall(self, objs: Sequence[Any]) -> List[Any]:
        return list(_check_items(objs, 1, "alltoall", "on every rank"))


class _Mailbox:
    """The messages a rank sent to itself (pickled copies), taken by tag in the order sent."""

    def __init__(self) -> None:
        self._items: Any = collections.deque()

    def put(self, tag: int, data: bytes) -> None:
        self._items.append((tag, data))

    def take(self, tag: Optional[int], rank: int) -> bytes:
        for index, (sent_tag, data) in enumerate(self._items):
            if tag is None or sent_tag == tag:
                del self._items[index]
                return data
        which = "any tag" if tag is None else f"tag {tag}"
        raise RuntimeError(
            f"recv: rank {rank} (this process) has sent itself no message with {which} to receive; "
            "a message to oneself must be sent before it is received (waiting would never end)"
        )


def _check_rank(value: Any, size: int, method: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= int(value) < size:
        raise ValueError(f"{method}: {name} must be a rank in 0..{size - 1}, got {value!r}")
    return int(value)


def _check_tag(tag: Any, upper: int, method: str, allow_any: bool = False) -> Optional[int]:
    if tag is None and allow_any:
        return None
    if isinstance(tag, bool) or not isinstance(tag, numbers.Integral) or not 0 <= int(tag) <= upper:
        bound = "the least TAG_UB MPI allows" if upper == _LOCAL_TAG_UB else "this MPI's TAG_UB"
        anything = ", or None for any tag" if allow_any else ""
        raise ValueError(f"{method}: tag must be an int in 0..{upper} ({bound}){anything}; got {tag!r}")
    return int(tag)


def _check_items(objs: Any, size: int, method: str, where: str) -> Sequence[Any]:
    """objs as a sequence of one item per rank, or TypeError/ValueError saying what is wrong."""
    if (objs is None or isinstance(objs, (str, bytes, bytearray, collections.abc.Mapping))
            or not (hasattr(objs, "__len__") and hasattr(objs, "__getitem__"))):
        raise TypeError(
            f"{method}: objs must be a sequence (list, tuple) of {size} item{'s' if size > 1 else ''}, one per "
            f"rank, {where}; got {type(objs).__name__}"
        )
    if len(objs) != size:
        raise ValueError(f"{method}: objs must hold one item per rank ({size}) {where}; got {len(objs)}")
    return objs


def _offsets(sizes: numpy.ndarray) -> numpy.ndarray:
    return numpy.concatenate([[0], numpy.cumsum(sizes)[:-1]]).astype(numpy.int64)


def _check_root(root: int, size: int) -> None:
    if not isinstance(root, int) or not 0 <= root < size:
        raise ValueError(f"root must be a rank in 0..{size - 1}, got {root!r}")


_OPS = ("sum", "mean", "max", "min")


def _check_op(op: str) -> None:
    if op not in _OPS:
        raise ValueError(f"op must be one of {', '.join(_OPS)}; got {op!r}")


class Communicator:
    """Collectives over an MPI communicator (mpi4py), each bounded by a timeout.

    Every collective is posted nonblocking and polled against a deadline (`timeout` seconds,
    default PLAIT_DIST_TIMEOUT or 60). When the deadline passes, the ranks that have not
    answered are found out (each waiting rank answers pings while it polls), a message naming
    them goes to stderr, and MPI_Abort ends the whole job with a non-zero status.

    Building one duplicates `mpi_comm` (default COMM_WORLD) twice, for plait's traffic and for
    the pings: a blocking collective that every rank must reach (the only unbounded wait).
    """

    def __init__(self, mpi_comm: Any = None, *, timeout: Optional[float] = None, bucket_mb: Optional[float] = None) -> None:
        MPI = _import_mpi()
        self._MPI = MPI
        base = MPI.COMM_WORLD if mpi_comm is None else mpi_comm
        # Our own contexts: user traffic on `base` can never match plait's messages.
        self._comm = base.Dup()
        self._diag = base.Dup()
        for comm in (self._comm, self._diag):
            comm.Set_errhandler(MPI.ERRORS_RETURN)
        self.rank: int = self._comm.Get_rank()
        self.size: int = self._comm.Get_size()
        local = self._comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank: int = local.Get_rank()
        self.local_size: int = local.Get_size()
        local.Free()
        # Gradient sums through shared memory when the whole job is on this machine (_shm.py),
        # on every rank or none (a rank with PLAIT_DIST_SHM=0 turns it off for all: making the
        # shared buckets is collective).
        shm_here = (_shm.enabled_by_env() and self.size > 1 and self.local_size == self.size
                    and os.path.isdir(_shm.SHM_DIR))
        self._shm_on = bool(self._comm.allreduce(int(shm_here), op=MPI.MIN)) if self.size > 1 else False
        self.timeout = _timeout_from_env() if timeout is None else float(timeout)
        if not self.timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        bucket_mb = _bucket_mb_from_env() if bucket_mb is None else bucket_mb
        if not bucket_mb > 0:
            raise ValueError(f"bucket_mb must be positive, got {bucket_mb!r}")
        self.bucket_bytes = int(bucket_mb * 1024 * 1024)
        # Every MPI allows tags 0..TAG_UB, an attribute of COMM_WORLD (the same for every communicator).
        self._tag_ub = int(MPI.COMM_WORLD.Get_attr(MPI.TAG_UB))
        self._mailbox = _Mailbox()  # messages this rank sent itself
        self._seq = 0  # collectives begun: every rank counts the same ones
        self._what = ""
        self._p2p = False  # whether _what is a point-to-point message (which _seq does not count)
        # Bucket plans by array shapes, least recently used first (see _plan).
        self._plans: "collections.OrderedDict[Tuple, List[_Bucket]]" = collections.OrderedDict()
        self._pongs_out: List[Any] = []

    def __repr__(self) -> str:
        return f"Communicator(rank={self.rank}, size={self.size}, timeout={self.timeout:g}s)"

    # --- waiting with a deadline --------------------------------------------------------

    def _answer_pings(self) -> None:
        MPI = self._MPI
        status = MPI.Status()
        while self._diag.iprobe(source=MPI.ANY_SOURCE, tag=_TAG_PING, status=status):
            source = status.Get_source()
            self._diag.recv(source=source, tag=_TAG_PING)
            self._pongs_out.append(self._diag.isend((self._seq, self._doing()), dest=source, tag=_TAG_PONG))
        if self._pongs_out:
            self._pongs_out = [r for r in self._pongs_out if not r.Test()]

    def _wait(self, requests: List[Any], device_done: Optional[Any] = None) -> None:
        # MPI makes progress (without a progress thread) only while some rank calls into it, so
        # this spins on Testall rather than sleeping between tests: a sleep would stall the
        # reduction itself. The clock and the ping side channel are looked at every 64 tests.
        # device_done: a callable that says whether work queued on the GPU (NCCL) has finished.
        MPI = self._MPI
        testall = MPI.Request.Testall
        if any(isinstance(r, _shm.ShmRequest) for r in requests):
            testall = self._test_all
        deadline = time.monotonic() + self.timeout
        spins = 0
        try:
            while not (testall(requests) and (device_done is None or device_done())):
                spins += 1
                if spins & 63 == 0:
                    if spins >= 1024:
                        # A long wait (a peer is slower, or descheduled): let another process
                        # on a busy machine run instead of spinning against it.
                        os.sched_yield()
                    now = time.monotonic()
                    if spins & 4095 == 0:
                        self._answer_pings()
                    if now > deadline:
                        self._fail_timeout()
        except MPI.Exception as error:
            self._abort(f"{self._doing()} failed: {error.Get_error_string()}. A rank has probably died.")

    def _test_all(self, requests: List[Any]) -> bool:
        """Whether all `requests` (MPI requests and shared-memory sums) are done; advances them."""
        return _shm.test_all(requests, self._MPI.Request.Testall)

    def _begin(self, what: str) -> None:
        """Name the collective about to be waited for (every rank begins the same ones, in order)."""
        self._seq += 1
        self._what = what
        self._p2p = False

    def _begin_p2p(self, what: str) -> None:
        """Name the point-to-point operation about to be waited for: only some ranks take part, so
        it is not counted with the collectives, whose numbers stay the same on every rank."""
        self._what = what
        self._p2p = True

    def _doing(self) -> str:
        """What this rank waits in, as the messages name it."""
        if not self._what:
            return "nothing"
        if self._p2p:
            return f"{self._what} (after collective #{self._seq})"
        return f"{self._what} (collective #{self._seq})"

    def _fail_timeout(self) -> None:
        MPI = self._MPI
        others = [r for r in range(self.size) if r != self.rank]
        pings = []
        for other in others:
            try:
                pings.append(self._diag.isend(None, dest=other, tag=_TAG_PING))
            except MPI.Exception:
                pass
        answers: Dict[int, Tuple[int, str]] = {}  # rank: (its collective number, what it waits in)
        grace = time.monotonic() + min(3.0, max(0.5, self.timeout / 2))
        status = MPI.Status()
        while time.monotonic() < grace and len(answers) < len(others):
            try:
                self._answer_pings()
                while self._diag.iprobe(source=MPI.ANY_SOURCE, tag=_TAG_PONG, status=status):
                    source = status.Get_source()
                    answers[source] = self._diag.recv(source=source, tag=_TAG_PONG)
            except MPI.Exception:
                break
            time.sleep(0.002)
        silent = [r for r in others if r not in answers]
        mine = (self._seq, self._doing())
        elsewhere = [(r, doing) for r, (s, doing) in sorted(answers.items()) if (s, doing) != mine]
        parts = []
        if silent:
            parts.append(
                f"rank{'s' if len(silent) > 1 else ''} {', '.join(map(str, silent))} did not answer "
                "(dead, hung, or busy outside plait's collectives)"
            )
        for other, doing in elsewhere:
            parts.append(f"rank {other} is waiting in {doing} instead")
        if not parts:
            parts.append("every rank answered and waits in the same collective (the MPI library made no progress)")
        self._abort(
            f"{self._doing()} did not complete within {self.timeout:g} s "
            f"(PLAIT_DIST_TIMEOUT): {'; '.join(parts)}."
        )

    def _abort(self, message: str) -> None:
        self._before_abort()
        sys.stdout.flush()
        sys.stderr.write(f"plait.distributed: rank {self.rank} of {self.size}: {message} Aborting the job.\n")
        sys.stderr.flush()
        # The launcher forwards this rank's stderr through its proxy, which MPI_Abort tears down:
        # without a moment's grace the message is sometimes lost on the way (seen with hydra).
        time.sleep(0.5)
        self._MPI.COMM_WORLD.Abort(1)
        os._exit(1)  # Abort does not return; this is the belt to its braces.

    def _before_abort(self) -> None:
        """Hook for subclasses: release what MPI_Abort would not (the NCCL communicator)."""

    # --- collectives --------------------------------------------------------------------

    def barrier(self) -> None:
        """Wait until every rank has arrived (bounded by the timeout)."""
        self._begin("barrier")
        self._wait([self._comm.Ibarrier()])

    def allreduce_scalar(self, value: float, op: str = "sum") -> float:
        """The sum (or mean, max, min) of one number over all ranks, returned on every rank."""
        _check_op(op)
        self._begin(f"allreduce_scalar({op})")
        buffer = numpy.array([value], dtype=numpy.float64)
        if self.size == 1:
            return float(buffer[0])
        mpi_op = {"sum": self._MPI.SUM, "mean": self._MPI.SUM, "max": self._MPI.MAX, "min": self._MPI.MIN}[op]
        self._wait([self._comm.Iallreduce(self._MPI.IN_PLACE, buffer, op=mpi_op)])
        result = float(buffer[0])
        return result / self.size if op == "mean" else result

    def _allgather_bytes(self, data: bytes) -> List[bytes]:
        sizes = numpy.zeros(self.size, dtype=numpy.int64)
        sizes[self.rank] = len(data)
        self._wait([self._comm.Iallgather(self._MPI.IN_PLACE, sizes)])
        offsets = numpy.concatenate([[0], numpy.cumsum(sizes)[:-1]]).astype(numpy.int64)
        out = numpy.empty(int(sizes.sum()), dtype=numpy.uint8)
        send = numpy.frombuffer(data, dtype=numpy.uint8)
        self._wait([self._comm.Iallgatherv(send, [out, (sizes, offsets), self._MPI.BYTE])])
        return [out[o:o + s].tobytes() for o, s in zip(offsets.tolist(), sizes.tolist())]

    def allgather(self, obj: Any) -> List[Any]:
        """Every rank's `obj` (picklable), in rank order, on every rank."""
        self._begin("allgather")
        return [pickle.loads(b) for b in self._allgather_bytes(pickle.dumps(obj))]

    def gather(self, obj: Any, root: int = 0) -> Optional[List[Any]]:
        """Every rank's `obj` (picklable, e.g. a dict of metrics) as a list on `root`; None elsewhere."""
        _check_root(root, self.size)
        self._begin("gather")
        data = pickle.dumps(obj)
        sizes = numpy.zeros(self.size, dtype=numpy.int64)
        mine = numpy.array([len(data)], dtype=numpy.int64)
        self._wait([self._comm.Igather(mine, sizes, root=root)])
        send = numpy.frombuffer(data, dtype=numpy.uint8)
        if self.rank == root:
            offsets = numpy.concatenate([[0], numpy.cumsum(sizes)[:-1]]).astype(numpy.int64)
            out = numpy.empty(int(sizes.sum()), dtype=numpy.uint8)
            self._wait([self._comm.Igatherv(send, [out, (sizes, offsets), self._MPI.BYTE], root=root)])
            return [pickle.loads(out[o:o + s].tobytes()) for o, s in zip(offsets.tolist(), sizes.tolist())]
        self._wait([self._comm.Igatherv(send, None, root=root)])
        return None

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """`root`'s `obj` (picklable) on every rank."""
        _check_root(root, self.size)
        self._begin("bcast")
        data = pickle.dumps(obj) if self.rank == root else b""
        size = numpy.array([len(data)], dtype=numpy.int64)
        self._wait([self._comm.Ibcast(size, root=root)])
        buffer = numpy.frombuffer(data, dtype=numpy.uint8).copy() if self.rank == root else numpy.empty(int(size[0]), numpy.uint8)
        self._wait([self._comm.Ibcast(buffer, root=root)])
        return pickle.loads(buffer.tobytes()) if self.rank != root else obj

    # --- point-to-point messages, scatter and all-to-all ----------------------------------
    # Posted nonblocking on this communicator's own duplicate (`_comm`), whose point-to-point
    # messages nothing else in plait sends (the pings go over `_diag`), so every tag in
    # 0..TAG_UB is the caller's; waited for with the deadline, like every collective.

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Send the picklable `obj` to rank `dest`, which receives it with recv(); returns once
        it is on its way (for a large message: once `dest` receives it), bounded by the timeout.

        Arrays (numpy, or anything pickled with out-of-band buffers) of 64 KiB or more travel
        in messages of their own, straight from their memory: they are not copied into the
        pickle. Messages between two ranks with the same tag arrive in the order sent. A
        message to this rank itself is kept for its own recv().
        """
        dest = _check_rank(dest, self.size, "send", "dest")
        tag = _check_tag(tag, self._tag_ub, "send")
        if dest == self.rank:
            self._mailbox.put(tag, pickle.dumps(obj, protocol=5))
            return
        buffers: List[Any] = []

        def out_of_band(buffer: Any) -> Any:
            # A false value puts the buffer out of band; small ones stay in the pickle.
            return memoryview(buffer).nbytes < _OUT_OF_BAND_MIN or buffers.append(buffer)

        stream = pickle.dumps(obj, protocol=5, buffer_callback=out_of_band)
        views = [buffer.raw() for buffer in buffers]
        # A header (tag, pickle length, buffer count), the buffer lengths, the pickle, the
        # buffers: all with the tag, so that they arrive in this order (MPI's non-overtaking rule).
        header = numpy.array([tag, len(stream), len(views)], dtype=numpy.int64)
        self._begin_p2p(f"send to rank {dest} (tag {tag})")
        BYTE = self._MPI.BYTE
        requests = [self._comm.Isend(header, dest=dest, tag=tag)]
        if views:
            lengths = numpy.array([view.nbytes for view in views], dtype=numpy.int64)
            requests.append(self._comm.Isend(lengths, dest=dest, tag=tag))
        requests.append(self._comm.Isend([stream, BYTE], dest=dest, tag=tag))
        requests += [self._comm.Isend([view, BYTE], dest=dest, tag=tag) for view in views]
        self._wait(requests)

    def recv(self, source: int, tag: Optional[int] = None) -> Any:
        """The object rank `source` sent with send() and this `tag` (None: the first one sent
        with any tag), bounded by the timeout: a silent `source` is named and the job aborted.

        Arrays sent out of band come back in freshly allocated, writable memory.
        """
        source = _check_rank(source, self.size, "recv", "source")
        tag = _check_tag(tag, self._tag_ub, "recv", allow_any=True)
        if source == self.rank:
            return pickle.loads(self._mailbox.take(tag, self.rank))
        self._begin_p2p(f"recv from rank {source}" + ("" if tag is None else f" (tag {tag})"))
        header = numpy.empty(3, dtype=numpy.int64)
        any_tag = self._MPI.ANY_TAG if tag is None else tag
        self._wait([self._comm.Irecv(header, source=source, tag=any_tag)])
        tag, n_stream, n_buffers = (int(v) for v in header)
        lengths = numpy.empty(n_buffers, dtype=numpy.int64)
        if n_buffers:
            self._wait([self._comm.Irecv(lengths, source=source, tag=tag)])
        stream = numpy.empty(n_stream, dtype=numpy.uint8)
        buffers = [numpy.empty(int(n), dtype=numpy.uint8) for n in lengths]
        BYTE = self._MPI.BYTE
        self._wait([self._comm.Irecv([b, BYTE], source=source, tag=tag) for b in [stream, *buffers]])
        return pickle.loads(stream, buffers=buffers)

    def scatter(self, objs: Optional[Sequence[Any]], root: int = 0) -> Any:
        """objs[i] to rank i: on `root`, `objs` is a sequence of `size` picklable items
        (ignored elsewhere); returns this rank's item. Only its own item is sent to a rank; the
        root's comes back as it is, not copied.

        When the root's `objs` is not that (or does not pickle), the root raises the error and
        every other rank a ValueError that points to it.
        """
        root = _check_rank(root, self.size, "scatter", "root")
        self._begin("scatter")
        mine = numpy.empty(1, dtype=numpy.int64)
        if self.rank != root:
            self._wait([self._comm.Iscatter(None, mine, root=root)])
            if mine[0] < 0:
                raise ValueError(f"scatter: the root (rank {root}) could not scatter its objs; see its error")
            out = numpy.empty(int(mine[0]), dtype=numpy.uint8)
            self._wait([self._comm.Iscatterv(None, out, root=root)])
            return pickle.loads(out)
        try:
            objs = _check_items(objs, self.size, "scatter", f"on the root (rank {root})")
            chunks = [b"" if r == root else pickle.dumps(objs[r], protocol=5) for r in range(self.size)]
        except Exception:
            refusal = numpy.full(self.size, -1, dtype=numpy.int64)
            self._wait([self._comm.Iscatter(refusal, mine, root=root)])
            raise
        sizes = numpy.array([len(c) for c in chunks], dtype=numpy.int64)
        self._wait([self._comm.Iscatter(sizes, mine, root=root)])
        send = numpy.frombuffer(b"".join(chunks), dtype=numpy.uint8)
        out = numpy.empty(0, dtype=numpy.uint8)
        self._wait([self._comm.Iscatterv([send, (sizes, _offsets(sizes)), self._MPI.BYTE], out, root=root)])
        return objs[root]

    def alltoall(self, objs: Sequence[Any]) -> List[Any]:
        """objs[i] (picklable) to rank i, from every rank: `objs` is a sequence of `size` items;
        returns the list of what each rank sent to this one, item i from rank i (this rank's
        own item as it is, not copied).

        When a rank's `objs` is not that (or does not pickle), that rank raises the error and
        every other rank a ValueError naming it.
        """
        self._begin("alltoall")
        try:
            objs = _check_items(objs, self.size, "alltoall", "on every rank")
            chunks = [b"" if r == self.rank else pickle.dumps(objs[r], protocol=5) for r in range(self.size)]
            error: Optional[BaseException] = None
        except Exception as caught:
            chunks, error = [], caught
        sizes = numpy.array([len(c) for c in chunks] if error is None else [-1] * self.size, dtype=numpy.int64)
        incoming = numpy.empty(self.size, dtype=numpy.int64)
        self._wait([self._comm.Ialltoall(sizes, incoming)])
        if error is not None:
            raise error
        refused = [r for r in range(self.size) if incoming[r] < 0]
        if refused:
            raise ValueError(
                f"alltoall: rank{'s' if len(refused) > 1 else ''} {', '.join(map(str, refused))} could not "
                "send its objs; see the error there"
            )
        BYTE = self._MPI.BYTE
        send = numpy.frombuffer(b"".join(chunks), dtype=numpy.uint8)
        out = numpy.empty(int(incoming.sum()), dtype=numpy.uint8)
        offsets = _offsets(incoming)
        self._wait([self._comm.Ialltoallv([send, (sizes, _offsets(sizes)), BYTE], [out, (incoming, offsets), BYTE])])
        view = memoryview(out)
        return [objs[r] if r == self.rank else pickle.loads(view[o:o + n])
                for r, (o, n) in enumerate(zip(offsets.tolist(), incoming.tolist()))]

    def _plan(self, arrays: Sequence[Any], with_flags: bool) -> List[_Bucket]:
        key = (with_flags, tuple((tuple(a.shape), a.dtype.str, _on_gpu(a)) for a in arrays))
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
        else:
            # Room for one plan per parameter shape of big models (ChainerMN's `naive` reduces
            # each parameter alone): a shared bucket costs collectives and a file to make, so
            # a plan must not be dropped and remade every step. Every rank evicts the same one.
            if len(self._plans) >= _MAX_PLANS:
                self._plans.popitem(last=False)
            # Sums (with_flags) go through shared memory where they can; broadcasts through MPI.
            plan = self._plans[key] = _make_plan(arrays, self.bucket_bytes, with_flags,
                                                 shared=self._shared_bucket if with_flags else None)
        return plan

    def _shared_bucket(self, n_values: int, dtype: numpy.dtype) -> Optional[Any]:
        """A bucket buffer shared with the other ranks (collective), or None: see _shm.py."""
        if not self._shm_on:
            return None
        what, p2p = self._what, self._p2p
        try:
            bucket = _shm.shared_bucket(self, n_values, dtype)
        finally:
            self._what, self._p2p = what, p2p
        if bucket is None:
            self._shm_on = False  # every rank saw the same failure
        return bucket

    def _check_same_arrays(self, labels: Sequence[str], arrays: Sequence[Any], root: int, what: str) -> None:
        signature = tuple((label, tuple(a.shape), a.dtype.str) for label, a in zip(labels, arrays))
        digest = hashlib.sha256(repr(signature).encode()).hexdigest()[:32]
        views = [pickle.loads(b) for b in self._allgather_bytes(pickle.dumps((digest, self.bucket_bytes)))]
        digests = [d for d, _ in views]
        sizes = [b for _, b in views]
        if len(set(sizes)) > 1:
            # Different bucket sizes would pair Allreduces of different lengths: refuse up front.
            raise ValueError(
                f"plait.distributed.{what}: the ranks were given different gradient bucket sizes "
                f"({', '.join(f'rank {r}: {b / 2**20:g} MB' for r, b in enumerate(sizes))}); set the same "
                "PLAIT_DIST_BUCKET_MB (or bucket_mb) on every rank."
            )
        if len(set(digests)) > 1:
            differ = [r for r, d in enumerate(digests) if d != digests[root]]
            raise ValueError(
                f"plait.distributed.{what}: the model on rank(s) {', '.join(map(str, differ))} does not have "
                f"the same parameters (names, shapes, dtypes, in walk order) as on rank {root}. Build and "
                "initialize the same model, with the same data shapes, on every rank."
            )

    def _start(self, bucket: _Bucket, op: Any) -> List[Any]:
        """Post the sum (op="sum") or broadcast from rank `op` (an int) of one bucket; its requests.

        A GPU bucket travels through its host copy here (see NcclCommunicator for NCCL).
        """
        MPI = self._MPI
        buffer = bucket.buffer
        if bucket.on_gpu:
            if bucket.host is None:
                bucket.host = numpy.empty(bucket.buffer.size, dtype=bucket.dtype)
            bucket.buffer.get(out=bucket.host)
            buffer = bucket.host
        if op == "sum":
            if bucket.shared is not None:
                return [bucket.shared.start()]
            return [self._comm.Iallreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)]
        return [self._comm.Ibcast(buffer, root=op)]

    def _device_done(self) -> Optional[Any]:
        """A callable telling whether GPU work queued by _start has finished (None: there is none)."""
        return None

    def _complete(self, plan: Sequence[_Bucket], requests: List[Any]) -> None:
        """Wait for the started buckets of `plan`; their values are then in bucket.buffer."""
        self._wait(requests, self._device_done())
        for bucket in plan:
            if bucket.on_gpu and bucket.host is not None:
                bucket.buffer.set(bucket.host)

    def _reduce_buckets(self, plan: Sequence[_Bucket], op: Any) -> None:
        """Sum (op="sum") or broadcast from rank `op` (an int) every bucket, in place, all posted at once."""
        requests: List[Any] = []
        for bucket in plan:
            requests += self._start(bucket, op)
        self._complete(plan, requests)

    @staticmethod
    def _pack(bucket: _Bucket, grads: Sequence[Optional[Any]], flags: Any, labels: Sequence[str], like: Sequence[Any]) -> None:
        """Copy the bucket's gradients into its buffer; a missing one as zeros, flagged 0."""
        buffer = bucket.buffer
        for index, offset, size in bucket.items:
            grad = grads[index]
            if grad is not None:
                if grad.size != size:
                    raise ValueError(
                        f"allreduce_mean: the gradient of {labels[index]!r} has shape {tuple(grad.shape)}, "
                        f"its parameter {tuple(like[index].shape)}"
                    )
                buffer[offset:offset + size] = grad.reshape(-1)
                flags[index] = 1
            else:
                buffer[offset:offset + size] = 0
                flags[index] = 0

    def _unpack(self, plan: Sequence[_Bucket], grads: Sequence[Optional[Any]], like: Sequence[Any], flags: Any) -> List[Optional[Any]]:
        """The means out of the reduced buckets: in place where the gradient allows, None where no rank had one."""
        out: List[Optional[Any]] = list(grads)
        for bucket in plan:
            scale = bucket.dtype.type(1.0 / self.size)
            xp = sys.modules["cupy"] if bucket.on_gpu else numpy
            for index, offset, size in bucket.items:
                if flags[index] == 0:
                    out[index] = None
                    continue
                param = like[index]
                total = bucket.buffer[offset:offset + size].reshape(param.shape)
                grad = grads[index]
                if (grad is not None and type(grad) is type(param) and _writable(grad)
                        and tuple(grad.shape) == tuple(param.shape) and grad.dtype == param.dtype):
                    xp.multiply(total, scale, out=grad)  # the mean, in one pass
                else:
                    out[index] = (total * scale).astype(param.dtype, copy=False)
        return out

    def bcast_arrays(self, arrays: Sequence[Any], root: int = 0, labels: Optional[Sequence[str]] = None) -> List[Any]:
        """Overwrite every rank's `arrays` with `root`'s, in place where the arrays are writable.

        The ranks first compare the arrays' labels, shapes and dtypes; a mismatch raises
        ValueError on every rank. Returns the arrays holding root's values: the same objects,
        except for read-only or non-contiguous ones, which come back as new arrays.
        """
        _check_root(root, self.size)
        labels = _prepare_arrays(arrays, labels, "bcast_arrays")
        self._begin("bcast_params (model check)")
        self._check_same_arrays(labels, arrays, root, "bcast_params")
        if self.size == 1:
            return list(arrays)
        self._begin("bcast_params")
        plan = self._plan(arrays, with_flags=False)
        if self.rank == root:
            for bucket in plan:
                for index, offset, size in bucket.items:
                    bucket.buffer[offset:offset + size] = arrays[index].reshape(-1)
        self._reduce_buckets(plan, root)
        out = list(arrays)
        if self.rank != root:
            for bucket in plan:
                for index, offset, size in bucket.items:
                    array = arrays[index]
                    values = bucket.buffer[offset:offset + size].reshape(array.shape)
                    if _writable(array) and array.flags.c_contiguous:
                        array[...] = values
                    else:
                        out[index] = values.copy()
        return out

    def allreduce_mean(self, grads: Sequence[Optional[Any]], like: Sequence[Any], labels: Optional[Sequence[str]] = None) -> List[Optional[Any]]:
        """The mean over all ranks of each gradient in `grads` (None: no gradient on this rank).

        `like[i]` is the parameter of `grads[i]` (its shape, dtype and device). Gradients are
        packed into contiguous buckets of about `bucket_mb` (one dtype and device each) and
        reduced with one nonblocking MPI Allreduce per bucket, all posted before waiting. A
        missing gradient counts as zero; the result is the mean where any rank had a gradient,
        and None where none did. Writable gradients of the parameter's shape are overwritten in
        place (and returned); other ones come back as new arrays.
        """
        if len(grads) != len(like):
            raise ValueError(f"allreduce_mean: {len(grads)} gradients for {len(like)} parameters")
        labels = _prepare_arrays(like, labels, "allreduce_mean")
        if self.size == 1:
            return list(grads)
        self._begin("allreduce_grads")
        plan = self._plan(like, with_flags=True)
        flags_bucket = plan[-1]
        flags = flags_bucket.buffer[flags_bucket.flags_at:]
        for bucket in plan:
            self._pack(bucket, grads, flags, labels, like)
        self._reduce_buckets(plan, "sum")
        return self._unpack(plan, grads, like, flags)

    def bcast_params(self, model: Any, root: int = 0) -> None:
        """Overwrite every rank's parameters with `root`'s (the same model built on every rank).

        The ranks first compare their models' parameter lists (names, shapes, dtypes); a
        mismatch raises ValueError on every rank, naming the first difference.
        """
        entries = _param_entries(model)
        arrays = [param for _node, _name, param in entries]
        result = self.bcast_arrays(arrays, root, labels=_labels(entries))
        for (node, name, param), value in zip(entries, result):
            if value is not param:
                node.set_param(name, value)

    def allreduce_grads(self, model: Any) -> None:
        """Replace every parameter gradient of `model` by its mean over all ranks, in place.

        See `allreduce_mean`: one nonblocking Allreduce per bucket of about `bucket_mb`; a
        parameter without a gradient on this rank counts as zero there, gets the mean if any
        rank had a gradient for it, and stays without one when none did.
        """
        entries = _param_entries(model)
        if self.size == 1:
            return
        # Weights that a DataParallel(shard_update=True) shares between the ranks of this machine
        # become private again first: model.finish_update then steps each rank's own copy (every
        # rank detaches before this collective, so no rank copies while another steps).
        from ._sharded import detach_shared

        detach_shared(entries)
        grads = [node.get_grad(name) if node.has_grad(name) else None for node, name, _param in entries]
        result = self.allreduce_mean(grads, [param for _node, _name, param in entries], labels=_labels(entries))
        for (node, name, _param), before, after in zip(entries, grads, result):
            if after is not None and after is not before:
                node.set_grad(name, after)


_WORLD: Optional[Any] = None


def get_communicator(*, timeout: Optional[float] = None, bucket_mb: Optional[float] = None) -> Any:
    """The communicator of this process's world (created once, then shared).

    Under an MPI launcher (mpiexec, mpirun, srun; or PLAIT_DIST_MPI=1) a `Communicator` over
    mpi4py's COMM_WORLD; otherwise a `LocalCommunicator` (rank 0 of 1) that never imports MPI.
    timeout (seconds) and bucket_mb default to PLAIT_DIST_TIMEOUT (60) and PLAIT_DIST_BUCKET_MB (25).
    """
    global _WORLD
    if timeout is not None and not float(timeout) > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if bucket_mb is not None and not float(bucket_mb) > 0:
        raise ValueError(f"bucket_mb must be positive, got {bucket_mb!r}")
    if _WORLD is None:
        if launched_by_mpi():
            _WORLD = Communicator(timeout=timeout, bucket_mb=bucket_mb)
        else:
            # Bad settings are refused here too, not only under mpiexec.
            _timeout_from_env()
            _bucket_mb_from_env()
            _WORLD = LocalCommunicator()
    elif isinstance(_WORLD, Communicator):
        if timeout is not None:
            _WORLD.timeout = float(timeout)
        if bucket_mb is not None:
            _WORLD.bucket_bytes = int(float(bucket_mb) * 1024 * 1024)
            _WORLD._plans.clear()
    return _WORLD
