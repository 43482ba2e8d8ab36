"""The Chainer face of plait: Chainer 1.7.2's define-by-run API on plait's backends.

Replace `import chainer` with `import plait.chainer as chainer` (and `chainer.functions`,
`.links`, `.optimizers`, `.serializers` likewise) and Chainer code runs on plait's Ops.
"""
from . import cuda, flag, function, link, optimizer, utils, variable  # noqa: F401
from .flag import AUTO, OFF, ON, Flag
from .function import (
    DebugMode,
    Function,
    FunctionHook,
    force_backprop_mode,
    get_function_hooks,
    is_debug,
    no_backprop_mode,
    set_debug,
)
from .link import Chain, ChainList, Link
from .optimizer import GradientMethod, Optimizer
from .variable import Variable
from .function_set import FunctionSet
from . import serializer, serializers  # noqa: E402
from .serializer import AbstractSerializer, Deserializer, Serializer
from . import functions, links, optimizers  # noqa: E402
from . import computational_graph, function_hooks, gradient_check  # noqa: E402
from .functions.math import basic_math  # noqa: E402

basic_math.install_variable_arithmetics()

# The thread-local store of the hooks registered with `with hook:` (get_function_hooks).
thread_local = function._local

__version__ = "1.7.2"

__all__ = [
    "Variable", "Function", "FunctionHook", "Link", "Chain", "ChainList", "Optimizer",
    "GradientMethod", "Flag", "ON", "OFF", "AUTO", "FunctionSet", "AbstractSerializer",
    "Serializer", "Deserializer", "cuda", "functions", "links", "optimizers", "optimizer",
    "serializers", "gradient_check", "utils", "function_hooks", "computational_graph",
    "no_backprop_mode", "force_backprop_mode", "set_debug", "is_debug", "DebugMode",
    "get_function_hooks", "serializer", "basic_math", "thread_local",
]
