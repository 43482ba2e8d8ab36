"""Nothing is lost (issue 17, class 7, and "what it must show" point 3): `kill -9` at many moments
of a fresh `plait train` that replaces an earlier run, and a full disk during every kind of save
(RLIMIT_FSIZE in the child: each write past the limit fails with EFBIG; Python ignores SIGXFSZ, so
the write fails rather than the process dying, as on a full disk).

After each trial, DIR/model-best and DIR/model-last are each either the earlier run's, byte for
byte, or a complete new model directory: rebuilt, it predicts, and its parts agree on the step.
They are never missing, partial or mixed within one directory. The --output FILE of predict and
evaluate is the previous file or the complete new one.

Every child is a separate `python -m plait` process; the whole file runs in about 30-40 s.
"""
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

from _cli_helpers import TINY_MNIST  # noqa: E402

from plait.cli import _modeldir as md  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals and rlimits")

BEST, LAST = "model-best", "model-last"
NEW_RUN = ["--set", "training.max_epochs=100000"]  # runs until killed


def _env():
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no .pyc writes under a file-size limit
    return env


def _spawn(args, cwd, fsize=None):
    """`python -m plait ARGS`; with `fsize`, no file it writes may grow past that many bytes: the
    write fails with EFBIG, which plait meets as it would a full disk."""

    def limit():
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # as Python itself sets it at startup

    return subprocess.Popen(
        [sys.executable, "-m", "plait", *map(str, args)], cwd=str(cwd), env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limit,
    )


def _run(args, cwd, **kwargs):
    proc = _spawn(args, cwd, **kwargs)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def _snapshot(folder):
    """relative path -> bytes of every regular file under `folder` (None when it is missing)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _check_complete(folder, training):
    """A complete model directory: the files it must have, nothing half-written, and it loads."""
    names = set(_snapshot(folder))
    need = {"model.bin", "config.cfg", "meta.json", "sample.msgpack"}
    if training:
        need |= {"training/state.json", "training/optimizer.npz"}
    assert need <= names, f"{folder} lacks {need - names}"
    loaded = md.load_model_dir(folder)
    scores = loaded.model.predict(numpy.zeros((2, 784), dtype="float32"))
    assert scores.shape == (2, 10)
    numpy.testing.assert_allclose(scores.sum(axis=1), 1.0, rtol=1e-5)
    if training:
        state = json.loads((folder / "training" / "state.json").read_text())
        assert state["state"]["step"] == loaded.meta["step"]
    return loaded.meta["step"]


def _generation(output, name, old):
    """"old" (the earlier run's directory, byte for byte, and loadable) or "new" (complete)."""
    folder = Path(output) / name
    assert folder.is_dir() and not folder.is_symlink(), f"{folder} is missing"
    if _snapshot(folder) == old[name]:
        _check_complete(folder, training=name == LAST)
        return "old"
    step = _check_complete(folder, training=name == LAST)
    assert step != old["step"] or _snapshot(folder)["meta.json"] != old[name]["meta.json"]
    return "new"


@pytest.fixture(scope="module")
def earlier_run(tmp_path_factory):
    """An earlier run's output folder (seed 7, 5 steps), its files and the config of the new runs."""
    base = tmp_path_factory.mktemp("durability")
    config = base / "tiny.cfg"
    config.write_text(TINY_MNIST, encoding="utf8")
    output = base / "earlier"
    status, out, err = _run(["train", config, "--output", output, "--set", "training.seed=7",
                             "--set", "training.max_steps=5", "--set", "training.max_epochs=0"], base)
    assert status == 0, err
    old = {name: _snapshot(output / name) for name in (BEST, LAST)}
    old["metrics"] = (output / "metrics.jsonl").read_bytes()
    old["step"] = 5
    numpy.save(base / "digits.npy", numpy.zeros((3, 28, 28), dtype="uint8"))
    return base, config, output, old


def _fresh_copy(earlier, target):
    shutil.copytree(earlier, target, symlinks=True)
    return target


def _first_save_seconds(base, config, earlier, eval_frequency):
    """How long a new run over the earlier one takes, from its start to its first save."""
    output = _fresh_copy(earlier, base / f"calibrate-{eval_frequency}")
    before = (output / LAST / "meta.json").stat().st_ino
    t0 = time.monotonic()
    proc = _spawn(["train", config, "--output", output, *NEW_RUN,
                   "--set", f"training.eval_frequency={eval_frequency}"], base)
    try:
        while time.monotonic() - t0 < 60:
            meta = output / LAST / "meta.json"
            try:
                if meta.stat().st_ino != before:
                    return time.monotonic() - t0
            except FileNotFoundError:
                pass
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.005)
        raise AssertionError("no first save within 60 s")
    finally:
        proc.kill()
        proc.communicate()


def test_kill_9_at_random_moments_of_a_new_run_keeps_the_earlier_models(earlier_run):
    base, config, earlier, old = earlier_run
    rng = random.Random(17)
    seen = {"old": 0, "new": 0}
    trials = 0
    # eval_frequency 600: a stretch of training before the first save (the window where the old
    # code had deleted both models); 1: a save after every step, so kills land inside saves.
    for eval_frequency, n in ((600, 12), (1, 8)):
        first_save = _first_save_seconds(base, config, earlier, eval_frequency)
        for i in range(n):
            output = _fresh_copy(earlier, base / f"kill-{eval_frequency}-{i}")
            proc = _spawn(["train", config, "--output", output, *NEW_RUN,
                           "--set", f"training.eval_frequency={eval_frequency}"], base)
            # Spread over startup, loading, training up to the first save and the saves after it.
            time.sleep(first_save * (0.5 + 1.0 * (i + rng.random()) / n))
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
            trials += 1
            kinds = {name: _generation(output, name, old) for name in (BEST, LAST)}
            seen["old" if kinds[LAST] == "old" else "new"] += 1
            if kinds[LAST] == "old":
                # A new run's first save writes model-last first: an old last means an old best.
                assert kinds[BEST] == "old", kinds
            metrics = (output / "metrics.jsonl").read_bytes()
            if metrics != old["metrics"]:
                assert all(json.loads(line)["step"] > 0 for line in metrics.decode().splitlines())
    # The kills covered both the stretch before the first save and the saves after it.
    assert seen["old"] >= 2 and seen["new"] >= 2, seen
    assert trials == 20

    # The next run over a killed one takes its lock, cleans up what the kill left and finishes.
    output = base / "kill-1-0"
    status, out, err = _run(["train", config, "--output", output, "--set", "training.max_steps=3",
                             "--set", "training.max_epochs=0", "--set", "training.eval_frequency=3"], base)
    assert status == 0, err
    assert sorted(p.name for p in output.iterdir()) == ["metrics.jsonl", BEST, LAST]
    assert _check_complete(output / LAST, training=True) == 3


# The files of a save and their sizes here: metrics.jsonl ~170 bytes a record, config.cfg ~570,
# meta.json ~480, sample.msgpack ~12.6 kB, model.bin ~102 kB, training/state.json ~15 kB,
# training/weights.bin ~102 kB, training/optimizer.npz ~308 kB. Each limit makes a different
# write the first to fail: metrics.jsonl (0, 100), model-best's sample (2000) or weights (50 kB),
# model-last's training state (150 kB); 2 MB lets every save through.
FSIZE_LIMITS = [0, 100, 2_000, 50_000, 150_000, 2_000_000]


@pytest.mark.parametrize("fsize", FSIZE_LIMITS)
def test_a_full_disk_during_a_new_run_keeps_the_earlier_models(earlier_run, fsize):
    base, config, earlier, old = earlier_run
    output = _fresh_copy(earlier, base / f"full-{fsize}")
    status, out, err = _run(["train", config, "--output", output, "--set", "training.max_steps=4",
                             "--set", "training.max_epochs=0", "--set", "training.eval_frequency=2"],
                            base, fsize=fsize)
    assert "Traceback" not in err
    kinds = {name: _generation(output, name, old) for name in (BEST, LAST)}
    if fsize >= 2_000_000:
        assert status == 0, err
        assert kinds == {BEST: "new", LAST: "new"}
    else:
        assert status == 1, err
        assert "Cannot save" in err and "kept whole" in err and "errno 27" in err, err
        # The message says what to do, for this run's state: nothing saved yet -> start again.
        assert "run it again (this run saved no model yet)" in err or "--resume" in err
        # model-last, the largest write, goes first: whichever write fails, the earlier run keeps
        # both its models.
        assert kinds == {BEST: "old", LAST: "old"}
    # A failed atomic write removes its temporary file or folder; the lock is released.
    assert sorted(p.name for p in output.iterdir()) == ["metrics.jsonl", BEST, LAST]


def test_a_full_disk_while_resuming_keeps_the_last_save(earlier_run):
    base, config, earlier, old = earlier_run
    output = _fresh_copy(earlier, base / "resume-full")
    status, out, err = _run(["train", "--resume", output, "--set", "training.max_steps=9",
                             "--set", "training.eval_frequency=2"], base, fsize=150_000)
    assert status == 1, err
    assert "Cannot save" in err and "model-last" in err
    assert _generation(output, LAST, old) == "old"
    _generation(output, BEST, old)
    # The saved state still resumes.
    status, out, err = _run(["train", "--resume", output, "--set", "training.max_steps=7"], base)
    assert status == 0, err
    assert "Resuming at step 5" in out


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_a_full_disk_never_leaves_a_fragment_of_an_output_file(earlier_run, command, tmp_path):
    base, config, earlier, old = earlier_run
    target = tmp_path / "result.json"
    target.write_text("the previous result\n")
    args = [command, earlier / LAST] + ([base / "digits.npy"] if command == "predict" else ["--limit", "50"])
    status, out, err = _run([*args, "--output", target], base, fsize=10)
    assert status == 1, err
    assert "Cannot write" in err and "Nothing was changed" in err and "Traceback" not in err
    assert target.read_text() == "the previous result\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]
    # Without the limit the file is replaced whole.
    status, out, err = _run([*args, "--output", target], base)
    assert status == 0, err
    text = target.read_text()
    if command == "predict":
        assert [json.loads(line)["index"] for line in text.splitlines()] == [0, 1, 2]
    else:
        assert json.loads(text)["split"] == "test"


def test_the_plot_image_goes_through_the_same_atomic_writer(earlier_run, tmp_path):
    """`plait plot` writes its PNG with write_output_file (matplotlib is optional, so the writer
    is driven directly here, under the same file-size limit)."""
    import inspect

    from plait.cli import _plot

    assert "write_output_file(out, image.getvalue()" in inspect.getsource(_plot.plot_command)
    base = earlier_run[0]
    target = tmp_path / "training.png"
    target.write_bytes(b"the previous image")
    code = ("import sys; from plait.cli import main; from plait.cli._common import CLIError, write_output_file\n"
            "try:\n    write_output_file(sys.argv[1], b'x' * 5000, 'plot')\n"
            "except CLIError as err:\n    print(err, file=sys.stderr); sys.exit(1)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(target)], cwd=str(base), env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100)))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "Cannot write the plot" in err and "errno 27" in err
    assert target.read_bytes() == b"the previous image"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["training.png"]


def test_resume_rebuilds_a_model_best_that_a_kill_cut_off(earlier_run, tmp_path):
    """A kill between the two writes of a new run's first save leaves its model-last beside the
    earlier run's model-best; --resume puts this run's best model (that model-last's) in place."""
    base, config, earlier, old = earlier_run
    uncut = tmp_path / "uncut"
    status, out, err = _run(["train", config, "--output", uncut, "--set", "training.max_steps=5",
                             "--set", "training.max_epochs=0", "--set", "training.eval_frequency=5"], base)
    assert status == 0, err
    cut = _fresh_copy(earlier, tmp_path / "cut")
    shutil.rmtree(cut / LAST)
    shutil.copytree(uncut / LAST, cut / LAST)
    shutil.copyfile(uncut / "metrics.jsonl", cut / "metrics.jsonl")
    assert _generation(cut, BEST, old) == "old"
    # Resumed at its limit: no step, no evaluation, but model-best is put back in place.
    status, out, err = _run(["train", "--resume", cut, "--set", "training.max_steps=5"], base)
    assert status == 0, err
    assert "is not this run's best model" in out and "rebuilt" in out
    assert _snapshot(cut / BEST) == _snapshot(uncut / BEST)
    # A resume further on carries this run's records only.
    (cut / "metrics.jsonl").write_bytes(old["metrics"] + (uncut / "metrics.jsonl").read_bytes())
    status, out, err = _run(["train", "--resume", cut, "--set", "training.max_steps=7",
                             "--set", "training.eval_frequency=2"], base)
    assert status == 0, err
    records = [json.loads(line) for line in (cut / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [5, 6, 7]
    assert len({r["run"] for r in records}) == 1
