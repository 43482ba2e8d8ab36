"""What this test machine has: one place for the checks that decide which tests skip.

`tests/` is on sys.path once its conftest is loaded, so any test file can `from _env import ...`.
"""
import importlib.util
import os
import subprocess


def installed(name: str) -> bool:
    """True when the package can be found (without importing it)."""
    return importlib.util.find_spec(name) is not None


def _gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


HAS_GPU = _gpu_available()


# Real Chainer (7.8.1) for the differential tests of plait.chainer: an interpreter in its own
# venv (numpy < 2), run through subprocesses. `bash bench/setup_peers.sh chainer` builds one in
# bench/.venvs/chainer, which is used when $PLAIT_CHAINER_PYTHON does not name another.
_BENCH_CHAINER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "bench", ".venvs", "chainer", "bin", "python")
CHAINER_PEER = os.environ.get(
    "PLAIT_CHAINER_PYTHON",
    _BENCH_CHAINER if os.path.exists(_BENCH_CHAINER) else "/tmp/chainervenv/bin/python",
)
_chainer_peer_ok = None


def chainer_peer_available() -> bool:
    """True when CHAINER_PEER exists and imports chainer (probed once per test session)."""
    global _chainer_peer_ok
    if _chainer_peer_ok is None:
        _chainer_peer_ok = False
        if os.path.exists(CHAINER_PEER):
            try:
                out = subprocess.run([CHAINER_PEER, "-c", "import chainer"], capture_output=True,
                                     text=True, timeout=120)
                _chainer_peer_ok = out.returncode == 0
            except (OSError, subprocess.SubprocessError):
                pass
    return _chainer_peer_ok
