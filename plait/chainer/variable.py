"""Variable: an array plus the record of how it was computed, and error backpropagation."""
import collections
import heapq
import itertools
import weakref
from typing import Any, Optional

import numpy

from .flag import Flag, OFF

__all__ = ["Variable", "DeferredGrad", "deferral_fits"]


def _is_array(x: Any) -> bool:
    if type(x) is numpy.ndarray:
        return True
    from ..util import is_cupy_array

    return isinstance(x, numpy.ndarray) or is_cupy_array(x)


def _xp(x: Any) -> Any:
    if isinstance(x, numpy.ndarray):
        return numpy
    from . import cuda

    return cuda.get_array_module(x)


def _check_grad(var: "Variable", grad: Any, where: str, func: Any = None) -> None:
    """Raise unless grad could be var's gradient: same kind of array, dtype and shape."""
    data = var.data
    if type(grad) is not type(data) and not (
        isinstance(grad, numpy.ndarray) and isinstance(data, numpy.ndarray)
    ):
        raise TypeError(
            f"{where}: the gradient is a {type(grad).__module__}.{type(grad).__name__} but the "
            f"variable's data is a {type(data).__module__}.{type(data).__name__}; both must live "
            f"on the same device.{_stack_of(func)}"
        )
    if grad.dtype != data.dtype:
        raise TypeError(
            f"{where}: the gradient has dtype {grad.dtype} but the variable's data has dtype "
            f"{data.dtype}; they must match.{_stack_of(func)}"
        )
    if grad.shape != data.shape:
        raise ValueError(
            f"{where}: the gradient has shape {grad.shape} but the variable's data has shape "
            f"{data.shape}; they must match.{_stack_of(func)}"
        )


def _stack_of(func: Any) -> str:
    """Where func was called, when debug mode recorded it (set_debug(True))."""
    stack = getattr(func, "_stack", None)
    if not stack:
        return ""
    import traceback

    return "\nStacktrace of the function is below:\n" + "".join(traceback.format_list(stack))


class DeferredGrad:
    """A gradient that is computed only when someone reads it: ``compute(*args)``.

    A Function's backward may hand one back, in place of an array, for an input that is a root
    of the graph (not a parameter's gradient the optimizer will read, typically the data fed to
    the first layer), when Variable.backward asks for it. The arguments must be private copies,
    so that nothing done to the weights or gradients afterwards changes the result.
    """

    __slots__ = ("compute", "args", "shape", "dtype", "nbytes", "__weakref__")

    def __init__(self, compute: Any, args: tuple, shape: tuple, dtype: Any) -> None:
        self.compute = compute
        self.args = args
        self.shape = tuple(shape)
        self.dtype = dtype
        self.nbytes = sum([getattr(a, "nbytes", 0) for a in args])

    def __call__(self) -> Any:
        return self.compute(*self.args)


# Bytes of copies that pending DeferredGrads may hold in this process, all together. Past it, the
# oldest pending gradients are computed (then their copies are freed): a program that keeps many
# input Variables alive after their backward never holds more than this for them.
DEFERRED_GRAD_BUDGET = 64 << 20
_deferred_held: "collections.OrderedDict[int, tuple]" = collections.OrderedDict()
_deferred_keys = itertools.count()
_deferred_bytes = 0


def deferral_fits(nbytes: int) -> bool:
    """Whether a DeferredGrad whose copies take nbytes may be made (else compute it now)."""
    return nbytes <= DEFERRED_GRAD_BUDGET


def _release(key: int) -> None:
    global _deferred_bytes
    entry = _deferred_held.pop(key, None)
    if entry is not None:
        _deferred_bytes -= entry[2]


def _hold(var: "Variable", deferred: DeferredGrad) -> None:
    """Count deferred (pending on var) against the budget, computing the oldest ones past it."""
    global _deferred_bytes
    key = next(_deferred_keys)
    # Freed with the DeferredGrad: when it is computed, dropped by cleargrad, or var dies.
    _deferred_held[key] = (weakref.ref(deferred, lambda _, k=key: _release(k)), weakref.ref(var), deferred.nbytes)
    _deferred_bytes += deferred.nbytes
    while _deferred_bytes > DEFERRED_GRAD_BUDGET and _deferred_held:
        oldest, (d_ref, v_ref, _) = next(iter(_deferred_held.items()))
        v = v_ref()
        if v is not None and any([p is d_ref() for p in v._grad_pending]):
            v._settle_grad()
        _release(oldest)


class Variable:
    """An array with the function that created it, so gradients can flow back to its inputs.

    Args:
        data: a numpy or cupy array.
        volatile: Flag (or 'on'/'off'/'auto'/bool/None); ON records no graph.
        name: optional name, shown in graphs and messages.
    """

    # Arithmetic with a numpy array on the left must come back to the Variable's reflected
    # operators instead of being broadcast elementwise by numpy.
    __array_priority__ = 200
    __array_ufunc__ = None
    # Class-level defaults, so that Variables pickled before these existed still load.
    _grad_zero = False
    _grad_pending: tuple = ()

    def __init__(self, data: Any, volatile: Any = OFF, name: Optional[str] = None) -> None:
        if not _is_array(data):
            raise TypeError(
                f"Variable: 'data' must be a numpy.ndarray or cupy.ndarray, got "
                f"{type(data).__module__}.{type(data).__name__}. Wrap values with numpy.asarray(...)."
            )
        self.data = data
        self.rank = 0
        self._volatile = Flag(volatile)
        self._grad = None
        # True when _grad may be an array owned by someone else (a gradient handed over by a
        # backward without a copy): it must then be replaced, never updated in place.
        self._grad_shared = False
        # True after zerograd() on an existing gradient array: the gradient is all zeros, but
        # the array is only filled when someone reads it. A backward then writes the first
        # gradient straight into it (a copy) instead of filling it and adding to zeros.
        self._grad_zero = False
        # Gradients handed back as DeferredGrad by a backward: added to _grad when it is read.
        self._grad_pending = ()
        self.creator = None
        self.name = name

    def __copy__(self) -> "Variable":
        # As in Chainer (whose Variable pickles and copies as Variable(data, volatile, name)):
        # a shallow copy shares the data array and starts without grad and without creator.
        return Variable(self.data, volatile=self._volatile, name=self.name)

    def __getstate__(self) -> dict:
        # The graph holds weak references, which cannot be pickled: a pickled (or deep-copied)
        # Variable comes back as a root.
        self._settle_grad()
        state = dict(self.__dict__)
        state["creator"] = None
        state["rank"] = 0
        return state

    def __repr__(self) -> str:
        if self.name:
            return f"<variable {self.name}>"
        return f"<variable at 0x{id(self):x}>"

    def __str__(self) -> str:
        return self.name or f"<var@{id(self):x}>"

    def debug_print(self) -> str:
        """A multi-line summary: name, device, volatility, array type, shape, dtype, value
        statistics and grad (None, 0, or its statistics), in Chainer's layout."""
        from . import cuda

        data = self.data
        xp = cuda.get_array_module(data)
        stats = "mean={0:.8f}, std={1:.8f}"
        grad = self.grad
        if grad is None:
            grad_text = "None"
        elif bool(xp.all(grad == 0)):
            grad_text = "0"
        else:
            grad_text = stats.format(float(xp.mean(grad)), float(xp.std(grad)))
        return "\n".join([
            repr(self),
            f"- device: {'CPU' if xp is numpy else data.device}",
            f"- volatile: {self._volatile}",
            f"- backend: {type(data)}",
            f"- shape: {data.shape}",
            f"- dtype: {data.dtype}",
            f"- statistics: {stats.format(float(xp.mean(data)), float(xp.std(data)))}",
            f"- grad: {grad_text}",
        ])

    def __pos__(self) -> "Variable":
        return self

    # Comparisons and truth values are not defined on Variables (as in Chainer): compare
    # their data instead. Hashing stays by identity, so Variables can key dicts and sets.
    def _undefined(self, *args: Any) -> Any:
        raise NotImplementedError(
            "Variable: comparisons and truth values are not defined on Variables; compare "
            "their data arrays (variable.data) instead."
        )

    __lt__ = __le__ = __eq__ = __ne__ = __gt__ = __ge__ = _undefined
    __bool__ = _undefined
    __hash__ = object.__hash__

    def __len__(self) -> int:
        """The number of elements of the data array."""
        return int(self.data.size)

    @property
    def shape(self) -> tuple:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def dtype(self) -> Any:
        return self.data.dtype

    @property
    def label(self) -> str:
        """Short text for graphs: '(2, 3), float32', or just the dtype for a 0-d array."""
        if self.data.shape == ():
            return str(self.data.dtype)
        dims = ", ".join(str(d) for d in self.data.shape)
        return f"({dims}), {self.data.dtype}"

    @property
    def volatile(self) -> Flag:
        return self._volatile

    @volatile.setter
    def volatile(self, value: Any) -> None:
        self._volatile = Flag(value)

    @property
    def grad(self) -> Any:
        if self._grad_zero or self._grad_pending:
            self._settle_grad()
        return self._grad

    @grad.setter
    def grad(self, g: Any) -> None:
        if g is not None:
            _check_grad(self, g, f"Variable{' ' + repr(self.name) if self.name else ''}.grad")
        self._grad = g
        self._grad_shared = False
        self._grad_zero = False
        self._grad_pending = ()

    def _settle_grad(self) -> None:
        """Fill a gradient that zerograd() left pending with its zeros, then add the deferred ones."""
        if self._grad_zero:
            self._grad.fill(0)
            self._grad_zero = False
        if self._grad_pending:
            pending = self._grad_pending
            self._grad_pending = ()
            for deferred in pending:
                g = deferred()
                if self._grad is None:
                    # A fresh array computed for this variable alone: it owns it.
                    self._grad = g
                    self._grad_shared = False
                else:
                    self._writable_grad()
                    self._grad += g

    def _writable_grad(self) -> Any:
        """The gradient array, copied first if it may be shared, so it can be changed in place."""
        self._settle_grad()
        if self._grad_shared:
            self._grad = self._grad.copy()
            self._grad_shared = False
        return self._grad

    def set_creator(self, gen_func: Any) -> None:
        """Record gen_func as the function that created this variable."""
        self.creator = gen_func
        self.rank = gen_func.rank + 1

    def to_cpu(self) -> None:
        """Move data and grad to the host."""
        from . import cuda

        self.data = cuda.to_cpu(self.data)
        self._settle_grad()
        if self._grad is not None:
            self._grad = cuda.to_cpu(self._grad)

    def to_gpu(self, device: Any = None) -> None:
        """Move data and grad to a GPU (the given device, else the current one)."""
        from . import cuda

        with cuda.get_device(device) if device is not None else cuda.DummyDevice:
            self.data = cuda.to_gpu(self.data, device)
            self._settle_grad()
            if self._grad is not None:
                self._grad = cuda.to_gpu(self._grad, device)

    def zerograd(self) -> None:
        """Set the gradient to zeros (allocated if unset, else the same array, zeroed)."""
        self._grad_pending = ()
        if self._grad is None or self._grad_shared:
            self._grad = _xp(self.data).zeros_like(self.data)
            self._grad_shared = False
            self._grad_zero = False
        else:
            # Filled when read (the grad property), or overwritten by the next backward.
            self._grad_zero = True

    def cleargrad(self) -> None:
        """Drop the gradient (set it to None): cheaper than zerograd before a backward."""
        self._grad = None
        self._grad_shared = False
        self._grad_zero = False
        self._grad_pending = ()

    def copydata(self, var: "Variable") -> None:
        """Copy var's data into this variable's array, across host and devices."""
        _copy_into(self.data, var.data, "Variable.copydata")

    def addgrad(self, var: "Variable") -> None:
        """Add var's gradient to this one's, across host and devices.

        If this variable has no gradient yet, it gets a copy of var's.
        """
        var._settle_grad()
        self._settle_grad()
        src = var._grad
        if src is None:
            raise ValueError(
                "Variable.addgrad: the source variable has no gradient (grad is None); run "
                "backward on it first."
            )
        if self._grad is None:
            self._grad = _converted(src, self.data).copy()
            self._grad_shared = False
            return
        dst = self._writable_grad()
        if dst.shape != src.shape:
            raise ValueError(
                f"Variable.addgrad: gradient shapes differ: target {dst.shape}, source {src.shape}."
            )
        dst += _converted(src, dst)

    def unchain_backward(self) -> None:
        """Delete the graph behind this variable; it becomes a root and backprop stops here."""
        seen = set()
        stack = []
        if self.creator is not None:
            stack.append(self.creator)
            seen.add(id(self.creator))
        while stack:
            func = stack.pop()
            for x in func.inputs or ():
                c = x.creator
                if c is not None and id(c) not in seen:
                    seen.add(id(c))
                    stack.append(c)
            func.unchain()

    def backward(self, retain_grad: bool = False) -> None:
        """Backpropagate from this variable through the graph that created it.

        Gradients accumulate into the `grad` of root variables (parameters, inputs); the grads
        of intermediate variables are freed on the way unless retain_grad=True. A variable
        with one element and no grad starts from grad = 1.
        """
        if self.creator is None:
            return
        from . import function as _fn

        self._settle_grad()
        if self._grad is None and self.data.size == 1:
            self._grad = _xp(self.data).ones_like(self.data)
            self._grad_shared = False
        # NOTE: a larger variable without a grad backpropagates None as its gradient, as in
        # Chainer (functions with several outputs treat a None output gradient as zeros).

        # Functions come off the heap highest rank first, which is a reverse topological order:
        # a function runs only after every function that consumed its outputs.
        heap: list = []
        pushed = set()
        counter = itertools.count()

        def push(func: Any) -> None:
            key = id(func)
            if key not in pushed:
                pushed.add(key)
                heapq.heappush(heap, (-func.rank, next(counter), func))

        push(self.creator)
        seen_vars = set()
        debug = _fn._debug
        global_hooks = _fn.get_function_hooks()
        while heap:
            func = heapq.heappop(heap)[2]
            if func.inputs is None:
                raise RuntimeError(
                    f"Variable.backward: {func.label} has been unchained (unchain_backward) while "
                    f"one of its outputs is still in the graph; there is nothing to backpropagate to."
                )
            outputs = [ref() for ref in func.outputs]
            for y in outputs:
                if y is not None and y._grad_zero:
                    y._settle_grad()
            out_grad = tuple([None if y is None else y._grad for y in outputs])
            in_data = tuple([x.data for x in func.inputs])
            local = func.__dict__.get("_local_function_hooks")
            hooks = list(global_hooks.values()) + (list(local.values()) if local else [])
            for hook in hooks:
                hook.backward_preprocess(func, in_data, out_grad)
            # Gradients of graph roots that a function can compute later (Linear's input, say)
            # are asked for as DeferredGrad: nothing is spent on the input data's gradient
            # unless someone reads it. Debug mode checks every gradient for NaN, so it takes
            # them all now.
            lazy = func._deferrable_inputs
            if lazy and not debug:
                lazy = tuple([i for i in lazy if func.inputs[i].creator is None])
            else:
                lazy = ()
            # A root whose gradient zerograd() left pending as zeros can take the function's
            # gradient straight into its array (0 + g written once, not computed then copied).
            into = func._grad_into_inputs
            if into:
                into = _pending_zero_arrays(func.inputs, into)
            if lazy or into:
                func._lazy_grads = lazy
                func._grad_into = into
                try:
                    gxs = func.backward(in_data, out_grad)
                finally:
                    func._lazy_grads = ()
                    func._grad_into = ()
            elif any([g is None for g in out_grad]):
                try:
                    gxs = func.backward(in_data, out_grad)
                except Exception as e:
                    _explain_missing_grad(func, outputs, out_grad, e)
                    raise
            else:
                gxs = func.backward(in_data, out_grad)
            if type(gxs) is not tuple or len(gxs) != len(in_data):
                raise TypeError(
                    f"{func.label}.backward must return a tuple with one gradient (or None) per "
                    f"input ({len(in_data)}), got "
                    + (f"a tuple of {len(gxs)}" if isinstance(gxs, tuple) else type(gxs).__name__)
                    + "."
                )
            for hook in hooks:
                hook.backward_postprocess(func, in_data, out_grad)
            if debug:
                _fn._check_nan(func, gxs, "backward")
            if not retain_grad:
                for y in outputs:
                    if y is not None and y is not self:
                        y._grad = None
                        y._grad_shared = False

            for i, (x, gx) in enumerate(zip(func.inputs, gxs)):
                if gx is None:
                    continue
                if type(gx) is DeferredGrad:
                    if gx.shape != x.data.shape or gx.dtype != x.data.dtype:
                        raise ValueError(
                            f"{func.label}.backward (gradient of input {i}): the deferred gradient "
                            f"has shape {gx.shape} and dtype {gx.dtype}, but the input has shape "
                            f"{x.data.shape} and dtype {x.data.dtype}."
                        )
                    if x.creator is None:
                        # NOTE: one pending gradient at most. A root reused across many backward
                        # passes without its grad being read (full-batch training on one
                        # Variable) would otherwise hold a copy of W per pass.
                        if x._grad_pending:
                            x._settle_grad()
                        x._grad_pending = (gx,)
                        _hold(x, gx)
                        continue
                    gx = gx()
                elif type(gx) is not numpy.ndarray and isinstance(gx, numpy.generic):
                    # A numpy scalar from arithmetic on 0-d arrays: its 0-d array.
                    gx = numpy.asarray(gx)
                _check_grad(x, gx, f"{func.label}.backward (gradient of input {i})", func)
                if x.creator is not None:
                    push(x.creator)
                    if id(x) not in seen_vars:
                        # First gradient of an intermediate variable in this pass: it replaces
                        # whatever an earlier backward left there.
                        seen_vars.add(id(x))
                        x._grad = gx
                        x._grad_shared = True
                        x._grad_zero = False
                        continue
                if x._grad is None:
                    x._grad = gx
                    x._grad_shared = True
                elif gx is x._grad and x._grad_zero:
                    # Written into the pending array through _grad_into: already 0 + gx.
                    x._grad_zero = False
                elif x._grad_shared:
                    summed = x._grad + gx
                    # 0-d arrays add up to a numpy scalar; a gradient must stay an array.
                    x._grad = summed if gx.ndim else _xp(gx).asarray(summed)
                    x._grad_shared = False
                elif x._grad_zero:
                    # zerograd() left it pending: 0 + gx, written in one pass.
                    _xp(gx).add(gx, 0, out=x._grad)
                    x._grad_zero = False
                else:
                    x._grad += gx


def _explain_missing_grad(func: Any, outputs: list, out_grad: tuple, error: Exception) -> None:
    """Add a note to an error from a backward that got None for an output's gradient, saying
    why (the error itself, and its type, are kept: Chainer raises whatever the function does)."""
    if not hasattr(error, "add_note"):  # Python < 3.11
        return
    missing = [i for i, g in enumerate(out_grad) if g is None]
    shapes = [None if outputs[i] is None else outputs[i].data.shape for i in missing]
    error.add_note(
        f"{func.label}.backward got no gradient (None) for its output(s) {missing} of shape(s) "
        f"{shapes}. backward() starts from 1 only for a one-element variable (such as a loss): "
        f"set the grad of a larger one first."
    )


def _pending_zero_arrays(inputs: tuple, candidates: tuple) -> tuple:
    """Per input, the gradient array a backward may overwrite with the input's gradient: that of
    a candidate root whose gradient is pending zeros and that appears once among the inputs
    (else None); () when there is none."""
    found = None
    for i in candidates:
        x = inputs[i]
        if x.creator is None and x._grad_zero and not x._grad_shared and not x._grad_pending:
            if sum([1 for y in inputs if y is x]) == 1:
                if found is None:
                    found = [None] * len(inputs)
                found[i] = x._grad
    return tuple(found) if found is not None else ()


def _converted(src: Any, like: Any) -> Any:
    """src on the device of `like` (host <-> GPU as needed)."""
    from . import cuda

    if isinstance(like, numpy.ndarray):
        return cuda.to_cpu(src)
    return cuda.to_gpu(src, device=like.device)


def _copy_into(dst: Any, src: Any, where: str) -> None:
    if dst.shape != src.shape:
        raise ValueError(f"{where}: shapes differ: target {dst.shape}, source {src.shape}.")
    if isinstance(dst, numpy.ndarray):
        from . import cuda

        numpy.copyto(dst, cuda.to_cpu(src), casting="same_kind")
    else:
        dst.set(src) if isinstance(src, numpy.ndarray) else dst.__setitem__(Ellipsis, _converted(src, dst))
