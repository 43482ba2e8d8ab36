"""NumpyOps fast paths: gather/scatter, dropout mask, optimizer step (compiled kernels in _kernels_cpu).

Each kernel takes C-contiguous float32/float64 arrays (int32/int64 indices) and declines
anything else, and any bad index, so that the Ops reference handles the case or raises its error.

Dropout masks come from a counter-based generator (SplitMix64, see _kernels_cpu/random.pyx)
keyed by 64 bits drawn from numpy's global generator (`numpy.random.get_bit_generator()`, the
MT19937 behind `numpy.random.seed`) on every call. `plait.util.fix_random_seed(seed)` seeds
that generator, so the same seed gives the same sequence of masks, whatever the thread count.
The masks differ from the reference's (which draws uniform floats from the same generator),
but follow the same law: each value is 0 with probability `drop`, else 1 / (1 - drop).
"""
import math
import numbers
from typing import Optional, Tuple

import numpy

from ..types import Floats1d, Floats2d, FloatsXd, Ints2d, IntsXd, Shape

try:
    from ._kernels_cpu import gather as _gather
    from ._kernels_cpu import optim as _optim
    from ._kernels_cpu import random as _random
except ImportError:  # extensions not built: the Ops reference gives the same results, only slower
    _gather = _optim = _random = None

_MASK64 = (1 << 64) - 1


def _draw_key() -> int:
    """64 bits from numpy's global generator (the one plait.util.fix_random_seed seeds)."""
    bitgen = numpy.random.get_bit_generator()
    # MT19937 gives 32 bits per raw draw; other bit generators give 64, which the xor keeps.
    return ((int(bitgen.random_raw()) << 32) ^ int(bitgen.random_raw())) & _MASK64


def _mask_dims(shape) -> Optional[Tuple[int, ...]]:
    """The mask's dimensions as Python ints, or None when the reference should judge `shape`."""
    if isinstance(shape, (int, numpy.integer)):
        dims = (shape,)
    elif isinstance(shape, (tuple, list)):
        dims = tuple(shape)
    else:
        return None
    if not all(isinstance(d, (int, numpy.integer)) and not isinstance(d, bool) and d >= 0 for d in dims):
        return None
    return tuple(int(d) for d in dims)


def _signed_indices(indices):
    """Unsigned index arrays as int64, so the kernels (int32/int64 only) take them too.

    Hashed row keys (Ops.hash gives uint32) are the common case. Values of 2**63 or more
    cannot be row numbers: they are left as they are for the reference to reject.
    """
    if isinstance(indices, numpy.ndarray) and indices.dtype.kind == "u":
        if indices.dtype.itemsize < 8 or indices.size == 0 or int(indices.max()) < 2**63:
            return indices.astype(numpy.int64)
    return indices


class GatherKernels:
    """Mixin for NumpyOps; each method overrides the Ops reference with the identical signature."""

    def gather_add(self, table: Floats2d, indices: Ints2d) -> Floats2d:
        if _gather is not None:
            out = _gather.gather_add(table, _signed_indices(indices))
            if out is not None:
                return out
        return super().gather_add(table, indices)

    def scatter_add(self, table: FloatsXd, indices: IntsXd, values: FloatsXd) -> FloatsXd:
        if _gather is not None and _gather.scatter_add(table, _signed_indices(indices), values):
            return table
        return super().scatter_add(table, indices, values)

    def get_dropout_mask(self, shape: Shape, drop: Optional[float]) -> FloatsXd:
        dims = _mask_dims(shape)
        if (
            _random is not None
            and dims is not None
            and isinstance(drop, numbers.Real)
            and not isinstance(drop, bool)
            and 0.0 < drop < 1.0
        ):
            mask = numpy.empty(dims, dtype="float32")
            if mask.size:
                # Keep a value when its 32-bit draw u >= ceil(drop * 2**32): P(keep) = 1 - drop.
                threshold = math.ceil(float(drop) * 4294967296.0)
                # The kept value as the reference rounds it: `True / (1 - drop)` follows drop's
                # type (a numpy float32 drop divides in float32), then becomes float32.
                scale = float(numpy.float32(True / (1.0 - drop)))
                _random.dropout_mask(mask, _draw_key(), threshold, scale)
            return mask
        return super().get_dropout_mask(shape, drop)

    def adam(
        self,
        weights: Floats1d,
        gradient: Floats1d,
        mom1: Floats1d,
        mom2: Floats1d,
        beta1: float,
        beta2: float,
        eps: float,
        learn_rate: float,
        mod_rate: float = 1.0,
        *,
        keep_gradient: bool = False,
    ) -> Tuple[Floats1d, Floats1d, Floats1d, Floats1d]:
        if _optim is not None and _optim.adam(
            weights, gradient, mom1, mom2, beta1, beta2, eps, learn_rate, mod_rate, keep_gradient
        ):
            return weights, gradient, mom1, mom2
        return super().adam(
            weights, gradient, mom1, mom2, beta1, beta2, eps, learn_rate, mod_rate,
            keep_gradient=keep_gradient,
        )

    def adam_step(
        self,
        weights: FloatsXd,
        gradient: FloatsXd,
        mom1: FloatsXd,
        mom2: FloatsXd,
        averages: Optional[FloatsXd] = None,
        *,
        beta1: float,
        beta2: float,
        eps: float,
        learn_rate: float,
        mod_rate: float = 1.0,
        L2: float = 0.0,
        weight_decay: float = 0.0,
        grad_clip: float = 0.0,
        nr_update: int = 1,
        max_decay: float = 0.9999,
    ) -> Tuple[FloatsXd, FloatsXd, FloatsXd, FloatsXd]:
        if _optim is not None and _optim.adam_step(
            weights, gradient, mom1, mom2, averages, beta1, beta2, eps, learn_rate, mod_rate,
            L2, weight_decay, grad_clip, nr_update, max_decay,
        ):
            return weights, gradient, mom1, mom2
        return super().adam_step(
            weights, gradient, mom1, mom2, averages, beta1=beta1, beta2=beta2, eps=eps,
            learn_rate=learn_rate, mod_rate=mod_rate, L2=L2, weight_decay=weight_decay,
            grad_clip=grad_clip, nr_update=nr_update, max_decay=max_decay,
        )
