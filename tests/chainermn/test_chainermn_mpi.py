"""plait.chainermn across real processes: `mpiexec -n 2` runs of the workers beside this file.

Skipped, with the reason, where mpi4py or mpiexec is missing or MPI cannot start two ranks.
"""
import json
import re
import signal
import subprocess
import time

import numpy
import pytest

from _cmn_launch import HERE, env
from _env import HAS_GPU
from _mpi import launch, mpi, signal_rank_1, state  # noqa: F401 (mpi is a fixture)

MLP_WORKER = HERE / "_mlp_worker.py"
UNIT_WORKER = HERE / "_unit_worker.py"
MNIST_SCRIPT = HERE / "_chainermn_mnist.py"


def _train(n, batch, steps, out, communicator="flat", optimizer="adam", device="cpu"):
    cmd = launch(n, [str(MLP_WORKER), "train", str(out), str(batch), str(steps), communicator, optimizer, device])
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env())
    assert result.returncode == 0, result.stderr[-3000:]
    return numpy.load(out)


@pytest.mark.parametrize(
    "communicator,optimizer", [("naive", "adam"), ("flat", "adam"), ("flat", "sgd")],
    ids=["naive-adam", "flat-adam", "flat-momentum-sgd"],
)
def test_two_ranks_match_one_rank_with_twice_the_batch(mpi, tmp_path, communicator, optimizer):
    # The tutorial MLP in L.Classifier, 50 steps: 2 ranks x 8 examples against 1 rank x 16.
    one = _train(1, 16, 50, tmp_path / "one.npz", communicator, optimizer)
    two = _train(2, 8, 50, tmp_path / "two.npz", communicator, optimizer)
    assert sorted(one.files) == sorted(two.files)
    params = [k for k in one.files if k not in ("loss", "accuracy")]
    assert len(params) == 6, one.files
    for key in params:
        a, b = one[key], two[key]
        # Only float32 summation order differs (a 16-row product against two 8-row ones averaged
        # over MPI); elements near zero get an absolute tolerance of 1e-5 times the largest.
        numpy.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5 * float(numpy.abs(a).max()), err_msg=key)
    # The evaluator's mean over the ranks' halves is the loss on all the data.
    numpy.testing.assert_allclose(float(two["loss"]), float(one["loss"]), rtol=1e-5)


def _assert_same_weights(one, two):
    for key in one.files:
        a, b = one[key], two[key]
        numpy.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5 * float(numpy.abs(a).max()), err_msg=key)


def _gpu_count():
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
def test_gpu_parameters_on_two_ranks_match_one_rank_with_twice_the_batch(mpi, tmp_path):
    # 'flat' reduces cupy gradients through host buffers over MPI: two ranks may share one GPU.
    one = _train(1, 16, 50, tmp_path / "one.npz", "flat", "adam", "gpu")
    two = _train(2, 8, 50, tmp_path / "two.npz", "flat", "adam", "gpu")
    _assert_same_weights(one, two)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
def test_pure_nccl_trains_on_gpus(mpi, tmp_path):
    one = _train(1, 16, 50, tmp_path / "one.npz", "flat", "adam", "gpu")
    if _gpu_count() >= 2:
        # One GPU per rank (NCCL refuses two ranks on one GPU).
        two = _train(2, 8, 50, tmp_path / "two.npz", "pure_nccl", "adam", "gpu")
    else:
        # One GPU: NCCL's world of one rank, which must train exactly as 'flat' alone.
        two = _train(1, 16, 50, tmp_path / "two.npz", "pure_nccl", "adam", "gpu")
    _assert_same_weights(one, two)


def test_two_ranks_differ_from_one_rank_with_the_same_per_rank_batch(mpi, tmp_path):
    # Sanity for the test above: 1 rank with batch 8 (half the examples per step) ends elsewhere.
    one = _train(1, 8, 50, tmp_path / "one.npz")
    two = _train(2, 8, 50, tmp_path / "two.npz")
    assert any(not numpy.allclose(one[k], two[k], rtol=1e-3) for k in one.files if k not in ("loss", "accuracy"))


def test_communicator_dataset_optimizer_and_evaluator_on_two_ranks(mpi):
    # bcast_data, allreduce_grad (naive and flat; a gradient on one rank only, one on none),
    # different models refused, object and array collectives, send/recv, scatter, alltoall,
    # split, scatter_dataset, the multi-node optimizer and evaluator, AllreducePersistent.
    result = subprocess.run(launch(2, [str(UNIT_WORKER)]), capture_output=True, text=True, timeout=60,
                            env=env(PLAIT_DIST_BUCKET_MB="0.0001"))
    assert result.returncode == 0, result.stderr[-3000:]
    # The two ranks' lines can interleave in the launcher's output (no newline between them).
    assert sorted(re.findall(r"ok \d", result.stdout)) == ["ok 0", "ok 1"], result.stdout


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "hung"])
def test_a_dead_or_hung_rank_makes_the_other_exit_naming_it(mpi, tmp_path, sig):
    returncode, elapsed, stderr, survivor = signal_rank_1(MLP_WORKER, tmp_path / "pid", sig, env(PLAIT_DIST_TIMEOUT="3"))
    assert returncode != 0
    assert elapsed < 60
    assert "plait.distributed: rank 0 of 2:" in stderr, (returncode, elapsed, stderr[-3000:])
    assert "rank 1 did not answer" in stderr, stderr[-3000:]
    assert "PLAIT_DIST_TIMEOUT" in stderr
    time.sleep(0.2)
    assert state(survivor) in (None, "Z", "X"), f"rank 0 (pid {survivor}) still runs"


@pytest.mark.parametrize("how", ["env", "module"])
def test_a_script_written_for_chainermn_runs_unchanged_under_the_alias(mpi, tmp_path, how):
    out = tmp_path / "model.npz"
    args = [str(MNIST_SCRIPT), "--communicator", "naive" if how == "env" else "flat", "--out", str(out)]
    extra = {}
    if how == "env":
        extra["PLAIT_AS_CHAINER"] = "1"
    else:
        args = ["-m", "plait.chainermn_alias", *args]
    result = subprocess.run(launch(2, args), capture_output=True, text=True, timeout=60, env=env(**extra))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Num process (COMM_WORLD): 2" in result.stdout
    assert "chainer 1.7.2, chainermn 1.3.0" in result.stdout
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["validation/main/accuracy"] > 0.5, report  # 10 classes: chance is 0.1
    assert out.exists()
