"""BatchNormalization: batch normalization with learned gamma/beta and population statistics."""
from typing import Any

import numpy

from ... import cuda, link
from ...functions.normalization import batch_normalization as _bn
from ...variable import Variable


class BatchNormalization(link.Link):
    """Normalise x (nB, *size, ...) per channel, then scale by gamma and shift by beta.

    Three modes, chosen per call: training (batch statistics; avg_mean and avg_var follow
    them as moving averages with `decay`), fine-tuning (batch statistics; avg_mean and
    avg_var become the exact average over the N batches seen since start_finetuning) and
    test (normalise with avg_mean and avg_var). gamma starts at 1, beta at 0, avg_mean and
    avg_var at 0 (as in Chainer 1.x), N at 0.
    """

    def __init__(self, size: Any, decay: float = 0.9, eps: float = 1e-5, dtype: Any = numpy.float32) -> None:
        super().__init__()
        if not 0 <= float(decay) <= 1:
            raise ValueError(f"BatchNormalization: decay must lie in [0, 1], got {decay!r}.")
        self.add_param("gamma", size, dtype=dtype)
        self.gamma.data.fill(1)
        self.add_param("beta", size, dtype=dtype)
        self.beta.data.fill(0)
        self.add_persistent("avg_mean", numpy.zeros(size, dtype=dtype))
        self.add_persistent("avg_var", numpy.zeros(size, dtype=dtype))
        self.add_persistent("N", 0)
        self.decay = decay
        self.eps = eps

    def __call__(self, x: Any, test: bool = False, finetune: bool = False) -> Any:
        """Normalise x in training mode, or fine-tuning / test mode when those flags are set."""
        if test and not finetune:
            mean = Variable(self.avg_mean, volatile="auto")
            var = Variable(self.avg_var, volatile="auto")
            return _bn.fixed_batch_normalization(x, self.gamma, self.beta, mean, var, self.eps)
        func = _bn.BatchNormalizationFunction(self.eps)
        y = func(x, self.gamma, self.beta)
        if finetune:
            self.N += 1
            decay = 1.0 - 1.0 / self.N
        else:
            decay = self.decay
        data = x.data if isinstance(x, Variable) else x
        m = data.size // self.gamma.data.size
        # The batch variance is biased; the population estimate rescales it by m / (m - 1).
        adjust = m / max(m - 1.0, 1.0)
        with cuda.get_device(data):
            self.avg_mean *= decay
            self.avg_mean += (1 - decay) * func.mean
            self.avg_var *= decay
            self.avg_var += ((1 - decay) * adjust) * func.var
        del func.mean, func.var
        return y

    def start_finetuning(self) -> None:
        """Restart the fine-tuning count N; call it before each new fine-tuning pass."""
        self.N = 0
