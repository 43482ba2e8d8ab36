"""Text classification CNN on Rotten Tomatoes: plait vs thinc 9.1 / 8.3 vs torch.

    .venv/bin/python bench/textcat_cnn.py [--threads 1] [--rounds 3] [--peers all] [--quick]

Model: HashEmbed(width, n_rows) -> expand_window(1) -> Maxout(width, pieces,
normalize=True) -> reduce_mean -> Softmax(2), on lowercased word tokens (uint64 ids made
in the harness, identically for every framework), Adam, cross-entropy. Trained on the
train split, accuracy on dev. Throughput is in documents/s; words/s is shown too.
"""

from __future__ import annotations

import sys
from typing import Any, Dict

import numpy

import _harness as H

DEFAULTS = dict(max_train=0, max_eval=0, width=64, n_rows=5000, pieces=3, batch=64,
                epochs=2, learn_rate=0.001)
QUICK = dict(max_train=256, max_eval=128, width=32, n_rows=1000, pieces=3, batch=32,
             epochs=1, learn_rate=0.001)

COLUMNS = [
    H.Column("train_per_s", "train docs/s", higher_is_better=True),
    H.Column("train_per_cpu_s", "train docs/CPU-s", higher_is_better=True),
    H.Column("train_words_per_s", "train words/s"),
    H.Column("predict_per_s", "predict docs/s", higher_is_better=True),
    H.Column("peak_mb", "peak MB", "{:,.0f}", higher_is_better=False),
    H.Column("accuracy", "accuracy", "{:.4f}"),
]


def build_model(api, p: Dict[str, Any]):
    """The one model definition plait and thinc share."""
    return api.chain(
        api.list2ragged(),
        api.with_array(api.HashEmbed(nO=p["width"], nV=p["n_rows"], seed=p["seed"] + 1)),
        api.expand_window(window_size=1),
        api.with_array(api.Maxout(nO=p["width"], nP=p["pieces"], normalize=True)),
        api.reduce_mean(),
        api.Softmax(nO=2),
    )


def training_parts(api, p: Dict[str, Any], tr_docs, tr_y):
    """(model initialized, loss, batch(idx) -> (X, Y)) on the training split: what every
    thinc-face framework trains, here and in step_phases.py."""
    model = build_model(api, p)
    Ytr = H.one_hot(tr_y, 2)
    model.initialize(X=tr_docs[:8], Y=Ytr[:8])
    return model, api.CategoricalCrossentropy(), lambda idx: ([tr_docs[i] for i in idx], Ytr[idx])


def work(framework: str, p: Dict[str, Any]) -> Dict[str, Any]:
    tr_docs, tr_y, dv_docs, dv_y = H.load_rotten_tomatoes(p["max_train"] or None,
                                                          p["max_eval"] or None)
    if framework == "torch":
        return _torch(p, tr_docs, tr_y, dv_docs, dv_y)
    api = H.import_api(framework)
    api.set_current_ops(api.NumpyOps())
    model, loss, batch = training_parts(api, p, tr_docs, tr_y)
    optimizer = api.Adam(p["learn_rate"], use_averages=False)
    rng = numpy.random.default_rng(p["seed"])
    n_docs = n_words = 0
    with H.Clock() as train:
        for _ in range(p["epochs"]):
            for idx in H.batches(len(tr_docs), p["batch"], rng):
                X, Y = batch(idx)
                Yh, backprop = model.begin_update(X)
                backprop(loss.get_grad(Yh, Y))
                model.finish_update(optimizer)
                n_docs += len(X)
                n_words += sum(len(x) for x in X)
    correct = 0
    with H.Clock() as pred:
        for idx in H.batches(len(dv_docs), 256):
            guess = model.predict([dv_docs[i] for i in idx]).argmax(axis=1)
            correct += int((guess == dv_y[idx]).sum())
    return _result(n_docs, n_words, train, len(dv_docs), pred, correct)


def _torch(p, tr_docs, tr_y, dv_docs, dv_y) -> Dict[str, Any]:
    import torch
    from torch import nn

    torch.manual_seed(p["seed"])

    class TextCNN(nn.Module):
        """The same network on packed tokens: no padding, so no wasted FLOPs."""

        def __init__(self, width: int, n_rows: int, pieces: int) -> None:
            super().__init__()
            self.n_rows, self.width, self.pieces = n_rows, width, pieces
            # HashEmbed: 4 hashed rows summed per token.
            self.table = nn.Parameter(torch.empty(n_rows, width).uniform_(-0.1, 0.1))
            self.maxout = nn.Linear(3 * width, width * pieces)
            self.norm = nn.LayerNorm(width)
            self.out = nn.Linear(width, 2)
            self.register_buffer("mults", torch.tensor(
                [0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F], dtype=torch.int64))

        def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            # A cheap multiplicative hash stands in for MurmurHash (torch has none): it is
            # computed in the timed loop, as HashEmbed's hashing is.
            keys = (ids.unsqueeze(1) * self.mults) >> 17
            rows = torch.remainder(keys, self.n_rows)
            X = nn.functional.embedding_bag(rows, self.table, mode="sum")  # (nN, width)
            nN = X.shape[0]
            # expand_window(1): [prev, self, next] within each document, zeros at the edges.
            starts = torch.cumsum(lengths, 0) - lengths
            pos = torch.arange(nN) - torch.repeat_interleave(starts, lengths)
            doc_len = torch.repeat_interleave(lengths, lengths)
            Xz = torch.cat([X, X.new_zeros((1, X.shape[1]))])
            zero_row = torch.full_like(pos, nN)
            ar = torch.arange(nN)
            prev = torch.where(pos > 0, ar - 1, zero_row)
            nxt = torch.where(pos < doc_len - 1, ar + 1, zero_row)
            W = torch.cat([Xz[prev], X, Xz[nxt]], dim=1)
            H_ = self.maxout(W).view(nN, self.width, self.pieces).max(dim=2).values
            H_ = self.norm(H_)
            doc = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
            means = H_.new_zeros((len(lengths), self.width)).index_add_(0, doc, H_)
            means = means / lengths.unsqueeze(1).to(means.dtype)
            return self.out(means)

    model = TextCNN(p["width"], p["n_rows"], p["pieces"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=p["learn_rate"], weight_decay=1e-6)

    def pack(docs):
        # uint64 ids do not fit int64: keep the low 63 bits, as good a key as any.
        flat = numpy.concatenate(docs) & numpy.uint64(0x7FFFFFFFFFFFFFFF)
        lengths = torch.tensor([len(d) for d in docs], dtype=torch.int64)
        return torch.from_numpy(flat.astype("int64")), lengths

    tr_t = torch.from_numpy(tr_y)
    rng = numpy.random.default_rng(p["seed"])
    n_docs = n_words = 0
    model.train()
    with H.Clock() as train:
        for _ in range(p["epochs"]):
            for idx in H.batches(len(tr_docs), p["batch"], rng):
                ids, lengths = pack([tr_docs[i] for i in idx])
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(ids, lengths), tr_t[torch.from_numpy(idx)])
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                n_docs += len(idx)
                n_words += int(ids.shape[0])
    model.eval()
    correct = 0
    with H.Clock() as pred, torch.no_grad():
        for idx in H.batches(len(dv_docs), 256):
            ids, lengths = pack([dv_docs[i] for i in idx])
            guess = torch.softmax(model(ids, lengths), dim=1).argmax(dim=1).numpy()
            correct += int((guess == dv_y[idx]).sum())
    return _result(n_docs, n_words, train, len(dv_docs), pred, correct)


def _result(n_docs, n_words, train, n_pred, pred, correct) -> Dict[str, Any]:
    out: Dict[str, Any] = {"docs": n_docs, "words": n_words, "accuracy": correct / n_pred}
    out.update(H.throughput_fields("train", n_docs, train))
    out["train_words_per_s"] = n_words / train.wall if train.wall > 0 else None
    out.update(H.throughput_fields("predict", n_pred, pred))
    return out


def main(argv=None) -> None:
    parsed = H.sized_command_line(argv, __doc__, DEFAULTS, QUICK, work)
    if parsed is None:  # a child: work() ran
        return
    _, args, params = parsed
    H.parent_main(__file__, args, params, "Rotten Tomatoes text CNN (bench/textcat_cnn.py)",
                  COLUMNS)


if __name__ == "__main__":
    main(sys.argv[1:])
