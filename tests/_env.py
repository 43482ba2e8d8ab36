"""What this test machine has: one place for the checks that decide which tests skip.

`tests/` is on sys.path once its conftest is loaded, so any test file can `from _env import ...`.
"""
import importlib.util


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
