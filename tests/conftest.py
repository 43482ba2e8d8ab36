"""Shared fixtures: every backend test runs on the reference Ops, NumpyOps and (with a GPU) CupyOps."""
import os
import sys

import numpy
import pytest

# Test files import shared helpers (`from _env import ...`) from this folder, whatever the import mode.
sys.path.insert(0, os.path.dirname(__file__))

from _env import HAS_GPU  # noqa: E402


def _make_ops(kind):
    from plait.backends import CupyOps, NumpyOps, Ops

    if kind == "ops":
        return Ops()
    if kind == "numpy":
        return NumpyOps()
    return CupyOps()


OPS_PARAMS = [
    pytest.param("ops", id="Ops"),
    pytest.param("numpy", id="NumpyOps"),
    pytest.param(
        "cupy",
        id="CupyOps",
        marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")],
    ),
]


@pytest.fixture(params=OPS_PARAMS)
def ops(request):
    return _make_ops(request.param)


@pytest.fixture
def ref_ops():
    """The reference implementation on numpy: what every backend must equal."""
    from plait.backends import Ops

    return Ops()


@pytest.fixture
def numpy_ops():
    from plait.backends import NumpyOps

    return NumpyOps()
