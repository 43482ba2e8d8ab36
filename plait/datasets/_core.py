"""The dataset containers, path resolution and the JSON-lines reader the loaders share."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

DATA_DIR = Path(__file__).resolve().parent / "data"
SPLIT_NAMES = ("train", "dev", "test")


@dataclass(repr=False)
class Split:
    """One split of a dataset: inputs `X` and gold labels `Y`, aligned by example.

    Classification: `Y` is an int64 array (n,) of label ids. Tagging: `Y` is a list of
    int32 arrays, one per sentence, with one tag id per token of `X[i]`.
    """

    X: Any
    Y: Any

    def __len__(self) -> int:
        return len(self.Y)

    def __repr__(self) -> str:
        return f"Split(n={len(self)}, X={_describe(self.X)}, Y={_describe(self.Y)})"


@dataclass(repr=False)
class Dataset:
    """A dataset with fixed train / dev / test splits and the names of its labels."""

    name: str
    task: str
    labels: List[str]
    train: Split
    dev: Split
    test: Split
    source: str
    unit: str

    def split(self, name: str) -> Split:
        """The split called `name` ("train", "dev" or "test")."""
        if name not in SPLIT_NAMES:
            raise KeyError(f"Dataset '{self.name}' has no split {name!r}. Use one of: {', '.join(SPLIT_NAMES)}.")
        return getattr(self, name)

    def n_words(self, split: Union[Split, str]) -> int:
        """Tokens in a split (its number of examples when examples are not token lists)."""
        if isinstance(split, str):
            split = self.split(split)
        if not isinstance(split, Split):
            raise TypeError(
                f"Dataset.n_words of '{self.name}' expects a Split or a split name, got {type(split).__name__}."
            )
        if isinstance(split.X, list):
            return sum(len(tokens) for tokens in split.X)
        return len(split)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{name}={len(getattr(self, name))}" for name in SPLIT_NAMES)
        return (
            f"Dataset(name={self.name!r}, task={self.task!r}, labels={len(self.labels)}, "
            f"{sizes}, unit={self.unit!r}, source={self.source!r})"
        )


def _describe(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"{type(value).__name__}{tuple(shape)} {value.dtype}"
    return f"{type(value).__name__}[{len(value)}]"


def check_limit(limit: Any, dataset: str) -> int:
    """Validate the per-split cap `limit` (0 means no cap)."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"Dataset '{dataset}': limit must be an int (0 = all examples), got {type(limit).__name__}.")
    if limit < 0:
        raise ValueError(f"Dataset '{dataset}': limit must be >= 0 (0 = all examples), got {limit}.")
    return limit


def cap(items: Any, limit: int) -> Any:
    """The first `limit` items (all of them when limit is 0)."""
    return items[:limit] if limit else items


def resolve_path(path: Any, filename: str, dataset: str) -> Optional[Path]:
    """Turn `path` into the data file to read; None (or "") selects the bundled subset.

    `path` may name the file itself or a directory that holds `filename`.
    """
    if path is None or path == "":
        return None
    if not isinstance(path, (str, Path)):
        raise TypeError(
            f"Dataset '{dataset}': path must be a str or pathlib.Path naming {filename} or its directory, "
            f"got {type(path).__name__}."
        )
    given = Path(path).expanduser()
    hint = f"Pass path=... naming {filename} (or a directory holding it), or leave path unset to use the bundled subset."
    if given.is_dir():
        candidate = given / filename
        if not candidate.is_file():
            raise FileNotFoundError(f"Dataset '{dataset}': directory {given} has no {filename}. {hint}")
        return candidate
    if not given.is_file():
        raise FileNotFoundError(f"Dataset '{dataset}': no file at {given}. {hint}")
    return given


def bundled_source(filename: str) -> str:
    return f"bundled subset (plait/datasets/data/{filename})"


def read_jsonl(path: Path, keys: Sequence[str]) -> Iterator[Tuple[int, Dict[str, Any]]]:
    """Yield (line number, row) for each non-blank line of a JSON-lines file (gzip if it ends in .gz).

    Every row must be a JSON object holding `keys`; its "split" (when asked for) must be a split name.
    """
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf8") as file:
            for lineno, line in enumerate(file, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(
                        f"{path}, line {lineno}: not valid JSON ({err.msg}, column {err.colno}). "
                        "Each line must be one JSON object; restore the file from its source."
                    ) from None
                if not isinstance(row, dict):
                    raise ValueError(f"{path}, line {lineno}: expected a JSON object, got {type(row).__name__}.")
                missing = [key for key in keys if key not in row]
                if missing:
                    raise ValueError(
                        f"{path}, line {lineno}: missing key(s) {', '.join(map(repr, missing))}; "
                        f"each row needs {', '.join(map(repr, keys))}."
                    )
                if "split" in keys and row["split"] not in SPLIT_NAMES:
                    raise ValueError(
                        f"{path}, line {lineno}: unknown split {row['split']!r} (key 'split'); "
                        f"expected one of {', '.join(SPLIT_NAMES)}."
                    )
                yield lineno, row
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as err:
        raise ValueError(f"{path}: cannot be read as UTF-8 JSON lines ({err}).") from None


def expect_str_list(value: Any, path: Path, lineno: int, key: str) -> List[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{path}, line {lineno}: key {key!r} must be a list of strings, got {value!r:.80}.")
    return value


def load_dataset(name_or_config: Union[str, Mapping[str, Any]], **kwargs: Any) -> Dataset:
    """Load a registered dataset by name ("mnist.v1") or from a config block (`{"@datasets": ...}`).

    Keyword arguments go to the registered function (for a config they override its values).
    A name without a version ("mnist") picks the highest registered version.
    """
    from ..config import Config, registry

    if isinstance(name_or_config, str):
        name = _full_name(name_or_config, registry)
        return _checked(registry.datasets.get(name)(**kwargs), name)
    if not isinstance(name_or_config, Mapping):
        raise TypeError(
            "load_dataset expects a registered name such as 'mnist.v1' or a config mapping with "
            f"'@datasets', got {type(name_or_config).__name__}."
        )
    block: Mapping[str, Any] = name_or_config
    if "@datasets" not in block:
        # A whole config with one section, e.g. Config().from_str("[data]\n@datasets = ...").
        sections = [value for value in block.values() if isinstance(value, Mapping) and "@datasets" in value]
        if len(sections) != 1:
            raise ValueError(
                "load_dataset: the config has no block with '@datasets' (or more than one); "
                f"top-level keys: {sorted(map(str, block))}. Pass e.g. {{'@datasets': 'mnist.v1', 'limit': 100}}."
            )
        block = sections[0]
    merged = dict(block)
    # Config values are validated against the signature, which says str for paths.
    merged.update({key: str(value) if isinstance(value, Path) else value for key, value in kwargs.items()})
    merged["@datasets"] = _full_name(merged["@datasets"], registry)
    resolved = registry.resolve(Config({"data": merged}))["data"]
    return _checked(resolved, merged["@datasets"])


def tokenizer_for(name: str, lowercase: Optional[bool] = None) -> Callable[[str], List[str]]:
    """The function that splits raw text into tokens as the dataset `name` does ("rotten_tomatoes.v1").

    Rotten Tomatoes: `tokenize` (lowercase unless lowercase=False). Turkish UPOS: split at
    whitespace, since the treebank's tokens are given, not derived; lowercase only if asked.
    """
    from ..config import registry
    from ._text import tokenize

    full = _full_name(name, registry)
    stem = full.rpartition(".v")[0]
    if stem == "rotten_tomatoes":
        lower = lowercase is not False
        return lambda text: tokenize(text, lowercase=lower)
    if stem == "turkish_upos":
        return (lambda text: text.lower().split()) if lowercase else (lambda text: text.split())
    raise ValueError(
        f"Dataset {full!r} has no text tokenizer: its examples are not text. "
        "tokenizer_for applies to rotten_tomatoes.v1 and turkish_upos.v1."
    )


def _full_name(name: str, registry: Any) -> str:
    if name in registry.datasets:
        return name
    versions = []
    for known in registry.datasets.get_all():
        stem, _, version = known.rpartition(".v")
        if stem == name and version.isdigit():
            versions.append((int(version), known))
    if versions:
        return max(versions)[1]
    available = ", ".join(sorted(registry.datasets.get_all()))
    raise KeyError(f"Unknown dataset {name!r}. Registered datasets: {available}.")


def _checked(value: Any, name: str) -> Dataset:
    if not isinstance(value, Dataset):
        raise TypeError(f"Registered dataset function '{name}' returned {type(value).__name__}, not a Dataset.")
    return value
