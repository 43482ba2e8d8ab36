"""ChainerMN 1.3's API over plait.distributed, for the Chainer face (plait.chainer).

`import plait.chainermn as chainermn` (or, under PLAIT_AS_CHAINER=1, plain `import chainermn`)
serves data-parallel Chainer code written for ChainerMN 1.3::

    comm = chainermn.create_communicator("naive")        # "flat" too on the CPU; GPU: "pure_nccl"
    model = L.Classifier(MLP(784, 100, 10))
    optimizer = chainermn.create_multi_node_optimizer(chainer.optimizers.Adam(), comm)
    optimizer.setup(model)                                 # rank 0's weights on every rank
    train = chainermn.scatter_dataset(train, comm)         # this rank's share of rank 0's data
    optimizer.update(model, x, t)                          # gradients averaged over the ranks

Launch with `mpiexec -n N python train.py`; without a launcher the same script runs as one
process, without importing mpi4py. Every collective is bounded by PLAIT_DIST_TIMEOUT seconds
(default 60): a dead or hung rank makes the others name it and exit non-zero.
mpi4py is imported only when a communicator is created under MPI. See docs/chainermn.md.
"""
from . import communicators, datasets, extensions, functions, iterators, links, optimizers  # noqa: F401
from .communicators import CommunicatorBase, create_communicator
from .datasets import DataSizeError, scatter_dataset
from .extensions import create_multi_node_checkpointer, create_multi_node_evaluator
from .links import MultiNodeChainList
from .optimizers import create_multi_node_optimizer

__version__ = "1.3.0"

__all__ = [
    "CommunicatorBase",
    "DataSizeError",
    "MultiNodeChainList",
    "communicators",
    "create_communicator",
    "create_multi_node_checkpointer",
    "create_multi_node_evaluator",
    "create_multi_node_optimizer",
    "datasets",
    "extensions",
    "functions",
    "iterators",
    "links",
    "optimizers",
    "scatter_dataset",
]
