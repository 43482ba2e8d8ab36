"""Helpers for writing tests of Chainer code (chainer.testing): parameterized test classes,
GPU tags and retry/repeat decorators, usable with unittest, pytest and nose alike."""
import sys

from . import attr, condition, parameterized  # noqa: F401
from .parameterized import parameterize, product

__all__ = ["parameterize", "product", "run_module", "attr", "condition", "parameterized"]


def run_module(name: str, file: str) -> None:
    """Run the test cases of the calling file when it is executed as a script.

    Put `testing.run_module(__name__, __file__)` at the end of a test file: imported (by a
    test runner) it does nothing; run as `python test_x.py` it runs the file's tests, with
    pytest where it is installed, else with unittest.
    """
    if name != "__main__":
        return
    try:
        import pytest
    except ImportError:
        pytest = None
    if pytest is not None:
        # -x stops at the first failure, as Chainer's nose invocation did.
        pytest.main([file, "-v", "-s", "-x"])
        return
    import unittest

    unittest.main(module=sys.modules[name], argv=[file, "-v"], exit=False)

