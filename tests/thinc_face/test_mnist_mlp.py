"""The spec's MLP trains on real MNIST to >= 97% test accuracy in 2 epochs."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_spec_mlp_reaches_97_percent_in_two_epochs():
    spec = importlib.util.spec_from_file_location("thinc_mnist_mlp", ROOT / "examples" / "thinc_mnist_mlp.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    if not example.DEFAULT_DATA.is_file():
        pytest.skip(f"{example.DEFAULT_DATA} is not beside this checkout")
    lines = []
    accuracy = example.train(example.DEFAULT_DATA, epochs=2, log=lines.append)
    assert len(lines) == 2
    assert accuracy >= 0.97, lines
