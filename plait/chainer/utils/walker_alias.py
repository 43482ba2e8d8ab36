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
        # NOTE: the tables are Chainer 1.7.2's, built the way it builds them (buckets in
        # ascending order of probability, float32 thresholds from float64 arithmetic, as NumPy 1.x
        # promoted it), so that a seeded program draws the very samples it drew on Chainer.
        prob = numpy.asarray(probs, dtype=numpy.float32).ravel()
        prob = prob / numpy.sum(prob, dtype=numpy.float32)
        n = prob.size
        threshold = numpy.zeros(n, dtype=numpy.float32)
        values = numpy.zeros(2 * n, dtype=numpy.int32)  # (own, alias) of each bucket
        il = ir = 0
        for q, i in sorted(zip(prob.tolist(), range(n))):
            q = float(numpy.float32(q)) * n
            while q > 1 and ir < il:
                values[ir * 2 + 1] = i
                q -= 1.0 - float(threshold[ir])
                ir += 1
            threshold[il] = q
            values[il * 2] = i
            il += 1
        self.threshold = threshold
        self.values = values
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
        # Chainer's draw: one uniform number picks the bucket (its integer part) and the side.
        pb = xp.random.uniform(0.0, 1.0, shape) * n
        index = xp.minimum(pb.astype(numpy.int32), n - 1)
        side = (self.threshold[index] < pb - index).astype(numpy.int32)
        return self.values[index * 2 + side]
