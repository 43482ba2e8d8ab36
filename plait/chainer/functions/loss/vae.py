"""Losses of variational autoencoders, composed from other functions."""
import math
from typing import Any

from ...variable import Variable
from ..activation.softplus import softplus
from ..math.exponential import exp
from ..math.sum import sum as _sum


def _as_variable(v: Any) -> Variable:
    # Arrays join the graph as Function inputs do: as volatile='auto' roots.
    return v if isinstance(v, Variable) else Variable(v, volatile="auto")


def gaussian_kl_divergence(mean: Any, ln_var: Any) -> Any:
    """KL(N(mean, diag(exp(ln_var))) || N(0, I)), summed over all elements; a scalar Variable."""
    mean, ln_var = _as_variable(mean), _as_variable(ln_var)
    var = exp(ln_var)
    return _sum(mean * mean + var - ln_var - 1) * 0.5


def bernoulli_nll(x: Any, y: Any) -> Any:
    """-log B(x; sigmoid(y)) summed over all elements; y are logits (pre-sigmoid scores)."""
    x, y = _as_variable(x), _as_variable(y)
    # -x log p - (1 - x) log(1 - p) with p = sigmoid(y) is softplus(y) - x * y.
    return _sum(softplus(y)) - _sum(x * y)


def gaussian_nll(x: Any, mean: Any, ln_var: Any) -> Any:
    """-log N(x; mean, diag(exp(ln_var))) summed over all D = x.size elements; a scalar Variable."""
    x, mean, ln_var = _as_variable(x), _as_variable(mean), _as_variable(ln_var)
    D = x.data.size
    diff = x - mean
    weighted = diff * diff * exp(-ln_var)
    return (_sum(ln_var) + D * math.log(2 * math.pi)) * 0.5 + _sum(weighted) * 0.5
