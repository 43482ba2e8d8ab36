"""The environment for the plait.chainermn tests' processes: tests/_mpi.py's, with a shorter timeout.

They launch ranks with tests/_mpi.py's `launch` and skip with its `mpi` fixture.
"""
from pathlib import Path

import _mpi

HERE = Path(__file__).parent


def env(**extra):
    """_mpi.env, with PLAIT_DIST_TIMEOUT=10 unless this process or `extra` sets it.

    A rank that fails a check exits; the other then gives up within seconds, not a minute.
    """
    environ = _mpi.env(**extra)
    environ.setdefault("PLAIT_DIST_TIMEOUT", "10")
    return environ
