"""CauchySimilarity: a learned similarity of two batches of vectors, 1 / (1 + sum(W * (X1 - X2)**2))."""
from typing import Callable, Optional, Tuple, cast

from ..config import registry
from ..model import Model
from ..types import Floats1d, Floats2d
from ..util import get_width

InT = Tuple[Floats2d, Floats2d]
OutT = Floats1d


@registry.layers("CauchySimilarity.v1")
def CauchySimilarity(nI: Optional[int] = None) -> Model[InT, OutT]:
    """Cauchy similarity (Chen, 2013) of paired rows, e.g. inside siamese.  ((nB, nI), (nB, nI)) -> (nB,)

    Params: W (nI,), a weight per feature, initialized to ones.
    """
    return Model(
        "cauchy_similarity",
        forward,
        init=init,
        dims={"nI": nI, "nO": 1},
        params={"W": None},
    )


def forward(model: Model[InT, OutT], X1_X2: InT, is_train: bool) -> Tuple[OutT, Callable]:
    W = cast(Floats1d, model.get_param("W"))
    X1, X2 = _check_pair(model, X1_X2, W.shape[0])
    diff = X1 - X2
    sq_diff = diff * diff
    total = (sq_diff * W).sum(axis=1)  # (nB,)
    sim = 1.0 / (1.0 + total)

    def backprop(d_sim: OutT) -> InT:
        d_total = model.ops.reshape2f(-d_sim * sim * sim, -1, 1)  # (nB, 1)
        model.inc_grad("W", (d_total * sq_diff).sum(axis=0))
        d_diff = 2.0 * W * d_total * diff
        return (d_diff, -d_diff)

    return sim, backprop


def inverse(total: OutT) -> Tuple[OutT, Callable]:
    """1 / (1 + total) and its backprop callback (Thinc's module-level helper)."""
    inv = 1.0 / (1.0 + total)

    def backprop(d_inverse: OutT) -> OutT:
        return -d_inverse * inv * inv

    return inv, backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    if X is not None:
        model.set_dim("nI", get_width(X[0]))
    W = model.ops.alloc1f(model.get_dim("nI"))
    W += 1
    model.set_param("W", W)


def _check_pair(model: Model, X1_X2: InT, nI: int) -> InT:
    if not isinstance(X1_X2, (tuple, list)) or len(X1_X2) != 2:
        raise TypeError(
            f"Model '{model.name}' expects a pair (X1, X2) of arrays of shape (nB, nI={nI}), "
            f"got {type(X1_X2).__name__}."
        )
    X1, X2 = X1_X2
    for name, X in (("X1", X1), ("X2", X2)):
        if not (hasattr(X, "shape") and hasattr(X, "ndim")):
            raise TypeError(f"Model '{model.name}': {name} must be an array, got {type(X).__name__}.")
        if X.ndim != 2 or X.shape[1] != nI:
            raise ValueError(
                f"Model '{model.name}': {name} must have shape (nB, nI={nI}), got {tuple(X.shape)}."
            )
    if X1.shape != X2.shape:
        raise ValueError(
            f"Model '{model.name}': X1 and X2 must have the same shape, got {tuple(X1.shape)} and {tuple(X2.shape)}."
        )
    return X1, X2
