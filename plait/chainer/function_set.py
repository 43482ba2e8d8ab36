"""FunctionSet (deprecated since Chainer 1.5): a Chain whose links are set as attributes."""
import warnings
from typing import Any, Iterable, Tuple

from .link import Chain, Link
from .variable import _converted, _copy_into

__all__ = ["FunctionSet"]


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
    def parameters(self, params: Iterable[Any]) -> None:
        self.copy_parameters_from(params)

    @property
    def gradients(self) -> Tuple[Any, ...]:
        """Gradient arrays of all registered links, in params() order."""
        return tuple(p.grad for p in self.params())

    @gradients.setter
    def gradients(self, grads: Iterable[Any]) -> None:
        for param, g in zip(self.params(), grads):
            if param.grad is None:
                param.grad = _converted(g, param.data).copy()
            else:
                _copy_into(param._writable_grad(), g, "FunctionSet.gradients")

    def copy_parameters_from(self, params: Iterable[Any]) -> None:
        """Copy arrays (in params() order) into the parameters without reallocating them."""
        params = list(params)
        mine = list(self.params())
        if len(params) != len(mine):
            raise ValueError(
                f"FunctionSet.copy_parameters_from: got {len(params)} arrays for {len(mine)} parameters."
            )
        for param, src in zip(mine, params):
            _copy_into(param.data, src, "FunctionSet.copy_parameters_from")
