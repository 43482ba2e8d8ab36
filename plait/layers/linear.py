"""Linear: an affine layer, Y = X @ W.T + b (a "dense" layer with no activation)."""
from typing import Any, Callable, Optional, Tuple, cast

from ..config import registry
from ..initializers import glorot_uniform_init, zero_init
from ..model import Model
from ..types import Floats1d, Floats2d
from ..util import get_width, partial

InT = Floats2d
OutT = Floats2d


@registry.layers("Linear.v1")
def Linear(
    nO: Optional[int] = None,
    nI: Optional[int] = None,
    *,
    init_W: Optional[Callable] = None,
    init_b: Optional[Callable] = None,
) -> Model[InT, OutT]:
    """Multiply the input by a weights matrix and add a bias.  (nB, nI) -> (nB, nO)

    Params: W (nO, nI), initialized with `init_W` (default glorot_uniform_init);
    b (nO,), initialized with `init_b` (default zero_init).
    """
    if init_W is None:
        init_W = glorot_uniform_init
    if init_b is None:
        init_b = zero_init
    return Model(
        "linear",
        forward,
        init=partial(_init_affine, init_W, init_b),
        dims={"nO": nO, "nI": nI},
        params={"W": None, "b": None},
    )


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    W = cast(Floats2d, model.get_param("W"))
    b = cast(Floats1d, model.get_param("b"))
    _check_input(model, X, W.shape[1])
    Y = model.ops.affine(X, W, b)

    def backprop(dY: OutT) -> InT:
        return _backprop_affine(model, X, W, dY)

    return Y, backprop


# --- helpers shared by the dense layers of this package (Relu, Sigmoid, Softmax, ...) ------


def _init_affine(
    init_W: Callable,
    init_b: Callable,
    model: Model,
    X: Optional[Floats2d] = None,
    Y: Optional[Floats2d] = None,
) -> None:
    """Infer nI from X and nO from Y, then allocate W (nO, nI) and b (nO,).

    A dim that is already set and disagrees with the data raises (Model.set_dim).
    """
    if X is not None:
        model.set_dim("nI", get_width(X))
    if Y is not None:
        model.set_dim("nO", get_width(Y))
    _alloc_affine(init_W, init_b, model)


def _init_affine_keep_dims(
    init_W: Callable,
    init_b: Callable,
    model: Model,
    X: Optional[Floats2d] = None,
    Y: Optional[Floats2d] = None,
) -> None:
    """Like _init_affine, but the data only fills dims that are still unset.

    Output layers (Softmax, Sigmoid) use this rule: their Y sample is often a set of
    integer labels, whose inferred width (max label + 1) can be less than the real nO.
    """
    if X is not None and model.has_dim("nI") is None:
        model.set_dim("nI", get_width(X))
    if Y is not None and model.has_dim("nO") is None:
        model.set_dim("nO", get_width(Y))
    _alloc_affine(init_W, init_b, model)


def _alloc_affine(init_W: Callable, init_b: Callable, model: Model) -> None:
    nO = model.get_dim("nO")
    nI = model.get_dim("nI")
    model.set_param("W", init_W(model.ops, (nO, nI)))
    model.set_param("b", init_b(model.ops, (nO,)))


def _check_input(model: Model, X: Any, nI: int) -> None:
    """Raise a clear error, naming the model, unless X is a float array of shape (nB, nI)."""
    if not (hasattr(X, "shape") and hasattr(X, "dtype") and hasattr(X, "ndim")):
        raise TypeError(
            f"Model '{model.name}' expects a 2d float array of shape (nB, nI={nI}) as input, "
            f"got {type(X).__name__}. Convert it with model.ops.asarray2f(...)."
        )
    if X.ndim != 2 or X.shape[1] != nI:
        raise ValueError(
            f"Model '{model.name}' expects input of shape (nB, nI={nI}), got shape {tuple(X.shape)}. "
            f"Check the width of the previous layer's output (or reshape the input to 2d)."
        )
    if X.dtype.kind != "f":
        raise TypeError(
            f"Model '{model.name}' expects float input, got dtype {X.dtype} "
            f"(shape {tuple(X.shape)}). Cast it with model.ops.asarray_f(...)."
        )


def _backprop_affine(model: Model, X: Floats2d, W: Floats2d, dZ: Floats2d) -> Floats2d:
    """Add the W and b gradients of Z = X @ W.T + b and return dX.  dZ (nB, nO) -> dX (nB, nI)"""
    model.inc_grad("b", dZ.sum(axis=0))
    model._inc_grad_product("W", dZ, X, trans1=True)
    return model.ops.gemm(dZ, W)


# Thinc's module-level name for Linear's init(init_W, init_b, model, X=None, Y=None).
init = _init_affine
