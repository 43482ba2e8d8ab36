"""neon's ``neon.backends.autodiff``: reverse-mode gradients of op-trees, as op-trees.

``Autodiff(op_tree, be, next_error=None)`` walks the forward tree once from the root and builds,
for every tensor leaf, an op-tree of d(sum(next_error * op_tree)) / d(tensor). Nothing is computed
while building: the gradient trees are evaluated when assigned (``get_grad_tensor``,
``back_prop_grad``), like any other op-tree.

Covered: every elementwise op (unary and binary, with broadcasting), ``dot``, ``transpose`` and
the reductions ``sum``/``max``/``min`` over axis 0, 1 or all. Comparisons, ``sgn``, ``rint``,
``finite``, ``binarize``, ``argmax``/``argmin`` and the exponent of ``shift`` have zero gradient.
``maximum``/``minimum`` send a tie's gradient to the left operand only (so the total is not
doubled); ``max``/``min`` reductions send it to every tied entry, as neon does.
"""
import math

import numpy as np

from .backend import OpTreeNode, Tensor, _is_scalar

_LN2 = math.log(2.0)
_SAFELOG_FLOOR = math.exp(-50.0)


def _shape(x):
    if isinstance(x, (Tensor, OpTreeNode)):
        s = tuple(x.shape)
        return s + (1,) * (2 - len(s)) if len(s) < 2 else s
    return (1, 1)


def _is_transpose_of(view, tensor):
    v, t = getattr(view, "_tensor", None), getattr(tensor, "_tensor", None)
    if v is None or t is None or v.ndim != 2 or t.ndim != 2:
        return False
    return (v.shape == t.shape[::-1] and v.strides == t.strides[::-1]
            and v.ctypes.data == t.ctypes.data)


class Autodiff:
    """Gradients of ``op_tree`` (weighted by ``next_error``, default all ones) w.r.t. its tensors."""

    def __init__(self, op_tree, be, next_error=None):
        if not (isinstance(op_tree, (Tensor, OpTreeNode)) or _is_scalar(op_tree)):
            raise TypeError(
                f"Autodiff needs an op-tree, a tensor or a scalar, got {type(op_tree).__name__}"
            )
        if be is None:
            raise ValueError("Autodiff needs the backend (be)")
        self.op_tree = op_tree
        self.be = be
        self.dtype = be.default_dtype
        self.next_error = next_error if next_error is not None else be.ones(_shape(op_tree))
        self.map_tensor_grad_op_tree = {}
        if isinstance(op_tree, (Tensor, OpTreeNode)):
            self._backprop(op_tree, self.next_error)

    # -- building -----------------------------------------------------------------------------
    def _expand(self, dz, shape):
        """``dz`` broadcast up to ``shape`` as an op-tree (needed before dot and transpose)."""
        if _shape(dz) == tuple(shape):
            return dz
        return dz * self.be.ones(shape)

    def _unbroadcast(self, grad, x):
        """Sum ``grad`` over the axes along which operand ``x`` was broadcast."""
        g, s = _shape(grad), _shape(x)
        if g == s:
            return grad
        if len(g) != len(s):
            if int(np.prod(s)) == 1:
                return self.be.sum(grad)
            raise NotImplementedError(
                f"autodiff: cannot reduce a gradient of shape {g} to an operand of shape {s}"
            )
        axes = [i for i, (gi, si) in enumerate(zip(g, s)) if si == 1 and gi != 1]
        if len(axes) == len(g) or (len(axes) == 2 and len(g) == 2):
            return self.be.sum(grad)
        for axis in axes:
            grad = self.be.sum(grad, axis=axis)
        return grad

    def _accumulate(self, tensor, grad):
        prev = self.map_tensor_grad_op_tree.get(tensor)
        self.map_tensor_grad_op_tree[tensor] = grad if prev is None else prev + grad

    def _backprop(self, node, dz):
        if isinstance(node, Tensor):
            self._accumulate(node, dz)
            return
        if not isinstance(node, OpTreeNode):
            return  # a scalar
        op = node[0]["op"]
        rule = _RULES.get(op)
        if rule is None:
            raise NotImplementedError(f"autodiff: no gradient rule for op '{op}'")
        x, y = node[1], node[2]
        dx, dy = rule(self, x, y, node, dz)
        for operand, inc in ((x, dx), (y, dy)):
            if inc is None or not isinstance(operand, (Tensor, OpTreeNode)):
                continue
            self._backprop(operand, self._unbroadcast(inc, operand))

    # -- results ------------------------------------------------------------------------------
    def _grad_or_zero(self, tensor):
        """The gradient of ``tensor``, including what reached its transposed views (``t.T``)."""
        grad = self.map_tensor_grad_op_tree.get(tensor)
        for view, vgrad in self.map_tensor_grad_op_tree.items():
            if view is tensor or getattr(view, "base", None) is not tensor:
                continue
            if not _is_transpose_of(view, tensor):
                raise NotImplementedError(
                    f"autodiff: the op-tree uses a slice or reshape of the tensor (shape "
                    f"{tuple(view.shape)} of {tuple(tensor.shape)}); gradients flow back through "
                    f"transposed views (.T) only. Copy the slice into its own tensor first."
                )
            part = self._expand(vgrad, _shape(view)).T
            grad = part if grad is None else grad + part
        return grad if grad is not None else self.be.zeros(tensor.shape)

    def get_grad_op_tree(self, tensors):
        """The gradient op-trees (not computed) for ``tensors``; zeros for unused ones."""
        return [self._grad_or_zero(t) for t in tensors]

    def get_grad_tensor(self, tensors):
        """The gradients of ``tensors``, computed into new tensors of their shapes."""
        out = []
        for t, grad in zip(tensors, self.get_grad_op_tree(tensors)):
            buf = self.be.empty(t.shape, dtype=self.dtype)
            buf[:] = grad
            out.append(buf)
        return out

    def get_grad_asnumpyarray(self, tensors):
        """The gradients of ``tensors`` as host arrays."""
        return [g.get() for g in self.get_grad_tensor(tensors)]

    def back_prop_grad(self, tensors, gradients):
        """Write the gradient of each of ``tensors`` into the matching tensor of ``gradients``.

        A gradient buffer may be ``next_error`` itself (it is written last); it may not be one of
        the tensors the gradients depend on.
        """
        if len(tensors) != len(gradients):
            raise ValueError(
                f"back_prop_grad: {len(tensors)} tensors but {len(gradients)} gradient buffers"
            )
        for buf in gradients:
            if buf in self.map_tensor_grad_op_tree:
                raise ValueError(
                    "back_prop_grad: a gradient buffer is also an input of the op-tree; writing it "
                    "would change the other gradients. Use a separate buffer."
                )
        last = None
        for tensor, buf in zip(tensors, gradients):
            if buf is self.next_error:
                last = tensor
                continue
            buf[:] = self._grad_or_zero(tensor)
        if last is not None:
            self.next_error[:] = self._grad_or_zero(last)

    def cleanup(self):
        """Drop the gradient trees and references to the forward tree."""
        self.map_tensor_grad_op_tree = {}
        self.op_tree = None
        self.next_error = None


# -- gradient rules: (ad, x, y, z, dz) -> (dx, dy) ------------------------------------------------


def _zero_unary(ad, x, y, z, dz):
    return None, None


def _add(ad, x, y, z, dz):
    return dz, dz


def _sub(ad, x, y, z, dz):
    return dz, -dz


def _mul(ad, x, y, z, dz):
    return dz * y, dz * x


def _div(ad, x, y, z, dz):
    return dz / y, -dz * x / ad.be.square(y)


def _pow(ad, x, y, z, dz):
    dy = dz * z * ad.be.log(x) if isinstance(y, (Tensor, OpTreeNode)) else None
    return dz * y * x ** (y - 1.0), dy


def _dot(ad, x, y, z, dz):
    dz = ad._expand(dz, _shape(z))
    return ad.be.dot(dz, y.T), ad.be.dot(x.T, dz)


def _transpose(ad, x, y, z, dz):
    return ad._expand(dz, _shape(z)).T, None


def _maximum(ad, x, y, z, dz):
    return dz * (x >= y), dz * (y > x)


def _minimum(ad, x, y, z, dz):
    return dz * (x <= y), dz * (y < x)


def _shift(ad, x, y, z, dz):
    be = ad.be
    if z[0].get("value", True):
        factor = be.sgn(y) * be.exp2(be.rint(be.safelog(be.absolute(y)) / _LN2))
    else:
        factor = be.exp2(y)
    return dz * factor, None


def _extreme(ad, x, y, z, dz):
    return dz * (x == z), None


def _reduce_sum(ad, x, y, z, dz):
    return dz, None  # broadcast lazily back over the reduced axis


_RULES = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "pow": _pow,
    "dot": _dot,
    "transpose": _transpose,
    "maximum": _maximum,
    "minimum": _minimum,
    "shift": _shift,
    "neg": lambda ad, x, y, z, dz: (-dz, None),
    "abs": lambda ad, x, y, z, dz: (dz * ad.be.sgn(x), None),
    "sqrt": lambda ad, x, y, z, dz: (dz * 0.5 / z, None),
    "sqr": lambda ad, x, y, z, dz: (dz * 2.0 * x, None),
    "exp": lambda ad, x, y, z, dz: (dz * z, None),
    "exp2": lambda ad, x, y, z, dz: (dz * z * _LN2, None),
    "log": lambda ad, x, y, z, dz: (dz / x, None),
    "safelog": lambda ad, x, y, z, dz: (
        dz * (x > _SAFELOG_FLOOR) / ad.be.maximum(x, _SAFELOG_FLOOR), None),
    "log2": lambda ad, x, y, z, dz: (dz / (x * _LN2), None),
    "sig": lambda ad, x, y, z, dz: (dz * z * (1.0 - z), None),
    "sig2": lambda ad, x, y, z, dz: (dz * z * (1.0 - z) * _LN2, None),
    "tanh": lambda ad, x, y, z, dz: (dz * (1.0 - ad.be.square(z)), None),
    "tanh2": lambda ad, x, y, z, dz: (dz * (1.0 - ad.be.square(z)) * _LN2, None),
    "sum": _reduce_sum,
    "max": _extreme,
    "min": _extreme,
}
for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    _RULES[_op] = lambda ad, x, y, z, dz: (None, None)
for _op in ("sgn", "rint", "finite", "binarize", "argmax", "argmin"):
    _RULES[_op] = _zero_unary
for _op in ("rand", "onehot"):
    _RULES[_op] = lambda ad, x, y, z, dz: (None, None)
