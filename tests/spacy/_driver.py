"""Runs spaCy inside the spaCy venv for tests/spacy (never imported by pytest itself).

    python [-m plait.thinc_alias] _driver.py run CFG CORPUS OUT STEPS     # spacy train, evaluate, load + pipe
    python [-m plait.thinc_alias] _driver.py first-updates CFG CORPUS      # losses of three updates, predictions

Prints one line `DRIVER {json}`. `run` goes through spaCy's own command line (the code of the
`spacy` console script, in this process) so that afterwards every module the process loaded can
be checked: under the alias none may come from a real thinc's directory.
"""
from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

TRAIN_FILES = {"pipeline.cfg": ("train.spacy", "dev.spacy"), "beam.cfg": ("train_trja.spacy", "dev_trja.spacy")}
TESTS = {"pipeline.cfg": ("tr", "ja", "rt"), "beam.cfg": ("tr", "ja")}


def thinc_directory_modules():
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if f"{os.sep}thinc{os.sep}" in path:
            found.append(f"{name}: {path}")
    return found


def spacy_cli(*args: str) -> None:
    """`spacy ARGS...` as the console script runs it, in this process."""
    from spacy.cli import setup_cli

    saved = sys.argv
    sys.argv = ["spacy", *args]
    try:
        setup_cli()
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            raise RuntimeError(f"spacy {' '.join(args)} exited with {exit_.code}") from None
    finally:
        sys.argv = saved


def run(cfg: str, corpus: str, out: str, steps: str) -> dict:
    import spacy
    import thinc

    name = Path(cfg).name
    train, dev = TRAIN_FILES[name]
    corpus_dir, out_dir = Path(corpus), Path(out)
    spacy_cli("train", cfg, "--output", str(out_dir), "--paths.train", str(corpus_dir / train),
              "--paths.dev", str(corpus_dir / dev), "--training.max_steps", steps,
              "--training.eval_frequency", str(max(1, int(steps) // 2)))
    model = out_dir / "model-last"
    scores = {}
    for source in TESTS[name]:
        metrics = out_dir / f"metrics-{source}.json"
        spacy_cli("evaluate", str(model), str(corpus_dir / f"test_{source}.spacy"), "--gold-preproc",
                  "--output", str(metrics))
        scores[source] = json.loads(metrics.read_text())
    nlp = spacy.load(model)
    with open(corpus_dir / "texts.jsonl", encoding="utf8") as f:
        texts = [json.loads(line)["text"] for line in f]
    docs = list(nlp.pipe(texts[:40], batch_size=8))
    return {
        "thinc_is": thinc.__name__,
        "pipeline": nlp.pipe_names,
        "docs": len(docs),
        "tokens": sum(len(d) for d in docs),
        "ents": sum(len(d.ents) for d in docs),
        "heads_set": all(d.has_annotation("DEP") for d in docs if len(d)),
        "scores": scores,
    }


def first_updates(cfg: str, corpus: str) -> dict:
    """Losses of three updates without dropout, and the initial model's predictions.

    The same seed gives thinc and plait the same initial weights (both draw them from the
    generators spaCy seeds, in the same order) and the same forward pass, so the first losses
    agree to rounding; later ones differ only as far as float rounding moved the weights.
    """
    import spacy
    from spacy.training import Corpus
    from spacy.training.initialize import init_nlp
    from spacy.util import load_config

    name = Path(cfg).name
    train, dev = TRAIN_FILES[name]
    overrides = {"paths.train": str(Path(corpus) / train), "paths.dev": str(Path(corpus) / dev)}
    if name == "beam.cfg":
        # Both libraries take the beam path: which one a component takes is a draw from numpy's
        # generator, whose stream differs after the first dropout mask (plait draws a mask from
        # a 64-bit key; thinc draws a float per value).
        overrides.update({"components.beam_parser.beam_update_prob": 1.0,
                          "components.beam_ner.beam_update_prob": 1.0})
    nlp = init_nlp(load_config(cfg, overrides=overrides, interpolate=False))
    examples = list(Corpus(Path(corpus) / train, gold_preproc=True)(nlp))
    # Every batch takes documents of each source (the file holds them source by source).
    batches = [examples[b::7][:40] for b in range(3)]
    texts = [eg.reference.text for eg in examples[::max(1, len(examples) // 12)]]
    predicted = [
        {"tags": [t.tag_ for t in doc], "heads": [t.head.i for t in doc],
         "ents": [(e.start, e.end, e.label_) for e in doc.ents],
         "cats": {k: round(float(v), 5) for k, v in sorted(doc.cats.items())}}
        for doc in nlp.pipe(texts)
    ]
    losses = []
    for batch in batches:
        step: dict = {}
        nlp.update(batch, drop=0.0, losses=step)
        losses.append({k: float(v) for k, v in step.items()})
    return {"losses": losses, "predicted": predicted}


def main() -> None:
    # Warnings are recorded, not fatal: spaCy warns about its own matters during training; the
    # tests look for any that plait raised.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        command, *args = sys.argv[1:]
        result = {"run": run, "first-updates": first_updates}[command](*args)
    result["warnings"] = [f"{w.category.__name__} {w.filename}:{w.lineno}: {w.message}" for w in caught]
    result["thinc_directory_modules"] = thinc_directory_modules()
    print("DRIVER " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
