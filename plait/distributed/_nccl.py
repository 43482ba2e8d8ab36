"""The GPU communicator: gradient buckets on the GPU reduced by NCCL (through cupy.cuda.nccl).

MPI (mpi4py) still starts the ranks, hands out NCCL's unique id, carries objects and scalars,
and answers the pings that name a silent rank; only the GPU buckets go through NCCL, in place
on the device, with no copy to the host. cupy is imported when a communicator is built, never
by `import plait.distributed`.
"""
from __future__ import annotations

import socket
from typing import Any, List, Optional, Sequence

from ._comm import Communicator, _Bucket


def _import_nccl() -> Any:
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as error:
        raise RuntimeError(
            f"plait.distributed.NcclCommunicator needs cupy with NCCL ({error}). Install cupy for your CUDA "
            "version (e.g. pip install cupy-cuda12x) and NCCL, or use plait.distributed.Communicator, which "
            "reduces GPU arrays through host memory over MPI."
        ) from error
    available = getattr(nccl, "available", True)
    if not available:
        raise RuntimeError(
            "plait.distributed.NcclCommunicator: cupy was built without NCCL (cupy.cuda.nccl.available is "
            "False). Install NCCL for cupy (e.g. pip install nvidia-nccl-cu12), or use "
            "plait.distributed.Communicator, which reduces GPU arrays through host memory over MPI."
        )
    try:
        n_devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # cupy raises CUDARuntimeError without a driver or device
        n_devices = 0
        reason = str(error)
    else:
        reason = "no CUDA device is visible"
    if n_devices == 0:
        raise RuntimeError(
            f"plait.distributed.NcclCommunicator needs a GPU: {reason}. On CPUs use "
            "plait.distributed.Communicator (MPI)."
        )
    return cupy, nccl


class NcclCommunicator(Communicator):
    """`Communicator` whose GPU (cupy) buckets are reduced and broadcast by NCCL.

    One GPU per rank: by default rank r takes device `local_rank % device count` of its machine
    and makes it current (`device=` picks another). Two ranks on one GPU are refused (NCCL does
    not allow it) with a message naming them. Host (numpy) arrays still go over MPI, and every
    collective, NCCL's included, is bounded by the timeout: a rank that waits past it aborts
    the NCCL communicator, names the silent rank(s) and ends the job.
    """

    def __init__(self, mpi_comm: Any = None, *, timeout: Optional[float] = None,
                 bucket_mb: Optional[float] = None, device: Optional[int] = None) -> None:
        super().__init__(mpi_comm, timeout=timeout, bucket_mb=bucket_mb)
        self._nccl_comm = None
        self._pending = None  # the event recorded after the last NCCL operation
        cupy, nccl = _import_nccl()
        self._cupy, self._nccl = cupy, nccl
        n_devices = cupy.cuda.runtime.getDeviceCount()
        if device is None:
            device = self.local_rank % n_devices
        elif isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < n_devices:
            raise ValueError(f"NcclCommunicator: device must be a GPU index in 0..{n_devices - 1}, got {device!r}")
        cupy.cuda.Device(device).use()
        self.device = device
        # Every rank's (host, device, PCI bus id): two ranks on one GPU are refused before NCCL
        # sees them (NCCL fails on it, with an error that does not name the ranks).
        bus = cupy.cuda.Device(device).pci_bus_id
        where = self.allgather((socket.gethostname(), bus, device))
        first = {}
        for rank, (host, pci, index) in enumerate(where):
            if (host, pci) in first:
                # Every rank sees the same list, so every rank raises the same error.
                raise ValueError(
                    f"NcclCommunicator: ranks {first[host, pci]} and {rank} are both on GPU {index} ({pci}) of "
                    f"{host}; NCCL needs one GPU per rank. Start at most as many ranks per machine as it has "
                    "GPUs, or use plait.distributed.Communicator, which reduces GPU arrays through host memory."
                )
            first[host, pci] = rank
        unique_id = nccl.get_unique_id() if self.rank == 0 else None
        unique_id = self.bcast(unique_id, root=0)
        self.barrier()  # every rank is alive and here: the blocking NCCL init below will meet
        self._nccl_comm = nccl.NcclCommunicator(self.size, unique_id, self.rank)
        self._dtypes = {"<f2": nccl.NCCL_FLOAT16, "<f4": nccl.NCCL_FLOAT32, "<f8": nccl.NCCL_FLOAT64}

    def __repr__(self) -> str:
        return f"NcclCommunicator(rank={self.rank}, size={self.size}, device={self.device}, timeout={self.timeout:g}s)"

    def _before_abort(self) -> None:
        # A rank inside an NCCL kernel waits for its peers forever: aborting the NCCL
        # communicator releases the kernels of this process before MPI ends the job.
        comm, self._nccl_comm = self._nccl_comm, None
        if comm is not None:
            try:
                comm.abort()
            except Exception:
                pass

    def _nccl_dtype(self, bucket: _Bucket) -> int:
        code = self._dtypes.get(bucket.dtype.str)
        if code is None:
            raise TypeError(f"NcclCommunicator: NCCL cannot reduce arrays of dtype {bucket.dtype}")
        return code

    def _start(self, bucket: _Bucket, op: Any) -> List[Any]:
        """A GPU bucket through NCCL, in place on the current stream; a host one over MPI."""
        if not bucket.on_gpu:
            return super()._start(bucket, op)
        if self._nccl_comm is None:
            raise RuntimeError("NcclCommunicator: the NCCL communicator was aborted")
        nccl = self._nccl
        stream = self._cupy.cuda.get_current_stream()
        ptr, count, dtype = bucket.buffer.data.ptr, bucket.buffer.size, self._nccl_dtype(bucket)
        if op == "sum":
            self._nccl_comm.allReduce(ptr, ptr, count, dtype, nccl.NCCL_SUM, stream.ptr)
        else:
            self._nccl_comm.bcast(ptr, count, dtype, op, stream.ptr)
        self._pending = stream.record()  # later work on the stream finishes after earlier work
        return []

    def _device_done(self) -> Optional[Any]:
        event, self._pending = self._pending, None
        if event is None:
            return None
        comm = self._nccl_comm

        def done() -> bool:
            if event.done:
                return True
            comm.check_async_error()  # a failed peer connection raises here instead of hanging
            return False

        return done

    def _complete(self, plan: Sequence[_Bucket], requests: List[Any]) -> None:
        try:
            super()._complete(plan, requests)
        except self._nccl.NcclError as error:
            self._abort(f"{self._what} (collective #{self._seq}) failed in NCCL: {error}. A rank has probably died.")

    def close(self) -> None:
        """Release the NCCL communicator (also done when the process exits)."""
        comm, self._nccl_comm = self._nccl_comm, None
        if comm is not None:
            comm.destroy()
