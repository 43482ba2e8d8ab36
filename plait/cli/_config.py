"""Reading, overriding and checking a training config before any work starts.

A training config has four sections, each checked here so that a mistake fails in
seconds with its section and key named, before data is loaded or a directory created:

    [model]       a layer: @layers = "chain.v1" ...
    [optimizer]   @optimizers = "Adam.v1" ...
    [training]    max_epochs, max_steps, batch_size (an int or @schedules), eval_frequency,
                  patience, seed, dropout
    [data]        @datasets = "mnist.v1" and its arguments (path, limit, ...)

[paths] and [system] may hold values for `${...}` interpolation; they are not checked.
"""
from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ._common import ConfigError

# Section -> the registry key its top block must name.
REQUIRED_SECTIONS: Dict[str, str] = {
    "model": "@layers",
    "optimizer": "@optimizers",
    "training": "",
    "data": "@datasets",
}
VARIABLE_SECTIONS = ("paths", "system")

# [training] key -> (default, description used in errors and --help).
TRAINING_DEFAULTS: Dict[str, Any] = {
    "max_epochs": 0,
    "max_steps": 0,
    "batch_size": 128,
    "eval_frequency": 200,
    "patience": 0,
    "seed": 0,
    "dropout": None,
}
TRAINING_HELP: Dict[str, str] = {
    "max_epochs": "passes over the training split (int >= 0, 0 = no limit)",
    "max_steps": "optimizer steps (int >= 0, 0 = no limit); training stops at whichever limit comes first",
    "batch_size": "examples per step: an int > 0, or a schedule block ([training.batch_size] @schedules = ...)",
    "eval_frequency": "evaluate on the dev split (and save model-last) every this many steps (int > 0)",
    "patience": "stop after this many evaluations without a better dev score (int >= 0, 0 = never)",
    "seed": "seed of the weights' initialisation, dropout and the order of the examples (int)",
    "dropout": "dropout rate set on every layer that has one (0 <= float < 1), or null to keep the model's",
}


@dataclass
class TrainingSettings:
    """The [training] section, checked; `batch_size` is an int or a resolved schedule."""

    max_epochs: int
    max_steps: int
    batch_size: Any
    eval_frequency: int
    patience: int
    seed: int
    dropout: Optional[float]


@dataclass
class Resolved:
    """A checked config and what it describes."""

    config: Any  # the filled Config (defaults included) that is saved with the model
    model: Any
    optimizer: Any
    training: TrainingSettings
    dataset: Any


# ---------------------------------------------------------------------------------------------
# Overrides


def parse_overrides(items: Optional[Sequence[str]]) -> Dict[str, Any]:
    """`["training.batch_size=64", ...]` -> {"training.batch_size": 64}; values read as JSON, else str."""
    overrides: Dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or "." not in key or key.startswith(".") or key.endswith("."):
            raise ConfigError(
                f"Invalid override --set {item!r}: expected section.key=value, "
                "e.g. --set training.batch_size=64 or --set data.path=../shared/data/mnist.npz"
            )
        overrides[key] = _parse_value(text.strip())
    return overrides


def _parse_value(text: str) -> Any:
    # As in a config file: JSON values (numbers, true/false, null, "strings", lists); anything
    # else is taken as a plain string, so paths need no quotes.
    try:
        return json.loads(text)
    except ValueError:
        return text


# ---------------------------------------------------------------------------------------------
# Reading and checking


def load_config(path: Path, overrides: Mapping[str, Any]) -> Any:
    """Read a config file, apply the overrides and check its sections; returns a Config."""
    from ..config import Config, ConfigValidationError

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Config file not found: {str(path)!r}" + (" (it is a directory)" if path.is_dir() else ""))
    try:
        text = path.read_text(encoding="utf8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"Cannot read config file {str(path)!r}: {err}") from err
    _check_override_sections(text, path, overrides)
    try:
        config = Config().from_str(text, overrides=dict(overrides))
    except ConfigValidationError as err:
        raise ConfigError(f"Invalid config {str(path)!r}", _error_lines(err, None, overrides)) from err
    except Exception as err:  # configparser's syntax errors and interpolation errors
        raise ConfigError(f"Cannot parse config {str(path)!r}: {_one_line(err)}") from err
    check_sections(config, str(path))
    return config


def _check_override_sections(text: str, path: Path, overrides: Mapping[str, Any]) -> None:
    """An override must name a section the config has (checked first: the clearer message)."""
    if not overrides:
        return
    from ..config import Config

    try:
        sections = set(Config().from_str(text, interpolate=False).keys())
    except Exception:
        return  # the syntax error is reported by load_config
    for key in overrides:
        section = key.split(".", 1)[0]
        if section not in sections:
            raise ConfigError(
                f"Invalid override --set {key}=...: config {str(path)!r} has no section [{section}]",
                [f"sections: {', '.join('[' + s + ']' for s in sorted(sections))}"],
            )


def check_sections(config: Mapping[str, Any], where: str) -> None:
    """Unknown or missing sections, a section without its @registry key, and the [training] keys."""
    problems: List[str] = []
    allowed = set(REQUIRED_SECTIONS) | set(VARIABLE_SECTIONS)
    for name in config:
        if name not in allowed:
            problems.append(
                f"[{name}]: unknown section. Allowed: "
                + ", ".join(f"[{s}]" for s in list(REQUIRED_SECTIONS) + list(VARIABLE_SECTIONS))
            )
    for name, key in REQUIRED_SECTIONS.items():
        if name not in config:
            problems.append(f"[{name}]: missing section")
            continue
        if not isinstance(config[name], Mapping):
            problems.append(f"[{name}]: expected a section, got the value {config[name]!r}")
            continue
        if key and key not in config[name]:
            example = {"@layers": '"chain.v1"', "@optimizers": '"Adam.v1"', "@datasets": '"mnist.v1"'}[key]
            problems.append(f"[{name}] {key}: missing; name a registered function, e.g. {key} = {example}")
    if "training" in config and isinstance(config["training"], Mapping):
        problems.extend(_check_training_keys(config["training"]))
    if problems:
        raise ConfigError(f"Invalid config {where!r}", problems)


def _check_training_keys(section: Mapping[str, Any]) -> List[str]:
    problems = []
    for key, value in section.items():
        if key not in TRAINING_DEFAULTS:
            known = ", ".join(TRAINING_DEFAULTS)
            problems.append(f"[training] {key}: unknown setting. Known: {known}")
            continue
        if key == "batch_size":
            if isinstance(value, Mapping):
                if "@schedules" not in value:
                    problems.append(
                        "[training.batch_size]: a block here must name a schedule, e.g. "
                        '@schedules = "compounding.v1"'
                    )
                continue
            problem = _check_int(value, low=1)
        elif key == "dropout":
            problem = _check_dropout(value)
        elif key == "seed":
            problem = _check_int(value, low=None)
        else:
            problem = _check_int(value, low=1 if key == "eval_frequency" else 0)
        if problem:
            problems.append(f"[training] {key}: {problem} ({TRAINING_HELP[key]})")
    max_epochs = section.get("max_epochs", 0)
    max_steps = section.get("max_steps", 0)
    if _is_int(max_epochs) and _is_int(max_steps) and max_epochs == 0 and max_steps == 0:
        problems.append("[training] max_epochs, max_steps: set at least one of them to a positive int")
    return problems


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_int(value: Any, low: Optional[int]) -> Optional[str]:
    if not _is_int(value):
        return f"expected an int, got {type(value).__name__} {value!r}"
    if low is not None and value < low:
        return f"expected an int >= {low}, got {value}"
    return None


def _check_dropout(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"expected a float or null, got {type(value).__name__} {value!r}"
    if not (math.isfinite(value) and 0.0 <= value < 1.0):
        return f"expected 0 <= dropout < 1, got {value}"
    return None


# ---------------------------------------------------------------------------------------------
# Resolving


def resolve(config: Any, where: str, *, load_data: bool = True) -> Resolved:
    """Fill defaults and build the optimizer, model, schedules and dataset; raises ConfigError."""
    from ..config import Config, ConfigValidationError, registry

    _import_datasets()
    training = dict(TRAINING_DEFAULTS)
    training.update(config["training"])
    config = Config(config)
    config["training"] = training
    try:
        filled = registry.fill(config, validate=True)
    except ConfigValidationError as err:
        raise ConfigError(f"Invalid config {where!r}", _error_lines(err, config)) from err
    built: Dict[str, Any] = {}
    # One section at a time, the data last: loading it is the slow part, and a mistake
    # elsewhere should not wait for it.
    for name in ("training", "optimizer", "model"):
        built[name] = _resolve_section(filled, name, where)
    settings = _training_settings(built["training"], where)
    dataset = None
    if load_data:
        _check_data_path(filled["data"], where)
        dataset = _load_dataset(filled, where)
    return Resolved(filled, built["model"], built["optimizer"], settings, dataset)


def _resolve_section(config: Any, name: str, where: str) -> Any:
    from ..config import ConfigValidationError, registry

    try:
        return registry.resolve({name: config[name]}, validate=True)[name]
    except ConfigValidationError as err:
        raise ConfigError(f"Invalid config {where!r}", _error_lines(err, config)) from err
    except Exception as err:
        # The function itself refused its arguments (e.g. Adam's learn_rate < 0).
        block = _describe_block(config[name])
        raise ConfigError(
            f"Invalid config {where!r}", [f"[{name}]{block}: {type(err).__name__}: {_one_line(err)}"]
        ) from err


def _training_settings(section: Mapping[str, Any], where: str) -> TrainingSettings:
    batch_size = section["batch_size"]
    if not _is_int(batch_size) and not (callable(batch_size) or hasattr(batch_size, "__next__")):
        raise ConfigError(
            f"Invalid config {where!r}",
            [f"[training] batch_size: expected an int or a schedule, got {type(batch_size).__name__}"],
        )
    return TrainingSettings(
        max_epochs=int(section["max_epochs"]),
        max_steps=int(section["max_steps"]),
        batch_size=batch_size,
        eval_frequency=int(section["eval_frequency"]),
        patience=int(section["patience"]),
        seed=int(section["seed"]),
        dropout=None if section["dropout"] is None else float(section["dropout"]),
    )


def _check_data_path(section: Mapping[str, Any], where: str) -> None:
    path = section.get("path")
    if path is None or path == "":
        return
    if not isinstance(path, (str, Path)):
        raise ConfigError(
            f"Invalid config {where!r}", [f"[data] path: expected a file or directory path, got {type(path).__name__} {path!r}"]
        )
    if not Path(path).expanduser().exists():
        raise ConfigError(
            f"Invalid config {where!r}",
            [
                f"[data] path: no such file or directory: {str(path)!r} (relative paths start at "
                f"{str(Path.cwd())!r}). Give the full data file or its directory, or remove "
                "`path` to use the bundled subset."
            ],
        )


def _load_dataset(config: Any, where: str) -> Any:
    _import_datasets()
    section = config["data"]
    name = section.get("@datasets")
    try:
        dataset = _resolve_section(config, "data", where)
    except ConfigError as err:
        cause = err.__cause__
        if isinstance(cause, FileNotFoundError):
            raise ConfigError(f"Invalid config {where!r}", [f"[data] path: {_one_line(cause)}"]) from cause
        raise
    for attr in ("task", "labels", "train", "dev", "test"):
        if not hasattr(dataset, attr):
            raise ConfigError(
                f"Invalid config {where!r}",
                [f"[data] @datasets = {name!r} returned a {type(dataset).__name__}, not a plait.datasets.Dataset "
                 f"(it has no {attr!r})"],
            )
    if dataset.task not in ("classify", "tag"):
        raise ConfigError(
            f"Invalid config {where!r}", [f"[data] @datasets = {name!r}: task {dataset.task!r} is not 'classify' or 'tag'"]
        )
    if len(dataset.train) == 0:
        raise ConfigError(f"Invalid config {where!r}", [f"[data] @datasets = {name!r}: the train split is empty"])
    return dataset


def _import_datasets() -> None:
    # Registers the dataset loaders (plait.config loads only the Thinc-face registries itself).
    try:
        import plait.datasets  # noqa: F401
    except ImportError as err:
        if getattr(err, "name", None) != "plait.datasets":
            raise


# ---------------------------------------------------------------------------------------------
# Error messages


def _one_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return " ".join(text.split())


def _describe_block(section: Any) -> str:
    if isinstance(section, Mapping):
        for key, value in section.items():
            if isinstance(key, str) and key.startswith("@"):
                return f" ({key} = {value!r})"
    return ""


def _error_lines(err: Any, config: Optional[Mapping[str, Any]], overrides: Mapping[str, Any] = {}) -> List[str]:
    """One line per confection error: "[section.path] key: message"."""
    lines = []
    title = getattr(err, "title", "") or ""
    errors = getattr(err, "errors", None) or []
    func = _function_in_title(title)
    for item in errors:
        loc = [str(part) for part in item.get("loc", [])]
        msg = str(item.get("msg", "")).replace("at root: ", "")
        section, key = _locate(config, loc, func)
        where = f"[{section}] {key}".strip() if section else ".".join(loc)
        if title.startswith("Error parsing config overrides"):
            where = f"--set {'.'.join(loc)}"
        lines.append(f"{where}: {msg}")
    if not lines:
        lines.append(_one_line(err))
    return lines


def _function_in_title(title: str) -> Optional[str]:
    # confection titles a function's argument errors "Config error for 'Relu.v1'".
    if "'" in title:
        parts = title.split("'")
        if len(parts) >= 3:
            return parts[1]
    return None


def _locate(config: Optional[Mapping[str, Any]], loc: List[str], func: Optional[str]) -> Tuple[str, str]:
    """(dotted section, key) for an error location.

    confection reports an argument error of a nested block relative to that block (for
    [model.*.relu1] nO it says ["relu1", "nO"]), so the block is found by its last name
    and the function it calls.
    """
    if not loc:
        return "", ""
    if len(loc) == 1:
        return loc[0], ""
    if config is None:
        return ".".join(loc[:-1]), loc[-1]
    if _get(config, loc[:-1]) is not None:
        return ".".join(loc[:-1]), loc[-1]
    candidates = []
    for path, node in _blocks(config, []):
        if len(path) >= len(loc) - 1 and path[len(path) - (len(loc) - 1):] == loc[:-1]:
            candidates.append((path, node))
    if func is not None:
        named = [(p, n) for p, n in candidates if func in [v for k, v in n.items() if str(k).startswith("@")]]
        candidates = named or candidates
    if len(candidates) > 1:
        with_key = [(p, n) for p, n in candidates if loc[-1] in n]
        candidates = with_key or candidates
    if len(candidates) == 1:
        return ".".join(candidates[0][0]), loc[-1]
    if candidates:
        return " or ".join("[" + ".".join(p) + "]" for p, _ in candidates).strip("[]"), loc[-1]
    return ".".join(loc[:-1]), loc[-1]


def _get(config: Mapping[str, Any], path: List[str]) -> Optional[Mapping[str, Any]]:
    node: Any = config
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, Mapping) else None


def _blocks(node: Mapping[str, Any], path: List[str]) -> List[Tuple[List[str], Mapping[str, Any]]]:
    found = []
    for key, value in node.items():
        if isinstance(value, Mapping):
            found.append((path + [str(key)], value))
            found.extend(_blocks(value, path + [str(key)]))
    return found
