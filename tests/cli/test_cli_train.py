"""`plait train`: the model directories, metrics, resuming, schedules and patience; atomic writes."""
import json
import os

import numpy
import pytest
import srsly

from _cli_helpers import TINY_TAGGER, TINY_TEXTCAT

from plait import _safeio
from plait.cli import _modeldir as md
from plait.cli._train import prepare


def _params(path):
    msg = srsly.msgpack_loads(path.read_bytes())
    return [{k: numpy.asarray(v) for k, v in node.items()} for node in msg["params"]]


def _records(output):
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]


def test_train_writes_loadable_model_dirs(write_config, cli, tmp_path):
    output = tmp_path / "out"
    status, out, err = cli("train", write_config(), "--output", output)
    assert status == 0, err
    # 200 examples / 32 = 7 steps per epoch, 2 epochs; evaluations every 5 steps and at the end.
    records = _records(output)
    assert [r["step"] for r in records] == [5, 10, 14]
    assert [r["epoch"] for r in records] == [0, 1, 2]
    for record in records:
        assert set(record) >= {"step", "epoch", "loss", "score", "wps"}
        assert 0.0 <= record["score"] <= 1.0 and record["loss"] > 0 and record["wps"] > 0
    assert records[-1]["loss"] < records[0]["loss"]
    # One table row per evaluation, under the header.
    assert "DEV ACC" in out and "EX/S" in out
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert [int(row[1]) for row in rows] == [5, 10, 14]
    assert "model-best" in out and "model-last" in out
    for name in ("model-best", "model-last"):
        folder = output / name
        for file in ("model.bin", "config.cfg", "meta.json", "sample.msgpack"):
            assert (folder / file).is_file(), f"{name}/{file}"
        meta = json.loads((folder / "meta.json").read_text())
        assert meta["dataset"] == "mnist" and meta["task"] == "classify"
        assert meta["labels"] == [str(i) for i in range(10)]
        assert "plait_version" in meta and "dev_accuracy" in meta["scores"]
    assert (output / "model-last" / "training" / "state.json").is_file()
    assert not (output / "model-best" / "training").exists()
    best = max(records, key=lambda r: r["score"])
    assert json.loads((output / "model-best" / "meta.json").read_text())["step"] == best["step"]
    assert json.loads((output / "model-last" / "meta.json").read_text())["step"] == 14
    # No temporary folders are left behind.
    assert sorted(p.name for p in output.iterdir()) == ["metrics.jsonl", "model-best", "model-last"]

    # A rebuilt model predicts exactly what the saved dev score says.
    from plait.cli._evaluate import accuracy, predict_ids
    from plait.datasets import load_dataset

    loaded = md.load_model_dir(output / "model-last")
    dev = load_dataset("mnist.v1", limit=200).dev
    score = accuracy(predict_ids(loaded.model, dev.X, "classify", 64), dev.Y, "classify")
    assert score == pytest.approx(records[-1]["score"])


def test_dropout_setting_is_applied(write_config, tmp_path):
    trainer = prepare(write_config(), ["training.dropout=0.35"], tmp_path / "out")
    rates = [node.attrs["dropout_rate"] for node in trainer.model.walk() if "dropout_rate" in node.attrs]
    assert rates and all(rate == 0.35 for rate in rates)


def test_max_steps_and_patience(write_config, cli, tmp_path):
    status, out, err = cli("train", write_config(), "--output", tmp_path / "a", "--set", "training.max_steps=6",
                           "--set", "training.max_epochs=0")
    assert status == 0, err
    assert [r["step"] for r in _records(tmp_path / "a")] == [5, 6]
    # A learning rate of 0 never improves on the first score: patience 2 stops after 3 evaluations.
    status, out, err = cli("train", write_config(), "--output", tmp_path / "b", "--set", "optimizer.learn_rate=0",
                           "--set", "training.max_epochs=50", "--set", "training.patience=2",
                           "--set", "training.eval_frequency=2")
    assert status == 0, err
    assert [r["step"] for r in _records(tmp_path / "b")] == [2, 4, 6]
    assert "patience" in out


def test_batch_size_schedule_grows(write_config, cli, tmp_path):
    status, out, err = cli("train", write_config(TINY_TEXTCAT), "--output", tmp_path / "out")
    assert status == 0, err
    # compounding(8, 32, 1.5): 8, 12, 18, 27, 32, ... over 96 docs: 8+12+18+27+31 -> 5 steps, one epoch.
    records = _records(tmp_path / "out")
    assert [r["step"] for r in records] == [4, 5]
    assert "WORDS/S" in out


def test_tagger_trains_and_scores_tokens(write_config, cli, tmp_path):
    status, out, err = cli("train", write_config(TINY_TAGGER), "--output", tmp_path / "out")
    assert status == 0, err
    assert "DEV TOK ACC" in out
    meta = json.loads((tmp_path / "out" / "model-last" / "meta.json").read_text())
    assert meta["task"] == "tag" and len(meta["labels"]) == 14
    loaded = md.load_model_dir(tmp_path / "out" / "model-last")
    guesses = loaded.model.predict([["Bu", "film", "güzel", "."]])
    assert len(guesses) == 1 and guesses[0].shape == (4, 14)


def test_fresh_run_replaces_an_earlier_one(write_config, cli, tmp_path):
    output = tmp_path / "out"
    assert cli("train", write_config(), "--output", output)[0] == 0
    status, out, err = cli("train", write_config(), "--output", output, "--set", "training.max_steps=5")
    assert status == 0
    assert "earlier run" in out
    assert [r["step"] for r in _records(output)] == [5]


# ------------------------------------------------------------------------------------------------
# Resuming


def test_resume_is_the_same_as_not_stopping(write_config, cli, tmp_path):
    """Stopped mid-epoch at step 10 and resumed to 20 == trained straight to 20, bit for bit
    (weights, Adam moments, averages: data order, dropout masks and the optimizer carry on)."""
    config = write_config()
    common = ["--set", "training.max_epochs=0", "--set", "training.dropout=0.3"]
    assert cli("train", config, "--output", tmp_path / "straight", "--set", "training.max_steps=20", *common)[0] == 0
    assert cli("train", config, "--output", tmp_path / "split", "--set", "training.max_steps=10", *common)[0] == 0
    state = json.loads((tmp_path / "split" / "model-last" / "training" / "state.json").read_text())
    assert state["state"]["step"] == 10 and state["state"]["epoch_offset"] == 96  # mid-epoch (3 of 7 batches)
    status, out, err = cli("train", "--resume", tmp_path / "split", "--set", "training.max_steps=20", *common)
    assert status == 0, err
    assert "Resuming at step 10" in out
    assert [r["step"] for r in _records(tmp_path / "split")] == [5, 10, 15, 20]
    for name in ("model.bin", "training/weights.bin"):
        a = _params(tmp_path / "straight" / "model-last" / name)
        b = _params(tmp_path / "split" / "model-last" / name)
        for node_a, node_b in zip(a, b):
            assert node_a.keys() == node_b.keys()
            for key in node_a:
                numpy.testing.assert_array_equal(node_a[key], node_b[key])
    with numpy.load(tmp_path / "straight" / "model-last" / "training" / "optimizer.npz") as x, \
            numpy.load(tmp_path / "split" / "model-last" / "training" / "optimizer.npz") as y:
        assert sorted(x.files) == sorted(y.files) and any(f.startswith("mom2::") for f in x.files)
        for f in x.files:
            numpy.testing.assert_array_equal(x[f], y[f])
    straight = json.loads((tmp_path / "straight" / "model-last" / "training" / "state.json").read_text())
    resumed = json.loads((tmp_path / "split" / "model-last" / "training" / "state.json").read_text())
    assert straight["optimizer"] == resumed["optimizer"]
    assert straight["optimizer"]["step"] == 20
    assert set(straight["optimizer"]["nr_update"].values()) == {20}


def test_resume_restores_the_optimizer(write_config, cli, tmp_path):
    output = tmp_path / "out"
    assert cli("train", write_config(), "--output", output, "--set", "training.max_steps=5",
               "--set", "training.max_epochs=0")[0] == 0
    saved = json.loads((output / "model-last" / "training" / "state.json").read_text())
    trainer = prepare(None, ["training.max_steps=9"], None, output)
    opt, model = trainer.optimizer, trainer.model
    assert opt.step == 5 and trainer.state.step == 5
    assert opt.last_score is not None and opt.last_score[0] == 5
    keys = {(node.id, name): f"{i}::{name}" for i, node in enumerate(model.walk()) for name in node.param_names}
    assert {keys[k]: v for k, v in opt.nr_update.items()} == saved["optimizer"]["nr_update"]
    with numpy.load(output / "model-last" / "training" / "optimizer.npz") as npz:
        for kind in ("mom1", "mom2", "averages"):
            table = getattr(opt, kind)
            assert len(table) == 4  # W and b of two layers
            for key, value in table.items():
                numpy.testing.assert_array_equal(value, npz[f"{kind}::{keys[key]}"])
    raw = _params(output / "model-last" / "training" / "weights.bin")
    for node, saved_params in zip(model.walk(), raw):
        for name, value in saved_params.items():
            numpy.testing.assert_array_equal(node.get_param(name), value)
    # The moments move on from the saved ones when training continues.
    before = {k: v.copy() for k, v in opt.mom1.items()}
    assert trainer.run() == 0
    assert opt.step == 9 and all(v == 9 for v in opt.nr_update.values())
    assert any(not numpy.array_equal(before[k], opt.mom1[k]) for k in before)


def test_resume_into_another_output(write_config, cli, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    assert cli("train", write_config(), "--output", first, "--set", "training.max_steps=10")[0] == 0
    status, out, err = cli("train", "--resume", first, "--output", second, "--set", "training.max_steps=12")
    assert status == 0, err
    assert [r["step"] for r in _records(second)] == [5, 10, 12]
    assert [r["step"] for r in _records(first)] == [5, 10]
    assert (second / "model-best" / "model.bin").is_file()
    best = max(_records(second), key=lambda r: r["score"])
    assert json.loads((second / "model-best" / "meta.json").read_text())["step"] == best["step"]


def test_resume_without_state_is_an_error(write_config, cli, tmp_path):
    status, out, err = cli("train", "--resume", tmp_path / "nothing")
    assert status == 1 and "Cannot resume" in err
    output = tmp_path / "out"
    assert cli("train", write_config(), "--output", output, "--set", "training.max_steps=5")[0] == 0
    status, out, err = cli("train", "--resume", output / "model-best")
    assert status == 1 and "model-best holds no training state" in err


def test_resume_with_another_architecture_is_an_error(write_config, cli, tmp_path):
    output = tmp_path / "out"
    config = write_config()
    assert cli("train", config, "--output", output, "--set", "training.max_steps=5")[0] == 0
    status, out, err = cli("train", config, "--resume", output, "--set", "model.*.hidden.nO=8")
    assert status == 1 and "Cannot resume" in err and "config" in err


# ------------------------------------------------------------------------------------------------
# Atomic model directories


def test_write_dir_atomically_replaces_the_whole_dir(tmp_path):
    target = tmp_path / "model-last"
    md.write_dir_atomically(target, {"a.txt": b"one", "sub/b.txt": b"two"})
    assert (target / "a.txt").read_bytes() == b"one" and (target / "sub" / "b.txt").read_bytes() == b"two"
    md.write_dir_atomically(target, {"c.txt": b"three"})
    assert sorted(p.name for p in target.iterdir()) == ["c.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model-last"]
    assert oct(target.stat().st_mode & 0o777) == oct(0o777 & ~_umask())


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_write_dir_without_rename_exchange(tmp_path, monkeypatch):
    # Systems without renameat2 take two renames; the old copy stays findable in between.
    monkeypatch.setattr(_safeio, "_exchange", lambda a, b: False)
    target = tmp_path / "model-last"
    md.write_dir_atomically(target, {"meta.json": b"{}", "x": b"1"})
    md.write_dir_atomically(target, {"meta.json": b"{}", "x": b"2"})
    assert (target / "x").read_bytes() == b"2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model-last"]


def test_a_write_that_fails_leaves_the_old_dir(tmp_path, monkeypatch):
    target = tmp_path / "model-last"
    md.write_dir_atomically(target, {"x": b"old"})

    def broken(tmp, final):
        raise OSError("disk full")

    monkeypatch.setattr(_safeio, "_swap_into_place", broken)
    with pytest.raises(OSError):
        md.write_dir_atomically(target, {"x": b"new"})
    assert (target / "x").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model-last"]


def test_half_finished_swap_is_recovered(tmp_path):
    # A kill between the two renames of the fallback swap leaves only `.model-last.old`.
    old = tmp_path / ".model-last.old"
    old.mkdir()
    (old / "meta.json").write_text("{}")
    (tmp_path / ".model-best.tmp-abc").mkdir()
    assert md.find_model_dir(tmp_path, prefer="model-last") == old
    assert md.find_model_dir(tmp_path / "model-last") == old
    md.clean_stale(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model-last"]
    assert (tmp_path / "model-last" / "meta.json").is_file()


def test_metrics_file_is_rewritten_whole(tmp_path):
    md.write_metrics(tmp_path, [{"step": 1}, {"step": 2}])
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 1}\n{"step": 2}\n'
    # A line that does not parse (a hand-edited file) is skipped by the reader.
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "lo')
    assert [r["step"] for r in md.read_metrics(tmp_path)] == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]
