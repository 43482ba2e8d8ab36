"""`plait train --workers N`: start N ranks of the same command under mpiexec on this machine.

The launching process starts `mpiexec -n N python -m plait train ...` (the same arguments,
without --workers), each rank under plait/cli/_rank.py, which leaves the rank's pid in a private
folder when it starts and how it ended when it ends. A rank that dies (killed by a signal,
crashed, out of memory) or stops on an error is named at once, the other ranks are stopped, and
the command ends non-zero, saying how to resume. A rank that hangs is caught by plait.distributed's
own deadline (PLAIT_DIST_TIMEOUT), which names it and ends the job.

Ranks started by any other launcher (`mpiexec -n N plait train ...`, across hosts) need none of
this: they find their rank and size through MPI and train the same way.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set

from ._common import EXIT_ERROR, EXIT_SIGINT, EXIT_SIGTERM, CLIError, fail

#: Set by the launcher in every rank's environment: the folder where ranks leave pid and status.
WORKERS_DIR_VAR = "PLAIT_WORKERS_DIR"

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def find_mpiexec() -> str:
    """The mpiexec beside this interpreter (the mpich wheel puts it there), else on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if found is None:
        raise CLIError(
            "plait train --workers needs mpiexec and mpi4py, which are not installed here. Install them with: "
            "pip install 'plait[distributed]' (mpi4py and the mpich wheel, which provides mpiexec)."
        )
    return found


def _check_mpi4py() -> None:
    import importlib.util

    if importlib.util.find_spec("mpi4py") is None:
        raise CLIError(
            "plait train --workers needs mpi4py, which is not installed here. Install it with: "
            "pip install 'plait[distributed]' (mpi4py and the mpich wheel, which provides mpiexec)."
        )


def launch(n: int, rank_args: Sequence[str], output: Optional[Path]) -> int:
    """Run `python -m plait train RANK_ARGS` as n MPI ranks here; returns the job's exit status."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise CLIError(f"--workers must be a whole number of processes >= 1, got {n!r}")
    cpus = os.cpu_count() or 1
    if n > 4 * cpus:
        raise CLIError(
            f"--workers {n} would start {n} processes on a machine with {cpus} CPU(s). Use at most {4 * cpus}, "
            "or start ranks across machines with your own mpiexec: mpiexec -n N -hosts ... plait train CONFIG"
        )
    mpiexec = find_mpiexec()
    _check_mpi4py()
    folder = tempfile.mkdtemp(prefix="plait-workers-")
    env = dict(os.environ)
    env[WORKERS_DIR_VAR] = folder
    # The ranks share this machine's cores: unless told otherwise, each gets its share of threads.
    for name in _THREAD_VARS:
        env.setdefault(name, str(max(1, cpus // n)))
    # mpiexec (MPICH's hydra) would kill every rank at once when one dies by a signal, with a
    # message that names a pid, often not the dead one; -disable-auto-cleanup leaves that to the
    # watch below, which names the rank.
    # Each rank runs under _rank.py, which tells how it ended (see there).
    wrapper = [sys.executable, str(Path(__file__).with_name("_rank.py"))]
    cmd = [mpiexec, "-disable-auto-cleanup", "-n", str(n), *wrapper, sys.executable, "-m", "plait", "train", *rank_args]
    # Its own process group: Ctrl-C in the terminal reaches this process only, which passes it
    # on once (mpiexec hands it to every rank; a second one from the terminal, passed on too,
    # makes mpiexec end the ranks at once, as a second Ctrl-C does alone).
    job = subprocess.Popen(cmd, env=env, start_new_session=True)
    forward = _forward_signals(job)
    try:
        return _watch(job, n, Path(folder), output)
    finally:
        for signum, previous in forward.items():
            signal.signal(signum, previous)
        shutil.rmtree(folder, ignore_errors=True)


def _forward_signals(job: subprocess.Popen) -> Dict[int, object]:
    # SIGINT/SIGTERM to this process go to mpiexec, which passes them to the ranks: they stop
    # together after the current step and rank 0 saves.
    def handle(signum: int, frame: object) -> None:
        try:
            job.send_signal(signum)
        except OSError:
            pass

    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[signum] = signal.signal(signum, handle)
        except ValueError:
            pass
    return previous


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _read_int(path: Path) -> Optional[int]:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _how(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}" + (" (out of memory, or kill -9)" if -code == signal.SIGKILL else "")
    return f"stopped with exit status {code} (its message is above)"


def _watch(job: subprocess.Popen, n: int, folder: Path, output: Optional[Path]) -> int:
    pids: Dict[int, int] = {}
    where = str(output) if output is not None else "DIR"
    while True:
        try:
            status: Optional[int] = job.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            status = None
        for rank in range(n):
            if rank not in pids:
                pid = _read_int(folder / f"pid.{rank}")
                if pid is not None:
                    pids[rank] = pid
        ended = {rank: _read_int(folder / f"exit.{rank}") for rank in range(n)}
        # A rank that died, or stopped on an error, while others still run: they would wait for
        # it until the deadline (PLAIT_DIST_TIMEOUT). A stop by Ctrl-C or SIGTERM is agreed by
        # all the ranks, and a plain end is the end of the run.
        failed = [(rank, code) for rank, code in ended.items() if code not in (None, 0, EXIT_SIGINT, EXIT_SIGTERM)]
        if failed and status is None:
            try:
                status = job.wait(timeout=1.0)  # the others may be ending by themselves
            except subprocess.TimeoutExpired:
                _stop_ranks(job, pids, {rank for rank, _ in failed})
        if status is not None and not failed:
            missing = [rank for rank, code in ended.items() if code is None]
            if status not in (0, EXIT_SIGINT, EXIT_SIGTERM) and missing:
                # The job ended (an MPI abort, or mpiexec itself killed) before these ranks could
                # say how they ended: any message of theirs is above.
                fail(
                    f"plait train --workers {n}: the job ended with status {status}; rank(s) "
                    f"{', '.join(map(str, missing))} did not finish (see any message above).",
                    [f"continue from the last save with: plait train --resume {where} --workers N (any N)"],
                )
            return status
        if failed:
            rank, code = failed[0]
            pid = pids.get(rank, "?")
            fail(
                f"plait train --workers {n}: rank {rank} (pid {pid}) {_how(code)}; the other ranks were stopped.",
                [f"continue from the last save with: plait train --resume {where} --workers N (any N)"],
            )
            return EXIT_ERROR if code < 0 or code == 0 else code


def _stop_ranks(job: subprocess.Popen, pids: Dict[int, int], dead: Set[int]) -> None:
    # The run cannot go on without a rank: the survivors are killed (every save is atomic, so
    # what rank 0 last saved stays whole), then mpiexec ends.
    for rank, pid in pids.items():
        if rank not in dead and _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    try:
        job.wait(timeout=10)
    except subprocess.TimeoutExpired:
        job.kill()
        job.wait()


def rank_args(config: Optional[Path], overrides: Sequence[str], output: Optional[Path], resume: Optional[Path],
              gpu: int, progress: Optional[bool], verbose: bool) -> List[str]:
    """The `plait train` arguments every rank gets (the launcher's own, without --workers)."""
    args: List[str] = []
    if config is not None:
        args.append(str(config))
    for item in overrides:
        args += ["--set", item]
    if output is not None:
        args += ["--output", str(output)]
    if resume is not None:
        args += ["--resume", str(resume)]
    if gpu is not None and gpu >= 0:
        args += ["--gpu", str(gpu)]
    if progress is True:
        args.append("--progress")
    elif progress is False:
        args.append("--no-progress")
    if verbose:
        args.append("--verbose")
    return args


__all__ = ["launch", "rank_args", "find_mpiexec", "WORKERS_DIR_VAR"]
