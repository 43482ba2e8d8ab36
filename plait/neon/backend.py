"""neon's ``neon.backends.backend``: the abstract Tensor, the lazy op-tree, the Backend base class.

Arithmetic on tensors never computes anything: it builds an :class:`OpTreeNode`, a ``tuple``
``(op_dict, left, right)`` exactly as neon does. Work happens only when a tree is assigned
(``out=``, ``t[:] = expr``, ``t[a:b] = expr`` or ``be.execute(assign_node)``); the concrete
backend (:class:`plait.neon.nervanacpu.NervanaCPU`) then runs it.

``op_dict`` always holds ``"op"`` (one of neon's op names, see :class:`OpCollection`) and
``"shape"`` (the neon 2-D shape of the node's value); reductions add ``"axis"`` (0, 1 or None),
``onehot`` adds ``"idx"`` (the index tensor) and ``"axis"``, ``binarize`` adds ``"stochastic"`` and
``shift`` adds ``"value"``. ``right`` is None for unary ops and reductions; both children are None
for the zero-operand ops ``rand`` and ``onehot``.
"""
from math import ceil
from numbers import Number

import numpy as np


class OpCollection:
    """The names of the operations an op-tree may hold, grouped by arity (neon's sets)."""

    zero_operand_ops = {"rand", "onehot"}
    unary_ops = {
        "finite", "neg", "abs", "sgn", "sqrt", "sqr", "exp", "log", "exp2", "log2", "sig",
        "sig2", "tanh", "tanh2", "transpose", "safelog", "rint", "binarize",
    }
    binary_ops = {
        "assign", "add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge", "pow",
        "minimum", "maximum", "dot", "shift",
    }
    reduction_ops = {"sum", "max", "min", "argmax", "argmin"}
    float_ops = zero_operand_ops | unary_ops | binary_ops
    ew_ops = float_ops - {"dot", "transpose"}


_SCALAR_SHAPE = (1, 1)


def _is_scalar(x):
    return isinstance(x, (Number, np.number, np.bool_)) and not isinstance(x, complex)


def describe_operand(x):
    """A short human description of an op-tree operand, used in error messages."""
    if isinstance(x, Tensor):
        name = f" '{x.name}'" if getattr(x, "name", None) else ""
        return f"{type(x).__name__}{name} of shape {tuple(x.shape)}"
    if isinstance(x, OpTreeNode):
        return f"op-tree '{x[0]['op']}' of shape {tuple(x.shape)}"
    if x is None:
        return "None"
    return f"scalar {x!r}"


def broadcast_shape(op, a, b, a_shape, b_shape):
    """numpy's broadcasting of two operand shapes, with an error that names both operands."""
    if a_shape == b_shape:
        return a_shape
    if len(a_shape) == len(b_shape) == 2:
        (a0, a1), (b0, b1) = a_shape, b_shape
        if (a0 == b0 or a0 == 1 or b0 == 1) and (a1 == b1 or a1 == 1 or b1 == 1):
            return (a0 if b0 == 1 else b0, a1 if b1 == 1 else b1)
    try:
        return tuple(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    except ValueError:
        raise ValueError(
            f"'{op}': the operands cannot be broadcast together: left is {describe_operand(a)}, "
            f"right is {describe_operand(b)}. Elementwise operands must have equal shapes, or "
            f"size 1 along the axes that differ (a (n, 1) column or a (1, n) row broadcasts "
            f"against an (n, m) tensor); reshape or slice one of them to match."
        ) from None


def _bad_operand(op, side, arg):
    """None for a scalar operand; NotImplemented (or a TypeError) for anything else."""
    if _is_scalar(arg):
        return None
    if isinstance(arg, (np.ndarray, list, tuple)):
        raise TypeError(
            f"'{op}': the {side} operand is a {type(arg).__name__}; op-trees take backend "
            f"tensors and scalars only. Wrap host data with be.array(...) first."
        )
    return NotImplemented


_FAST_LEAVES = frozenset({int, float})


class Tensor:
    """The n-dimensional array of a backend: at least 2-D, the batch on the last axis.

    This base class only carries the lazy arithmetic: every operator returns an
    :class:`OpTreeNode`. Concrete tensors (:class:`plait.neon.nervanacpu.CPUTensor`) hold the data.
    """

    # numpy must hand `ndarray <op> tensor` back to us instead of looping over the tensor.
    __array_ufunc__ = None

    def __init__(self, backend, shape=None, dtype=np.float32, name=None, persist_values=True):
        self.backend = backend
        self.name = name
        self.persist_values = persist_values
        self._min_dims = 2
        self.base = None

    @property
    def _original_base(self):
        """The tensor that owns the memory (following ``base`` links of views)."""
        t = self
        while t.base is not None:
            t = t.base
        return t

    def dimension_reorder(self, new_order):
        """Reshape (without moving data) to the dimensions listed in ``new_order``."""
        return self.reshape([self.shape[d] for d in new_order])

    # -- lazy arithmetic ----------------------------------------------------------------------
    def __add__(self, other):
        return OpTreeNode.build("add", self, other)

    def __sub__(self, other):
        return OpTreeNode.build("sub", self, other)

    def __mul__(self, other):
        return OpTreeNode.build("mul", self, other)

    def __truediv__(self, other):
        return OpTreeNode.build("div", self, other)

    __div__ = __truediv__

    def __pow__(self, other):
        return OpTreeNode.build("pow", self, other)

    def __radd__(self, other):
        return OpTreeNode.build("add", other, self)

    def __rsub__(self, other):
        return OpTreeNode.build("sub", other, self)

    def __rmul__(self, other):
        return OpTreeNode.build("mul", other, self)

    def __rtruediv__(self, other):
        return OpTreeNode.build("div", other, self)

    __rdiv__ = __rtruediv__

    def __rpow__(self, other):
        return OpTreeNode.build("pow", other, self)

    def __eq__(self, other):
        return OpTreeNode.build("eq", self, other)

    def __ne__(self, other):
        return OpTreeNode.build("ne", self, other)

    def __lt__(self, other):
        return OpTreeNode.build("lt", self, other)

    def __le__(self, other):
        return OpTreeNode.build("le", self, other)

    def __gt__(self, other):
        return OpTreeNode.build("gt", self, other)

    def __ge__(self, other):
        return OpTreeNode.build("ge", self, other)

    def __abs__(self):
        return OpTreeNode.build("abs", self, None)

    def __neg__(self):
        return OpTreeNode.build("neg", self, None)

    def __hash__(self):
        return id(self)


class OpTreeNode(tuple):
    """One node of a lazy expression: the tuple ``(op_dict, left, right)``.

    Leaves are Tensors or Python/numpy scalars. Nothing is computed until the tree is assigned.
    """

    __array_ufunc__ = None

    def __new__(cls, *args):
        return tuple.__new__(cls, args)

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def build(op, a, b, out=None, **kwargs):
        """Make the node ``op(a, b)`` (checking shapes); with ``out`` given, assign it to ``out`` now."""
        if not (a is None or type(a) in _FAST_LEAVES or isinstance(a, _NODE_TYPES)):
            bad = _bad_operand(op, "left", a)
            if bad is not None:
                return bad
        if not (b is None or type(b) in _FAST_LEAVES or isinstance(b, _NODE_TYPES)):
            bad = _bad_operand(op, "right", b)
            if bad is not None:
                return bad

        if op == "assign":
            if not isinstance(a, Tensor):
                raise TypeError(f"'assign' needs a backend tensor on the left, got {describe_operand(a)}")
            node = OpTreeNode({"op": "assign", "shape": tuple(a.shape)}, a, b)
            return node.execute()

        if op in _BINARY_EW and b is not None:
            # the common case, inlined: an elementwise binary op
            a_shape = a[0]["shape"] if type(a) is OpTreeNode else OpTreeNode._operand_shape(a)
            b_shape = b[0]["shape"] if type(b) is OpTreeNode else OpTreeNode._operand_shape(b)
            shape = a_shape if a_shape == b_shape else broadcast_shape(op, a, b, a_shape, b_shape)
        else:
            shape = OpTreeNode._infer_shape(op, a, b, kwargs)
        op_dict = {"op": op, "shape": shape}
        if kwargs:
            op_dict.update(kwargs)
        node = tuple.__new__(OpTreeNode, (op_dict, a, b))
        if out is not None:
            return OpTreeNode({"op": "assign", "shape": tuple(out.shape)}, out, node).execute()
        return node

    @staticmethod
    def _operand_shape(x):
        if isinstance(x, (Tensor, OpTreeNode)):
            s = tuple(x.shape)
            return s + (1,) * (2 - len(s)) if len(s) < 2 else s
        return _SCALAR_SHAPE

    @staticmethod
    def _infer_shape(op, a, b, kwargs):
        if op in OpCollection.zero_operand_ops:
            # rand and onehot take the shape of what they are assigned to; (1, 1) broadcasts.
            return _SCALAR_SHAPE
        if a is None:
            raise ValueError(f"'{op}' needs a left operand")
        a_shape = OpTreeNode._operand_shape(a)
        if op in OpCollection.reduction_ops:
            axis = kwargs.get("axis")
            if axis is None:
                return _SCALAR_SHAPE
            if axis not in (0, 1) and not (isinstance(axis, int) and 0 <= axis < len(a_shape)):
                raise ValueError(
                    f"'{op}': axis must be 0, 1 or None for neon's 2-D tensors, got axis={axis!r} "
                    f"for {describe_operand(a)}"
                )
            s = list(a_shape)
            s[axis] = 1
            return tuple(s)
        if op == "transpose":
            return tuple(reversed(a_shape))
        if op == "dot":
            b_shape = OpTreeNode._operand_shape(b)
            if len(a_shape) != 2 or len(b_shape) != 2 or a_shape[1] != b_shape[0]:
                raise ValueError(
                    f"'dot': the shapes do not chain: left is {describe_operand(a)}, right is "
                    f"{describe_operand(b)}; the left's second dimension must equal the right's "
                    f"first (use .T on an operand to transpose it)."
                )
            return (a_shape[0], b_shape[1])
        if op in OpCollection.unary_ops:
            return a_shape
        if op in OpCollection.binary_ops:
            b_shape = OpTreeNode._operand_shape(b)
            return broadcast_shape(op, a, b, a_shape, b_shape)
        raise TypeError(f"'{op}' is not a valid neon operation")

    # -- execution ----------------------------------------------------------------------------
    def execute(self):
        """Run an ``assign`` node on its output tensor's backend."""
        if self[0]["op"] != "assign":
            raise ValueError(
                f"only an 'assign' node can be executed, this one is '{self[0]['op']}'; assign the "
                f"tree to a tensor instead (out[:] = tree, or pass out=)."
            )
        backend = self[1].backend
        if not isinstance(backend, Backend):
            raise NotImplementedError(f"no backend to execute on for {describe_operand(self[1])}")
        return backend.execute(self)

    def asnumpyarray(self):
        """Evaluate into fresh memory and return the host array (a debugging aid)."""
        return self.astensor().get()

    def astensor(self):
        """Evaluate into a freshly allocated tensor of the tree's shape."""
        be = None
        for leaf in self.traverse([]):
            if isinstance(leaf, Tensor):
                be = leaf.backend
                break
        if be is None:
            raise ValueError("the op-tree holds no tensor, so there is no backend to evaluate it on")
        buf = be.empty(self.shape)
        buf[:] = self
        return buf

    # -- inspection ---------------------------------------------------------------------------
    @property
    def shape(self):
        return self[0]["shape"]

    def traverse(self, stack):
        """Append the nodes in post order (left, right, op_dict) to ``stack`` and return it."""
        for child in (self[1], self[2]):
            if isinstance(child, OpTreeNode):
                child.traverse(stack)
            elif child is not None:
                stack.append(child)
        stack.append(self[0])
        return stack

    def key(self):
        """A hashable key of the tree: op names (with axes) and the leaves themselves."""
        out = []
        for item in self.traverse([]):
            if isinstance(item, dict):
                out.append((item["op"], item["axis"]) if "axis" in item else item["op"])
            else:
                out.append(item)
        return tuple(out)

    def intrinsic_key_maps(self):
        """A key independent of which tensors are used (only their shapes and reuse pattern).

        Returns ``(key, tensor_index_map, index_tensor_map)``; tensors are numbered by first
        appearance in post order.
        """
        out, t2i, i2t = [], {}, {}
        for item in self.traverse([]):
            if isinstance(item, dict):
                out.append((item["op"], item["axis"]) if "axis" in item else item["op"])
            elif isinstance(item, Tensor):
                if item not in t2i:
                    t2i[item] = len(i2t)
                    i2t[len(i2t)] = item
                out.append((t2i[item], tuple(item.shape)))
            else:
                out.append(item)
        return tuple(out), t2i, i2t

    @staticmethod
    def optree_to_list(optree):
        if isinstance(optree, OpTreeNode):
            return [OpTreeNode.optree_to_list(x) for x in optree]
        return optree

    @staticmethod
    def list_to_optree(lst):
        if isinstance(lst, list):
            return OpTreeNode(*[OpTreeNode.list_to_optree(x) for x in lst])
        return lst

    @staticmethod
    def _pretty(node):
        symbols = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}
        if isinstance(node, Tensor):
            return node.name or f"tensor-{id(node):#x}"
        if isinstance(node, OpTreeNode):
            op = node[0]["op"]
            if node[2] is not None:
                return f"({OpTreeNode._pretty(node[1])} {symbols.get(op, op)} {OpTreeNode._pretty(node[2])})"
            if node[1] is None:
                return f"({op})"
            return f"({op} {OpTreeNode._pretty(node[1])})"
        return str(node)

    def pp(self):
        """The tree as an infix string."""
        return OpTreeNode._pretty(self)

    def __str__(self):
        def leaf(x):
            if isinstance(x, Tensor):
                return x.name or f"tensor-{id(x):#x}"
            return str(x)

        return f"({self[0]}, {leaf(self[1])}, {leaf(self[2])})"

    __repr__ = __str__

    # -- lazy arithmetic ----------------------------------------------------------------------
    @property
    def T(self):
        return OpTreeNode.build("transpose", self, None)

    def transpose(self, out=None):
        if out is not None:
            return OpTreeNode.build("assign", out, self.T)
        return self.T

    def __add__(self, other):
        return self.build("add", self, other)

    def __sub__(self, other):
        return self.build("sub", self, other)

    def __mul__(self, other):
        return self.build("mul", self, other)

    def __truediv__(self, other):
        return self.build("div", self, other)

    __div__ = __truediv__

    def __pow__(self, other):
        return self.build("pow", self, other)

    def __radd__(self, other):
        return self.build("add", other, self)

    def __rsub__(self, other):
        return self.build("sub", other, self)

    def __rmul__(self, other):
        return self.build("mul", other, self)

    def __rtruediv__(self, other):
        return self.build("div", other, self)

    __rdiv__ = __rtruediv__

    def __rpow__(self, other):
        return self.build("pow", other, self)

    def __eq__(self, other):
        return self.build("eq", self, other)

    def __ne__(self, other):
        return self.build("ne", self, other)

    def __lt__(self, other):
        return self.build("lt", self, other)

    def __le__(self, other):
        return self.build("le", self, other)

    def __gt__(self, other):
        return self.build("gt", self, other)

    def __ge__(self, other):
        return self.build("ge", self, other)

    def __abs__(self):
        return self.build("abs", self, None)

    def __neg__(self):
        return self.build("neg", self, None)

    def __hash__(self):
        return id(self)


_NODE_TYPES = (Tensor, OpTreeNode)
_BINARY_EW = OpCollection.binary_ops - {"assign", "dot"}


class Block:
    """Labels of the phases of training, passed to ``Backend.begin``/``Backend.end``."""

    epoch, minibatch, fprop, bprop, update = range(5)


class Backend:
    """The backend interface: allocation, op-tree builders and compound kernels.

    Every elementwise method returns the op-tree when ``out`` is None and assigns it to ``out``
    (returning ``out``) otherwise. Concrete backends add allocation and execution.
    """

    backends = {}

    @staticmethod
    def backend_choices():
        """The names of the backends that can be allocated."""
        return sorted(Backend.backends)

    @staticmethod
    def allocate_backend(name, **kargs):
        """Make the backend registered under ``name`` with the given constructor arguments."""
        try:
            cls = Backend.backends[name]
        except KeyError:
            choices = ", ".join(repr(n) for n in Backend.backend_choices())
            raise ValueError(f"backend must be one of ({choices}), got {name!r}") from None
        return cls(**kargs)

    def __init__(self, rng_seed=None, default_dtype=np.float32, compat_mode=None, deterministic=None):
        self.default_dtype = default_dtype
        self.rng_seed = rng_seed
        self.rng = self.gen_rng(rng_seed)
        self.bsz = None
        self._min_dims = 2
        self.compat_mode = None
        if compat_mode is not None:
            if compat_mode != "caffe":
                raise ValueError(f"compat_mode {compat_mode!r} is not supported; only 'caffe' is")
            self.set_caffe_compat()
        # neon: deterministic kernels follow from a fixed seed (the argument is deprecated)
        self.deterministic = rng_seed is not None

    # -- RNG (overridden by concrete backends) --------------------------------------------------
    def gen_rng(self, seed=None):
        self.rng = np.random.RandomState(seed)
        self.init_rng_state = self.rng.get_state()
        return self.rng

    def rng_get_state(self, state=None):
        """The current RNG state (neon's page lists a ``state`` argument; it is ignored)."""
        return self.rng.get_state()

    def rng_set_state(self, state):
        self.rng.set_state(state)

    def rng_reset(self):
        """Put the RNG back to the state it had when the backend was made (or last ``gen_rng``)."""
        self.rng_set_state(self.init_rng_state)

    # -- housekeeping ------------------------------------------------------------------------
    def cleanup_backend(self):
        """Release resources; the CPU backend holds none."""

    def output_dim(self, X, S, padding, strides, pooling=False, dilation=1):
        """The output length along one dimension of a conv or pool with these sizes.

        In caffe mode pooling rounds up (and drops a last window lying wholly in the padding).
        """
        S = dilation * (S - 1) + 1
        if self.check_caffe_compat() and pooling:
            size = int(ceil(float(X - S + 2 * padding) / strides)) + 1
            if padding > 0 and (size - 1) * strides >= X + padding:
                size -= 1
        else:
            size = (X - S + 2 * padding) // strides + 1
        if pooling and padding >= S:
            raise ValueError(
                f"pooling padding {padding} must be smaller than the window size {S}; lower the padding"
            )
        return size

    def set_caffe_compat(self):
        """Match caffe's conv/pool output sizes and dropout."""
        self.compat_mode = "caffe"

    def check_caffe_compat(self):
        return self.compat_mode == "caffe"

    def iobuf(self, dim0, x=None, dtype=None, name=None, persist_values=True, shared=None,
              parallelism=None):
        """A zeroed ``(features, batch)`` buffer for a layer: ``dim0`` without the batch axis.

        ``x`` already allocated is returned as is; ``shared`` is reused (reshaped) if given.
        """
        if x is not None:
            return x
        if not self.bsz:
            raise ValueError(
                f"iobuf needs the batch size, but be.bsz is {self.bsz!r}: make the backend with "
                f"gen_backend(batch_size=N) or set be.bsz = N"
            )
        if isinstance(dim0, (tuple, list)):
            dim0 = tuple(int(d) for d in dim0)
            if len(dim0) == 2:
                bufshape = (dim0[0], dim0[1] * self.bsz)
            else:
                bufshape = (int(np.prod(dim0)), self.bsz)
        else:
            bufshape = (int(dim0), self.bsz)
        if shared is not None:
            out = shared if tuple(shared.shape) == bufshape else shared.share(bufshape)
        else:
            out = self.empty(bufshape, dtype=dtype, name=name, persist_values=persist_values)
        out[:] = 0
        return out

    def shared_iobuf_size(self, shape, parallelism):
        """How many elements a buffer of ``shape`` shared between layers needs."""
        num_dev = 1 if parallelism in ("Data", "Model") else getattr(self, "num_dev", 1)
        return num_dev * int(np.prod(shape))

    def distribute_data(self, tensor, layer_parallelism):
        """Multi-device only: nothing to distribute on one CPU, returns None."""
        return None

    def revert_tensor(self, tensor):
        """Multi-device only: nothing to revert on one CPU."""

    def convert_data(self, tensor, layer_mkl):
        return None

    def clean_data(self, tensor, layer_mkl):
        return None

    def allocate_new_deltas(self, delta, in_shape, parallelism):
        return delta

    def is_mkl(self):
        return False

    def allocate_new_outputs(self, layer, share_output):
        layer.allocate(shared_outputs=share_output)

    def execute(self, node):
        raise NotImplementedError(f"{type(self).__name__} does not execute op-trees")

    def begin(self, block, identifier):
        """Mark the start of a repeated block (a compiler hint; no effect on results)."""

    def end(self, block, identifier):
        """Mark the end of a repeated block (a compiler hint; no effect on results)."""

    # -- op-tree builders ---------------------------------------------------------------------
    def dot(self, a, b, out=None):
        return OpTreeNode.build("dot", a, b, out=out)

    def add(self, a, b, out=None):
        return OpTreeNode.build("add", a, b, out=out)

    def subtract(self, a, b, out=None):
        return OpTreeNode.build("sub", a, b, out=out)

    def multiply(self, a, b, out=None):
        return OpTreeNode.build("mul", a, b, out=out)

    def divide(self, a, b, out=None):
        return OpTreeNode.build("div", a, b, out=out)

    def true_divide(self, a, b, out=None):
        return OpTreeNode.build("div", a, b, out=out)

    def power(self, a, b, out=None):
        return OpTreeNode.build("pow", a, b, out=out)

    def reciprocal(self, a, out=None):
        return OpTreeNode.build("div", 1.0, a, out=out)

    def negative(self, a, out=None):
        return OpTreeNode.build("neg", a, None, out=out)

    def sgn(self, a, out=None):
        return OpTreeNode.build("sgn", a, None, out=out)

    def absolute(self, a, out=None):
        return OpTreeNode.build("abs", a, None, out=out)

    def fabs(self, a, out=None):
        return OpTreeNode.build("abs", a, None, out=out)

    def sqrt(self, a, out=None):
        return OpTreeNode.build("sqrt", a, None, out=out)

    def square(self, a, out=None):
        return OpTreeNode.build("sqr", a, None, out=out)

    def exp(self, a, out=None):
        return OpTreeNode.build("exp", a, None, out=out)

    def exp2(self, a, out=None):
        return OpTreeNode.build("exp2", a, None, out=out)

    def safelog(self, a, out=None):
        return OpTreeNode.build("safelog", a, None, out=out)

    def log(self, a, out=None):
        return OpTreeNode.build("log", a, None, out=out)

    def log2(self, a, out=None):
        return OpTreeNode.build("log2", a, None, out=out)

    def sig(self, a, out=None):
        return OpTreeNode.build("sig", a, None, out=out)

    def sig2(self, a, out=None):
        return OpTreeNode.build("sig2", a, None, out=out)

    def tanh(self, a, out=None):
        return OpTreeNode.build("tanh", a, None, out=out)

    def tanh2(self, a, out=None):
        return OpTreeNode.build("tanh2", a, None, out=out)

    def rint(self, a, out=None):
        return OpTreeNode.build("rint", a, None, out=out)

    def finite(self, a, out=None):
        """1 where ``a`` is neither infinite nor NaN, else 0 (neon's CPU backend lacked it)."""
        return OpTreeNode.build("finite", a, None, out=out)

    def binarize(self, a, *args, stochastic=True, out=None):
        """+1/-1 by sign (``stochastic=False``) or drawn with P(+1) = clip((a+1)/2, 0, 1).

        Takes the page's form ``binarize(a, stochastic=True, out=None)`` and neon's CPU form
        ``binarize(a, out, stochastic=True)``; positional arguments are told apart by type.
        """
        if len(args) > 2:
            raise TypeError("binarize(a, stochastic=True, out=None) takes at most 3 positional arguments")
        for arg in args:
            if isinstance(arg, Tensor):
                out = arg
            else:
                stochastic = arg
        return OpTreeNode.build("binarize", a, None, stochastic=bool(stochastic), out=out)

    def rand(self, out=None):
        """Uniform [0, 1) values drawn from ``be.rng``, shaped like what they are assigned to."""
        return OpTreeNode.build("rand", None, None, out=out)

    def equal(self, a, b, out=None):
        return OpTreeNode.build("eq", a, b, out=out)

    def not_equal(self, a, b, out=None):
        return OpTreeNode.build("ne", a, b, out=out)

    def less(self, a, b, out=None):
        return OpTreeNode.build("lt", a, b, out=out)

    def less_equal(self, a, b, out=None):
        return OpTreeNode.build("le", a, b, out=out)

    def greater(self, a, b, out=None):
        return OpTreeNode.build("gt", a, b, out=out)

    def greater_equal(self, a, b, out=None):
        return OpTreeNode.build("ge", a, b, out=out)

    def maximum(self, a, b, out=None):
        return OpTreeNode.build("maximum", a, b, out=out)

    def minimum(self, a, b, out=None):
        return OpTreeNode.build("minimum", a, b, out=out)

    def shift(self, a, b, value=True, out=None):
        """``a`` times a power of two: ``sgn(b) * 2**rint(log2|b|)`` (value=True) or ``2**b``."""
        return OpTreeNode.build("shift", a, b, value=bool(value), out=out)

    def clip(self, a, a_min, a_max, out=None):
        return self.minimum(self.maximum(a, a_min), a_max, out=out)

    def sum(self, a, axis=None, out=None, keepdims=True):
        """Sum over ``axis`` (0, 1 or None for all); reduced axes are always kept (size 1)."""
        return OpTreeNode.build("sum", a, None, axis=axis, out=out)

    def max(self, a, axis=None, out=None, keepdims=True):
        return OpTreeNode.build("max", a, None, axis=axis, out=out)

    def min(self, a, axis=None, out=None, keepdims=True):
        return OpTreeNode.build("min", a, None, axis=axis, out=out)

    def argmax(self, a, axis=1, out=None, keepdims=True):
        """Index of the first maximum along ``axis`` (default 1; None: flat index over all)."""
        return OpTreeNode.build("argmax", a, None, axis=axis, out=out)

    def argmin(self, a, axis=1, out=None, keepdims=True):
        return OpTreeNode.build("argmin", a, None, axis=axis, out=out)

    @staticmethod
    def _count(a, axis):
        shape = OpTreeNode._operand_shape(a)
        return int(np.prod(shape)) if axis is None else int(shape[axis])

    def mean(self, a, axis=None, partial=None, out=None, keepdims=True):
        return self.multiply(self.sum(a, axis=axis), 1.0 / self._count(a, axis), out=out)

    def var(self, a, axis=None, partial=None, out=None, keepdims=True, binary=False):
        """The population variance (divides by n); ``binary`` squares by power-of-two shifts."""
        centered = a - self.mean(a, axis=axis)
        sq = self.shift(centered, centered) if binary else self.square(centered)
        return self.mean(sq, axis=axis, out=out)

    def std(self, a, axis=None, partial=None, out=None, keepdims=True):
        """The standard deviation; with ``out`` it is the std that lands in ``out``.

        (neon 2.x wrote the variance into ``out`` and returned an unassigned sqrt tree.)
        """
        return self.sqrt(self.var(a, axis=axis), out=out)

    def take(self, a, indices, axis, out=None):
        """The entries of ``a`` at ``indices`` along ``axis`` (copied); into ``out`` if given."""
        result = a.take(indices, axis)
        if out is None:
            return result
        out[:] = result
        return out

    def onehot(self, indices, axis, out=None):
        """One-hot encode integer ``indices`` with the classes along ``axis`` (0 or 1)."""
        if axis not in (0, 1):
            raise ValueError(f"onehot: axis must be 0 or 1, got {axis!r}")
        dtype = np.dtype(getattr(indices, "dtype", np.float32))
        if dtype.kind not in "iu":
            raise TypeError(
                f"onehot: indices must be an integer tensor (neon requires int32 or uint32), got "
                f"{describe_operand(indices)} of dtype {dtype}; make it with be.array(..., dtype=np.int32)"
            )
        return OpTreeNode.build("onehot", None, None, idx=indices, axis=axis, out=out)

    def update_fc_bias(self, err, out):
        """``out`` = the bias gradient, the sum of ``err`` over the batch (axis 1)."""
        self.sum(err, axis=1, out=out)

    def add_fc_bias(self, inputs, bias):
        """``inputs += bias`` (a (features, 1) column broadcast over the batch)."""
        self.add(inputs, bias, out=inputs)

    def compound_rnn_unroll_fprop(self, W_recur, h_prev_s, h_ff_s, h_s, bias, nout, num_steps,
                                  num_used_steps, activation, reverse=False):
        """Unroll a simple RNN: ``h[t] = activation(W_recur . h_prev[t] + h_ff[t] + bias)``."""
        if num_used_steps is not None and num_used_steps < num_steps:
            h_s, h_prev_s, h_ff_s = h_s[:num_used_steps], h_prev_s[:num_used_steps], h_ff_s[:num_used_steps]
        steps = list(zip(h_s, h_prev_s, h_ff_s))
        if reverse:
            steps.reverse()
        for h, h_prev, h_ff in steps:
            if h_ff is h:
                self.compound_dot(W_recur, h_prev, h, beta=1.0)
                h[:] = activation(h + bias)
            else:
                self.compound_dot(W_recur, h_prev, h)
                h[:] = activation(h + h_ff + bias)

    def compound_rnn_unroll_bprop(self, W_recur, delta_prev_s, delta_s, h_s, nout, num_steps,
                                  num_used_steps, activation, reverse=True):
        """Back through the unrolled RNN: ``delta[t] *= act'(h[t])``, ``delta_prev[t] += W . delta[t]``."""
        if num_used_steps is not None and num_used_steps < num_steps:
            h_s = h_s[:num_used_steps]
        steps = list(zip(h_s, delta_s, delta_prev_s))
        if reverse:
            steps.reverse()
        for h, delta, delta_prev in steps:
            delta[:] = activation.bprop(h) * delta
            self.compound_dot(W_recur, delta, delta_prev, beta=1.0)

    def bibnrnn_layer(self, h_buffer_all, h_ff_buffer, W_recur_f, W_recur_b, nsteps, nout):
        return None

    def compound_rnn_unroll_fprop_bibnrnn(self, ngLayer, h_buffer_all, h_ff_buffer, W_recur_f,
                                          h_prev, h_ff_f, h_f, b_f, W_recur_b, h_next, h_ff_b,
                                          h_b, b_b, nout, nsteps, used_nsteps, activation):
        self.compound_rnn_unroll_fprop(W_recur_f, h_prev, h_ff_f, h_f, b_f, nout, nsteps,
                                       used_nsteps, activation, False)
        self.compound_rnn_unroll_fprop(W_recur_b, h_next, h_ff_b, h_b, b_b, nout, nsteps,
                                       used_nsteps, activation, True)

    def compound_rnn_unroll_bprop_bibnrnn(self, ngLayer, error, in_deltas_f, prev_in_deltas,
                                          in_deltas_b, next_in_deltas, W_recur_f, W_recur_b,
                                          h_f, h_b, nout, nsteps, used_nsteps, activation,
                                          h_buffer_all):
        self.compound_rnn_unroll_bprop(W_recur_f.T, prev_in_deltas, in_deltas_f, h_f, nout,
                                       nsteps, used_nsteps, activation, True)
        self.compound_rnn_unroll_bprop(W_recur_b.T, next_in_deltas, in_deltas_b, h_b, nout,
                                       nsteps, used_nsteps, activation, False)
