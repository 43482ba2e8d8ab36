"""ChainerMN 1.3's multi-node iterator: not supported by plait.chainermn."""
from ._unsupported import unsupported_function

create_multi_node_iterator = unsupported_function(
    "iterators.create_multi_node_iterator",
    "it wraps a chainer.iterators iterator, which Chainer 1.7.2 (plait.chainer) does not have. Give every "
    "rank its own share with chainermn.scatter_dataset, or broadcast batches with comm.bcast_obj.",
)

__all__ = ["create_multi_node_iterator"]
