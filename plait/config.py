"""Configuration and function registries (built on confection and catalogue)."""
from __future__ import annotations

import catalogue
import confection
from confection import VARIABLE_RE, Config, ConfigValidationError, Promise

from typing import Any, Dict, List, Mapping, Union

from .types import Decorator

# Registered functions live in catalogue's "plait" namespace, so that plait and a real
# thinc installed side by side never overwrite each other's entries.
_NAMESPACE = "plait"


class RegistryNameError(ConfigValidationError, catalogue.RegistryError):
    """A config names a registry or a registered function that does not exist.

    It is a ConfigValidationError (so config errors can be caught in one place) and a
    catalogue.RegistryError (what Thinc raises for an unknown name).
    """


class registry(confection.registry):
    """Function registries for the Thinc face: one catalogue registry per kind."""

    optimizers: Decorator = catalogue.create(_NAMESPACE, "optimizers", entry_points=True)
    schedules: Decorator = catalogue.create(_NAMESPACE, "schedules", entry_points=True)
    layers: Decorator = catalogue.create(_NAMESPACE, "layers", entry_points=True)
    losses: Decorator = catalogue.create(_NAMESPACE, "losses", entry_points=True)
    initializers: Decorator = catalogue.create(_NAMESPACE, "initializers", entry_points=True)
    datasets: Decorator = catalogue.create(_NAMESPACE, "datasets", entry_points=True)
    ops: Decorator = catalogue.create(_NAMESPACE, "ops", entry_points=True)

    @classmethod
    def resolve(
        cls,
        config: Union[Config, Dict[str, Dict[str, Any]]],
        *,
        schema: Any = None,
        overrides: Dict[str, Any] = {},
        validate: bool = True,
    ) -> Dict[str, Any]:
        """Build the objects a config describes; unknown function names fail first, by location."""
        cls._check_names(config, overrides)
        kwargs = {"overrides": overrides, "validate": validate}
        if schema is not None:
            kwargs["schema"] = schema
        return super().resolve(config, **kwargs)

    @classmethod
    def fill(
        cls,
        config: Union[Config, Dict[str, Dict[str, Any]]],
        *,
        schema: Any = None,
        overrides: Dict[str, Any] = {},
        interpolate: bool = False,
        validate: bool = True,
    ) -> Config:
        """Fill in the defaults of a config; unknown function names fail first, by location."""
        cls._check_names(config, overrides)
        kwargs = {"overrides": overrides, "interpolate": interpolate, "validate": validate}
        if schema is not None:
            kwargs["schema"] = schema
        return super().fill(config, **kwargs)

    @classmethod
    def _check_names(cls, config: Mapping[str, Any], overrides: Mapping[str, Any]) -> None:
        errors: List[Dict[str, Any]] = []
        cls._collect_unknown(config, [], errors)
        for key, value in (overrides or {}).items():
            if key.rsplit(".", 1)[-1].startswith("@") and isinstance(value, str):
                cls._check_one(key.split(".")[:-1], key.rsplit(".", 1)[-1][1:], value, errors)
        if errors:
            raise RegistryNameError(
                config=config,
                errors=errors,
                title="Config validation error: unknown registered name",
                show_config=False,
            )

    @classmethod
    def _collect_unknown(cls, node: Mapping[str, Any], path: List[str], errors: List[Dict[str, Any]]) -> None:
        for key, value in node.items():
            if isinstance(key, str) and key.startswith("@") and isinstance(value, str):
                cls._check_one(path, key[1:], value, errors)
            elif isinstance(value, Mapping):
                cls._collect_unknown(value, path + [str(key)], errors)

    @classmethod
    def _check_one(cls, path: List[str], registry_name: str, func_name: str, errors: List[Dict[str, Any]]) -> None:
        # Interpolated values (${...}) are checked by confection after interpolation.
        if "${" in func_name:
            return
        loc = path + ["@" + registry_name]
        if not hasattr(cls, registry_name) or not isinstance(getattr(cls, registry_name), catalogue.Registry):
            known = sorted(
                name for name, value in vars(registry).items() if isinstance(value, catalogue.Registry)
            )
            errors.append(
                {"loc": loc, "msg": f"unknown registry '{registry_name}' (known: {', '.join(known)})"}
            )
        elif not cls.has(registry_name, func_name):
            available = sorted(getattr(cls, registry_name).get_all())
            shown = ", ".join(available[:40]) + (" ..." if len(available) > 40 else "")
            errors.append(
                {
                    "loc": loc,
                    "msg": f"unknown function '{func_name}' in registry '{registry_name}'. Available: {shown}",
                }
            )

    @classmethod
    def create(cls, registry_name: str, entry_points: bool = False) -> None:
        """Add a new registry called `registry_name` (an attribute of `registry`)."""
        if not isinstance(registry_name, str) or not registry_name.isidentifier():
            raise ValueError(
                f"Cannot create registry {registry_name!r}: the name must be a Python "
                "identifier, because it becomes an attribute of `registry`."
            )
        if hasattr(cls, registry_name):
            raise ValueError(
                f"Cannot create registry {registry_name!r}: it already exists. "
                f"Use registry.{registry_name} to add functions to it."
            )
        setattr(cls, registry_name, catalogue.create(_NAMESPACE, registry_name, entry_points=entry_points))


__all__ = ["Config", "registry", "ConfigValidationError", "RegistryNameError", "Promise", "VARIABLE_RE"]


def _register_ops() -> None:
    # The backends stay free of the config machinery (confection pulls in pydantic), so
    # their classes are registered here, under Thinc's unversioned names.
    from .backends import CupyOps, MPSOps, NumpyOps

    for cls in (NumpyOps, CupyOps, MPSOps):
        registry.ops.register(cls.__name__, func=cls)


_register_ops()
