"""PReLU: parametric ReLU with a learned slope array W."""
from typing import Any

from ... import link
from ...functions.activation import prelu as _prelu


class PReLU(link.Link):
    """max(x, W * x) with W (shape) shared over the batch axis and trailing axes. x -> x's shape

    W starts filled with `init`; its shape must match the axes of x right after the batch
    axis (the default () gives one slope for everything).
    """

    def __init__(self, shape: Any = (), init: float = 0.25) -> None:
        super().__init__()
        self.add_param("W", shape)
        self.W.data[...] = init

    def __call__(self, x: Any) -> Any:
        """The parametric ReLU of x."""
        return _prelu.prelu(x, self.W)
