"""PyTorchGradScaler: loss scaling for mixed-precision PyTorch models (not implemented yet in plait)."""
from __future__ import annotations


def _unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what}: wrapping PyTorch models is not implemented yet in plait, so there are no PyTorch "
        f"gradients to scale. Build the model from plait layers instead, or run PyTorch-wrapping "
        f"code with thinc."
    )


class PyTorchGradScaler:
    """Scales the loss of a wrapped PyTorch model so that float16 gradients do not underflow.

    Part of the PyTorch bridge, which plait does not have yet: creating one raises
    NotImplementedError. The constructor takes Thinc 8.3's arguments.
    """

    def __init__(
        self,
        enabled: bool = False,
        init_scale: float = 2.0**16,
        backoff_factor: float = 0.5,
        growth_factor: float = 2.0,
        growth_interval: int = 2000,
    ) -> None:
        raise _unsupported("PyTorchGradScaler")


__all__ = ["PyTorchGradScaler"]
