"""The demo trains a real MLP with raw Ops calls: a small end-to-end check of the backend."""
import re

import pytest

from plait import demo


def test_demo_trains_mnist(capsys):
    try:
        demo._find_mnist(None)
    except FileNotFoundError:
        pytest.skip("../shared/data/mnist.npz is not beside this checkout")
    assert demo.main(["--n-train", "10000", "--epochs", "2", "--hidden", "64"]) == 0
    out = capsys.readouterr().out
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", out).group(1))
    assert accuracy > 0.88, out


def test_demo_missing_data_is_a_clear_error(tmp_path, capsys):
    assert demo.main(["--data", str(tmp_path / "nope.npz")]) == 2
    err = capsys.readouterr().err
    assert "nope.npz" in err and "--data" in err
