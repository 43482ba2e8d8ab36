"""exp and log, elementwise."""
from typing import Any

from ... import cuda, function, utils
from ...utils import type_check


class Exp(function.Function):
    """exp(x). (any shape) -> (same shape)"""

    @property
    def label(self) -> str:
        return "exp"

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, x: tuple) -> tuple:
        self.y = utils.force_array(cuda.get_array_module(x[0]).exp(x[0]))
        return self.y,

    def backward(self, x: tuple, gy: tuple) -> tuple:
        return utils.force_array(self.y * gy[0]),


class Log(function.Function):
    """log(x), natural. (any shape) -> (same shape)"""

    @property
    def label(self) -> str:
        return "log"

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, x: tuple) -> tuple:
        return utils.force_array(cuda.get_array_module(x[0]).log(x[0])),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        return utils.force_array(gy[0] / x[0]),


def exp(x: Any) -> Any:
    """Elementwise exponential."""
    return Exp()(x)


def log(x: Any) -> Any:
    """Elementwise natural logarithm."""
    return Log()(x)
