"""Ctrl-C and SIGKILL during `plait train` (child processes): model-last stays loadable, --resume continues."""
import json
import random
import signal
import sys
import time

import numpy
import pytest

from _cli_helpers import plait_process, wait_for_records

from plait.cli import _modeldir as md

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

# Many epochs of tiny steps, model-last saved every 2 steps: a run lasts far longer than the test
# waits, and a kill lands at an arbitrary point of training or of a save.
LONG_RUN = ["--set", "training.max_epochs=1000", "--set", "training.eval_frequency=2"]


def _state(folder):
    return json.loads((folder / "training" / "state.json").read_text())


def _assert_loadable(folder):
    """The directory rebuilds into a model that predicts, and its parts agree on the step."""
    loaded = md.load_model_dir(folder)
    X = numpy.zeros((3, 784), dtype="float32")
    scores = loaded.model.predict(X)
    assert scores.shape == (3, 10)
    numpy.testing.assert_allclose(scores.sum(axis=1), 1.0, rtol=1e-5)
    if (folder / "training").exists():
        assert _state(folder)["state"]["step"] == loaded.meta["step"]
    return loaded.meta["step"]


def test_ctrl_c_saves_model_last_and_resume_continues(write_config, tmp_path, cli):
    output = tmp_path / "out"
    proc = plait_process(["train", write_config(), "--output", output, *LONG_RUN], cwd=tmp_path)
    wait_for_records(output / "metrics.jsonl", 3, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Stopped by Ctrl-C" in err and "model-last" in err and "--resume" in err
    assert "Traceback" not in err
    step = _assert_loadable(output / "model-last")
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    # The stop saved the state at the step it reached (often between two evaluations).
    assert records[-1]["step"] == step
    assert sorted(p.name for p in output.iterdir()) == ["metrics.jsonl", "model-best", "model-last"]
    saved = _state(output / "model-last")
    assert saved["optimizer"]["step"] == step
    with numpy.load(output / "model-last" / "training" / "optimizer.npz") as npz:
        saved_mom2 = {k: npz[k] for k in npz.files if k.startswith("mom2::")}

    # Resume for 4 more steps: counters carry on from the saved step.
    status, out, err = cli("train", "--resume", output, "--set", f"training.max_steps={step + 4}",
                           "--set", "training.eval_frequency=2")
    assert status == 0, err
    assert f"Resuming at step {step}" in out
    after = [json.loads(line)["step"] for line in (output / "metrics.jsonl").read_text().splitlines()]
    assert after[: len(records)] == [r["step"] for r in records]
    assert after[len(records):] and all(s > step for s in after[len(records):]) and after[-1] == step + 4
    resumed = _state(output / "model-last")
    assert resumed["optimizer"]["step"] == step + 4
    assert set(resumed["optimizer"]["nr_update"].values()) == {step + 4}
    with numpy.load(output / "model-last" / "training" / "optimizer.npz") as npz:
        assert set(k for k in npz.files if k.startswith("mom2::")) == set(saved_mom2)
        # The second moments kept accumulating from the saved ones (not restarted from zero).
        for key, before in saved_mom2.items():
            assert numpy.all(npz[key] >= before * 0.999 ** 4 - 1e-12)
            assert not numpy.array_equal(npz[key], before)


def test_sigkill_leaves_a_loadable_model_last(write_config, tmp_path, cli):
    output = tmp_path / "out"
    config = write_config()
    rng = random.Random(0)
    last_step = 0
    for attempt in range(3):
        args = ["train", config, "--output", output, *LONG_RUN] if attempt == 0 else \
            ["train", "--resume", output, *LONG_RUN]
        proc = plait_process(args, cwd=tmp_path)
        # Two new evaluations: the first of them is saved whatever the second is doing. (A killed
        # run may have left one record past its saved step, until the resumed run truncates it.)
        wait_for_records(output / "metrics.jsonl", 2 if attempt == 0 else 3, proc, after_step=last_step)
        # Kill at an arbitrary moment: during a step, an evaluation or a save.
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        folder = md.find_model_dir(output, prefer="model-last")
        step = _assert_loadable(folder)
        assert step > last_step, "each resumed run went on from the last saved step"
        last_step = step
    # A final resume cleans up what the kills left and carries on.
    status, out, err = cli("train", "--resume", output, "--set", f"training.max_steps={last_step + 2}")
    assert status == 0, err
    assert f"Resuming at step {last_step}" in out
    assert _assert_loadable(output / "model-last") == last_step + 2
    assert sorted(p.name for p in output.iterdir()) == ["metrics.jsonl", "model-best", "model-last"]
