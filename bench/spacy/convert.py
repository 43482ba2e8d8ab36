"""Convert ../shared/data into spaCy DocBin files for the spaCy benchmarks and tests.

    python bench/spacy/convert.py OUT_DIR [--limit N] [--rt-train N]

Run it with an interpreter that has spaCy (bench/.venvs/spacy); it needs no thinc model code and
gives the same files whichever library serves `thinc`. Three sources, one pipeline language
("xx"), each document annotated for what its source has; spaCy treats the rest as missing:

* Turkish Web Treebank: tokens, TAG (XPOS), POS (UPOS, UD-v1 names mapped to v2: CONJ->CCONJ,
  PRT->PART, ONOM->INTJ, AFFIX->X), MORPH (repeated keys merged, "PersonNumber=A3sg,V3sg"),
  heads and deps ("root" -> "ROOT", as spaCy's CoNLL-U converter does). Splits: the file's.
* hironsan_ja: tokens, TAG (pos_fine) and entities (IOB2). The package's split has only 50
  test sentences (100 entities), too few to compare two trainings within a point; here
  sentences 0-349 train, 350-399 dev, 400-499 test (256 entities).
* Rotten Tomatoes: text tokenized by spaCy's "xx" tokenizer, cats {"fresh", "rotten"}. Splits:
  the file's; the train split is cut to --rt-train snippets (default 4000) so that the parser's
  and tagger's sentences are not drowned.

Writes train.spacy, dev.spacy (the three sources mixed: pipeline.cfg), train_trja.spacy,
dev_trja.spacy (the treebank and the Japanese set, which have what a parser and an NER learn:
beam.cfg), train_ja.spacy, dev_ja.spacy (the Japanese set alone: ner_ja.cfg, beam_ner_ja.cfg),
test_tr.spacy, test_ja.spacy, test_rt.spacy (held out, evaluated one by one so that each
component is scored on the source annotated for it), and texts.jsonl (the raw test texts, for
nlp.pipe). --limit N keeps the first
N documents of each source and split (the test suite's small corpus).
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Dict, List, Optional

import spacy
from spacy.tokens import Doc, DocBin

UPOS_V2 = {"CONJ": "CCONJ", "PRT": "PART", "ONOM": "INTJ", "AFFIX": "X"}
JA_SPLIT = {"train": (0, 350), "dev": (350, 400), "test": (400, 500)}


def data_dir() -> Path:
    env = os.environ.get("PLAIT_BENCH_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "data"


def read_jsonl(name: str) -> List[Dict]:
    with open(data_dir() / name, encoding="utf8") as f:
        return [json.loads(line) for line in f]


def merge_feats(feats: str) -> str:
    """CoNLL-U FEATS with repeated keys merged into one multi-valued feature."""
    values: Dict[str, List[str]] = {}
    for pair in feats.split("|"):
        if "=" not in pair:
            continue
        key, value = pair.split("=", 1)
        if value not in values.setdefault(key, []):
            values[key].append(value)
    return "|".join(f"{k}={','.join(sorted(v))}" for k, v in sorted(values.items()))


def turkish_docs(vocab, split: str, limit: Optional[int]) -> List[Doc]:
    docs = []
    for s in read_jsonl("turkish_web_treebank.jsonl"):
        if s["split"] != split:
            continue
        n = len(s["words"])
        heads = [i if h == 0 else h - 1 for i, h in enumerate(s["heads"])]
        deps = ["ROOT" if h == 0 else d for h, d in zip(s["heads"], s["deps"])]
        docs.append(Doc(vocab, words=s["words"], spaces=s["spaces"], tags=s["xpos"],
                        pos=[UPOS_V2.get(p, p) for p in s["upos"]],
                        morphs=[merge_feats(f) for f in s["feats"]],
                        heads=heads, deps=deps, sent_starts=[True] + [False] * (n - 1)))
        if limit is not None and len(docs) >= limit:
            break
    return docs


def japanese_docs(vocab, split: str, limit: Optional[int]) -> List[Doc]:
    lo, hi = JA_SPLIT[split]
    docs = []
    for s in read_jsonl("hironsan_ja.jsonl")[lo:hi][:limit]:
        docs.append(Doc(vocab, words=s["words"], spaces=[False] * len(s["words"]),
                        tags=s["pos_fine"], ents=s["ner_iob"]))
    return docs


def rotten_tomatoes_docs(nlp, split: str, limit: Optional[int]) -> List[Doc]:
    docs = []
    for r in read_jsonl("rotten_tomatoes.jsonl"):
        if r["split"] != split:
            continue
        doc = nlp.make_doc(r["text"])
        fresh = r["label"] == "fresh"
        doc.cats = {"fresh": float(fresh), "rotten": float(not fresh)}
        docs.append(doc)
        if limit is not None and len(docs) >= limit:
            break
    return docs


def write(docs: List[Doc], path: Path) -> None:
    DocBin(docs=docs, store_user_data=False).to_disk(path)
    print(f"convert: {path} ({len(docs)} docs, {sum(len(d) for d in docs)} tokens)")


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--limit", type=int, default=None,
                   help="at most N documents per source and split (default: all)")
    p.add_argument("--rt-train", type=int, default=4000,
                   help="Rotten Tomatoes train snippets (default 4000)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    nlp = spacy.blank("xx")
    lim = args.limit
    rt_train = args.rt_train if lim is None else min(lim, args.rt_train)
    for split, n_rt in (("train", rt_train), ("dev", lim)):
        trja = turkish_docs(nlp.vocab, split, lim) + japanese_docs(nlp.vocab, split, lim)
        write(trja + rotten_tomatoes_docs(nlp, split, n_rt), args.out / f"{split}.spacy")
        write(trja, args.out / f"{split}_trja.spacy")
        write(japanese_docs(nlp.vocab, split, lim), args.out / f"{split}_ja.spacy")
    tests = {"tr": turkish_docs(nlp.vocab, "test", lim), "ja": japanese_docs(nlp.vocab, "test", lim),
             "rt": rotten_tomatoes_docs(nlp, "test", lim)}
    with open(args.out / "texts.jsonl", "w", encoding="utf8") as f:
        for source, docs in tests.items():
            write(docs, args.out / f"test_{source}.spacy")
            for doc in docs:
                f.write(json.dumps({"source": source, "text": doc.text}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
