"""`plait train --workers N`: data-parallel training from the command line, on this machine.

Skipped, with the reason, where MPI cannot start two ranks (tests/_mpi.py's `mpi` fixture).
"""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest
import srsly

from _mpi import REPO, env, mpi, mpich_shm_swept  # noqa: F401 (mpi is a fixture)

CONFIG = str(REPO / "examples" / "mnist_mlp.cfg")
# No dropout: then 2 workers compute what 1 does, up to float32 summation order. And Adam's eps
# at 1e-3 rather than 1e-8: the output layer starts at zero, so its first gradients hold entries
# near zero, and with eps 1e-8 Adam turns a difference in their last bits (2 workers add two
# half-batch sums, 1 worker sums the whole batch) into updates of opposite sign; after 40 steps
# that reached 1e-3 in the weights. With 1e-3 both stay within 1e-7.
BASE = ["--no-progress", "--set", "training.dropout=0.0", "--set", "data.limit=2000",
        "--set", "optimizer.eps=0.001"]


def _plait(*args, timeout=120, **extra):
    cmd = [sys.executable, "-m", "plait", "train", CONFIG, *BASE, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env(**extra), cwd=REPO)


@contextlib.contextmanager
def _training_until_saved(out):
    """`plait train --workers 2` into `out` with no end in sight, yielded once rank 0 has saved.

    Killed on leaving the block if it still runs; the /dev/shm segments of a job whose ranks
    were killed are removed (see _mpi.mpich_shm_swept).
    """
    cmd = [sys.executable, "-m", "plait", "train", CONFIG, *BASE, "--output", str(out), "--workers", "2",
           "--set", "training.max_steps=100000", "--set", "training.max_epochs=0", "--set", "training.eval_frequency=10"]
    with mpich_shm_swept():
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=REPO)
        try:
            deadline = time.monotonic() + 60
            while not (out / "model-last").exists():  # rank 0 saved at least once
                assert proc.poll() is None, proc.communicate()[1][-3000:]
                assert time.monotonic() < deadline, "no save within 60 s"
                time.sleep(0.1)
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def _weights(run):
    data = srsly.msgpack_loads((Path(run) / "model-last" / "model.bin").read_bytes())
    return [array for params in data["params"] for _, array in sorted(params.items())]


def _metrics(run):
    return [json.loads(line) for line in (Path(run) / "metrics.jsonl").read_text().splitlines()]


# Two correct float32 products differ in their last bits, and 40 Adam steps carry that into the
# weights: the same 1-worker job with plait's own products and with the BLAS (an Emerald Rapids,
# 2026-11-27) ended up to 6.3e-7 apart, on weights of about 1e-3. The floor below is 4x that,
# a 400th of one Adam step at the config's learn rate (1e-3); a worker whose gradient went
# missing or counted twice would move the weights by whole steps.
NOISE_FLOOR = 2.5e-6


def _same_weights(a, b):
    wa, wb = _weights(a), _weights(b)
    assert len(wa) == len(wb) > 0
    for x, y in zip(wa, wb):
        atol = max(1e-5 * float(numpy.abs(x).max()), NOISE_FLOOR)
        numpy.testing.assert_allclose(y, x, rtol=1e-4, atol=atol)


def test_two_workers_train_what_one_does(mpi, tmp_path):
    steps = ["--set", "training.max_steps=40", "--set", "training.eval_frequency=20"]
    one = _plait("--output", str(tmp_path / "one"), *steps)
    assert one.returncode == 0, one.stderr[-3000:]
    two = _plait("--output", str(tmp_path / "two"), "--workers", "2", *steps)
    assert two.returncode == 0, two.stderr[-3000:]
    # Only rank 0 prints the table (one header, one row per evaluation) and writes the folder.
    assert two.stdout.count("DEV ACC") == 1 and "2 workers" in two.stderr + two.stdout, two.stdout
    m1, m2 = _metrics(tmp_path / "one"), _metrics(tmp_path / "two")
    assert [r["step"] for r in m2] == [r["step"] for r in m1] == [20, 40]
    for a, b in zip(m1, m2):
        assert abs(a["score"] - b["score"]) <= 0.002 and abs(a["loss"] - b["loss"]) <= 1e-3 * a["loss"], (a, b)
    assert m2[-1]["score"] > 0.5  # it learned
    _same_weights(tmp_path / "one", tmp_path / "two")


def test_batches_smaller_than_the_workers_leave_some_ranks_idle(mpi, tmp_path):
    # batch_size 1 on 2 workers: rank 1's share of every batch is empty (it runs no backprop),
    # rank 0's is the whole batch: the result is still one worker's.
    steps = ["--set", "training.batch_size=1", "--set", "training.max_steps=12", "--set", "training.eval_frequency=6"]
    one = _plait("--output", str(tmp_path / "one"), *steps)
    assert one.returncode == 0, one.stderr[-3000:]
    two = _plait("--output", str(tmp_path / "two"), "--workers", "2", *steps)
    assert two.returncode == 0, two.stderr[-3000:]
    _same_weights(tmp_path / "one", tmp_path / "two")


def test_resume_with_another_number_of_workers(mpi, tmp_path):
    # 20 steps on 2 workers, then 20 more on 1 worker == 40 steps on 1 worker: the batch, the
    # data order and the optimizer state do not depend on the number of workers.
    straight = _plait("--output", str(tmp_path / "straight"), "--set", "training.max_steps=40")
    assert straight.returncode == 0, straight.stderr[-3000:]
    first = _plait("--output", str(tmp_path / "run"), "--workers", "2", "--set", "training.max_steps=20")
    assert first.returncode == 0, first.stderr[-3000:]
    resumed = subprocess.run(
        [sys.executable, "-m", "plait", "train", "--resume", str(tmp_path / "run"), "--no-progress",
         "--set", "training.max_steps=40"],
        capture_output=True, text=True, timeout=120, env=env(), cwd=REPO,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _same_weights(tmp_path / "straight", tmp_path / "run")


def test_a_killed_worker_is_named_and_the_run_resumes(mpi, tmp_path):
    out = tmp_path / "run"
    with _training_until_saved(out) as proc:
        victim = _rank_pid(proc.pid, rank=1)
        os.kill(victim, signal.SIGKILL)
        start = time.monotonic()
        _, stderr = proc.communicate(timeout=60)
        elapsed = time.monotonic() - start
    assert proc.returncode != 0 and elapsed < 60
    assert f"rank 1 (pid {victim}) was killed by SIGKILL" in stderr, stderr[-3000:]
    assert "--resume" in stderr
    saved = json.loads((out / "model-last" / "meta.json").read_text())["step"]
    assert saved >= 10
    resumed = subprocess.run(
        [sys.executable, "-m", "plait", "train", "--resume", str(out), "--workers", "2", "--no-progress",
         "--set", f"training.max_steps={saved + 10}"],
        capture_output=True, text=True, timeout=120, env=env(), cwd=REPO,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Resuming at step {saved}" in resumed.stderr + resumed.stdout
    assert json.loads((out / "model-last" / "meta.json").read_text())["step"] == saved + 10


def _rank_pid(launcher, rank):
    """The pid of rank `rank` among the launcher's descendants (its PMI_RANK)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            is_rank = cmdline.split(b"\0")[1:4] == [b"-m", b"plait", b"train"]  # not the _rank.py around it
            if f"PMI_RANK={rank}".encode() in environ and is_rank and _descends(int(entry), launcher):
                return int(entry)
        time.sleep(0.1)
    raise AssertionError(f"rank {rank} not found")


def _descends(pid, ancestor):
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
    return False


def test_workers_is_checked(tmp_path):
    result = subprocess.run([sys.executable, "-m", "plait", "train", CONFIG, "--workers", "0"],
                            capture_output=True, text=True, timeout=60, env=env(), cwd=REPO)
    assert result.returncode != 0 and "--workers must be a number of processes from 1" in result.stderr


def test_ctrl_c_stops_every_worker_after_the_same_step_and_saves(mpi, tmp_path):
    out = tmp_path / "run"
    with _training_until_saved(out) as proc:
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends to the launcher
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-3000:]
    assert stderr.count("Stopped by Ctrl-C at step") == 1, stderr[-3000:]  # rank 0 only
    step = int(stderr.split("Stopped by Ctrl-C at step ")[1].split(":")[0])
    assert json.loads((out / "model-last" / "meta.json").read_text())["step"] == step
