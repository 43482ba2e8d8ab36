"""Where a training step's time goes: data, forward, loss, backward, update; plait vs thinc.

    .venv/bin/python bench/step_phases.py --model mlp --width 64 --batch 64 [--peers thinc91]
    .venv/bin/python bench/step_phases.py --model tagger --width 128 --hidden 256 --batch 64
    .venv/bin/python bench/step_phases.py --model textcat --width 128 --batch 64 --n-rows 2000
    .venv/bin/python bench/step_phases.py --model mlp --width 512 --batch 256 --ops 12

The models, data and batches are those of mlp.py, textcat_cnn.py and lstm_tagger.py (their
own build_model). Each child trains `warmup` steps, then times `steps` more, each phase with
the process's CPU clock: assembling the batch from the data (indexing, lists), the forward
pass (begin_update), the loss's gradient, the backward pass (the callback) and the optimizer
(finish_update). The table shows the mean microseconds a step per phase (median over the
rounds); the ratio table, peer / plait per phase (above 1: plait spends less there). It says
which part of a cell's ratio comes from where, not how fast a whole epoch runs: for that,
the model scripts and matrix.py.

--ops N also times each method of the framework's Ops object over the timed steps, exclusive
of the Ops methods it calls (a private one counts as part of the method that calls it, and
under its own name where a layer calls it), and prints
the N that take the most time in any framework: microseconds and calls a step in each, and
peer / plait. What no Ops method covers (the layers' own Python, the optimizer where it does
not go through Ops) is the step's time less their sum. The timers cost about 2 µs a call (two
reads of the CPU clock; Zen 4, Python 3.11), and a method that calls others pays it for each:
the phase figures of such a run include that, so compare phases with runs without --ops.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy

import _harness as H

DEFAULTS = dict(model="mlp", width=64, hidden=128, batch=64, n_rows=2000, pieces=3, dropout=0.2,
                depth=2, steps=200, warmup=20, learn_rate=0.001, ops=0)
QUICK = dict(model="mlp", width=32, hidden=32, batch=16, n_rows=500, pieces=3, dropout=0.2,
             depth=2, steps=5, warmup=2, learn_rate=0.001, ops=0)
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


class OpTimers:
    """Exclusive CPU time and calls of every method of one Ops object, while `on`."""

    def __init__(self, ops: Any) -> None:
        self.us: Dict[str, float] = {}
        self.calls: Dict[str, int] = {}
        self.on = False
        self._stack: List[float] = []
        for name in dir(ops):
            if name.startswith("__"):
                continue
            try:
                method = getattr(ops, name)
            except Exception:  # a property that needs state the object lacks
                continue
            if callable(method) and not isinstance(method, type):
                setattr(ops, name, self._timed(name, method))

    def _timed(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        clock, stack = time.process_time, self._stack
        private = name.startswith("_")

        def timed(*args: Any, **kwargs: Any) -> Any:
            # A private helper counts as part of the method that called it (plait's gemm and
            # its _gemm), and under its own name where a layer calls it.
            if not self.on or (private and stack):
                return method(*args, **kwargs)
            stack.append(0.0)
            t0 = clock()
            try:
                return method(*args, **kwargs)
            finally:
                took = clock() - t0
                inner = stack.pop()
                self.us[name] = self.us.get(name, 0.0) + (took - inner) * 1e6
                self.calls[name] = self.calls.get(name, 0) + 1
                if stack:
                    stack[-1] += took

        return timed


def work(framework: str, p: Dict[str, Any]) -> Dict[str, Any]:
    api = H.import_api(framework)
    ops = api.NumpyOps()
    timers = OpTimers(ops) if p["ops"] > 0 else None
    if timers is not None:
        timers.on = p["warmup"] == 0
    api.set_current_ops(ops)
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
            if timers is not None:
                timers.on = done >= p["warmup"]
            if done == p["warmup"] + p["steps"]:
                break
    n = p["steps"]
    out: Dict[str, Any] = {f"{phase}_us": spent[phase] / n * 1e6 for phase in PHASES}
    out["step_us"] = sum(spent.values()) / n * 1e6
    out["steps"] = n
    if timers is not None:
        out["op_us"] = {name: us / n for name, us in timers.us.items()}
        out["op_calls"] = {name: calls / n for name, calls in timers.calls.items()}
    return out


def op_table(medians: Dict[str, Dict[str, Any]], names: List[str], top: int) -> List[List[str]]:
    """Rows of the --ops table: the `top` methods by their largest time in any framework."""
    ran = [name for name in names if "op_us" in medians.get(name, {})]
    every = sorted({op for name in ran for op in medians[name]["op_us"]},
                   key=lambda op: -max(medians[name]["op_us"].get(op, 0.0) for name in ran))
    rows = []
    for op in every[:top]:
        row = [op]
        for name in ran:
            row += [f"{medians[name]['op_us'].get(op, 0.0):,.1f}", f"{medians[name]['op_calls'].get(op, 0):.1f}"]
        mine = medians.get("plait", {}).get("op_us", {}).get(op, 0.0)
        for name in ran:
            if name != "plait":
                theirs = medians[name]["op_us"].get(op, 0.0)
                row.append(f"{theirs / mine:.2f}" if mine > 0 and theirs > 0 else "-")
        rows.append(row)
    return rows


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
    if params["ops"] < 0:
        raise SystemExit(f"bench/step_phases.py: --ops must be 0 (off) or how many Ops methods to show, "
                         f"got {params['ops']}.")
    medians = H.parent_main(__file__, args, params, f"Step phases, {params['model']} (bench/step_phases.py)",
                            COLUMNS, known=FRAMEWORKS)
    if params["ops"] > 0:
        names = [name for name in medians if "op_us" in medians[name]]
        head = ["Ops method"] + [f"{name} {what}" for name in names for what in ("us", "calls")]
        head += [f"{name} / plait" for name in names if name != "plait"]
        print(f"\nOps methods, exclusive CPU microseconds and calls a step (median over rounds), "
              f"the {params['ops']} costliest:\n")
        print(H.render_table(head, op_table(medians, names, params["ops"])))


if __name__ == "__main__":
    main(sys.argv[1:])
