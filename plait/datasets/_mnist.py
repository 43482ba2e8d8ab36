"""MNIST handwritten digits: the full `mnist.npz` or the subset bundled with plait."""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, Dict, Optional

import numpy

from ..config import registry
from ._core import DATA_DIR, Dataset, Split, bundled_source, cap, check_limit, resolve_path

NAME = "mnist.v1"
FILENAME = "mnist.npz"
BUNDLED = "mnist_subset.npz"
LABELS = [str(digit) for digit in range(10)]
# The README protocol: the first 50,000 training images train, the other 10,000 are the dev set.
N_TRAIN = 50000
FULL_KEYS = ("x_train", "y_train", "x_test", "y_test")
BUNDLED_KEYS = ("x_train", "y_train", "x_dev", "y_dev", "x_test", "y_test")


@registry.datasets(NAME)
def mnist(path: Optional[str] = None, limit: int = 0) -> Dataset:
    """MNIST digits as float32 pixels in [0, 1]: X (n, 784), Y int64 (n,) digit ids.

    path=None loads the bundled stratified subset; a path (the file or its directory) loads
    the full mnist.npz, split train = x_train[:50000], dev = x_train[50000:], test = x_test.
    `limit` keeps the first `limit` examples of each split (0 keeps all).
    """
    limit = check_limit(limit, NAME)
    file = resolve_path(path, FILENAME, NAME)
    if file is None:
        arrays = _read_npz(DATA_DIR / BUNDLED, BUNDLED_KEYS)
        splits = {
            name: (cap(arrays[f"x_{name}"], limit), cap(arrays[f"y_{name}"], limit))
            for name in ("train", "dev", "test")
        }
        source = bundled_source(BUNDLED)
    else:
        arrays = _read_npz(file, FULL_KEYS)
        x_train, y_train = arrays["x_train"], arrays["y_train"]
        if len(x_train) <= N_TRAIN:
            raise ValueError(
                f"{file}: key 'x_train' has {len(x_train)} images, but the MNIST protocol needs more than "
                f"{N_TRAIN} (train = x_train[:{N_TRAIN}], dev = the rest). Pass the full 60,000-image file."
            )
        splits = {
            "train": (cap(x_train[:N_TRAIN], limit), cap(y_train[:N_TRAIN], limit)),
            "dev": (cap(x_train[N_TRAIN:], limit), cap(y_train[N_TRAIN:], limit)),
            "test": (cap(arrays["x_test"], limit), cap(arrays["y_test"], limit)),
        }
        source = str(file)
    made = {name: Split(_to_pixels(x), y.astype(numpy.int64)) for name, (x, y) in splits.items()}
    return Dataset(
        name="mnist", task="classify", labels=list(LABELS), source=source, unit="images", **made
    )


def _read_npz(path: Path, keys: tuple) -> Dict[str, Any]:
    """Read and check the image/label pairs `keys` of an .npz file (images uint8, labels 0-9)."""
    try:
        with numpy.load(path, allow_pickle=False) as archive:
            if not isinstance(archive, numpy.lib.npyio.NpzFile):
                raise ValueError(f"{path}: expected an .npz archive with keys {', '.join(keys)}, got a single array.")
            missing = [key for key in keys if key not in archive.files]
            if missing:
                raise ValueError(
                    f"{path}: missing key(s) {', '.join(missing)} (found: {', '.join(archive.files) or 'none'}). "
                    f"An MNIST file needs {', '.join(keys)}."
                )
            arrays = {key: archive[key] for key in keys}
    except (zipfile.BadZipFile, EOFError, OSError) as err:
        raise ValueError(f"{path}: not a readable .npz archive ({err}).") from None
    except ValueError as err:
        if str(err).startswith(str(path)):
            raise
        raise ValueError(f"{path}: not a readable .npz archive ({err}).") from None
    for x_key, y_key in zip(keys[::2], keys[1::2]):
        x, y = arrays[x_key], arrays[y_key]
        if x.dtype != numpy.uint8 or x.ndim not in (2, 3) or x.shape[1:] not in ((28, 28), (784,)):
            raise ValueError(
                f"{path}: key {x_key!r} must be uint8 images of shape (n, 28, 28) or (n, 784), "
                f"got {x.dtype} {x.shape}."
            )
        if y.ndim != 1 or y.dtype.kind not in "iu" or len(y) != len(x):
            raise ValueError(
                f"{path}: key {y_key!r} must be integer labels of shape ({len(x)},) to match {x_key!r}, "
                f"got {y.dtype} {y.shape}."
            )
        if len(y) and (int(y.min()) < 0 or int(y.max()) > 9):
            raise ValueError(f"{path}: key {y_key!r} holds labels outside 0-9 (min {y.min()}, max {y.max()}).")
    return arrays


def _to_pixels(images: numpy.ndarray) -> numpy.ndarray:
    """uint8 images (n, 28, 28) -> float32 (n, 784) in [0, 1]."""
    return numpy.divide(images.reshape(len(images), 784), 255, dtype=numpy.float32)
