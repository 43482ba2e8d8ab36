"""Tags for tests that need a GPU (or cuDNN, or several GPUs).

As with nose's attribute plugin, a tag sets attributes on the decorated test function or
class (`gpu`, `cudnn`), which test runners select on: `nosetests -a '!gpu'`, or a pytest
hook that deselects items whose function or class has a true `gpu` attribute.
"""
from typing import Any, Callable

__all__ = ["gpu", "cudnn", "multi_gpu"]


def _tag(**attrs: Any) -> Callable[[Any], Any]:
    def decorator(obj: Any) -> Any:
        for name, value in attrs.items():
            setattr(obj, name, value)
        return obj

    return decorator


gpu = _tag(gpu=True)
cudnn = _tag(gpu=True, cudnn=True)


def multi_gpu(gpu_num: int) -> Callable[[Any], Any]:
    """Tag a test as needing `gpu_num` GPUs (its `gpu` attribute is that number)."""
    return _tag(gpu=gpu_num)
