"""neon's ``neon.backends.nervanacpu``: the CPU tensor and the CPU backend.

Assignments run in two tiers. A tree is first split at ``dot`` (BLAS) and ``onehot``, whose
results enter as ndarray leaves (a bare ``dot`` is written by BLAS straight into the output);
the rest is offered to the fused executor ``plait.neon._fuse.execute(tree, out, rng=...)`` with
every Tensor leaf replaced by its ndarray. When it declines (or is not importable, or
``PLAIT_NEON_FUSE=0``), the numpy evaluator of this module runs it. The numpy evaluator is the
reference: it handles every op of :class:`OpCollection`.

float16 tensors are stored as float16 and computed in float32. Convolution, deconvolution and
pooling are delegated to ``plait.neon._layers`` (functions of the same names, given ndarrays);
LRN and ROI pooling too when ``_layers`` has them, else ``plait.neon._norm_roi`` runs them.
"""
import os
import time

import numpy as np

from .backend import Backend, OpCollection, OpTreeNode, Tensor, describe_operand

_ALL = slice(None)
_SUPPORTED_DTYPES = tuple(
    np.dtype(t) for t in (np.float16, np.float32, np.float64, np.uint8, np.int8, np.uint16,
                          np.int16, np.uint32, np.int32, np.int64, np.uint64, np.bool_)
)


def _data(x):
    """The ndarray behind a tensor (other values pass through)."""
    return x._tensor if isinstance(x, CPUTensor) else x


class CPUTensor(Tensor):
    """A tensor in host memory wrapping a numpy array (``_tensor``); views share memory."""

    _tensor = None

    def __init__(self, backend, shape=None, dtype=np.float32, ary=None, name=None,
                 persist_values=True, base=None):
        super().__init__(backend, shape, dtype, name, persist_values)
        dtype = np.dtype(dtype if dtype is not None else np.float32)
        if dtype not in _SUPPORTED_DTYPES:
            raise TypeError(f"CPUTensor: unsupported dtype {dtype}; use a float or integer dtype")
        if ary is None:
            if shape is None:
                raise ValueError("CPUTensor needs a shape or an array")
            ary = np.zeros(shape, dtype)
        elif not isinstance(ary, np.ndarray):
            ary = np.array(ary, dtype)
        elif ary.dtype != dtype:
            ary = ary.astype(dtype)
        if ary.ndim < 2:
            ary = ary.reshape(ary.shape + (1,) * (2 - ary.ndim))
        self._tensor = ary
        self.base = base

    # -- properties ---------------------------------------------------------------------------
    @property
    def shape(self):
        return self._tensor.shape

    @property
    def dtype(self):
        return self._tensor.dtype

    @property
    def size(self):
        return self._tensor.size

    @property
    def is_contiguous(self):
        return self._tensor.flags.c_contiguous

    def __len__(self):
        return self._tensor.shape[0]

    def __str__(self):
        a = self._tensor
        return (f"CPUTensor(name={self.name}, shape={a.shape}, dtype={a.dtype}, "
                f"strides={a.strides}, contiguous={a.flags.c_contiguous})")

    __repr__ = __str__

    def __array__(self, dtype=None, copy=None):
        if dtype is not None and np.dtype(dtype) != self._tensor.dtype:
            return self._tensor.astype(dtype)
        return self._tensor.copy() if copy else self._tensor

    # -- views --------------------------------------------------------------------------------
    def _view(self, ary):
        return self.__class__(backend=self.backend, ary=ary, dtype=ary.dtype, base=self)

    def __getitem__(self, key):
        """A view of the indexed part. Integer indices keep their axis (neon tensors stay 2-D);
        beyond two dimensions, size-1 axes are dropped (the leading ones first)."""
        if not isinstance(key, tuple):
            if isinstance(key, slice) and key == _ALL:
                return self
            key = (key,)
        fixed = []
        for axis, k in enumerate(key):
            if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
                n = self._tensor.shape[axis]
                k = int(k)
                if not -n <= k < n:
                    raise IndexError(
                        f"index {k} is out of range for axis {axis} of size {n} of {describe_operand(self)}"
                    )
                k = k + n if k < 0 else k
                fixed.append(slice(k, k + 1))
            else:
                fixed.append(k)
        ary = self._tensor[tuple(fixed)]
        if ary.ndim > 2:
            shape = list(ary.shape)
            while len(shape) > 2 and 1 in shape:
                shape.remove(1)
            if len(shape) != ary.ndim:
                ary = ary.reshape(shape)
        return self._view(ary)

    def __setitem__(self, key, value):
        if key.__class__ is slice and key == _ALL:
            self._assign(value)
            return
        view = self[key]
        if view is self:
            self._assign(value)
            return
        if view._tensor.size and not np.may_share_memory(view._tensor, self._tensor):
            # advanced (array) indexing gives a copy: evaluate, then scatter with numpy.
            view._assign(value)
            self._tensor[key] = view._tensor.reshape(self._tensor[key].shape)
            return
        view._assign(value)

    def _assign(self, value):
        """Write ``value`` (op-tree, tensor, scalar or host array) into this tensor."""
        if isinstance(value, (CPUTensor, OpTreeNode)):
            self.backend._execute_assign(self, value)
        elif isinstance(value, (int, float, np.number, np.bool_, np.ndarray, list)):
            self.set(value)
        else:
            raise TypeError(
                f"cannot assign a {type(value).__name__} to {describe_operand(self)}; assign an "
                f"op-tree, a tensor, a number or a numpy array"
            )
        return self

    def set(self, value):
        """Copy a host array (same size; reshaped if its shape differs) or a scalar in."""
        if isinstance(value, list):
            value = np.asarray(value)
        if isinstance(value, np.ndarray):
            if value.shape != self._tensor.shape:
                if value.size == self._tensor.size:
                    value = value.reshape(self._tensor.shape)
                else:
                    try:
                        np.broadcast_shapes(value.shape, self._tensor.shape)
                    except ValueError:
                        raise ValueError(
                            f"set: cannot write a host array of shape {value.shape} "
                            f"({value.size} elements) into {describe_operand(self)}; give an array "
                            f"of the same size or one that broadcasts to the tensor's shape"
                        ) from None
            _store(self._tensor, value)
        else:
            _store(self._tensor, value)
        return self

    def get(self):
        """A host copy of the data."""
        return self._tensor.copy()

    def raw(self):
        """The address of the data buffer."""
        return self._tensor.ctypes.data

    def asnumpyarray(self):
        """The ndarray itself (no copy); prefer ``get()``."""
        return self._tensor

    def take(self, indices, axis=None):
        """A new tensor of the entries at ``indices`` along ``axis`` (None: of the flattened data)."""
        idx = _data(indices)
        idx = np.asarray(idx).squeeze() if isinstance(idx, np.ndarray) else np.asarray(idx)
        idx = idx.reshape(-1).astype(np.intp, copy=False)
        if axis is None:
            ary = self._tensor.reshape(-1).take(idx).reshape(-1, 1)
        else:
            ary = self._tensor.take(idx, axis)
        return self.__class__(backend=self.backend, ary=ary, dtype=ary.dtype, base=self)

    def fill(self, value):
        self._tensor.fill(value)
        return self

    def copy(self, a=None):
        """``copy(a)`` assigns ``a`` into this tensor (neon); ``copy()`` returns a new deep copy."""
        if a is None:
            return self.__class__(backend=self.backend, ary=self._tensor.copy(), dtype=self.dtype,
                                  name=self.name)
        return self._assign(a)

    def copy_from(self, a):
        """Assign ``a`` (a host array, tensor or op-tree) into this tensor."""
        return self._assign(a)

    def reshape(self, *shape):
        """A reshaped view (the same number of elements)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        if shape == self._tensor.shape:
            return self
        try:
            ary = self._tensor.reshape(shape)
        except ValueError:
            raise ValueError(
                f"cannot reshape {describe_operand(self)} ({self.size} elements) to {shape} "
                f"({int(np.prod(shape))} elements): the sizes must match"
            ) from None
        return self._view(ary)

    @property
    def T(self):
        """A transposed view: a 2-D transpose, or axes 1 and 2 swapped for 3-D (batched dot)."""
        if self._tensor.ndim <= 2:
            return self._view(self._tensor.T)
        return self._view(self._tensor.swapaxes(1, 2))

    def transpose(self, out=None):
        if out is not None:
            return OpTreeNode.build("assign", out, self.T)
        return self.T

    def share(self, shape, dtype=None, name=None):
        """A view of the first ``prod(shape)`` elements reshaped to ``shape`` (shared scratch)."""
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        size = int(np.prod(shape))
        if size > self.size:
            raise ValueError(
                f"share: {shape} needs {size} elements but {describe_operand(self)} has only {self.size}"
            )
        return self._view(self._tensor.reshape(-1)[:size].reshape(shape))

    def hist(self, tag):
        """Histogram of rint(log2|x|) into the backend's histogram buffer under ``tag``."""
        be = self.backend
        bins = np.arange(be.hist_bins + 1, dtype=np.float64) + float(be.hist_offset)
        bins[0] = -np.inf
        with np.errstate(divide="ignore"):
            vals = np.rint(np.log2(np.abs(self._tensor.astype(np.float32))))
        counts, _ = np.histogram(vals, bins=bins)
        return be._hist_tensor(tag)._assign(counts)


# ---------------------------------------------------------------------------------------------
# The numpy evaluator (the reference for every op)


def _compute_dtype(dtype):
    dtype = np.dtype(dtype)
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _store(dst, value):
    """``dst[...] = value`` with neon's clipping of integer outputs."""
    if dst.dtype.kind in "iu":
        value = np.asarray(value)
        if value.dtype.kind == "f":
            info = np.iinfo(dst.dtype)
            value = np.clip(np.rint(value), info.min, info.max)
        elif value.dtype.kind in "iu" and value.dtype != dst.dtype:
            info = np.iinfo(dst.dtype)
            value = np.clip(value, info.min, info.max)
    np.copyto(dst, value, casting="unsafe")


def _sign_pow2(b):
    """sgn(b) * 2**rint(log2 |b|) with neon's safelog floor."""
    mag = np.log(np.maximum(np.abs(b), np.exp(-50.0))) / np.log(2.0)
    return np.sign(b) * np.exp2(np.rint(mag))


_UNARY = {
    "neg": np.negative,
    "abs": np.abs,
    "sgn": np.sign,
    "sqrt": np.sqrt,
    "sqr": np.square,
    "exp": np.exp,
    "log": np.log,
    "safelog": lambda x: np.log(np.maximum(x, np.exp(-50.0))),
    "exp2": np.exp2,
    "log2": np.log2,
    "sig": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "sig2": lambda x: 1.0 / (1.0 + np.exp2(-x)),
    "tanh": np.tanh,
    "tanh2": lambda x: np.tanh(x * np.log(2.0)),
    "transpose": np.transpose,
    "rint": np.rint,
    "finite": np.isfinite,
}

_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "pow": np.power,
    "minimum": np.minimum,
    "maximum": np.maximum,
}

_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}


class _NumpyEvaluator:
    """Evaluates an op-tree bottom-up with numpy; one instance per assignment."""

    __slots__ = ("ctype", "out_shape", "rng")

    def __init__(self, ctype, out_shape, rng):
        self.ctype = ctype
        self.out_shape = out_shape
        self.rng = rng

    def leaf(self, x):
        if isinstance(x, (CPUTensor, np.ndarray)):
            a = x._tensor if isinstance(x, CPUTensor) else x
            if a.dtype != self.ctype and (a.dtype.kind != "f" or a.dtype.itemsize < self.ctype.itemsize):
                a = a.astype(self.ctype)
            return a
        if isinstance(x, Tensor):
            raise TypeError(f"the CPU backend cannot evaluate {describe_operand(x)}")
        if isinstance(x, np.generic):
            return x.item()
        return x

    def __call__(self, node):
        if not isinstance(node, OpTreeNode):
            return self.leaf(node)
        d = node[0]
        op = d["op"]
        if op in _BINARY:
            r = _BINARY[op](self(node[1]), self(node[2]))
            if isinstance(r, np.ndarray) and r.dtype == np.bool_:
                r = r.astype(self.ctype)
            elif isinstance(r, (bool, np.bool_)):
                r = float(r)
            return r
        if op in _UNARY:
            x = self(node[1])
            r = _UNARY[op](x)
            if op == "finite":
                r = np.asarray(r).astype(self.ctype)
            return r
        if op in _REDUCE:
            x = np.asarray(self(node[1]))
            axis = d.get("axis")
            if axis is None:
                return _REDUCE[op](x).reshape(1, 1)
            return _REDUCE[op](x, axis=axis, keepdims=True)
        if op in ("argmax", "argmin"):
            x = np.asarray(self(node[1]))
            fn = np.argmax if op == "argmax" else np.argmin
            axis = d.get("axis")
            if axis is None:
                return np.asarray(fn(x), dtype=self.ctype).reshape(1, 1)
            return fn(x, axis=axis, keepdims=True).astype(self.ctype)
        if op == "dot":
            a, b = np.asarray(self(node[1])), np.asarray(self(node[2]))
            return np.dot(a, b)
        if op == "shift":
            a, b = self(node[1]), self(node[2])
            ap2 = _sign_pow2(b) if d.get("value", True) else np.exp2(b)
            return np.multiply(a, ap2)
        if op == "binarize":
            x = np.asarray(self(node[1]), dtype=self.ctype)
            if d.get("stochastic", True):
                p = np.clip((x + 1.0) * 0.5, 0.0, 1.0)
                u = self.rng.uniform(size=x.shape)
                return np.where(u <= p, 1.0, -1.0).astype(self.ctype)
            return np.where(x >= 0, 1.0, -1.0).astype(self.ctype)
        if op == "rand":
            return self.rng.uniform(size=self.out_shape).astype(self.ctype)
        if op == "onehot":
            idx = np.asarray(_data(d["idx"])).reshape(-1)
            axis = d["axis"]
            if axis == 0:
                classes = np.arange(self.out_shape[0]).reshape(-1, 1)
                return (classes == idx.reshape(1, -1)).astype(self.ctype)
            classes = np.arange(self.out_shape[1]).reshape(1, -1)
            return (idx.reshape(-1, 1) == classes).astype(self.ctype)
        if op == "assign":
            raise ValueError("an 'assign' node can only be the root of an op-tree")
        raise NotImplementedError(f"the numpy evaluator has no rule for op '{op}'")


def evaluate(tree, out_shape, dtype, rng):
    """Evaluate ``tree`` with numpy for an output of ``out_shape``/``dtype``; returns an array."""
    return _NumpyEvaluator(_compute_dtype(dtype), tuple(out_shape), rng)(tree)


# ---------------------------------------------------------------------------------------------
# The fused executor hook

_FUSE_UNSET = object()
_fuse_module = _FUSE_UNSET


def _get_fuse():
    global _fuse_module
    if _fuse_module is _FUSE_UNSET:
        try:
            from . import _fuse as mod
        except ImportError:
            mod = None
        _fuse_module = mod if mod is not None and hasattr(mod, "execute") else None
    return _fuse_module


def fuse_enabled():
    """Whether assignments are offered to ``plait.neon._fuse`` (``PLAIT_NEON_FUSE=0`` turns it off)."""
    if _fuse_module is _FUSE_UNSET:
        _get_fuse()
    return _fuse_module is not None and os.environ.get("PLAIT_NEON_FUSE") != "0"


_SPLIT_OPS = frozenset({"dot", "onehot"})


def _to_arrays(node, ev=None):
    """The op-tree with every Tensor leaf (and onehot's index tensor) replaced by its ndarray.

    With a numpy evaluator ``ev``, ``dot`` and ``onehot`` subtrees (which the fused executor does
    not take) are computed first (dot by BLAS) and enter the tree as ndarray leaves, as neon
    split its trees at ``dot``.
    """
    d, left, right = node
    if ev is not None and d["op"] in _SPLIT_OPS:
        return np.asarray(ev(node))
    if "idx" in d and isinstance(d["idx"], CPUTensor):
        d = dict(d)
        d["idx"] = d["idx"]._tensor
    tl, tr = type(left), type(right)
    if tl is OpTreeNode:
        left = _to_arrays(left, ev)
    elif tl is CPUTensor or isinstance(left, CPUTensor):
        left = left._tensor
    if tr is OpTreeNode:
        right = _to_arrays(right, ev)
    elif tr is CPUTensor or isinstance(right, CPUTensor):
        right = right._tensor
    return tuple.__new__(OpTreeNode, (d, left, right))


def _dot_into(dst, node):
    """``dst = a . b`` straight from BLAS when ``node`` is a dot of two tensors of ``dst``'s float
    dtype and ``dst`` is contiguous and separate from them; False otherwise."""
    a, b = node[1], node[2]
    if not (isinstance(a, CPUTensor) and isinstance(b, CPUTensor)):
        return False
    a, b = a._tensor, b._tensor
    if not (dst.dtype == a.dtype == b.dtype and dst.dtype.char in "fd" and dst.flags.c_contiguous
            and a.ndim == b.ndim == 2):
        return False
    if np.may_share_memory(dst, a) or np.may_share_memory(dst, b):
        return False
    np.dot(a, b, out=dst)
    return True


# ---------------------------------------------------------------------------------------------
# The backend


def _layers_has(*names):
    """Whether ``plait.neon._layers`` imports and provides all of ``names``."""
    try:
        from . import _layers
    except ImportError:
        return False
    return all(callable(getattr(_layers, n, None)) for n in names)


def _local_call(name, *args, **kwargs):
    """Call ``plait.neon._norm_roi.<name>`` with tensors replaced by their ndarrays."""
    from . import _norm_roi

    return getattr(_norm_roi, name)(*[_data(a) for a in args], **{k: _data(v) for k, v in kwargs.items()})


def _layers_call(name, *args, **kwargs):
    """Call ``plait.neon._layers.<name>`` with every tensor argument replaced by its ndarray."""
    try:
        from . import _layers
    except ImportError as exc:
        raise NotImplementedError(
            f"{name}: the conv/deconv/pool kernels live in plait.neon._layers, which is not "
            f"available yet ({exc})"
        ) from exc
    fn = getattr(_layers, name, None)
    if fn is None:
        raise NotImplementedError(f"{name}: plait.neon._layers does not provide '{name}' yet")
    args = [_data(a) for a in args]
    kwargs = {k: _data(v) for k, v in kwargs.items()}
    return fn(*args, **kwargs)


class NervanaCPU(Backend):
    """neon's CPU backend on numpy (BLAS for matrix products), with fused op-tree execution."""

    backend_name = "cpu"

    def __init__(self, rng_seed=None, default_dtype=np.float32, hist_bins=64, hist_offset=-48,
                 compat_mode=None, num_devices=None, stochastic_round=None, device_id=None,
                 deterministic=None):
        try:
            dt = np.dtype(default_dtype)
        except TypeError:
            dt = None
        if dt not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(
                f"the CPU backend's default dtype must be float16, float32 or float64, got {default_dtype!r}"
            )
        super().__init__(rng_seed, dt.type, compat_mode=compat_mode, deterministic=deterministic)
        self.device_type = 0
        self.device_id = 0
        self.tensor_cls = CPUTensor
        self.hist_bins, self.hist_offset = None, None
        self.set_hist_buffers(hist_bins, hist_offset)
        self.use_pinned_mem = False

    # -- RNG ----------------------------------------------------------------------------------
    def gen_rng(self, seed=None):
        """Make a new host RNG from ``seed`` (None: unseeded) and remember its state for reset."""
        self.rng = np.random.RandomState(seed)
        self.init_rng_state = self.rng_get_state()
        return self.rng

    def rng_get_state(self, state=None):
        """The host RNG state (the ``state`` argument the page lists is accepted and ignored)."""
        return self.rng.get_state()

    def rng_set_state(self, state):
        self.rng.set_state(state)

    def rng_reset(self):
        self.rng_set_state(self.init_rng_state)

    def fill_normal(self, ary, mean=0, stdv=1):
        """Fill ``ary`` with normal draws from ``be.rng`` (neon drew from numpy's global RNG)."""
        ary[:] = self.rng.standard_normal(tuple(ary.shape)) * stdv + mean

    def make_binary_mask(self, out, keepthresh=0.5):
        """``out`` = 1 where a uniform draw from ``be.rng`` is below ``keepthresh``, else 0."""
        mask = self.rng.uniform(size=out._tensor.shape) < keepthresh
        np.copyto(out._tensor, mask, casting="unsafe")

    # -- allocation ---------------------------------------------------------------------------
    def _dtype(self, dtype):
        return np.dtype(self.default_dtype if dtype is None else dtype)

    @staticmethod
    def _shape(shape):
        if isinstance(shape, (int, np.integer)):
            return (int(shape),)
        try:
            return tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            raise ValueError(f"invalid tensor shape {shape!r}: give an int or a tuple of ints") from None

    def empty(self, shape, dtype=None, name=None, persist_values=True, parallel=False,
              distributed=False):
        """A new tensor; zero-filled like neon's CPU backend's (calloc'd pages, so still cheap),
        since code written against it may have relied on that."""
        dtype = self._dtype(dtype)
        return self.tensor_cls(self, ary=np.zeros(self._shape(shape), dtype), dtype=dtype, name=name,
                               persist_values=persist_values)

    def array(self, ary, dtype=None, name=None, persist_values=True, parallel=False,
              distributed=False):
        dtype = self._dtype(dtype)
        return self.tensor_cls(self, ary=np.array(_data(ary), dtype), dtype=dtype, name=name,
                               persist_values=persist_values)

    def zeros(self, shape, dtype=None, name=None, persist_values=True, parallel=False,
              distributed=False):
        dtype = self._dtype(dtype)
        return self.tensor_cls(self, ary=np.zeros(self._shape(shape), dtype), dtype=dtype, name=name,
                               persist_values=persist_values)

    def ones(self, shape, dtype=None, name=None, persist_values=True, parallel=False,
             distributed=False):
        dtype = self._dtype(dtype)
        return self.tensor_cls(self, ary=np.ones(self._shape(shape), dtype), dtype=dtype, name=name,
                               persist_values=persist_values)

    @staticmethod
    def _like_args(dtype, name):
        """``*_like(other, dtype, name)`` is neon 2.6's CPU order, ``*_like(other, name)`` the
        page's: a second positional string that is no dtype name is taken as the name."""
        if isinstance(dtype, str):
            try:
                np.dtype(dtype)
            except TypeError:
                return None, dtype if name is None else name
        return dtype, name

    def empty_like(self, other_ary, dtype=None, name=None, persist_values=True):
        dtype, name = self._like_args(dtype, name)
        return self.empty(other_ary.shape, dtype=dtype, name=name, persist_values=persist_values)

    def zeros_like(self, other_ary, dtype=None, name=None, persist_values=True):
        dtype, name = self._like_args(dtype, name)
        return self.zeros(other_ary.shape, dtype=dtype, name=name, persist_values=persist_values)

    def ones_like(self, other_ary, dtype=None, name=None, persist_values=True):
        dtype, name = self._like_args(dtype, name)
        return self.ones(other_ary.shape, dtype=dtype, name=name, persist_values=persist_values)

    # -- execution ----------------------------------------------------------------------------
    def execute(self, optree, numpy_call_dict=None):
        """Run an ``assign`` node: offer it to the fused executor, else evaluate with numpy."""
        if not isinstance(optree, OpTreeNode) or optree[0]["op"] != "assign":
            what = optree[0]["op"] if isinstance(optree, OpTreeNode) else type(optree).__name__
            raise ValueError(
                f"execute() takes an 'assign' op-tree, got '{what}'; assign the tree to a tensor "
                f"(out[:] = tree) or pass out="
            )
        out, value = optree[1], optree[2]
        if not isinstance(out, CPUTensor):
            raise TypeError(f"the CPU backend cannot assign into {describe_operand(out)}")
        return self._execute_assign(out, value)

    def _execute_assign(self, out, value):
        """``out[...] = value`` for an op-tree, a tensor or a scalar; returns ``out``."""
        dst = out._tensor
        if isinstance(value, OpTreeNode):
            if value[0]["shape"] != dst.shape:
                self._check_assign_shape(out, value)
            if value[0]["op"] == "dot" and _dot_into(dst, value):
                return out
            if fuse_enabled():
                ev = _NumpyEvaluator(_compute_dtype(dst.dtype), dst.shape, self.rng)
                tree = _to_arrays(value, ev)
                if type(tree) is OpTreeNode and _fuse_module.execute(tree, dst, rng=self.rng):
                    return out
                result = ev(tree)
            else:
                result = evaluate(value, dst.shape, dst.dtype, self.rng)
        elif isinstance(value, CPUTensor):
            self._check_assign_shape(out, value)
            result = value._tensor
        else:
            result = value
        _store(dst, result)
        return out

    @staticmethod
    def _check_assign_shape(out, value):
        vshape = tuple(value.shape)
        oshape = tuple(out.shape)
        if vshape == oshape:
            return
        try:
            if np.broadcast_shapes(vshape, oshape) == oshape:
                return
        except ValueError:
            pass
        raise ValueError(
            f"cannot assign {describe_operand(value)} to {describe_operand(out)}: the value's shape "
            f"must equal the output's or broadcast to it (size 1 along the other axes); slice or "
            f"reshape the output, or fix the expression"
        )

    # -- matrix products ----------------------------------------------------------------------
    @staticmethod
    def _matmul_operand(x):
        a = x._tensor
        return a.astype(np.float32) if a.dtype == np.float16 or a.dtype.kind in "iu" else a

    def compound_dot(self, A, B, C, alpha=1.0, beta=0.0, relu=False, bsum=None):
        """``C = relu?(alpha * A . B) + beta * C`` with BLAS; pass ``A.T``/``B.T`` views to transpose.

        relu (max(x, 0)) is applied before the beta term, as in neon. ``bsum`` (optional) receives
        the row sums of C.
        """
        a_s, b_s, c_s = tuple(A.shape), tuple(B.shape), tuple(C.shape)
        if len(a_s) != 2 or len(b_s) != 2 or len(c_s) != 2 or a_s[1] != b_s[0] or \
                a_s[0] != c_s[0] or b_s[1] != c_s[1]:
            raise ValueError(
                f"compound_dot: shapes do not fit C = A . B: A is {describe_operand(A)}, B is "
                f"{describe_operand(B)}, C is {describe_operand(C)}; need A (m, k), B (k, n) and "
                f"C (m, n) (pass A.T or B.T views for transposed operands)"
            )
        a, b, c = self._matmul_operand(A), self._matmul_operand(B), C._tensor
        direct = (beta == 0 and alpha == 1.0 and c.flags.c_contiguous and c.dtype == np.result_type(a, b)
                  and not np.may_share_memory(c, a) and not np.may_share_memory(c, b))
        if direct:
            np.dot(a, b, out=c)
            if relu:
                np.maximum(c, 0, out=c)
        else:
            prod = np.dot(a, b)
            if alpha != 1.0:
                prod *= alpha
            if relu:
                np.maximum(prod, 0, out=prod)
            if beta != 0:
                prod += beta * c.astype(prod.dtype, copy=False)
            _store(c, prod)
        if bsum is not None:
            self.sum(C, axis=1, out=bsum)
        return C

    def batched_dot(self, A, B, C, alpha=1.0, beta=0.0, relu=False):
        """Three batched products (X batches on axis 0):

        fprop ``A (K, C), B (X, C, N) -> C (X, K, N)``; bprop ``batched_dot(A.T, B, C)``;
        update ``A (X, K, N), B.T (X, N, C) -> C (K, C)`` summed over the batches.
        """
        a, b, c = self._matmul_operand(A), self._matmul_operand(B), C._tensor
        if a.ndim == 2 and b.ndim == 3 and c.ndim == 3:
            ok = a.shape[1] == b.shape[1] and c.shape == (b.shape[0], a.shape[0], b.shape[2])
            prod = np.matmul(a, b) if ok else None
        elif a.ndim == 3 and b.ndim == 3 and c.ndim == 2:
            ok = a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1] and c.shape == (a.shape[1], b.shape[2])
            prod = np.matmul(a, b).sum(axis=0) if ok else None
        elif a.ndim == 3 and b.ndim == 3 and c.ndim == 3:
            ok = a.shape[0] == b.shape[0] == c.shape[0] and a.shape[2] == b.shape[1] and \
                c.shape[1:] == (a.shape[1], b.shape[2])
            prod = np.matmul(a, b) if ok else None
        else:
            ok, prod = False, None
        if not ok:
            raise ValueError(
                f"batched_dot: shapes do not fit one of the three modes: A is {describe_operand(A)}, "
                f"B is {describe_operand(B)}, C is {describe_operand(C)}; use A (K, C), B (X, C, N), "
                f"C (X, K, N) (fprop; A.T for bprop) or A (X, K, N), B.T (X, N, C), C (K, C) (update)"
            )
        if alpha != 1.0:
            prod = prod * alpha
        if relu:
            prod = np.maximum(prod, 0)
        if beta != 0:
            prod = prod + beta * c
        _store(c, prod)
        return C

    def xnor_compound_dot(self, A, B, C, beta=0.0, bsum=None):
        """XNOR GEMM: ``C = sign(A) . sign(B) + beta * C`` with sign(x) = +1 for x >= 0 else -1.

        On +1/-1 operands (what ``binarize`` makes) this equals ``A . B``, which is what an
        XNOR-and-popcount kernel computes.
        """
        a_s, b_s, c_s = tuple(A.shape), tuple(B.shape), tuple(C.shape)
        if a_s[1] != b_s[0] or a_s[0] != c_s[0] or b_s[1] != c_s[1]:
            raise ValueError(
                f"xnor_compound_dot: shapes do not fit C = A . B: A is {describe_operand(A)}, B is "
                f"{describe_operand(B)}, C is {describe_operand(C)}; need A (m, k), B (k, n), C (m, n)"
            )
        a = np.where(self._matmul_operand(A) >= 0, 1.0, -1.0).astype(np.float32)
        b = np.where(self._matmul_operand(B) >= 0, 1.0, -1.0).astype(np.float32)
        prod = np.dot(a, b)
        if beta != 0:
            prod += beta * C._tensor
        _store(C._tensor, prod)
        if bsum is not None:
            self.sum(C, axis=1, out=bsum)
        return C

    def copy_transpose(self, a, out, axes=None, repeat=1):
        """``out = numpy.transpose(a, axes)`` (a dimshuffle into ``out``'s memory)."""
        src = np.transpose(a._tensor, axes)
        if src.size != out.size:
            raise ValueError(
                f"copy_transpose: {describe_operand(a)} transposed by {axes} has {src.size} elements, "
                f"but out is {describe_operand(out)}"
            )
        _store(out._tensor, src.reshape(out._tensor.shape) if src.shape != out._tensor.shape else src)
        return out

    # -- compound layer helpers ---------------------------------------------------------------
    def compound_fprop_bn(self, x, xsum, xvar, gmean, gvar, gamma, beta, y, eps, rho,
                          compute_batch_sum, accumbeta=0.0, relu=False, binary=False,
                          inference=False, outputs=None, layer=None):
        """Batch norm forward over axis 1 of ``x`` (features, batch).

        Training: ``xsum`` ends as the batch mean, ``xvar`` the batch variance, the running
        ``gmean``/``gvar`` are moved by ``rho``, and ``y = xhat * gamma + beta + accumbeta * y``.
        Inference normalizes with ``gmean``/``gvar``. ``relu`` applies max(., 0) to the output.
        """
        if inference:
            xhat = (x - gmean) / self.sqrt(gvar + eps)
            val = y * accumbeta + xhat * gamma + beta
            y[:] = self.maximum(val, 0) if relu else val
            return
        if compute_batch_sum:
            xsum[:] = self.sum(x, axis=1)
        xvar[:] = self.var(x, axis=1, binary=binary)
        xsum[:] = xsum / x.shape[1]
        gmean[:] = gmean * rho + (1.0 - rho) * xsum
        gvar[:] = gvar * rho + (1.0 - rho) * xvar
        if binary:
            xhat = self.shift(x - xsum, 1.0 / self.sqrt(xvar + eps))
            val = self.shift(xhat, gamma)
        else:
            xhat = (x - xsum) / self.sqrt(xvar + eps)
            val = xhat * gamma
        outputs = y.reshape(xhat.shape)
        val = val + beta + accumbeta * outputs
        outputs[:] = self.maximum(val, 0) if relu else val

    def compound_bprop_bn(self, delta_out, grad_gamma, grad_beta, delta_in, x, xsum, xvar, gamma,
                          eps, binary=False, layer=None):
        """Batch norm backward (``xsum`` holds the batch mean from the forward pass)."""
        if binary:
            op = self.shift
        else:
            def op(left, right):
                return left * right
        inv_v = 1.0 / self.sqrt(xvar + eps)
        xhat = op(x - xsum, inv_v)
        grad_gamma[:] = self.sum(xhat * delta_in, axis=1)
        grad_beta[:] = self.sum(delta_in, axis=1)
        xtmp = (op(xhat, grad_gamma) + grad_beta) / float(x.shape[1])
        delta_out.reshape(delta_in.shape)[:] = op(op(delta_in - xtmp, gamma), inv_v)

    def compound_bprop_lut(self, nin, inputs, error, error_t, dW, pad_idx, alpha=1.0, beta=0):
        """Lookup-table backward: row ``w`` of ``dW`` = ``alpha`` * the sum of the columns of
        ``error`` whose word id (row 0 of ``inputs``) is ``w``, plus ``beta`` * the old row.
        Rows of absent words and of ``pad_idx`` are left as they are."""
        ids = np.asarray(inputs._tensor[0]).astype(np.int64).reshape(-1)
        err = error._tensor
        if err.shape[1] != ids.size:
            raise ValueError(
                f"compound_bprop_lut: error is {describe_operand(error)} but inputs hold {ids.size} "
                f"word ids; error needs one column per id"
            )
        uniq, inv = np.unique(ids, return_inverse=True)
        sums = np.zeros((uniq.size, err.shape[0]), dtype=np.float64)
        np.add.at(sums, inv.reshape(-1), err.T.astype(np.float64))
        keep = uniq != pad_idx if pad_idx is not None else np.ones(uniq.size, bool)
        rows = uniq[keep]
        dw = dW._tensor
        new = alpha * sums[keep]
        if beta != 0:
            new = new + beta * dw[rows]
        dw[rows] = new.astype(dw.dtype)

    def Relu(self, ary, out=None):
        """max(ary, 0) on ndarrays."""
        return np.maximum(ary, 0, out) if out is not None else np.maximum(ary, 0)

    def nms(self, detections, threshold, normalized=False):
        """Greedy non-maximum suppression of boxes (rows x1, y1, x2, y2, score); returns the
        indices kept (among the rows of non-zero score), best first."""
        offset = 0 if normalized else 1
        dets = detections.get() if isinstance(detections, CPUTensor) else np.asarray(detections)
        nz = np.where(dets[:, 4] != 0)[0]
        x1, y1, x2, y2, scores = (dets[nz, i] for i in range(5))
        areas = (x2 - x1 + offset) * (y2 - y1 + offset)
        order = scores.argsort()[::-1]
        keep = []
        while order.size:
            i = order[0]
            keep.append(int(i))
            rest = order[1:]
            w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]) + offset)
            h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]) + offset)
            inter = w * h
            ovr = inter / (areas[i] + areas[rest] - inter)
            order = rest[ovr <= threshold]
        return keep

    # -- neon layer-level helpers (what neon 2.x layers call on the CPU backend) --------------
    def consume(self, buf_index, hostlist, devlist):
        if not 0 <= buf_index < 2:
            raise ValueError("consume: only double buffering (buf_index 0 or 1) is supported")
        if devlist[buf_index] is None:
            devlist[buf_index] = self.empty_like(hostlist[buf_index].T, dtype=hostlist[buf_index].dtype)
        devlist[buf_index][:] = hostlist[buf_index].T

    def relu_layer(self):
        return None

    def fprop_relu(self, layer, x, slope):
        return self.maximum(x, 0) + slope * self.minimum(0, x)

    def bprop_relu(self, layer, x, error, deltas, slope):
        return self.greater(x, 0) + slope * self.less(x, 0)

    def fprop_softmax(self, x, axis):
        e = self.exp(x - self.max(x, axis=axis))
        return self.reciprocal(self.sum(e, axis=axis)) * e

    def batchnorm_layer(self, in_shape):
        return None

    def fprop_transform(self, ngLayer, transform, inputs, outputs, relu=False):
        outputs[:] = transform(inputs)

    def bprop_transform(self, ngLayer, transform, outputs, error, deltas, relu):
        deltas[:] = transform.bprop(outputs) * error

    def fprop_skipnode(self, x, y, beta):
        y[:] = y * beta + x

    def bprop_skipnode(self, error, deltas, alpha, beta):
        deltas[:] = deltas * beta + alpha * error

    def mergesum_layer(self, layer_num):
        return None

    def fprop_mergesum(self, ngLayer, inputs, inference, layers, outputs, out_shape):
        for layer in layers:
            layer.fprop(inputs, inference, beta=0 if layer is layers[0] else 1)

    def bprop_mergesum(self, ngLayer, alpha, beta, layers, error, deltas):
        for layer in reversed(layers):
            layer.bprop(error, alpha=alpha, beta=beta if layer is layers[-1] else 1)

    def mergebroadcast_layer(self, layer_num):
        return None

    def fprop_mergebroadcast(self, ngLayer, inputs, inference, outputs, layers, out_shape):
        for layer in layers:
            layer.fprop(inputs, inference)

    def bprop_mergebroadcast(self, ngLayer, layers, error_views, error, delta, out_shape, alpha,
                             beta, alphas, betas):
        betas[-1] = beta
        for layer, e, a, b in reversed(list(zip(layers, error_views, alphas, betas))):
            layer.bprop(e, alpha=a * alpha, beta=b)

    # -- histograms ---------------------------------------------------------------------------
    def set_hist_buffers(self, hist_bins, hist_offset):
        """(Re)allocate the histogram buffer: up to 4096 tagged histograms of ``hist_bins`` bins."""
        if hist_bins != self.hist_bins or hist_offset != self.hist_offset:
            self.hist_bins, self.hist_offset = hist_bins, hist_offset
            self.hist_max = 4096
            self.hist_buf = self.zeros((self.hist_max, hist_bins), dtype=np.int32)
            self.hist_idx = 0
            self.hist_map = {}

    def _hist_tensor(self, tag):
        if self.hist_idx >= self.hist_max:
            raise RuntimeError(
                f"the histogram buffer is full ({self.hist_max} histograms); call dump_hist_data()"
            )
        self.hist_map[tag] = self.hist_idx
        buf = self.hist_buf[self.hist_idx]
        self.hist_idx += 1
        return buf

    def dump_hist_data(self):
        """Return ``(buffer, {tag: row})`` of the histograms so far and start a fresh buffer."""
        data, tags = self.hist_buf, self.hist_map
        self.hist_map, self.hist_idx = {}, 0
        self.hist_buf = self.zeros((self.hist_max, self.hist_bins), dtype=np.int32)
        return data, tags

    # -- timing marks -------------------------------------------------------------------------
    def init_mark(self):
        return {"time": 0}

    def record_mark(self, marker):
        marker["time"] = time.time()

    def synchronize_mark(self, marker):
        """Nothing to wait for on the CPU."""

    def get_time(self, start, end):
        """Milliseconds between two recorded marks."""
        return (end["time"] - start["time"]) * 1000.0

    # -- convolution, deconvolution, pooling: plait.neon._layers --------------------------------
    def conv_layer(self, dtype, N, C, K, *args, **kwargs):
        kwargs.setdefault("lib", self)  # the backend, for caffe-mode output sizes
        return _layers_call("conv_layer", dtype, N, C, K, *args, **kwargs)

    def fprop_conv(self, layer, I, F, O, *args, **kwargs):
        return _layers_call("fprop_conv", layer, I, F, O, *args, **kwargs)

    def bprop_conv(self, layer, F, E, grad_I, *args, **kwargs):
        return _layers_call("bprop_conv", layer, F, E, grad_I, *args, **kwargs)

    def update_conv(self, layer, I, E, grad_F, *args, **kwargs):
        return _layers_call("update_conv", layer, I, E, grad_F, *args, **kwargs)

    def deconv_layer(self, dtype, N, C, K, *args, **kwargs):
        kwargs.setdefault("lib", self)  # the backend, for caffe-mode output sizes
        return _layers_call("deconv_layer", dtype, N, C, K, *args, **kwargs)

    def fprop_deconv(self, layer, I, F, O, *args, **kwargs):
        return _layers_call("fprop_deconv", layer, I, F, O, *args, **kwargs)

    def bprop_deconv(self, layer, F, E, grad_I, *args, **kwargs):
        return _layers_call("bprop_deconv", layer, F, E, grad_I, *args, **kwargs)

    def update_deconv(self, layer, I, E, grad_F, *args, **kwargs):
        return _layers_call("update_deconv", layer, I, E, grad_F, *args, **kwargs)

    def pool_layer(self, dtype, op, N, C, *args, **kwargs):
        kwargs.setdefault("lib", self)  # the backend, for caffe-mode output sizes
        return _layers_call("pool_layer", dtype, op, N, C, *args, **kwargs)

    def fprop_pool(self, layer, I, O, *args, **kwargs):
        return _layers_call("fprop_pool", layer, I, O, *args, **kwargs)

    def bprop_pool(self, layer, I, O, *args, **kwargs):
        return _layers_call("bprop_pool", layer, I, O, *args, **kwargs)

    # LRN and ROI pooling: plait.neon._layers when it provides them, else plait.neon._norm_roi
    _LRN = ("lrn_layer", "fprop_lrn", "bprop_lrn")

    def lrn_layer(self, dtype, N, C, D=1, H=1, W=1, J=1):
        """An LRN layer over windows of ``J`` (odd) feature maps."""
        if _layers_has(*self._LRN):
            return _layers_call("lrn_layer", dtype, N, C, D, H, W, J, lib=self)
        from ._norm_roi import LRNLayer

        return LRNLayer(self, dtype, N, C, D, H, W, J)

    def fprop_lrn(self, layer, I, O, denom, alpha=None, beta=None, ascale=1, bpower=1):
        """``denom = 1 + ascale/J * windowed sum of I**2``; ``O = I * denom**-bpower``."""
        call = _layers_call if _layers_has(*self._LRN) else _local_call
        return call("fprop_lrn", layer, I, O, denom, alpha=alpha, beta=beta, ascale=ascale,
                    bpower=bpower)

    def bprop_lrn(self, layer, I, O, E, delta, denom, alpha=None, beta=None, ascale=1, bpower=1):
        """The input gradient of ``fprop_lrn`` from the error ``E``, into ``delta``."""
        call = _layers_call if _layers_has(*self._LRN) else _local_call
        return call("bprop_lrn", layer, I, O, E, delta, denom, alpha=alpha, beta=beta,
                    ascale=ascale, bpower=bpower)

    def roipooling_fprop(self, I, rois, O, argmax, roi_count, C, H, W, pooled_height,
                         pooled_width, spatial_scale):
        """Max-pool regions of interest (rows of ``rois``: batch index, x1, y1, x2, y2)."""
        call = _layers_call if _layers_has("roipooling_fprop", "roipooling_bprop") else _local_call
        return call("roipooling_fprop", I, rois, O, argmax, roi_count, C, H, W, pooled_height,
                    pooled_width, spatial_scale, bsz=self.bsz)

    def roipooling_bprop(self, I, rois, O, argmax, roi_count, C, H, W, pooled_height,
                         pooled_width, spatial_scale):
        """Route pooled errors ``I`` back to the maxima's positions in the delta ``O``."""
        call = _layers_call if _layers_has("roipooling_fprop", "roipooling_bprop") else _local_call
        return call("roipooling_bprop", I, rois, O, argmax, roi_count, C, H, W, pooled_height,
                    pooled_width, spatial_scale, bsz=self.bsz)


Backend.backends["cpu"] = NervanaCPU
