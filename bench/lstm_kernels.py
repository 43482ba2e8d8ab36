"""The BiLSTM's kernels alone, on the Turkish tagger's batches: plait vs thinc 9.1 / 8.3.

    .venv/bin/python bench/lstm_kernels.py [--width 512] [--hidden 1024] [--batch 64]
        [--batches 20] [--repeat 2] [--rounds 3] [--peers thinc91] [--quick]

`NumpyOps().lstm_forward_training` and `backprop_lstm` (the same signatures in every library)
for one bidirectional layer: nI = --width, nO = --hidden / 2 per direction (as lstm_tagger.py
builds it), float32, weights and inputs drawn from one seed. The batches are the tagger's: the
train split's sentences in one shuffled order, --batch at a time, their lengths giving the
steps' sizes longest first as `with_padded` hands them over; --batches of them. Each child
runs every batch once to warm up, then --repeat times. Figures per batch (CPU time): forward
ms, backward ms, and words (tokens) per CPU-second of forward and backward together. What
lstm_tagger.py measures besides (Embed, Softmax, Adam, the padding) is not here, so this is the
script for the LSTM's own speed.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Dict

import numpy

import _harness as H

DEFAULTS = dict(width=512, hidden=1024, batch=64, batches=20, repeat=2)
QUICK = dict(width=32, hidden=64, batch=16, batches=3, repeat=1)

COLUMNS = [
    H.Column("words_per_cpu_s", "fwd+bwd words/CPU-s", "{:,.0f}", higher_is_better=True),
    H.Column("fwd_ms", "forward ms/batch", "{:.2f}", higher_is_better=False),
    H.Column("bwd_ms", "backward ms/batch", "{:.2f}", higher_is_better=False),
]


def batches(p: Dict[str, Any]):
    """(sizes, N) per batch, in lstm_tagger.py's shuffled order: how many sentences are still
    running at each step."""
    trX = H.load_turkish_tagging()[0]
    out = []
    for idx in H.batches(len(trX), p["batch"], numpy.random.default_rng(p["seed"])):
        lengths = numpy.array([len(trX[i]) for i in idx])
        sizes = (lengths[:, None] > numpy.arange(lengths.max())).sum(axis=0).astype("int32")
        out.append((sizes, int(sizes.sum())))
        if len(out) == p["batches"]:
            break
    return out


def work(framework: str, p: Dict[str, Any]) -> Dict[str, Any]:
    api = H.import_api(framework)
    ops = api.NumpyOps()
    nI, nO = p["width"], p["hidden"] // 2
    rng = numpy.random.default_rng(p["seed"])
    params = (rng.standard_normal(2 * 4 * nO * (nI + nO + 2)) * 0.05).astype("float32")
    H0 = numpy.zeros((1, 2, nO), dtype="float32")
    C0 = numpy.zeros((1, 2, nO), dtype="float32")
    data = []
    for sizes, N in batches(p):
        X = rng.standard_normal((N, nI)).astype("float32")
        dY = rng.standard_normal((N, 2 * nO)).astype("float32")
        data.append((sizes, X, dY))
    fwd = bwd = 0.0
    words = 0
    for rep in range(1 + p["repeat"]):
        for sizes, X, dY in data:
            t0 = time.process_time()
            Y, state = ops.lstm_forward_training(params, H0, C0, X, sizes)
            t1 = time.process_time()
            ops.backprop_lstm(dY, sizes, params, state)
            t2 = time.process_time()
            if rep > 0:  # the first pass warms up
                fwd += t1 - t0
                bwd += t2 - t1
                words += X.shape[0]
    n = p["repeat"] * len(data)
    return {"fwd_ms": 1e3 * fwd / n, "bwd_ms": 1e3 * bwd / n,
            "words_per_cpu_s": words / (fwd + bwd), "batches": len(data)}


def main(argv=None) -> None:
    parsed = H.sized_command_line(argv, __doc__, DEFAULTS, QUICK, work)
    if parsed is None:  # a child: work() ran
        return
    parser, args, params = parsed
    if params["hidden"] % 2 or min(params[k] for k in DEFAULTS) < 1:
        parser.error(f"--hidden must be even and every size at least 1, got {params}")
    H.parent_main(__file__, args, params, "BiLSTM kernels on the tagger's batches (bench/lstm_kernels.py)",
                  COLUMNS, known=("plait", "thinc91", "thinc83"))


if __name__ == "__main__":
    main(sys.argv[1:])
