"""Softmax: a dense layer followed by a softmax, the usual output layer for single-label tasks."""
import numbers
from typing import Any, Callable, Optional, Tuple, cast

from ..config import registry
from ..initializers import zero_init
from ..model import Model
from ..types import Floats1d, Floats2d
from ..util import ArrayInfo, partial
from .linear import _backprop_affine, _check_input, _init_affine_keep_dims

InT = Floats2d
OutT = Floats2d


@registry.layers("Softmax.v1")
def Softmax(
    nO: Optional[int] = None,
    nI: Optional[int] = None,
    *,
    init_W: Optional[Callable] = None,
    init_b: Optional[Callable] = None,
) -> Model[InT, OutT]:
    """softmax(X @ W.T + b).  (nB, nI) -> (nB, nO)

    Params: W (nO, nI), b (nO,), both zero_init by default.

    NOTE: backprop expects dY to be the gradient of the loss with respect to the
    *logits* (e.g. `Y - truth` from categorical cross-entropy), not with respect to
    the probabilities: the softmax Jacobian is not applied.
    """
    return _make_softmax(nO, nI, init_W, init_b, normalize_outputs=True, temperature=1.0)


@registry.layers("Softmax.v2")
def Softmax_v2(
    nO: Optional[int] = None,
    nI: Optional[int] = None,
    *,
    init_W: Optional[Callable] = None,
    init_b: Optional[Callable] = None,
    normalize_outputs: bool = True,
    temperature: float = 1.0,
) -> Model[InT, OutT]:
    """softmax((X @ W.T + b) / temperature).  (nB, nI) -> (nB, nO)

    With normalize_outputs=False, prediction returns the raw logits (training still
    normalises). The settings live in the "softmax_normalize" and "softmax_temperature"
    attrs. As with Softmax.v1, backprop takes the gradient with respect to the logits
    (the temperature's 1/T factor is applied).
    """
    _check_temperature(temperature, "Softmax.v2")
    return _make_softmax(nO, nI, init_W, init_b, normalize_outputs=normalize_outputs, temperature=temperature)


def _make_softmax(
    nO: Optional[int],
    nI: Optional[int],
    init_W: Optional[Callable],
    init_b: Optional[Callable],
    *,
    normalize_outputs: bool,
    temperature: float,
) -> Model[InT, OutT]:
    if init_W is None:
        init_W = zero_init
    if init_b is None:
        init_b = zero_init
    return Model(
        "softmax",
        forward,
        init=partial(_init_affine_keep_dims, init_W, init_b),
        dims={"nO": nO, "nI": nI},
        params={"W": None, "b": None},
        attrs={"softmax_normalize": normalize_outputs, "softmax_temperature": temperature},
    )


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    normalize = model.attrs["softmax_normalize"] or is_train
    temperature = model.attrs["softmax_temperature"]
    _check_temperature(temperature, f"Model '{model.name}'")
    W = cast(Floats2d, model.get_param("W"))
    b = cast(Floats1d, model.get_param("b"))
    _check_input(model, X, W.shape[1])
    Y = model.ops.affine(X, W, b)
    if not normalize:

        def backprop_unnormalized(dY: OutT) -> InT:
            raise ValueError(
                f"Cannot backprop through model '{model.name}': backprop is not supported for an "
                f"unnormalized Softmax layer (attr softmax_normalize=False and is_train=False). Run it "
                f"with is_train=True (begin_update) to train it."
            )

        return Y, backprop_unnormalized

    Y = model.ops.softmax(Y, inplace=True, temperature=temperature)
    info = ArrayInfo.from_array(Y)

    def backprop(dY: OutT) -> InT:
        info.check_consistency(dY)
        if temperature != 1.0:
            dY = dY / temperature
        return _backprop_affine(model, X, W, dY)

    return Y, backprop


def validate_temperature(temperature: Any) -> None:
    """Raise ValueError unless `temperature` is a number > 0 (Thinc's module-level check)."""
    _check_temperature(temperature, "Softmax")


def _check_temperature(temperature: Any, where: str) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"{where}: softmax temperature must be a number > 0, got {temperature!r}.")
    if not temperature > 0.0:
        raise ValueError(
            f"{where}: softmax temperature must not be zero or negative, got {temperature!r}. Use a "
            "temperature > 0 (1.0 leaves the logits as they are)."
        )


# Thinc's module-level name for this layer's init(init_W, init_b, model, X=None, Y=None): output
# layers fill only the dims that are still unset.
init = _init_affine_keep_dims
