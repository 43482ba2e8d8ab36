"""plait.distributed across real processes: `mpiexec -n 2` runs of tests/distributed/_mlp_worker.py.

Skipped, with the reason, where mpi4py or mpiexec is missing or MPI cannot start two ranks (the
`mpi` fixture). How the ranks are launched, and why the fault tests wrap them: tests/_mpi.py.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy
import pytest

from _mpi import env, launch, mpi, mpich_shm_swept, signal_rank_1, state  # noqa: F401 (mpi is a fixture)

WORKER = Path(__file__).with_name("_mlp_worker.py")


def _train(n, batch, steps, out, model="mlp", **extra):
    cmd = launch(n, [str(WORKER), "train", str(out), str(batch), str(steps), model])
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env(**extra))
    assert result.returncode == 0, result.stderr[-3000:]
    return numpy.load(out)


_ONE_RANK = {}  # (model, Adam's arguments): the 1-rank reference run's weights

# The two ways a sum can go between ranks of one machine: shared memory (the default) and MPI.
SHM = pytest.mark.parametrize("shm", ["1", "0"], ids=["shm", "mpi-only"])


@pytest.mark.parametrize(
    "model,bucket_mb,shm,shard,adam",
    [("mlp", "25", "1", "0", "{}"), ("mlp", "0.001", "1", "0", "{}"), ("textcnn", "25", "1", "0", "{}"),
     ("mlp", "0.001", "0", "0", "{}"),
     # DataParallel(shard_update=True): one copy of the weights and Adam's state, stepped in
     # slices (Adam's defaults); with clipping (the norm summed from the slices), coupled L2 and
     # no averages; with many buckets. Where it cannot share (MPI only): _shard_worker.py.
     ("textcnn", "25", "1", "1", "{}"),
     ("mlp", "25", "1", "1", '{"grad_clip": 0.05, "L2": 0.001, "L2_is_weight_decay": false, "use_averages": false}'),
     ("textcnn", "0.001", "1", "1", '{"grad_clip": 0.05}')],
    ids=["mlp-one-bucket", "mlp-many-buckets", "textcnn", "mlp-many-buckets-mpi-only",
         "sharded-textcnn", "sharded-mlp-clipped-coupled-L2", "sharded-textcnn-clipped-many-buckets"],
)
def test_two_ranks_match_one_rank_with_twice_the_batch(mpi, tmp_path_factory, tmp_path, model, bucket_mb, shm, shard, adam):
    # One rank's run depends only on the model and the optimizer: made once per pair.
    key = (model, adam)
    if key not in _ONE_RANK:
        _ONE_RANK[key] = _train(1, 16, 50, tmp_path_factory.mktemp("one") / "one.npz", model, PLAIT_TEST_ADAM=adam)
    one = _ONE_RANK[key]
    two = _train(2, 8, 50, tmp_path / "two.npz", model, PLAIT_DIST_BUCKET_MB=bucket_mb, PLAIT_DIST_SHM=shm,
                 PLAIT_TEST_SHARD=shard, PLAIT_TEST_ADAM=adam)
    assert sorted(one.files) == sorted(two.files)
    for key in one.files:
        if key == "loss":
            continue
        a, b = one[key], two[key]
        # Only float32 summation order differs (a 16-row product against two 8-row ones summed
        # by MPI), so differences are ulps of the tensor's scale; elements near zero get an
        # absolute tolerance of 1e-5 times the tensor's largest magnitude.
        numpy.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5 * float(numpy.abs(a).max()), err_msg=key)
    # The training moved the weights away from any rank's own init (the check is not vacuous).
    assert float(one["loss"]) > 0
    numpy.testing.assert_allclose(float(two["loss"]), float(one["loss"]), rtol=1e-5)


def test_two_ranks_differ_from_one_rank_with_the_same_per_rank_batch(mpi, tmp_path):
    # Sanity for the test above: 1 rank with batch 8 (half the data per step) ends elsewhere.
    one = _train(1, 8, 50, tmp_path / "one.npz")
    two = _train(2, 8, 50, tmp_path / "two.npz")
    assert any(not numpy.allclose(one[k], two[k], rtol=1e-3) for k in one.files if k != "loss")


@SHM
def test_collectives_give_the_means_sums_and_objects_they_must(mpi, shm):
    # Tiny buckets: several per dtype; float32 and float64 params; a gradient on one rank only;
    # a parameter with no gradient anywhere; bcast_params of different models refused.
    before = _shm_files()
    cmd = launch(2, [str(WORKER.with_name("_unit_worker.py"))])
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                            env=env(PLAIT_DIST_BUCKET_MB="0.001", PLAIT_DIST_SHM=shm))
    assert result.returncode == 0, result.stderr[-3000:]
    assert _shm_files() <= before, "shared-memory files left behind"
    # The two ranks' lines can interleave in the launcher's output (no newline between them).
    assert sorted(re.findall(r"ok \d", result.stdout)) == ["ok 0", "ok 1"], result.stdout


@pytest.mark.parametrize(
    "n,bucket_mb,shm,no_state",
    [(2, "25", "1", "0"), (2, "0.001", "1", "0"), (3, "25", "1", "0"), (2, "25", "0", "0"), (2, "25", "1", "1")],
    ids=["2-ranks", "2-ranks-many-buckets", "3-ranks", "2-ranks-mpi-only", "2-ranks-no-shared-state"],
)
def test_sharded_update_matches_the_plain_one_through_optimizer_and_path_changes(mpi, n, bucket_mb, shm, no_state):
    # tests/distributed/_shard_worker.py: DataParallel(shard_update=True) and the plain one side
    # by side through a second optimizer, the plain path in between, loaded weights, raw
    # gradients and SGD; the same weights, moments, averages and counts after each stage.
    before = _shm_files()
    cmd = launch(n, [str(WORKER.with_name("_shard_worker.py"))])
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                            env=env(PLAIT_DIST_BUCKET_MB=bucket_mb, PLAIT_DIST_SHM=shm,
                                    PLAIT_TEST_NO_SHARED_STATE=no_state))
    assert result.returncode == 0, result.stderr[-3000:]
    assert _shm_files() <= before, "shared-memory files left behind"
    assert sorted(re.findall(r"ok \d", result.stdout)) == [f"ok {r}" for r in range(n)], result.stdout


_MIXED_GRADIENTS = """
import sys, numpy
from plait.api import Adam, Relu, Softmax, chain
from plait.distributed import DataParallel, get_communicator
comm = get_communicator()
X = numpy.ones((4, 6), "f")
model = chain(Relu(5), Softmax(3)).initialize(X=X, Y=numpy.zeros((4, 3), "f"))
dp = DataParallel(model, comm, shard_update=sys.argv[1] == "1")
# Rank 0 runs backprop without the wrapper (raw sums), rank 1 with it (divided by the size).
Yh, backprop = (model if comm.rank == 0 else dp).begin_update(X)
backprop(Yh)
try:
    dp.finish_update(Adam(0.01))
except RuntimeError as err:
    print(f"rank {comm.rank} refused: {err}", flush=True)
comm.barrier()
"""


@pytest.mark.parametrize("shard", ["0", "1"], ids=["plain", "sharded"])
def test_ranks_that_mix_wrapped_and_bare_backprop_are_refused_on_every_rank(mpi, shard):
    cmd = launch(2, ["-c", _MIXED_GRADIENTS, shard])
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env())
    assert result.returncode == 0, result.stderr[-3000:]
    refused = re.findall(r"rank (\d) refused: DataParallel: 1 rank\(s\) ran backprop without the wrapper", result.stdout)
    assert sorted(refused) == ["0", "1"], result.stdout
    assert "cannot be averaged together" in result.stdout


def _shm_files():
    shm = Path("/dev/shm")
    return {p.name for p in shm.glob("plait-dist-*")} if shm.is_dir() else set()


# The wait is the same loop either way: killed during the sharded update (its barriers), hung
# in the plain shared-memory sum, killed with every byte through MPI.
@pytest.mark.parametrize("sig,shm,shard", [(signal.SIGKILL, "1", "1"), (signal.SIGSTOP, "1", "0"), (signal.SIGKILL, "0", "0")],
                         ids=["killed-sharded", "hung", "killed-mpi-only"])
def test_a_dead_or_hung_rank_makes_the_other_exit_naming_it(mpi, tmp_path, sig, shm, shard):
    returncode, elapsed, stderr, survivor = signal_rank_1(WORKER, tmp_path / "pid", sig,
                                                          env(PLAIT_DIST_TIMEOUT="3", PLAIT_DIST_SHM=shm,
                                                              PLAIT_TEST_SHARD=shard))
    assert returncode != 0
    assert elapsed < 60
    assert "plait.distributed: rank 0 of 2:" in stderr, (returncode, elapsed, stderr[-3000:], state(survivor))
    assert "rank 1 did not answer" in stderr, stderr[-3000:]
    assert "PLAIT_DIST_TIMEOUT" in stderr
    # The survivor is gone too, not left running (a zombie awaiting a reaper counts as gone).
    time.sleep(0.2)
    assert state(survivor) in (None, "Z", "X"), f"rank 0 (pid {survivor}) still runs"


_RECV_FROM_RANK_0 = """
import os, sys, time
from plait.distributed import get_communicator
comm = get_communicator()
comm.barrier()
if comm.rank == 0:
    if sys.argv[1] == "killed":
        os.kill(os.getpid(), 9)
    elif sys.argv[1] == "elsewhere":
        comm.barrier()
    time.sleep(120)
else:
    comm.recv(0, tag=7)
"""


@pytest.mark.parametrize("how", ["killed", "hung", "elsewhere"])
def test_a_recv_from_a_dead_hung_or_elsewhere_rank_names_it(mpi, how):
    # Rank 1 waits in recv(0, tag=7); rank 0 dies, sleeps outside plait, or waits in a barrier.
    cmd = launch(2, ["-c", _RECV_FROM_RANK_0, how], wrapped=True)
    with mpich_shm_swept():  # a killed or aborted rank leaves its job's shared memory behind
        start = time.monotonic()
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env(PLAIT_DIST_TIMEOUT="2"))
        elapsed = time.monotonic() - start
    stderr = result.stderr
    assert result.returncode != 0 and elapsed < 30, (result.returncode, elapsed, stderr[-3000:])
    # A point-to-point message is not numbered as a collective (only some ranks take part).
    mine = "rank 1 of 2: recv from rank 0 (tag 7) (after collective #1) did not complete within 2 s"
    if how == "elsewhere":
        # Both ranks time out; whichever aborts first names what the other waits in.
        assert ("rank 0 is waiting in barrier (collective #2) instead" in stderr
                or "rank 1 is waiting in recv from rank 0 (tag 7) (after collective #1) instead" in stderr), stderr[-3000:]
    else:
        assert mine in stderr and "rank 0 did not answer" in stderr, stderr[-3000:]


_SHM_AGREEMENT = """
import numpy
from plait.distributed import get_communicator
comm = get_communicator()
means = comm.allreduce_mean([numpy.full(5, comm.rank + 1.0, "f")], [numpy.zeros(5, "f")])
assert numpy.all(means[0] == 1.5), means
plan = next(iter(comm._plans.values()))
print(f"rank {comm.rank}: shm={comm._shm_on} shared={plan[0].shared is not None}", flush=True)
"""


def test_a_rank_with_shared_memory_off_turns_it_off_for_all(mpi):
    # Making a shared bucket is collective: ranks that disagreed would pair the wrong messages.
    python = launch(1, ["-c", _SHM_AGREEMENT])[4:]  # the same python and arguments for each rank
    cmd = [launch(1, [])[0], "-n", "1", "-env", "PLAIT_DIST_SHM", "0", *python, ":", "-n", "1", *python]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env())
    assert result.returncode == 0, result.stderr[-3000:]
    # The ranks' lines can interleave in the launcher's output (no newline between them).
    assert sorted(re.findall(r"rank \d: shm=(?:True|False) shared=(?:True|False)", result.stdout)) == [
        "rank 0: shm=False shared=False", "rank 1: shm=False shared=False"], result.stdout


def test_one_process_world_needs_no_mpi(tmp_path):
    # Without a launcher the same script runs alone and never imports mpi4py.
    code = (
        "import sys, json, numpy\n"
        "from plait.api import chain, Relu, Softmax, SGD\n"
        "from plait.distributed import get_communicator, DataParallel, shard, LocalCommunicator\n"
        "comm = get_communicator()\n"
        "assert isinstance(comm, LocalCommunicator) and (comm.rank, comm.size) == (0, 1)\n"
        "X = numpy.ones((6, 3), 'f'); Y = numpy.eye(2, dtype='f')[[0, 1, 0, 1, 0, 1]]\n"
        "m = chain(Relu(4), Softmax(2)).initialize(X=X, Y=Y)\n"
        "dp = DataParallel(m, comm)\n"
        "Yh, bp = dp.begin_update(shard(X, 0, 1)); bp(Yh - Y); dp.finish_update(SGD(0.1))\n"
        "assert comm.gather({'a': 1}) == [{'a': 1}] and comm.allreduce_scalar(2.5, op='mean') == 2.5\n"
        "print(json.dumps('mpi4py' in sys.modules))\n"
    )
    # env() leaves out the launcher's variables, should this test itself run under one.
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env())
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) is False


def test_launched_without_mpi4py_says_how_to_install(tmp_path):
    # PLAIT_DIST_MPI=1 claims a launcher; with mpi4py hidden the error names the fix.
    (tmp_path / "mpi4py").mkdir()
    (tmp_path / "mpi4py" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    code = "from plait.distributed import get_communicator\nget_communicator()\n"
    environ = env(PLAIT_DIST_MPI="1")
    environ["PYTHONPATH"] = os.pathsep.join([str(tmp_path), environ["PYTHONPATH"]])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=environ)
    assert result.returncode != 0
    assert "pip install 'plait[distributed]'" in result.stderr
