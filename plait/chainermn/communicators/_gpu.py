"""The GPU communicators (`pure_nccl`, `hierarchical`, `two_dimensional`, `single_node`,
`non_cuda_aware`): gradients on GPUs averaged with NCCL by plait.distributed.NcclCommunicator.

ChainerMN 1.3 implements these with different algorithms (NCCL inside a machine and MPI between
machines, 2-D all-reduce, ...); here all of them are plait's NCCL all-reduce, which gives the
same means. Each needs CuPy and a visible CUDA device; without them `create_communicator`
raises a RuntimeError that says so and that `naive` and `flat` work on the CPU.
"""
from __future__ import annotations

from typing import Any

import numpy

from ._base import CommunicatorBase

GPU_NAMES = ("hierarchical", "two_dimensional", "single_node", "non_cuda_aware", "pure_nccl")


def check_gpu(name: str) -> None:
    """Raise RuntimeError unless CuPy with a CUDA device is usable for the communicator `name`."""
    from plait import compat

    if not compat.has_cupy:
        why = "CuPy is not installed (or fails to import)"
    elif not compat.has_cupy_gpu:
        why = "CuPy sees no CUDA device"
    else:
        return
    raise RuntimeError(
        f"chainermn: the '{name}' communicator averages gradients on GPUs with NCCL, but {why}. "
        "On the CPU use create_communicator('naive') (one allreduce per parameter) or "
        "create_communicator('flat') (gradients packed into buffers)."
    )


def _nccl_communicator_class(name: str) -> Any:
    try:
        from plait.distributed import NcclCommunicator
    except ImportError as error:
        raise NotImplementedError(
            f"chainermn: the '{name}' communicator needs plait.distributed.NcclCommunicator, which "
            f"this version of plait does not have ({error}). On the CPU use 'naive' or 'flat'."
        ) from error
    return NcclCommunicator


class _GpuCommunicator(CommunicatorBase):
    allreduce_grad_dtype: Any = None

    def __init__(self, mpi_comm: Any = None) -> None:
        check_gpu(self.name)
        super().__init__(mpi_comm)

    def _make_backend(self, mpi_comm: Any) -> Any:
        return _nccl_communicator_class(self.name)(mpi_comm)

    def allreduce_grad(self, model: Any) -> None:
        self._allreduce_grad(model, per_param=False, dtype=self.allreduce_grad_dtype)


class HierarchicalCommunicator(_GpuCommunicator):
    """`hierarchical` (ChainerMN's default): here plait's NCCL all-reduce."""

    name = "hierarchical"


class TwoDimensionalCommunicator(_GpuCommunicator):
    """`two_dimensional`: here plait's NCCL all-reduce."""

    name = "two_dimensional"


class SingleNodeCommunicator(_GpuCommunicator):
    """`single_node`: all ranks on one machine; here plait's NCCL all-reduce."""

    name = "single_node"

    def __init__(self, mpi_comm: Any = None) -> None:
        super().__init__(mpi_comm)
        if self.inter_size > 1:
            raise ValueError(
                f"chainermn: the 'single_node' communicator is for ranks on one machine; these {self.size} "
                f"ranks run on {self.inter_size}. Use 'pure_nccl' or 'hierarchical'."
            )


class NonCudaAwareCommunicator(_GpuCommunicator):
    """`non_cuda_aware`: for MPI builds without CUDA support; here plait's NCCL all-reduce."""

    name = "non_cuda_aware"


class PureNcclCommunicator(_GpuCommunicator):
    """`pure_nccl`: NCCL all-reduce; `allreduce_grad_dtype` (e.g. numpy.float16) reduces the
    gradients in that dtype and casts the means back to the parameters' dtype."""

    name = "pure_nccl"

    def __init__(self, mpi_comm: Any = None, allreduce_grad_dtype: Any = None) -> None:
        if allreduce_grad_dtype is not None:
            dtype = numpy.dtype(allreduce_grad_dtype)
            if dtype.kind != "f":
                raise ValueError(
                    f"chainermn: allreduce_grad_dtype must be numpy.float16, numpy.float32, numpy.float64 "
                    f"or None; got {dtype}"
                )
            self.allreduce_grad_dtype = dtype
        super().__init__(mpi_comm)
