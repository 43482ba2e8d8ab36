"""sin and cos, elementwise."""
from typing import Any

from ... import cuda, function, utils
from ...utils import type_check


class Sin(function.Function):
    """sin(x). (any shape) -> (same shape)"""

    @property
    def label(self) -> str:
        return "sin"

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, x: tuple) -> tuple:
        return utils.force_array(cuda.get_array_module(x[0]).sin(x[0])),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        return utils.force_array(cuda.get_array_module(x[0]).cos(x[0]) * gy[0]),


class Cos(function.Function):
    """cos(x). (any shape) -> (same shape)"""

    @property
    def label(self) -> str:
        return "cos"

    def check_type_forward(self, in_types: Any) -> None:
        type_check.expect(in_types.size() == 1)
        type_check.expect(in_types[0].dtype.kind == "f")

    def forward(self, x: tuple) -> tuple:
        return utils.force_array(cuda.get_array_module(x[0]).cos(x[0])),

    def backward(self, x: tuple, gy: tuple) -> tuple:
        return utils.force_array(-cuda.get_array_module(x[0]).sin(x[0]) * gy[0]),


def sin(x: Any) -> Any:
    """Elementwise sine."""
    return Sin()(x)


def cos(x: Any) -> Any:
    """Elementwise cosine."""
    return Cos()(x)
