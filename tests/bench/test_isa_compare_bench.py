"""Smoke test of bench/isa_compare.py: a --quick run prints one row per op with a column per
kernel build this CPU runs, the ratios to the widest build, and agreeing output sums.

Checks the shape of the output, never the speed (the figures belong in bench/README.md).
"""
import subprocess
import sys
from pathlib import Path

from plait.backends import _kernels_cpu as K

REPO = Path(__file__).resolve().parents[2]


def test_isa_compare_prints_one_column_per_build():
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "isa_compare.py"), "--quick",
                           "--only", "maxout,seq2col,gelu,lstm_forward_training"],
                          capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| op "))
    columns = [c.strip() for c in header.strip("|").split("|")]
    builds = K.runnable()
    assert columns[1:1 + len(builds)] == [f"{isa} CPU us" for isa in builds]
    assert columns[1 + len(builds):-1] == [f"{isa}/{builds[0]}" for isa in builds[1:]]
    rows = {r.strip("|").split("|")[0].strip(): r for r in lines if r.startswith("| ") and not r.startswith("| op ")}
    assert set(rows) == {"maxout", "seq2col", "gelu", "lstm_forward_training"}
    assert all(r.rstrip(" |").endswith("ok") for r in rows.values())
