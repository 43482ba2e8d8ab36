"""ChainerMN 1.3's differentiable communication functions: not supported by plait.chainermn.

They serve model parallelism (a graph cut across ranks). For arrays outside the graph use the
communicator's methods (comm.send, comm.recv, comm.bcast, comm.gather, comm.allgather,
comm.alltoall, comm.scatter), which plait.chainermn has.
"""
from ._unsupported import unsupported_function

_WHY = (
    "differentiable communication (model parallelism) is not implemented; the communicator's "
    "methods of the same name send arrays outside the graph."
)

allgather = unsupported_function("functions.allgather", _WHY)
alltoall = unsupported_function("functions.alltoall", _WHY)
bcast = unsupported_function("functions.bcast", _WHY)
gather = unsupported_function("functions.gather", _WHY)
scatter = unsupported_function("functions.scatter", _WHY)
send = unsupported_function("functions.send", _WHY)
recv = unsupported_function("functions.recv", _WHY)
pseudo_connect = unsupported_function("functions.pseudo_connect", _WHY)

__all__ = ["allgather", "alltoall", "bcast", "gather", "pseudo_connect", "recv", "scatter", "send"]
