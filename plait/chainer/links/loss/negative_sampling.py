"""NegativeSampling: a link holding output word vectors W and a sampler of noise words."""
from typing import Any, Sequence

import numpy

from ... import link
from ...functions.loss import negative_sampling as _ns
from ...utils import WalkerAlias
from ..connection import _weights as _w


class NegativeSampling(link.Link):
    """Negative sampling loss with a built-in noise sampler. x (nB, in_size), t (nB,) -> ()

    W (len(counts), in_size) starts at zero. Noise words are drawn with probability
    proportional to counts ** power by a WalkerAlias sampler (`self.sampler`).
    """

    def __init__(self, in_size: int, counts: Sequence[float], sample_size: int, power: float = 0.75) -> None:
        super().__init__()
        _w.check_positive("NegativeSampling", "in_size", in_size)
        if isinstance(sample_size, bool) or not isinstance(sample_size, (int, numpy.integer)) or sample_size < 0:
            raise ValueError(f"NegativeSampling: sample_size must be an int >= 0, got {sample_size!r}.")
        p = numpy.asarray(counts, dtype=numpy.float32)
        if p.ndim != 1 or p.size == 0:
            raise ValueError(
                f"NegativeSampling: counts must be a non-empty 1-d sequence (one count per word), got "
                f"shape {p.shape}."
            )
        self.sample_size = int(sample_size)
        self.sampler = WalkerAlias(numpy.power(p, numpy.float32(power)))
        self.add_param("W", (p.size, int(in_size)))
        self.W.data.fill(0)

    def to_gpu(self, device: Any = None) -> "NegativeSampling":
        """Move W and the sampler's tables to a GPU; returns self."""
        super().to_gpu(device)
        from ... import cuda

        with cuda.get_device(self._device_id):
            self.sampler.to_gpu()
        return self

    def to_cpu(self) -> "NegativeSampling":
        """Move W and the sampler's tables to the host; returns self."""
        super().to_cpu()
        self.sampler.to_cpu()
        return self

    def __call__(self, x: Any, t: Any, reduce: str = "sum") -> Any:
        """The loss of words t (nB,) int32 given inputs x (nB, in_size), summed unless reduce='no'."""
        return _ns.negative_sampling(x, t, self.W, self.sampler.sample, self.sample_size, reduce=reduce)
