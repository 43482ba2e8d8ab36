"""Scoring a model on a split: accuracy (per token for tagging) and per-label precision/recall/F1."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy

from ._common import CLIError, echo, good, info, table, write_output_file


def take(X: Any, idx: Any) -> Any:
    """Rows `idx` of a split's X or Y: array indexing for arrays, a list otherwise."""
    if isinstance(X, numpy.ndarray) or hasattr(X, "__cuda_array_interface__"):
        return X[idx]
    return [X[int(i)] for i in idx]


def predict_ids(model: Any, X: Any, task: str, batch_size: int) -> Any:
    """Predicted label ids: (n,) int64 for "classify", a list of (len,) arrays for "tag"."""
    from ..util import to_numpy

    n = len(X)
    on_gpu = model.ops.xp is not numpy
    if task == "tag":
        out: List[numpy.ndarray] = []
        for start in range(0, n, batch_size):
            for guess in model.predict(X[start : start + batch_size]):
                out.append(to_numpy(guess).argmax(axis=-1))
        return out
    parts = []
    for start in range(0, n, batch_size):
        batch = X[start : start + batch_size]
        if on_gpu and isinstance(batch, numpy.ndarray):
            batch = model.ops.asarray(batch)
        parts.append(to_numpy(model.predict(batch)).argmax(axis=-1))
    return numpy.concatenate(parts) if parts else numpy.zeros((0,), dtype="int64")


def flat(Y: Any, task: str) -> numpy.ndarray:
    if task == "tag":
        arrays = [numpy.asarray(y).reshape(-1) for y in Y]
        return numpy.concatenate(arrays) if arrays else numpy.zeros((0,), dtype="int64")
    return numpy.asarray(Y).reshape(-1)


def accuracy(guesses: Any, truths: Any, task: str) -> float:
    g, t = flat(guesses, task), flat(truths, task)
    return float((g == t).mean()) if t.size else 0.0


def per_label(guesses: Any, truths: Any, task: str, labels: Sequence[str]) -> List[Dict[str, Any]]:
    """Precision, recall, F1 and support of each label."""
    g, t = flat(guesses, task).astype("int64"), flat(truths, task).astype("int64")
    rows = []
    for i, label in enumerate(labels):
        tp = int(((g == i) & (t == i)).sum())
        predicted = int((g == i).sum())
        support = int((t == i).sum())
        p = tp / predicted if predicted else 0.0
        r = tp / support if support else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        rows.append({"label": label, "p": p, "r": r, "f": f, "support": support})
    return rows


def eval_batch_size(dataset_unit: str) -> int:
    return 1024 if dataset_unit == "images" else 256


def evaluate_command(
    model_dir: Path,
    data_path: Optional[str],
    split: str,
    limit: int,
    output: Optional[Path],
    gpu: int,
) -> int:
    """`plait evaluate`: score a saved model on a split of its dataset (or of the data at --data)."""
    import json

    from ._common import open_model, use_device
    from ._config import _check_data_path, _load_dataset

    if data_path is not None and not Path(data_path).expanduser().exists():
        raise CLIError(f"--data {data_path!r}: no such file or directory")
    use_device(gpu)
    loaded = open_model(model_dir)
    path = loaded.path
    config = loaded.config
    data = dict(config["data"])
    if data_path is not None:
        data["path"] = data_path
    if limit:
        data["limit"] = limit
    config["data"] = data
    _check_data_path(data, str(path / "config.cfg"))
    dataset = _load_dataset(config, str(path / "config.cfg"))
    meta = loaded.meta
    if list(dataset.labels) != list(meta["labels"]):
        raise CLIError(
            f"The data's labels {list(dataset.labels)[:12]} differ from the model's {meta['labels'][:12]}: "
            "evaluate on data of the dataset the model was trained on."
        )
    part = getattr(dataset, split)
    if len(part) == 0:
        raise CLIError(f"The {split} split of {meta.get('dataset')!r} is empty: nothing to evaluate.")
    guesses = predict_ids(loaded.model, part.X, meta["task"], eval_batch_size(meta.get("unit", "")))
    acc = accuracy(guesses, part.Y, meta["task"])
    rows = per_label(guesses, part.Y, meta["task"], meta["labels"])
    what = "token accuracy" if meta["task"] == "tag" else "accuracy"
    n_items = sum(len(y) for y in part.Y) if meta["task"] == "tag" else len(part)
    info(f"Model: {path}   data: {getattr(dataset, 'source', '?')} [{split}], {len(part)} {meta.get('unit', 'examples')}")
    echo(
        table(
            [[r["label"], f"{r['p']:.4f}", f"{r['r']:.4f}", f"{r['f']:.4f}", r["support"]] for r in rows],
            ["label", "precision", "recall", "F1", "support"],
        )
    )
    macro_f = sum(r["f"] for r in rows) / len(rows) if rows else 0.0
    echo(f"\nmacro F1: {macro_f:.4f}")
    good(f"{split} {what}: {acc:.4f} ({acc * 100:.2f}%) on {n_items} {'tokens' if meta['task'] == 'tag' else meta.get('unit', 'examples')}")
    if output is not None:
        scores = {"split": split, "accuracy": acc, "macro_f": macro_f, "n": n_items, "per_label": rows,
                  "model": str(path), "data": getattr(dataset, "source", None)}
        write_output_file(output, (json.dumps(scores, indent=2) + "\n").encode("utf8"), "scores")
        info(f"Scores written to {output}")
    return 0
