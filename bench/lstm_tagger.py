"""BiLSTM part-of-speech tagger on the Turkish Web Treebank: plait vs thinc 9.1 / 8.3 vs torch.

    .venv/bin/python bench/lstm_tagger.py [--threads 1] [--rounds 3] [--peers all] [--quick]

Model: Embed(width, n_words) -> BiLSTM(hidden, 1 layer) -> Softmax(n_tags) per token, on
lowercased words (ids from the train split, 0 = unknown) and the 14 UPOS tags; Adam,
per-token cross-entropy. Trained on the train split, token accuracy on dev. Throughput
is in words (tokens) per second.

--min-updates N trains more epochs than --epochs where one epoch makes fewer than N updates
(bench/matrix.py uses it: at batch 256 one epoch is 16 updates, too few for any library's
accuracy to say anything).
"""

from __future__ import annotations

import sys
from typing import Any, Dict

import numpy

import _harness as H

DEFAULTS = dict(max_train=0, max_eval=0, width=64, hidden=128, batch=32, epochs=1,
                min_updates=0, learn_rate=0.001)
QUICK = dict(max_train=96, max_eval=48, width=16, hidden=32, batch=16, epochs=1,
             min_updates=0, learn_rate=0.001)

COLUMNS = [
    H.Column("train_per_s", "train words/s", higher_is_better=True),
    H.Column("train_per_cpu_s", "train words/CPU-s", higher_is_better=True),
    H.Column("predict_per_s", "predict words/s", higher_is_better=True),
    H.Column("peak_mb", "peak MB", "{:,.0f}", higher_is_better=False),
    H.Column("accuracy", "accuracy", "{:.4f}"),
]


def build_model(api, p: Dict[str, Any], n_words: int, n_tags: int):
    """The one model definition plait and thinc share. LSTM's nO counts both directions."""
    return api.chain(
        api.with_array(api.Embed(nO=p["width"], nV=n_words)),
        api.with_padded(api.LSTM(nO=p["hidden"], nI=p["width"], bi=True, depth=1)),
        api.with_array(api.Softmax(nO=n_tags, nI=p["hidden"])),
    )


def training_parts(api, p: Dict[str, Any], trX, trY, n_words: int, n_tags: int):
    """(model initialized, loss, batch(idx) -> (X, Y)) on the training split: what every
    thinc-face framework trains, here and in step_phases.py."""
    model = build_model(api, p, n_words, n_tags)
    trY1 = [H.one_hot(y, n_tags) for y in trY]
    model.initialize(X=trX[:4], Y=trY1[:4])
    return (model, api.SequenceCategoricalCrossentropy(),
            lambda idx: ([trX[i] for i in idx], [trY1[i] for i in idx]))


def work(framework: str, p: Dict[str, Any]) -> Dict[str, Any]:
    trX, trY, dvX, dvY, n_words, n_tags = H.load_turkish_tagging(p["max_train"] or None,
                                                                  p["max_eval"] or None)
    p = dict(p, epochs=H.epochs_for(p, len(trX)))
    if framework == "torch":
        return _torch(p, trX, trY, dvX, dvY, n_words, n_tags)
    api = H.import_api(framework)
    api.set_current_ops(api.NumpyOps())
    model, loss, batch = training_parts(api, p, trX, trY, n_words, n_tags)
    optimizer = api.Adam(p["learn_rate"], use_averages=False)
    rng = numpy.random.default_rng(p["seed"])
    n_words_seen = 0
    with H.Clock() as train:
        for _ in range(p["epochs"]):
            for idx in H.batches(len(trX), p["batch"], rng):
                X, Y = batch(idx)
                Yh, backprop = model.begin_update(X)
                backprop(loss.get_grad(Yh, Y))
                model.finish_update(optimizer)
                n_words_seen += sum(len(x) for x in X)
    correct = total = 0
    with H.Clock() as pred:
        for idx in H.batches(len(dvX), 128):
            guesses = model.predict([dvX[i] for i in idx])
            for i, g in zip(idx, guesses):
                correct += int((g.argmax(axis=1) == dvY[i]).sum())
                total += len(dvY[i])
    return _result(n_words_seen, train, total, pred, correct, p["epochs"])


def _torch(p, trX, trY, dvX, dvY, n_words, n_tags) -> Dict[str, Any]:
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

    torch.manual_seed(p["seed"])

    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(n_words, p["width"])
            self.lstm = nn.LSTM(p["width"], p["hidden"] // 2, num_layers=1,
                                bidirectional=True, batch_first=True)
            self.out = nn.Linear(p["hidden"], n_tags)

        def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            packed = pack_padded_sequence(self.embed(ids), lengths, batch_first=True,
                                          enforce_sorted=False)
            H_, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True)
            return self.out(H_)  # (nB, nL, n_tags), padding rows included

    model = Tagger()
    optimizer = torch.optim.AdamW(model.parameters(), lr=p["learn_rate"], weight_decay=1e-6)

    def pad(seqs):
        lengths = torch.tensor([len(s) for s in seqs], dtype=torch.int64)
        padded = pad_sequence([torch.from_numpy(s.astype("int64")) for s in seqs],
                              batch_first=True, padding_value=-100)
        return padded, lengths

    rng = numpy.random.default_rng(p["seed"])
    n_words_seen = 0
    model.train()
    with H.Clock() as train:
        for _ in range(p["epochs"]):
            for idx in H.batches(len(trX), p["batch"], rng):
                ids, lengths = pad([trX[i] for i in idx])
                gold, _ = pad([trY[i] for i in idx])
                optimizer.zero_grad()
                scores = model(ids.clamp(min=0), lengths)
                loss = nn.functional.cross_entropy(scores.reshape(-1, n_tags),
                                                   gold.reshape(-1), ignore_index=-100)
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                n_words_seen += int(lengths.sum())
    model.eval()
    correct = total = 0
    with H.Clock() as pred, torch.no_grad():
        for idx in H.batches(len(dvX), 128):
            ids, lengths = pad([dvX[i] for i in idx])
            gold, _ = pad([dvY[i] for i in idx])
            guess = torch.softmax(model(ids.clamp(min=0), lengths), dim=2).argmax(dim=2)
            mask = gold != -100
            correct += int((guess[mask] == gold[mask]).sum())
            total += int(mask.sum())
    return _result(n_words_seen, train, total, pred, correct, p["epochs"])


def _result(n_words_seen, train, n_pred, pred, correct, epochs) -> Dict[str, Any]:
    out: Dict[str, Any] = {"words": n_words_seen, "accuracy": correct / n_pred, "epochs": epochs}
    out.update(H.throughput_fields("train", n_words_seen, train))
    out.update(H.throughput_fields("predict", n_pred, pred))
    return out


def main(argv=None) -> None:
    parsed = H.sized_command_line(argv, __doc__, DEFAULTS, QUICK, work)
    if parsed is None:  # a child: work() ran
        return
    _, args, params = parsed
    H.parent_main(__file__, args, params, "Turkish UPOS BiLSTM tagger (bench/lstm_tagger.py)",
                  COLUMNS)


if __name__ == "__main__":
    main(sys.argv[1:])
