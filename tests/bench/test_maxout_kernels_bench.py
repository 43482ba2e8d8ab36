"""Smoke test of bench/maxout_kernels.py: small shapes, plait's kernels and the BLAS's products
in turn, and an A/B against a copy of the package's own maxout build. Never checks the speed."""
import shutil
import subprocess
import sys

from _grid import REPO, first_column, run_quick_grid


def test_quick_run_times_both_kernels_against_the_dense_paths(tmp_path):
    lines, data = run_quick_grid("maxout_kernels.py", tmp_path, extra=())
    assert first_column(lines, "width") == ["16", "40"]
    assert [(r["width"], r["nI"], r["rows"]) for r in data["rows"]] == [(16, 48, 100), (40, 120, 100)]
    for r in data["rows"]:
        assert set(r["ms"]) == {"plait dW", "plait dX", "dense dW", "BLAS dX"}
        assert all(v > 0 for v in r["ms"].values())
        assert r["dw_vs_dense"] > 0 and r["dx_vs_blas"] > 0 and r["op_sparse_vs_dense_dw"] > 0


def test_against_another_build_adds_its_ratios(tmp_path):
    from plait.backends._kernels_cpu import maxout

    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(maxout.__file__, other)
    lines, data = run_quick_grid("maxout_kernels.py", tmp_path, extra=("--against", str(other)))
    assert "dW / other" in "\n".join(lines)
    assert all(r["dw_vs_other"] > 0 and r["dx_vs_other"] > 0 for r in data["rows"])


def test_a_folder_without_the_module_is_refused_with_a_reason(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "maxout_kernels.py"), "--quick",
                           "--against", str(tmp_path)],
                          capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert proc.returncode != 0
    assert "holds no maxout" in proc.stderr
