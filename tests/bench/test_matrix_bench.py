"""Smoke test of bench/matrix.py: `--quick --peers none` prints one well-formed table per model,
writes its JSON, and a second run with --resume-json measures nothing again.

Checks the shape of the output, never the speed (the figures belong in bench/README.md).
Skipped, like tests/bench/test_bench_smoke.py, where the shared data files are missing.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from _grid import bench_module
from _markdown import table_after

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "matrix.py"
DATA = REPO.parent / "shared" / "data"
NEEDS = ("mnist.npz", "rotten_tomatoes.jsonl", "turkish_web_treebank.jsonl")
SECTIONS = {
    "## MNIST MLP (mlp.py)": ["width", "batch", "plait ex/CPU-s", "acc plait"],
    "## Rotten Tomatoes text CNN (textcat_cnn.py)": ["width", "batch", "rows",
                                                     "plait docs/CPU-s", "acc plait"],
    "## Turkish UPOS BiLSTM tagger (lstm_tagger.py)": ["width", "batch", "hidden",
                                                       "plait words/CPU-s", "acc plait"],
}


def _run(*extra):
    return subprocess.run([sys.executable, str(SCRIPT), "--quick", "--peers", "none", *extra],
                          capture_output=True, text=True, cwd=str(REPO), timeout=120,
                          encoding="utf8")


def test_quick_matrix_prints_tables_and_resumes(tmp_path):
    missing = [n for n in NEEDS if not (DATA / n).exists()]
    if missing:
        pytest.skip(f"needs {', '.join(str(DATA / n) for n in missing)}")
    out_json = tmp_path / "matrix.json"
    proc = _run("--json", str(out_json))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "FAILED" not in out, out[-3000:]
    assert "matrix: 6 cells, 0 already in" in out, out[:2000]
    for marker, columns in SECTIONS.items():
        header, rows = table_after(out, marker)
        for column in columns:
            assert column in header, (column, header)
        # --peers none: plait alone, so no ratio columns, no bound and no peer rows.
        assert not any(h.startswith("vs ") or h.startswith("bound") for h in header), header
        assert "plait % ceiling" in header, header
        for row in rows:
            share = row[header.index("plait % ceiling")]
            assert share.endswith("%") and float(share[:-1]) > 0, row
        assert [r[header.index("batch")] for r in rows] == ["16", "64"], rows
        for row in rows:
            assert float(row[header.index(columns[-2])].replace(",", "")) > 0, row
            assert 0.0 <= float(row[header.index("acc plait")]) <= 1.0, row
    assert "no peer ran, so no ratios" in out

    blob = json.loads(out_json.read_text())
    assert blob["frameworks"] == ["plait"]
    # The GEMM ceiling was measured (numpy's and plait's products at least) and used.
    assert {"numpy", "plait"} <= set(blob["gemm_ceiling"]), blob["gemm_ceiling"]
    assert blob["ceiling_gflops_cpu"] == max(v["cpu"] for v in blob["gemm_ceiling"].values())
    cells = blob["cells"]
    assert len(cells) == 6
    assert sorted({c["model"] for c in cells}) == ["mlp", "tagger", "textcat"]
    for c in cells:
        assert c["quick"] is True and c["rounds"] == 1
        assert c["result"]["medians"]["plait"]["train_per_cpu_s"] > 0
        assert c["figures"]["per_cpu_s"]["plait"] > 0
    # The tagger trains at least 60 updates: --quick has 96 sentences, so batch 16 makes 6 an
    # epoch (10 epochs) and batch 64 makes 2 (30 epochs).
    epochs = {c["batch"]: c["result"]["medians"]["plait"]["epochs"]
              for c in cells if c["model"] == "tagger"}
    assert epochs == {16: 10, 64: 30}, epochs
    assert all(c["min_updates"] == 60 for c in cells if c["model"] == "tagger")

    # Resuming from the file measures no cell again and prints the same tables.
    again = _run("--resume-json", str(out_json))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "matrix: 6 cells, 6 already in" in again.stdout and "[cell " not in again.stdout
    for marker in SECTIONS:
        table_after(again.stdout, marker)
    assert len(json.loads(out_json.read_text())["cells"]) == 6


def test_unknown_model_is_refused():
    proc = _run("--models", "mlp,resnet")
    assert proc.returncode != 0
    assert "resnet" in proc.stderr and "textcat" in proc.stderr


def test_tagger_epochs_cover_the_minimum_updates():
    epochs_for = bench_module("_harness").epochs_for
    # 3,941 sentences: 247 updates an epoch at batch 16, 62 at 64, 16 at 256.
    assert epochs_for({"batch": 16, "epochs": 1, "min_updates": 60}, 3941) == 1
    assert epochs_for({"batch": 64, "epochs": 1, "min_updates": 60}, 3941) == 1
    assert epochs_for({"batch": 256, "epochs": 1, "min_updates": 60}, 3941) == 4
    assert epochs_for({"batch": 256, "epochs": 1, "min_updates": 64}, 3941) == 4
    assert epochs_for({"batch": 256, "epochs": 1, "min_updates": 65}, 3941) == 5
    assert epochs_for({"batch": 256, "epochs": 6, "min_updates": 60}, 3941) == 6
    assert epochs_for({"batch": 256, "epochs": 1, "min_updates": 0}, 3941) == 1


def test_mlp_cells_train_at_least_the_minimum_updates():
    matrix = _matrix_module()
    cells = matrix.plan_cells(matrix.make_parser().parse_args(["--models", "mlp,textcat"]))
    mlp = [c for c in cells if c["model"] == "mlp"]
    assert len(mlp) == 12 and all(c["min_updates"] == 1000 for c in mlp)
    assert all("min_updates" not in c for c in cells if c["model"] == "textcat")
    off = matrix.plan_cells(matrix.make_parser().parse_args(["--models", "mlp", "--mlp-min-updates", "0"]))
    assert all("min_updates" not in c for c in off)
    quick = matrix.plan_cells(matrix.make_parser().parse_args(["--models", "mlp", "--quick"]))
    assert quick and all("min_updates" not in c for c in quick)
    # 20,000 examples: 79 updates an epoch at batch 256 (13 epochs for 1,000), 313 at 64 (4),
    # 1,250 at 16 (the script's 2 epochs).
    epochs_for = bench_module("_harness").epochs_for
    assert [epochs_for({"batch": b, "epochs": 2, "min_updates": 1000}, 20000)
            for b in (16, 64, 256)] == [2, 4, 13]


def test_mlp_script_trains_the_epochs_its_minimum_updates_ask_for(tmp_path):
    if not (DATA / "mnist.npz").exists():
        pytest.skip(f"needs {DATA / 'mnist.npz'}")
    out_json = tmp_path / "mlp.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "mlp.py"), "--quick", "--peers", "none",
         "--min-updates", "40", "--json", str(out_json)],
        capture_output=True, text=True, timeout=600, cwd=str(REPO), encoding="utf8")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    medians = json.loads(out_json.read_text())["medians"]["plait"]
    # --quick: 512 examples in batches of 64 are 8 updates an epoch, so 40 take 5 epochs.
    assert medians["epochs"] == 5 and medians["examples"] == 5 * 512


def _matrix_module():
    return bench_module("matrix")


def _cell(model, width, setting, params, medians):
    return {"model": model, "width": width, "batch": 64, "setting": setting,
            "result": {"params": dict(params, width=width), "medians": medians}}


def test_work_macs_counts_each_models_products():
    matrix = _matrix_module()
    # MLP 784-128-128-10: forward, dX and dW of three layers.
    mlp = _cell("mlp", 128, None, {"depth": 2}, {})
    assert matrix.work_macs(mlp) == 3 * (784 * 128 + 128 * 128 + 128 * 10)
    # BiLSTM of 256 outputs (2 x 128) over 64-wide embeddings, then Softmax over the tags.
    tagger = _cell("tagger", 64, 256, {"hidden": 256}, {})
    per_word = 4 * 256 * (64 + 128) + 256 * matrix.TAGGER_TAGS
    assert matrix.work_macs(tagger) == 3 * per_word
    # Text CNN: Maxout over 3 x 32 window features, 3 pieces forward, winners backward;
    # 22 tokens a document; Softmax(2) over each document's mean.
    plait = {"docs": 10, "words": 220}
    textcat = _cell("textcat", 32, 2000, {"pieces": 3}, {"plait": plait})
    assert matrix.work_macs(textcat) == 22 * (3 + 2) * 96 * 32 + 3 * 32 * 2
    # Without the word count there is nothing to count from.
    assert matrix.work_macs(_cell("textcat", 32, 2000, {"pieces": 3}, {"plait": {}})) is None


def test_ceiling_share_and_bound():
    matrix = _matrix_module()
    medians = {"plait": {"train_per_cpu_s": 20000.0, "train_per_s": 19000.0},
               "thinc91": {"train_per_cpu_s": 10000.0, "train_per_s": 9000.0}}
    cell = _cell("mlp", 256, None, {"depth": 2}, medians)
    gflop = 2 * matrix.work_macs(cell) / 1e9
    figs = matrix.cell_figures(cell, ["plait", "thinc91"], ceiling=100.0)
    assert figs["ratio_cpu"]["thinc91"] == pytest.approx(2.0)
    assert figs["ceiling_frac"] == pytest.approx(20000 * gflop / 100.0)
    # thinc's time per example over plait's products' time at the ceiling.
    assert figs["bound"]["thinc91"] == pytest.approx((1 / 10000) / (gflop / 100.0))
    # No ceiling, no bound.
    plain = matrix.cell_figures(cell, ["plait", "thinc91"])
    assert plain["ceiling_frac"] is None and plain["bound"] == {}
    summary = matrix.summarize([dict(cell, figures=figs)], ["plait", "thinc91"])
    bound = summary["thinc91"]["bound"]
    assert bound["cells"] == 1 and bound["median"] == pytest.approx(figs["bound"]["thinc91"])
    lines = "\n".join(matrix.summary_lines(summary, "mlp"))
    assert "ceiling bound vs thinc91" in lines


@pytest.mark.parametrize("text", ["-3", "0", "fast", "nan", "inf"])
def test_a_bad_ceiling_is_refused(text):
    matrix = _matrix_module()
    with pytest.raises(SystemExit) as err:
        matrix.ceiling_arg(text)
    assert repr(text) in str(err.value) and "positive number" in str(err.value)


def test_a_ceiling_given_or_switched_off():
    matrix = _matrix_module()
    assert matrix.ceiling_arg("105.5") == 105.5
    assert matrix.ceiling_arg("measure") is None and matrix.ceiling_arg(" Off ") is None
