"""`plait predict`: run a saved model on images (.npy/.npz) or text lines and print or write the labels."""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import numpy

from ._common import CLIError, echo, info, printable, use_device, write_output_file


def load_images(path: Path, width: int) -> numpy.ndarray:
    """Images from .npy or .npz as float32 (n, width) in [0, 1].

    uint8 pixels are divided by 255; float pixels are taken as they are when in [0, 1], and
    divided by 255 when larger. Each image is (28, 28) or flat (784,); one image or a batch.
    From an .npz, the array `x_test` is taken, else its only array.
    """
    from .. import _safeio

    if not path.exists():
        raise CLIError(f"Input file not found: {str(path)!r}")
    # Through plait's safe reader: a regular file (no FIFO or device) within the size limit, no
    # pickles, and each array's declared size checked against the file before it is allocated.
    try:
        if path.suffix.lower() == ".npz":
            with _safeio.NpzArchive(path) as archive:
                names = list(archive.files)
                if "x_test" in names:
                    array = archive.read("x_test")
                elif len(names) == 1:
                    array = archive.read(names[0])
                else:
                    raise CLIError(
                        f"{str(path)!r} holds the arrays {names}: name the images `x_test`, or save only one array."
                    )
        else:
            array = _load_npy(path, _safeio.read_bytes(path))
    except _safeio.FileFormatError as err:
        raise CLIError(f"Cannot read the images: {err}") from None
    except (OSError, ValueError, EOFError) as err:
        raise CLIError(f"Cannot read {str(path)!r} as .npy/.npz: {err}") from err
    if array.dtype.kind not in "uif":
        raise CLIError(f"{str(path)!r}: expected numeric pixels, got dtype {array.dtype}.")
    if array.size == width:
        array = array.reshape((1, width))
    elif array.ndim >= 2 and int(numpy.prod(array.shape[1:])) == width:
        array = array.reshape((array.shape[0], width))
    else:
        raise CLIError(
            f"{str(path)!r}: images of shape {array.shape} do not fit the model, which reads {width} values "
            f"per image: pass (n, 28, 28), (n, {width}), (28, 28) or ({width},)."
        )
    X = array.astype("float32")
    if array.dtype.kind in "ui" or (X.size and float(X.max()) > 1.0):
        X /= 255.0
    return X


def _load_npy(path: Path, data: bytes) -> numpy.ndarray:
    """An .npy file's array, its header checked first: no object (pickled) arrays, and no more
    declared bytes than the file holds (a small file cannot make plait allocate a large array)."""
    from numpy.lib import format as npy

    stream = io.BytesIO(data)
    version = npy.read_magic(stream)
    if version == (1, 0):
        shape, _, dtype = npy.read_array_header_1_0(stream)
    else:
        shape, _, dtype = npy.read_array_header_2_0(stream)
    if dtype.hasobject:
        raise CLIError(f"{str(path)!r} holds Python objects (dtype {dtype}): plait reads only numeric pixels.")
    declared = int(numpy.prod(shape, dtype=object)) * dtype.itemsize
    if declared > len(data) - stream.tell():
        raise CLIError(
            f"{str(path)!r} declares an array of shape {shape} ({declared} bytes of {dtype}) but holds only "
            f"{len(data) - stream.tell()} bytes of data: the file is cut short or damaged."
        )
    stream.seek(0)
    return numpy.load(stream, allow_pickle=False)


def read_lines(source: str) -> List[str]:
    """Non-empty lines of a UTF-8 file, or of stdin for "-"."""
    if source == "-":
        stream = io.TextIOWrapper(sys.stdin.buffer, encoding="utf8") if hasattr(sys.stdin, "buffer") else sys.stdin
        text = stream.read()
    else:
        from .. import _safeio

        path = Path(source)
        if not path.exists():
            raise CLIError(f"Input file not found: {source!r}")
        try:  # a regular file within the size limit: a FIFO or a device is refused, not read
            text = _safeio.read_text(path, limit=_safeio.MAX_FILE_BYTES)
        except _safeio.FileFormatError as err:
            raise CLIError(f"Cannot read the input: {err}") from None
        except OSError as err:
            raise CLIError(f"Cannot read {source!r} as UTF-8 text: {err}") from err
    return [line.strip() for line in text.splitlines() if line.strip()]


def tokenizer_for(task: str, data_config: Dict[str, Any]) -> Any:
    """The function that turns a line into tokens the way the model's dataset did.

    Tagging data comes with gold tokens, so a line is split at whitespace and kept as it
    is; text classification data goes through plait.datasets.tokenize, lowercased when
    the dataset's `lowercase` setting (default true) says so.
    """
    if task == "tag":
        return str.split
    from ..datasets import tokenize

    lowercase = bool(data_config.get("lowercase", True))
    return lambda text: tokenize(text, lowercase=lowercase)


def predict_command(
    model_dir: Path, source: str, output: Optional[Path], batch_size: int, gpu: int, limit: int = 0
) -> int:
    from ..util import to_numpy
    from ._common import open_model
    from ._modeldir import read_sample

    use_device(gpu)
    loaded = open_model(model_dir)
    path = loaded.path
    meta, model = loaded.meta, loaded.model
    labels = list(meta["labels"])
    sample_X = read_sample(path)["X"]
    images = isinstance(sample_X, numpy.ndarray) and sample_X.dtype.kind == "f"
    records: List[Dict[str, Any]] = []
    if images:
        if source == "-" or Path(source).suffix.lower() not in (".npy", ".npz"):
            raise CLIError(
                f"The model reads images: pass a .npy or .npz file of them (uint8 28x28 or float 784), got {source!r}."
            )
        X = load_images(Path(source), int(sample_X.shape[1]))
        if limit:
            X = X[:limit]
        for start in range(0, len(X), batch_size):
            batch = X[start : start + batch_size]
            if model.ops.xp is not numpy:
                batch = model.ops.asarray(batch)
            probs = to_numpy(model.predict(batch))
            for i, row in enumerate(probs):
                k = int(row.argmax())
                records.append({"index": start + i, "label": labels[k], "probability": float(row[k])})
    else:
        lines = read_lines(source)
        if limit:
            lines = lines[:limit]
        tokenize = tokenizer_for(meta["task"], dict(loaded.config["data"]))
        docs = [tokenize(line) for line in lines]
        for start in range(0, len(docs), batch_size):
            batch = docs[start : start + batch_size]
            # An empty token list has no scores: its prediction is left out (null).
            keep = [i for i, d in enumerate(batch) if d]
            out = model.predict([batch[i] for i in keep]) if keep else []
            results: Dict[int, Any] = dict(zip(keep, out))
            for i, doc in enumerate(batch):
                record: Dict[str, Any] = {"index": start + i, "text": lines[start + i]}
                scores = results.get(i)
                if meta["task"] == "tag":
                    tags = [] if scores is None else [labels[int(k)] for k in to_numpy(scores).argmax(axis=-1)]
                    record.update({"tokens": doc, "tags": tags})
                elif scores is None:
                    record.update({"label": None, "probability": None})
                else:
                    row = to_numpy(scores)
                    k = int(row.argmax())
                    record.update({"label": labels[k], "probability": float(row[k])})
                records.append(record)
    if output is not None:
        # The file holds the labels exactly (JSON escapes the C0 controls; a JSON reader gets the
        # original strings back); only what goes to the terminal is escaped.
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf8")
        write_output_file(output, data, "predictions")
        info(f"{len(records)} predictions written to {output}")
    else:
        for line in _lines(records, meta["task"]):
            echo(line)
    return 0


def _lines(records: List[Dict[str, Any]], task: str) -> Iterator[str]:
    """One printed line per input. Labels come from the model directory (anyone's) and text from
    the input: every field is escaped (printable), tabs and newlines too, so that no label can
    send a terminal escape sequence or break the one-line-per-input format."""
    e = printable
    for r in records:
        if task == "tag":
            yield " ".join(f"{e(w)}/{e(t)}" for w, t in zip(r["tokens"], r["tags"]))
        elif "text" in r:
            prob = "-" if r["probability"] is None else f"{r['probability']:.4f}"
            yield f"{e(r['label'])}\t{prob}\t{e(r['text'])}"
        else:
            yield f"{r['index']}\t{e(r['label'])}\t{r['probability']:.4f}"
