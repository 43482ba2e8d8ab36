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
from typing import Any, Dict, List, Optional, Tuple

import numpy

from .. import _safeio
from .._safeio import OLD_SUFFIX as _OLD_SUFFIX
from .._safeio import TMP_MARK as _TMP_MARK
from .._safeio import fsync_dir as _fsync_dir  # noqa: F401
from .._safeio import remove_dir_atomically, write_dir_atomically, write_file_atomically  # noqa: F401
from ._common import CLIError
from ._config import REQUIRED_SECTIONS

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
    if os.path.lexists(path / META_FILE):
        # Even when it is not a regular file: load_model_dir then says what is wrong with it.
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


TASKS = ("classify", "tag")
MAX_LABELS = 1_000_000
#: Largest step a resume state may hold: replaying the optimizer's schedules to it must end.
MAX_RESUME_STEP = 100_000_000
#: Largest number of parameter elements one node's two largest dims may multiply to before
#: initialize() allocates (model.bin's own parameters raise it): refuses a damaged or edited
#: config or model.bin whose dims would allocate gigabytes before the weights are looked at.
MAX_NODE_ELEMENTS = 1 << 26


def damaged(model_dir: Optional[Path], rel: str, field: str, problem: str, fix: str = "") -> CLIError:
    """The one error for a damaged model directory: the directory, the file, the field, the problem
    and what to do."""
    fix = fix or (
        "The directory is damaged or was edited: restore it from a good copy, or train again "
        "(plait train CONFIG --output DIR)"
    )
    where = f"{rel}" + (f", {field}" if field else "")
    fix = fix[:1].upper() + fix[1:]
    head = f"Damaged model directory {str(model_dir)!r}" if model_dir is not None else "Damaged resume state"
    return CLIError(f"{head}: {where}: {problem.rstrip('.')}. {fix.rstrip('.')}.")


def _model_dir_of(path: Path) -> Tuple[Path, str]:
    """(the model directory, the file's path relative to it) for a file under one."""
    path = Path(path)
    if path.parent.name == STATE_DIR:
        return path.parent.parent, f"{STATE_DIR}/{path.name}"
    return path.parent, path.name


def read_file(path: Path, *, limit: Any = None) -> bytes:
    """A model directory's file through plait._safeio: a regular file inside the directory (no
    FIFO, device, or link leading out), within the size limit; errors in the one format."""
    model_dir, rel = _model_dir_of(path)
    try:
        return _safeio.read_bytes(path, limit=limit, root=model_dir)
    except FileNotFoundError:
        raise damaged(model_dir, rel, "", "the file is missing") from None
    except _safeio.FileFormatError as err:
        raise damaged(model_dir, rel, err.field, err.problem, err.fix) from None
    except OSError as err:
        raise damaged(model_dir, rel, "", f"cannot be read: {err.strerror or err}", "Fix the file's permissions") from None


def read_json(path: Path) -> Dict[str, Any]:
    """A JSON object file of a model directory (meta.json, training/state.json)."""
    model_dir, rel = _model_dir_of(path)
    data = read_file(path, limit=_safeio.MAX_TEXT_BYTES)
    try:
        value = json.loads(data.decode("utf8"))
    except UnicodeDecodeError as err:
        raise damaged(model_dir, rel, f"byte {err.start}", "it is not UTF-8 text") from None
    except RecursionError:
        raise damaged(model_dir, rel, "", "its JSON is nested too deeply") from None
    except ValueError as err:
        raise damaged(model_dir, rel, f"line {getattr(err, 'lineno', '?')}", f"it is not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise damaged(model_dir, rel, "", f"it holds a JSON {type(value).__name__}, not an object")
    return value


def read_meta(model_dir: Path) -> Dict[str, Any]:
    """meta.json, its fields that loading relies on checked (task, labels, step, epoch)."""
    meta = read_json(Path(model_dir) / META_FILE)
    for key in ("task", "labels"):
        if key not in meta:
            raise damaged(model_dir, META_FILE, f"{key!r}", "the field is missing")
    if meta["task"] not in TASKS:
        raise damaged(model_dir, META_FILE, "'task'", f"it is {meta['task']!r:.80}, not one of {list(TASKS)}")
    labels = meta["labels"]
    if not isinstance(labels, list) or not labels or len(labels) > MAX_LABELS:
        raise damaged(model_dir, META_FILE, "'labels'", f"it is {_short(labels)}, not a list of 1 to {MAX_LABELS} labels")
    for i, label in enumerate(labels):
        if not isinstance(label, str):
            raise damaged(model_dir, META_FILE, f"'labels'[{i}]", f"it is {_short(label)}, not a string")
    for key in ("step", "epoch"):
        value = meta.get(key, 0)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise damaged(model_dir, META_FILE, f"{key!r}", f"it is {_short(value)}, not a count")
    return meta


def _why(err: BaseException) -> str:
    """An exception as words: its message on one line (a KeyError's says which entry is missing)."""
    if isinstance(err, KeyError):
        return f"the entry {err} is missing"
    text = " ".join(str(err).split())[:500]
    return text or type(err).__name__


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class LoadedModel:
    """A model rebuilt from its directory, with what describes it."""

    path: Path
    model: Any
    config: Any
    meta: Dict[str, Any]


def read_config(model_dir: Path) -> Any:
    """config.cfg, not interpolated, with a [model] section."""
    from ..config import Config

    data = read_file(Path(model_dir) / CONFIG_FILE, limit=_safeio.MAX_TEXT_BYTES)
    try:
        text = data.decode("utf8")
    except UnicodeDecodeError as err:
        raise damaged(model_dir, CONFIG_FILE, f"byte {err.start}", "it is not UTF-8 text") from None
    try:
        config = Config().from_str(text, interpolate=False)
    except Exception as err:
        raise damaged(model_dir, CONFIG_FILE, "", f"it cannot be parsed ({_why(err)})") from None
    if "model" not in config or not isinstance(config["model"], dict):
        raise damaged(model_dir, CONFIG_FILE, "[model]", "the section is missing")
    key = REQUIRED_SECTIONS["model"]  # what `plait train` requires of the section (check_sections)
    if key not in config["model"]:
        raise damaged(model_dir, CONFIG_FILE, f"[model] {key}", "it is missing, so the section names no layer")
    return config


def read_weights(model_dir: Path, rel: str = MODEL_FILE) -> Tuple[bytes, Dict[str, Any]]:
    """(the bytes, the decoded message) of model.bin or training/weights.bin."""
    from ..model import _msgpack_loads

    data = read_file(Path(model_dir) / rel)
    try:
        msg = _msgpack_loads(data, "cannot decode")
    except ValueError as err:
        raise damaged(model_dir, rel, "", str(err)) from None
    if not isinstance(msg, dict) or not isinstance(msg.get("nodes"), list) or not isinstance(msg.get("params"), list):
        raise damaged(model_dir, rel, "", "it is not a plait model's weights (Model.to_bytes): no 'nodes' and 'params' lists")
    return data, msg


def check_dims(model_dir: Path, model: Any, msg: Dict[str, Any], rel: str = MODEL_FILE) -> None:
    """Before initialize() allocates: the config's dims must be the saved ones, the saved ones
    are set where the config leaves them unset, and none may allocate far more than the file holds."""
    nodes = list(model.walk())
    if len(msg["nodes"]) != len(nodes):
        raise damaged(
            model_dir, rel, "nodes",
            f"it holds {len(msg['nodes'])} layers where the model of {CONFIG_FILE} has {len(nodes)}",
            f"{CONFIG_FILE} and {rel} are from different models: restore the pair from one run, or train again",
        )
    held = 0
    for params in msg["params"]:
        if isinstance(params, dict):
            held += sum(int(getattr(v, "size", 0) or 0) for v in params.values())
    budget = max(MAX_NODE_ELEMENTS, 16 * held)
    for i, (node, info) in enumerate(zip(nodes, msg["nodes"])):
        dims = info.get("dims") if isinstance(info, dict) else None
        if not isinstance(dims, dict):
            raise damaged(model_dir, rel, f"node {i}", "its entry has no 'dims' mapping")
        sizes = []
        for dim, saved in dims.items():
            if saved is None or dim not in node._dims:
                continue
            if isinstance(saved, bool) or not isinstance(saved, int) or not 0 <= saved < (1 << 40):
                raise damaged(model_dir, rel, f"node {i} ('{node.name}') dimension {dim!r}", f"it is {_short(saved)}, not a size")
            current = node._dims[dim]
            if current is not None and current != saved:
                raise damaged(
                    model_dir, CONFIG_FILE, f"[model] layer {i} ('{node.name}') {dim}",
                    f"it is {current}, but the weights in {rel} were saved with {dim} = {saved}",
                    f"Set {dim} = {saved} in {CONFIG_FILE} (or restore the file), or train again",
                )
            sizes.append(saved)
        sizes.extend(v for k, v in node._dims.items() if isinstance(v, int) and k not in dims)
        sizes.sort()
        if len(sizes) >= 2 and sizes[-1] * sizes[-2] > budget:
            raise damaged(
                model_dir, rel, f"node {i} ('{node.name}') dims {dims}",
                f"they would allocate {sizes[-1] * sizes[-2]} parameters, far more than the {held} the file holds",
            )
        for dim, saved in dims.items():
            if saved is not None and dim in node._dims and node._dims[dim] is None:
                node._dims[dim] = saved


def load_model_dir(path: Path, *, raw_weights: bool = False) -> LoadedModel:
    """Rebuild the model of a directory: resolve its [model], initialize on the sample, load weights.

    Every file is read through plait._safeio (regular files inside the directory, within size
    limits) and checked before it is used: the saved dims are compared with the config's before
    anything is allocated, and every error names the file and the field and says what to do.
    raw_weights=True loads training/weights.bin (the state to resume from) where present.
    """
    from ..config import registry

    path = Path(path)
    meta = read_meta(path)
    config = read_config(path)
    try:
        model = registry.resolve({"model": config["model"]}, validate=True)["model"]
    except Exception as err:
        raise damaged(
            path, CONFIG_FILE, "[model]", f"the model cannot be rebuilt from it ({_why(err)})",
        ) from err
    from ..model import Model

    if not isinstance(model, Model):  # a registered function that builds something else
        raise damaged(
            path, CONFIG_FILE, "[model]", f"it builds {type(model).__name__} {_short(model)}, not a layer",
        )
    rel = RAW_WEIGHTS_FILE if raw_weights and os.path.lexists(path / RAW_WEIGHTS_FILE) else MODEL_FILE
    data, msg = read_weights(path, rel)
    check_dims(path, model, msg, rel)
    n_out = model.maybe_get_dim("nO") if "nO" in getattr(model, "_dims", {}) else None
    if n_out is not None and n_out != len(meta["labels"]):
        raise damaged(
            path, META_FILE, "'labels'",
            f"it lists {len(meta['labels'])} labels, but the model saved in {rel} outputs {n_out} scores",
        )
    sample = read_sample(path)
    try:
        initialize_model(model, sample["X"], sample["Y"], meta["task"], len(meta["labels"]))
    except CLIError:
        raise
    except Exception as err:
        raise damaged(
            path, SAMPLE_FILE, "'X'/'Y'", f"the model of {CONFIG_FILE} cannot be initialized on it "
            f"({_why(err)})",
        ) from err
    try:
        model.from_bytes(data)
    except (ValueError, TypeError, KeyError) as err:
        raise damaged(path, rel, "", f"the weights do not fit the model of {CONFIG_FILE}: {err}") from err
    return LoadedModel(path, model, config, meta)


def read_sample(path: Path) -> Dict[str, Any]:
    """sample.msgpack: {'X': inputs, 'Y': label ids}, checked for those two fields."""
    from ..model import _msgpack_loads

    path = Path(path)
    data = read_file(path / SAMPLE_FILE)
    try:
        sample = _msgpack_loads(data, "cannot decode")
    except ValueError as err:
        raise damaged(path, SAMPLE_FILE, "", str(err)) from None
    if not isinstance(sample, dict):
        raise damaged(path, SAMPLE_FILE, "", f"it holds a {type(sample).__name__}, not a mapping with 'X' and 'Y'")
    for key in ("X", "Y"):
        if key not in sample:
            raise damaged(path, SAMPLE_FILE, repr(key), "the field is missing")
    if not hasattr(sample["X"], "__len__") or not hasattr(sample["Y"], "__len__") or len(sample["X"]) != len(sample["Y"]) or not len(sample["X"]):
        raise damaged(path, SAMPLE_FILE, "'X'/'Y'", "they are not two lists of the same non-zero length")
    return sample


def initialize_model(model: Any, X: Any, Y: Any, task: str, n_labels: int) -> None:
    """Initialize on inputs X with one-hot truths made from the label ids Y (shapes only)."""
    model.initialize(X=X, Y=one_hot(model.ops, Y, task, n_labels))


def one_hot(ops: Any, Y: Any, task: str, n_labels: int) -> Any:
    """Label ids -> float32 one-hot rows: (nB,) -> (nB, nL); for "tag" a list of them."""
    eye = numpy.eye(n_labels, dtype="float32")
    for y in (Y if task == "tag" else [Y]):
        ids = numpy.asarray(y)
        if ids.size and (ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= n_labels):
            raise ValueError(f"the label ids Y must be integers in [0, {n_labels}) (the model's labels), got {_short(y)}")
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


def _count(value: Any, model_dir: Optional[Path], field: str, top: int = MAX_RESUME_STEP) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise damaged(
            model_dir, STATE_FILE, field, f"it is {_short(value)}, not a count from 0 to {top}",
            "The resume state is damaged or was edited: restore it, or start a new run instead of --resume",
        )
    return value


def check_counters(counters: Any, model_dir: Optional[Path] = None, keys: Any = None) -> Dict[str, Any]:
    """The optimizer counters of training/state.json, checked (bounded step, known parameters)."""
    if not isinstance(counters, dict):
        raise damaged(model_dir, STATE_FILE, "'optimizer'", f"it is {_short(counters)}, not an object")
    step = _count(counters.get("step", 0), model_dir, "'optimizer'.'step'")
    last_score = counters.get("last_score")
    if last_score is not None:
        if not isinstance(last_score, list) or len(last_score) != 2 or not isinstance(last_score[1], (int, float)) or isinstance(last_score[1], bool):
            raise damaged(model_dir, STATE_FILE, "'optimizer'.'last_score'", f"it is {_short(last_score)}, not [step, score]")
        _count(last_score[0], model_dir, "'optimizer'.'last_score'[0]", step)
    for kind in ("nr_update", "last_seen"):
        table = counters.get(kind, {})
        if not isinstance(table, dict):
            raise damaged(model_dir, STATE_FILE, f"'optimizer'.{kind!r}", f"it is {_short(table)}, not an object")
        for name, value in table.items():
            _count(value, model_dir, f"'optimizer'.{kind!r}.{name!r}", max(step, 1) * 1000)
            if keys is not None and name not in keys:
                raise damaged(
                    model_dir, STATE_FILE, f"'optimizer'.{kind!r}.{name!r}",
                    "the model built from the config has no such parameter (node::param)",
                    "Resume with the config the run was started with",
                )
    return counters


def restore_optimizer_state(optimizer: Any, model: Any, npz: bytes, counters: Dict[str, Any],
                            model_dir: Optional[Path] = None) -> None:
    """Put saved moments, averages, update counts and the schedule step into a fresh optimizer.

    All checked first, then set: the .npz through plait._safeio (each array's declared shape
    must be its parameter's, checked before its data are read; never a pickle), the counters
    bounded (the step at most MAX_RESUME_STEP, since schedules are replayed up to it).
    """
    keys = _param_keys(model)
    lookup = {name: key for key, name in keys.items()}
    counters = check_counters(counters, model_dir, lookup)

    def expect(entry: str, shape: Any, dtype: Any) -> None:
        kind, _, name = entry.partition("::")
        if kind not in ("mom1", "mom2", "averages"):
            raise damaged(model_dir, OPTIMIZER_FILE, repr(entry), f"{kind!r} is not an optimizer table (mom1, mom2, averages)")
        if name not in lookup:
            raise CLIError(
                f"Cannot resume: the saved optimizer state has parameter {name!r} (node::param), "
                "which the model built from the config does not have. Resume with the config "
                "the run was started with."
            )
        node_id, param = lookup[name]
        node = next(n for n in model.walk() if n.id == node_id)
        want = tuple(node.get_param(param).shape) if node.has_param(param) else None
        # Moments may be kept flat: the same number of values is what must match.
        if want is not None and tuple(shape) != want and int(numpy.prod(shape)) != int(numpy.prod(want)):
            raise damaged(model_dir, OPTIMIZER_FILE, repr(entry), f"its shape is {tuple(shape)}, the parameter's {want}",
                          "Resume with the config the run was started with, or restore the file")
        if numpy.dtype(dtype).kind != "f":
            raise damaged(model_dir, OPTIMIZER_FILE, repr(entry), f"its dtype is {dtype}, not a float type")

    tables: Dict[str, Dict[Any, Any]] = {}
    try:
        with _safeio.NpzArchive(npz, what=str(Path(model_dir or ".") / OPTIMIZER_FILE)) as archive:
            for entry in archive.files:
                array = archive.read(entry, expect)
                kind, _, name = entry.partition("::")
                if getattr(optimizer, kind, None) is None:
                    continue  # e.g. saved averages, but this optimizer has use_averages = false
                tables.setdefault(kind, {})[lookup[name]] = model.ops.asarray(array).copy()
    except _safeio.FileFormatError as err:
        raise damaged(model_dir, OPTIMIZER_FILE, err.field, err.problem, err.fix) from None
    for kind, values in tables.items():
        getattr(optimizer, kind).update(values)
    for kind in ("nr_update", "last_seen"):
        table = getattr(optimizer, kind)
        for name, value in counters.get(kind, {}).items():
            table[lookup[name]] = int(value)
    # Stepping (rather than setting a private counter) replays every schedule to the same point.
    last_score = counters.get("last_score")
    target = int(counters.get("step", 0))
    if last_score is not None:
        _advance(optimizer, min(int(last_score[0]), target))
        optimizer.last_score = float(last_score[1])
    _advance(optimizer, target)


def _advance(optimizer: Any, step: int) -> None:
    if step > MAX_RESUME_STEP:
        raise CLIError(f"Cannot resume: the saved step {step} is over the limit of {MAX_RESUME_STEP}.")
    if not getattr(optimizer, "schedules", None) and hasattr(optimizer, "_step"):
        # Nothing to replay: the counter alone.
        optimizer._step = max(optimizer._step, step)
        return
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


def set_rng_states(states: Dict[str, Any], data_rng: numpy.random.Generator, model_dir: Optional[Path] = None) -> None:
    """Restore the three generators; a damaged state (wrong shapes or types) changes none of them."""
    import random

    try:
        if not isinstance(states, dict):
            raise ValueError(f"it is {_short(states)}, not an object")
        name, keys, pos, has_gauss, cached = states["numpy_global"]
        keys_array = numpy.asarray(keys, dtype=numpy.uint32)
        if keys_array.shape != (624,):
            raise ValueError(f"the MT19937 key has shape {keys_array.shape}, not (624,)")
        version, internal, gauss_next = states["python"]
        if not isinstance(internal, list) or len(internal) != 625:
            raise ValueError("the Python generator state is not 625 numbers")
        # Tried on copies first: nothing changes unless all three are valid.
        numpy.random.RandomState().set_state((name, keys_array, pos, has_gauss, cached))
        random.Random().setstate((version, tuple(internal), gauss_next))
        probe = numpy.random.default_rng(0)
        probe.bit_generator.state = states["data"]
        if type(probe.bit_generator) is not type(data_rng.bit_generator):
            raise ValueError("the data generator is of another kind")
    except (KeyError, IndexError, TypeError, ValueError, OverflowError, AttributeError) as err:
        why = f"the entry {err} is missing" if isinstance(err, KeyError) else " ".join(str(err).split())[:300]
        raise damaged(
            model_dir, STATE_FILE, "'rng'", f"the random generator states cannot be restored ({why})",
            "The resume state is damaged or was edited: restore it, or start a new run instead of --resume",
        ) from None
    numpy.random.set_state((name, keys_array, pos, has_gauss, cached))
    random.setstate((version, tuple(internal), gauss_next))
    data_rng.bit_generator.state = states["data"]


# ---------------------------------------------------------------------------------------------
# Metrics


def read_metrics(output: Path) -> List[Dict[str, Any]]:
    """The records of DIR/metrics.jsonl (lines that do not parse, e.g. from an edited file, are skipped)."""
    path = Path(output) / METRICS_FILE
    if not os.path.lexists(path):
        return []
    try:
        text = _safeio.read_text(path, root=Path(output))
    except (_safeio.FileFormatError, OSError) as err:
        raise CLIError(
            f"Cannot read {str(path)!r}: {getattr(err, 'problem', None) or err}. It holds the scores of "
            "earlier evaluations: restore it, or remove it to start the record afresh."
        ) from None
    records = []
    for line in text.splitlines():
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
