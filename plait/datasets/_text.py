"""Rotten Tomatoes review snippets (fresh vs rotten), tokenised by one small regex."""
from __future__ import annotations

import re
from typing import Dict, List, Optional

import numpy

from ..config import registry
from ._core import DATA_DIR, SPLIT_NAMES, Dataset, Split, bundled_source, cap, check_limit, read_jsonl, resolve_path

NAME = "rotten_tomatoes.v1"
FILENAME = "rotten_tomatoes.jsonl"
BUNDLED = "rotten_tomatoes.jsonl.gz"
# Negative first, so that label id 1 means the positive class, as in most sentiment data.
LABELS = ["rotten", "fresh"]

# A word is a run of letters, digits or "_", which may continue across a single inner
# apostrophe or hyphen ("it's", "three-hour"); any other non-space character is a token alone.
_TOKEN_RE = re.compile(r"\w+(?:['\u2019-]\w+)*|[^\w\s]")


def tokenize(text: str, lowercase: bool = True) -> List[str]:
    """Split `text` into words and single punctuation characters, lowercased unless told not to.

    "It's a three-hour film... OK?" -> ["it's", "a", "three-hour", "film", ".", ".", ".", "ok", "?"]
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize expects a str, got {type(text).__name__}.")
    return _TOKEN_RE.findall(text.lower() if lowercase else text)


@registry.datasets(NAME)
def rotten_tomatoes(path: Optional[str] = None, limit: int = 0, lowercase: bool = True) -> Dataset:
    """Rotten Tomatoes snippets: X token lists, Y int64 (n,) ids into ["rotten", "fresh"].

    Splits come from the file's "split" column; path=None loads the bundled copy (all
    12,808 snippets: text, label and split only). `limit` keeps the first `limit` of each split.
    """
    limit = check_limit(limit, NAME)
    file = resolve_path(path, FILENAME, NAME)
    source = bundled_source(BUNDLED) if file is None else str(file)
    file = DATA_DIR / BUNDLED if file is None else file
    label_ids = {label: i for i, label in enumerate(LABELS)}
    texts: Dict[str, List[str]] = {name: [] for name in SPLIT_NAMES}
    ids: Dict[str, List[int]] = {name: [] for name in SPLIT_NAMES}
    for lineno, row in read_jsonl(file, ("text", "label", "split")):
        if not isinstance(row["text"], str):
            raise ValueError(f"{file}, line {lineno}: key 'text' must be a string, got {type(row['text']).__name__}.")
        if row["label"] not in label_ids:
            raise ValueError(
                f"{file}, line {lineno}: unknown label {row['label']!r} (key 'label'); expected one of {LABELS}."
            )
        texts[row["split"]].append(row["text"])
        ids[row["split"]].append(label_ids[row["label"]])
    splits = {
        name: Split(
            [tokenize(text, lowercase) for text in cap(texts[name], limit)],
            numpy.asarray(cap(ids[name], limit), dtype=numpy.int64),
        )
        for name in SPLIT_NAMES
    }
    return Dataset(
        name="rotten_tomatoes", task="classify", labels=list(LABELS), source=source, unit="docs", **splits
    )
