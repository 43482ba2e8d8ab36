"""det and batch_det: the determinant of a square matrix, or of each matrix in a batch."""
from typing import Any

from ... import cuda, function
from ...utils import force_array, type_check
from ..array.reshape import Reshape


class BatchDet(function.Function):
    """(m, n, n) -> (m,) determinants.

    The gradient, det(A) * A^-T, needs each A to be invertible: backward raises ValueError
    on a singular matrix (forward does not; its determinant is 0).
    """

    @property
    def label(self) -> str:
        return "det"

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        a_type, = in_types
        type_check.expect(a_type.dtype.kind == "f")
        type_check.expect(a_type.ndim == 3)
        type_check.expect(a_type.shape[-1] == a_type.shape[-2])

    def forward(self, inputs: tuple) -> tuple:
        a = inputs[0]
        xp = cuda.get_array_module(a)
        self.detx = force_array(xp.linalg.det(a)).astype(a.dtype, copy=False)
        return self.detx,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        a, = inputs
        gy, = grad_outputs
        xp = cuda.get_array_module(a)
        # NOTE: numpy raises LinAlgError on a singular matrix, cupy returns NaN/inf instead.
        try:
            inv_t = xp.linalg.inv(a.swapaxes(1, 2))
        except Exception as e:
            if type(e).__name__ != "LinAlgError":
                raise
            inv_t = None
        if inv_t is None or not bool(xp.isfinite(inv_t).all()):
            raise ValueError(
                f"det: the gradient needs invertible matrices, but the input (shape "
                f"{tuple(a.shape)}) has a singular one."
            )
        gx = (gy * self.detx)[:, None, None] * inv_t
        return force_array(gx).astype(a.dtype, copy=False),


def batch_det(a: Any) -> Any:
    """The determinant of each matrix of a (m, n, n) -> (m,)."""
    return BatchDet()(a)


def det(a: Any) -> Any:
    """The determinant of the square matrix a (n, n) -> a 0-d Variable."""
    data = getattr(a, "data", a)
    batched = Reshape((1,) + tuple(data.shape))(a)
    return Reshape(())(BatchDet()(batched))
