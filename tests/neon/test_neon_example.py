"""examples/neon_mlp.py: an MNIST MLP written against the backend API alone learns."""
import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUBSET = REPO / "plait" / "datasets" / "data" / "mnist_subset.npz"


def _example():
    spec = importlib.util.spec_from_file_location("neon_mlp", REPO / "examples" / "neon_mlp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_neon_mlp_learns_the_bundled_digits():
    lines = []
    accuracy, _ = _example().run(SUBSET, epochs=2, n_train=15000, n_test=5000, log=lines.append)
    assert len(lines) == 2 and lines[0].startswith("epoch 1: test accuracy")
    assert accuracy > 0.93, accuracy


def test_neon_mlp_missing_data_is_a_clear_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "neon_mlp.py"), "--data", str(tmp_path / "none.npz")],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2 and "not found" in proc.stderr
