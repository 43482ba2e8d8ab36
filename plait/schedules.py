"""Schedules: hyperparameter values (learning rates, batch sizes, ...) as functions of the step.

A `Schedule` answers two protocols at once:

- Thinc 9 style: `schedule(step, **extra)` returns the value at `step` and has no side effects
  on the iteration counter (`extra` carries inputs such as `last_score` for `plateau`).
- Thinc 8 style: a schedule is an infinite iterator; `next(schedule)` returns the value at an
  internal counter and advances it, and `iter(schedule) is schedule`. spaCy's batchers and
  Thinc 8's `Optimizer` consume schedules this way.

The value at step `k` equals the `k`-th value (counting from 0) that Thinc 8.3's generator of
the same name and arguments yields, bit for bit.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generator, Generic, Optional, Tuple, TypeVar

from .config import registry

OutT = TypeVar("OutT")

# A float counter that is integral and below this bound can be advanced by n in one addition
# with exactly the result of n separate `+= 1` steps.
_EXACT_INT_FLOAT = 2.0**52


class Schedule(Generic[OutT]):
    """A value that depends on the training step: callable by step, and an infinite iterator.

    `fn(schedule, step, **extra)` computes the value; it reads its settings from
    `schedule.attrs`. Calling never moves the counter that `next()` advances.
    """

    __slots__ = ("name", "_fn", "_attrs", "_next_step", "_memo")

    def __init__(
        self,
        name: str,
        schedule: Callable[..., OutT],
        *,
        attrs: Optional[Dict[str, Any]] = None,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"Schedule: name must be a str, got {name!r} ({type(name).__name__}).")
        if not callable(schedule):
            raise TypeError(
                f"Schedule {name!r}: schedule must be a callable fn(schedule, step, **extra), "
                f"got {type(schedule).__name__}."
            )
        if attrs is not None and not isinstance(attrs, dict):
            raise TypeError(f"Schedule {name!r}: attrs must be a dict or None, got {type(attrs).__name__}.")
        self.name = name
        self._fn = schedule
        self._attrs: Dict[str, Any] = dict(attrs) if attrs else {}
        self._next_step = 0
        # Scratch space for schedules whose value is a running recurrence (see _advance).
        self._memo: Dict[str, Any] = {}

    @property
    def attrs(self) -> Dict[str, Any]:
        """The schedule's settings; mutate the dict in place, it cannot be replaced."""
        return self._attrs

    def __call__(self, step: int, **extra: Any) -> OutT:
        """The value at `step` (>= 0); `extra` is passed on to the schedule function."""
        return self._fn(self, _check_step(self.name, "step", step), **extra)

    def to_generator(self, start: int = 0, step_size: int = 1, **extra: Any) -> Generator[OutT, None, None]:
        """A fresh generator of the values at start, start + step_size, ...; `extra` goes to every call."""
        start = _check_step(self.name, "start", start)
        step_size = _check_step(self.name, "step_size", step_size)
        if step_size < 1:
            raise ValueError(
                f"Schedule {self.name!r}.to_generator: step_size must be >= 1, got {step_size}."
            )
        return self._generate(start, step_size, extra)

    def _generate(self, step: int, step_size: int, extra: Dict[str, Any]) -> Generator[OutT, None, None]:
        while True:
            yield self._fn(self, step, **extra)
            step += step_size

    def __iter__(self) -> "Schedule[OutT]":
        return self

    def __next__(self) -> OutT:
        value = self._fn(self, self._next_step)
        self._next_step += 1
        return value

    def __repr__(self) -> str:
        shown = {k: v for k, v in self._attrs.items() if not k.startswith("_")}
        return f"Schedule({self.name!r}, attrs={shown!r})"


# ----------------------------------------------------------------------------------------------
# Argument checks


def _check_step(where: str, arg: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"Schedule {where!r}: {arg} must be an int, got {value!r} ({type(value).__name__})."
        )
    value = int(value)
    if value < 0:
        raise ValueError(f"Schedule {where!r}: {arg} must be >= 0, got {value}.")
    return value


def _real(fn: str, arg: str, value: Any, *, low: Optional[float] = None, strict: bool = False) -> Any:
    """Check that `value` is a finite real number (>= low, or > low when strict); return it unchanged."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}(): {arg} must be a number, got {value!r} ({type(value).__name__}).")
    if not math.isfinite(value):
        raise ValueError(f"{fn}(): {arg} must be finite, got {value!r}.")
    if low is not None:
        if strict and not value > low:
            raise ValueError(f"{fn}(): {arg} must be > {low}, got {value!r}.")
        if not strict and not value >= low:
            raise ValueError(f"{fn}(): {arg} must be >= {low}, got {value!r}.")
    # NOTE: returned as given (not float()), so a numpy scalar computes exactly as under Thinc.
    return value


def _count(fn: str, arg: str, value: Any, *, low: int) -> int:
    """Check that `value` is a whole number >= low (an integral float such as 1e3 is accepted)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}(): {arg} must be an int, got {value!r} ({type(value).__name__}).")
    if not isinstance(value, numbers.Integral):
        if not (math.isfinite(value) and float(value).is_integer()):
            raise ValueError(f"{fn}(): {arg} must be a whole number of steps, got {value!r}.")
    value = int(value)
    if value < low:
        raise ValueError(f"{fn}(): {arg} must be >= {low}, got {value}.")
    return value


def _wrapped(fn: str, value: Any) -> Schedule:
    """`value` as a Schedule: a Schedule as it is, any other iterable (a Thinc 8 generator, a list
    of rates) read lazily by `_iterable_schedule`."""
    if isinstance(value, Schedule):
        return value
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(
            f"{fn}(): schedule must be a Schedule (for example decaying(0.005, 1e-4)) or an iterable "
            f"of values, got {type(value).__name__} {value!r}."
        )
    return Schedule("from_iterable", _iterable_value, attrs={"_iterator": iter(value), "_fn": fn})


# How many values an iterable-backed schedule keeps behind the latest step asked for.
_ITERABLE_WINDOW = 4096


def _iterable_value(schedule: Schedule, step: int, **extra: Any) -> Any:
    """The `step`-th value of the wrapped iterable, reading it as far as needed.

    Values are cached in a window behind the furthest step read, so that steps can be asked
    for again (an optimizer and a logger reading the same step) without unbounded memory.
    """
    memo = schedule._memo
    start = memo.setdefault("start", 0)
    values = memo.setdefault("values", [])
    iterator = schedule.attrs["_iterator"]
    if step < start:
        raise ValueError(
            f"{schedule.attrs['_fn']}(): the wrapped iterable's step {step} was read long ago and is no "
            f"longer kept (steps from {start} on are). Pass a Schedule to evaluate arbitrary steps."
        )
    while start + len(values) <= step:
        try:
            values.append(next(iterator))
        except StopIteration:
            raise ValueError(
                f"{schedule.attrs['_fn']}(): the wrapped iterable ended after {start + len(values)} "
                f"values, but step {step} was asked for. Give an infinite iterator or a longer list."
            ) from None
        if len(values) > 2 * _ITERABLE_WINDOW:
            del values[:_ITERABLE_WINDOW]
            start += _ITERABLE_WINDOW
            memo["start"] = start
    return values[step - start]


# ----------------------------------------------------------------------------------------------
# Running recurrences
#
# Several Thinc 8 generators keep a running float (`t += 1`, `curr *= compound`). Rounding makes
# the k-th value differ from the closed form (t0 + k, start * compound**k), so to be bit-exact the
# recurrence is replayed. The last (step, value) is memoised per schedule, which makes forward
# access (next(), to_generator, optimizer steps) O(1) per step.


def _replay(
    schedule: Schedule,
    key: str,
    params: Tuple[Any, ...],
    x0: Any,
    update: Callable[[Any], Any],
    n: int,
    settled: Optional[Callable[[Any], bool]] = None,
) -> Any:
    """The value of `x0` after `n` applications of `update`; stops early once `settled(x)` holds."""
    memo = schedule._memo.get(key)
    if memo is not None and memo[0] == params and memo[1] <= n:
        _, k, x, done = memo
    else:
        k, x, done = 0, x0, False
    while k < n and not done:
        nxt = update(x)
        k += 1
        # A fixed point (0, inf, or a clip that can never be undone) ends the replay.
        done = nxt == x or (settled is not None and settled(nxt))
        x = nxt
    schedule._memo[key] = (params, k, x, done)
    return x


def _advance(schedule: Schedule, t0: Any, n: int) -> Any:
    """`t0` after `n` unit increments, as a Thinc generator's running `t += 1` would hold it."""
    if isinstance(t0, numbers.Integral):
        return t0 + n
    # Only a Python float is sure to add like the generator did; numpy scalars are replayed.
    if type(t0) is float and t0.is_integer() and abs(t0) + n < _EXACT_INT_FLOAT:
        return t0 + n
    return _replay(schedule, "t", (t0,), t0, lambda t: t + 1, n)


# ----------------------------------------------------------------------------------------------
# constant, constant_then


def _constant_value(schedule: Schedule, step: int, **extra: Any) -> Any:
    return schedule.attrs["rate"]


@registry.schedules("constant.v1")
def constant(rate: OutT) -> Schedule[OutT]:
    """The same value at every step."""
    _real("constant", "rate", rate)
    return Schedule("constant", _constant_value, attrs={"rate": rate})


def _constant_then_value(schedule: Schedule, step: int, **extra: Any) -> Any:
    attrs = schedule.attrs
    if step < attrs["steps"]:
        return attrs["rate"]
    # The wrapped schedule starts at its own step 0 when the constant phase ends.
    return attrs["schedule"](step - attrs["steps"], **extra)


@registry.schedules("constant_then.v1")
def constant_then(rate: OutT, steps: int, schedule: Schedule[OutT]) -> Schedule[OutT]:
    """`rate` for the first `steps` steps, then `schedule` (restarted at its step 0)."""
    _real("constant_then", "rate", rate)
    steps = _count("constant_then", "steps", steps, low=0)
    schedule = _wrapped("constant_then", schedule)
    return Schedule(
        "constant_then", _constant_then_value, attrs={"rate": rate, "steps": steps, "schedule": schedule}
    )


# ----------------------------------------------------------------------------------------------
# decaying, compounding


def _decaying_value(schedule: Schedule, step: int, **extra: Any) -> float:
    attrs = schedule.attrs
    t = _advance(schedule, attrs["t"], step)
    return attrs["base_rate"] * (1.0 / (1.0 + attrs["decay"] * t))


@registry.schedules("decaying.v1")
def decaying(base_rate: float, decay: float, *, t: int = 0) -> Schedule[float]:
    """Inverse-time decay: base_rate / (1 + decay * (t + step))."""
    _real("decaying", "base_rate", base_rate, low=0.0)
    _real("decaying", "decay", decay, low=0.0)
    _real("decaying", "t", t, low=0.0)
    return Schedule("decaying", _decaying_value, attrs={"base_rate": base_rate, "decay": decay, "t": t})


def _clip_to_stop(value: Any, start: Any, stop: Any) -> Any:
    # `stop` bounds the series on the side it lies on relative to `start`.
    return max(value, stop) if start > stop else min(value, stop)


def _compounding_value(schedule: Schedule, step: int, **extra: Any) -> Any:
    attrs = schedule.attrs
    start, stop, compound = attrs["start"], attrs["stop"], attrs["compound"]
    # With start, compound > 0 the running product moves monotonically: up when compound > 1,
    # down when compound < 1. Once it passes `stop` in that direction it can never come back.
    if start > stop:
        settled = (lambda x: x <= stop) if compound <= 1 else None
    else:
        settled = (lambda x: x >= stop) if compound >= 1 else None
    curr = _replay(
        schedule, "curr", (start, stop, compound), float(start), lambda x: x * compound, step, settled
    )
    return _clip_to_stop(curr, start, stop)


@registry.schedules("compounding.v1")
def compounding(start: float, stop: float, compound: float, *, t: float = 0.0) -> Schedule[float]:
    """start * compound**step (as a running product), clipped at `stop`; often used for batch sizes.

    NOTE: `t` is accepted and ignored, exactly as Thinc 8.3 ignores it.
    """
    _real("compounding", "start", start, low=0.0)
    _real("compounding", "stop", stop, low=0.0)
    _real("compounding", "compound", compound, low=0.0, strict=True)
    _real("compounding", "t", t)
    return Schedule(
        "compounding",
        _compounding_value,
        attrs={"start": start, "stop": stop, "compound": compound, "t": t},
    )


# ----------------------------------------------------------------------------------------------
# warmup_linear, slanted_triangular, cyclic_triangular


def _warmup_linear_value(schedule: Schedule, step: int, **extra: Any) -> float:
    attrs = schedule.attrs
    warmup, total = attrs["warmup_steps"], attrs["total_steps"]
    if step < warmup:
        factor = step / max(1, warmup)
    else:
        factor = max(0.0, (total - step) / max(1.0, total - warmup))
    return factor * attrs["initial_rate"]


@registry.schedules("warmup_linear.v1")
def warmup_linear(initial_rate: float, warmup_steps: int, total_steps: int) -> Schedule[float]:
    """Linear ramp from 0 to `initial_rate` over `warmup_steps`, then linear decay to 0 at `total_steps`."""
    _real("warmup_linear", "initial_rate", initial_rate, low=0.0)
    warmup_steps = _count("warmup_linear", "warmup_steps", warmup_steps, low=0)
    total_steps = _count("warmup_linear", "total_steps", total_steps, low=0)
    return Schedule(
        "warmup_linear",
        _warmup_linear_value,
        attrs={"initial_rate": initial_rate, "warmup_steps": warmup_steps, "total_steps": total_steps},
    )


def _slanted_triangular_value(schedule: Schedule, step: int, **extra: Any) -> float:
    attrs = schedule.attrs
    max_rate, cut_frac, ratio = attrs["max_rate"], attrs["cut_frac"], attrs["ratio"]
    cut = int(attrs["num_steps"] * cut_frac)
    # Thinc's generator increments t before computing, so step 0 already sees t + 1.
    t = _advance(schedule, attrs["t"], step + 1)
    if t < cut:
        p = t / cut
    else:
        decay_steps = cut * (1 / cut_frac - 1)
        p = 1 - ((t - cut) / decay_steps)
    return max_rate * (1 + p * (ratio - 1)) * (1 / ratio)


@registry.schedules("slanted_triangular.v1")
def slanted_triangular(
    max_rate: float,
    num_steps: int,
    *,
    cut_frac: float = 0.1,
    ratio: int = 32,
    decay: float = 1.0,
    t: float = 0.0,
) -> Schedule[float]:
    """Howard and Ruder's slanted triangular rate: a short linear rise to `max_rate`, a long linear fall.

    The rate climbs from max_rate / ratio over the first num_steps * cut_frac steps, then falls
    back to max_rate / ratio at num_steps; past num_steps it keeps falling linearly (as in Thinc).
    NOTE: `decay` is accepted and ignored, exactly as Thinc 8.3 ignores it.
    """
    _real("slanted_triangular", "max_rate", max_rate, low=0.0)
    num_steps = _count("slanted_triangular", "num_steps", num_steps, low=1)
    _real("slanted_triangular", "cut_frac", cut_frac, low=0.0, strict=True)
    if not cut_frac < 1:
        raise ValueError(f"slanted_triangular(): cut_frac must be < 1, got {cut_frac!r}.")
    if int(num_steps * cut_frac) < 1:
        raise ValueError(
            f"slanted_triangular(): num_steps * cut_frac = {num_steps} * {cut_frac!r} is under one step, so "
            "there would be no warm-up. Raise num_steps or cut_frac."
        )
    _real("slanted_triangular", "ratio", ratio, low=0.0, strict=True)
    _real("slanted_triangular", "decay", decay)
    _real("slanted_triangular", "t", t, low=0.0)
    return Schedule(
        "slanted_triangular",
        _slanted_triangular_value,
        attrs={
            "max_rate": max_rate,
            "num_steps": num_steps,
            "cut_frac": cut_frac,
            "ratio": ratio,
            "decay": decay,
            "t": t,
        },
    )


def _cyclic_triangular_value(schedule: Schedule, step: int, **extra: Any) -> float:
    attrs = schedule.attrs
    min_lr, max_lr, period = attrs["min_lr"], attrs["max_lr"], attrs["period"]
    # Thinc's generator counts from 1, so step 0 is already one step into the first cycle.
    it = step + 1
    cycle = float(math.floor(1 + it / (2 * period)))
    distance = abs(it / period - 2 * cycle + 1)
    return min_lr + (max_lr - min_lr) * max(0.0, 1 - distance)


@registry.schedules("cyclic_triangular.v1")
def cyclic_triangular(min_lr: float, max_lr: float, period: int) -> Schedule[float]:
    """Triangle wave between `min_lr` and `max_lr`: `period` steps up, `period` steps down."""
    _real("cyclic_triangular", "min_lr", min_lr, low=0.0)
    _real("cyclic_triangular", "max_lr", max_lr, low=0.0)
    period = _count("cyclic_triangular", "period", period, low=1)
    return Schedule(
        "cyclic_triangular",
        _cyclic_triangular_value,
        attrs={"min_lr": min_lr, "max_lr": max_lr, "period": period},
    )


# ----------------------------------------------------------------------------------------------
# plateau


@dataclass
class _PlateauState:
    best_score: Optional[float] = None
    last_score_step: Optional[int] = None
    patience: int = 0
    n_plateaus: int = 0


def _plateau_value(schedule: Schedule, step: int, *, last_score: Any = None, **extra: Any) -> float:
    attrs = schedule.attrs
    state: _PlateauState = attrs["state"]
    if last_score is not None:
        if not isinstance(last_score, (tuple, list)) or len(last_score) != 2:
            raise TypeError(
                f"Schedule 'plateau': last_score must be a (step, score) pair, got {last_score!r}."
            )
        score_step, score = last_score
        # Each evaluation counts once, however many steps pass before the next one.
        is_new = state.last_score_step is None or score_step > state.last_score_step
        if state.best_score is None:
            state.best_score = score
        elif is_new and score > state.best_score:
            state.best_score = score
            state.patience = 0
        elif is_new:
            state.patience += 1
            if state.patience >= attrs["max_patience"]:
                state.n_plateaus += 1
                state.patience = 0
        state.last_score_step = score_step
    return attrs["scale"] ** state.n_plateaus * attrs["schedule"](step, last_score=last_score, **extra)


@registry.schedules("plateau.v1")
def plateau(max_patience: int, scale: float, schedule: Schedule[float]) -> Schedule[float]:
    """`schedule` times scale ** (number of plateaus): a plateau is `max_patience` evaluations without a new best.

    Pass evaluations as `last_score=(step_evaluated, score)`; higher scores are better.
    """
    max_patience = _count("plateau", "max_patience", max_patience, low=1)
    _real("plateau", "scale", scale, low=0.0, strict=True)
    schedule = _wrapped("plateau", schedule)
    return Schedule(
        "plateau",
        _plateau_value,
        attrs={"max_patience": max_patience, "scale": scale, "schedule": schedule, "state": _PlateauState()},
    )


__all__ = [
    "Schedule",
    "constant",
    "constant_then",
    "decaying",
    "compounding",
    "warmup_linear",
    "slanted_triangular",
    "cyclic_triangular",
    "plateau",
]
