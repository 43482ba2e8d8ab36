"""Configuration and function registries (built on confection and catalogue)."""
from __future__ import annotations

import os
import sys

import catalogue
import confection
from confection import VARIABLE_RE, ConfigValidationError, Promise

from typing import Any, Dict, List, Mapping, Union

from .types import Decorator

#: Largest value a `${...}` interpolation may expand to, and most references it may expand:
#: a config whose variables refer to each other repeatedly (a = "${b}${b}", b = "${c}${c}", ...)
#: would otherwise take exponential time and memory before any error.
MAX_INTERPOLATED_CHARS = 1 << 20
MAX_INTERPOLATION_STEPS = 100_000
_MAX_DEPTH = 10  # confection's (configparser's) MAX_INTERPOLATION_DEPTH


def check_interpolation(text: str) -> None:
    """Refuse a config whose `${...}` variables would expand past the limits (or in a cycle).

    Linear in the size of the config: each value's expanded length and number of references is
    computed once (memoized over the reference graph), as confection's interpolation resolves
    them, without expanding anything. Raises ConfigValidationError naming the value, its size
    and what to do.
    """
    import configparser

    if "${" not in text:
        return
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment]
    try:
        parser.read_string(text)
    except configparser.Error:
        return  # confection reports the syntax error itself
    key_re = configparser.ExtendedInterpolation._KEYCRE  # type: ignore[attr-defined]
    memo: Dict[Any, Any] = {}
    active: List[Any] = []

    def fail(section: str, option: str, problem: str) -> None:
        raise ConfigValidationError(
            desc=(
                f"Config value [{section}] {option}: {problem}. Variables (${{...}}) may expand to at most "
                f"{MAX_INTERPOLATED_CHARS} characters and {MAX_INTERPOLATION_STEPS} references, nested at most "
                f"{_MAX_DEPTH} deep, without cycles. Write the value out, or refer to a section instead of "
                "repeating a variable."
            )
        )

    def raw(section: str, option: str) -> Any:
        try:
            return parser.get(section, option, raw=True)
        except (configparser.Error, KeyError):
            return None

    def cost(section: str, option: str, value: str, depth: int) -> Any:
        key = (section, option)
        if key in memo:
            return memo[key]
        if depth > _MAX_DEPTH:
            fail(section, option, f"its variables are nested more than {_MAX_DEPTH} deep")
        if key in active:
            cycle = " -> ".join(f"[{s}] {o}" for s, o in active[active.index(key):] + [key])
            fail(section, option, f"its variables refer to themselves in a cycle ({cycle})")
        active.append(key)
        length, steps, rest = 0, 1, value
        while rest:
            p = rest.find("$")
            if p < 0:
                length += len(rest)
                break
            length += p
            rest = rest[p:]
            if rest[1:2] == "$":
                length += 1
                rest = rest[2:]
                continue
            m = key_re.match(rest)
            if m is None:
                break  # confection reports the syntax error
            rest = rest[m.end():]
            path = m.group(1).replace(":", ".").rsplit(".", 1)
            target = None
            if len(path) == 1:
                v = raw(section, path[0])
                if v is not None and v.strip() != value.strip():
                    target = (section, path[0], v)
            else:
                v = raw(path[0], path[1])
                if v is not None:
                    target = (path[0], path[1], v)
            if target is None or "$" not in target[2]:
                length += len(target[2]) if target is not None else len(m.group(0))
                continue
            sub_length, sub_steps = cost(target[0], target[1], target[2], depth + 1)
            length += sub_length
            steps += sub_steps
            if length > MAX_INTERPOLATED_CHARS or steps > MAX_INTERPOLATION_STEPS:
                fail(section, option, f"it would expand to more than {MAX_INTERPOLATED_CHARS} characters or {MAX_INTERPOLATION_STEPS} references")
        active.pop()
        if length > MAX_INTERPOLATED_CHARS or steps > MAX_INTERPOLATION_STEPS:
            fail(section, option, f"it would expand to {length} characters through {steps} references")
        memo[key] = (length, steps)
        return memo[key]

    total = 0
    for section in parser.sections():
        for option in parser.options(section):
            value = raw(section, option)
            if value is not None and "$" in value:
                total += cost(section, option, value, 1)[0]
                if total > 16 * MAX_INTERPOLATED_CHARS:
                    fail(section, option, f"with it the config's variables expand to more than {16 * MAX_INTERPOLATED_CHARS} characters")


class Config(confection.Config):
    """confection's Config, with `${...}` interpolation bounded (check_interpolation) before it runs."""

    def from_str(self, text: str, *, interpolate: bool = True, overrides: Dict[str, Any] = {}, **kwargs: Any) -> "Config":
        if interpolate:
            check_interpolation(text)
        return super().from_str(text, interpolate=interpolate, overrides=overrides, **kwargs)

    def interpolate(self) -> "Config":
        check_interpolation(self.to_str())
        return super().interpolate()

    def from_disk(self, path: Union[str, "os.PathLike[str]"], *, interpolate: bool = True, overrides: Dict[str, Any] = {}) -> "Config":
        """Load a config file: a regular file only (a FIFO or device would block or never end),
        at most plait._safeio.MAX_TEXT_BYTES."""
        from ._safeio import FileFormatError, read_text

        try:
            text = read_text(path)
        except FileFormatError as err:
            raise ConfigValidationError(desc=f"Cannot read the config file: {err}") from None
        return self.from_str(text, interpolate=interpolate, overrides=overrides)


def _check_mapping(config: Any) -> None:
    """check_interpolation for a config given as a Config or dict not yet interpolated."""
    if getattr(config, "is_interpolated", False):
        return
    try:
        text = Config(config).to_str()
    except Exception:
        return  # not serializable: confection reports what it cannot handle
    check_interpolation(text)


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
    """Also read Thinc's entry-point groups (plait.thinc_alias calls it when it is installed)."""
    if "thinc" not in _ENTRY_POINT_PREFIXES:
        _ENTRY_POINT_PREFIXES.append("thinc")


# The alias may have been installed before this module was first imported (the .pth hook
# installs it at interpreter start without importing this module, which costs ~0.2 s).
if getattr(sys.modules.get(f"{_NAMESPACE}.thinc_alias"), "is_installed", lambda: False)():
    _use_thinc_entry_points()


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
        _check_mapping(config)
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
        _check_mapping(config)
        kwargs = {"overrides": overrides, "interpolate": interpolate, "validate": validate}
        if schema is not None:
            kwargs["schema"] = schema
        filled = super().fill(config, **kwargs)
        # As plait's Config, so that interpolating the result later is bounded too.
        return Config(filled, is_interpolated=filled.is_interpolated, section_order=filled.section_order)

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
