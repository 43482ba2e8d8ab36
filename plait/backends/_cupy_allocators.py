"""CuPy allocators that take GPU memory from PyTorch or TensorFlow (thinc.backends._cupy_allocators).

`use_pytorch_for_gpu_memory` / `use_tensorflow_for_gpu_memory` in plait.backends install them as
the allocator of a CuPy memory pool. Importing this module imports neither torch, TensorFlow nor
CuPy; they are looked up when memory is asked for.
"""
from __future__ import annotations

from typing import Any

# CuPy rounds requests itself, but tiny ones have been seen to fail; never ask for less.
_MIN_ALLOCATION = 1024


def cupy_pytorch_allocator(size_in_bytes: int) -> Any:
    """A CuPy MemoryPointer to `size_in_bytes` of GPU memory owned by a torch tensor."""
    from .. import compat
    from ..util import get_torch_default_device

    torch, cupy = compat.torch, compat.cupy
    size_in_bytes = max(_MIN_ALLOCATION, int(size_in_bytes))
    n_words = (size_in_bytes + 3) // 4
    owner = torch.empty((n_words,), dtype=torch.float32, device=get_torch_default_device())
    # UnownedMemory keeps `owner` alive for as long as CuPy uses the memory and never frees it
    # itself: torch's allocator gets it back when the tensor is collected.
    memory = cupy.cuda.memory.UnownedMemory(owner.data_ptr(), size_in_bytes, owner)
    return cupy.cuda.memory.MemoryPointer(memory, 0)


def cupy_tensorflow_allocator(size_in_bytes: int) -> Any:
    """A CuPy MemoryPointer to `size_in_bytes` of GPU memory owned by a TensorFlow tensor."""
    from .. import compat
    from ..util import tensorflow2xp

    tf, cupy = compat.tensorflow, compat.cupy
    size_in_bytes = max(_MIN_ALLOCATION, int(size_in_bytes))
    n_words = (size_in_bytes + 3) // 4
    owner = tf.zeros((n_words,), dtype=tf.float32)
    # TensorFlow exposes no raw pointer; going through DLPack to a cupy view gives one.
    view = tensorflow2xp(owner)
    memory = cupy.cuda.memory.UnownedMemory(int(view.data.ptr), size_in_bytes, view)
    return cupy.cuda.memory.MemoryPointer(memory, 0)


__all__ = ["cupy_pytorch_allocator", "cupy_tensorflow_allocator"]
