"""Smoke test of bench/blas_choice.py: one quick round prints a table with one row per product
and one column per candidate, names the kernels each used, and says what plait's `auto` chose.

Checks the shape of the output, never the speed (the figures belong in bench/README.md).
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "blas_choice.py"


def test_blas_choice_prints_a_table_and_the_auto_choice(tmp_path):
    pytest.importorskip("scipy_openblas32", reason="the private OpenBLAS (scipy-openblas32) is not installed")
    out = tmp_path / "blas.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "1", "--repeat", "1", "--json", str(out)],
                          capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| product (float32)"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[1].startswith("numpy, own choice [")
    assert any(c.startswith("plait auto, this environment [") for c in columns)
    # BLIS, the peer's BLAS, is a candidate where the thinc91 venv is there (bench/setup_peers.sh).
    has_peer = (REPO / "bench" / ".venvs" / "thinc91" / "bin" / "python").exists()
    assert any(c.startswith("BLIS, thinc91's [") for c in columns) == has_peer
    # plait's own products are a candidate where the CPU has AVX-512 (the last column).
    assert columns[-1].startswith(("plait auto, this environment [", "plait's own kernels ["))
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| product")]
    assert len(rows) == 9 and all(len(r.strip("|").split("|")) == len(columns) for r in rows)
    assert any("**" in r for r in rows)  # the best candidate of each product is marked
    auto = next(line for line in lines if line.startswith("plait auto in this environment:"))
    assert "OpenBLAS with" in auto and "of the best candidate" in auto
    saved = json.loads(out.read_text())
    assert set(saved["medians"]) == {c.split(" [")[0] for c in columns[1:]}
    assert all(v > 0 for per in saved["medians"].values() for v in per.values())
