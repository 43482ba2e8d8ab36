"""The custom CUDA kernels under thinc's module path (thinc.backends._custom_kernels).

plait writes each GPU kernel once, in `_kernels_gpu`, and CupyOps launches them. This module
gives code written against thinc's module the same entry points:

* `KERNELS.get_function(name)` compiles (once) and returns the `cupy.RawKernel` of a kernel
  named in `KERNELS_LIST`; `compile_mmh()` does the same for the MurmurHash kernel.
* one function per op (`seq2col`, `gather_add`, `reduce_max`, `backprop_gelu`, ...) that takes a
  CuPy array and returns one, with thinc's signatures. They run CupyOps' kernels. The launch
  configuration arguments (`threads_per_block`, `num_blocks`) are accepted for compatibility
  and validated, but plait's kernels use grid-stride loops sized by plait, so they do not
  change the result.

Importing the module needs neither CuPy nor a GPU; calling a function does.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from . import _kernels_gpu

KERNELS_LIST = list(_kernels_gpu.KERNELS)
"""The names of every compiled kernel, for `KERNELS.get_function`."""


class _KernelTable:
    """Compiles kernels on first request (per float dtype and device) and caches them."""

    def get_function(self, name: str, dtype: Any = "float32") -> Any:
        return _kernels_gpu.get_kernel(name, dtype)

    def __contains__(self, name: object) -> bool:
        return name in _kernels_gpu.KERNELS

    def __repr__(self) -> str:
        return f"<plait CUDA kernels: {len(KERNELS_LIST)} kernels, compiled on first use>"


KERNELS = _KernelTable()


class LazyKernel:
    """A kernel compiled on its first call: by `compile_callback()` when given, else by name
    from `KERNELS`. Creating one needs no CuPy."""

    __slots__ = ("name", "_kernel", "_compile_callback")

    def __init__(self, name: str, *, compile_callback: Optional[Callable[[], Any]] = None) -> None:
        self.name = name
        self._kernel: Any = None
        self._compile_callback = compile_callback

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if self._kernel is None:
            kernel = self._compile_callback() if self._compile_callback is not None else KERNELS.get_function(self.name)
            if kernel is None:
                raise ValueError(f"LazyKernel {self.name!r}: compiling the CUDA kernel gave nothing.")
            self._kernel = kernel
        self._kernel(*args, **kwargs)


def check_seq2col_lengths(lengths: Optional[Any], B: int) -> Any:
    """`lengths` for seq2col over B rows: one sequence of all rows when None, else checked to be
    non-negative and to sum to B. Returns an int32 CuPy array."""
    import cupy

    if lengths is None:
        return cupy.array([B], dtype="int32")
    if lengths.ndim != 1:
        raise ValueError(f"seq2col: lengths must be 1d, got shape {tuple(lengths.shape)}.")
    if lengths.size and int(lengths.min()) < 0:
        raise ValueError(f"seq2col: lengths must be >= 0, got {int(lengths.min())}.")
    if int(lengths.sum()) != B:
        raise IndexError(f"seq2col: lengths sum to {int(lengths.sum())}, but the input has {B} rows.")
    return lengths


def compile_mmh() -> Any:
    """The compiled MurmurHash3 kernel (the one behind `Ops.hash` on the GPU)."""
    return _kernels_gpu.get_kernel("plait_hash_fwd")


def _cupy_ops() -> Any:
    from .cupy_ops import CupyOps

    return CupyOps()


def _check_launch(where: str, threads_per_block: int, num_blocks: int) -> None:
    for arg, value in (("threads_per_block", threads_per_block), ("num_blocks", num_blocks)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{where}: {arg} must be a positive int, got {value!r}.")


def _op(method: str) -> Callable[..., Any]:
    def run(*args: Any, threads_per_block: int = 128, num_blocks: int = 128, **kwargs: Any) -> Any:
        _check_launch(method, threads_per_block, num_blocks)
        return getattr(_cupy_ops(), method)(*args, **kwargs)

    run.__name__ = run.__qualname__ = method
    run.__doc__ = f"CupyOps.{method} on CuPy arrays (thinc's _custom_kernels.{method})."
    return run


pad = _op("pad")
clipped_linear = _op("clipped_linear")
gather_add = _op("gather_add")
dish = _op("dish")
gelu = _op("gelu")
maxout = _op("maxout")
mish = _op("mish")
reduce_sum = _op("reduce_sum")
reduce_mean = _op("reduce_mean")
reduce_max = _op("reduce_max")
swish = _op("swish")
backprop_clipped_linear = _op("backprop_clipped_linear")
backprop_hard_swish = _op("backprop_hard_swish")
backprop_hard_swish_mobilenet = _op("backprop_hard_swish_mobilenet")
backprop_dish = _op("backprop_dish")
backprop_gelu = _op("backprop_gelu")
backprop_maxout = _op("backprop_maxout")
backprop_mish = _op("backprop_mish")
backprop_reduce_sum = _op("backprop_reduce_sum")
backprop_reduce_mean = _op("backprop_reduce_mean")
backprop_reduce_max = _op("backprop_reduce_max")
backprop_swish = _op("backprop_swish")
hash = _op("hash")


def seq2col(
    seq: Any, nW: int, *, lengths: Optional[Any] = None, threads_per_block: int = 128, num_blocks: int = 128
) -> Any:
    """CupyOps.seq2col on a CuPy array (thinc's _custom_kernels.seq2col)."""
    _check_launch("seq2col", threads_per_block, num_blocks)
    return _cupy_ops().seq2col(seq, nW, lengths=lengths)


def backprop_seq2col(
    dY: Any, nW: int, *, lengths: Optional[Any] = None, threads_per_block: int = 128, num_blocks: int = 128
) -> Any:
    """CupyOps.backprop_seq2col on a CuPy array (thinc's _custom_kernels.backprop_seq2col)."""
    _check_launch("backprop_seq2col", threads_per_block, num_blocks)
    return _cupy_ops().backprop_seq2col(dY, nW, lengths=lengths)
