"""Smoke test of bench/blas_threads.py: a quick run prints one row per product with its figures."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_blas_threads_quick_run_prints_the_table(tmp_path):
    out_json = tmp_path / "threads.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "blas_threads.py"), "--quick", "--json", str(out_json)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| spaCy")]
    assert len(rows) == 2, proc.stdout
    header = [c.strip() for c in proc.stdout.splitlines()[0].strip("|").split("|")]
    assert header[:4] == ["product", "multiply-adds", "gap ms", "wall 1T"]
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert float(cells[3]) > 0 and float(cells[5]) > 0  # wall and CPU ms with one thread
    assert out_json.exists()
