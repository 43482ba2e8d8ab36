"""Launching `mpiexec -n N` runs for the plait.chainermn tests (as tests/distributed/test_mpi.py does).

MPICH's hydra starts local ranks by fork and runs as root without flags. `-disable-auto-cleanup`
and a `sh` around each rank (wrapped=True) keep hydra from killing the surviving rank itself
when one dies, so that plait's own detection is what a fault test sees.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.resolve().parents[1]
LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS", "PLAIT_DIST_MPI")


def mpiexec():
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def env(**extra):
    environ = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS and k != "PLAIT_AS_CHAINER"}
    environ["PYTHONPATH"] = os.pathsep.join([str(REPO), environ.get("PYTHONPATH", "")])
    # One BLAS/OpenMP thread per rank: two ranks on a shared machine must not oversubscribe it.
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        environ[name] = "1"
    # A rank that fails a check exits; the other then gives up within seconds, not a minute.
    environ.setdefault("PLAIT_DIST_TIMEOUT", "10")
    environ.update(extra)
    return environ


def launch(n, args, wrapped=False):
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
