"""Configuration and function registries (built on confection and catalogue)."""
from __future__ import annotations

import catalogue
import confection
from confection import VARIABLE_RE, Config, ConfigValidationError, Promise

from .types import Decorator

# Registered functions live in catalogue's "plait" namespace, so that plait and a real
# thinc installed side by side never overwrite each other's entries.
_NAMESPACE = "plait"


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


__all__ = ["Config", "registry", "ConfigValidationError", "Promise", "VARIABLE_RE"]
