"""plait: one backend (Ops), three faces (Thinc, Chainer, Neon).

`import plait` stays cheap: it never imports torch, tensorflow, cupy or mpi4py.
"""
from .about import __version__

__all__ = ["__version__"]
