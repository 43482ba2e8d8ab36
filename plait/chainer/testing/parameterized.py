"""Parameterized unittest classes: one generated subclass per parameter set."""
import itertools
import sys
import unittest
from typing import Any, Callable, Dict, List, Mapping, Sequence

__all__ = ["parameterize", "product"]


def _make_case(base: type, index: int, params: Mapping[str, Any]) -> type:
    def __str__(self: Any) -> str:
        return f"{base.__str__(self)}  parameter: {dict(params)}"

    namespace = dict(params)
    namespace["__str__"] = __str__
    return type(f"{base.__name__}_param_{index}", (base,), namespace)


def parameterize(*params: Mapping[str, Any]) -> Callable[[type], None]:
    """Class decorator: for each dict of params, a subclass `<Name>_param_<i>` with those
    class attributes is added to the class's module; the decorated class itself is removed
    (the decorator returns None), so only the parameterized copies are collected.
    """

    def decorator(klass: type) -> None:
        if not (isinstance(klass, type) and issubclass(klass, unittest.TestCase)):
            raise TypeError(
                f"testing.parameterize: decorates a unittest.TestCase subclass, got {klass!r}."
            )
        module = sys.modules[klass.__module__]
        for i, p in enumerate(params):
            case = _make_case(klass, i, p)
            case.__module__ = klass.__module__
            setattr(module, case.__name__, case)
        return None

    return decorator


def product(parameter: Mapping[str, Sequence[Any]]) -> List[Dict[str, Any]]:
    """Every combination of the values of a dict of lists, as a list of dicts (keys sorted).

    product({'a': [1, 2], 'b': [3]}) == [{'a': 1, 'b': 3}, {'a': 2, 'b': 3}]
    """
    keys = sorted(parameter)
    return [dict(zip(keys, values)) for values in itertools.product(*(parameter[k] for k in keys))]
