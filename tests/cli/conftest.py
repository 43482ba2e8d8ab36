"""Fixtures of the command-line tests (the configs and helpers are in _cli_helpers.py)."""
import os
import sys

import pytest

# The test files import _cli_helpers from this folder, whatever pytest's import mode.
sys.path.insert(0, os.path.dirname(__file__))

from _cli_helpers import TINY_MNIST  # noqa: E402


@pytest.fixture
def write_config(tmp_path):
    """write_config(text, name="tiny.cfg", replace={old: new}) -> Path of the written file."""

    def write(text=TINY_MNIST, name="tiny.cfg", replace=None):
        for old, new in (replace or {}).items():
            assert old in text, f"test bug: {old!r} not in the config"
            text = text.replace(old, new)
        path = tmp_path / name
        path.write_text(text, encoding="utf8")
        return path

    return write


@pytest.fixture
def cli(capsys):
    """cli(*args) -> (status, stdout, stderr) of plait.cli.main, run in this process."""
    from plait.cli import main

    def run(*args):
        status = main([str(a) for a in args])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run
