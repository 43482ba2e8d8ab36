"""The process mpiexec starts for each rank of `plait train --workers N` (run as a script).

It starts the real rank (`python -m plait train ...`) as its child, passes SIGINT and SIGTERM
on to it, and when the child ends writes how it ended, `exit.<rank>` in $PLAIT_WORKERS_DIR
(the exit status, or minus the signal that killed it), then exits with a plain status. So the
launcher learns at once which rank died of what, and mpiexec, which would kill every rank the
moment one dies by a signal (naming a pid, often not the dead one's), leaves that to the
launcher. The child dies with this process (PR_SET_PDEATHSIG), so an aborted job leaves none.

Run as a file, not `-m plait...`: it imports nothing of plait, and starts in milliseconds.
"""
import os
import signal
import subprocess
import sys


def _in_child() -> None:
    """Run in the child before it starts: its own process group, and death with this process."""
    # Its own process group: a signal for the group of this process (mpiexec sends some that
    # way) reaches the rank once, forwarded by main(), not twice. (Popen's process_group= is
    # Python 3.11+; plait supports 3.10.)
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _rank() -> str:
    for name in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        value = os.environ.get(name, "")
        if value.isdigit():
            return value
    return "0"


def _write(folder: str, name: str, text: str) -> None:
    path = os.path.join(folder, name)
    try:
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    except OSError:
        pass  # the launcher and its folder are gone: nobody to tell


def main(argv: list) -> int:
    folder = os.environ.get("PLAIT_WORKERS_DIR", "")
    rank = _rank()
    # close_fds=False: MPI hands each rank its connection to the launcher as an open descriptor
    # (PMI_FD), which the child must inherit.
    child = subprocess.Popen(argv, close_fds=False, preexec_fn=_in_child)

    def forward(signum: int, frame: object) -> None:
        try:
            child.send_signal(signum)
        except OSError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, forward)
    # MPICH's launcher (with -disable-auto-cleanup) sends SIGUSR1 to the processes it started
    # when one of them ends, as a notice; its default action would end this one. The rank is
    # told of a dead peer by plait.distributed's deadline and by the launcher instead.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    if folder:
        _write(folder, f"pid.{rank}", str(child.pid))
    status = child.wait()
    if folder:
        _write(folder, f"exit.{rank}", str(status))
    # A plain exit status either way (128 + signal for a killed rank, as a shell reports it).
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
