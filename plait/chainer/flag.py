"""Ternary volatility flags (ON, OFF, AUTO) and their aggregation over a function's inputs."""
from typing import Any, Iterable

__all__ = ["Flag", "ON", "OFF", "AUTO", "aggregate_flags"]

# Spellings accepted for each of the three values; anything else is rejected by Flag().
_SPELLINGS = {
    "on": "on", "ON": "on", True: "on",
    "off": "off", "OFF": "off", False: "off",
    "auto": "auto", "AUTO": "auto", None: "auto",
}
_INSTANCES: dict = {}


class Flag:
    """A ternary flag: ON, OFF or AUTO. Flag(x) always returns one of the three singletons."""

    __slots__ = ("value",)

    def __new__(cls, name: Any = None) -> "Flag":
        if isinstance(name, Flag):
            return name
        try:
            value = _SPELLINGS[name]
        except (KeyError, TypeError):
            raise ValueError(
                f"Flag: unknown flag value {name!r}. Use 'on'/'ON'/True, 'off'/'OFF'/False "
                f"or 'auto'/'AUTO'/None."
            ) from None
        flag = _INSTANCES.get(value)
        if flag is None:
            flag = super().__new__(cls)
            flag.value = value
            _INSTANCES[value] = flag
        return flag

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, Flag):
            return self is other
        try:
            return _SPELLINGS[other] == self.value
        except (KeyError, TypeError):
            return False

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.value)

    def __bool__(self) -> bool:
        if self.value == "auto":
            raise ValueError(
                "Flag: AUTO has no truth value; compare it instead (flag == 'auto', flag == ON)."
            )
        return self.value == "on"

    def __repr__(self) -> str:
        return self.value.upper()

    __str__ = __repr__

    def __reduce__(self):
        # Pickling keeps the singleton identity on load.
        return (Flag, (self.value,))

    def __copy__(self) -> "Flag":
        return self

    def __deepcopy__(self, memo: Any) -> "Flag":
        return self


ON = Flag("on")
OFF = Flag("off")
AUTO = Flag("auto")


def aggregate_flags(flags: Iterable[Any]) -> Flag:
    """ON if any flag is ON, OFF if any is OFF, AUTO if all are AUTO (or none are given).

    Raises ValueError when both ON and OFF appear: volatile and non-volatile variables cannot
    be arguments of one function.
    """
    seen_on = seen_off = False
    for f in flags:
        f = Flag(f)
        if f is ON:
            seen_on = True
        elif f is OFF:
            seen_off = True
    if seen_on and seen_off:
        raise ValueError(
            "aggregate_flags: ON and OFF flags cannot be mixed: a volatile (volatile='on') and a "
            "non-volatile (volatile='off') variable were passed to one function. Make their "
            "volatility agree, or create the constant one with volatile='auto'."
        )
    if seen_on:
        return ON
    if seen_off:
        return OFF
    return AUTO
