"""Errors for the places where Chainer 1.7.2 used `assert` to reject an argument.

Chainer code (and Chainer's tests) catch AssertionError there; plait raises an error that is
both that and the kind the house style asks for (TypeError for a wrong kind of argument,
ValueError for a bad value), with a message that says what to do. Unlike `assert`, these are
raised under `python -O` too.
"""

__all__ = ["AssertTypeError", "AssertValueError"]


class AssertTypeError(TypeError, AssertionError):
    """A wrong kind of argument where Chainer 1.7.2 asserted (catch TypeError or AssertionError)."""


class AssertValueError(ValueError, AssertionError):
    """A bad argument value where Chainer 1.7.2 asserted (catch ValueError or AssertionError)."""
