"""embed_id: look up one row of an embedding matrix per integer ID."""
from typing import Any, Optional

from ... import cuda, function
from ...utils import type_check


class EmbedIDFunction(function.Function):
    """x (...) int, W (nV, nO) -> (..., nO); rows for ignore_label are zero."""

    def __init__(self, ignore_label: Optional[int] = None) -> None:
        if ignore_label is not None and not isinstance(ignore_label, int):
            raise TypeError(
                f"embed_id: 'ignore_label' must be an int or None, got {type(ignore_label).__name__}: "
                f"{ignore_label!r}."
            )
        self.ignore_label = ignore_label

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        x_type, w_type = in_types
        type_check.expect(x_type.dtype.kind == "i", w_type.dtype.kind == "f", w_type.ndim == 2)

    def _flat_ids(self, x: Any, W: Any) -> tuple:
        """(IDs as an (n, 1) column with ignored ones replaced by 0, mask of kept rows or None)."""
        xp = cuda.get_array_module(x)
        ids = x.reshape(-1)
        keep = None
        if self.ignore_label is not None:
            keep = ids != self.ignore_label
            ids = xp.where(keep, ids, 0)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= W.shape[0]):
            raise ValueError(
                f"embed_id: every ID in x must lie in 0..{W.shape[0] - 1} (rows of W {tuple(W.shape)})"
                f"{' or equal ignore_label=' + str(self.ignore_label) if keep is not None else ''}; got min "
                f"{int(ids.min())}, max {int(ids.max())}. Use a larger vocabulary or fix the IDs."
            )
        return ids.reshape(-1, 1), keep

    def forward(self, inputs: tuple) -> tuple:
        x, W = inputs
        ids, keep = self._flat_ids(x, W)
        Y = cuda._ops_for(W).gather_add(W, ids)  # (n, nO): a one-column gather is a plain lookup
        if keep is not None:
            Y *= keep[:, None].astype(Y.dtype)
        return Y.reshape(x.shape + (W.shape[1],)),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, W = inputs
        gy = grad_outputs[0]
        xp = cuda.get_array_module(W)
        ids, keep = self._flat_ids(x, W)
        ids = ids.reshape(-1)
        dY = gy.reshape(-1, W.shape[1])
        if keep is not None:
            ids, dY = ids[keep], dY[keep]
        dW = xp.zeros_like(W)
        # Repeated IDs must accumulate, which a fancy-index assignment would not do.
        cuda._ops_for(W).scatter_add(dW, ids, xp.ascontiguousarray(dY, dtype=W.dtype))
        return None, dW


def embed_id(x: Any, W: Any, ignore_label: Optional[int] = None) -> Any:
    """Word embedding: row x[i] of W for every ID in x. x (...) int, W (nV, nO) -> (..., nO)

    Differentiable in W only. IDs equal to ignore_label give zero rows and no gradient.
    """
    return EmbedIDFunction(ignore_label=ignore_label)(x, W)
