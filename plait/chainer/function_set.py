"""FunctionSet (deprecated since Chainer 1.5): a Chain whose links are set as attributes."""
import warnings
from typing import Any, Iterable, Sequence, Tuple

from ._errors import AssertValueError
from .link import Chain, Link
from .variable import _copy_into

__all__ = ["FunctionSet"]


def _check_count(what: str, arrays: Sequence[Any], params: list) -> None:
    if len(arrays) != len(params):
        raise AssertValueError(
            f"FunctionSet.{what}: got {len(arrays)} arrays for {len(params)} parameters; give one "
            f"per parameter, in params() order."
        )


class FunctionSet(Chain):
    """A Chain where assigning a Link attribute registers it (model.l3 = L.Linear(...)).

    Deprecated: use Chain. Kept so that pre-1.5 code runs.
    """

    def __init__(self, **links: Link) -> None:
        warnings.warn(
            "FunctionSet is deprecated (since Chainer 1.5); use Chain instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__(**links)

    def __setattr__(self, key: str, value: Any) -> None:
        d = self.__dict__
        if isinstance(value, Link) and "_children" in d:
            if value.name is not None:
                raise ValueError(
                    f"FunctionSet: the link assigned to {key!r} is already registered in another "
                    f"chain as {value.name!r}; assign link.copy() instead."
                )
            if key in d and isinstance(d[key], Link) and key in d["_children"]:
                # Replacing a child keeps its slot, so parameter order stays stable.
                d[key].name = None
            else:
                d["_children"].append(key)
            value.name = key
            d[key] = value
            return
        super().__setattr__(key, value)

    def __getitem__(self, key: str) -> Any:
        """The attribute `key` (model['l1'] is model.l1)."""
        return getattr(self, key)

    def collect_parameters(self) -> Tuple[Tuple[Any, ...], Tuple[Any, ...]]:
        """(parameter arrays, gradient arrays), both in params() order."""
        return self.parameters, self.gradients

    @property
    def parameters(self) -> Tuple[Any, ...]:
        """Parameter arrays of all registered links, in params() order."""
        return tuple(p.data for p in self.params())

    @parameters.setter
    def parameters(self, params: Sequence[Any]) -> None:
        # As in Chainer: the arrays themselves become the parameters' data (no copy).
        mine = list(self.params())
        _check_count("parameters", params, mine)
        for param, array in zip(mine, params):
            param.data = array

    @property
    def gradients(self) -> Tuple[Any, ...]:
        """Gradient arrays of all registered links, in params() order."""
        return tuple(p.grad for p in self.params())

    @gradients.setter
    def gradients(self, grads: Sequence[Any]) -> None:
        mine = list(self.params())
        _check_count("gradients", grads, mine)
        for param, g in zip(mine, grads):
            param.grad = g

    def copy_parameters_from(self, params: Iterable[Any]) -> None:
        """Copy arrays (in params() order) into the parameters without reallocating them.

        As in Chainer, the two sequences are paired up to the shorter one.
        """
        for param, src in zip(self.params(), params):
            _copy_into(param.data, src, "FunctionSet.copy_parameters_from")
