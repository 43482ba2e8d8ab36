"""Build the small data files bundled in plait/datasets/data from the full files in ../shared/data.

The output is byte-for-byte reproducible: the subsets are chosen by integer arithmetic (no
random generator), zip members carry a fixed date and gzip streams no name or time.

    python tools/make_bundled_data.py [--src ../shared/data] [--out plait/datasets/data]
    python tools/make_bundled_data.py --measure   # also train the demo MLP on the bundled MNIST

Files written:
  mnist_subset.npz          stratified MNIST subset, uint8, LZMA-compressed members (numpy.load reads it)
  rotten_tomatoes.jsonl.gz  every snippet: {"text", "label", "split"}
  turkish_upos.jsonl.gz     every sentence: {"words", "upos", "split"}
  SHA256SUMS                sha256 of the three files above
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import sys
import time
import zipfile
from pathlib import Path

import numpy

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SRC = ROOT.parent / "shared" / "data"
DEFAULT_OUT = ROOT / "plait" / "datasets" / "data"

# Sizes of the bundled MNIST splits, chosen so the demo MLP reaches >= 95% on the bundled test
# split while the whole bundle stays under 4 MB (see plait/datasets/data/README.md).
N_TRAIN, N_DEV, N_TEST = 15000, 2000, 5000
MNIST_SPLIT = 50000
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def stratified_indices(y: numpy.ndarray, n: int) -> numpy.ndarray:
    """`n` indices into `y`, sorted, with each class's share as in `y` and spread evenly over its examples.

    Quotas use largest remainders (ties to the smaller class id); inside a class the picks are
    evenly spaced, so they cover the whole array, not just its beginning.
    """
    classes, counts = numpy.unique(y, return_counts=True)
    exact = counts * n
    quotas = exact // len(y)
    remainders = exact % len(y)
    short = n - int(quotas.sum())
    order = sorted(range(len(classes)), key=lambda i: (-int(remainders[i]), int(classes[i])))
    for i in order[:short]:
        quotas[i] += 1
    picked = []
    for cls, quota in zip(classes, quotas):
        members = numpy.flatnonzero(y == cls)
        picked.append(members[(numpy.arange(quota) * len(members)) // quota])
    return numpy.sort(numpy.concatenate(picked))


def write_npz_lzma(path: Path, arrays: dict) -> None:
    """An .npz archive whose members are LZMA-compressed; numpy.load reads it like any .npz."""
    with zipfile.ZipFile(path, "w") as archive:
        for key, value in arrays.items():
            buffer = io.BytesIO()
            numpy.lib.format.write_array(buffer, numpy.ascontiguousarray(value), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_LZMA
            info.external_attr = 0o644 << 16
            archive.writestr(info, buffer.getvalue())


def write_jsonl_gz(path: Path, rows: list) -> None:
    text = "".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in rows)
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as out:
        out.write(text.encode("utf8"))


def read_jsonl(path: Path) -> list:
    with open(path, encoding="utf8") as file:
        return [json.loads(line) for line in file if line.strip()]


def check_sources(src: Path) -> None:
    """Stop if a source file differs from the sha256 recorded beside it."""
    sums = src / "SHA256SUMS"
    if not sums.is_file():
        print(f"note: {sums} not found; source files not verified", file=sys.stderr)
        return
    for line in sums.read_text().splitlines():
        digest, _, name = line.strip().partition("  ")
        target = src / name
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() != digest:
            raise SystemExit(f"{target}: sha256 differs from {sums}; refusing to build from a changed file.")


def make_mnist(src: Path, out: Path) -> None:
    with numpy.load(src / "mnist.npz") as full:
        x_train, y_train, x_test, y_test = (full[k] for k in ("x_train", "y_train", "x_test", "y_test"))
    idx_train = stratified_indices(y_train[:MNIST_SPLIT], N_TRAIN)
    idx_dev = MNIST_SPLIT + stratified_indices(y_train[MNIST_SPLIT:], N_DEV)
    idx_test = stratified_indices(y_test, N_TEST)
    write_npz_lzma(
        out / "mnist_subset.npz",
        {
            "x_train": x_train[idx_train],
            "y_train": y_train[idx_train],
            "x_dev": x_train[idx_dev],
            "y_dev": y_train[idx_dev],
            "x_test": x_test[idx_test],
            "y_test": y_test[idx_test],
            # Where each image sits in the full file: idx_train/idx_dev index x_train, idx_test x_test.
            "idx_train": idx_train.astype(numpy.int32),
            "idx_dev": idx_dev.astype(numpy.int32),
            "idx_test": idx_test.astype(numpy.int32),
        },
    )


def make_rotten_tomatoes(src: Path, out: Path) -> None:
    rows = read_jsonl(src / "rotten_tomatoes.jsonl")
    write_jsonl_gz(
        out / "rotten_tomatoes.jsonl.gz",
        [{"text": r["text"], "label": r["label"], "split": r["split"]} for r in rows],
    )


def make_turkish(src: Path, out: Path) -> None:
    rows = read_jsonl(src / "turkish_web_treebank.jsonl")
    tags = sorted({tag for r in rows for tag in r["upos"]})
    sys.path.insert(0, str(ROOT))
    from plait.datasets._tagging import LABELS

    if tags != LABELS:
        raise SystemExit(f"UPOS tag set of the treebank {tags} differs from plait's LABELS {LABELS}; update LABELS.")
    write_jsonl_gz(
        out / "turkish_upos.jsonl.gz",
        [{"words": r["words"], "upos": r["upos"], "split": r["split"]} for r in rows],
    )


def measure(epochs: int, seeds: list) -> None:
    """Train the `plait train` demo MLP on the bundled MNIST and print the test accuracy per seed."""
    sys.path.insert(0, str(ROOT))
    from plait.api import Adam, Relu, Softmax, chain, fix_random_seed
    from plait.datasets import load_dataset

    start = time.perf_counter()
    data = load_dataset("mnist.v1")
    print(f"loaded bundled MNIST in {time.perf_counter() - start:.3f} s: {data}")
    Y_train = numpy.eye(10, dtype="f")[data.train.Y]
    for seed in seeds:
        fix_random_seed(seed)
        model = chain(Relu(nO=256, dropout=0.2), Relu(nO=256), Softmax())
        model.initialize(X=data.train.X[:5], Y=Y_train[:5])
        optimizer = Adam(0.001)
        start = time.perf_counter()
        for epoch in range(epochs):
            for X, Y in model.ops.multibatch(128, data.train.X, Y_train, shuffle=True):
                Yh, backprop = model.begin_update(X)
                backprop(Yh - Y)
                model.finish_update(optimizer)
            dev = float((model.predict(data.dev.X).argmax(axis=1) == data.dev.Y).mean())
            print(f"  seed {seed} epoch {epoch + 1}: dev accuracy {dev:.4f}")
        seconds = time.perf_counter() - start
        test = float((model.predict(data.test.X).argmax(axis=1) == data.test.Y).mean())
        print(f"seed {seed}: test accuracy {test:.4f} after {epochs} epochs, training took {seconds:.1f} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=DEFAULT_SRC, help="folder with the full data files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder to write the bundled files to")
    parser.add_argument("--measure", action="store_true", help="then train the demo MLP on the bundled MNIST")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args(argv)
    check_sources(args.src)
    args.out.mkdir(parents=True, exist_ok=True)
    make_mnist(args.src, args.out)
    make_rotten_tomatoes(args.src, args.out)
    make_turkish(args.src, args.out)
    names = ["mnist_subset.npz", "rotten_tomatoes.jsonl.gz", "turkish_upos.jsonl.gz"]
    lines = [f"{hashlib.sha256((args.out / n).read_bytes()).hexdigest()}  {n}" for n in names]
    (args.out / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    total = 0
    for name in names:
        size = (args.out / name).stat().st_size
        total += size
        print(f"{size:>10,}  {args.out / name}")
    print(f"{total:>10,}  in all")
    if args.measure:
        measure(args.epochs, args.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
