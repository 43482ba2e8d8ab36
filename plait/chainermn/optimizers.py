"""`create_multi_node_optimizer`: a Chainer optimizer whose updates use the mean gradient over ranks."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from .communicators._base import sorted_params


def _layout(link: Any) -> List[Tuple[str, Tuple[int, ...], str]]:
    return [(path, tuple(p.data.shape), str(p.data.dtype)) for path, p in sorted_params(link)]


class _MultiNodeOptimizer:
    """Wraps a Chainer optimizer: every attribute is the real optimizer's, except `setup` and
    `update`, which keep the ranks' parameters identical."""

    def __init__(self, actual_optimizer: Any, communicator: Any) -> None:
        object.__setattr__(self, "actual_optimizer", actual_optimizer)
        object.__setattr__(self, "communicator", communicator)
        object.__setattr__(self, "_synced_layout", None)
        if getattr(actual_optimizer, "target", None) is not None:
            # Set up before it was wrapped: start every rank from rank 0's parameters now.
            self._bcast(actual_optimizer.target)

    def _bcast(self, link: Any) -> None:
        self.communicator.bcast_data(link)
        object.__setattr__(self, "_synced_layout", _layout(link))

    def setup(self, link: Any) -> None:
        """The real optimizer's setup(link), then rank 0's parameters copied to every rank."""
        self.actual_optimizer.setup(link)
        self._bcast(link)

    def update(self, lossfun: Optional[Callable] = None, *args: Any, **kwds: Any) -> None:
        """One data-parallel step.

        With lossfun: zero the gradients, compute lossfun(*args, **kwds) and backprop it (as
        Chainer 1.7.2's update does). Then every gradient is replaced by its mean over all ranks
        (communicator.allreduce_grad) and the real optimizer updates from it (its hooks run on
        the mean). If the target's parameters changed (a parameter added or reshaped) since
        they were last broadcast, rank 0's are broadcast again instead and this step is skipped,
        as in ChainerMN: the gradients were computed from parameters that differed by rank.
        """
        target = self.actual_optimizer.target
        if target is None:
            raise RuntimeError("multi-node optimizer: the optimizer has no target; call setup(link) first.")
        if lossfun is not None:
            target.zerograds()
            loss = lossfun(*args, **kwds)
            loss.backward()
            del loss
        if _layout(target) != self._synced_layout:
            self._bcast(target)
            return
        self.communicator.allreduce_grad(target)
        self.actual_optimizer.update()

    def __getattr__(self, name: str) -> Any:
        # Only for names the wrapper itself lacks; its own three are never passed on (a copy or
        # unpickling looks them up before they are set, which must not recurse).
        if name in ("actual_optimizer", "communicator", "_synced_layout"):
            raise AttributeError(name)
        return getattr(self.actual_optimizer, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.actual_optimizer, name, value)

    def __repr__(self) -> str:
        return f"<multi-node {self.actual_optimizer!r} over {self.communicator!r}>"


def create_multi_node_optimizer(actual_optimizer: Any, communicator: Any, double_buffering: bool = False) -> Any:
    """A multi-node optimizer over `actual_optimizer` (e.g. chainer.optimizers.Adam()).

    It behaves as the real optimizer (every attribute is passed through) except that setup()
    (or this call, if the optimizer is already set up) copies rank 0's parameters to every rank,
    and update() averages the gradients over all ranks before the real update. With the same
    per-rank batch size B on N ranks, a step is the step of one process on the N*B examples,
    when the loss is a mean over the batch.

    double_buffering (overlapping one step's allreduce with the next step's computation) is a
    pure_nccl feature in ChainerMN: ValueError for other communicators, as there, and
    NotImplementedError for pure_nccl, which plait does not double-buffer.
    """
    if double_buffering:
        from .communicators import PureNcclCommunicator

        if not isinstance(communicator, PureNcclCommunicator):
            raise ValueError("This communicator does not support double buffering (only 'pure_nccl' does).")
        raise NotImplementedError(
            "create_multi_node_optimizer(double_buffering=True) is not implemented in plait.chainermn; "
            "use double_buffering=False."
        )
    return _MultiNodeOptimizer(actual_optimizer, communicator)


__all__ = ["create_multi_node_optimizer"]
