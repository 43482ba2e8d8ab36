"""Array reshaping helpers (chainer.utils.array)."""
from typing import Any

__all__ = ["as_vec", "as_mat", "empty_like"]


def as_vec(x: Any) -> Any:
    """x flattened to 1-d (a view where possible)."""
    return x.ravel()


def as_mat(x: Any) -> Any:
    """x as a matrix: its first axis kept, the others flattened, (n, ...) -> (n, prod(...))."""
    return x.reshape(len(x), -1)


def empty_like(x: Any) -> Any:
    """An uninitialised array of x's shape and dtype, on x's device (numpy or cupy)."""
    from .. import cuda

    return cuda.get_array_module(x).empty_like(x)
