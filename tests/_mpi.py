"""Launching `mpiexec -n N` runs of Python for the tests that need real ranks.

Used by tests/distributed, tests/chainermn and tests/bench (`from _mpi import ...`: tests/conftest.py
puts this folder on sys.path). A test that needs two ranks takes the module-scoped `mpi` fixture
(`from _mpi import mpi  # noqa: F401`), which skips it, with the reason, where mpi4py or mpiexec is
missing or MPI cannot start two ranks (`make test` installs mpi4py and the mpich wheel, whose
mpiexec lies next to the venv's python).

Launcher: MPICH's hydra starts local ranks by fork (no ssh needed in a container) and runs as
root without extra flags (Open MPI's mpiexec would need --allow-run-as-root; not used here).
In the fault tests `-disable-auto-cleanup` and a `sh` around each rank (wrapped=True) keep hydra
from killing the surviving rank itself when one dies, so that plait's own detection and message
are what is tested.

MPICH keeps each job's shared memory in a /dev/shm/mpich_shm_<hex>_<n> file that only a clean
finalize removes, so a job whose ranks are killed leaves about 2 MB behind; `mpich_shm_swept()`
removes what the jobs inside it left (see there).
"""
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# What makes plait.distributed believe it runs under a launcher (PLAIT_DIST_MPI=1 forces it).
LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "PLAIT_DIST_MPI")


def mpiexec():
    """The mpiexec next to this python (the mpich wheel's), else the one on PATH, else None."""
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def env(**extra):
    """This process's environment for a child: the repo importable, one BLAS thread, no launcher.

    A test run under a launcher, or with a PLAIT_AS_* alias switched on, must not hand that to the
    processes it starts; `extra` goes on top.
    """
    environ = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS and not k.startswith("PLAIT_AS_")}
    environ["PYTHONPATH"] = os.pathsep.join([str(REPO), environ.get("PYTHONPATH", "")])
    # One BLAS/OpenMP thread per rank: two ranks on a shared machine must not oversubscribe it.
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        environ[name] = "1"
    environ.update(extra)
    return environ


def launch(n, args, wrapped=False):
    """The command that runs `python *args` on n ranks.

    wrapped: each rank runs under `sh`, so a rank killed by a signal is, to hydra, a shell that
    exited 137; hydra then leaves the other ranks running (-disable-auto-cleanup) and what is
    tested is plait's own detection. Without it hydra kills the whole job itself the moment a
    rank dies of a signal, naming its pid but not its rank.
    """
    wrapper = ["sh", "-c", '"$@"; status=$?; exit $status', "plait-rank"] if wrapped else []
    return [mpiexec(), "-disable-auto-cleanup", "-n", str(n), *wrapper, sys.executable, *args]


def require_two_ranks():
    """pytest.skip, with the reason, unless mpi4py and mpiexec can run two ranks here."""
    try:
        import mpi4py  # noqa: F401
    except ImportError as error:
        pytest.skip(f"mpi4py is not installed ({error}); pip install 'plait[distributed]'")
    if mpiexec() is None:
        pytest.skip("no mpiexec next to this python or on PATH; pip install mpich")
    code = "from mpi4py import MPI; c = MPI.COMM_WORLD; n = c.allreduce(1); c.rank or print(n)"
    try:
        result = subprocess.run(launch(2, ["-c", code]), capture_output=True, text=True, timeout=30, env=env())
    except subprocess.TimeoutExpired:
        pytest.skip("MPI cannot start here: `mpiexec -n 2` did not finish a one-number allreduce in 30 s")
    if result.returncode != 0 or result.stdout.split() != ["2"]:
        pytest.skip(f"MPI cannot start two ranks here (rc {result.returncode}): {(result.stderr or result.stdout)[-500:]}")


@pytest.fixture(scope="module")
def mpi():
    """Skips the test unless two ranks can run here (checked once per test module)."""
    require_two_ranks()


def state(pid):
    """The process's state letter from /proc (R, S, T, Z, ...), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


SHM = Path("/dev/shm")
_MPICH_SEGMENT = re.compile(r"mpich_shm_[0-9a-f]+_[0-9]+")


def _mpich_segments():
    try:
        return {name for name in os.listdir(SHM) if _MPICH_SEGMENT.fullmatch(name)}
    except OSError:  # no /dev/shm here
        return set()


def _mapped(names):
    """Those of `names` (files in /dev/shm) that a live process has mapped; None without /proc."""
    try:
        pids = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return None
    paths = {f"{SHM}/{name}": name for name in names}
    mapped = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                maps = f.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        mapped.update(name for path, name in paths.items() if path in maps)
    return mapped


@contextlib.contextmanager
def mpich_shm_swept(wait=3.0):
    """Removes the MPICH segments that the jobs run inside this block left in /dev/shm.

    A segment counts as left if it was not there before the block and no live process has it
    mapped after it: then no job uses it, so jobs that others run meanwhile keep theirs, and
    segments that were there before are never touched. A rank that is still exiting may map its
    segment a moment longer, so mapped new ones are looked at again for up to `wait` seconds.
    Without /dev/shm or /proc, or where a file cannot be removed, nothing is done or said.
    """
    before = _mpich_segments()
    try:
        yield
    finally:
        deadline = time.monotonic() + wait
        while True:
            new = _mpich_segments() - before
            mapped = _mapped(new) if new else set()
            if mapped is None:
                break
            for name in new - mapped:
                with contextlib.suppress(OSError):
                    os.unlink(SHM / name)
            if not mapped or time.monotonic() >= deadline:
                break
            time.sleep(0.1)


Fault = namedtuple("Fault", "returncode elapsed stderr survivor")


def signal_rank_1(worker, pidfile, sig, environ):
    """Runs `worker hang PIDFILE` on 2 ranks and sends `sig` to rank 1 a few steps into training.

    The worker writes each rank's pid to PIDFILE.rank<r>, then trains for ever; the job is
    wrapped (see launch) so that only plait can end rank 0. Returns the job's returncode, the
    seconds from the signal until the job ended (at most 60: then it is killed), its stderr and
    rank 0's pid. A SIGSTOPped rank 1 is killed afterwards, and the job's /dev/shm leftovers
    are removed.
    """
    cmd = launch(2, [str(worker), "hang", str(pidfile)], wrapped=True)
    with mpich_shm_swept():
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ)
        victim = None
        try:
            deadline = time.monotonic() + 30
            files = [Path(f"{pidfile}.rank{r}") for r in (0, 1)]
            while not all(f.exists() and f.read_text() for f in files):
                assert proc.poll() is None, proc.communicate()[1][-3000:]
                assert time.monotonic() < deadline, "the ranks did not start training within 30 s"
                time.sleep(0.05)
            time.sleep(0.3)  # a few steps into training
            survivor, victim = int(files[0].read_text()), int(files[1].read_text())
            os.kill(victim, sig)
            start = time.monotonic()
            _, stderr = proc.communicate(timeout=60)
            elapsed = time.monotonic() - start
        finally:
            if victim is not None and sig == signal.SIGSTOP:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signal.SIGKILL)
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return Fault(proc.returncode, elapsed, stderr, survivor)
