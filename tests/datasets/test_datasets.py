"""plait.datasets: the bundled subsets, the full files, limits, errors and the registry."""
from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

import plait.datasets  # noqa: F401  (registers the loaders until the lead wires them into config)
from plait.config import Config, registry
from plait.datasets import Dataset, Split, load_dataset, tokenize, tokenizer_for

ROOT = Path(__file__).resolve().parents[2]
FULL = Path(__file__).parents[2].parent / "shared" / "data"
DATA_DIR = ROOT / "plait" / "datasets" / "data"
SPLITS = ("train", "dev", "test")
TURKISH_TAGS = ["ADJ", "ADP", "ADV", "AFFIX", "CONJ", "DET", "NOUN", "NUM", "ONOM", "PRON", "PRT", "PUNCT", "VERB", "X"]


def needs_full(name: str) -> Path:
    path = FULL / name
    if not path.is_file():
        pytest.skip(f"{path} is not beside this checkout")
    return path


@pytest.fixture(scope="module")
def mnist_bundled():
    return load_dataset("mnist.v1")


@pytest.fixture(scope="module")
def mnist_full():
    needs_full("mnist.npz")
    return load_dataset("mnist.v1", path=str(FULL))


@pytest.fixture(scope="module")
def rt_bundled():
    return load_dataset("rotten_tomatoes.v1")


@pytest.fixture(scope="module")
def tr_bundled():
    return load_dataset("turkish_upos.v1")


# --- bundled data: shapes, dtypes, types -------------------------------------------------


def test_bundled_mnist_shapes_and_dtypes(mnist_bundled):
    d = mnist_bundled
    assert isinstance(d, Dataset)
    assert (d.name, d.task, d.unit) == ("mnist", "classify", "images")
    assert d.labels == [str(i) for i in range(10)]
    assert d.source == "bundled subset (plait/datasets/data/mnist_subset.npz)"
    sizes = {"train": 15000, "dev": 2000, "test": 5000}
    for name in SPLITS:
        split = d.split(name)
        assert isinstance(split, Split)
        assert split.X.dtype == numpy.float32 and split.X.shape == (sizes[name], 784)
        assert split.Y.dtype == numpy.int64 and split.Y.shape == (sizes[name],)
        assert len(split) == sizes[name] == d.n_words(name) == d.n_words(split)
        assert split.X.min() == 0.0 and split.X.max() == 1.0
        assert set(numpy.unique(split.Y)) == set(range(10))


def test_bundled_mnist_is_stratified(mnist_bundled):
    # Each digit keeps its share of the full split: counts of classic MNIST train (first 50k) scaled down.
    counts = numpy.bincount(mnist_bundled.test.Y, minlength=10)
    full_test = numpy.array([980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009])
    assert counts.sum() == 5000
    assert numpy.abs(counts - full_test / 2).max() <= 1


def test_bundled_rotten_tomatoes_types(rt_bundled):
    d = rt_bundled
    assert (d.name, d.task, d.unit, d.labels) == ("rotten_tomatoes", "classify", "docs", ["rotten", "fresh"])
    assert d.source == "bundled subset (plait/datasets/data/rotten_tomatoes.jsonl.gz)"
    assert [len(d.split(name)) for name in SPLITS] == [10262, 1275, 1271]
    for name in SPLITS:
        split = d.split(name)
        assert isinstance(split.X, list) and all(isinstance(doc, list) and doc for doc in split.X)
        assert all(isinstance(token, str) and token and not token.isspace() for doc in split.X for token in doc)
        assert split.Y.dtype == numpy.int64 and split.Y.shape == (len(split.X),)
        assert set(split.Y.tolist()) == {0, 1}
        assert d.n_words(name) == sum(len(doc) for doc in split.X)
    # README counts: train has 5,947 fresh (id 1) and 4,315 rotten (id 0).
    assert numpy.bincount(d.train.Y).tolist() == [4315, 5947]
    assert d.train.X[0] == ["a", "three-hour", "cinema", "master", "class", "."]
    assert all(token == token.lower() for doc in d.train.X for token in doc)


def test_rotten_tomatoes_lowercase_false_keeps_case():
    d = load_dataset("rotten_tomatoes.v1", lowercase=False, limit=3)
    assert d.train.X[0] == ["A", "three-hour", "cinema", "master", "class", "."]


def test_bundled_turkish_types(tr_bundled):
    d = tr_bundled
    assert (d.name, d.task, d.unit) == ("turkish_upos", "tag", "sentences")
    assert d.labels == TURKISH_TAGS == sorted(TURKISH_TAGS)
    assert [len(d.split(name)) for name in SPLITS] == [3941, 446, 464]
    assert [d.n_words(name) for name in SPLITS] == [66233, 7256, 7881]
    for name in SPLITS:
        split = d.split(name)
        assert isinstance(split.X, list) and isinstance(split.Y, list)
        for words, tags in zip(split.X, split.Y):
            assert all(isinstance(word, str) for word in words)
            assert isinstance(tags, numpy.ndarray) and tags.dtype == numpy.int32 and tags.shape == (len(words),)
    assert d.train.X[0] == ["Burda", "da", "öylemi", "yoksa", "kiloyla", "mı", "?"]
    assert [d.labels[i] for i in d.train.Y[0]] == ["PRON", "PRT", "VERB", "CONJ", "VERB", "PRT", "PUNCT"]


@pytest.mark.parametrize(
    "text,lowercase,expected",
    [
        ("It's a three-hour film... OK?", True, ["it's", "a", "three-hour", "film", ".", ".", ".", "ok", "?"]),
        ("It's a three-hour film... OK?", False, ["It's", "a", "three-hour", "film", ".", ".", ".", "OK", "?"]),
        ("rock 'n' roll -- (sort of)", True, ["rock", "'", "n", "'", "roll", "-", "-", "(", "sort", "of", ")"]),
        ("Amélie’s café,\n2001", True, ["amélie’s", "café", ",", "2001"]),
        ("  ", True, []),
    ],
)
def test_tokenize(text, lowercase, expected):
    assert tokenize(text, lowercase=lowercase) == expected


def test_tokenizer_for_matches_the_datasets():
    assert tokenizer_for("rotten_tomatoes.v1")("A three-hour cinema master class.") == ["a", "three-hour", "cinema", "master", "class", "."]
    assert tokenizer_for("rotten_tomatoes", lowercase=False)("Great FUN!") == ["Great", "FUN", "!"]
    assert tokenizer_for("turkish_upos.v1")("Burda da öylemi ?") == ["Burda", "da", "öylemi", "?"]
    with pytest.raises(ValueError, match="'mnist.v1' has no text tokenizer"):
        tokenizer_for("mnist")
    with pytest.raises(KeyError, match="Unknown dataset 'imdb'"):
        tokenizer_for("imdb")


def test_tokenize_rejects_non_text():
    with pytest.raises(TypeError, match="expects a str"):
        tokenize(["not", "a", "str"])


# --- splits --------------------------------------------------------------------------------


def test_mnist_bundled_splits_disjoint_and_inside_protocol():
    with numpy.load(DATA_DIR / "mnist_subset.npz") as archive:
        idx_train, idx_dev, idx_test = archive["idx_train"], archive["idx_dev"], archive["idx_test"]
    assert len(numpy.unique(idx_train)) == 15000 and len(numpy.unique(idx_dev)) == 2000
    assert len(numpy.unique(idx_test)) == 5000
    # train and dev come from different halves of x_train, so they cannot share an image.
    assert idx_train.max() < 50000 <= idx_dev.min() and idx_dev.max() < 60000
    assert 0 <= idx_test.min() and idx_test.max() < 10000
    # The subset spans the whole test set, not only its (easier) first half.
    assert (idx_test >= 5000).sum() == pytest.approx(2500, abs=10)


@pytest.mark.parametrize("name", ["rotten_tomatoes.v1", "turkish_upos.v1"])
def test_text_splits_are_disjoint(name):
    d = load_dataset(name)
    seen = {split: {tuple(doc) for doc in d.split(split).X} for split in SPLITS}
    assert not seen["train"] & seen["dev"]
    assert not seen["train"] & seen["test"]
    assert not seen["dev"] & seen["test"]


# --- limit ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mnist.v1", "rotten_tomatoes.v1", "turkish_upos.v1"])
def test_limit_keeps_the_first_examples(name):
    whole = load_dataset(name)
    small = load_dataset(name, limit=7)
    for split in SPLITS:
        assert len(small.split(split)) == 7
        numpy.testing.assert_array_equal(numpy.asarray(small.split(split).Y[6]), numpy.asarray(whole.split(split).Y[6]))
        first, cut = whole.split(split).X[:7], small.split(split).X
        if isinstance(first, list):
            assert cut == first
        else:
            numpy.testing.assert_array_equal(cut, first)
    assert small.labels == whole.labels


def test_limit_larger_than_split_keeps_all():
    d = load_dataset("turkish_upos.v1", limit=1000)
    assert [len(d.split(s)) for s in SPLITS] == [1000, 446, 464]


@pytest.mark.parametrize("limit,error", [(-1, ValueError), ("5", TypeError), (2.0, TypeError), (True, TypeError)])
def test_bad_limit(limit, error):
    with pytest.raises(error, match="limit"):
        registry.datasets.get("mnist.v1")(limit=limit)


# --- full files: same label ids, bundled is a real subset ------------------------------------


def test_full_mnist_protocol_split(mnist_full):
    d = mnist_full
    assert [len(d.split(s)) for s in SPLITS] == [50000, 10000, 10000]
    assert d.source == str(FULL / "mnist.npz")
    assert d.train.X.dtype == numpy.float32 and d.train.X.shape == (50000, 784)
    assert d.train.Y[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    assert d.test.Y[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    with numpy.load(FULL / "mnist.npz") as full:
        numpy.testing.assert_array_equal(d.dev.Y, full["y_train"][50000:])


def test_full_mnist_path_may_be_the_file_itself():
    path = needs_full("mnist.npz")
    d = load_dataset("mnist.v1", path=str(path), limit=3)
    assert d.source == str(path) and len(d.test) == 3


def test_bundled_mnist_images_are_real_mnist_images(mnist_bundled, mnist_full):
    with numpy.load(DATA_DIR / "mnist_subset.npz") as archive:
        idx = {s: archive[f"idx_{s}"] for s in SPLITS}
    full_pos = {"train": lambda i: ("train", i), "dev": lambda i: ("dev", i - 50000), "test": lambda i: ("test", i)}
    rng = numpy.random.default_rng(0)
    for split in SPLITS:
        bundled = mnist_bundled.split(split)
        for k in rng.choice(len(bundled), size=50, replace=False):
            where, i = full_pos[split](int(idx[split][k]))
            numpy.testing.assert_array_equal(bundled.X[k], mnist_full.split(where).X[i])
            assert bundled.Y[k] == mnist_full.split(where).Y[i]
    # Found without the stored positions too: the images occur byte for byte in the full file.
    lookup = {row.tobytes(): int(y) for row, y in zip(mnist_full.test.X, mnist_full.test.Y)}
    for k in rng.choice(len(mnist_bundled.test), size=50, replace=False):
        assert lookup[mnist_bundled.test.X[k].tobytes()] == mnist_bundled.test.Y[k]


@pytest.mark.parametrize("name,filename", [("rotten_tomatoes.v1", "rotten_tomatoes.jsonl"), ("turkish_upos.v1", "turkish_web_treebank.jsonl")])
def test_bundled_text_equals_full_file(name, filename):
    path = needs_full(filename)
    bundled, full = load_dataset(name), load_dataset(name, path=path)
    assert full.source == str(path)
    assert bundled.labels == full.labels
    for split in SPLITS:
        assert bundled.split(split).X == full.split(split).X
        assert [numpy.asarray(y).tolist() for y in bundled.split(split).Y] == [
            numpy.asarray(y).tolist() for y in full.split(split).Y
        ]


def test_rotten_tomatoes_rows_come_from_full_file(rt_bundled):
    path = needs_full("rotten_tomatoes.jsonl")
    # NOTE: split on "\n" only; str.splitlines also breaks at other line separators inside texts.
    rows = [json.loads(line) for line in path.read_text(encoding="utf8").split("\n") if line]
    by_split = {s: [r for r in rows if r["split"] == s] for s in SPLITS}
    rng = numpy.random.default_rng(1)
    for split in SPLITS:
        for k in rng.choice(len(by_split[split]), size=20, replace=False):
            row = by_split[split][k]
            assert rt_bundled.split(split).X[k] == tokenize(row["text"])
            assert rt_bundled.labels[rt_bundled.split(split).Y[k]] == row["label"]


def test_turkish_label_set_is_the_full_tag_set():
    path = needs_full("turkish_web_treebank.jsonl")
    tags = set()
    with open(path, encoding="utf8") as file:
        for line in file:
            tags.update(json.loads(line)["upos"])
    assert sorted(tags) == TURKISH_TAGS


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("name,filename", [("mnist.v1", "mnist.npz"), ("rotten_tomatoes.v1", "rotten_tomatoes.jsonl"), ("turkish_upos.v1", "turkish_web_treebank.jsonl")])
def test_missing_file(tmp_path, name, filename):
    missing = tmp_path / "nowhere" / filename
    with pytest.raises(FileNotFoundError) as err:
        load_dataset(name, path=str(missing))
    message = str(err.value)
    assert str(missing) in message and name in message and "path=" in message and "bundled" in message
    with pytest.raises(FileNotFoundError) as err:
        load_dataset(name, path=tmp_path)
    assert f"directory {tmp_path} has no {filename}" in str(err.value) and name in str(err.value)


def test_path_of_wrong_kind():
    with pytest.raises(TypeError, match="path must be a str"):
        load_dataset("mnist.v1", path=42)


def _write_lines(path: Path, lines) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf8")
    return path


GOOD_RT = json.dumps({"text": "Fine.", "label": "fresh", "split": "train"})


@pytest.mark.parametrize(
    "bad_line,pattern",
    [
        ('{"text": "Oops", "label": ', r"line 2: not valid JSON"),
        ('["text", "label"]', r"line 2: expected a JSON object"),
        (json.dumps({"text": "x", "split": "dev"}), r"line 2: missing key\(s\) 'label'"),
        (json.dumps({"text": "x", "label": "meh", "split": "dev"}), r"line 2: unknown label 'meh'"),
        (json.dumps({"text": "x", "label": "fresh", "split": "valid"}), r"line 2: unknown split 'valid'"),
        (json.dumps({"text": 3, "label": "fresh", "split": "dev"}), r"line 2: key 'text' must be a string"),
    ],
)
def test_corrupt_rotten_tomatoes(tmp_path, bad_line, pattern):
    file = _write_lines(tmp_path / "rotten_tomatoes.jsonl", [GOOD_RT, bad_line, GOOD_RT])
    with pytest.raises(ValueError, match=pattern) as err:
        load_dataset("rotten_tomatoes.v1", path=tmp_path)
    assert str(file) in str(err.value)


def test_small_jsonl_file_loads(tmp_path):
    rows = [
        GOOD_RT,
        "",
        json.dumps({"text": "Awful!", "label": "rotten", "split": "test", "movie": "m"}),
    ]
    d = load_dataset("rotten_tomatoes.v1", path=_write_lines(tmp_path / "any_name.jsonl", rows))
    assert d.train.X == [["fine", "."]] and d.train.Y.tolist() == [1]
    assert d.test.X == [["awful", "!"]] and d.test.Y.tolist() == [0]
    assert len(d.dev) == 0 and d.dev.Y.dtype == numpy.int64 and d.n_words("dev") == 0
    # Through a config block, a pathlib.Path keyword still passes the config's type check.
    via_config = load_dataset({"@datasets": "rotten_tomatoes.v1"}, path=tmp_path / "any_name.jsonl")
    assert via_config.test.X == [["awful", "!"]] and via_config.source == str(tmp_path / "any_name.jsonl")


@pytest.mark.parametrize(
    "row,pattern",
    [
        ({"words": ["a", "b"], "upos": ["NOUN"], "split": "train"}, r"line 1: 2 words but 1 upos tags"),
        ({"words": ["a"], "upos": ["PROPN"], "split": "train"}, r"line 1: unknown UPOS tag\(s\) \['PROPN'\]"),
        ({"words": "a b", "upos": ["NOUN"], "split": "train"}, r"line 1: key 'words' must be a list of strings"),
        ({"words": ["a"], "split": "train"}, r"line 1: missing key\(s\) 'upos'"),
    ],
)
def test_corrupt_turkish(tmp_path, row, pattern):
    file = _write_lines(tmp_path / "turkish_web_treebank.jsonl", [json.dumps(row)])
    with pytest.raises(ValueError, match=pattern) as err:
        load_dataset("turkish_upos.v1", path=str(file))
    assert str(file) in str(err.value)


def test_gzip_jsonl_that_is_not_gzip(tmp_path):
    file = tmp_path / "data.jsonl.gz"
    file.write_bytes(b"plain text, not gzip")
    with pytest.raises(ValueError, match="cannot be read as UTF-8 JSON lines"):
        load_dataset("turkish_upos.v1", path=file)


def _mnist_npz(path: Path, n_train: int = 50001, **changes) -> Path:
    arrays = {
        "x_train": numpy.zeros((n_train, 28, 28), numpy.uint8),
        "y_train": numpy.zeros(n_train, numpy.uint8),
        "x_test": numpy.full((3, 28, 28), 255, numpy.uint8),
        "y_test": numpy.array([1, 2, 3], numpy.uint8),
    }
    arrays.update(changes)
    numpy.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


def test_bad_npz_keys(tmp_path):
    file = tmp_path / "mnist.npz"
    numpy.savez(file, images=numpy.zeros((2, 28, 28), numpy.uint8), labels=numpy.zeros(2, numpy.uint8))
    with pytest.raises(ValueError) as err:
        load_dataset("mnist.v1", path=tmp_path)
    message = str(err.value)
    assert str(file) in message and "missing key(s) x_train, y_train, x_test, y_test" in message
    assert "found: images, labels" in message


@pytest.mark.parametrize(
    "changes,pattern",
    [
        ({"x_test": numpy.zeros((3, 28, 28), numpy.float32)}, r"key 'x_test' must be uint8 images"),
        ({"x_test": numpy.zeros((3, 32, 32), numpy.uint8)}, r"key 'x_test' must be uint8 images .* \(3, 32, 32\)"),
        ({"y_test": numpy.array([1, 2], numpy.uint8)}, r"key 'y_test' must be integer labels of shape \(3,\)"),
        ({"y_test": numpy.array([1, 2, 10], numpy.uint8)}, r"key 'y_test' holds labels outside 0-9"),
        ({"x_train": numpy.zeros((10, 28, 28), numpy.uint8), "y_train": numpy.zeros(10, numpy.uint8)}, r"'x_train' has 10 images"),
    ],
)
def test_bad_npz_content(tmp_path, changes, pattern):
    file = _mnist_npz(tmp_path / "mnist.npz", **changes)
    with pytest.raises(ValueError, match=pattern) as err:
        load_dataset("mnist.v1", path=file)
    assert str(file) in str(err.value)


def test_minimal_valid_npz_loads(tmp_path):
    d = load_dataset("mnist.v1", path=_mnist_npz(tmp_path / "mnist.npz"), limit=2)
    assert [len(d.split(s)) for s in SPLITS] == [2, 1, 2]
    assert d.test.X.shape == (2, 784) and float(d.test.X.max()) == 1.0 and d.test.Y.tolist() == [1, 2]


@pytest.mark.parametrize("content", [b"not a zip archive at all", b"PK\x03\x04truncated"])
def test_unreadable_npz(tmp_path, content):
    file = tmp_path / "mnist.npz"
    file.write_bytes(content)
    with pytest.raises(ValueError, match="not a readable .npz archive"):
        load_dataset("mnist.v1", path=file)


# --- registry and load_dataset -----------------------------------------------------------------


def test_registry_lookup():
    func = registry.datasets.get("mnist.v1")
    assert func is plait.datasets.mnist
    assert registry.datasets.get("rotten_tomatoes.v1") is plait.datasets.rotten_tomatoes
    assert registry.datasets.get("turkish_upos.v1") is plait.datasets.turkish_upos
    d = func(limit=4)
    assert isinstance(d, Dataset) and len(d.train) == 4


def test_config_resolves_to_dataset():
    config = Config().from_str('[data]\n@datasets = "mnist.v1"\nlimit = 5\n')
    d = registry.resolve(config)["data"]
    assert isinstance(d, Dataset) and d.name == "mnist" and [len(d.split(s)) for s in SPLITS] == [5, 5, 5]
    # load_dataset takes the same config, or its block, and keyword overrides.
    assert len(load_dataset(config).dev) == 5
    d = load_dataset({"@datasets": "turkish_upos.v1", "limit": 2}, limit=3)
    assert d.name == "turkish_upos" and len(d.test) == 3


def test_load_dataset_names():
    assert load_dataset("rotten_tomatoes", limit=1).name == "rotten_tomatoes"
    with pytest.raises(KeyError, match="Unknown dataset 'cifar10'.*mnist.v1"):
        load_dataset("cifar10")
    with pytest.raises(TypeError, match="registered name"):
        load_dataset(42)
    with pytest.raises(ValueError, match="no block with '@datasets'"):
        load_dataset({"training": {"max_epochs": 3}})


def test_dataset_split_lookup_errors(tr_bundled):
    with pytest.raises(KeyError, match="no split 'validation'"):
        tr_bundled.split("validation")
    with pytest.raises(TypeError, match="expects a Split or a split name"):
        tr_bundled.n_words(3)
    assert "turkish_upos" in repr(tr_bundled) and "train=3941" in repr(tr_bundled)
    assert repr(tr_bundled.dev).startswith("Split(n=446")


# --- the bundle itself -----------------------------------------------------------------------


def test_bundle_stays_small():
    files = [path for path in DATA_DIR.iterdir() if path.is_file()]
    assert {"mnist_subset.npz", "rotten_tomatoes.jsonl.gz", "turkish_upos.jsonl.gz", "README.md"} <= {p.name for p in files}
    assert sum(path.stat().st_size for path in files) <= 5_000_000


def test_bundle_matches_its_checksums():
    for line in (DATA_DIR / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        assert hashlib.sha256((DATA_DIR / name).read_bytes()).hexdigest() == digest, name


def test_bundled_jsonl_keeps_only_the_needed_columns():
    with gzip.open(DATA_DIR / "turkish_upos.jsonl.gz", "rt", encoding="utf8") as file:
        assert set(json.loads(file.readline())) == {"words", "upos", "split"}
    with gzip.open(DATA_DIR / "rotten_tomatoes.jsonl.gz", "rt", encoding="utf8") as file:
        assert set(json.loads(file.readline())) == {"text", "label", "split"}


def _make_tool():
    spec = importlib.util.spec_from_file_location("make_bundled_data", ROOT / "tools" / "make_bundled_data.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_stratified_indices():
    tool = _make_tool()
    y = numpy.array([0] * 50 + [1] * 30 + [2] * 20)
    idx = tool.stratified_indices(y, 10)
    assert numpy.bincount(y[idx]).tolist() == [5, 3, 2]
    assert (numpy.diff(idx) > 0).all()
    # Largest remainder: 7 of (50, 30, 20) -> exact (3.5, 2.1, 1.4) -> (4, 2, 1).
    assert numpy.bincount(y[tool.stratified_indices(y, 7)]).tolist() == [4, 2, 1]
    assert tool.stratified_indices(y, 10).tolist() == idx.tolist()


def test_build_is_reproducible(tmp_path):
    needs_full("mnist.npz")
    tool = _make_tool()
    assert tool.main(["--src", str(FULL), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "SHA256SUMS").read_text() == (DATA_DIR / "SHA256SUMS").read_text()


def test_import_reads_no_data():
    # An audit hook records every file opened while plait.datasets is imported.
    code = (
        "import sys\n"
        "opened = []\n"
        "sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == 'open' else None)\n"
        "import plait.datasets\n"
        "at_import = sum('datasets/data' in path for path in opened)\n"
        "plait.datasets.mnist(limit=1)\n"
        "print(at_import, sum('datasets/data' in path for path in opened))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    # The hook does see the data file once a loader runs, so "0" at import is meaningful.
    assert out.stdout.split() == ["0", "1"]
