"""Optimizer and GradientMethod: update a link's parameters from their gradients.

An optimizer keeps one state dict per parameter path ('/predictor/l1/W'), the update count
`t` and the `epoch`; hooks (WeightDecay, GradientClipping, any callable taking the
optimizer) run on the gradients right before each update.
"""
import collections
import math
from typing import Any, Callable, Dict, Iterable, Optional

import numpy

from . import cuda
from .link import Link

__all__ = ["Optimizer", "GradientMethod", "WeightDecay", "GradientClipping"]


def _sum_sqnorm(arrays: Iterable[Any]) -> float:
    """Sum of squares of all elements of the arrays, as a host float."""
    total = 0.0
    for a in arrays:
        flat = a.ravel()
        total += float(flat.dot(flat))
    return total


class Optimizer:
    """Base of all optimizers: target link, per-parameter states, hooks, t and epoch."""

    target: Optional[Link] = None
    t = 0
    epoch = 0

    def setup(self, link: Link) -> None:
        """Set the link to optimize and create fresh states for all its parameters (hooks are reset)."""
        if not isinstance(link, Link):
            raise TypeError(
                f"{type(self).__name__}.setup: optimization target must be a link (a Link, "
                f"Chain, ChainList or FunctionSet), got {type(link).__name__}."
            )
        self.target = link
        self.t = 0
        self.epoch = 0
        self._states: Dict[str, dict] = {}
        self._hooks: "collections.OrderedDict[str, Callable]" = collections.OrderedDict()
        self.prepare()

    def _require_setup(self, where: str) -> None:
        if self.target is None:
            raise RuntimeError(
                f"{type(self).__name__}.{where}: the optimizer has no target; call setup(link) first."
            )

    def prepare(self) -> None:
        """Create states for parameters that have none and move states to their parameter's device."""
        self._require_setup("prepare")
        states = self._states
        for name, param in self.target.namedparams():
            state = states.get(name)
            if state is None:
                state = states[name] = {}
                self.init_state(param, state)
                continue
            on_cpu = isinstance(param.data, numpy.ndarray)
            for key, value in state.items():
                if on_cpu:
                    state[key] = cuda.to_cpu(value)
                elif isinstance(value, numpy.ndarray):
                    state[key] = cuda.to_gpu(value, device=param.data.device)

    def init_state(self, param: Any, state: dict) -> None:
        """Fill `state` for `param` (init_state_cpu or init_state_gpu by where param lives)."""
        if isinstance(param.data, numpy.ndarray):
            self.init_state_cpu(param, state)
        else:
            self.init_state_gpu(param, state)

    def init_state_cpu(self, param: Any, state: dict) -> None:
        """Fill `state` for a parameter on the CPU (nothing by default)."""

    def init_state_gpu(self, param: Any, state: dict) -> None:
        """Fill `state` for a parameter on a GPU (nothing by default)."""

    def update(self, lossfun: Optional[Callable] = None, *args: Any, **kwds: Any) -> None:
        """Update the parameters (from lossfun(*args, **kwds) if given, else from the current grads)."""
        raise NotImplementedError(f"{type(self).__name__}.update is not implemented.")

    def new_epoch(self) -> None:
        """Count one more epoch."""
        self.epoch += 1

    def add_hook(self, hook: Callable, name: Optional[str] = None) -> None:
        """Register a hook, called with the optimizer before each update, under name (default hook.name)."""
        if not callable(hook):
            raise TypeError(f"{type(self).__name__}.add_hook: the hook must be callable, got {type(hook).__name__}.")
        if not hasattr(self, "_hooks"):
            raise RuntimeError(
                f"{type(self).__name__}.add_hook: call setup(link) before add_hook (setup resets hooks)."
            )
        if name is None:
            name = getattr(hook, "name", None) or getattr(hook, "__name__", None) or type(hook).__name__
        if name in self._hooks:
            raise KeyError(f"{type(self).__name__}.add_hook: a hook named {name!r} is already registered.")
        self._hooks[name] = hook

    def remove_hook(self, name: str) -> None:
        """Unregister the hook registered under name."""
        if name not in getattr(self, "_hooks", {}):
            raise KeyError(
                f"{type(self).__name__}.remove_hook: no hook named {name!r}; registered: "
                f"{list(getattr(self, '_hooks', {})) or 'none'}."
            )
        del self._hooks[name]

    def call_hooks(self) -> None:
        """Run the hooks in registration order."""
        for hook in list(getattr(self, "_hooks", {}).values()):
            hook(self)

    def serialize(self, serializer: Any) -> None:
        """Save or load t, epoch and the per-parameter states (not the parameters themselves)."""
        self.t = serializer("t", self.t)
        self.epoch = serializer("epoch", self.epoch)
        for name, state in self._states.items():
            sub = serializer[name[1:]]
            # Chainer 1.7.2's layout: '<path>/<state key>' only (Chainer >= 2 adds '<path>/t',
            # which a file from it may have and which is then simply not read).
            for key in state:
                state[key] = sub(key, state[key])

    # Deprecated v1.4 interface, kept working.

    def zero_grads(self) -> None:
        """Deprecated: use target.zerograds()."""
        self._require_setup("zero_grads")
        self.target.zerograds()

    def compute_grads_norm(self) -> float:
        """Deprecated: the L2 norm of all gradients, as a host float."""
        self._require_setup("compute_grads_norm")
        return math.sqrt(_sum_sqnorm(p.grad for p in self.target.params() if p.grad is not None))

    def clip_grads(self, maxnorm: float) -> None:
        """Deprecated: use the GradientClipping hook."""
        GradientClipping(maxnorm)(self)

    def weight_decay(self, decay: float) -> None:
        """Deprecated: use the WeightDecay hook."""
        WeightDecay(decay)(self)

    def accumulate_grads(self, grads: Iterable[Any]) -> None:
        """Deprecated: add gradient arrays (in params() order) to the target's; use target.addgrads()."""
        self._require_setup("accumulate_grads")
        params = list(self.target.params())
        grads = list(grads)
        if len(grads) != len(params):
            raise ValueError(
                f"{type(self).__name__}.accumulate_grads: got {len(grads)} gradient arrays for "
                f"{len(params)} parameters."
            )
        for param, g in zip(params, grads):
            if param.grad is None:
                param.grad = _on_device_of(g, param.data).copy()
            else:
                dst = param._writable_grad()
                dst += _on_device_of(g, dst)


def _on_device_of(src: Any, like: Any) -> Any:
    if isinstance(like, numpy.ndarray):
        return cuda.to_cpu(src)
    return cuda.to_gpu(src, device=like.device)


class GradientMethod(Optimizer):
    """An optimizer that needs one gradient per update; subclasses define update_one(_cpu/_gpu)."""

    def update(self, lossfun: Optional[Callable] = None, *args: Any, **kwds: Any) -> None:
        """One step: with lossfun, zero the grads, compute lossfun(*args, **kwds) and backprop it
        first; then run the hooks and update every parameter."""
        self._require_setup("update")
        if lossfun is not None:
            self.target.zerograds()
            loss = lossfun(*args, **kwds)
            loss.backward()
            del loss
        self.call_hooks()
        self.prepare()
        self.t += 1
        states = self._states
        for name, param in self.target.namedparams():
            if param.grad is None:
                # A parameter that took no part in the loss has nothing to update from.
                continue
            if isinstance(param.data, numpy.ndarray):
                self.update_one_cpu(param, states[name])
            else:
                with cuda.get_device(param.data):
                    self.update_one_gpu(param, states[name])

    def update_one(self, param: Any, state: dict) -> None:
        """Update one parameter from its grad (update_one_cpu or update_one_gpu)."""
        if isinstance(param.data, numpy.ndarray):
            self.update_one_cpu(param, state)
        else:
            self.update_one_gpu(param, state)

    def update_one_cpu(self, param: Any, state: dict) -> None:
        raise NotImplementedError(f"{type(self).__name__}.update_one_cpu is not implemented.")

    def update_one_gpu(self, param: Any, state: dict) -> None:
        raise NotImplementedError(f"{type(self).__name__}.update_one_gpu is not implemented.")


class WeightDecay:
    """Hook: grad += rate * param for every parameter (L2 regularization)."""

    name = "WeightDecay"

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def __call__(self, opt: Optimizer) -> None:
        opt._require_setup("WeightDecay")
        for param in opt.target.params():
            if param.grad is None:
                continue
            g = param._writable_grad()
            g += param.data * g.dtype.type(self.rate)


class GradientClipping:
    """Hook: scale all gradients together so that their joint L2 norm is at most threshold."""

    name = "GradientClipping"

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold

    def __call__(self, opt: Optimizer) -> None:
        opt._require_setup("GradientClipping")
        params = [p for p in opt.target.params() if p.grad is not None]
        norm = math.sqrt(_sum_sqnorm(p.grad for p in params))
        if norm == 0:
            return
        rate = self.threshold / norm
        if rate < 1:
            for param in params:
                g = param._writable_grad()
                g *= g.dtype.type(rate)
