"""Function: a node of the define-by-run graph, and the global switches around it.

Calling a Function on Variables runs `forward` on their arrays and, unless the inputs are
volatile (or backprop is switched off), links each output to the function and the function
to its inputs, so that `Variable.backward` can walk the graph back.
"""
import collections
import contextlib
import os
import threading
import traceback
import weakref
from typing import Any, Iterator, Optional, Tuple

import numpy

from .flag import ON, aggregate_flags
from .utils import type_check
from .variable import Variable

__all__ = [
    "Function", "FunctionHook", "get_function_hooks", "is_debug", "set_debug", "DebugMode",
    "no_backprop_mode", "force_backprop_mode",
]

_debug = False
_local = threading.local()


def is_debug() -> bool:
    """Whether debug mode (NaN checks, creation stacks in errors) is on."""
    return _debug


def set_debug(debug: bool) -> None:
    """Switch debug mode on or off for the whole process."""
    global _debug
    _debug = bool(debug)


class DebugMode:
    """`with DebugMode(True):` switches debug mode for a block, restoring the old value after."""

    def __init__(self, debug: bool) -> None:
        self._debug = bool(debug)
        self._old: Optional[bool] = None

    def __enter__(self) -> "DebugMode":
        self._old = is_debug()
        set_debug(self._debug)
        return self

    def __exit__(self, *args: Any) -> None:
        set_debug(bool(self._old))


def get_function_hooks() -> "collections.OrderedDict[str, FunctionHook]":
    """The hooks registered (with a `with hook:` block) for every function in this thread."""
    hooks = getattr(_local, "function_hooks", None)
    if hooks is None:
        hooks = _local.function_hooks = collections.OrderedDict()
    return hooks


def _backprop_enabled() -> bool:
    return getattr(_local, "enable_backprop", True)


@contextlib.contextmanager
def _backprop_mode(enabled: bool) -> Iterator[None]:
    old = _backprop_enabled()
    _local.enable_backprop = enabled
    try:
        yield
    finally:
        _local.enable_backprop = old


def no_backprop_mode() -> Any:
    """`with no_backprop_mode():` functions called inside record no graph (their outputs are roots)."""
    return _backprop_mode(False)


def force_backprop_mode() -> Any:
    """`with force_backprop_mode():` undoes an enclosing no_backprop_mode for a block."""
    return _backprop_mode(True)


def _is_gpu(arrays: Tuple[Any, ...]) -> bool:
    for a in arrays:
        if a is not None and type(a) is not numpy.ndarray and not numpy.isscalar(a):
            from ..util import is_cupy_array

            if is_cupy_array(a):
                return True
    return False


class Function:
    """A differentiable operation on arrays; calling it on Variables records it in the graph.

    Subclasses implement `forward` / `backward` (or their `_cpu` / `_gpu` halves), each taking
    and returning tuples of arrays, and optionally `check_type_forward`.
    """

    type_check_enable = int(os.environ.get("CHAINER_TYPE_CHECK", "1")) != 0
    rank = 0
    # Inputs whose gradient backward can hand back as a DeferredGrad (computed when read) when
    # Variable.backward lists them in _lazy_grads: it does so for inputs that are graph roots.
    _deferrable_inputs: Tuple[int, ...] = ()
    _lazy_grads: Tuple[int, ...] = ()
    # Inputs whose gradient backward can write into an array given in _grad_into (one entry
    # per input, None where there is none) and return that same array.
    _grad_into_inputs: Tuple[int, ...] = ()
    _grad_into: Tuple[Any, ...] = ()
    # `inputs` and `outputs` exist only once the function is in a graph (as in Chainer, a
    # function applied to volatile inputs has neither).

    def __call__(self, *inputs: Any) -> Any:
        """Apply forward to the inputs' arrays and return the output Variable(s).

        Arrays passed instead of Variables are wrapped as Variable(volatile='auto').
        """
        inputs = tuple(x if isinstance(x, Variable) else _as_input(self, i, x) for i, x in enumerate(inputs))
        in_data = tuple(x.data for x in inputs)
        debug = _debug
        if debug:
            self._stack = traceback.extract_stack()[:-1]
        if self.type_check_enable:
            self._check_data_type_forward(in_data)

        hooks = get_function_hooks()
        local_hooks = self.__dict__.get("_local_function_hooks")
        if local_hooks:
            hooks = collections.OrderedDict(hooks)
            hooks.update(local_hooks)
        for hook in hooks.values():
            hook.forward_preprocess(self, in_data)
        if _is_gpu(in_data):
            from . import cuda

            with cuda.get_device(*in_data):
                outputs = self.forward(in_data)
        else:
            outputs = self.forward(in_data)
        if type(outputs) is not tuple:
            raise TypeError(
                f"{self.label}.forward must return a tuple of arrays (write `return y,` for one "
                f"output), got {type(outputs).__name__}."
            )
        for hook in hooks.values():
            hook.forward_postprocess(self, in_data)
        if debug:
            _check_nan(self, outputs, "forward")

        out_flag = aggregate_flags([x._volatile for x in inputs])
        try:
            ret = tuple([Variable(y, volatile=out_flag) for y in outputs])
        except TypeError:
            # Arithmetic on 0-d arrays gives numpy scalars: they stand for their 0-d arrays.
            outputs = tuple([numpy.asarray(y) if isinstance(y, numpy.generic) else y for y in outputs])
            bad = [i for i, y in enumerate(outputs) if not hasattr(y, "shape")]
            if bad:
                raise TypeError(
                    f"{self.label}.forward returned a non-array output at position {bad[0]} "
                    f"({type(outputs[bad[0]]).__name__}); outputs must be numpy or cupy arrays "
                    f"(wrap scalars with plait.chainer.utils.force_array)."
                ) from None
            ret = tuple([Variable(y, volatile=out_flag) for y in outputs])
        if out_flag is not ON and _backprop_enabled():
            self.rank = max([x.rank for x in inputs]) if inputs else 0
            for y in ret:
                y.set_creator(self)
            self.inputs = inputs
            # Outputs are held weakly: the graph must not keep variables the user dropped alive.
            self.outputs = tuple([weakref.ref(y) for y in ret])
        return ret[0] if len(ret) == 1 else ret

    @property
    def label(self) -> str:
        """Short text that names the function (its class name unless overridden)."""
        return type(self).__name__

    @property
    def local_function_hooks(self) -> "collections.OrderedDict[str, FunctionHook]":
        """The hooks registered on this function only (with add_hook)."""
        hooks = self.__dict__.get("_local_function_hooks")
        if hooks is None:
            hooks = self.__dict__["_local_function_hooks"] = collections.OrderedDict()
        return hooks

    def _check_data_type_forward(self, in_data: Tuple[Any, ...]) -> None:
        # A class may define _types_ok(self, in_data) -> bool next to its check_type_forward:
        # the same conditions on plain shapes and dtypes, without building expressions. Only
        # the class's own (never an inherited one, whose check a subclass may have changed) is
        # used, and only to let valid inputs through: a False runs the full check for its error.
        fast = type(self).__dict__.get("_types_ok")
        if fast is not None and fast(self, in_data):
            return
        in_types = type_check.get_types(in_data, "in_types", False)
        try:
            self.check_type_forward(in_types)
        except type_check.InvalidType as e:
            msg = f"Invalid operation is performed in: {self.label} (Forward)\n\n{e}"
            raise type_check.InvalidType(e.expect, e.actual, msg=msg) from None

    def check_type_forward(self, in_types: type_check.TypeInfoTuple) -> None:
        """Check the inputs' types with type_check.expect(...); the default accepts anything."""

    def forward(self, inputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
        """Output arrays from input arrays: forward_gpu if any input is a cupy array, else forward_cpu."""
        if _is_gpu(inputs):
            return self.forward_gpu(inputs)
        return self.forward_cpu(inputs)

    def forward_cpu(self, inputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
        """Output numpy arrays from input numpy arrays."""
        raise NotImplementedError(
            f"{self.label}: forward on the CPU is not implemented; define forward_cpu or forward."
        )

    def forward_gpu(self, inputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
        """Output cupy arrays from input cupy arrays."""
        raise NotImplementedError(
            f"{self.label}: forward on the GPU is not implemented; define forward_gpu or forward."
        )

    def backward(self, inputs: Tuple[Any, ...], grad_outputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
        """Input gradients from inputs and output gradients (None where not differentiable)."""
        if _is_gpu(inputs) or _is_gpu(grad_outputs):
            return self.backward_gpu(inputs, grad_outputs)
        return self.backward_cpu(inputs, grad_outputs)

    def backward_cpu(self, inputs: Tuple[Any, ...], grad_outputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
        """Input gradients on the CPU; the default (all None) marks the function non-differentiable."""
        return tuple(None for _ in inputs)

    def backward_gpu(self, inputs: Tuple[Any, ...], grad_outputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
        """Input gradients on the GPU; the default (all None) marks the function non-differentiable."""
        return tuple(None for _ in inputs)

    def unchain(self) -> None:
        """Cut this function out of the graph: its outputs lose their creator, it loses its inputs."""
        for ref in getattr(self, "outputs", None) or ():
            y = ref()
            if y is not None:
                y.creator = None
        self.inputs = None

    def add_hook(self, hook: "FunctionHook", name: Optional[str] = None) -> None:
        """Register a FunctionHook on this function only, under `name` (default: hook.name)."""
        if not isinstance(hook, FunctionHook):
            raise TypeError(
                f"{self.label}.add_hook: expected a FunctionHook, got {type(hook).__name__}."
            )
        if name is None:
            name = hook.name
        hooks = self.local_function_hooks
        if name in hooks:
            raise KeyError(
                f"{self.label}.add_hook: a hook named {name!r} is already registered; pass another name."
            )
        hooks[name] = hook

    def delete_hook(self, name: str) -> None:
        """Unregister the hook registered under `name`."""
        hooks = self.local_function_hooks
        if name not in hooks:
            raise KeyError(
                f"{self.label}.delete_hook: no hook named {name!r}; registered: {list(hooks) or 'none'}."
            )
        del hooks[name]


def _as_input(func: Function, i: int, x: Any) -> Variable:
    try:
        return Variable(x, volatile="auto")
    except TypeError:
        raise TypeError(
            f"{func.label}: input {i} must be a Variable or a numpy/cupy array, got "
            f"{type(x).__name__}."
        ) from None


def _creation_stack(func: Function) -> str:
    stack = getattr(func, "_stack", None)
    if not stack:
        return ""
    return "\nThe function was created here:\n" + "".join(traceback.format_list(stack))


def _check_nan(func: Function, arrays: Any, where: str) -> None:
    from . import cuda

    for a in arrays:
        if a is None or getattr(a, "dtype", None) is None or a.dtype.kind != "f":
            continue
        if cuda.get_array_module(a).isnan(a).any():
            raise RuntimeError(
                f"NaN is detected on {where} computation of {func.label} (debug mode)."
                f"{_creation_stack(func)}"
            )


class FunctionHook:
    """Callbacks run before and after each function's forward and backward.

    Register one for every function with `with hook:` (this thread, for the block), or on a
    single function with `function.add_hook(hook)`.
    """

    name = "FunctionHook"

    def __enter__(self) -> "FunctionHook":
        hooks = get_function_hooks()
        if self.name in hooks:
            raise KeyError(
                f"FunctionHook: a hook named {self.name!r} is already active in this thread."
            )
        hooks[self.name] = self
        return self

    def __exit__(self, *args: Any) -> None:
        get_function_hooks().pop(self.name, None)

    def forward_preprocess(self, function: Function, in_data: Tuple[Any, ...]) -> None:
        """Called before `function` runs forward on in_data."""

    def forward_postprocess(self, function: Function, in_data: Tuple[Any, ...]) -> None:
        """Called after `function` ran forward on in_data."""

    def backward_preprocess(self, function: Function, in_data: Tuple[Any, ...], out_grad: Tuple[Any, ...]) -> None:
        """Called before `function` runs backward."""

    def backward_postprocess(self, function: Function, in_data: Tuple[Any, ...], out_grad: Tuple[Any, ...]) -> None:
        """Called after `function` ran backward."""
