"""with_cpu: run a layer on the CPU inside a model whose other layers may be on a GPU."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import numpy

from ..backends import Ops
from ..config import registry
from ..model import Model
from ..types import Padded, Ragged
from ..util import is_xp_array
from .with_array import _check_layer


@registry.layers("with_cpu.v1")
def with_cpu(layer: Model, ops: Ops) -> Model:
    """Move `layer` to the CPU; copy its inputs and gradients there and its outputs to `ops`' device.

    Arrays are found inside lists, tuples, dicts, Ragged and Padded; anything else passes as is.
    """
    _check_layer("with_cpu", layer)
    if not isinstance(ops, Ops):
        raise TypeError(f"with_cpu: ops must be an Ops instance (e.g. get_current_ops()), got {type(ops).__name__}.")
    layer.to_cpu()
    return Model(
        f"with_cpu({layer.name})",
        forward,
        layers=[layer],
        ops=ops,
        init=init,
        dims={name: layer.maybe_get_dim(name) for name in layer.dim_names},
    )


def forward(model: Model, X: Any, is_train: bool) -> Tuple[Any, Callable]:
    # NOTE: is_train is passed on (Thinc 8.3 always runs the inner layer in training mode,
    # which would leave dropout on at prediction time).
    Y_cpu, backprop_layer = model.layers[0](_to_cpu(X), is_train)

    def backprop(dY: Any) -> Any:
        return _to_device(model.ops, backprop_layer(_to_cpu(dY)))

    return _to_device(model.ops, Y_cpu), backprop


def init(model: Model, X: Optional[Any] = None, Y: Optional[Any] = None) -> None:
    layer = model.layers[0]
    layer.initialize(X=_to_cpu(X), Y=_to_cpu(Y))
    for name in layer.dim_names:
        value = layer.maybe_get_dim(name)
        if value is not None and model.has_dim(name) is not False:
            model.set_dim(name, value)


def _convert(convert_array: Callable[[Any], Any], X: Any) -> Any:
    """Apply `convert_array` to every array inside X, keeping the containers' structure."""
    if is_xp_array(X):
        return convert_array(X)
    if isinstance(X, Ragged):
        return Ragged(convert_array(X.dataXd), convert_array(X.lengths))
    if isinstance(X, Padded):
        return Padded(*(convert_array(a) for a in (X.data, X.size_at_t, X.lengths, X.indices)))
    if isinstance(X, tuple):
        return tuple(_convert(convert_array, x) for x in X)
    if isinstance(X, list):
        return [_convert(convert_array, x) for x in X]
    if isinstance(X, dict):
        return {key: _convert(convert_array, value) for key, value in X.items()}
    return X


def _cupy_to_numpy(X: Any) -> Any:
    return X if isinstance(X, numpy.ndarray) else X.get()


def _to_cpu(X: Any) -> Any:
    return _convert(_cupy_to_numpy, X)


def _to_device(ops: Ops, X: Any) -> Any:
    return _convert(ops.asarray, X)
