"""``neon.backends.autodiff``: plait.neon.autodiff under neon's module path (the same objects)."""
from types import ModuleType as _ModuleType

from .. import autodiff as _impl

# Every public name of plait.neon.autodiff (its classes, functions and constants, not the modules it
# imports), as the same objects.
__all__ = [k for k, v in vars(_impl).items() if not k.startswith("_") and not isinstance(v, _ModuleType)
           and k != "annotations"]
globals().update({k: getattr(_impl, k) for k in __all__})
