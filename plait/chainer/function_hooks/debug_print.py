"""PrintHook: prints each function's inputs (and output gradients) as it runs."""
import sys
from typing import Any, Optional, TextIO

from ..function import Function, FunctionHook
from ..variable import Variable


class PrintHook(FunctionHook):
    """Writes a summary of every function call under it (forward, and backward with gradients)."""

    name = "PrintHook"

    def __init__(self, sep: str = "", end: str = "\n", file: Optional[TextIO] = None, flush: bool = True) -> None:
        self.sep = sep
        self.end = end
        self.file = file
        self.flush = flush

    def _print(self, text: str) -> None:
        out = self.file if self.file is not None else sys.stdout
        print(text, sep=self.sep, end=self.end, file=out, flush=self.flush)

    def _describe(self, function: Function, in_data: Any, out_grad: Any = None) -> str:
        lines = [f"function\t{function.label}", "input data"]
        for x in in_data:
            lines.append("(removed)" if x is None else Variable(x).debug_print())
        if out_grad is not None:
            lines.append("output gradient")
            for gy in out_grad:
                if gy is None:
                    lines.append("(None)")
                else:
                    v = Variable(gy)
                    v.grad = gy
                    lines.append(v.debug_print())
        return "\n".join(lines)

    def forward_preprocess(self, function: Function, in_data: Any) -> None:
        self._print(self._describe(function, in_data))

    def backward_preprocess(self, function: Function, in_data: Any, out_grad: Any) -> None:
        self._print(self._describe(function, in_data, out_grad))
