"""Gradient-descent optimizers: plain SGD, Adam and RAdam, with optional weight averaging.

Every hyper-parameter may be a number or a schedule. A schedule is one of:

- an iterator or generator (Thinc 8.3's schedules): advanced once at construction and
  once per `step_schedules()`; when it runs out, the last value stays;
- a list (or tuple) of values, read the same way;
- a callable `schedule(step, **extra) -> float` (plait's `Schedule` objects): evaluated at
  the optimizer's `step`, with `last_score=` passed in `extra` for schedules that react
  to the evaluation score.
"""
from __future__ import annotations

import math
import numbers
from collections import defaultdict
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union, cast

import numpy

from .backends import get_array_ops
from .backends.ops import Ops
from .config import registry
from .types import FloatsXd

KeyT = Tuple[int, str]


class _NotASchedule(TypeError, ValueError):
    """A value that cannot serve as a schedule (a ValueError too, so config validation reports it)."""


class ScheduleLike:
    """Annotation for a hyper-parameter schedule: an iterator/generator or a callable schedule(step, **extra).

    Its pydantic validator lets config validation reject, say, a string before the optimizer is built.
    """

    @classmethod
    def validate(cls, value: Any) -> Any:
        """Return `value` if it can be stepped through, else raise."""
        if isinstance(value, (str, bytes)) or not (callable(value) or hasattr(value, "__next__")):
            raise _NotASchedule(
                f"expected a number, a list of numbers, an iterator or a schedule, got "
                f"{type(value).__name__} {value!r:.60}"
            )
        return value

    @classmethod
    def __get_validators__(cls) -> Iterator[Callable[[Any], Any]]:
        yield cls.validate

    @classmethod
    def __get_pydantic_core_schema__(cls, source_type: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(cls.validate)

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> Dict[str, Any]:
        return {"description": "an iterator or a schedule"}


FloatOrSeq = Union[float, List[float], ScheduleLike]
IntOrSeq = Union[int, List[int], ScheduleLike]

SGD_DEFAULTS: Dict[str, Union[float, bool, int]] = {
    "L2": 0.0,
    "L2_is_weight_decay": True,
    "grad_clip": 1.0,
}

ADAM_DEFAULTS: Dict[str, Union[float, bool, int]] = {
    "learn_rate": 0.001,
    "beta1": 0.9,
    "beta2": 0.999,
    "eps": 1e-08,
    "L2": SGD_DEFAULTS["L2"],
    "grad_clip": SGD_DEFAULTS["grad_clip"],
    "L2_is_weight_decay": True,
}

# Attribute name (as Thinc names it) -> constructor argument name (used in errors).
_HYPER_ARGS: Dict[str, str] = {
    "learn_rate": "learn_rate",
    "b1": "beta1",
    "b2": "beta2",
    "eps": "eps",
    "L2": "L2",
    "grad_clip": "grad_clip",
}


def _checked(attr: str, value: Any, where: str = "") -> float:
    """Validate one hyper-parameter value and return it as a float."""
    arg = _HYPER_ARGS[attr]
    if not isinstance(value, numbers.Real):
        raise TypeError(
            f"Optimizer: {where}'{arg}' must be a real number, got {type(value).__name__} {value!r}."
        )
    number = float(value)
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"Optimizer: {where}'{arg}' must be finite, got {number}.")
    if attr in ("b1", "b2"):
        if not 0.0 <= number < 1.0:
            raise ValueError(
                f"Optimizer: {where}'{arg}' must be in [0, 1), got {number}. "
                "Use 0.0 to switch the moment off (beta1=beta2=0 gives plain SGD)."
            )
    elif number < 0.0:
        hint = " (0 switches clipping off)" if attr == "grad_clip" else ""
        raise ValueError(f"Optimizer: {where}'{arg}' must be >= 0{hint}, got {number}.")
    return number


def _hyper_property(attr: str) -> property:
    slot = "_" + attr

    def fget(self: "Optimizer") -> float:
        return getattr(self, slot)

    def fset(self: "Optimizer", value: Any) -> None:
        self._set_hyper(attr, value, initial=False)

    return property(
        fget,
        fset,
        doc=(
            f"Current value of '{_HYPER_ARGS[attr]}'. Assigning a number changes the current value "
            "(a schedule, if any, still sets it again at the next step_schedules()); assigning a "
            "schedule replaces the schedule."
        ),
    )



_cpu_ops: Optional[Any] = None


def _ops_for(weights: Any) -> Any:
    """The backend for an array; numpy arrays share one NumpyOps.

    Building an Ops object per parameter per step cost about 4% of a small MLP's
    training time, and NumpyOps holds no per-call state.
    """
    global _cpu_ops
    if isinstance(weights, numpy.ndarray):
        if _cpu_ops is None:
            _cpu_ops = get_array_ops(weights)
        return _cpu_ops
    return get_array_ops(weights)

class Optimizer:
    """Stochastic gradient descent with optional first/second moments (Adam, RAdam), L2 and clipping.

    Parameters are identified by a key, usually `(model.id, param_name)`; moments,
    update counts and averages are kept per key.
    """

    mom1: Dict[KeyT, FloatsXd]
    mom2: Dict[KeyT, FloatsXd]
    averages: Optional[Dict[KeyT, FloatsXd]]
    schedules: Dict[str, Any]
    nr_update: Dict[KeyT, int]
    last_seen: Dict[KeyT, int]
    use_radam: bool
    L2_is_weight_decay: bool

    # NOTE: slots make a typo such as `optimizer.learnrate = 0.1` an AttributeError instead
    # of a silently ignored attribute, as in Thinc.
    __slots__ = (
        "mom1",
        "mom2",
        "averages",
        "schedules",
        "nr_update",
        "last_seen",
        "use_radam",
        "L2_is_weight_decay",
        "_learn_rate",
        "_b1",
        "_b2",
        "_eps",
        "_L2",
        "_grad_clip",
        "_step",
        "_last_score",
        "_rates_memo",
    )

    learn_rate = _hyper_property("learn_rate")
    b1 = _hyper_property("b1")
    b2 = _hyper_property("b2")
    eps = _hyper_property("eps")
    L2 = _hyper_property("L2")
    grad_clip = _hyper_property("grad_clip")

    def __init__(
        self,
        learn_rate: FloatOrSeq,
        *,
        L2: FloatOrSeq = ADAM_DEFAULTS["L2"],
        beta1: FloatOrSeq = ADAM_DEFAULTS["beta1"],
        beta2: FloatOrSeq = ADAM_DEFAULTS["beta2"],
        eps: FloatOrSeq = ADAM_DEFAULTS["eps"],
        grad_clip: FloatOrSeq = ADAM_DEFAULTS["grad_clip"],
        use_averages: bool = True,
        use_radam: bool = False,
        L2_is_weight_decay: bool = True,
    ):
        """Create an optimizer; beta1=beta2=0 gives plain SGD, beta1, beta2 > 0 Adam (or RAdam with use_radam)."""
        self.mom1 = {}
        self.mom2 = {}
        self.averages = {} if use_averages else None
        self.schedules = {}
        self.nr_update = defaultdict(int)
        self.last_seen = defaultdict(int)
        self.use_radam = bool(use_radam)
        self.L2_is_weight_decay = bool(L2_is_weight_decay)
        self._step = 0
        self._last_score: Optional[Tuple[int, float]] = None
        for attr, value in (
            ("grad_clip", grad_clip),
            ("learn_rate", learn_rate),
            ("b1", beta1),
            ("b2", beta2),
            ("eps", eps),
            ("L2", L2),
        ):
            self._set_hyper(attr, value, initial=True)

    # ------------------------------------------------------------------ schedules

    @property
    def step(self) -> int:
        """How many times step_schedules() has been called."""
        return self._step

    @property
    def last_score(self) -> Optional[Tuple[int, float]]:
        """The last evaluation score as `(step, score)`, or None; assign a plain score to record it."""
        return self._last_score

    @last_score.setter
    def last_score(self, score: float) -> None:
        self._last_score = (self._step, float(score))
        # Callable schedules may depend on the score, so their current value is refreshed.
        for attr, schedule in self.schedules.items():
            if callable(schedule):
                self._apply_schedule(attr, schedule, initial=False)

    def step_schedules(self) -> None:
        """Advance every scheduled hyper-parameter by one step."""
        self._step += 1
        for attr, schedule in self.schedules.items():
            self._apply_schedule(attr, schedule, initial=False)

    def _set_hyper(self, attr: str, value: Any, *, initial: bool) -> None:
        if isinstance(value, numbers.Real):
            setattr(self, "_" + attr, _checked(attr, value))
            return
        if isinstance(value, (list, tuple)):
            schedule: Any = iter(value)
        elif callable(value) or hasattr(value, "__next__"):
            schedule = value
        else:
            raise ValueError(
                f"Optimizer: invalid schedule for '{_HYPER_ARGS[attr]}': got {type(value).__name__} "
                f"{value!r:.80}. Pass a number, a list of numbers, an iterator/generator, or a "
                "callable schedule(step, **extra)."
            )
        self.schedules[attr] = schedule
        self._apply_schedule(attr, schedule, initial=initial)

    def _apply_schedule(self, attr: str, schedule: Any, *, initial: bool) -> None:
        if callable(schedule):
            value = schedule(self._step, last_score=self._last_score)
        else:
            try:
                value = next(schedule)
            except StopIteration:
                if initial:
                    raise ValueError(
                        f"Optimizer: the schedule for '{_HYPER_ARGS[attr]}' is empty: it gave no "
                        "first value. Pass a non-empty list or an unexhausted iterator."
                    ) from None
                # An exhausted schedule keeps its last value.
                return
        where = f"the schedule for '{_HYPER_ARGS[attr]}' gave {value!r:.40} at step {self._step}; "
        setattr(self, "_" + attr, _checked(attr, value, where=where))

    # ------------------------------------------------------------------ updates

    def __call__(
        self,
        key: KeyT,
        weights: FloatsXd,
        gradient: FloatsXd,
        *,
        lr_scale: float = 1.0,
    ) -> Tuple[FloatsXd, FloatsXd]:
        """Update `weights` (in place where possible) from `gradient`; returns (weights, zeroed gradient).

        An empty gradient (a param that received none, e.g. an unused embedding row block)
        is no update: both come back unchanged and the step count of `key` does not move.
        """
        if getattr(gradient, "ndim", 0) >= 1 and gradient.shape[0] == 0:
            return weights, gradient
        for name, arr in (("weights", weights), ("gradient", gradient)):
            if not (hasattr(arr, "shape") and hasattr(arr, "dtype")):
                raise TypeError(
                    f"Optimizer: '{name}' for parameter {key!r} must be an array, got {type(arr).__name__}."
                )
            if arr.dtype.kind != "f":
                raise TypeError(
                    f"Optimizer: '{name}' for parameter {key!r} must hold floats, got dtype {arr.dtype}."
                )
        if tuple(weights.shape) != tuple(gradient.shape):
            raise ValueError(
                f"Optimizer: weights and gradient for parameter {key!r} have different shapes: "
                f"{tuple(weights.shape)} vs {tuple(gradient.shape)}. Pass the gradient of these weights."
            )
        if gradient.size == 0:
            return weights, gradient
        ops = _ops_for(weights)
        self.nr_update[key] += 1
        nr_upd = self.nr_update[key]
        if self.use_radam or (self._b1 > 0.0 and self._b2 > 0.0):
            return self._adam_step(ops, key, weights, gradient, lr_scale, nr_upd), gradient
        learn_rate = self._learn_rate
        if self._L2 != 0 and not self.L2_is_weight_decay:
            gradient += self._L2 * weights
        if self._grad_clip:
            gradient = ops.clip_gradient(gradient, self._grad_clip)
        if self._b2 > 0.0:
            raise NotImplementedError(
                f"Optimizer: beta2={self._b2} with beta1=0 (a second moment without a first) is not "
                "supported. Set beta1 > 0 for Adam, or beta1=beta2=0 for plain SGD."
            )
        weights -= lr_scale * learn_rate * gradient
        gradient.fill(0)
        if self._L2 != 0 and self.L2_is_weight_decay:
            # Decoupled weight decay (AdamW style): shrinks the weights after the step.
            weights -= lr_scale * learn_rate * self._L2 * weights
        averages = self._averages(ops, key, weights)
        if averages is not None:
            ops.update_averages(averages, weights, nr_upd)
        return weights, gradient

    def _averages(self, ops: Ops, key: KeyT, weights: FloatsXd) -> Optional[FloatsXd]:
        """The moving average of this parameter (created at zero), or None without averaging."""
        if self.averages is None:
            return None
        if key not in self.averages:
            # NOTE: averages start at zero, as in Thinc, so early averages lean towards zero.
            self.averages[key] = ops.alloc(weights.shape, dtype=weights.dtype)
        elif tuple(self.averages[key].shape) != tuple(weights.shape):
            raise ValueError(
                f"Optimizer: parameter {key!r} changed shape from {tuple(self.averages[key].shape)} "
                f"to {tuple(weights.shape)} between updates. Use a new key (or a new optimizer) "
                "for a resized parameter."
            )
        return self.averages[key]

    def _moments(self, ops: Ops, key: KeyT, weights: FloatsXd) -> Tuple[FloatsXd, FloatsXd]:
        if key not in self.mom1:
            self.mom1[key] = ops.alloc((weights.size,), dtype=weights.dtype)
            self.mom2[key] = ops.alloc((weights.size,), dtype=weights.dtype)
        mom1, mom2 = self.mom1[key], self.mom2[key]
        if mom1.size != weights.size:
            raise ValueError(
                f"Optimizer: parameter {key!r} has {weights.size} values, but its moments were "
                f"created for {mom1.size}. Use a new key (or a new optimizer) for a resized parameter."
            )
        return mom1, mom2

    def _adam_step(
        self, ops: Ops, key: KeyT, weights: FloatsXd, gradient: FloatsXd, lr_scale: float, nr_upd: int
    ) -> FloatsXd:
        """L2 or weight decay, clipping, the Adam or RAdam update and the average, as one Ops.adam_step."""
        mom1, mom2 = self._moments(ops, key, weights)
        averages = self._averages(ops, key, weights)
        if self.use_radam:
            b1, b2, eps, lr, mod_rate = self._radam_rates(float(self._learn_rate * lr_scale), nr_upd)
        else:
            b1, b2, eps, lr, mod_rate = self._adam_rates(weights, lr_scale, nr_upd)
        L2 = self._L2 if not self.L2_is_weight_decay else 0.0
        # Decoupled weight decay (AdamW style) shrinks the weights after the step. Python floats
        # throughout (a numpy lr_scale included), which the compiled step requires.
        weight_decay = float(lr_scale * self._learn_rate * self._L2) if self.L2_is_weight_decay else 0.0
        W = weights.reshape((-1,))
        G = gradient.reshape((-1,))
        # Flat views where the arrays are contiguous; otherwise copies, written back below.
        A = averages.reshape((-1,)) if averages is not None and averages.flags.c_contiguous else None
        ops.adam_step(
            W, G, mom1, mom2, A, beta1=b1, beta2=b2, eps=eps, learn_rate=lr, mod_rate=mod_rate,
            L2=L2, weight_decay=weight_decay, grad_clip=self._grad_clip, nr_update=nr_upd,
        )
        if not gradient.flags.c_contiguous:
            gradient.fill(0)
        weights_out = W.reshape(weights.shape)
        if averages is not None and A is None:
            ops.update_averages(averages, weights_out, nr_upd)
        return weights_out

    def _adam_rates(
        self, weights: FloatsXd, lr_scale: float, nr_upd: int
    ) -> Tuple[float, float, float, float, float]:
        """(beta1, beta2, eps, step size, mod_rate) of an Adam step."""
        # Every param of a model takes the same step in one update: computed once per step.
        memo_key = (self._b1, self._b2, self._eps, self._learn_rate, lr_scale, nr_upd, weights.dtype)
        memo = getattr(self, "_rates_memo", None)
        if memo is not None and memo[0] == memo_key:
            return memo[1]
        b1, b2 = self._b1, self._b2
        # Bias correction of both moments folded into the step size.
        fix1 = 1.0 - b1**nr_upd
        fix2 = 1.0 - b2**nr_upd
        lr = self._learn_rate * fix2**0.5 / fix1
        # The kernel sees its scalars at the parameters' precision, as Thinc's float32 kernel
        # does; it matters for 1 - beta2, where rounding beta2 to float32 first shifts the
        # result by ~1e-5 relative.
        as_dtype = weights.dtype.type
        b1, b2, eps, lr = (float(as_dtype(x)) for x in (b1, b2, self._eps, lr * lr_scale))
        self._rates_memo = (memo_key, (b1, b2, eps, lr, 1.0))
        return b1, b2, eps, lr, 1.0

    def _radam_rates(self, lr: float, nr_upd: int) -> Tuple[float, float, float, float, float]:
        """(beta1, beta2, eps, step size, mod_rate) of a RAdam step."""
        b1, b2 = self._b1, self._b2
        # NOTE: Thinc's RAdam counts one step ahead of its update count; kept so results match.
        t = nr_upd + 1
        b2_t = b2**t
        rho_inf = 2.0 / (1.0 - b2) - 1.0
        rho_t = rho_inf - 2.0 * t * b2_t / (1.0 - b2_t)
        fix1 = 1.0 - b1**t
        if rho_t >= 5.0:
            # The variance of the adaptive rate is tractable: rectify it.
            rect = (1.0 - b2_t) * (rho_t - 4.0) / (rho_inf - 4.0) * (rho_t - 2.0) / rho_t
            rect = rect * rho_inf / (rho_inf - 2.0)
            return b1, b2, self._eps, math.sqrt(rect) / fix1 * lr, 1.0
        # Too few steps for a variance estimate: SGD with bias-corrected momentum. With
        # mod_rate=0 and eps=1 the Adam denominator is exactly 1, so the same update still
        # advances both moments and applies W -= lr * mom1.
        return b1, b2, 1.0, lr / fix1, 0.0


@registry.optimizers("RAdam.v1")
def RAdam(
    learn_rate: FloatOrSeq = ADAM_DEFAULTS["learn_rate"],
    *,
    beta1: FloatOrSeq = ADAM_DEFAULTS["beta1"],
    beta2: FloatOrSeq = ADAM_DEFAULTS["beta2"],
    eps: FloatOrSeq = ADAM_DEFAULTS["eps"],
    L2: FloatOrSeq = ADAM_DEFAULTS["L2"],
    L2_is_weight_decay: bool = cast(bool, ADAM_DEFAULTS["L2_is_weight_decay"]),
    grad_clip: FloatOrSeq = ADAM_DEFAULTS["grad_clip"],
    use_averages: bool = True,
) -> Optimizer:
    """Rectified Adam (Liu et al., 2019): momentum SGD until the second moment is reliable, then Adam."""
    return Optimizer(
        learn_rate,
        beta1=beta1,
        beta2=beta2,
        eps=eps,
        grad_clip=grad_clip,
        L2_is_weight_decay=L2_is_weight_decay,
        L2=L2,
        use_averages=use_averages,
        use_radam=True,
    )


@registry.optimizers("Adam.v1")
def Adam(
    learn_rate: FloatOrSeq = ADAM_DEFAULTS["learn_rate"],
    *,
    L2: FloatOrSeq = ADAM_DEFAULTS["L2"],
    beta1: FloatOrSeq = ADAM_DEFAULTS["beta1"],
    beta2: FloatOrSeq = ADAM_DEFAULTS["beta2"],
    eps: FloatOrSeq = ADAM_DEFAULTS["eps"],
    grad_clip: FloatOrSeq = ADAM_DEFAULTS["grad_clip"],
    L2_is_weight_decay: bool = cast(bool, ADAM_DEFAULTS["L2_is_weight_decay"]),
    use_averages: bool = True,
) -> Optimizer:
    """Adam (Kingma and Ba, 2014) with bias-corrected moments; L2 is AdamW-style weight decay by default."""
    return Optimizer(
        learn_rate,
        L2=L2,
        beta1=beta1,
        beta2=beta2,
        eps=eps,
        grad_clip=grad_clip,
        L2_is_weight_decay=L2_is_weight_decay,
        use_averages=use_averages,
        use_radam=False,
    )


@registry.optimizers("SGD.v1")
def SGD(
    learn_rate: FloatOrSeq,
    *,
    L2: FloatOrSeq = SGD_DEFAULTS["L2"],
    grad_clip: FloatOrSeq = SGD_DEFAULTS["grad_clip"],
    L2_is_weight_decay: bool = cast(bool, SGD_DEFAULTS["L2_is_weight_decay"]),
    use_averages: bool = True,
) -> Optimizer:
    """Plain stochastic gradient descent: W -= learn_rate * dW."""
    return Optimizer(
        learn_rate,
        L2=L2,
        grad_clip=grad_clip,
        L2_is_weight_decay=L2_is_weight_decay,
        beta1=0.0,
        beta2=0.0,
        use_averages=use_averages,
    )


__all__ = ["Adam", "RAdam", "SGD", "Optimizer", "ADAM_DEFAULTS", "SGD_DEFAULTS"]
