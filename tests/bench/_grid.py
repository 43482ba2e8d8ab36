"""Running one of bench/'s in-process scripts for a smoke test (dense_gemm_grid.py,
lstm_products.py, block_cache.py, maxout_kernels.py): --quick, JSON written; the rows of its
printed tables."""
import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

REPO = Path(__file__).resolve().parents[2]


def bench_module(name: str):
    """Import bench/<name>.py as a module (bench/ is not a package; it imports its siblings)."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(REPO / "bench"))


def run_quick_grid(script: str, tmp_path: Path, extra: Sequence[str] = ("--repeat", "1")
                   ) -> Tuple[List[str], Dict[str, Any]]:
    """(stdout lines, the JSON it wrote) of `bench/<script> --quick *extra` (the grids: one
    timing per shape); fails the test with the script's stderr when it exits non-zero."""
    out = tmp_path / "grid.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / script), "--quick", *extra, "--json", str(out)],
                          capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines(), json.loads(out.read_text())


def first_column(lines: List[str], header: str) -> List[str]:
    """The first cell of every row of the printed tables, except their header rows (`| header`)."""
    rows = [line for line in lines if line.startswith("| ") and not line.startswith(f"| {header}")]
    return [row.strip("|").split("|")[0].strip() for row in rows]
