"""``neon.backends.nervanagpu``: plait.neon.nervanagpu under neon's module path (the same objects)."""
import sys as _sys

from .. import nervanagpu as _impl

# Every public name of plait.neon.nervanagpu, as the same objects.
globals().update({k: v for k, v in vars(_impl).items() if not k.startswith("_")})
__all__ = [k for k in vars(_impl) if not k.startswith("_") and k != "annotations"]
del _sys
