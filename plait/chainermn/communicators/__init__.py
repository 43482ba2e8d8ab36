"""`create_communicator` and the communicator classes (ChainerMN 1.3's names)."""
from __future__ import annotations

from typing import Any

from ._base import CommunicatorBase, DummyCommunicator, FlatCommunicator, NaiveCommunicator
from ._gpu import (
    GPU_NAMES,
    HierarchicalCommunicator,
    NonCudaAwareCommunicator,
    PureNcclCommunicator,
    SingleNodeCommunicator,
    TwoDimensionalCommunicator,
)

_CLASSES = {
    cls.name: cls
    for cls in (
        NaiveCommunicator,
        FlatCommunicator,
        HierarchicalCommunicator,
        TwoDimensionalCommunicator,
        SingleNodeCommunicator,
        NonCudaAwareCommunicator,
        PureNcclCommunicator,
        DummyCommunicator,
    )
}

#: Every name `create_communicator` accepts.
COMMUNICATOR_NAMES = tuple(_CLASSES)


def create_communicator(communicator_name: str = "hierarchical", mpi_comm: Any = None, allreduce_grad_dtype: Any = None) -> CommunicatorBase:
    """A ChainerMN communicator over plait.distributed.

    communicator_name:
      * ``naive``: one allreduce per parameter gradient; CPU (and GPU arrays, through the host).
      * ``flat``: all gradients packed into contiguous buffers, one allreduce per buffer; CPU too.
      * ``pure_nccl``, ``hierarchical`` (the default, as in ChainerMN), ``two_dimensional``,
        ``single_node``, ``non_cuda_aware``: gradients on GPUs averaged with NCCL; need CuPy and
        a CUDA device (RuntimeError otherwise, naming the CPU alternatives).
      * ``dummy``: no communication in allreduce_grad (to time everything else).
    mpi_comm: an mpi4py communicator. By default MPI.COMM_WORLD under an MPI launcher (mpiexec,
      mpirun, srun, or PLAIT_DIST_MPI=1); without one, a world of one process that does not
      import mpi4py.
    allreduce_grad_dtype: ``pure_nccl`` only: reduce the gradients in this float dtype.

    Every collective is bounded by PLAIT_DIST_TIMEOUT seconds (default 60): a dead or hung rank
    makes the others print which rank it is and abort the job with a non-zero status.
    """
    if not isinstance(communicator_name, str) or communicator_name not in _CLASSES:
        raise ValueError(
            f"Unrecognized communicator: {communicator_name!r}; the known names are "
            f"{', '.join(repr(n) for n in COMMUNICATOR_NAMES)} ('naive' and 'flat' run on the CPU)"
        )
    if allreduce_grad_dtype is not None:
        if communicator_name != "pure_nccl":
            raise ValueError(
                f"allreduce_grad_dtype is only available with the 'pure_nccl' communicator, not {communicator_name!r}"
            )
        return PureNcclCommunicator(mpi_comm, allreduce_grad_dtype=allreduce_grad_dtype)
    return _CLASSES[communicator_name](mpi_comm)


__all__ = [
    "COMMUNICATOR_NAMES",
    "CommunicatorBase",
    "DummyCommunicator",
    "FlatCommunicator",
    "GPU_NAMES",
    "HierarchicalCommunicator",
    "NaiveCommunicator",
    "NonCudaAwareCommunicator",
    "PureNcclCommunicator",
    "SingleNodeCommunicator",
    "TwoDimensionalCommunicator",
    "create_communicator",
]
