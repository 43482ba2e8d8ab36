"""Stand-in data for Chainer 1.7.2's example programs, made from ../shared/data, in the formats they read.

    python bench/chainer_examples/make_data.py OUT_DIR [--data ../shared/data] [--only mnist,ptb,...]

Writes, under OUT_DIR:

- ``mnist/mnist.pkl``: what ``examples/mnist/data.py`` writes after its download and reads with
  ``load_mnist_data()``: a pickled dict ``{'data': uint8 (70000, 784), 'target': uint8 (70000,)}``,
  the 60,000 training digits first, then the 10,000 test digits (mnist.npz, unchanged).
- ``ptb/ptb.{train,valid,test}.txt``: Penn-Treebank-style language-model text (the format of the
  Mikolov PTB files that ``examples/ptb/download.py`` fetches): one sentence a line, lower-cased
  tokens separated by spaces with a leading space, numbers as ``N``, words outside the 10,000 most
  frequent training words as ``<unk>``. There is no PTB here: the sentences are the Turkish Web
  Treebank's (its own train/dev/test split). ``examples/word2vec`` reads the same ``ptb.train.txt``.
- ``sentiment/trees/{train,dev,test}.txt``: Stanford Sentiment Treebank bracketed trees (the format
  ``examples/sentiment/download.py`` unpacks): ``(label (label word) (label word))``, binary, labels
  0-4. There is no SST here: each Rotten Tomatoes snippet becomes a balanced binary tree over its
  tokens, every phrase labelled with the snippet's label (fresh -> 3, rotten -> 1) and every word
  with 2 (neutral), the split as in the file. ``--sentiment-max N`` keeps the first N trees of each
  split (the example reads every tree of each file, and has no flag for fewer than all or 10).
- ``imagenet/``: images and the two list files ``train_imagenet.py`` reads (``path label`` a line,
  paths relative to the list's folder as ``--root``), and ``mean.npy`` as ``compute_mean.py``
  writes it (a pickled float32 (3, 256, 256) array): MNIST digits, upscaled to 256x256 and
  repeated to three channels, saved as PNG; the label is the digit. Needs Pillow.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import pickle
import re
import sys
from typing import Dict, Iterable, List, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data"))
TARGETS = ("mnist", "ptb", "sentiment", "imagenet")


def _read_jsonl(path: str) -> List[dict]:
    with open(path, encoding="utf8") as f:
        return [json.loads(line) for line in f if line.strip()]


def make_mnist(data_dir: str, out: str) -> str:
    d = np.load(os.path.join(data_dir, "mnist.npz"))
    x = np.concatenate([d["x_train"], d["x_test"]]).reshape(70000, 784).astype(np.uint8)
    y = np.concatenate([d["y_train"], d["y_test"]]).astype(np.uint8)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "mnist.pkl")
    with open(path, "wb") as f:
        pickle.dump({"data": x, "target": y}, f, 2)
    return path


_NUMBER = re.compile(r"^[+-]?[\d.,:/%-]*\d[\d.,:/%-]*$")


def _ptb_token(word: str) -> str:
    word = word.lower()
    if _NUMBER.match(word):
        return "N"
    # The example splits on whitespace: a token must not hold any.
    return "".join(word.split()) or "_"


def make_ptb(data_dir: str, out: str, vocab_size: int = 10000) -> List[str]:
    sents = _read_jsonl(os.path.join(data_dir, "turkish_web_treebank.jsonl"))
    split_of = {"train": "train", "dev": "valid", "test": "test"}
    lines: Dict[str, List[List[str]]] = {"train": [], "valid": [], "test": []}
    for s in sents:
        lines[split_of[s["split"]]].append([_ptb_token(w) for w in s["words"]])
    counts = collections.Counter(w for toks in lines["train"] for w in toks)
    # "<unk>" and "N" stay in the vocabulary, as in Mikolov's files.
    keep = {w for w, _ in counts.most_common(vocab_size - 2)} | {"N"}
    os.makedirs(out, exist_ok=True)
    paths = []
    for split, sentences in lines.items():
        path = os.path.join(out, "ptb.%s.txt" % split)
        with open(path, "w", encoding="utf8") as f:
            for toks in sentences:
                f.write(" " + " ".join(t if t in keep else "<unk>" for t in toks) + " \n")
        paths.append(path)
    return paths


_TOKEN = re.compile(r"\w+(?:'\w+)?|[^\w\s]", re.UNICODE)
_SST_ESCAPES = {"(": "-LRB-", ")": "-RRB-"}


def _sst_tree(tokens: Sequence[str], label: int) -> str:
    if len(tokens) == 1:
        return "(2 %s)" % tokens[0]
    mid = (len(tokens) + 1) // 2
    return "(%d %s %s)" % (label, _sst_tree(tokens[:mid], label), _sst_tree(tokens[mid:], label))


def make_sentiment(data_dir: str, out: str, max_trees: int = 0) -> List[str]:
    rows = _read_jsonl(os.path.join(data_dir, "rotten_tomatoes.jsonl"))
    labels = {"fresh": 3, "rotten": 1}
    trees: Dict[str, List[str]] = {"train": [], "dev": [], "test": []}
    for r in rows:
        tokens = [_SST_ESCAPES.get(t, t) for t in _TOKEN.findall(r["text"])]
        if not tokens:
            continue
        label = labels[r["label"]]
        tree = _sst_tree(tokens, label)
        # A one-word snippet is a lone leaf: give it the snippet's label, as SST labels sentences.
        if len(tokens) == 1:
            tree = "(%d %s)" % (label, tokens[0])
        trees[r["split"]].append(tree)
    folder = os.path.join(out, "trees")
    os.makedirs(folder, exist_ok=True)
    paths = []
    for split, lines in trees.items():
        if max_trees:
            lines = lines[:max_trees]
        path = os.path.join(folder, "%s.txt" % split)
        with open(path, "w", encoding="utf8") as f:
            f.writelines(line + "\n" for line in lines)
        paths.append(path)
    return paths


def make_imagenet(data_dir: str, out: str, n_train: int = 1000, n_val: int = 250) -> List[str]:
    try:
        from PIL import Image
    except ImportError as e:
        raise SystemExit("make_data.py imagenet: needs Pillow (pip install pillow): %s" % e)
    d = np.load(os.path.join(data_dir, "mnist.npz"))
    size = 256
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    paths = []
    total = np.zeros((3, size, size), np.float64)
    for split, x, y, n in (("train", d["x_train"], d["y_train"], n_train),
                           ("val", d["x_test"], d["y_test"], n_val)):
        list_path = os.path.join(out, "%s.txt" % split)
        with open(list_path, "w") as f:
            for i in range(n):
                name = os.path.join("images", "%s_%05d.png" % (split, i))
                img = Image.fromarray(x[i]).resize((size, size), Image.BILINEAR).convert("RGB")
                img.save(os.path.join(out, name))
                if split == "train":
                    total += np.asarray(img, np.float64).transpose(2, 0, 1)
                f.write("%s %d\n" % (name, int(y[i])))
        paths.append(list_path)
    mean_path = os.path.join(out, "mean.npy")
    with open(mean_path, "wb") as f:
        # compute_mean.py of 1.7.2 pickles the float32 mean image under this name.
        pickle.dump((total / n_train).astype(np.float32), f, 2)
    paths.append(mean_path)
    return paths


def main(argv: Iterable[str] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--only", default=",".join(TARGETS))
    p.add_argument("--sentiment-max", type=int, default=0)
    p.add_argument("--imagenet-train", type=int, default=1000)
    p.add_argument("--imagenet-val", type=int, default=250)
    a = p.parse_args(argv)
    only = [t for t in a.only.split(",") if t]
    unknown = sorted(set(only) - set(TARGETS))
    if unknown:
        raise SystemExit("make_data.py: unknown target(s) %s; choose from %s" % (unknown, TARGETS))
    if "mnist" in only:
        print(make_mnist(a.data, os.path.join(a.out, "mnist")))
    if "ptb" in only:
        print("\n".join(make_ptb(a.data, os.path.join(a.out, "ptb"))))
    if "sentiment" in only:
        print("\n".join(make_sentiment(a.data, os.path.join(a.out, "sentiment"), a.sentiment_max)))
    if "imagenet" in only:
        print("\n".join(make_imagenet(a.data, os.path.join(a.out, "imagenet"),
                                      a.imagenet_train, a.imagenet_val)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
