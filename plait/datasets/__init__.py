"""Datasets for `plait train` and the examples, registered in `registry.datasets`.

Each loader reads the full file when given `path` (the file or its directory, see
../shared/data/README.md) and otherwise a small copy bundled in plait/datasets/data.
Nothing is read at import time.
"""
from ._core import Dataset, Split, load_dataset, tokenizer_for
from ._mnist import mnist
from ._tagging import turkish_upos
from ._text import rotten_tomatoes, tokenize

__all__ = ["Dataset", "Split", "load_dataset", "mnist", "rotten_tomatoes", "turkish_upos", "tokenize", "tokenizer_for"]
