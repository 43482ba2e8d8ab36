"""``neon.backends.autodiff``: plait.neon.autodiff under neon's module path (the same objects)."""
import sys as _sys

from .. import autodiff as _impl

# Every public name of plait.neon.autodiff, as the same objects.
globals().update({k: v for k, v in vars(_impl).items() if not k.startswith("_")})
__all__ = [k for k in vars(_impl) if not k.startswith("_") and k != "annotations"]
del _sys
