"""Data-parallel training over MPI (mpi4py), for plait's Thinc face.

Start N copies of a training script with an MPI launcher (the `mpich` wheel provides
`mpiexec`; install both with ``pip install 'plait[distributed]'``)::

    mpiexec -n 2 python train.py

and in the script::

    from plait.distributed import get_communicator, DataParallel, shard

    comm = get_communicator()                 # rank, size; a one-process world without mpiexec
    model = chain(Relu(64), Softmax(10)).initialize(X=X[:5], Y=Y[:5])
    dp = DataParallel(model, comm)            # rank 0's weights now on every rank
    X_mine, Y_mine = shard(X, comm.rank, comm.size), shard(Y, comm.rank, comm.size)
    for Xb, Yb in batches(X_mine, Y_mine, size=B):      # B per rank: the step sees B * size
        Yh, backprop = dp.begin_update(Xb)
        backprop((Yh - Yb) / len(Yb))         # the mean over this rank's batch...
        dp.finish_update(optimizer)           # ...averaged over ranks: the mean over B * size
    if comm.rank == 0:
        model.to_disk("model.bin")

Everything in the communicator (`Communicator` under MPI, `LocalCommunicator` alone):

- ``rank``, ``size``, ``local_rank``, ``local_size``;
- ``bcast_params(model, root=0)``: root's parameters to every rank (checks the models match);
- ``allreduce_grads(model)``: every gradient replaced by its mean over ranks, packed into
  contiguous buckets of about 25 MB, one nonblocking Allreduce per bucket;
- ``allreduce_scalar(x, op="sum"|"mean"|"max"|"min")``, ``gather(obj, root=0)``,
  ``allgather(obj)``, ``bcast(obj, root=0)``, ``barrier()``;
- ``send(obj, dest, tag=0)``, ``recv(source, tag=None)``: a picklable object to one rank (large
  arrays without copies; tag None receives any tag);
- ``scatter(objs, root=0)``: root's ``objs[i]`` to rank i; ``alltoall(objs)``: every rank's
  ``objs[i]`` to rank i, returning the items received in rank order.

Every collective and message is bounded by PLAIT_DIST_TIMEOUT seconds (default 60): when a
rank dies or hangs, the others print which rank(s) did not answer and abort the job with a
non-zero status.
Without an MPI launcher, `get_communicator()` returns a one-process world whose collectives do
nothing, and mpi4py is never imported (nor is it by ``import plait`` or ``import
plait.distributed``). See docs/distributed.md.
"""
from ._comm import (
    DEFAULT_BUCKET_MB,
    DEFAULT_TIMEOUT,
    Communicator,
    LocalCommunicator,
    get_communicator,
    launched_by_mpi,
)
from ._data_parallel import DataParallel, distributed_finish_update, shard
from ._nccl import NcclCommunicator

__all__ = [
    "Communicator",
    "DataParallel",
    "DEFAULT_BUCKET_MB",
    "DEFAULT_TIMEOUT",
    "LocalCommunicator",
    "NcclCommunicator",
    "distributed_finish_update",
    "get_communicator",
    "launched_by_mpi",
    "shard",
]
