"""gaussian: a differentiable sample mean + exp(ln_var / 2) * eps, eps ~ N(0, 1)."""
from typing import Any

from ... import cuda, function, utils
from ...utils import type_check


class Gaussian(function.Function):
    """mean, ln_var (one shape) -> a sample (that shape); eps is drawn once per Function object."""

    eps = None

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 2)
        m_type, v_type = in_types
        type_check.expect(
            m_type.dtype.kind == "f",
            m_type.dtype == v_type.dtype,
            m_type.shape == v_type.shape,
        )

    def forward(self, inputs: tuple) -> tuple:
        mean, ln_var = inputs
        xp = cuda.get_array_module(mean)
        if self.eps is None:
            # Drawn from the global generator, which plait.util.fix_random_seed seeds.
            self.eps = xp.random.standard_normal(ln_var.shape).astype(mean.dtype, copy=False)
        self.noise = xp.exp(ln_var * ln_var.dtype.type(0.5)) * self.eps
        return utils.force_array(mean + self.noise),

    def backward(self, inputs: tuple, grad_outputs: tuple) -> tuple:
        g = grad_outputs[0]
        return g, utils.force_array(g * self.noise * g.dtype.type(0.5))


def gaussian(mean: Any, ln_var: Any) -> Any:
    """A sample of N(mean, exp(ln_var)) by reparameterisation, differentiable in both inputs."""
    return Gaussian()(mean, ln_var)
