"""MPSOps: Thinc's Apple Metal backend name.

plait has no Metal kernels. As in Thinc without `thinc-apple-ops`, MPSOps computes with numpy on
the CPU (its arrays are numpy arrays); only the name ("mps") and the torch device that
`get_torch_default_device` reports for it ("mps") differ from NumpyOps.
"""
from __future__ import annotations

import numpy

from .numpy_ops import NumpyOps


class MPSOps(NumpyOps):
    """The "mps" backend: numpy arrays, plait's CPU kernels."""

    name = "mps"
    xp = numpy


__all__ = ["MPSOps"]
