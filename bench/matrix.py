"""The benchmark matrix (issue 19): MLP, text CNN and tagger over widths, batch sizes and features.

    .venv/bin/python bench/matrix.py [--models mlp,textcat,tagger] [--widths 64,128,256,512]
        [--batches 16,64,256] [--rounds 3] [--peers thinc91,torch] [--threads 1]
        [--json PATH] [--resume-json PATH] [--quick]

Each cell (model x width x batch, and for the text models x a feature setting) is one run of
the model's own script (mlp.py, textcat_cnn.py, lstm_tagger.py) in a child process with
--width/--batch (and --n-rows or --hidden), --rounds, --threads, --peers and --json: the
scripts' alternating rounds and medians are used as they are. This script only collects
their JSON and prints, per model, plait/peer ratios per CPU-second and per wall second, each
framework's accuracy, then the minimum and median ratio over the cells and the cells below
the 1.5x target.

Feature settings: the text CNN's HashEmbed rows (--cnn-rows, default 2000,5000); the
tagger's BiLSTM output width as a multiple of the embedding width (--tagger-hidden, default
1,2: hidden = 1x or 2x width; the default tagger is width 64, hidden 128). The tagger's Embed
has one row per training-set word, which the data fixes.

Training length: the text CNN trains its script's epochs. The MLP trains at least
--mlp-min-updates updates (default 1,000; not with --quick): its script's 2 epochs are 157
updates at batch 256, a third of a second of plait's training at width 64, where this shared
machine's speed moved by up to 2x from one process to the next, so rounds that short compared
noise. The tagger trains at
least --tagger-min-updates updates (default 60, about one epoch at batch 64): at batch 256 one
epoch of its 3,941 sentences is 16 updates, after which no library has learned more than the
majority tag, so its accuracy would compare noise. Throughput counts every epoch.

A long matrix can run in pieces: --resume-json PATH reads the cells measured before (same
model, width, batch, setting, rounds, threads and --quick, with every requested peer present),
skips them, and writes the file again after every new cell; --report-only prints the
tables of what the file holds without measuring. Stop a run with Ctrl-C between or during
cells: the finished cells are in the file.

The GEMM ceiling and what it allows: before the cells (and after them) a child measures the
best single product rate of this machine (float32 2048^3 through numpy, plait's ops.gemm and
torch where importable, best of 8, per CPU-second: _harness.measure_gemm_ceiling), or
--ceiling GFLOPS gives it. Each cell then shows the multiply-adds of plait's products per
unit (work_macs: every product of the forward and the backward, as plait's layers compute
them) as a share of that ceiling ("plait % ceiling"), and per peer the **ceiling bound**:
the plait/peer ratio plait would reach if its products ran at the ceiling and nothing else
took any time (the peer's time per unit over plait's products' time at the ceiling). A cell
whose bound is below a target cannot meet it by faster code around the products, only with
products above the ceiling's rate or with fewer of them. The text CNN's backward is sparse
(Maxout's dX and dW for each output's winning piece only, a third of thinc's dense backward
at 3 pieces), so its bound is against plait's sparse work.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import _harness as H
from mlp import train_flops_per_example

TARGET_MIN = 1.5  # issue 19: every cell >= 1.5x thinc 9.1.1 per CPU-second
TARGET_MEDIAN = 2.0  # ... and the median >= 2x
ACCURACY_SLACK = 0.005  # accuracy within 0.5 points of thinc
TAGGER_TAGS = 14  # the Turkish Web Treebank's UPOS tags (the tagger's Softmax width)
CEILING_N = 2048  # the GEMM ceiling's product: float32 (n, n) @ (n, n)

# model -> (script, unit, feature setting: (param, flag, header) or None)
MODELS: Dict[str, Tuple[str, str, Optional[Tuple[str, str, str]]]] = {
    "mlp": ("mlp.py", "ex", None),
    "textcat": ("textcat_cnn.py", "docs", ("n_rows", "--n-rows", "rows")),
    "tagger": ("lstm_tagger.py", "words", ("hidden", "--hidden", "hidden")),
}
TITLES = {
    "mlp": "MNIST MLP (mlp.py)",
    "textcat": "Rotten Tomatoes text CNN (textcat_cnn.py)",
    "tagger": "Turkish UPOS BiLSTM tagger (lstm_tagger.py)",
}
FULL = dict(widths="64,128,256,512", batches="16,64,256", cnn_rows="2000,5000",
            tagger_hidden="1,2")
QUICK = dict(widths="32", batches="16,64", cnn_rows="1000", tagger_hidden="2")


def _ints(text: str) -> List[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mlp,textcat,tagger",
                   help="comma list of mlp,textcat,tagger (default all three)")
    p.add_argument("--widths", default=None,
                   help=f"comma list (default {FULL['widths']}; --quick {QUICK['widths']})")
    p.add_argument("--batches", default=None,
                   help=f"comma list (default {FULL['batches']}; --quick {QUICK['batches']})")
    p.add_argument("--cnn-rows", default=None,
                   help=f"text CNN HashEmbed rows (default {FULL['cnn_rows']}; "
                        f"--quick {QUICK['cnn_rows']})")
    p.add_argument("--tagger-hidden", default=None,
                   help=f"tagger BiLSTM width as multiples of --width (default "
                        f"{FULL['tagger_hidden']}; --quick {QUICK['tagger_hidden']})")
    p.add_argument("--tagger-min-updates", type=int, default=60,
                   help="the tagger trains more epochs where one epoch makes fewer updates "
                        "than this (default 60; 0: one epoch at every batch size)")
    p.add_argument("--mlp-min-updates", type=int, default=1000,
                   help="the MLP trains more epochs where its 2 make fewer updates than this "
                        "(default 1000; 0: its script's epochs; --quick: its script's epochs)")
    p.add_argument("--rounds", type=int, default=3,
                   help="alternating rounds per cell; medians (default 3; --quick: 1)")
    p.add_argument("--peers", default="thinc91,torch",
                   help="comma list of thinc91,thinc83,torch, or 'none' (default thinc91,torch)")
    p.add_argument("--threads", type=int, default=1, help="threads per child (default 1)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: a tiny matrix of the scripts' --quick runs, one round")
    p.add_argument("--json", default=None, metavar="PATH",
                   help="write every cell (the scripts' whole JSON) and the summary to PATH")
    p.add_argument("--resume-json", default=None, metavar="PATH",
                   help="skip the cells already in PATH (from an earlier --json); the "
                        "results are written back to PATH unless --json names another file")
    p.add_argument("--report-only", action="store_true",
                   help="measure nothing: print the tables of the requested cells found in "
                        "--resume-json")
    p.add_argument("--timeout", type=float, default=1800.0,
                   help="seconds one framework's child may run (passed to the scripts)")
    p.add_argument("--ceiling", default="measure", metavar="GFLOPS|measure|off",
                   help="the single-thread GEMM ceiling, GFLOP per CPU-second, for the "
                        "'plait %% ceiling' and 'bound' columns: measured before and after "
                        "the cells (default; --report-only uses the file's), a number, or off")
    return p


def ceiling_arg(text: str) -> Optional[float]:
    """--ceiling as a number of GFLOP per CPU-second; None for 'measure' and 'off'."""
    value = text.strip().lower()
    if value in ("measure", "off"):
        return None
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not number > 0 or number == float("inf"):
        raise SystemExit(f"matrix: --ceiling {text!r} is not a GEMM ceiling. Give GFLOP per "
                         "CPU-second as a positive number (e.g. 105), 'measure' or 'off'.")
    return number


def work_macs(cell: Dict[str, Any]) -> Optional[float]:
    """Multiply-adds of plait's products per training unit of `cell` (MLP example, text CNN
    document, tagger word): the forward's, the input gradient's and the weight gradient's.
    None where the cell's result lacks what it takes (e.g. the text CNN's word count)."""
    result = cell.get("result", {})
    params = result.get("params", {})
    width = int(params.get("width", cell["width"]))
    if cell["model"] == "mlp":
        return train_flops_per_example(width, int(params.get("depth", 2))) / 2.0
    if cell["model"] == "textcat":
        plait = result.get("medians", {}).get("plait", {})
        if not plait.get("docs") or not plait.get("words"):
            return None
        pieces = int(params.get("pieces", 3))
        n_in = 3 * width  # expand_window(1): [previous, token, next]
        # Maxout: the forward over every piece; dX and dW over each output's winner only.
        per_token = (pieces + 2.0) * n_in * width
        per_doc = 3.0 * width * 2  # Softmax(2) over the mean
        return plait["words"] / plait["docs"] * per_token + per_doc
    if cell["model"] == "tagger":
        hidden = int(params.get("hidden", cell["setting"]))
        # Two directions of hidden/2 units: 4 gates over the input and the previous output.
        lstm = 4.0 * hidden * (width + hidden / 2)
        return 3.0 * (lstm + hidden * TAGGER_TAGS)
    return None


# ---------------------------------------------------------------------------------------
# Cells


def plan_cells(args: argparse.Namespace) -> List[Dict[str, Any]]:
    base = QUICK if args.quick else FULL
    widths = _ints(args.widths or base["widths"])
    batch_sizes = _ints(args.batches or base["batches"])
    settings = {
        "mlp": [None],
        "textcat": _ints(args.cnn_rows or base["cnn_rows"]),
        "tagger": _ints(args.tagger_hidden or base["tagger_hidden"]),
    }
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit(f"matrix: unknown model(s) {unknown}; known: {', '.join(MODELS)}")
    cells = []
    for model in models:
        for width in widths:
            for batch in batch_sizes:
                for value in settings[model]:
                    cell = {"model": model, "width": width, "batch": batch, "setting": value}
                    if model == "tagger":
                        cell["setting"] = value * width  # hidden = multiple of the width
                        cell["min_updates"] = args.tagger_min_updates
                    elif model == "mlp" and args.mlp_min_updates and not args.quick:
                        cell["min_updates"] = args.mlp_min_updates
                    cells.append(cell)
    return cells


def cell_key(cell: Dict[str, Any], args: argparse.Namespace) -> Tuple:
    return (cell["model"], cell["width"], cell["batch"], cell["setting"],
            1 if args.quick else args.rounds, args.threads, bool(args.quick),
            cell.get("min_updates", 0))


def stored_key(c: Dict[str, Any]) -> Tuple:
    # Cells stored before --tagger-min-updates existed trained one epoch: min_updates 0.
    return (c["model"], c["width"], c["batch"], c["setting"], c["rounds"], c["threads"],
            bool(c["quick"]), c.get("min_updates", 0))


def cell_label(cell: Dict[str, Any]) -> str:
    setting = MODELS[cell["model"]][2]
    extra = f" {setting[2]}={cell['setting']}" if setting else ""
    return f"{cell['model']} width={cell['width']} batch={cell['batch']}{extra}"


def run_cell(cell: Dict[str, Any], args: argparse.Namespace, peers: str) -> Dict[str, Any]:
    """Run the model's script for one cell; its --json blob (or {'error': ...})."""
    script, _, setting = MODELS[cell["model"]]
    with tempfile.TemporaryDirectory(prefix="plait-matrix-") as tmp:
        out_json = Path(tmp) / "cell.json"
        cmd = [sys.executable, str(H.BENCH_DIR / script), "--width", str(cell["width"]),
               "--batch", str(cell["batch"]), "--rounds", str(args.rounds),
               "--threads", str(args.threads), "--peers", peers, "--timeout", str(args.timeout),
               "--json", str(out_json)]
        if setting:
            cmd += [setting[1], str(cell["setting"])]
        if cell.get("min_updates"):
            cmd += ["--min-updates", str(cell["min_updates"])]
        if args.quick:
            cmd.append("--quick")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, cwd=str(H.REPO_DIR), env=env)
        lines: List[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            # The scripts' progress and skip lines; their tables are reprinted below.
            if line.startswith("[") or "FAILED" in line:
                print("    " + line.rstrip("\n"), flush=True)
        rc = proc.wait()
        if rc != 0 or not out_json.exists():
            return {"error": f"{script} exited {rc}:\n" + "\n".join(lines[-20:])}
        return json.loads(out_json.read_text())


def cell_figures(cell: Dict[str, Any], frameworks: Sequence[str],
                 ceiling: Optional[float] = None) -> Dict[str, Any]:
    """Per framework the median train throughput (CPU and wall) and accuracy; plait/peer
    ratios per CPU-second and per wall second; with a GEMM ceiling (GFLOP per CPU-second),
    plait's products' share of it and per peer the ceiling bound (module docstring)."""
    medians = cell.get("result", {}).get("medians", {})
    figs: Dict[str, Any] = {"per_cpu_s": {}, "per_s": {}, "accuracy": {}, "ratio_cpu": {},
                            "ratio_wall": {}, "ceiling_frac": None, "bound": {}}
    for name in frameworks:
        m = medians.get(name)
        if not m:
            continue
        figs["per_cpu_s"][name] = m.get("train_per_cpu_s")
        figs["per_s"][name] = m.get("train_per_s")
        figs["accuracy"][name] = m.get("accuracy")
    base = medians.get("plait", {})
    for name in frameworks:
        if name == "plait" or name not in medians:
            continue
        figs["ratio_cpu"][name] = H.ratio(base.get("train_per_cpu_s"),
                                          medians[name].get("train_per_cpu_s"), True)
        figs["ratio_wall"][name] = H.ratio(base.get("train_per_s"),
                                           medians[name].get("train_per_s"), True)
    macs = work_macs(cell)
    if ceiling and macs:
        gflop = 2.0 * macs / 1e9  # plait's products per unit
        if base.get("train_per_cpu_s"):
            figs["ceiling_frac"] = base["train_per_cpu_s"] * gflop / ceiling
        for name in frameworks:
            rate = medians.get(name, {}).get("train_per_cpu_s") if name != "plait" else None
            if rate:
                figs["bound"][name] = ceiling / (rate * gflop)
    return figs


# ---------------------------------------------------------------------------------------
# Report


def _fmt(v: Any, fmt: str) -> str:
    return H.format_value(v, fmt)


def model_table(model: str, cells: List[Dict[str, Any]], frameworks: Sequence[str]) -> str:
    setting = MODELS[model][2]
    unit = MODELS[model][1]
    peers = [f for f in frameworks if f != "plait"]
    headers = ["width", "batch"] + ([setting[2]] if setting else [])
    headers += [f"{f} {unit}/CPU-s" for f in frameworks]
    for p in peers:
        headers += [f"vs {p} CPU", f"vs {p} wall"]
    with_ceiling = any(c["figures"].get("ceiling_frac") for c in cells)
    if with_ceiling:
        headers += ["plait % ceiling"] + [f"bound vs {p}" for p in peers]
    headers += [f"acc {f}" for f in frameworks]
    rows = []
    for c in cells:
        figs = c["figures"]
        row = [str(c["width"]), str(c["batch"])] + ([str(c["setting"])] if setting else [])
        row += [_fmt(figs["per_cpu_s"].get(f), "{:,.0f}") for f in frameworks]
        for p in peers:
            row += [_fmt(figs["ratio_cpu"].get(p), "{:.2f}x"),
                    _fmt(figs["ratio_wall"].get(p), "{:.2f}x")]
        if with_ceiling:
            row += [_fmt(figs.get("ceiling_frac"), "{:.0%}")]
            row += [_fmt(figs.get("bound", {}).get(p), "{:.2f}x") for p in peers]
        row += [_fmt(figs["accuracy"].get(f), "{:.4f}") for f in frameworks]
        rows.append(row)
    return H.render_table(headers, rows)


def summarize(cells: List[Dict[str, Any]], frameworks: Sequence[str]) -> Dict[str, Any]:
    """Per peer: min and median plait/peer ratio per CPU-s and per wall over `cells`, the
    cells below TARGET_MIN (per CPU-s), and where plait's accuracy trails by > 0.5 points."""
    out: Dict[str, Any] = {}
    for peer in frameworks:
        if peer == "plait":
            continue
        entry: Dict[str, Any] = {}
        for kind in ("cpu", "wall"):
            pairs = [(c["figures"][f"ratio_{kind}"].get(peer), c) for c in cells]
            pairs = [(r, c) for r, c in pairs if r is not None]
            if not pairs:
                continue
            lo = min(pairs, key=lambda rc: rc[0])
            entry[kind] = {"cells": len(pairs), "min": lo[0], "min_cell": cell_label(lo[1]),
                           "median": statistics.median(r for r, _ in pairs)}
            if kind == "cpu":
                entry["below_target"] = [
                    {"cell": cell_label(c), "ratio": r} for r, c in pairs if r < TARGET_MIN]
        behind = []
        for c in cells:
            acc = c["figures"]["accuracy"]
            # The target compares accuracy with thinc; torch initialises differently.
            if peer.startswith("thinc") and acc.get("plait") is not None \
                    and acc.get(peer) is not None \
                    and acc["plait"] < acc[peer] - ACCURACY_SLACK:
                behind.append({"cell": cell_label(c), "plait": acc["plait"], peer: acc[peer]})
        entry["accuracy_behind"] = behind
        bounds = [(c["figures"].get("bound", {}).get(peer), c) for c in cells]
        bounds = [(b, c) for b, c in bounds if b is not None]
        if bounds:
            entry["bound"] = {
                "cells": len(bounds), "median": statistics.median(b for b, _ in bounds),
                "below_min": [{"cell": cell_label(c), "bound": b}
                              for b, c in bounds if b < TARGET_MIN],
                "below_median": sum(b < TARGET_MEDIAN for b, _ in bounds)}
        if len(entry) > 1 or "cpu" in entry:
            out[peer] = entry
    return out


def summary_lines(summary: Dict[str, Any], scope: str) -> List[str]:
    lines = []
    for peer, e in summary.items():
        if "cpu" not in e:
            continue
        cpu, wall = e["cpu"], e.get("wall", {})
        lines.append(
            f"{scope}: plait/{peer} per CPU-s over {cpu['cells']} cells: "
            f"min {cpu['min']:.2f}x ({cpu['min_cell']}), median {cpu['median']:.2f}x"
            + (f"; per wall s: min {wall['min']:.2f}x, median {wall['median']:.2f}x"
               if wall else ""))
        below = e.get("below_target", [])
        if peer == "thinc91" or below:
            if below:
                lines.append(f"  below {TARGET_MIN}x {peer} per CPU-s ({len(below)}): "
                             + "; ".join(f"{b['cell']} {b['ratio']:.2f}x" for b in below))
            else:
                lines.append(f"  no cell below {TARGET_MIN}x {peer} per CPU-s")
        if peer == "thinc91":
            ok_min = cpu["min"] >= TARGET_MIN
            ok_med = cpu["median"] >= TARGET_MEDIAN
            lines.append(f"  issue 19 target (every cell >= {TARGET_MIN}x, median >= "
                         f"{TARGET_MEDIAN}x): min {'met' if ok_min else 'NOT met'}, "
                         f"median {'met' if ok_med else 'NOT met'}")
        bound = e.get("bound")
        if bound:
            low = bound["below_min"]
            lines.append(
                f"  ceiling bound vs {peer} (products at the GEMM ceiling, nothing else): "
                f"median {bound['median']:.2f}x; below {TARGET_MEDIAN}x in "
                f"{bound['below_median']} of {bound['cells']} cells; below {TARGET_MIN}x in "
                f"{len(low)}" + (": " + "; ".join(f"{b['cell']} {b['bound']:.2f}x" for b in low)
                                 if low else ""))
        for b in e.get("accuracy_behind", []):
            lines.append(f"  accuracy: plait {b['plait']:.4f} < {peer} {b[peer]:.4f} - 0.005 "
                         f"in {b['cell']}")
    return lines


def print_report(args: argparse.Namespace, cells: List[Dict[str, Any]],
                 frameworks: Sequence[str], models: Sequence[str],
                 ceiling: Optional[float] = None) -> Dict[str, Any]:
    ms = H.machine_summary()
    rounds = 1 if args.quick else args.rounds
    print()
    print("# Benchmark matrix (bench/matrix.py)")
    print(f"threads={args.threads}  rounds={rounds} (median)  cpus={ms['cpus']}  "
          f"cpu={ms['cpu'] or '?'}  loadavg(now)={'/'.join(str(x) for x in ms['loadavg'])}  "
          f"plait@{ms['plait_commit'] or '?'}")
    print("Ratios are plait/peer training throughput (>1: plait faster), from each "
          "framework's median over the rounds; 'CPU' per CPU-second, 'wall' per second.")
    if ceiling:
        print(f"GEMM ceiling: {ceiling:.1f} GFLOP per CPU-second. 'plait % ceiling': plait's "
              "products per CPU-second as a share of it; 'bound': the ratio plait would reach "
              "with its products at the ceiling and nothing else (bench/matrix.py's docstring).")
    summaries: Dict[str, Any] = {}
    for model in models:
        mine = [c for c in cells if c["model"] == model and "error" not in c["result"]]
        failed = [c for c in cells if c["model"] == model and "error" in c["result"]]
        if not mine and not failed:
            continue
        print()
        print(f"## {TITLES[model]}")
        if mine:
            print(model_table(model, mine, frameworks))
            summaries[model] = summarize(mine, frameworks)
            lines = summary_lines(summaries[model], model)
            print()
            for line in lines or [f"{model}: no peer ran, so no ratios"]:
                print(line)
        for c in failed:
            print(f"FAILED: {cell_label(c)}: {c['result']['error'].splitlines()[0]}")
    ok = [c for c in cells if "error" not in c["result"]]
    summaries["all"] = summarize(ok, frameworks)
    all_lines = summary_lines(summaries["all"], "all")
    if all_lines and len(models) > 1:
        print()
        print("## All cells")
        for line in all_lines:
            print(line)
    return summaries


# ---------------------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = make_parser().parse_args(argv)
    rounds = 1 if args.quick else args.rounds
    fws = H.resolve_frameworks(args.peers)
    for fw in fws:
        if fw.missing:
            print(f"[skip] {fw.name}: {fw.missing}", flush=True)
    live = [fw.name for fw in fws if not fw.missing]
    peers = ",".join(n for n in live if n != "plait") or "none"
    cells = plan_cells(args)
    models = list(dict.fromkeys(c["model"] for c in cells))

    out_path = args.json or args.resume_json
    done: Dict[Tuple, Dict[str, Any]] = {}
    fixed_ceiling = ceiling_arg(args.ceiling)
    measure = args.ceiling.strip().lower() == "measure"
    measured: Dict[str, Dict[str, float]] = {}
    if args.resume_json and Path(args.resume_json).exists():
        stored = json.loads(Path(args.resume_json).read_text())
        measured = H.merge_ceilings(stored.get("gemm_ceiling") or {})
        for c in stored.get("cells", []):
            medians = c.get("result", {}).get("medians", {})
            if "error" not in c.get("result", {}) and all(n in medians for n in live):
                done[stored_key(c)] = c
    # Cells of an earlier run that this one does not ask for are kept in the file.
    kept = dict(done)

    todo = [] if args.report_only else [c for c in cells if cell_key(c, args) not in done]
    n_done = sum(cell_key(c, args) in done for c in cells)
    print(f"matrix: {len(cells)} cells, {n_done} already in {args.resume_json or '-'}, "
          f"{len(todo)} to run; frameworks: {', '.join(live)}", flush=True)

    def measure_ceiling() -> None:
        if measure:
            print(f"GEMM ceiling: float32 {CEILING_N}^3, {args.threads} thread(s)...", flush=True)
            measured.update(H.merge_ceilings(measured, H.gemm_ceiling(args.threads, n=CEILING_N)))

    def ceiling() -> Optional[float]:
        if fixed_ceiling is not None:
            return fixed_ceiling
        if not measure or not measured:
            return None
        return max(v["cpu"] for v in measured.values())

    def save() -> None:
        if not out_path:
            return
        ordered = list(kept.values())
        for c in ordered:
            c["figures"] = cell_figures(c, live, ceiling())
        blob = {"matrix": {k: v for k, v in vars(args).items()}, "frameworks": live,
                "machine": H.machine_summary(), "cells": ordered,
                "gemm_ceiling": measured, "ceiling_gflops_cpu": ceiling(),
                "summary": summarize([c for c in ordered if "error" not in c["result"]], live)}
        tmp = Path(str(out_path) + ".tmp")
        tmp.write_text(json.dumps(blob, indent=1, sort_keys=True))
        os.replace(tmp, out_path)

    if todo:
        measure_ceiling()
    for i, cell in enumerate(todo):
        t0, load0 = time.perf_counter(), os.getloadavg()[0]
        print(f"[cell {i + 1}/{len(todo)}] {cell_label(cell)}  (load {load0:.2f})", flush=True)
        result = run_cell(cell, args, peers)
        cell.update(rounds=rounds, threads=args.threads, quick=bool(args.quick), peers=peers,
                    started_load=load0, seconds=time.perf_counter() - t0,
                    when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), result=result)
        if "error" in result:
            print(f"    FAILED: {result['error']}", flush=True)
        kept[cell_key(cell, args)] = cell
        save()

    if todo:
        measure_ceiling()  # again after the cells: the best of both stands for the machine
    report_cells = []
    for cell in cells:
        c = kept.get(cell_key(cell, args))
        if c is not None:
            c["figures"] = cell_figures(c, live, ceiling())
            report_cells.append(c)
    summaries = print_report(args, report_cells, live, models, ceiling())
    if out_path and not args.report_only:
        save()
        blob = json.loads(Path(out_path).read_text())
        blob["report_summary"] = summaries
        Path(out_path).write_text(json.dumps(blob, indent=1, sort_keys=True))
    if not any("error" not in c["result"] for c in report_cells):
        raise SystemExit("matrix: no cell produced a result (see the FAILED lines above)")


if __name__ == "__main__":
    main(sys.argv[1:])
