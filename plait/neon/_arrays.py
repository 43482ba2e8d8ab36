"""What the CPU and GPU backends of the Neon face share: the pieces that only need an array module.

numpy on the CPU (``plait.neon.nervanacpu``), cupy on the GPU (``plait.neon.nervanagpu``): a
backend names its module in ``xp`` and its tensor class in ``tensor_cls``. Shared here:

* :class:`ArrayTensor`, the tensor (views, indexing, slice assignment, ``set``/``get``,
  ``take``, ``reshape``, ``share``, ``hist``) over ``backend.xp`` arrays;
* :class:`ArrayEvaluator`, the reference evaluator of every op-tree op (numpy or cupy calls
  one node at a time), and :func:`store` (neon's clipping of integer outputs);
* :class:`ArrayBackend`, allocation, the host RNG (``gen_rng``/state/``fill_normal``/
  ``make_binary_mask``), ``execute``, ``copy_transpose``, batch norm written as op-trees,
  neon's layer-level helpers, histograms and timing marks.

Device-specific work (assignment execution with its fused executor, matrix products, the
layer kernels) stays in each backend. This module never imports cupy itself.
"""
import time

import numpy as np

from .backend import Backend, OpCollection, OpTreeNode, Tensor, describe_operand

__all__ = ["ArrayTensor", "ArrayEvaluator", "ArrayBackend", "store", "compute_dtype", "sign_pow2",
           "evaluate", "data", "host", "array_module", "to_arrays", "SUPPORTED_DTYPES"]

_ALL = slice(None)
SUPPORTED_DTYPES = tuple(
    np.dtype(t) for t in (np.float16, np.float32, np.float64, np.uint8, np.int8, np.uint16,
                          np.int16, np.uint32, np.int32, np.int64, np.uint64, np.bool_)
)


def data(x):
    """The array behind a tensor (other values pass through)."""
    return x._tensor if isinstance(x, ArrayTensor) else x


def host(a):
    """A numpy array of ``a`` (a device array is copied to the host; a numpy one is returned)."""
    if isinstance(a, np.ndarray):
        return a
    get = getattr(a, "get", None)
    if get is not None and type(a).__module__.split(".")[0] == "cupy":
        return get()
    return np.asarray(a)


def array_module(a):
    """numpy, or cupy for a cupy array (imported only when one is seen)."""
    if isinstance(a, np.ndarray) or type(a).__module__.split(".")[0] != "cupy":
        return np
    import cupy

    return cupy


class ArrayTensor(Tensor):
    """A tensor wrapping an array of its backend's array module (``backend.xp``: numpy or cupy)
    in ``_tensor``; views share memory. Subclassed by CPUTensor and GPUTensor."""

    _tensor = None

    def __init__(self, backend, shape=None, dtype=np.float32, ary=None, name=None,
                 persist_values=True, base=None):
        super().__init__(backend, shape, dtype, name, persist_values)
        xp = backend.xp
        dtype = np.dtype(dtype if dtype is not None else np.float32)
        if dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{type(self).__name__}: unsupported dtype {dtype}; use a float or integer dtype")
        if ary is None:
            if shape is None:
                raise ValueError(f"{type(self).__name__} needs a shape or an array")
            ary = xp.zeros(shape, dtype)
        elif not isinstance(ary, xp.ndarray):
            ary = xp.array(host(ary) if xp is not np else ary, dtype)
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
        return (f"{type(self).__name__}(name={self.name}, shape={a.shape}, dtype={a.dtype}, "
                f"strides={a.strides}, contiguous={a.flags.c_contiguous})")

    __repr__ = __str__

    def __array__(self, dtype=None, copy=None):
        a = self._tensor
        if not isinstance(a, np.ndarray):
            a = host(a)                      # a host copy of device memory
            copy = False
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

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
        if view._tensor.size and not self.backend.xp.may_share_memory(view._tensor, self._tensor):
            # advanced (array) indexing gives a copy: evaluate, then scatter with numpy.
            view._assign(value)
            self._tensor[key] = view._tensor.reshape(self._tensor[key].shape)
            return
        view._assign(value)

    def _assign(self, value):
        """Write ``value`` (op-tree, tensor, scalar or host array) into this tensor."""
        if isinstance(value, (ArrayTensor, OpTreeNode)):
            self.backend._execute_assign(self, value)
        elif isinstance(value, (int, float, np.number, np.bool_, np.ndarray, list, self.backend.xp.ndarray)):
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
            store(self._tensor, value)
        elif isinstance(value, self.backend.xp.ndarray):
            store(self._tensor, value if value.shape == self._tensor.shape or value.size != self._tensor.size
                  else value.reshape(self._tensor.shape))
        else:
            store(self._tensor, value)
        return self

    def get(self):
        """A host (numpy) copy of the data."""
        a = self._tensor
        return a.copy() if isinstance(a, np.ndarray) else host(a)

    def raw(self):
        """The address of the data buffer (a device address for device arrays)."""
        a = self._tensor
        return a.ctypes.data if isinstance(a, np.ndarray) else a.data.ptr

    def asnumpyarray(self):
        """The ndarray itself (no copy); prefer ``get()``."""
        return self._tensor

    def take(self, indices, axis=None):
        """A new tensor of the entries at ``indices`` along ``axis`` (None: of the flattened data)."""
        xp = self.backend.xp
        idx = data(indices)
        idx = xp.asarray(idx).squeeze() if isinstance(idx, xp.ndarray) else xp.asarray(host(idx))
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
            vals = np.rint(np.log2(np.abs(host(self._tensor).astype(np.float32))))
        counts, _ = np.histogram(vals, bins=bins)
        return be._hist_tensor(tag)._assign(counts)

# ---------------------------------------------------------------------------------------------
# The reference evaluator


def compute_dtype(dtype):
    dtype = np.dtype(dtype)
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def store(dst, value):
    """``dst[...] = value`` with neon's clipping of integer outputs (dst: a numpy or cupy array;
    a host value is copied to dst's device)."""
    xp = array_module(dst)
    if xp is not np and isinstance(value, np.ndarray):
        value = xp.asarray(value)
    if dst.dtype.kind in "iu":
        value = xp.asarray(value)
        if value.dtype.kind == "f":
            info = np.iinfo(dst.dtype)
            value = xp.clip(xp.rint(value), info.min, info.max)
        elif value.dtype.kind in "iu" and value.dtype != dst.dtype:
            info = np.iinfo(dst.dtype)
            value = xp.clip(value, info.min, info.max)
    xp.copyto(dst, value, casting="unsafe")


def sign_pow2(b, xp=np):
    """sgn(b) * 2**rint(log2 |b|) with neon's safelog floor."""
    mag = xp.log(xp.maximum(xp.abs(b), np.exp(-50.0))) / np.log(2.0)
    return xp.sign(b) * xp.exp2(xp.rint(mag))


# Each op as a function of the array module (numpy or cupy) and the operands.
_UNARY = {
    "neg": lambda xp, x: xp.negative(x),
    "abs": lambda xp, x: xp.abs(x),
    "sgn": lambda xp, x: xp.sign(x),
    "sqrt": lambda xp, x: xp.sqrt(x),
    "sqr": lambda xp, x: xp.square(x),
    "exp": lambda xp, x: xp.exp(x),
    "log": lambda xp, x: xp.log(x),
    "safelog": lambda xp, x: xp.log(xp.maximum(x, np.exp(-50.0))),
    "exp2": lambda xp, x: xp.exp2(x),
    "log2": lambda xp, x: xp.log2(x),
    "sig": lambda xp, x: 1.0 / (1.0 + xp.exp(-x)),
    "sig2": lambda xp, x: 1.0 / (1.0 + xp.exp2(-x)),
    "tanh": lambda xp, x: xp.tanh(x),
    "tanh2": lambda xp, x: xp.tanh(x * np.log(2.0)),
    "transpose": lambda xp, x: xp.transpose(x),
    "rint": lambda xp, x: xp.rint(x),
    "finite": lambda xp, x: xp.isfinite(x),
}

_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide", "eq": "equal",
    "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
    "pow": "power", "minimum": "minimum", "maximum": "maximum",
}

_REDUCE = {"sum": "sum", "max": "max", "min": "min"}


class ArrayEvaluator:
    """Evaluates an op-tree bottom-up with an array module (numpy on the CPU, cupy on the GPU);
    one instance per assignment. The reference for every op of :class:`OpCollection`.

    Random draws (``rand``, stochastic ``binarize``) come from the host RNG ``rng`` (a numpy
    RandomState) and are copied to the device when ``xp`` is not numpy.
    """

    __slots__ = ("ctype", "out_shape", "rng", "xp", "backend_name")

    def __init__(self, ctype, out_shape, rng, xp=np, backend_name="CPU"):
        self.ctype = ctype
        self.out_shape = out_shape
        self.rng = rng
        self.xp = xp
        self.backend_name = backend_name

    def leaf(self, x):
        xp = self.xp
        if isinstance(x, ArrayTensor) and isinstance(x._tensor, xp.ndarray):
            x = x._tensor
        elif isinstance(x, np.ndarray) and xp is not np:
            x = xp.asarray(x)
        if isinstance(x, xp.ndarray):
            a = x
            if a.dtype != self.ctype and (a.dtype.kind != "f" or a.dtype.itemsize < self.ctype.itemsize):
                a = a.astype(self.ctype)
            return a
        if isinstance(x, Tensor):
            raise TypeError(f"the {self.backend_name} backend cannot evaluate {describe_operand(x)}")
        if isinstance(x, np.generic):
            return x.item()
        return x

    def __call__(self, node):
        if not isinstance(node, OpTreeNode):
            return self.leaf(node)
        d = node[0]
        op = d["op"]
        if op in _BINARY:
            r = getattr(self.xp, _BINARY[op])(self(node[1]), self(node[2]))
            if isinstance(r, self.xp.ndarray) and r.dtype == np.bool_:
                r = r.astype(self.ctype)
            elif isinstance(r, (bool, np.bool_)):
                r = float(r)
            return r
        if op in _UNARY:
            x = self(node[1])
            r = _UNARY[op](self.xp, x)
            if op == "finite":
                r = self.xp.asarray(r).astype(self.ctype)
            return r
        if op in _REDUCE:
            x = self.xp.asarray(self(node[1]))
            axis = d.get("axis")
            if axis is None:
                return getattr(self.xp, _REDUCE[op])(x).reshape(1, 1)
            return getattr(self.xp, _REDUCE[op])(x, axis=axis, keepdims=True)
        if op in ("argmax", "argmin"):
            x = self.xp.asarray(self(node[1]))
            fn = self.xp.argmax if op == "argmax" else self.xp.argmin
            axis = d.get("axis")
            if axis is None:
                return self.xp.asarray(fn(x), dtype=self.ctype).reshape(1, 1)
            return fn(x, axis=axis, keepdims=True).astype(self.ctype)
        if op == "dot":
            a, b = self.xp.asarray(self(node[1])), self.xp.asarray(self(node[2]))
            return self.xp.dot(a, b)
        if op == "shift":
            a, b = self(node[1]), self(node[2])
            ap2 = sign_pow2(b, self.xp) if d.get("value", True) else self.xp.exp2(b)
            return self.xp.multiply(a, ap2)
        if op == "binarize":
            x = self.xp.asarray(self(node[1]), dtype=self.ctype)
            if d.get("stochastic", True):
                p = self.xp.clip((x + 1.0) * 0.5, 0.0, 1.0)
                u = self._draw(x.shape)
                return self.xp.where(u <= p, 1.0, -1.0).astype(self.ctype)
            return self.xp.where(x >= 0, 1.0, -1.0).astype(self.ctype)
        if op == "rand":
            return self._draw(self.out_shape).astype(self.ctype)
        if op == "onehot":
            idx = self.xp.asarray(data(d["idx"])).reshape(-1)
            axis = d["axis"]
            if axis == 0:
                classes = self.xp.arange(self.out_shape[0]).reshape(-1, 1)
                return (classes == idx.reshape(1, -1)).astype(self.ctype)
            classes = self.xp.arange(self.out_shape[1]).reshape(1, -1)
            return (idx.reshape(-1, 1) == classes).astype(self.ctype)
        if op == "assign":
            raise ValueError("an 'assign' node can only be the root of an op-tree")
        raise NotImplementedError(f"the numpy evaluator has no rule for op '{op}'")

    def _draw(self, shape):
        u = self.rng.uniform(size=tuple(shape))
        return u if self.xp is np else self.xp.asarray(u)


def evaluate(tree, out_shape, dtype, rng, xp=np, backend_name="CPU"):
    """Evaluate ``tree`` with ``xp`` for an output of ``out_shape``/``dtype``; returns an array."""
    return ArrayEvaluator(compute_dtype(dtype), tuple(out_shape), rng, xp, backend_name)(tree)


_SPLIT_OPS = frozenset({"dot", "onehot"})


def to_arrays(node, ev=None, tensor_cls=None):
    """The op-tree with every ``tensor_cls`` leaf (and onehot's index tensor) replaced by its array.

    With an evaluator ``ev``, ``dot`` and ``onehot`` subtrees (which the fused executors do not
    take) are computed first (dot by BLAS or cuBLAS) and enter the tree as array leaves, as neon
    split its trees at ``dot``.
    """
    if tensor_cls is None:
        tensor_cls = ArrayTensor
    d, left, right = node
    if ev is not None and d["op"] in _SPLIT_OPS:
        return ev.xp.asarray(ev(node))
    if "idx" in d and isinstance(d["idx"], tensor_cls):
        d = dict(d)
        d["idx"] = d["idx"]._tensor
    tl, tr = type(left), type(right)
    if tl is OpTreeNode:
        left = to_arrays(left, ev, tensor_cls)
    elif tl is tensor_cls or isinstance(left, tensor_cls):
        left = left._tensor
    if tr is OpTreeNode:
        right = to_arrays(right, ev, tensor_cls)
    elif tr is tensor_cls or isinstance(right, tensor_cls):
        right = right._tensor
    return tuple.__new__(OpTreeNode, (d, left, right))


# ---------------------------------------------------------------------------------------------
# The backend methods that only need the array module


def default_float_dtype(default_dtype, device):
    """``default_dtype`` as a numpy float type (float16, float32 or float64), else a ValueError
    naming the backend's ``device``."""
    try:
        dt = np.dtype(default_dtype)
    except TypeError:
        dt = None
    # (dt is None first: numpy compares None equal to float64's dtype.)
    if dt is None or dt not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(
            f"the {device} backend's default dtype must be float16, float32 or float64, got {default_dtype!r}"
        )
    return dt.type


class ArrayBackend(Backend):
    """A backend over an array module: subclasses set ``xp``, ``tensor_cls``, ``backend_name``
    and ``_assign_from``, and implement ``_execute_fused`` and the
    device-specific kernels."""

    xp = np
    backend_name = "array"
    # The tensor classes whose data an assignment copies straight in.
    _assign_from: tuple = ()

    def _dot_into(self, dst, node):
        """``dst = a . b`` by the array module's BLAS (numpy's, cuBLAS) straight into ``dst`` when
        ``node`` is a dot of two tensors of this backend in ``dst``'s float dtype and ``dst`` is
        contiguous and separate from them; False otherwise (the evaluator takes it)."""
        a, b = node[1], node[2]
        if not (isinstance(a, self.tensor_cls) and isinstance(b, self.tensor_cls)):
            return False
        a, b = a._tensor, b._tensor
        xp = self.xp
        if not (dst.dtype == a.dtype == b.dtype and dst.dtype.char in "fd" and dst.flags.c_contiguous
                and a.ndim == b.ndim == 2):
            return False
        if xp.may_share_memory(dst, a) or xp.may_share_memory(dst, b):
            return False
        xp.dot(a, b, out=dst)
        return True

    def _execute_fused(self, tree, dst):  # pragma: no cover - per backend
        """Run an op-tree of arrays as one generated kernel into ``dst``; False where it cannot."""
        return False

    def _execute_assign(self, out, value):
        """``out[...] = value`` for an op-tree, a tensor or a scalar; returns ``out``.

        An op-tree goes, in order: a root ``dot`` straight into ``out`` (BLAS), else the fused
        executor of the backend, else the reference evaluator.
        """
        dst = out._tensor
        if isinstance(value, OpTreeNode):
            if value[0]["shape"] != dst.shape:
                self._check_assign_shape(out, value)
            if value[0]["op"] == "dot" and self._dot_into(dst, value):
                return out
            ev = ArrayEvaluator(compute_dtype(dst.dtype), dst.shape, self.rng, self.xp,
                                self.backend_name.upper())
            tree = to_arrays(value, ev, self.tensor_cls)
            if type(tree) is OpTreeNode and self._execute_fused(tree, dst):
                return out
            result = ev(tree)
        elif isinstance(value, self._assign_from):
            self._check_assign_shape(out, value)
            result = value._tensor
        else:
            result = value
        store(dst, result)
        return out

    def _device_array(self, ary, dtype):
        """A new ``xp`` array with the values of ``ary`` (a tensor, host or device array, list)."""
        a = data(ary)
        if self.xp is not np and not isinstance(a, self.xp.ndarray):
            a = host(a) if not isinstance(a, (list, tuple)) else np.asarray(a)
        return self.xp.array(a, dtype)

    # -- RNG (gen_rng, rng_get_state/set_state/reset: Backend's, on the host RNG) -----------
    def fill_normal(self, ary, mean=0, stdv=1):
        """Fill ``ary`` with normal draws from ``be.rng`` (neon drew from numpy's global RNG)."""
        ary[:] = self.rng.standard_normal(tuple(ary.shape)) * stdv + mean

    def make_binary_mask(self, out, keepthresh=0.5):
        """``out`` = 1 where a uniform draw from ``be.rng`` is below ``keepthresh``, else 0."""
        mask = self.rng.uniform(size=tuple(out._tensor.shape)) < keepthresh
        store(out._tensor, mask)

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
        return self.tensor_cls(self, ary=self.xp.zeros(self._shape(shape), dtype), dtype=dtype, name=name,
                               persist_values=persist_values)

    def array(self, ary, dtype=None, name=None, persist_values=True, parallel=False,
              distributed=False):
        dtype = self._dtype(dtype)
        return self.tensor_cls(self, ary=self._device_array(ary, dtype), dtype=dtype, name=name,
                               persist_values=persist_values)

    def zeros(self, shape, dtype=None, name=None, persist_values=True, parallel=False,
              distributed=False):
        dtype = self._dtype(dtype)
        return self.tensor_cls(self, ary=self.xp.zeros(self._shape(shape), dtype), dtype=dtype, name=name,
                               persist_values=persist_values)

    def ones(self, shape, dtype=None, name=None, persist_values=True, parallel=False,
             distributed=False):
        dtype = self._dtype(dtype)
        return self.tensor_cls(self, ary=self.xp.ones(self._shape(shape), dtype), dtype=dtype, name=name,
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

    def execute(self, node=None, numpy_call_dict=None, *, optree=None):
        """Run an ``assign`` node: offer it to the fused executor, else evaluate it with the
        reference evaluator (``_execute_assign``). The tree is ``node`` as on the spec page, or
        ``optree`` as neon 2.6's CPU backend names it."""
        if (node is None) == (optree is None):
            raise TypeError("execute() takes one op-tree: execute(node) (or execute(optree=...))")
        optree = node if optree is None else optree
        if not isinstance(optree, OpTreeNode) or optree[0]["op"] != "assign":
            what = optree[0]["op"] if isinstance(optree, OpTreeNode) else type(optree).__name__
            raise ValueError(
                f"execute() takes an 'assign' op-tree, got '{what}'; assign the tree to a tensor "
                f"(out[:] = tree) or pass out="
            )
        out, value = optree[1], optree[2]
        if not isinstance(out, self.tensor_cls):
            raise TypeError(f"the {self.backend_name.upper()} backend cannot assign into {describe_operand(out)}")
        return self._execute_assign(out, value)

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

    def copy_transpose(self, a, out, axes=None, repeat=1):
        """``out = numpy.transpose(a, axes)`` (a dimshuffle into ``out``'s memory)."""
        src = self.xp.transpose(data(a), axes)
        if src.size != out.size:
            raise ValueError(
                f"copy_transpose: {describe_operand(a)} transposed by {axes} has {src.size} elements, "
                f"but out is {describe_operand(out)}"
            )
        store(out._tensor, src.reshape(out._tensor.shape) if src.shape != out._tensor.shape else src)
        return out

    # -- matrix products ----------------------------------------------------------------------
    @staticmethod
    def _matmul_operand(x):
        a = x._tensor
        return a.astype(np.float32) if a.dtype == np.float16 or a.dtype.kind in "iu" else a

    def compound_dot(self, A, B, C, alpha=1.0, beta=0.0, relu=False, bsum=None):
        """``C = relu?(alpha * A . B) + beta * C`` with BLAS (cuBLAS on the GPU); pass ``A.T``/``B.T`` views to transpose.

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
        xp = self.xp
        a, b, c = self._matmul_operand(A), self._matmul_operand(B), C._tensor
        direct = (beta == 0 and alpha == 1.0 and c.flags.c_contiguous and c.dtype == np.result_type(a.dtype, b.dtype)
                  and not xp.may_share_memory(c, a) and not xp.may_share_memory(c, b))
        if direct:
            xp.dot(a, b, out=c)
            if relu:
                xp.maximum(c, 0, out=c)
        else:
            prod = xp.dot(a, b)
            if alpha != 1.0:
                prod *= alpha
            if relu:
                xp.maximum(prod, 0, out=prod)
            if beta != 0:
                prod += beta * c.astype(prod.dtype, copy=False)
            store(c, prod)
        if bsum is not None:
            self.sum(C, axis=1, out=bsum)
        return C

    def batched_dot(self, A, B, C, alpha=1.0, beta=0.0, relu=False):
        """Three batched products (X batches on axis 0):

        fprop ``A (K, C), B (X, C, N) -> C (X, K, N)``; bprop ``batched_dot(A.T, B, C)``;
        update ``A (X, K, N), B.T (X, N, C) -> C (K, C)`` summed over the batches.
        """
        xp = self.xp
        a, b, c = self._matmul_operand(A), self._matmul_operand(B), C._tensor
        if a.ndim == 2 and b.ndim == 3 and c.ndim == 3:
            ok = a.shape[1] == b.shape[1] and c.shape == (b.shape[0], a.shape[0], b.shape[2])
            prod = xp.matmul(a, b) if ok else None
        elif a.ndim == 3 and b.ndim == 3 and c.ndim == 2:
            ok = a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1] and c.shape == (a.shape[1], b.shape[2])
            prod = xp.matmul(a, b).sum(axis=0) if ok else None
        elif a.ndim == 3 and b.ndim == 3 and c.ndim == 3:
            ok = a.shape[0] == b.shape[0] == c.shape[0] and a.shape[2] == b.shape[1] and \
                c.shape[1:] == (a.shape[1], b.shape[2])
            prod = xp.matmul(a, b) if ok else None
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
            prod = xp.maximum(prod, 0)
        if beta != 0:
            prod = prod + beta * c
        store(c, prod)
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
        xp = self.xp
        a = xp.where(self._matmul_operand(A) >= 0, 1.0, -1.0).astype(np.float32)
        b = xp.where(self._matmul_operand(B) >= 0, 1.0, -1.0).astype(np.float32)
        prod = xp.dot(a, b)
        if beta != 0:
            prod += beta * C._tensor
        store(C._tensor, prod)
        if bsum is not None:
            self.sum(C, axis=1, out=bsum)
        return C


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

    # -- neon layer-level helpers (what neon 2.x layers call on a backend) --------------
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
        """Nothing to wait for on the CPU (the GPU backend overrides it)."""

    def get_time(self, start, end):
        """Milliseconds between two recorded marks."""
        return (end["time"] - start["time"]) * 1000.0
