"""MultiSoftmax: a dense layer whose outputs form several independent softmax groups."""
import numbers
from typing import Callable, List, Optional, Tuple, Union, cast

from ..config import registry
from ..model import Model
from ..types import Floats1d, Floats2d
from ..util import get_width
from .linear import _backprop_affine, _check_input

InT = Floats2d
OutT = Floats2d


@registry.layers("MultiSoftmax.v1")
def MultiSoftmax(nOs: Union[Tuple[int, ...], List[int]], nI: Optional[int] = None) -> Model[InT, OutT]:
    """Predict several multi-class attributes at once.  (nB, nI) -> (nB, sum(nOs))

    The output columns are split into consecutive groups of the sizes in `nOs` and each
    group is softmaxed on its own: nOs=(6, 5) gives a distribution over columns 0-5 and
    another over columns 6-10. Params: W (nO, nI), b (nO,), both zero-initialized.

    NOTE: as with Softmax, backprop takes the gradient with respect to the logits.
    """
    if isinstance(nOs, (str, bytes)) or not hasattr(nOs, "__iter__"):
        raise TypeError(f"MultiSoftmax: nOs must be a sequence of group sizes, got {nOs!r}.")
    nOs = tuple(nOs)
    for size in nOs:
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
            raise ValueError(f"MultiSoftmax: every group size in nOs must be a positive int, got nOs={nOs!r}.")
    if not nOs:
        raise ValueError("MultiSoftmax: nOs must name at least one group size, got an empty sequence.")
    nOs = tuple(int(size) for size in nOs)
    return Model(
        "multisoftmax",
        forward,
        init=init,
        dims={"nO": sum(nOs), "nI": nI},
        attrs={"nOs": nOs},
        params={"W": None, "b": None},
    )


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    nOs = model.attrs["nOs"]
    W = cast(Floats2d, model.get_param("W"))
    b = cast(Floats1d, model.get_param("b"))
    _check_input(model, X, W.shape[1])
    Y = model.ops.affine(X, W, b)
    start = 0
    for size in nOs:
        # Assign rather than rely on inplace=True: a backend may return a new array.
        Y[:, start : start + size] = model.ops.softmax(Y[:, start : start + size])
        start += size

    def backprop(dY: OutT) -> InT:
        return _backprop_affine(model, X, W, dY)

    return Y, backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    # nO is fixed by nOs, so only nI is inferred.
    if X is not None:
        model.set_dim("nI", get_width(X))
    nO = model.get_dim("nO")
    nI = model.get_dim("nI")
    model.set_param("W", model.ops.alloc2f(nO, nI))
    model.set_param("b", model.ops.alloc1f(nO))
