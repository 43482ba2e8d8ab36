"""`plait evaluate`, `plait predict`, `plait plot` and `--help`, on models trained by tiny configs."""
import builtins
import io
import json
import struct
import sys

import numpy
import pytest

from _cli_helpers import TINY_MNIST, TINY_TAGGER, TINY_TEXTCAT


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny trained run per task: {"mnist": DIR, "textcat": DIR, "tagger": DIR}."""
    from plait.cli import main

    root = tmp_path_factory.mktemp("trained")
    runs = {}
    for name, text in (("mnist", TINY_MNIST), ("textcat", TINY_TEXTCAT), ("tagger", TINY_TAGGER)):
        config = root / f"{name}.cfg"
        config.write_text(text)
        assert main(["train", str(config), "--output", str(root / name)]) == 0
        runs[name] = root / name
    return runs


# ------------------------------------------------------------------------------------------------
# evaluate


def test_evaluate_prints_accuracy_and_a_label_table(trained, cli, tmp_path):
    status, out, err = cli("evaluate", trained["mnist"], "--split", "dev", "--output", tmp_path / "scores.json")
    assert status == 0, err
    scores = json.loads((tmp_path / "scores.json").read_text())
    best = json.loads((trained["mnist"] / "model-best" / "meta.json").read_text())
    # The dev score of model-best is the one measured while training.
    assert scores["accuracy"] == pytest.approx(best["scores"]["dev_accuracy"])
    assert f"dev accuracy: {scores['accuracy']:.4f}" in out
    assert "precision" in out and "recall" in out and "F1" in out
    assert [row["label"] for row in scores["per_label"]] == [str(i) for i in range(10)]
    assert sum(row["support"] for row in scores["per_label"]) == scores["n"] == 200
    for row in scores["per_label"]:
        assert 0.0 <= row["p"] <= 1.0 and 0.0 <= row["r"] <= 1.0


def test_evaluate_tagger_scores_tokens(trained, cli):
    status, out, err = cli("evaluate", trained["tagger"] / "model-last", "--split", "test")
    assert status == 0, err
    assert "test token accuracy" in out and "tokens" in out
    assert "NOUN" in out


def test_evaluate_with_other_data(trained, cli, tmp_path):
    from plait.datasets._core import DATA_DIR

    # The bundled file given as `--data`: read through the loader's path branch, 50 docs a split.
    data = DATA_DIR / "rotten_tomatoes.jsonl.gz"
    status, out, err = cli("evaluate", trained["textcat"], "--data", data, "--limit", "50", "--split", "dev")
    assert status == 0, err
    assert str(data) in out and "on 50 docs" in out
    status, out, err = cli("evaluate", trained["textcat"], "--data", tmp_path / "missing.jsonl")
    assert status == 1 and "--data" in err and "missing.jsonl" in err


def test_evaluate_errors(cli, tmp_path):
    status, out, err = cli("evaluate", tmp_path / "nope")
    assert status == 1 and "not found" in err
    (tmp_path / "empty").mkdir()
    status, out, err = cli("evaluate", tmp_path / "empty")
    assert status == 1 and "not a plait model directory" in err


# ------------------------------------------------------------------------------------------------
# predict


def _test_digits(n):
    from plait.datasets import load_dataset

    test = load_dataset("mnist.v1", limit=n).test
    return test.X, test.Y


def _predictions(out):
    return [line.split("\t") for line in out.strip().splitlines()]


def test_predict_images_npy_uint8_and_float(trained, cli, tmp_path):
    X, Y = _test_digits(20)
    pixels = numpy.round(X * 255).astype("uint8").reshape((-1, 28, 28))
    numpy.save(tmp_path / "digits.npy", pixels)
    status, out, err = cli("predict", trained["mnist"], tmp_path / "digits.npy")
    assert status == 0, err
    rows = _predictions(out)
    assert [int(r[0]) for r in rows] == list(range(20))
    assert all(r[1] in [str(i) for i in range(10)] and 0.0 < float(r[2]) <= 1.0 for r in rows)
    # Same labels from flat float pixels, and from the model run directly.
    numpy.save(tmp_path / "flat.npy", X)
    status, out2, err = cli("predict", trained["mnist"], tmp_path / "flat.npy")
    assert status == 0 and [r[1] for r in _predictions(out2)] == [r[1] for r in rows]
    from plait.cli._modeldir import load_model_dir

    model = load_model_dir(trained["mnist"] / "model-best").model
    assert [r[1] for r in rows] == [str(i) for i in model.predict(X).argmax(axis=1)]
    # One image alone.
    numpy.save(tmp_path / "one.npy", pixels[3])
    status, out3, err = cli("predict", trained["mnist"], tmp_path / "one.npy")
    assert status == 0 and _predictions(out3) == [["0", rows[3][1], rows[3][2]]]


def test_predict_npz_writes_jsonl(trained, cli, tmp_path):
    X, _ = _test_digits(6)
    numpy.savez(tmp_path / "digits.npz", x_test=X, y_test=numpy.arange(6))
    status, out, err = cli("predict", trained["mnist"], tmp_path / "digits.npz", "--output", tmp_path / "p.jsonl")
    assert status == 0, err
    lines = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["index"] for r in lines] == list(range(6))
    assert all(set(r) == {"index", "label", "probability"} for r in lines)
    status, out, err = cli("predict", trained["mnist"], tmp_path / "digits.npz", "--limit", "2")
    assert status == 0 and [int(r[0]) for r in _predictions(out)] == [0, 1]
    # An .npz with several arrays and no x_test is ambiguous.
    numpy.savez(tmp_path / "two.npz", a=X, b=X)
    status, out, err = cli("predict", trained["mnist"], tmp_path / "two.npz")
    assert status == 1 and "x_test" in err


def test_predict_image_errors(trained, cli, tmp_path):
    numpy.save(tmp_path / "bad.npy", numpy.zeros((2, 10, 10), dtype="uint8"))
    status, out, err = cli("predict", trained["mnist"], tmp_path / "bad.npy")
    assert status == 1 and "(2, 10, 10)" in err and "784" in err
    (tmp_path / "t.txt").write_text("hello\n")
    status, out, err = cli("predict", trained["mnist"], tmp_path / "t.txt")
    assert status == 1 and ".npy" in err
    status, out, err = cli("predict", trained["mnist"], tmp_path / "missing.npy")
    assert status == 1 and "not found" in err


def test_predict_text_file_and_stdin(trained, cli, tmp_path, monkeypatch):
    text = "A funny, moving film.\n\nDull and far too long!\n"
    (tmp_path / "reviews.txt").write_text(text, encoding="utf8")
    status, out, err = cli("predict", trained["textcat"], tmp_path / "reviews.txt")
    assert status == 0, err
    rows = _predictions(out)
    assert [r[2] for r in rows] == ["A funny, moving film.", "Dull and far too long!"]
    assert all(r[0] in ("rotten", "fresh") for r in rows)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf8")), encoding="utf8"))
    status, out2, err = cli("predict", trained["textcat"], "-", "--output", tmp_path / "p.jsonl")
    assert status == 0, err
    records = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["label"] for r in records] == [r[0] for r in rows]
    assert [round(r["probability"], 4) for r in records] == [float(r[1]) for r in rows]


def test_predict_tags_per_token(trained, cli, tmp_path):
    (tmp_path / "s.txt").write_text("Bu film çok güzel .\nEvet\n", encoding="utf8")
    status, out, err = cli("predict", trained["tagger"], tmp_path / "s.txt", "--output", tmp_path / "t.jsonl")
    assert status == 0, err
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text(encoding="utf8").splitlines()]
    assert records[0]["tokens"] == ["Bu", "film", "çok", "güzel", "."]
    assert len(records[0]["tags"]) == 5 and len(records[1]["tags"]) == 1
    labels = json.loads((trained["tagger"] / "model-best" / "meta.json").read_text())["labels"]
    assert all(tag in labels for r in records for tag in r["tags"])
    status, out, err = cli("predict", trained["tagger"], tmp_path / "s.txt")
    assert status == 0 and out.splitlines()[0].startswith("Bu/")


# ------------------------------------------------------------------------------------------------
# plot


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_plot_writes_a_png_of_the_curves(trained, cli, tmp_path):
    pytest.importorskip("matplotlib")
    status, out, err = cli("plot", trained["mnist"], "--output", tmp_path / "curves.png")
    assert status == 0, err
    width, height = _png_size(tmp_path / "curves.png")
    assert width >= 400 and height >= 300
    # Default location: inside the run folder; a model dir inside the run works too.
    status, out, err = cli("plot", trained["mnist"] / "model-best")
    assert status == 0 and (trained["mnist"] / "training.png").is_file()
    # The image is not blank: the curves put many colours on it.
    import matplotlib.image

    pixels = matplotlib.image.imread(tmp_path / "curves.png")
    assert len(numpy.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 50


def test_plot_without_matplotlib_says_how_to_install(trained, cli, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    status, out, err = cli("plot", trained["mnist"])
    assert status == 1
    assert "plait plot needs matplotlib: pip install matplotlib (or pip install 'plait[plot]')" in err


def test_plot_errors(cli, tmp_path):
    pytest.importorskip("matplotlib")
    status, out, err = cli("plot", tmp_path)
    assert status == 1 and "metrics.jsonl" in err


# ------------------------------------------------------------------------------------------------
# --help and the entry points


@pytest.mark.parametrize(
    "command, expected",
    [
        ([], ["train", "evaluate", "predict", "plot", "Exit statuses"]),
        (["train"], ["CONFIG", "--set", "--output", "--resume", "--gpu", "[training]", "max_epochs", "patience",
                     "model-best", "130"]),
        (["evaluate"], ["MODEL_DIR", "--data", "--split", "precision"]),
        (["predict"], ["MODEL_DIR", "INPUT", ".npy", "x_test", "stdin", "--output"]),
        (["plot"], ["MODEL_DIR", "--output", "PNG", "matplotlib"]),
    ],
)
def test_help(command, expected, cli):
    status, out, err = cli(*command, "--help")
    assert status == 0
    for text in expected:
        assert text in out, f"{text!r} not in `plait {' '.join(command)} --help`"


def test_no_command_prints_help(cli):
    status, out, err = cli()
    assert status == 2 and "train" in out


def test_usage_error_status(cli):
    status, out, err = cli("train", "--no-such-option")
    assert status == 2 and "usage" in err


def test_python_m_plait_is_the_cli():
    import subprocess

    result = subprocess.run([sys.executable, "-m", "plait", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "evaluate" in result.stdout and "predict" in result.stdout


def test_demo_ops_routes_to_the_raw_ops_demo(cli, monkeypatch):
    from plait import demo

    seen = []
    monkeypatch.setattr(demo, "main", lambda argv: seen.append(list(argv)) or 0)
    status, out, err = cli("demo-ops", "--epochs", "1")
    assert status == 0 and seen == [["--epochs", "1"]]


def test_gpu_without_cupy_is_a_clear_error(write_config, cli, tmp_path):
    from _env import HAS_GPU

    if HAS_GPU:
        pytest.skip("a GPU is present")
    status, out, err = cli("train", write_config(), "--output", tmp_path / "out", "--gpu", "0")
    assert status == 1
    assert "--gpu 0 needs CuPy and a CUDA device; none found" in err
    assert not (tmp_path / "out").exists()
