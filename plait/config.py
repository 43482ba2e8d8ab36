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


_BUILTIN_MODULES = (
    "layers", "optimizers", "schedules", "initializers", "loss", "datasets",
    # The framework wrappers register their names too, but plait.layers loads them lazily.
    "layers.pytorchwrapper", "layers.tensorflowwrapper", "layers.torchscriptwrapper", "layers.mxnetwrapper",
)
_builtins_loaded = False


def _load_builtins() -> None:
    """Import the modules that register plait's own functions (once, on first lookup).

    Importing plait.config alone stays cheap, yet `registry.layers.get("Relu.v1")` works
    without importing plait.api first.
    """
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    import importlib

    for name in _BUILTIN_MODULES:
        importlib.import_module(f"{__package__}.{name}")


# Entry-point groups are "<prefix>_<registry>": "plait_layers", and also "thinc_layers" once
# plait serves `thinc` (plait.thinc_alias), so that packages registering functions for Thinc
# through entry points (spacy-legacy, for one) are found.
_ENTRY_POINT_PREFIXES: List[str] = [_NAMESPACE]


def _use_thinc_entry_points() -> None:
    """Also read Thinc's entry-point groups (called when plait.thinc_alias is installed)."""
    if "thinc" not in _ENTRY_POINT_PREFIXES:
        _ENTRY_POINT_PREFIXES.append("thinc")


class _Registry(catalogue.Registry):
    """A catalogue registry that loads plait's built-in entries before any lookup."""

    def _get_entry_points(self) -> List[Any]:
        kind = self.namespace[-1]
        found: List[Any] = []
        for prefix in _ENTRY_POINT_PREFIXES:
            group = f"{prefix}_{kind}"
            available = catalogue.AVAILABLE_ENTRY_POINTS
            if hasattr(available, "select"):
                found.extend(available.select(group=group))
            else:  # pragma: no cover - older importlib.metadata
                found.extend(available.get(group, []))
        return found

    def __contains__(self, name: str) -> bool:
        _load_builtins()
        return super().__contains__(name)

    def get(self, name: str) -> Any:
        _load_builtins()
        return super().get(name)

    def get_all(self) -> Dict[str, Any]:
        _load_builtins()
        return super().get_all()

    def find(self, name: str) -> Dict[str, Any]:
        _load_builtins()
        return super().find(name)


def _create(name: str, entry_points: bool = True) -> Decorator:
    if catalogue.check_exists(_NAMESPACE, name):
        raise catalogue.RegistryError(f"Registry namespace already exists: {_NAMESPACE} -> {name}")
    return _Registry((_NAMESPACE, name), entry_points=entry_points)


class RegistryNameError(ConfigValidationError, catalogue.RegistryError):
    """A config names a registry or a registered function that does not exist.

    It is a ConfigValidationError (so config errors can be caught in one place) and a
    catalogue.RegistryError (what Thinc raises for an unknown name).
    """


class registry(confection.registry):
    """Function registries for the Thinc face: one catalogue registry per kind."""

    optimizers: Decorator = _create("optimizers")
    schedules: Decorator = _create("schedules")
    layers: Decorator = _create("layers")
    losses: Decorator = _create("losses")
    initializers: Decorator = _create("initializers")
    datasets: Decorator = _create("datasets")
    ops: Decorator = _create("ops")

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
        setattr(cls, registry_name, _create(registry_name, entry_points=entry_points))


__all__ = ["Config", "registry", "ConfigValidationError", "RegistryNameError", "Promise", "VARIABLE_RE"]


def _register_ops() -> None:
    # The backends stay free of the config machinery (confection pulls in pydantic), so
    # their classes are registered here, under Thinc's unversioned names.
    from .backends import CupyOps, MPSOps, NumpyOps

    for cls in (NumpyOps, CupyOps, MPSOps):
        registry.ops.register(cls.__name__, func=cls)


_register_ops()
