"""Smoke test of bench/: each script runs --quick for plait alone and prints its table.

Checks the output's shape (columns, a plait row with numbers), never the speed.
"""
import subprocess
import sys

import pytest
from _grid import REPO, bench_module

BENCH = REPO / "bench"
DATA = REPO.parent / "shared" / "data"

SCRIPTS = {
    "mlp.py": ["train ex/s", "train ex/CPU-s", "predict ex/s", "peak MB", "accuracy",
               "of GEMM ceiling"],
    "textcat_cnn.py": ["train docs/s", "train docs/CPU-s", "train words/s", "peak MB",
                       "accuracy"],
    "lstm_tagger.py": ["train words/s", "train words/CPU-s", "predict words/s", "peak MB",
                       "accuracy"],
    "lstm_kernels.py": ["fwd+bwd words/CPU-s", "forward ms/batch", "backward ms/batch"],
    "ops_micro.py": ["op", "plait us", "agree"],
    "define_by_run.py": ["train img/s", "train img/CPU-s", "predict img/s", "predict img/CPU-s", "peak MB",
                         "accuracy"],
    "step_phases.py": ["step us", "batch us", "forward us", "loss us", "backward us", "update us"],
}
NEEDS = {
    "mlp.py": "mnist.npz",
    "textcat_cnn.py": "rotten_tomatoes.jsonl",
    "lstm_tagger.py": "turkish_web_treebank.jsonl",
    "lstm_kernels.py": "turkish_web_treebank.jsonl",
    "ops_micro.py": None,
    "define_by_run.py": "mnist.npz",
    "step_phases.py": "mnist.npz",
}


def _run(script, *extra):
    return subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", "--peers", "none", *extra],
        capture_output=True, text=True, cwd=str(REPO), timeout=120,
        encoding="utf8",
    )


def _table_header(out: str):
    """The cells of the first Markdown table header line in `out`."""
    for line in out.splitlines():
        if line.startswith("| ") and not set(line) <= set("|-: "):
            return [c.strip() for c in line.strip().strip("|").split("|")]
    return None


def _row(out: str, first_cell_prefix: str):
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0].startswith(first_cell_prefix):
            return cells
    return None


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_quick_run_prints_table(script):
    need = NEEDS[script]
    if need and not (DATA / need).exists():
        pytest.skip(f"needs {DATA / need}")
    proc = _run(script)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    header = _table_header(proc.stdout)
    assert header is not None, proc.stdout
    for column in SCRIPTS[script]:
        assert column in header, (column, header)
    if script == "ops_micro.py":
        # One row per op, each with a positive time in the plait column.
        col = header.index("plait us")
        for op in ("seq2col", "gather_add", "adam", "lstm_forward_training", "backprop_lstm"):
            row = _row(proc.stdout, op)
            assert row is not None, (op, proc.stdout)
            assert float(row[col].replace(",", "")) > 0
        # Without peers there is nothing to compare against.
        assert "plait/" not in " ".join(header)
    else:
        row = _row(proc.stdout, "plait")
        assert row is not None, proc.stdout
        assert len(row) == len(header)
        if "accuracy" in header:  # lstm_kernels.py trains nothing
            accuracy = float(row[header.index("accuracy")])
            assert 0.0 <= accuracy <= 1.0
        assert float(row[1].replace(",", "")) > 0
        # --peers none: plait is the only row, so no ratio table follows.
        assert "plait/peer ratios" not in proc.stdout
        assert _row(proc.stdout, "thinc") is None and _row(proc.stdout, "torch") is None


@pytest.mark.parametrize("model,need", [("textcat", "rotten_tomatoes.jsonl"),
                                        ("tagger", "turkish_web_treebank.jsonl")])
def test_step_phases_times_the_other_models(model, need):
    if not (DATA / need).exists():
        pytest.skip(f"needs {DATA / need}")
    proc = _run("step_phases.py", "--model", model)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    header = _table_header(proc.stdout)
    row = _row(proc.stdout, "plait")
    assert f"Step phases, {model}" in proc.stdout and row is not None
    # The phases add up to the step (each figure rounded to a tenth of a microsecond).
    phases = [float(row[header.index(f"{p} us")].replace(",", "")) for p in
              ("batch", "forward", "loss", "backward", "update")]
    step = float(row[header.index("step us")].replace(",", ""))
    assert all(x >= 0 for x in phases) and step > 0
    assert abs(sum(phases) - step) <= 1.0


def test_step_phases_times_the_ops_methods():
    if not (DATA / "mnist.npz").exists():
        pytest.skip(f"needs {DATA / 'mnist.npz'}")
    proc = _run("step_phases.py", "--ops", "4")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    step = float(_row(proc.stdout, "plait")[_table_header(proc.stdout).index("step us")].replace(",", ""))
    ops_part = proc.stdout[proc.stdout.index("Ops methods, exclusive CPU microseconds"):]
    assert _table_header(ops_part) == ["Ops method", "plait us", "plait calls"]
    rows = [line for line in ops_part.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert 1 <= len(rows) <= 4
    # The MLP's three layers: gemm forward and for dX (its private _gemm counted in it).
    gemm = _row(ops_part, "gemm")
    assert gemm is not None and float(gemm[2]) == 6.0
    assert all(line.split("|")[1].strip() != "_gemm" for line in rows)
    total = sum(float(line.split("|")[2].replace(",", "")) for line in rows)
    assert 0 < total <= step


def test_step_phases_refuses_an_unknown_model():
    proc = _run("step_phases.py", "--model", "resnet")
    assert proc.returncode != 0
    assert "--model must be one of mlp, textcat, tagger" in proc.stderr and "'resnet'" in proc.stderr


def test_step_phases_refuses_a_negative_ops_count():
    proc = _run("step_phases.py", "--ops", "-1")
    assert proc.returncode != 0
    assert "--ops must be 0 (off) or how many Ops methods to show, got -1" in proc.stderr


def test_unknown_peer_is_refused():
    proc = _run("ops_micro.py", "--peers", "thinc99")
    assert proc.returncode != 0
    assert "thinc99" in proc.stderr and "thinc91" in proc.stderr


def test_missing_peer_venv_is_skipped_with_a_hint(tmp_path, monkeypatch):
    _harness = bench_module("_harness")
    monkeypatch.setattr(_harness, "VENVS_DIR", tmp_path / "no-venvs")
    fws = {fw.name: fw for fw in _harness.resolve_frameworks("thinc83")}
    assert set(fws) == {"plait", "thinc83"}
    assert fws["plait"].missing == ""
    assert "setup_peers.sh thinc83" in fws["thinc83"].missing


def test_median_and_ratio_helpers():
    _harness = bench_module("_harness")
    runs = {"plait": [{"x": 1.0, "v": "a"}, {"x": 5.0, "v": "a"}, {"x": 3.0, "v": "a"},
                      {"error": "boom"}],
            "torch": [{"error": "boom"}]}
    med = _harness.median_results(runs)
    assert med["plait"]["x"] == 3.0 and med["plait"]["rounds"] == 3
    assert "torch" not in med
    assert _harness.ratio(200.0, 100.0, True) == 2.0  # throughput: plait twice as fast
    assert _harness.ratio(50.0, 100.0, False) == 2.0  # memory/time: plait half
    assert _harness.ratio(None, 1.0, True) is None


def _gpu_run(*extra):
    return subprocess.run(
        [sys.executable, str(BENCH / "gpu.py"), *extra],
        capture_output=True, text=True, cwd=str(REPO), timeout=600, encoding="utf8",
    )


def test_gpu_bench_without_a_gpu_says_so():
    from _env import HAS_GPU

    if HAS_GPU:
        pytest.skip("this machine has a GPU: the gpu-marked smoke test below runs instead")
    proc = _gpu_run("--quick", "--parts", "ops")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "needs CuPy and a CUDA device" in proc.stderr or "no CUDA device" in proc.stderr


@pytest.mark.gpu
def test_gpu_bench_quick_run_prints_both_tables():
    from _env import HAS_GPU

    if not HAS_GPU:
        pytest.skip("needs cupy and a CUDA device")
    proc = _gpu_run("--quick")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "## Hot Ops on the GPU" in proc.stdout and "## MNIST MLP on the GPU" in proc.stdout
    row = _row(proc.stdout, "relu")
    assert row is not None and row[1] not in ("-", "error"), row
