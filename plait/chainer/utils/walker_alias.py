"""Walker's alias method (chainer.utils.walker_alias): O(1) draws from a discrete distribution."""
from typing import Any, Sequence

import numpy

__all__ = ["WalkerAlias"]


class WalkerAlias:
    """Draw indices i with probability probs[i] / sum(probs) in O(1) each (Walker's alias method)."""

    def __init__(self, probs: Sequence[float]) -> None:
        p = numpy.asarray(probs, dtype=numpy.float64).ravel()
        if p.size == 0:
            raise ValueError("WalkerAlias: 'probs' is empty; give at least one probability.")
        if (p < 0).any() or not numpy.isfinite(p).all():
            raise ValueError(
                f"WalkerAlias: 'probs' must be finite and >= 0, got min {p.min()}, max {p.max()}."
            )
        total = p.sum()
        if total <= 0:
            raise ValueError("WalkerAlias: 'probs' sums to 0; at least one entry must be positive.")
        n = p.size
        scaled = p * (n / total)
        threshold = numpy.ones(n, dtype=numpy.float64)
        alias = numpy.arange(n, dtype=numpy.int32)
        # Pair each under-full bucket with an over-full one, which tops it up (Vose's variant).
        small = [i for i in range(n) if scaled[i] < 1.0]
        large = [i for i in range(n) if scaled[i] >= 1.0]
        while small and large:
            s, g = small.pop(), large.pop()
            threshold[s] = scaled[s]
            alias[s] = g
            scaled[g] -= 1.0 - scaled[s]
            (small if scaled[g] < 1.0 else large).append(g)
        self.threshold = threshold.astype(numpy.float32)
        self.values = alias
        self.use_gpu = False

    def to_gpu(self) -> None:
        """Keep the tables on the current GPU; `sample` then returns cupy arrays."""
        from .. import cuda

        if not self.use_gpu:
            self.threshold = cuda.to_gpu(self.threshold)
            self.values = cuda.to_gpu(self.values)
            self.use_gpu = True

    def to_cpu(self) -> None:
        from .. import cuda

        if self.use_gpu:
            self.threshold = cuda.to_cpu(self.threshold)
            self.values = cuda.to_cpu(self.values)
            self.use_gpu = False

    def sample(self, shape: Any) -> Any:
        """An int32 array of the given shape with entries drawn from the distribution."""
        if self.use_gpu:
            from .. import cuda

            xp = cuda.cupy
        else:
            xp = numpy
        n = self.threshold.shape[0]
        u = xp.random.uniform(0.0, float(n), size=shape)
        index = xp.minimum(u.astype(numpy.int32), n - 1)
        frac = (u - index).astype(numpy.float32)
        return xp.where(frac < self.threshold[index], index, self.values[index]).astype(numpy.int32)
