"""Model directories: written atomically, read back into a model, an optimizer and a training state.

A model directory (DIR/model-best, DIR/model-last) holds:

    model.bin        the weights used to predict: Model.to_bytes() (the optimizer's averaged
                     weights when it keeps averages)
    config.cfg       the filled config, overrides included
    meta.json        dataset, task, labels, step, epoch, scores, plait version
    sample.msgpack   a few training inputs: a rebuilt model is initialized on them (to infer
                     its shapes) before the weights are loaded
    training/        model-last only, what `plait train --resume` needs:
        weights.bin    the raw weights being trained (absent when they equal model.bin)
        optimizer.npz  moments and averages per parameter
        state.json     counters, best score, update counts and random number generator states

A directory is first written whole into a temporary sibling, each file and folder fsynced,
then swapped into place with one atomic rename (renameat2 RENAME_EXCHANGE on Linux): at no
moment is there a partly written or missing model-last, whatever kills the process.
"""
from __future__ import annotations

import io
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy

from .. import _safeio
from .._safeio import OLD_SUFFIX as _OLD_SUFFIX
from .._safeio import TMP_MARK as _TMP_MARK
from .._safeio import fsync_dir as _fsync_dir  # noqa: F401
from .._safeio import remove_dir_atomically, write_dir_atomically, write_file_atomically  # noqa: F401
from ._common import CLIError

MODEL_FILE = "model.bin"
CONFIG_FILE = "config.cfg"
META_FILE = "meta.json"
SAMPLE_FILE = "sample.msgpack"
STATE_DIR = "training"
RAW_WEIGHTS_FILE = "training/weights.bin"
OPTIMIZER_FILE = "training/optimizer.npz"
STATE_FILE = "training/state.json"
METRICS_FILE = "metrics.jsonl"
BEST, LAST = "model-best", "model-last"



# ---------------------------------------------------------------------------------------------
# Atomic writes


def copy_dir(source: Path, target: Path) -> None:
    """Copy a model directory atomically."""
    files = {
        str(path.relative_to(source)): path.read_bytes() for path in Path(source).rglob("*") if path.is_file()
    }
    write_dir_atomically(target, files)


def remove_dir(path: Path) -> None:
    """Delete a model directory: first renamed away (atomic), so no half-deleted copy is ever seen."""
    remove_dir_atomically(path)


def clean_stale(output: Path) -> None:
    """Remove what a killed run left in `output`: temporary folders and files; finish a half swap."""
    if not output.is_dir():
        return
    for entry in output.iterdir():
        name = entry.name
        if name.startswith(".") and _TMP_MARK in name:
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    for name in (BEST, LAST):
        old = output / f".{name}{_OLD_SUFFIX}"
        if old.is_dir():
            if (output / name).exists():
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(old, output / name)


# ---------------------------------------------------------------------------------------------
# Finding and reading


def find_model_dir(path: Path, *, prefer: str = BEST) -> Path:
    """The model directory that `path` names: itself, or its model-best/model-last (a training output)."""
    path = Path(path)
    if (path / META_FILE).is_file():
        return path
    old = path.parent / f".{path.name}{_OLD_SUFFIX}"
    if not path.exists() and (old / META_FILE).is_file():
        # A run killed between the two renames of a swap (systems without renameat2).
        return old
    for name in (prefer, LAST if prefer == BEST else BEST):
        if (path / name / META_FILE).is_file():
            return path / name
        old = path / f".{name}{_OLD_SUFFIX}"
        if not (path / name).exists() and (old / META_FILE).is_file():
            return old
    if not path.exists():
        raise CLIError(f"Model directory not found: {str(path)!r}")
    raise CLIError(
        f"{str(path)!r} is not a plait model directory: it has no {META_FILE} (nor model-best/ or "
        "model-last/ holding one). Pass the --output folder of `plait train`, or its model-best "
        "or model-last."
    )


def read_json(path: Path) -> Dict[str, Any]:
    try:
        return json.loads(Path(path).read_text(encoding="utf8"))
    except (OSError, ValueError) as err:
        raise CLIError(f"Cannot read {str(path)!r}: {err}") from err


@dataclass
class LoadedModel:
    """A model rebuilt from its directory, with what describes it."""

    path: Path
    model: Any
    config: Any
    meta: Dict[str, Any]


def load_model_dir(path: Path, *, raw_weights: bool = False) -> LoadedModel:
    """Rebuild the model of a directory: resolve its [model], initialize on the sample, load weights.

    raw_weights=True loads training/weights.bin (the state to resume from) where present.
    """
    from ..config import Config, registry

    path = Path(path)
    meta = read_json(path / META_FILE)
    try:
        config = Config().from_disk(path / CONFIG_FILE, interpolate=False)
    except Exception as err:
        raise CLIError(f"Cannot read {str(path / CONFIG_FILE)!r}: {err}") from err
    try:
        model = registry.resolve({"model": config["model"]}, validate=True)["model"]
    except Exception as err:
        raise CLIError(
            f"Cannot rebuild the model of {str(path)!r} from its {CONFIG_FILE}: {type(err).__name__}: {err}"
        ) from err
    sample = read_sample(path)
    initialize_model(model, sample["X"], sample["Y"], meta["task"], len(meta["labels"]))
    weights = path / MODEL_FILE
    if raw_weights and (path / RAW_WEIGHTS_FILE).is_file():
        weights = path / RAW_WEIGHTS_FILE
    try:
        model.from_bytes(weights.read_bytes())
    except (OSError, ValueError) as err:
        raise CLIError(f"Cannot load the weights {str(weights)!r}: {err}") from err
    return LoadedModel(path, model, config, meta)


def read_sample(path: Path) -> Dict[str, Any]:
    import srsly

    try:
        sample = srsly.msgpack_loads((Path(path) / SAMPLE_FILE).read_bytes())
    except Exception as err:
        raise CLIError(f"Cannot read {str(Path(path) / SAMPLE_FILE)!r}: {err}") from err
    return sample


def initialize_model(model: Any, X: Any, Y: Any, task: str, n_labels: int) -> None:
    """Initialize on inputs X with one-hot truths made from the label ids Y (shapes only)."""
    model.initialize(X=X, Y=one_hot(model.ops, Y, task, n_labels))


def one_hot(ops: Any, Y: Any, task: str, n_labels: int) -> Any:
    """Label ids -> float32 one-hot rows: (nB,) -> (nB, nL); for "tag" a list of them."""
    eye = numpy.eye(n_labels, dtype="float32")
    if task == "tag":
        return [ops.asarray2f(eye[numpy.asarray(y, dtype="int64")].reshape((-1, n_labels))) for y in Y]
    return ops.asarray2f(eye[numpy.asarray(Y, dtype="int64")].reshape((-1, n_labels)))


# ---------------------------------------------------------------------------------------------
# Optimizer state


def _param_keys(model: Any) -> Dict[Tuple[int, str], str]:
    # Model ids differ between processes; a node's position in walk() and the param name do not.
    keys = {}
    for i, node in enumerate(model.walk()):
        for name in node.param_names:
            keys[(node.id, name)] = f"{i}::{name}"
    return keys


def optimizer_state(optimizer: Any, model: Any) -> Tuple[bytes, Dict[str, Any]]:
    """(npz bytes of moments and averages, JSON-able counters) keyed by walk position + param name."""
    from ..util import to_numpy

    keys = _param_keys(model)
    arrays: Dict[str, numpy.ndarray] = {}
    for kind in ("mom1", "mom2", "averages"):
        table = getattr(optimizer, kind, None) or {}
        for key, value in table.items():
            if key in keys:
                arrays[f"{kind}::{keys[key]}"] = to_numpy(value)
    buffer = io.BytesIO()
    numpy.savez(buffer, **arrays)
    counters = {
        "step": int(optimizer.step),
        "last_score": list(optimizer.last_score) if optimizer.last_score is not None else None,
        "nr_update": {keys[k]: int(v) for k, v in optimizer.nr_update.items() if k in keys},
        "last_seen": {keys[k]: int(v) for k, v in optimizer.last_seen.items() if k in keys},
    }
    return buffer.getvalue(), counters


def restore_optimizer_state(optimizer: Any, model: Any, npz: bytes, counters: Dict[str, Any]) -> None:
    """Put saved moments, averages, update counts and the schedule step into a fresh optimizer."""
    lookup = {name: key for key, name in _param_keys(model).items()}
    with numpy.load(io.BytesIO(npz)) as data:
        for entry in data.files:
            kind, _, name = entry.partition("::")
            table = getattr(optimizer, kind, None)
            if table is None:
                continue  # e.g. saved averages, but this optimizer has use_averages = false
            if name not in lookup:
                raise CLIError(
                    f"Cannot resume: the saved optimizer state has parameter {name!r} (node::param), "
                    "which the model built from the config does not have. Resume with the config "
                    "the run was started with."
                )
            table[lookup[name]] = model.ops.asarray(data[entry]).copy()
    for kind in ("nr_update", "last_seen"):
        table = getattr(optimizer, kind)
        for name, value in counters.get(kind, {}).items():
            if name in lookup:
                table[lookup[name]] = int(value)
    # Stepping (rather than setting a private counter) replays every schedule to the same point.
    last_score = counters.get("last_score")
    target = int(counters.get("step", 0))
    if last_score is not None:
        _advance(optimizer, min(int(last_score[0]), target))
        optimizer.last_score = float(last_score[1])
    _advance(optimizer, target)


def _advance(optimizer: Any, step: int) -> None:
    while optimizer.step < step:
        optimizer.step_schedules()


# ---------------------------------------------------------------------------------------------
# Random number generator states (JSON-able)


def rng_states(data_rng: numpy.random.Generator) -> Dict[str, Any]:
    import random

    name, keys, pos, has_gauss, cached = numpy.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {
        "numpy_global": [name, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)],
        "python": [version, list(internal), gauss_next],
        "data": data_rng.bit_generator.state,
    }


def set_rng_states(states: Dict[str, Any], data_rng: numpy.random.Generator) -> None:
    import random

    name, keys, pos, has_gauss, cached = states["numpy_global"]
    numpy.random.set_state((name, numpy.asarray(keys, dtype=numpy.uint32), pos, has_gauss, cached))
    version, internal, gauss_next = states["python"]
    random.setstate((version, tuple(internal), gauss_next))
    data_rng.bit_generator.state = states["data"]


# ---------------------------------------------------------------------------------------------
# Metrics


def read_metrics(output: Path) -> List[Dict[str, Any]]:
    """The records of DIR/metrics.jsonl (lines that do not parse, e.g. from an edited file, are skipped)."""
    path = Path(output) / METRICS_FILE
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def write_metrics(output: Path, records: List[Dict[str, Any]]) -> None:
    """Write all records to DIR/metrics.jsonl atomically (the file is small: one line per evaluation)."""
    data = "".join(json.dumps(r) + "\n" for r in records).encode("utf8")
    write_file_atomically(Path(output) / METRICS_FILE, data)
