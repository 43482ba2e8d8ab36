"""ParamServer: the store behind Model parameters and gradients, keyed by (model id, name)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

if TYPE_CHECKING:
    from ..types import FloatsXd

KeyT = Tuple[int, str]


class ParamServer:
    """Parameters and gradients of one process, optionally mirrored to a remote `proxy`.

    A proxy (an object with get_param / set_param / set_grad / inc_grad taking
    (model_id, name[, value])) owns the values: parameters are read through it and
    gradients are sent to it instead of being accumulated here.
    """

    proxy: Optional[Any]

    def __init__(
        self,
        params: Optional[Dict[KeyT, FloatsXd]] = None,
        grads: Optional[Dict[KeyT, FloatsXd]] = None,
        *,
        proxy: Optional[Any] = None,
    ) -> None:
        self._params: Dict[KeyT, FloatsXd] = dict(params or {})
        self._grads: Dict[KeyT, FloatsXd] = dict(grads or {})
        self.proxy = proxy

    def __repr__(self) -> str:
        proxy = "" if self.proxy is None else f", proxy={self.proxy!r}"
        return f"ParamServer({len(self._params)} params, {len(self._grads)} grads{proxy})"

    @property
    def param_keys(self) -> Tuple[KeyT, ...]:
        """Keys of every registered parameter."""
        return tuple(self._params.keys())

    @property
    def grad_keys(self) -> Tuple[KeyT, ...]:
        """Keys of the registered parameters that currently have a gradient."""
        return tuple(key for key in self._params if key in self._grads)

    def has_param(self, model_id: int, name: str) -> bool:
        return (model_id, name) in self._params

    def has_grad(self, model_id: int, name: str) -> bool:
        return (model_id, name) in self._grads

    def get_param(self, model_id: int, name: str) -> FloatsXd:
        """The parameter's value (fetched from the proxy, and cached, when there is one)."""
        key = (model_id, name)
        if self.proxy is not None:
            self._params[key] = self.proxy.get_param(model_id, name)
        try:
            return self._params[key]
        except KeyError:
            raise KeyError(
                f"ParamServer.get_param: no parameter '{name}' for model id {model_id}. "
                "Set it with set_param(...) first."
            ) from None

    def get_grad(self, model_id: int, name: str) -> FloatsXd:
        """The accumulated gradient of a parameter."""
        try:
            return self._grads[(model_id, name)]
        except KeyError:
            raise KeyError(
                f"ParamServer.get_grad: no gradient for parameter '{name}' of model id {model_id}. "
                "Gradients exist only after set_grad(...) or inc_grad(...)."
            ) from None

    def set_param(self, model_id: int, name: str, value: FloatsXd) -> None:
        """Store a parameter (and send it to the proxy, if any)."""
        if self.proxy is not None:
            self.proxy.set_param(model_id, name, value)
        self._params[(model_id, name)] = value

    def set_grad(self, model_id: int, name: str, value: FloatsXd) -> None:
        """Replace a gradient; with a proxy, the proxy receives it and nothing is kept here."""
        if self.proxy is not None:
            self.proxy.set_grad(model_id, name, value)
        else:
            self._grads[(model_id, name)] = value

    def grad_buffer(self, model_id: int, name: str) -> Optional[FloatsXd]:
        """The array a gradient accumulates in, for code that adds to it in place; None when
        there is none yet or a proxy receives the gradients."""
        if self.proxy is not None:
            return None
        return self._grads.get((model_id, name))

    def inc_grad(self, model_id: int, name: str, value: FloatsXd) -> None:
        """Add `value` to a gradient; with a proxy, the proxy accumulates it instead."""
        key = (model_id, name)
        if self.proxy is not None:
            self.proxy.inc_grad(model_id, name, value)
        elif key in self._grads:
            self._grads[key] += value
        elif hasattr(value, "copy"):
            # NOTE: the first gradient is copied (contiguous) so that later in-place
            # accumulation never writes into the caller's array.
            self._grads[key] = value.copy()
        else:
            self._grads[key] = value
