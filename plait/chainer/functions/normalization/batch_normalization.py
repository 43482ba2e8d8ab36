"""batch_normalization and fixed_batch_normalization: normalise each feature over the batch."""
from typing import Any

from ... import function
from ...utils import type_check


def _layout(x: Any, gamma: Any) -> tuple:
    """(axes reduced over, a reshape that aligns (d1, ..., dk) params with x)."""
    head = gamma.ndim + 1
    axes = (0,) + tuple(range(head, x.ndim))
    return axes, (1,) + gamma.shape + (1,) * (x.ndim - head)


class BatchNormalizationFunction(function.Function):
    """x (nB, d1, ..., dk, ...), gamma, beta [, mean, var] (d1, ..., dk) -> (same shape as x)

    With three inputs it normalises with the batch's own statistics over the batch axis and
    the axes after gamma's; after forward, `mean` and `var` hold those statistics (var is the
    biased batch variance, without eps), for a link to keep running averages. With five it
    uses the given mean and var (fixed_batch_normalization), differentiable in all five.
    """

    def __init__(self, eps: float = 1e-5) -> None:
        if not float(eps) >= 0:
            raise ValueError(f"batch_normalization: 'eps' must be >= 0, got {eps!r}.")
        self.eps = float(eps)

    def check_type_forward(self, in_types: Any) -> None:
        n_in = in_types.size().eval()
        if n_in not in (3, 5):
            raise type_check.InvalidType(
                "in_types.size() == 3 or in_types.size() == 5", f"in_types.size() == {n_in}"
            )
        x_type, gamma_type, beta_type = in_types[:3]
        type_check.expect(
            x_type.dtype.kind == "f",
            gamma_type.dtype == x_type.dtype,
            beta_type.dtype == x_type.dtype,
            x_type.ndim >= gamma_type.ndim + 1,
            x_type.shape[1:1 + gamma_type.ndim.eval()] == gamma_type.shape,
            beta_type.shape == gamma_type.shape,
        )
        if n_in == 5:
            mean_type, var_type = in_types[3:]
            type_check.expect(
                mean_type.dtype == x_type.dtype,
                var_type.dtype == x_type.dtype,
                mean_type.shape == gamma_type.shape,
                var_type.shape == gamma_type.shape,
            )

    def forward(self, inputs: tuple) -> tuple:
        x, gamma, beta = inputs[:3]
        axes, param_shape = _layout(x, gamma)
        if len(inputs) == 5:
            mean, var = inputs[3], inputs[4]
        else:
            mean = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.mean, self.var = mean, var
        self._inv_std = (var + var.dtype.type(self.eps)) ** var.dtype.type(-0.5)
        self._x_hat = (x - mean.reshape(param_shape)) * self._inv_std.reshape(param_shape)
        y = self._x_hat * gamma.reshape(param_shape)
        y += beta.reshape(param_shape)
        return y,

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        x, gamma = inputs[:2]
        gy = grad_outputs[0]
        axes, param_shape = _layout(x, gamma)
        gbeta = gy.sum(axis=axes)
        ggamma = (gy * self._x_hat).sum(axis=axes)
        scale = gamma * self._inv_std  # d y / d x at fixed statistics
        if len(inputs) == 5:
            gx = gy * scale.reshape(param_shape)
            gmean = -scale * gbeta
            # d x_hat / d var = -x_hat / (2 (var + eps)) = -x_hat * inv_std**2 / 2
            gvar = ggamma * gamma * (self._inv_std * self._inv_std) * gamma.dtype.type(-0.5)
            return gx, ggamma, gbeta, gmean, gvar
        m = x.size // gamma.size
        # The batch mean and variance depend on every x, which subtracts the two projections.
        correction = self._x_hat * ggamma.reshape(param_shape)
        correction += gbeta.reshape(param_shape)
        correction *= x.dtype.type(1.0 / m)
        gx = (gy - correction) * scale.reshape(param_shape)
        return gx, ggamma, gbeta


def batch_normalization(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> Any:
    """Normalise x with its batch statistics, then scale by gamma and shift by beta.

    x is (nB, C, ...) with gamma, beta (C,) (or, more generally, gamma's shape equals the axes
    right after the batch axis); statistics are taken over the batch axis and all axes after
    gamma's: y = gamma * (x - mean) / sqrt(var + eps) + beta.
    """
    return BatchNormalizationFunction(eps)(x, gamma, beta)


def fixed_batch_normalization(x: Any, gamma: Any, beta: Any, mean: Any, var: Any, eps: float = 1e-5) -> Any:
    """batch_normalization with given statistics: y = gamma * (x - mean) / sqrt(var + eps) + beta."""
    return BatchNormalizationFunction(eps)(x, gamma, beta, mean, var)
