"""Turkish Web Treebank part-of-speech tagging: gold tokens and their UPOS tags."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy

from ..config import registry
from ._core import (
    DATA_DIR,
    SPLIT_NAMES,
    Dataset,
    Split,
    bundled_source,
    cap,
    check_limit,
    expect_str_list,
    read_jsonl,
    resolve_path,
)

NAME = "turkish_upos.v1"
FILENAME = "turkish_web_treebank.jsonl"
BUNDLED = "turkish_upos.jsonl.gz"
# NOTE: fixed (the sorted tag set of the full treebank) rather than collected while reading,
# so tag ids agree between the bundled copy, the full file and any `limit`.
LABELS = ["ADJ", "ADP", "ADV", "AFFIX", "CONJ", "DET", "NOUN", "NUM", "ONOM", "PRON", "PRT", "PUNCT", "VERB", "X"]


@registry.datasets(NAME)
def turkish_upos(path: Optional[str] = None, limit: int = 0) -> Dataset:
    """Turkish Web Treebank UPOS: X token lists, Y one int32 array of tag ids per sentence.

    Splits come from the file's "split" column (by document); path=None loads the bundled
    copy (all 4,851 sentences: words, upos and split only). `limit` keeps the first `limit`
    sentences of each split.
    """
    limit = check_limit(limit, NAME)
    file = resolve_path(path, FILENAME, NAME)
    source = bundled_source(BUNDLED) if file is None else str(file)
    file = DATA_DIR / BUNDLED if file is None else file
    tag_ids = {tag: i for i, tag in enumerate(LABELS)}
    words: Dict[str, List[List[str]]] = {name: [] for name in SPLIT_NAMES}
    tags: Dict[str, List[numpy.ndarray]] = {name: [] for name in SPLIT_NAMES}
    for lineno, row in read_jsonl(file, ("words", "upos", "split")):
        tokens = expect_str_list(row["words"], file, lineno, "words")
        upos = expect_str_list(row["upos"], file, lineno, "upos")
        if len(tokens) != len(upos):
            raise ValueError(
                f"{file}, line {lineno}: {len(tokens)} words but {len(upos)} upos tags; they must align one to one."
            )
        unknown = sorted(set(upos) - tag_ids.keys())
        if unknown:
            raise ValueError(
                f"{file}, line {lineno}: unknown UPOS tag(s) {unknown} (key 'upos'); expected one of {LABELS}."
            )
        words[row["split"]].append(tokens)
        tags[row["split"]].append(numpy.asarray([tag_ids[tag] for tag in upos], dtype=numpy.int32))
    splits = {name: Split(cap(words[name], limit), cap(tags[name], limit)) for name in SPLIT_NAMES}
    return Dataset(
        name="turkish_upos", task="tag", labels=list(LABELS), source=source, unit="sentences", **splits
    )
