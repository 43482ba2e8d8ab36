"""Where a training step's time goes: data, forward, loss, backward, update; plait vs thinc.

    .venv/bin/python bench/step_phases.py --model mlp --width 64 --batch 64 [--peers thinc91]
    .venv/bin/python bench/step_phases.py --model tagger --width 128 --hidden 256 --batch 64
    .venv/bin/python bench/step_phases.py --model textcat --width 128 --batch 64 --n-rows 2000

The models, data and batches are those of mlp.py, textcat_cnn.py and lstm_tagger.py (their
own build_model). Each child trains `warmup` steps, then times `steps` more, each phase with
the process's CPU clock: assembling the batch from the data (indexing, lists), the forward
pass (begin_update), the loss's gradient, the backward pass (the callback) and the optimizer
(finish_update). The table shows the mean microseconds a step per phase (median over the
rounds); the ratio table, peer / plait per phase (above 1: plait spends less there). It says
which part of a cell's ratio comes from where, not how fast a whole epoch runs: for that,
the model scripts and matrix.py.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy

import _harness as H

DEFAULTS = dict(model="mlp", width=64, hidden=128, batch=64, n_rows=2000, pieces=3, dropout=0.2,
                depth=2, steps=200, warmup=20, learn_rate=0.001)
QUICK = dict(model="mlp", width=32, hidden=32, batch=16, n_rows=500, pieces=3, dropout=0.2,
             depth=2, steps=5, warmup=2, learn_rate=0.001)
MODELS = ("mlp", "textcat", "tagger")
PHASES = ("batch", "forward", "loss", "backward", "update")
FRAMEWORKS = ("plait", "thinc91", "thinc83")

COLUMNS = [H.Column("step_us", "step us", "{:,.0f}", higher_is_better=False)] + [
    H.Column(f"{phase}_us", f"{phase} us", "{:,.1f}", higher_is_better=False) for phase in PHASES
] + [H.Column("steps", "steps", "{:,.0f}")]


def _setup(api, p: Dict[str, Any]) -> Tuple[Any, Any, int, Callable[[numpy.ndarray], Tuple[Any, Any]]]:
    """(model, loss, number of training examples, batch(idx) -> (X, Y)) for p["model"], from
    that model script's own training_parts() on its whole training split."""
    if p["model"] == "mlp":
        import mlp

        Xtr, ytr, _, _ = H.load_mnist(20000, 1)
        model, loss, batch = mlp.training_parts(api, p, Xtr, ytr)
        return model, loss, len(Xtr), batch
    if p["model"] == "textcat":
        import textcat_cnn

        docs, y, _, _ = H.load_rotten_tomatoes(None, 1)
        model, loss, batch = textcat_cnn.training_parts(api, p, docs, y)
        return model, loss, len(docs), batch
    if p["model"] == "tagger":
        import lstm_tagger

        trX, trY, _, _, n_words, n_tags = H.load_turkish_tagging(None, 1)
        model, loss, batch = lstm_tagger.training_parts(api, p, trX, trY, n_words, n_tags)
        return model, loss, len(trX), batch
    raise ValueError(f"bench/step_phases.py: --model must be one of {', '.join(MODELS)}, got {p['model']!r}.")


def work(framework: str, p: Dict[str, Any]) -> Dict[str, Any]:
    api = H.import_api(framework)
    api.set_current_ops(api.NumpyOps())
    model, loss, n_train, make_batch = _setup(api, p)
    optimizer = api.Adam(p["learn_rate"], use_averages=False)
    rng = numpy.random.default_rng(p["seed"])
    clock = time.process_time
    spent = dict.fromkeys(PHASES, 0.0)
    done = 0
    while done < p["warmup"] + p["steps"]:
        for idx in H.batches(n_train, p["batch"], rng):
            t0 = clock()
            X, Y = make_batch(idx)
            t1 = clock()
            Yh, backprop = model.begin_update(X)
            t2 = clock()
            dY = loss.get_grad(Yh, Y)
            t3 = clock()
            backprop(dY)
            t4 = clock()
            model.finish_update(optimizer)
            t5 = clock()
            if done >= p["warmup"]:
                for phase, took in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                    spent[phase] += took
            done += 1
            if done == p["warmup"] + p["steps"]:
                break
    n = p["steps"]
    out: Dict[str, Any] = {f"{phase}_us": spent[phase] / n * 1e6 for phase in PHASES}
    out["step_us"] = sum(spent.values()) / n * 1e6
    out["steps"] = n
    return out


def main(argv: Optional[List[str]] = None) -> None:
    parsed = H.sized_command_line(argv, __doc__, DEFAULTS, QUICK, work)
    if parsed is None:  # a child: work() ran
        return
    _, args, params = parsed
    if params["model"] not in MODELS:
        raise SystemExit(f"bench/step_phases.py: --model must be one of {', '.join(MODELS)}, got {params['model']!r}.")
    if params["steps"] < 1 or params["warmup"] < 0:
        raise SystemExit(f"bench/step_phases.py: --steps must be at least 1 and --warmup at least 0, "
                         f"got {params['steps']} and {params['warmup']}.")
    H.parent_main(__file__, args, params, f"Step phases, {params['model']} (bench/step_phases.py)",
                  COLUMNS, known=FRAMEWORKS)


if __name__ == "__main__":
    main(sys.argv[1:])
