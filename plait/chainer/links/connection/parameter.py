"""Parameter: a deprecated link that only holds one array as its parameter W."""
from typing import Any

from ... import link
from ....util import is_cupy_array
from ...functions.math import identity as _identity


class Parameter(link.Link):
    """Holds `array` as the parameter W and returns it when called. () -> W's shape

    Kept for code written before parameters became Variables (Chainer 1.5); new code
    should use a Link's parameters directly.
    """

    def __init__(self, array: Any) -> None:
        super().__init__()
        if not hasattr(array, "shape") or not hasattr(array, "dtype"):
            raise TypeError(f"Parameter: 'array' must be a numpy or cupy array, got {type(array).__name__}.")
        self.add_param("W", array.shape, dtype=array.dtype)
        # The link owns the caller's array itself, as Chainer's does.
        self.W.data = array
        if is_cupy_array(array):
            self.to_gpu(array.device)
            self.W.data = array

    def __call__(self, volatile: Any = "off") -> Any:
        """A Variable with W's data and the given volatility; gradients flow back into W."""
        W = _identity.identity(self.W)
        W.volatile = volatile
        return _identity.identity(W)
