"""plait.distributed on GPUs: the NCCL communicator, and cupy gradients over MPI.

The GPU tests skip without cupy and a CUDA device (CI has none); the last test runs anywhere
MPI does and checks the error a CPU-only machine gets.
"""
import subprocess
import sys

import numpy
import pytest

from _env import HAS_GPU
from _mpi import env, launch, mpi  # noqa: F401 (mpi is a fixture)

from .test_mpi import WORKER, _train

GPU_WORKER = WORKER.with_name("_gpu_worker.py")
needs_gpu = [pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")]


def _run(n, mode):
    result = subprocess.run(launch(n, [str(GPU_WORKER), mode]), capture_output=True, text=True, timeout=120, env=env())
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return result.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
def test_nccl_reduces_and_broadcasts_gpu_buckets_in_place(mpi):
    assert "ok 0" in _run(1, "one")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
def test_nccl_two_ranks_average_or_refuse_to_share_one_gpu(mpi):
    out = _run(2, "pair")
    assert out.count("ok") == 2, out


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
def test_two_ranks_on_the_gpu_match_one_rank_with_twice_the_batch(mpi, tmp_path):
    # CupyOps parameters, reduced by the MPI communicator through host buffers (so two ranks
    # may share one GPU, which NCCL refuses).
    one = _train(1, 16, 50, tmp_path / "one.npz", PLAIT_TEST_OPS="cupy")
    two = _train(2, 8, 50, tmp_path / "two.npz", PLAIT_TEST_OPS="cupy")
    for key in one.files:
        a, b = one[key], two[key]
        numpy.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5 * float(numpy.abs(a).max()), err_msg=key)
    assert float(one["loss"]) > 0


@pytest.mark.skipif(HAS_GPU, reason="checks the error of a machine without a GPU")
def test_nccl_communicator_without_a_gpu_says_what_to_use(mpi):
    code = "from plait.distributed import NcclCommunicator\nNcclCommunicator()\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env())
    assert result.returncode != 0
    assert "NcclCommunicator" in result.stderr and "plait.distributed.Communicator" in result.stderr, result.stderr[-2000:]
