"""ChainerMN 1.3's links: none is supported by plait.chainermn (each raises NotImplementedError)."""
from ._unsupported import unsupported_class, unsupported_function

_MODEL_PARALLEL = (
    "model parallelism (parts of one model on different ranks, joined by differentiable send/recv) "
    "is not implemented; plait.chainermn supports data parallelism (create_multi_node_optimizer)."
)

MultiNodeBatchNormalization = unsupported_class(
    "links.MultiNodeBatchNormalization",
    "ChainerMN 1.3 itself refuses it with Chainer 1.x (it needs Chainer >= 2), and plait.chainer is "
    "Chainer 1.7.2. Use chainer.links.BatchNormalization (per-rank batch statistics) and average the "
    "running statistics with chainermn.extensions.AllreducePersistent.",
)
MultiNodeChainList = unsupported_class("links.MultiNodeChainList", _MODEL_PARALLEL)
create_multi_node_n_step_rnn = unsupported_function("links.create_multi_node_n_step_rnn", _MODEL_PARALLEL)

__all__ = ["MultiNodeBatchNormalization", "MultiNodeChainList", "create_multi_node_n_step_rnn"]
