"""Smoke test of bench/distributed.py: `--quick` under mpiexec prints well-formed tables.

Checks the shape of the output (both models on 1 and 2 ranks, the allreduce rows, the cost
model's 8/64/512-worker rows, numbers where numbers belong), never the speed: this machine is
shared, and the figures belong in bench/README.md, not in assertions. Skipped, with the reason,
where mpi4py or mpiexec is missing or MPI cannot start two ranks (tests/_mpi.py's `mpi` fixture).
"""
import importlib.util
import json
import re
import subprocess
import sys

import pytest

from _mpi import REPO, env, mpi  # noqa: F401 (mpi is a fixture)
from _markdown import table_after

SCRIPT = REPO / "bench" / "distributed.py"
NUMBER = r"[0-9][0-9,]*(?:\.[0-9]+)?"


def _col(header, rows, name):
    return [r[header.index(name)] for r in rows]


def test_quick_run_prints_scaling_allreduce_and_cost_model(mpi, tmp_path):
    out_json = tmp_path / "dist.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", str(out_json)], capture_output=True,
                          text=True, cwd=str(REPO), timeout=300, env=env(), encoding="utf8")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "FAILED" not in out, out[-3000:]

    # Scaling: each model on 1 rank and on 2 ranks six ways (plait's default, the sharded update,
    # overlap off, MPI only, no allreduce, a raw one); an efficiency (a percentage) on the 2-rank
    # rows, positive throughputs.
    head, rows = table_after(out, "Weak scaling")
    assert _col(head, rows, "model") == ["MLP 784-512-512-10"] * 7 + ["text CNN"] * 7
    # "2 (overlap, k early)" where plait's DataParallel overlaps by default.
    ranks = [re.sub(r" \(overlap, .*\)$", "", r) for r in _col(head, rows, "ranks")]
    assert ranks == ["1", "2", "2 (sharded update)", "2 (overlap off)", "2 (MPI only)", "2 (no allreduce)",
                     "2 (raw Allreduce)"] * 2, rows
    for col in ("ex/s", "ex/CPU-s"):
        assert all(float(v.replace(",", "")) > 0 for v in _col(head, rows, col)), rows
    for row in rows:
        if row[head.index("ranks")] != "1":
            assert re.fullmatch(NUMBER + "%", row[head.index("efficiency (wall)")]), row
            assert re.fullmatch(NUMBER + "%", row[head.index("efficiency (CPU)")]), row

    # Allreduce: plait and mpi4py times, rates and their ratio for every buffer.
    head, rows = table_after(out, "Gradient allreduce")
    assert _col(head, rows, "buffer") == ["MLP gradients", "text CNN gradients", "4 KB", "1,024 KB"]
    for col in ("plait ms", "mpi4py ms", "plait GB/s", "mpi4py GB/s", "local copies ms", "DataParallel ms",
                "DataParallel MPI-only ms"):
        assert all(float(v) > 0 for v in _col(head, rows, col)), (col, rows)
    assert all(re.fullmatch(NUMBER + "%", v) for v in _col(head, rows, "plait/mpi4py")), rows
    assert all(re.fullmatch(NUMBER + "%", v) for v in _col(head, rows[:2], "cold: plait/mpi4py")), rows
    assert re.search(r"latency \(8-byte Allreduce, 2 ranks\): mpi4py " + NUMBER + " us", out), out

    # Cost model: 8, 64 and 512 workers per model, efficiencies as percentages.
    head, rows = table_after(out, "Cost model")
    assert _col(head, rows, "workers") == ["8", "64", "512"] * 2
    for col in ("no overlap, 1 bucket", "overlap: best", "ideal overlap: best", "halving-doubling, no overlap"):
        assert all(re.fullmatch(NUMBER + "%", v) for v in _col(head, rows, col)), (col, rows)

    blob = json.loads(out_json.read_text())
    assert blob["medians"]["1 rank"]["mlp"]["ex_per_s"] > 0
    assert blob["cost_model_inputs"]["mlp"]["grads"], blob["cost_model_inputs"]
    assert len(blob["cost_model"]) == 6


def test_cost_model_alone_needs_no_mpi():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cost-model", "--alpha-us", "20", "--gbit", "25"],
                          capture_output=True, text=True, cwd=str(REPO), timeout=60, encoding="utf8")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "alpha = 20 us" in proc.stdout and "3.125 GB/s" in proc.stdout
    head, rows = table_after(proc.stdout, "Cost model")
    assert _col(head, rows, "workers") == ["8", "64", "512"] * 2


def _load_bench():
    # Loaded from its path under its own name: `distributed` is also a PyPI package (dask's).
    spec = importlib.util.spec_from_file_location("plait_bench_distributed", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cost_model_formulas():
    bench = _load_bench()
    alpha, beta = 20e-6, 3.125e9
    # 2(n-1) steps of alpha + (S/n)/beta, nothing for one worker.
    assert bench.ring_seconds(8e6, 8, alpha, beta, 0.0) == pytest.approx(14 * (alpha + 1e6 / beta))
    assert bench.ring_seconds(8e6, 1, alpha, beta, 0.0) == 0.0
    # plait's packing never splits a tensor; a bucket is ready when its last tensor is.
    grads = [(100, 0.1), (300, 0.5), (50, 1.0)]
    assert bench.pack_buckets(grads, 350) == [(100, 0.1), (350, 1.0)]
    assert bench.pack_buckets(grads, 10) == [(100, 0.1), (300, 0.5), (50, 1.0)]
    # Without overlap one bucket is best; with it, a bucket never finishes before backprop.
    grads = [(2_000_000, 0.4), (1_000_000, 1.0)]
    _eff, lo, _hi, n_buckets = bench.best_bucket(grads, 8, 1e-3, 3e-3, 1e-3, alpha, beta, 0.0, overlap=False)
    assert n_buckets == 1 and lo >= 3_000_000
    one = bench.step_seconds(grads, 8, 1e9, 1e-3, 3e-3, 1e-3, alpha, beta, 0.0, True)
    assert one == pytest.approx(5e-3 + bench.ring_seconds(3_000_000, 8, alpha, beta, 0.0))
    two = bench.step_seconds(grads, 8, 2_000_000, 1e-3, 3e-3, 1e-3, alpha, beta, 0.0, True)
    assert 5e-3 < two < one
