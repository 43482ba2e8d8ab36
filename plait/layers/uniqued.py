"""uniqued: run a layer once per distinct key of a batch, then copy the results back out."""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import numpy

from ..config import registry
from ..model import Model
from ..types import Floats2d, Ints2d
from ..util import to_numpy

InT = Ints2d
OutT = Floats2d


@registry.layers("uniqued.v1")
def uniqued(layer: Model, *, column: int = 0) -> Model[InT, OutT]:
    """Compute `layer` only on the rows with distinct values in column `column`.  (n, k) -> (n, ...)

    Rows sharing a key get the output of that key's first row: a per-batch cache for
    expensive features of frequent words. The gradients of rows sharing a key are summed
    for the layer, and its input gradient is shared out evenly among them again.
    """
    if not isinstance(layer, Model):
        raise TypeError(f"Cannot create uniqued: 'layer' must be a Model, got {type(layer).__name__}.")
    return Model(
        f"uniqued({layer.name})",
        forward,
        init=init,
        layers=[layer],
        dims={"nO": None, "nI": None},
        attrs={"column": column},
    )


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    column: int = model.attrs["column"]
    layer = model.layers[0]
    if X.size < 2:
        return layer(X, is_train)
    if X.ndim != 2 or not -X.shape[1] <= column < X.shape[1]:
        raise ValueError(
            f"Model '{model.name}' groups rows by column {column}, so it expects a 2d array with "
            f"more than {column} columns, got shape {tuple(X.shape)}."
        )
    # numpy's unique also serves cupy input: the keys are brought to the CPU for it.
    keys = to_numpy(X[:, column])
    _, first_rows, inverse, counts = numpy.unique(
        keys, return_index=True, return_inverse=True, return_counts=True
    )
    ops = layer.ops
    inverse = ops.asarray_i(inverse.ravel())
    counts = ops.asarray_i(counts)
    Y_uniq, bp_Y_uniq = layer(X[ops.asarray_i(first_rows)], is_train)
    Y = Y_uniq[inverse].reshape((X.shape[0],) + Y_uniq.shape[1:])
    uniq_shape = tuple(Y_uniq.shape)

    def backprop(dY: OutT) -> InT:
        dY_uniq = ops.alloc(uniq_shape, dtype=dY.dtype)
        ops.scatter_add(dY_uniq, inverse, dY)
        d_uniques = bp_Y_uniq(dY_uniq)
        # Divide along the rows whatever the input's rank (a 1d dX must stay 1d).
        shares = counts.reshape((-1,) + (1,) * (d_uniques.ndim - 1))
        return (d_uniques / shares)[inverse]

    return Y, backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    layer = model.layers[0]
    layer.initialize(X=X, Y=Y)
    if layer.has_dim("nI"):
        model.set_dim("nI", layer.get_dim("nI"))
    if layer.has_dim("nO"):
        model.set_dim("nO", layer.get_dim("nO"))
