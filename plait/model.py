"""Model: a forward function with its dims, params, grads, attrs, child layers and refs."""
from __future__ import annotations

import contextlib
import copy
import functools
import threading
from contextvars import ContextVar
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Generic,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

import srsly

from .backends import CupyOps, NumpyOps, Ops, ParamServer, get_current_ops
from .shims import Shim
from .types import FloatsXd
from .util import (
    DATA_VALIDATION,
    convert_recursive,
    is_xp_array,
    to_numpy,
    validate_fwd_input_output,
    _write_bytes_atomically,
)

if TYPE_CHECKING:
    from .optimizers import Optimizer

InT = TypeVar("InT")
OutT = TypeVar("OutT")
SelfT = TypeVar("SelfT", bound="Model")
_ModelT = TypeVar("_ModelT", bound="Model")

# The Python operators that define_operators may bind, keyed by their symbol.
_OPERATORS = ("+", "-", "*", "@", "/", "//", "%", "**", "<<", ">>", "&", "^", "|")

context_operators: ContextVar[Dict[str, Callable]] = ContextVar("context_operators", default={})
# True inside Model.predict: nobody will ask for a backprop callback, so combinators may drop
# each sublayer's callback (and the inputs it holds) as soon as the next layer has run.
_predicting: ContextVar[bool] = ContextVar("plait_predicting", default=False)


class _UnsetError(KeyError, ValueError):
    """A known param that has no value yet: Thinc raises KeyError, plait's older API ValueError."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def empty_init(model: "Model", X: Any = None, Y: Any = None) -> "Model":
    """The init of a model that infers nothing from data."""
    return model


class Model(Generic[InT, OutT]):
    """A layer of a network: a forward function plus the state it needs.

    `forward(model, X, is_train)` returns `(Y, backprop)`, where `backprop(dY)`
    increments the gradients of the params (with `model.inc_grad`) and returns dX.
    `init(model, X=None, Y=None)` infers unset dims from sample data and allocates the
    params. Child models go in `layers`; `refs` name nodes elsewhere in the tree.
    """

    global_id: int = 0
    global_id_lock: threading.Lock = threading.Lock()
    _context_operators = context_operators

    name: str
    ops: Union[NumpyOps, CupyOps, Ops]
    id: int
    _func: Callable
    init: Callable
    _params: ParamServer
    _dims: Dict[str, Optional[int]]
    _layers: List["Model"]
    _shims: List[Shim]
    _attrs: Dict[str, Any]
    _refs: Dict[str, Optional["Model"]]
    _has_params: Dict[str, Optional[bool]]

    __slots__ = [
        "name", "id", "ops", "_func", "init", "_params", "_dims", "_attrs", "_refs",
        "_layers", "_shims", "_has_params",
    ]

    def __init__(
        self,
        name: str,
        forward: Callable,
        *,
        init: Optional[Callable] = None,
        dims: Optional[Dict[str, Optional[int]]] = None,
        params: Optional[Dict[str, Optional[FloatsXd]]] = None,
        layers: Optional[Sequence["Model"]] = None,
        shims: Optional[List[Shim]] = None,
        attrs: Optional[Dict[str, Any]] = None,
        refs: Optional[Dict[str, Optional["Model"]]] = None,
        ops: Optional[Union[NumpyOps, CupyOps, Ops]] = None,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"Cannot create Model: name must be a str, got {type(name).__name__} ({name!r}).")
        if not callable(forward):
            raise TypeError(
                f"Cannot create Model '{name}': forward must be a callable "
                f"forward(model, X, is_train) -> (Y, backprop), got {type(forward).__name__}."
            )
        if init is not None and not callable(init):
            raise TypeError(f"Cannot create Model '{name}': init must be callable or None, got {type(init).__name__}.")
        self.name = name
        self._func = forward
        self.init = init if init is not None else empty_init
        self.ops = ops if ops is not None else get_current_ops()
        self._params = ParamServer()
        self._dims = dict(dims or {})
        self._attrs = dict(attrs or {})
        self._refs = dict(refs or {})
        self._layers = list(layers or [])
        self._shims = list(shims or [])
        for i, layer in enumerate(self._layers):
            if not isinstance(layer, Model):
                raise TypeError(
                    f"Cannot create Model '{name}': layers[{i}] is a {type(layer).__name__}, not a Model."
                )
        with Model.global_id_lock:
            Model.global_id += 1
            self.id = Model.global_id
        self._has_params = {}
        for param_name, value in (params or {}).items():
            self._has_params[param_name] = None
            if value is not None:
                self.set_param(param_name, value)

    def __repr__(self) -> str:
        return f"<Model '{self.name}' id={self.id}>"

    # --- structure --------------------------------------------------------------------

    @property
    def layers(self) -> List["Model"]:
        """The child models (a live list: editing it edits the tree)."""
        return self._layers

    @property
    def shims(self) -> List[Shim]:
        return self._shims

    @property
    def attrs(self) -> Dict[str, Any]:
        return self._attrs

    @property
    def param_names(self) -> Tuple[str, ...]:
        """Names of the model's parameters, set or not."""
        return tuple(self._has_params.keys())

    @property
    def grad_names(self) -> Tuple[str, ...]:
        """Names of the parameters that currently have a gradient."""
        return tuple(name for name in self.param_names if self.has_grad(name))

    @property
    def dim_names(self) -> Tuple[str, ...]:
        return tuple(self._dims.keys())

    @property
    def ref_names(self) -> Tuple[str, ...]:
        return tuple(self._refs.keys())

    @classmethod
    @contextlib.contextmanager
    def define_operators(cls, operators: Dict[str, Callable]) -> Iterator[None]:
        """Bind Python operators (">>", "|", "+", "**", ...) to combinators inside the block.

        The binding is local to the current context (thread or async task) and is
        undone when the block exits.
        """
        for symbol, func in operators.items():
            if symbol not in _OPERATORS:
                raise ValueError(
                    f"Cannot define operator {symbol!r}: Model supports {', '.join(_OPERATORS)}."
                )
            if not callable(func):
                raise TypeError(f"Cannot define operator {symbol!r}: {func!r} is not callable.")
        token = cls._context_operators.set(dict(operators))
        try:
            yield
        finally:
            cls._context_operators.reset(token)

    # --- dims -------------------------------------------------------------------------

    def has_dim(self, name: str) -> Optional[bool]:
        """True if the dim is set, None if it is known but unset, False if unknown."""
        if name not in self._dims:
            return False
        return True if self._dims[name] is not None else None

    def get_dim(self, name: str) -> int:
        if name not in self._dims:
            known = ", ".join(repr(d) for d in self._dims) or "none"
            raise KeyError(
                f"Cannot get dimension '{name}' for model '{self.name}': unknown dimension. "
                f"Known dimensions: {known}."
            )
        value = self._dims[name]
        if value is None:
            raise ValueError(
                f"Cannot get dimension '{name}' for model '{self.name}': value unset. "
                f"Pass {name}=... when creating the layer or call model.initialize(X=..., Y=...) "
                f"with sample data first."
            )
        return value

    def set_dim(self, name: str, value: int, *, force: bool = False) -> None:
        if name not in self._dims:
            known = ", ".join(repr(d) for d in self._dims) or "none"
            raise KeyError(
                f"Cannot set unknown dimension '{name}' for model '{self.name}'. Known dimensions: {known}."
            )
        if value is not None and not isinstance(value, int):
            # numpy integers are fine: normalise them so dims serialize as plain ints.
            try:
                value = int(value.__index__())
            except (AttributeError, TypeError):
                raise TypeError(
                    f"Cannot set dimension '{name}' for model '{self.name}': expected an int, "
                    f"got {type(value).__name__} ({value!r})."
                ) from None
        old = self._dims[name]
        if old is not None and old != value:
            has_params = any(self._has_params.values())
            if not force or has_params:
                hint = (
                    " The model's params are already allocated for the old value."
                    if force
                    else " Pass force=True to change a dimension before params are allocated."
                )
                raise ValueError(
                    f"Attempt to change dimension '{name}' for model '{self.name}' from {old} to {value}.{hint}"
                )
        self._dims[name] = value

    def maybe_get_dim(self, name: str) -> Optional[int]:
        return self._dims[name] if self.has_dim(name) else None

    # --- params -----------------------------------------------------------------------

    def has_param(self, name: str) -> Optional[bool]:
        """True if the param is allocated, None if it is known but unset, False if unknown."""
        if name not in self._has_params:
            return False
        return True if self._has_params[name] else None

    def get_param(self, name: str) -> FloatsXd:
        if name not in self._has_params:
            known = ", ".join(repr(p) for p in self._has_params) or "none"
            raise KeyError(
                f"Unknown parameter '{name}' for model '{self.name}'. Known parameters: {known}."
            )
        if not self._has_params[name]:
            raise _UnsetError(
                f"Parameter '{name}' for model '{self.name}' has not been allocated yet. "
                f"Call model.initialize(X=..., Y=...) with sample data first."
            )
        return self._params.get_param(self.id, name)

    def maybe_get_param(self, name: str) -> Optional[FloatsXd]:
        return self.get_param(name) if self.has_param(name) else None

    def set_param(self, name: str, value: Optional[FloatsXd]) -> None:
        if value is None:
            self._has_params[name] = None
            return
        if not is_xp_array(value):
            raise TypeError(
                f"Cannot set parameter '{name}' for model '{self.name}': expected a numpy or cupy "
                f"array, got {type(value).__name__}."
            )
        self._params.set_param(self.id, name, value)
        self._has_params[name] = True

    # --- grads ------------------------------------------------------------------------

    def has_grad(self, name: str) -> bool:
        return self._params.has_grad(self.id, name)

    def get_grad(self, name: str) -> FloatsXd:
        if not self.has_grad(name):
            raise KeyError(
                f"No gradient for parameter '{name}' of model '{self.name}': none has been "
                f"accumulated since the last update."
            )
        return self._params.get_grad(self.id, name)

    def maybe_get_grad(self, name: str) -> Optional[FloatsXd]:
        return self.get_grad(name) if self.has_grad(name) else None

    def _grad_buffer(self, name: str) -> Optional[FloatsXd]:
        """The gradient array of param `name` to add into in place, or None to use inc_grad.

        Only where inc_grad is Model's own and the store lends its array (none with a
        parameter-server proxy, nor DataParallel's overlapped-update store, which must see every
        contribution), and only with the param's shape and dtype: inc_grad adds into that same
        array, so adding into it directly gives the same result without a param-sized temporary.
        """
        if type(self).inc_grad is not Model.inc_grad:
            return None
        grad = self._params.grad_buffer(self.id, name)
        if grad is None:
            return None
        param = self.get_param(name)
        if getattr(grad, "shape", None) != param.shape or getattr(grad, "dtype", None) != param.dtype:
            return None
        return grad

    def set_grad(self, name: str, value: FloatsXd) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and self._has_params.get(name):
            # Thinc code resets a gradient with set_grad(name, 0.0); the scalar stands for an
            # array of the param's shape filled with it (what Thinc's later `+=` broadcasts to).
            param = self.get_param(name)
            value = self.ops.xp.full(param.shape, value, dtype=param.dtype)
        self._check_grad(name, value)
        self._params.set_grad(self.id, name, value)

    def inc_grad(self, name: str, value: FloatsXd) -> None:
        """Add `value` to the gradient of param `name` (allocating it on first use)."""
        self._check_grad(name, value)
        self._params.inc_grad(self.id, name, value)

    def _inc_grad_product(self, name: str, x: Any, y: Any, trans1: bool = False,
                          trans2: bool = False) -> None:
        """inc_grad(name, ops.gemm(x, y, trans1=, trans2=)), with the product added into the
        gradient's own array by the BLAS where the backend can (no temporary, no second pass).

        An overridden inc_grad gets the call; so does a store that lends no buffer (see
        _grad_buffer)."""
        buffer = self._grad_buffer(name)
        if buffer is not None and self.ops._gemm_accumulate(x, y, buffer, trans1, trans2):
            return
        self.inc_grad(name, self.ops.gemm(x, y, trans1=trans1, trans2=trans2))

    def _inc_grad_rows(self, name: str, indices: Any, values: Any) -> None:
        """inc_grad(name, G) for G zero but for ops.scatter_add(G, indices, values): the rows
        are added straight into the gradient's own array where _grad_buffer lends it (an
        embedding table's few rows per batch, without a table-sized temporary and a second pass
        over it)."""
        buffer = self._grad_buffer(name)
        if buffer is not None:
            self.ops.scatter_add(buffer, indices, values)
            return
        param = self.get_param(name)
        grad = self.ops.alloc(param.shape, dtype=param.dtype)
        self.ops.scatter_add(grad, indices, values)
        self.inc_grad(name, grad)

    def _check_grad(self, name: str, value: Any) -> None:
        if name not in self._has_params:
            known = ", ".join(repr(p) for p in self._has_params) or "none"
            raise KeyError(
                f"Cannot set gradient of unknown parameter '{name}' for model '{self.name}'. "
                f"Known parameters: {known}."
            )
        if self._has_params[name]:
            shape = self._params.get_param(self.id, name).shape
            if getattr(value, "shape", None) != shape:
                raise ValueError(
                    f"Gradient for parameter '{name}' of model '{self.name}' has shape "
                    f"{getattr(value, 'shape', type(value).__name__)}, but the parameter has shape {shape}."
                )

    def get_gradients(self) -> Dict[Tuple[int, str], Tuple[FloatsXd, FloatsXd]]:
        """Every (param, grad) pair in the tree, keyed by (model id, param name)."""
        result = {}
        for node in self.walk():
            for name in node.grad_names:
                result[(node.id, name)] = (node.get_param(name), node.get_grad(name))
        return result

    # --- refs -------------------------------------------------------------------------

    def has_ref(self, name: str) -> Optional[bool]:
        if name not in self._refs:
            return False
        return True if self._refs[name] is not None else None

    def get_ref(self, name: str) -> "Model":
        if name not in self._refs:
            known = ", ".join(repr(r) for r in self._refs) or "none"
            raise KeyError(f"Cannot get reference '{name}' for model '{self.name}'. Known references: {known}.")
        value = self._refs[name]
        if value is None:
            raise ValueError(f"Cannot get reference '{name}' for model '{self.name}': value unset.")
        return value

    def maybe_get_ref(self, name: str) -> Optional["Model"]:
        return self.get_ref(name) if self.has_ref(name) else None

    def set_ref(self, name: str, value: Optional["Model"]) -> None:
        """Point reference `name` at `value`, a node of this model's tree (or None to unset it).

        A name that was not declared when the model was made is added, as in Thinc (spaCy's
        Tok2Vec relies on this).
        """
        if value is not None:
            if not isinstance(value, Model):
                raise TypeError(
                    f"Cannot set reference '{name}' for model '{self.name}': expected a Model or None, "
                    f"got {type(value).__name__}."
                )
            if not any(node is value for node in self.walk()):
                raise ValueError(
                    f"Cannot add reference to node not in tree: '{name}' of model '{self.name}' would "
                    f"point at '{value.name}', which is not among its layers. Add it as a layer first."
                )
        self._refs[name] = value

    # --- running ----------------------------------------------------------------------

    def __call__(self, X: InT, is_train: bool) -> Tuple[OutT, Callable]:
        """Run the forward pass; returns the output and a backprop callback."""
        return self._func(self, X, is_train=is_train)

    def initialize(self, X: Optional[InT] = None, Y: Optional[OutT] = None) -> "Model":
        """Infer unset dims from sample data (X and/or Y) and allocate the params."""
        if DATA_VALIDATION.get():
            validate_fwd_input_output(self.name, self._func, X, Y)
        if self.init is not None:
            self.init(self, X=X, Y=Y)
        return self

    def begin_update(self, X: InT) -> Tuple[OutT, Callable[[OutT], InT]]:
        """Run the forward pass in training mode."""
        return self._func(self, X, is_train=True)

    def predict(self, X: InT) -> OutT:
        """Run the forward pass in prediction mode and return only the output."""
        if _predicting.get():
            return self._func(self, X, is_train=False)[0]
        token = _predicting.set(True)
        try:
            return self._func(self, X, is_train=False)[0]
        finally:
            _predicting.reset(token)

    def finish_update(self, optimizer: "Optimizer") -> None:
        """Apply the optimizer to every param in the tree that has a gradient."""
        # One walk: shims step first (their frameworks own those params), then plait's own.
        nodes = list(self.walk())
        for node in nodes:
            for shim in node._shims:
                shim.finish_update(optimizer)
        for node in nodes:
            for name in node._has_params:
                if node._params.has_grad(node.id, name):
                    param, grad = optimizer((node.id, name), node.get_param(name), node._params.get_grad(node.id, name))
                    node.set_param(name, param)

    @contextlib.contextmanager
    def use_params(self, params: Dict[Tuple[int, str], FloatsXd]) -> Iterator[None]:
        """Swap in the given param values (keyed by (model id, name)) for the block."""
        backup = {}
        for name in self.param_names:
            key = (self.id, name)
            if key in params:
                backup[name] = self.maybe_get_param(name)
                self.set_param(name, params[key])
        try:
            with contextlib.ExitStack() as stack:
                for layer in self.layers:
                    stack.enter_context(layer.use_params(params))
                for shim in self.shims:
                    stack.enter_context(shim.use_params(params))
                yield
        finally:
            for name, value in backup.items():
                self.set_param(name, value)

    # --- tree traversal and surgery ---------------------------------------------------

    def walk(self, *, order: str = "bfs") -> Iterable["Model"]:
        """Each node of the tree once: order is "bfs", "dfs_pre" or "dfs_post"."""
        if order == "bfs":
            return self._walk_bfs()
        if order == "dfs_pre":
            return self._walk_dfs(post_order=False)
        if order == "dfs_post":
            return self._walk_dfs(post_order=True)
        raise ValueError(
            f"Invalid order {order!r} for walking model '{self.name}': use 'bfs', 'dfs_pre' or 'dfs_post'."
        )

    def _walk_bfs(self) -> Iterator["Model"]:
        queue = [self]
        seen = {id(self)}
        i = 0
        while i < len(queue):
            node = queue[i]
            i += 1
            yield node
            for layer in node.layers:
                if id(layer) not in seen:
                    seen.add(id(layer))
                    queue.append(layer)

    def _walk_dfs(self, post_order: bool = False) -> Iterator["Model"]:
        seen = {id(self)}
        # An explicit stack: deep chains would overflow Python's recursion limit.
        stack: List[Tuple["Model", Iterator["Model"]]] = [(self, iter(self.layers))]
        if not post_order:
            yield self
        while stack:
            node, children = stack[-1]
            for child in children:
                if id(child) not in seen:
                    seen.add(id(child))
                    if not post_order:
                        yield child
                    stack.append((child, iter(child.layers)))
                    break
            else:
                stack.pop()
                if post_order:
                    yield node

    def remove_node(self, node: "Model") -> None:
        """Remove `node` from every layers list in the tree; refs left dangling become None."""
        for child in list(self.walk()):
            child._layers[:] = [layer for layer in child._layers if layer is not node]
        in_tree = {id(n) for n in self.walk()}
        for child in self.walk():
            for ref_name, ref in child._refs.items():
                if ref is not None and id(ref) not in in_tree:
                    child._refs[ref_name] = None

    def replace_node(self, old: "Model", new: "Model") -> bool:
        """Put `new` wherever `old` appears (layers and refs); returns whether it was found."""
        if not isinstance(new, Model):
            raise TypeError(f"Cannot replace node in model '{self.name}': {new!r} is not a Model.")
        found = False
        for node in list(self.walk()):
            for i, layer in enumerate(node._layers):
                if layer is old:
                    node._layers[i] = new
                    found = True
            for ref_name, ref in node._refs.items():
                if ref is old:
                    node._refs[ref_name] = new
                    found = True
        return found

    def replace_callbacks(self, forward: Callable, *, init: Optional[Callable] = None) -> None:
        """Swap the forward (and optionally init) function of this node."""
        self._func = forward
        self.init = init if init is not None else empty_init

    # --- copying and devices ----------------------------------------------------------

    def copy(self: SelfT) -> SelfT:
        """A deep copy with new ids: params are copied, gradients are not.

        Nodes shared within the tree stay shared in the copy, and refs point at the copies.
        """
        seen: Dict[int, Any] = {}
        copied = self._copy(seen)
        # A ref may point at a node that was copied after the node holding the ref.
        for node in copied.walk():
            for name, ref in node._refs.items():
                if ref is not None and id(ref) in seen:
                    node._refs[name] = seen[id(ref)]
        return copied

    def _copy(self: SelfT, seen: Dict[int, Any]) -> SelfT:
        params = {}
        for name in self.param_names:
            params[name] = self.get_param(name).copy() if self.has_param(name) else None
        layers = []
        for layer in self.layers:
            if id(layer) not in seen:
                seen[id(layer)] = layer._copy(seen)
            layers.append(seen[id(layer)])
        shims = []
        for shim in self.shims:
            if id(shim) not in seen:
                seen[id(shim)] = shim.copy()
            shims.append(seen[id(shim)])
        copied = type(self)(
            self.name,
            self._func,
            init=self.init,
            params=params,
            dims=copy.deepcopy(self._dims),
            attrs=copy.deepcopy(self._attrs),
            layers=layers,
            shims=shims,
            refs=dict(self._refs),
            ops=self.ops,
        )
        seen[id(self)] = copied
        return copied

    def to_gpu(self, gpu_id: int) -> None:
        """Move params and grads of the whole tree to the GPU `gpu_id` (needs cupy)."""
        import cupy  # noqa: F401  (fail early with cupy's own message)

        with cupy.cuda.Device(gpu_id):
            self._to_ops(CupyOps(device_id=gpu_id))

    def to_cpu(self) -> None:
        """Move params and grads of the whole tree to the CPU."""
        self._to_ops(NumpyOps())

    def _to_ops(self, ops: Ops) -> None:
        for node in self.walk():
            node.ops = ops
            for name in node.param_names:
                if node.has_param(name):
                    node.set_param(name, ops.asarray_f(node.get_param(name)))
                if node.has_grad(name):
                    node.set_grad(name, ops.asarray_f(node.get_grad(name)))
            for shim in node.shims:
                if isinstance(ops, CupyOps):
                    shim.to_device("gpu", ops.device_id)
                else:
                    shim.to_device("cpu", -1)

    # --- serialization ----------------------------------------------------------------

    def to_dict(self) -> Dict:
        """The model's state as a dict of nodes, attrs, params and shims (arrays as numpy)."""
        nodes = list(self.walk())
        index = {id(node): i for i, node in enumerate(nodes)}
        msg: Dict[str, List] = {"nodes": [], "attrs": [], "params": [], "shims": []}
        for i, node in enumerate(nodes):
            refs: Dict[str, Optional[int]] = {}
            for name, ref in node._refs.items():
                if ref is None:
                    refs[name] = None
                elif id(ref) in index:
                    refs[name] = index[id(ref)]
                else:
                    raise ValueError(
                        f"Cannot serialize model '{self.name}': reference '{name}' of node "
                        f"'{node.name}' points at model '{ref.name}', which is not in the tree. "
                        f"Add it as a layer or set the reference to None."
                    )
            msg["nodes"].append({"index": i, "name": node.name, "dims": dict(node._dims), "refs": refs})
            attrs = {}
            for name, value in node._attrs.items():
                # Attrs that cannot be serialized (functions, slices, handles) are part of
                # the architecture, rebuilt by the code that creates the model: skip them,
                # as Thinc does, so the rest of the model still saves.
                try:
                    attrs[name] = serialize_attr(value, value, name, node)
                except TypeError:
                    continue
            msg["attrs"].append(attrs)
            msg["params"].append(
                {
                    name: to_numpy(node.get_param(name))
                    for name in node.param_names
                    if node.has_param(name)
                }
            )
            msg["shims"].append([shim.to_bytes() for shim in node.shims])
        return msg

    def from_dict(self, msg: Dict) -> "Model":
        """Load state produced by to_dict into this model (same architecture); returns self.

        All or nothing: the whole message is checked against the architecture first (node
        count, dims, every param's shape and dtype kind against the allocated one), and a load
        that still fails half-way (an attr or shim that cannot be restored) puts every node back
        as it was before raising.
        """
        nodes = list(self.walk())
        plan = _plan_load(self, nodes, msg)
        # A shim's state is saved (to_bytes, which may be costly and which its serializer sees)
        # only where a second shim could fail after a first one loaded.
        keep_shims = sum(len(node.shims) for node in nodes) > 1
        saved = [_node_state(node, keep_shims) for node in nodes]
        try:
            for node, (dims, name, refs, attrs, params, shims) in zip(nodes, plan):
                for dim, value in dims.items():
                    node.set_dim(dim, value)
                if name is not None:
                    node.name = name
                for ref_name, ref_index in refs.items():
                    node._refs[ref_name] = None if ref_index is None else nodes[ref_index]
                for attr, value in attrs.items():
                    node._attrs[attr] = deserialize_attr(node._attrs.get(attr), value, attr, node)
                for param_name, value in params.items():
                    node.set_param(param_name, value)
            for node, entry in zip(nodes, plan):
                for shim, shim_bytes in zip(node.shims, entry[5]):
                    shim.from_bytes(shim_bytes)
        except BaseException:
            for node, state in zip(nodes, saved):
                _restore_node_state(node, state)
            raise
        return self

    def to_bytes(self) -> bytes:
        """Serialize the model's state (not its code) to msgpack bytes."""
        return srsly.msgpack_dumps(self.to_dict())

    def from_bytes(self, bytes_data: bytes) -> "Model":
        """Load state from to_bytes output into this model; returns self (all or nothing)."""
        msg = _msgpack_loads(bytes_data, f"Cannot deserialize model '{self.name}'")
        msg = convert_recursive(is_xp_array, self.ops.asarray, msg)
        return self.from_dict(msg)

    def to_disk(self, path: Union[Path, str]) -> None:
        """Write to_bytes output to `path`, atomically: a crash never leaves a partial file."""
        _write_bytes_atomically(path, self.to_bytes())

    def from_disk(self, path: Union[Path, str]) -> "Model":
        """Load to_disk output: a regular file only (no FIFO or device), within plait's size limit."""
        from ._safeio import read_bytes

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"Cannot load model '{self.name}' from {str(path)!r}: no such file.")
        return self.from_bytes(read_bytes(path))

    def can_from_disk(self, path: Union[Path, str], *, strict: bool = True) -> bool:
        """Whether from_disk(path) would succeed for this architecture."""
        from ._safeio import read_bytes

        try:
            return self.can_from_bytes(read_bytes(path), strict=strict)
        except (OSError, ValueError):
            return False

    def can_from_bytes(self, bytes_data: bytes, *, strict: bool = True) -> bool:
        try:
            msg = _msgpack_loads(bytes_data, "")
        except ValueError:
            return False
        return self.can_from_dict(msg, strict=strict)

    def can_from_dict(self, msg: Dict, *, strict: bool = True) -> bool:
        """Whether msg fits this architecture: same nodes, names, set dims and param shapes.

        With strict=False, a param or dim missing on one side is tolerated.
        """
        if not isinstance(msg, dict) or "nodes" not in msg or "params" not in msg:
            return False
        nodes = list(self.walk())
        if len(msg["nodes"]) != len(nodes):
            return False
        for node, info, params in zip(nodes, msg["nodes"], msg["params"]):
            if node.name != info.get("name"):
                return False
            for dim, value in info.get("dims", {}).items():
                if dim not in node._dims:
                    if strict:
                        return False
                    continue
                current = node._dims[dim]
                if current is not None and value is not None and current != value:
                    return False
            if strict and set(node._dims) != set(info.get("dims", {})):
                return False
            for name, value in params.items():
                if name not in node._has_params:
                    if strict:
                        return False
                    continue
                if node.has_param(name) and value is not None:
                    if tuple(node.get_param(name).shape) != tuple(getattr(value, "shape", ())):
                        return False
        return True

    # --- operators ----------------------------------------------------------------------

    def _operator(self, symbol: str, other: Any) -> "Model":
        operators = self._context_operators.get()
        if symbol not in operators:
            raise TypeError(
                f"Undefined operator: {symbol} (on model '{self.name}'). Bind it with "
                f"Model.define_operators({{{symbol!r}: combinator}})."
            )
        return operators[symbol](self, other)

    def __add__(self, other: Any) -> "Model":
        return self._operator("+", other)

    def __sub__(self, other: Any) -> "Model":
        return self._operator("-", other)

    def __mul__(self, other: Any) -> "Model":
        return self._operator("*", other)

    def __matmul__(self, other: Any) -> "Model":
        return self._operator("@", other)

    def __truediv__(self, other: Any) -> "Model":
        return self._operator("/", other)

    def __floordiv__(self, other: Any) -> "Model":
        return self._operator("//", other)

    def __mod__(self, other: Any) -> "Model":
        return self._operator("%", other)

    def __pow__(self, other: Any) -> "Model":
        return self._operator("**", other)

    def __lshift__(self, other: Any) -> "Model":
        return self._operator("<<", other)

    def __rshift__(self, other: Any) -> "Model":
        return self._operator(">>", other)

    def __and__(self, other: Any) -> "Model":
        return self._operator("&", other)

    def __xor__(self, other: Any) -> "Model":
        return self._operator("^", other)

    def __or__(self, other: Any) -> "Model":
        return self._operator("|", other)


def _msgpack_loads(data: Any, context: str) -> Any:
    """msgpack bytes -> objects; any failure a ValueError, and the garbage collector left as it was.

    (srsly.msgpack_loads disables the collector while unpacking and does not turn it back on
    when unpacking fails.)
    """
    import gc

    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{context or 'msgpack_loads'}: expected bytes, got {type(data).__name__}.")
    was_enabled = gc.isenabled()
    try:
        return srsly.msgpack_loads(bytes(data))
    except (RecursionError, MemoryError) as err:
        raise ValueError(f"{context}: the data is not valid msgpack ({type(err).__name__}).") from None
    except Exception as err:
        raise ValueError(f"{context}: the data is not valid msgpack ({type(err).__name__}: {err}).") from err
    finally:
        if was_enabled:
            gc.enable()


_MAX_DIM = 1 << 40


def _plan_load(model: "Model", nodes: List["Model"], msg: Any) -> List[Tuple[Dict, Any, Dict, Dict, Dict, List]]:
    """Check a to_dict message against the architecture; per node what to set.

    Raises ValueError naming the node, the field, the saved value and the model's, before
    anything is changed.
    """
    where = f"Cannot load weights into model '{model.name}'"
    fix = "Build the same architecture (and config) that was saved, then load into it."
    if not isinstance(msg, dict) or "nodes" not in msg:
        raise ValueError(
            f"Cannot deserialize model '{model.name}': expected a dict with 'nodes', 'attrs', "
            f"'params' and 'shims', got {type(msg).__name__}."
        )
    for key in ("nodes", "attrs", "params", "shims"):
        if not isinstance(msg.get(key), list):
            raise ValueError(f"{where}: the data's '{key}' is {type(msg.get(key)).__name__}, not a list; it was not written by to_bytes/to_dict.")
    if len(msg["nodes"]) != len(nodes):
        raise ValueError(
            f"Cannot deserialize model '{model.name}': mismatched structure. The data has "
            f"{len(msg['nodes'])} nodes, the model has {len(nodes)}. {fix}"
        )
    for key in ("attrs", "params", "shims"):
        if len(msg[key]) != len(nodes):
            raise ValueError(f"{where}: the data's '{key}' has {len(msg[key])} entries for {len(nodes)} nodes; it is damaged.")
    plan = []
    for i, node in enumerate(nodes):
        info, attrs, params, shims = msg["nodes"][i], msg["attrs"][i], msg["params"][i], msg["shims"][i]
        label = f"node {i} ('{node.name}')"
        if not isinstance(info, dict) or not isinstance(info.get("dims", {}), dict) or not isinstance(info.get("refs", {}), dict):
            raise ValueError(f"{where}: {label}: the data's node entry is not a dict with 'dims' and 'refs'; it is damaged.")
        if not isinstance(attrs, dict) or not isinstance(params, dict) or not isinstance(shims, list):
            raise ValueError(f"{where}: {label}: the data's attrs/params/shims entries have the wrong types; it is damaged.")
        dims: Dict[str, int] = {}
        for dim, value in info.get("dims", {}).items():
            if value is None:
                continue
            if dim not in node._dims:
                raise ValueError(
                    f"Cannot deserialize model '{model.name}': node {i} ('{node.name}') has no "
                    f"dimension '{dim}' (the saved node was '{info.get('name')}')."
                )
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _MAX_DIM:
                raise ValueError(f"{where}: {label}: dimension '{dim}' is {value!r} in the data, not a size; it is damaged.")
            current = node._dims[dim]
            if current is not None and current != value:
                raise ValueError(f"{where}: {label}: dimension '{dim}' would change from {current} to {value} (the data has {value}, the model {current}). {fix}")
            dims[dim] = value
        name = info.get("name")
        if name is not None and not isinstance(name, str):
            raise ValueError(f"{where}: {label}: the saved name is {type(name).__name__}, not a string; the data is damaged.")
        refs = {}
        for ref_name, ref_index in info.get("refs", {}).items():
            if ref_index is not None and (isinstance(ref_index, bool) or not isinstance(ref_index, int) or not 0 <= ref_index < len(nodes)):
                raise ValueError(
                    f"Cannot deserialize model '{model.name}': reference '{ref_name}' of node {i} "
                    f"('{node.name}') points at node {ref_index!r}, but the model has {len(nodes)} nodes."
                )
            refs[ref_name] = ref_index
        new_params = {}
        for param_name, value in params.items():
            if value is None:
                continue
            if param_name not in node._has_params:
                raise ValueError(
                    f"Cannot deserialize model '{model.name}': node {i} ('{node.name}') has no "
                    f"parameter '{param_name}'."
                )
            new_params[param_name] = _checked_param(node, param_name, value, f"{where}: {label}: parameter '{param_name}'", fix)
        if len(shims) != len(node.shims) and node.shims:
            raise ValueError(f"{where}: {label}: the data has {len(shims)} shims, the model {len(node.shims)}. {fix}")
        plan.append((dims, name, refs, attrs, new_params, shims))
    return plan


def _checked_param(node: "Model", name: str, value: Any, where: str, fix: str) -> Any:
    """A copy of a saved param in the node's array type, checked against the allocated one."""
    import numpy

    if not is_xp_array(value):
        raise ValueError(f"{where} is a {type(value).__name__} in the data, not an array; the data is damaged.")
    kind = value.dtype.kind
    if kind != "f":
        raise ValueError(
            f"{where} has dtype {value.dtype} in the data; weights are floating-point arrays "
            f"(refused: integer, complex, string, object and date types). {fix}"
        )
    if node.has_param(name):
        current = node.get_param(name)
        if tuple(value.shape) != tuple(current.shape):
            raise ValueError(f"{where} has shape {tuple(value.shape)} in the data, but the model's is {tuple(current.shape)}. {fix}")
        if value.dtype != current.dtype:
            if not numpy.can_cast(value.dtype, current.dtype, casting="same_kind"):
                raise ValueError(f"{where} has dtype {value.dtype} in the data, which cannot be cast safely to the model's {current.dtype}. {fix}")
            return node.ops.xp.asarray(value, dtype=current.dtype).copy()
    return node.ops.asarray(value).copy()


def _node_state(node: "Model", keep_shims: bool) -> Tuple:
    params = {name: node._params.get_param(node.id, name) for name, has in node._has_params.items() if has}
    shims = [shim.to_bytes() for shim in node.shims] if keep_shims else []
    return (dict(node._dims), node.name, dict(node._refs), dict(node._attrs), dict(node._has_params), params, shims)


def _restore_node_state(node: "Model", state: Tuple) -> None:
    dims, name, refs, attrs, has_params, params, shims = state
    node._dims.clear()
    node._dims.update(dims)
    node.name = name
    node._refs.clear()
    node._refs.update(refs)
    node._attrs.clear()
    node._attrs.update(attrs)
    for param_name, value in params.items():
        node._params.set_param(node.id, param_name, value)
    node._has_params.clear()
    node._has_params.update(has_params)
    for shim, data in zip(node.shims, shims):
        try:
            shim.from_bytes(data)
        except Exception:  # pragma: no cover - a shim that cannot take back its own bytes
            pass


@functools.singledispatch
def serialize_attr(_: Any, value: Any, name: str, model: Model) -> bytes:
    """Serialize an attr value to bytes; dispatches on the type of the first argument.

    Register an overload for types msgpack cannot store; the default uses msgpack.
    """
    try:
        return srsly.msgpack_dumps(value)
    except Exception as err:
        raise TypeError(
            f"Cannot serialize attr '{name}' of model '{model.name}': {type(value).__name__} is not "
            f"msgpack-serializable. Register an overload with @serialize_attr.register({type(value).__name__}) "
            f"and a matching deserialize_attr."
        ) from err


@functools.singledispatch
def deserialize_attr(_: Any, value: Any, name: str, model: Model) -> Any:
    """Deserialize attr bytes; dispatches on the type of the attr's current (default) value."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise ValueError(f"Cannot deserialize attr '{name}' of model '{model.name}': expected bytes, got {type(value).__name__}.")
    return _msgpack_loads(value, f"Cannot deserialize attr '{name}' of model '{model.name}'")


def set_dropout_rate(model: _ModelT, drop: float, attrs: Sequence[str] = ("dropout_rate",)) -> _ModelT:
    """Set the dropout attr(s) of every node in the tree that has one; returns the model."""
    if isinstance(attrs, str):
        attrs = [attrs]
    for node in model.walk():
        for attr in attrs:
            if attr in node.attrs:
                node.attrs[attr] = drop
    return model


def change_attr_values(model: _ModelT, mapping: Dict[str, Dict[str, Any]]) -> _ModelT:
    """For each node named in `mapping`, set the listed attrs it already has; returns the model."""
    for node in model.walk():
        if node.name in mapping:
            for attr, value in mapping[node.name].items():
                if attr in node.attrs:
                    node.attrs[attr] = value
    return model


def wrap_model_recursive(model: Model, wrapper: Callable[[Model], _ModelT]) -> _ModelT:
    """Wrap every node of the tree with `wrapper`, children first; returns the wrapped root.

    The tree is edited in place: each node's slot in its parents' layers (and refs to it)
    is taken by its wrapped version.
    """
    for node in list(model.walk(order="dfs_post"))[:-1]:
        model.replace_node(node, wrapper(node))
    return wrapper(model)


__all__ = [
    "Model",
    "serialize_attr",
    "deserialize_attr",
    "change_attr_values",
    "set_dropout_rate",
    "wrap_model_recursive",
]
