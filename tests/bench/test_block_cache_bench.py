"""Smoke test of bench/block_cache.py: a small tagger trained under each allocator, batch by
batch; the table lists the three allocators and the JSON holds the cache's counters. Never
checks the speed."""
import subprocess
import sys

from _grid import REPO, first_column, run_quick_grid

from plait.backends.block_cache import MIN_BYTES


def test_quick_run_compares_the_three_allocators(tmp_path):
    lines, data = run_quick_grid("block_cache.py", tmp_path, extra=())
    names = ["numpy default", "numpy, no huge pages", "block cache"]
    assert first_column(lines, "allocator") == names
    assert [r["allocator"] for r in data["rows"]] == names
    assert data["rows"][0]["ratio"] == 1.0
    assert all(r["median_ms"] > 0 for r in data["rows"])
    assert data["cache"]["limit_bytes"] > 0 and data["cache"]["min_bytes"] == MIN_BYTES


def test_off_is_refused_with_a_reason(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "block_cache.py"), "--quick", "--limit-mib", "0"],
                          capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert proc.returncode != 0
    assert "limit is 0" in proc.stderr


def test_min_mib_compares_the_cache_from_each_size(tmp_path):
    lines, data = run_quick_grid("block_cache.py", tmp_path, extra=("--min-mib", "16,4"))
    names = ["block cache from 16 MiB", "block cache from 4 MiB"]
    assert first_column(lines, "allocator") == names
    assert [r["allocator"] for r in data["rows"]] == names
    assert data["rows"][0]["ratio"] == 1.0


def test_min_mib_needs_two_sizes_of_at_least_4_kib(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "block_cache.py"), "--quick", "--min-mib", "4"],
                          capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert proc.returncode != 0
    assert "at least two sizes" in proc.stderr
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "block_cache.py"), "--quick", "--min-mib", "16,0"],
                          capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert proc.returncode != 0 and "4 KiB" in proc.stderr
