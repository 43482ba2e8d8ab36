"""Smoke test of bench/dense_gemm_grid.py: the quick grid prints the per-layout table and how the
default rule, always plait's kernels and always the BLAS fare. Never checks the speed."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from plait.backends._kernels_cpu import dense_gemm

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "dense_gemm_grid.py"


def test_quick_grid_prints_the_tables(tmp_path):
    if not dense_gemm.available():
        pytest.skip("plait's own products need the AVX-512 build and an AVX-512 CPU")
    out = tmp_path / "grid.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--repeat", "1", "--json", str(out)],
                          capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    table = [line for line in lines if line.startswith("| ") and not line.startswith("| layout")]
    assert [row.strip("|").split("|")[0].strip() for row in table] == ["NN", "NT", "TN", "all"]
    for label in ("auto's rule", "always plait's kernels", "always the BLAS"):
        assert any(line.startswith(label) and "of the better of the two" in line for line in lines)
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 2 * 2 * 2 * 3 and all(r["own"] > 0 and r["blas"] > 0 for r in rows)
