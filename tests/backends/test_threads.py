"""The thread policy: a user's limit wins; otherwise plait processes split the cores between them.

Each case runs in fresh interpreters (the policy is decided when plait.backends is imported),
with the thread variables cleared, two cores of affinity and a private lock-file folder.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from plait.backends import _threads

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux CPU affinity and at least 2 cores",
)

REPORT = (
    "import json, os, sys, time\n"
    "os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])\n"
    # The machine's own load must not decide these cases: the child sees the load it is given.
    "os.getloadavg = lambda: (float(os.environ.get('TEST_LOAD_AVERAGE', '0')), 0.0, 0.0)\n"
    "import plait.backends as b\n"
    "b.NumpyOps()\n"
    "from threadpoolctl import threadpool_info\n"
    "blas = [lib['num_threads'] for lib in threadpool_info() if lib['user_api'] == 'blas']\n"
    "print(json.dumps({'threads': b.get_num_threads(), 'source': b._threads.thread_source(),\n"
    "                  'omp': os.environ.get('OMP_NUM_THREADS'), 'blas': blas}), flush=True)\n"
    "if len(sys.argv) > 1:\n"
    "    time.sleep(float(sys.argv[1]))\n"
)


def child_env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if k not in _threads.USER_VARIABLES}
    env.pop(_threads.CLAIM_VARIABLE, None)
    env[_threads.SLOT_DIR_VARIABLE] = str(tmp_path / "slots")
    env.update(extra)
    return env


def run_report(env, hold=None):
    import json

    args = [sys.executable, "-c", REPORT] + ([str(hold)] if hold else [])
    if hold:
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True)
        return proc, json.loads(proc.stdout.readline())
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_lone_process_takes_every_core_it_may_run_on(tmp_path):
    report = run_report(child_env(tmp_path))
    assert report["threads"] == 2
    assert report["source"] == "2 of 2 cores claimed"
    assert report["omp"] == "2"
    assert all(n <= 2 for n in report["blas"])


def test_a_second_process_gets_what_the_first_left_and_the_cores_return_when_it_dies(tmp_path):
    env = child_env(tmp_path)
    first, report1 = run_report(env, hold=60)
    try:
        assert report1["threads"] == 2
        report2 = run_report(env)
        assert report2["threads"] == 1 and report2["source"] == "0 of 2 cores claimed"
        assert report2["omp"] == "1" and report2["blas"] and max(report2["blas"]) == 1
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # The kernel dropped the killed process's locks: all cores are free again.
    assert run_report(env)["threads"] == 2


def test_cores_other_programs_keep_busy_are_not_claimed(tmp_path):
    machine = os.cpu_count()
    # One core's worth of load left idle of the two: one claim, and the other core stays free.
    report = run_report(child_env(tmp_path, TEST_LOAD_AVERAGE=str(machine - 1.2)))
    assert report["threads"] == 1 and report["source"] == "1 of 2 cores claimed (1 busy, by the load average)"
    assert report["omp"] == "1" and max(report["blas"]) == 1
    # A fully loaded machine: nothing claimed, one thread all the same.
    report = run_report(child_env(tmp_path, TEST_LOAD_AVERAGE=str(machine + 3.0)))
    assert report["threads"] == 1 and report["source"].startswith("0 of 2 cores claimed (2 busy")
    # A user's count still wins over the load.
    report = run_report(child_env(tmp_path, TEST_LOAD_AVERAGE=str(machine + 3.0), PLAIT_NUM_THREADS="2"))
    assert report["threads"] == 2 and report["source"] == "PLAIT_NUM_THREADS"


@pytest.mark.parametrize("name", ["PLAIT_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"])
def test_a_user_variable_wins_and_nothing_is_claimed(tmp_path, name):
    report = run_report(child_env(tmp_path, **{name: "1"}))
    assert report["threads"] == 1 and report["source"] == name
    assert report["blas"] and max(report["blas"]) == 1
    # The compiled kernels' OpenMP follows the user's count too.
    assert report["omp"] == "1"
    assert not (tmp_path / "slots").exists()


def test_claims_can_be_switched_off(tmp_path):
    report = run_report(child_env(tmp_path, PLAIT_CLAIM_CPUS="0"))
    assert report["threads"] == 2 and "PLAIT_CLAIM_CPUS=0" in report["source"]
    assert not (tmp_path / "slots").exists()


def test_set_num_threads_gives_the_claims_back(tmp_path):
    env = child_env(tmp_path)
    code = REPORT.replace(
        "b.NumpyOps()\n", "b.NumpyOps()\nb.set_num_threads(1)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, "60"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        import json

        mine = json.loads(proc.stdout.readline())
        assert mine["threads"] == 1 and mine["source"] == "set_num_threads"
        assert max(mine["blas"]) == 1
        # Its claims were released, so a newcomer gets both cores.
        assert run_report(env)["threads"] == 2
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_set_num_threads_rejects_bad_values(bad):
    with pytest.raises(ValueError, match="'n' must be an int >= 1"):
        _threads.set_num_threads(bad)


def test_a_blas_count_from_the_environment_needs_no_threadpoolctl(tmp_path):
    code = (
        "import sys, numpy\n"
        "from plait.backends import NumpyOps\n"
        "ops = NumpyOps()\n"
        "x = numpy.ones((300, 300), 'float32')\n"
        "assert (ops.gemm(x, x) == 300).all()\n"
        "print('threadpoolctl' in sys.modules)\n"
    )
    env = child_env(tmp_path, OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    # Without such a variable plait lowers the BLAS through threadpoolctl.
    env = child_env(tmp_path, PLAIT_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_small_products_run_on_one_blas_thread_and_big_ones_on_plaits_count(tmp_path):
    """NumpyOps.gemm holds numpy's BLAS to one thread for a product below SERIAL_WORK (its
    workers would cost more than they save, then spin) and gives the count back afterwards."""
    code = (
        "import json, numpy\n"
        "from plait.backends import NumpyOps, _threads\n"
        "ops = NumpyOps()\n"
        "_threads._probe_serial_libs()\n"
        "libs = _threads._serial_libs\n"
        "if not libs:\n"
        "    print(json.dumps(None)); raise SystemExit\n"
        "seen, real = [], numpy.matmul\n"
        "def spy(*args, **kwargs):\n"
        "    seen.append(libs[0].get())\n"
        "    return real(*args, **kwargs)\n"
        "numpy.matmul = spy\n"
        "small = numpy.ones((64, 64), 'float32')\n"
        "big = numpy.ones((2048, 1024), 'float32')\n"
        "assert (ops.gemm(small, small) == 64).all() and (ops.gemm(big, big, trans1=True) == 2048).all()\n"
        "print(json.dumps({'seen': seen, 'after': libs[0].get(), 'work': _threads.SERIAL_WORK}))\n"
    )
    import json

    env = child_env(tmp_path, PLAIT_NUM_THREADS="2", PLAIT_BLAS="numpy")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    if found is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS whose thread count plait can switch")
    assert 64 ** 3 < found["work"] <= 1024 * 2048 * 1024
    # spaCy's tok2vec and parser products (up to 1.4G multiply-adds in bench/spacy) stay on one
    # thread: OpenBLAS's workers would spin between them and never pay it back.
    assert found["work"] > 1_400_000_000
    assert found == {"seen": [1, 2], "after": 2, "work": found["work"]}
    # With one thread planned nothing is switched.
    env = child_env(tmp_path, PLAIT_NUM_THREADS="1", PLAIT_BLAS="numpy")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["seen"] == [1, 1]
