"""Smoke test of bench/dense_gemm_grid.py: the quick grid prints the per-layout table and how the
full and thin rules, always plait's kernels and always the BLAS fare. Never checks the speed."""
import pytest
from _grid import first_column, run_quick_grid

from plait.backends._kernels_cpu import dense_gemm


def test_quick_grid_prints_the_tables(tmp_path):
    if not dense_gemm.available():
        pytest.skip("plait's own products need an AVX2 or AVX-512 build and CPU")
    lines, data = run_quick_grid("dense_gemm_grid.py", tmp_path)
    assert first_column(lines, "layout") == ["NN", "NT", "TN", "all"]
    for label in ("the full rule", "the thin rule", "always plait's kernels", "always the BLAS"):
        assert any(line.startswith(label) and "of the better of the two" in line for line in lines)
    assert any(line.startswith("auto's rule here: ") for line in lines)
    rows = data["rows"]
    assert len(rows) == 2 * 2 * 2 * 3 and all(r["own"] > 0 and r["blas"] > 0 for r in rows)
    # The thin rule takes a subset of the full rule's shapes.
    assert all(r["wanted"] or not r["wanted_thin"] for r in rows)


def test_quick_grid_against_numpys_blas(tmp_path):
    if not dense_gemm.available():
        pytest.skip("plait's own products need an AVX2 or AVX-512 build and CPU")
    lines, data = run_quick_grid("dense_gemm_grid.py", tmp_path, extra=("--repeat", "1", "--blas", "numpy"))
    assert any("BLAS: numpy" in line for line in lines)
    assert len(data["rows"]) == 2 * 2 * 2 * 3
