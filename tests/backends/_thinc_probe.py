"""A differential probe: every public Ops method of Thinc 8.3, on odd-but-plausible inputs.

Each method gets a valid base call, which is then varied one way at a time: other dtypes
(int32, int64, float64, float16), non-contiguous views, Fortran order, 1-d for 2-d (and
back), 3-d, empty arrays, broadcastable rows, lists instead of arrays, Python scalars, other
kinds of scalar parameters, and inplace=True. The oracle is Thinc's NumpyOps (the backend
its users run); where that refuses a call its reference Ops accepts (a compiled fast path that
takes only contiguous float32, say), the reference's answer is the oracle, since plait's one
reference serves both. `probe(backend, method)` returns the cases where plait disagrees.

Run `python tests/backends/_thinc_probe.py [method ...]` for a report of every case.
"""
from __future__ import annotations

import fnmatch
import itertools
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy

# --- inputs -----------------------------------------------------------------------------------


def _f(*shape: int, dtype: str = "float32", lo: float = -3.0, hi: float = 3.0, seed: int = 0) -> numpy.ndarray:
    """Deterministic values spread over [lo, hi], none exactly 0 or at a kink."""
    n = int(numpy.prod(shape)) if shape else 1
    rng = numpy.random.default_rng(seed)
    vals = rng.uniform(lo, hi, size=n)
    vals = numpy.where(numpy.abs(vals) < 0.05, 0.37, vals)
    return vals.reshape(shape).astype(dtype)


def _i(values: Any, dtype: str = "int32") -> numpy.ndarray:
    return numpy.asarray(values, dtype=dtype)


@dataclass
class F:
    """A float array argument: every variant applies."""

    value: numpy.ndarray
    row: bool = True  # whether taking the first row (broadcasting) makes sense


@dataclass
class I:
    """An integer index argument (lengths, which, indices): index-kind variants only."""

    value: numpy.ndarray


@dataclass
class P:
    """A float scalar parameter: int / numpy-scalar variants."""

    value: float


@dataclass
class Per:
    """An argument built per backend (for example a forward state), never varied."""

    make: Callable[[Any], Any]


@dataclass
class Spec:
    method: str
    args: List[Tuple[str, Any]]
    kwargs: Dict[str, Any] = field(default_factory=dict)
    inplace: Optional[str] = None  # how inplace is passed: "kw" when the method takes one
    values: bool = True  # compare values (False: random or uninitialised results)
    extra: List[Tuple[str, List[Tuple[str, Any]], Dict[str, Any]]] = field(default_factory=list)
    vary: bool = True


def S(method: str, *args: Tuple[str, Any], inplace: bool = False, values: bool = True,
      extra: Optional[list] = None, vary: bool = True, **kwargs: Any) -> Spec:
    """A method's base call: (name, value) pairs for its positional arguments, its keywords;
    `extra` adds hand-written cases, vary=False leaves the base call unvaried."""
    return Spec(method, list(args), kwargs, "kw" if inplace else None, values, extra or [], vary)


X = _f(4, 3)
dY = _f(4, 3, seed=1)
Y01 = _f(4, 3, lo=0.05, hi=0.95, seed=2)  # sigmoid outputs
Ysm = numpy.exp(X) / numpy.exp(X).sum(-1, keepdims=True)
L = _i([1, 3])  # lengths over the 4 rows of X


def _lstm_params(ops: Any, nO: int = 2, nI: int = 3) -> Any:
    n = 4 * nO * nI + 4 * nO + 4 * nO * nO + 4 * nO
    return ops.asarray(_f(n, lo=-0.5, hi=0.5, seed=7))


def _lstm_args(ops: Any) -> Tuple[Any, ...]:
    H0 = ops.asarray(_f(1, 1, 2, lo=-0.5, hi=0.5, seed=8))
    C0 = ops.asarray(_f(1, 1, 2, lo=-0.5, hi=0.5, seed=9))
    Xl = ops.asarray(_f(3, 3, seed=10))
    return _lstm_params(ops), H0, C0, Xl, ops.asarray(_i([2, 1]))


def _padded(ops: Any) -> Any:
    return ops.list2padded([ops.asarray(_f(3, 2)), ops.asarray(_f(1, 2, seed=3)), ops.asarray(_f(2, 2, seed=4))])


ACTIVATIONS = [
    "relu", "swish", "gelu", "gelu_approx", "dish", "hard_swish", "hard_swish_mobilenet",
    "hard_sigmoid", "hard_tanh",
]
BACKPROPS_X = [
    "backprop_gelu", "backprop_gelu_approx", "backprop_dish", "backprop_hard_swish",
    "backprop_hard_swish_mobilenet", "backprop_hard_sigmoid", "backprop_hard_tanh",
]

SPECS: List[Spec] = [
    *[S(name, ("X", F(X)), inplace=True) for name in ACTIVATIONS],
    S("sigmoid", ("X", F(X)), inplace=True),
    S("dsigmoid", ("Y", F(Y01)), inplace=True),
    S("dtanh", ("Y", F(Y01)), inplace=True),
    S("relu_k", ("X", F(X * 3)), ("n", P(6.0)), inplace=True),
    S("clipped_linear", ("X", F(X)), ("slope", P(1.5)), ("offset", P(0.25)), ("min_val", P(-1.0)),
      ("max_val", P(2.0)), inplace=True, extra=[
          ("min-above-max", [("X", F(X))], {"min_val": 2.0, "max_val": 1.0}),
          ("slope-negative", [("X", F(X * 0.2))], {"slope": -2.0})]),
    S("mish", ("X", F(X * 8)), ("threshold", P(20.0)), inplace=True),
    S("erf", ("X", F(X))),
    S("sechsq", ("X", F(X))),
    S("softmax", ("x", F(X)), inplace=True, temperature=P(1.0),
      extra=[("axis0", [("x", F(X))], {"axis": 0}), ("T2", [("x", F(X))], {"temperature": 2.0}),
             ("T-negative", [("x", F(X))], {"temperature": -0.5}), ("T0", [("x", F(X))], {"temperature": 0.0}),
             ("3d-axis1", [("x", F(_f(2, 3, 4)))], {"axis": 1})]),
    S("backprop_relu", ("dY", F(dY)), ("Y", F(numpy.maximum(X, 0))), inplace=True),
    S("backprop_sigmoid", ("dY", F(dY)), ("Y", F(Y01)), inplace=True),
    S("backprop_swish", ("dY", F(dY)), ("X", F(X)), ("Y", F(X / (1 + numpy.exp(-X)))), inplace=True),
    *[S(name, ("dY", F(dY)), ("X", F(X)), inplace=True) for name in BACKPROPS_X],
    S("backprop_relu_k", ("dY", F(dY)), ("X", F(X * 3)), ("n", P(6.0)), inplace=True),
    S("backprop_clipped_linear", ("dY", F(dY)), ("X", F(X)), ("slope", P(1.5)), ("offset", P(0.25)),
      ("min_val", P(-1.0)), ("max_val", P(2.0)), inplace=True, extra=[
          ("min-above-max", [("dY", F(dY)), ("X", F(X))], {"min_val": 2.0, "max_val": 1.0}),
          ("slope-negative", [("dY", F(dY)), ("X", F(X * 0.2))], {"slope": -2.0})]),
    S("backprop_mish", ("dY", F(dY)), ("X", F(X * 8)), ("threshold", P(20.0)), inplace=True),
    S("backprop_softmax", ("Y", F(Ysm)), ("dY", F(dY)), temperature=P(1.0),
      extra=[("axis0", [("Y", F(Ysm)), ("dY", F(dY))], {"axis": 0}),
             ("T2", [("Y", F(Ysm)), ("dY", F(dY))], {"temperature": 2.0})]),
    S("softmax_sequences", ("Xs", F(X)), ("lengths", I(L)), inplace=True,
      extra=[("axis0", [("Xs", F(X)), ("lengths", I(L))], {"axis": 0})]),
    S("backprop_softmax_sequences", ("dY", F(dY)), ("Y", F(Y01)), ("lengths", I(L))),
    S("seq2col", ("seq", F(X)), ("nW", 1), extra=[
        ("lengths", [("seq", F(X)), ("nW", 1)], {"lengths": I(L)}),
        ("nW2", [("seq", F(X)), ("nW", 2)], {}),
        ("nW0", [("seq", F(X)), ("nW", 0)], {})]),
    S("backprop_seq2col", ("dY", F(_f(4, 9))), ("nW", 1), extra=[
        ("lengths", [("dY", F(_f(4, 9))), ("nW", 1)], {"lengths": I(L)})]),
    S("reduce_sum", ("X", F(X)), ("lengths", I(L))),
    S("reduce_mean", ("X", F(X)), ("lengths", I(L))),
    S("reduce_max", ("X", F(X)), ("lengths", I(L))),
    S("reduce_first", ("X", F(X)), ("lengths", I(L))),
    S("reduce_last", ("X", F(X)), ("lengths", I(L))),
    S("backprop_reduce_sum", ("d_sums", F(_f(2, 3))), ("lengths", I(L))),
    S("backprop_reduce_mean", ("d_means", F(_f(2, 3))), ("lengths", I(L))),
    S("backprop_reduce_max", ("d_maxes", F(_f(2, 3))), ("which", I(_i([[0, 0, 0], [2, 1, 0]]))), ("lengths", I(L))),
    S("backprop_reduce_first", ("d_firsts", F(_f(2, 3))), ("starts_ends", I(_i([0, 1, 4])))),
    S("backprop_reduce_last", ("d_lasts", F(_f(2, 3))), ("lasts", I(_i([0, 3])))),
    S("maxout", ("X", F(_f(2, 3, 4)))),
    S("backprop_maxout", ("dY", F(_f(2, 3))), ("which", I(_i([[0, 1, 2], [3, 0, 1]]))), ("P", 4)),
    S("gemm", ("x", F(X)), ("y", F(_f(3, 2, seed=5))), extra=[
        ("trans1", [("x", F(X.T.copy())), ("y", F(_f(3, 2, seed=5)))], {"trans1": True}),
        ("trans2", [("x", F(X)), ("y", F(_f(2, 3, seed=5)))], {"trans2": True}),
        ("out", [("x", F(X)), ("y", F(_f(3, 2, seed=5)))], {"out": F(numpy.zeros((4, 2), "f"))}),
        ("1d-x", [("x", F(X[0].copy())), ("y", F(_f(3, 2, seed=5)))], {}),
        ("1d-y", [("x", F(X)), ("y", F(_f(3, seed=5)))], {})]),
    S("affine", ("X", F(X)), ("W", F(_f(2, 3, seed=5))), ("b", F(_f(2, seed=6)))),
    S("tile", ("X", F(X)), ("reps", 2), extra=[("reps-tuple", [("X", F(X)), ("reps", (2, 1))], {})]),
    S("flatten", ("X", [X, dY[:2]]), extra=[
        ("pad", [("X", [X, dY[:2]])], {"pad": 1}),
        ("dtype", [("X", [X, dY[:2]])], {"dtype": "float64"}),
        ("1d", [("X", [X[0], dY[1]])], {}),
        ("int", [("X", [_i([1, 2]), _i([3])])], {}),
        ("empty-list", [("X", [])], {}),
        ("empty-items", [("X", [X[:0], X[:0]])], {}),
        ("mixed-dtypes", [("X", [X, X.astype("float64")])], {}),
        ("tuple", [("X", (X, dY))], {})], vary=False),
    S("unflatten", ("X", F(X)), ("lengths", I(L)), extra=[("pad", [("X", F(_f(7, 3))), ("lengths", I(L))], {"pad": 1})]),
    S("pad", ("seqs", [X, dY[:2]]), extra=[
        ("round", [("seqs", [X, dY[:2]])], {"round_to": 3}),
        ("1d", [("seqs", [X[0], dY[0, :2]])], {}),
        ("3d", [("seqs", [_f(2, 2, 2), _f(1, 2, 2)])], {}),
        ("int", [("seqs", [_i([[1]]), _i([[2], [3]])])], {}),
        ("tuple", [("seqs", (X, dY))], {})], vary=False),
    S("unpad", ("padded", F(_f(2, 4, 3))), ("lengths", [4, 2]), extra=[
        ("array-lengths", [("padded", F(_f(2, 4, 3))), ("lengths", _i([4, 2]))], {})]),
    S("list2padded", ("seqs", [X, dY[:2]]), extra=[
        ("one", [("seqs", [X])], {}),
        ("empty", [("seqs", [])], {}),
        ("int", [("seqs", [_i([[1]]), _i([[2], [3]])])], {}),
        ("tuple", [("seqs", (X, dY[:2]))], {}),
        ("zero-length", [("seqs", [X, X[:0]])], {})], vary=False),
    S("padded2list", ("padded", Per(_padded))),
    S("insert_into", ("shape", (2, 4, 3)), ("Xs", [X, dY[:2]]), vary=False),
    S("get_dropout_mask", ("shape", (4, 3)), ("drop", P(0.0)), extra=[
        ("drop-half", [("shape", (4, 3)), ("drop", 0.5)], {}),
        ("drop-one", [("shape", (4, 3)), ("drop", 1.0)], {}),
        ("drop-None", [("shape", (4, 3)), ("drop", None)], {}),
        ("int-shape", [("shape", 5), ("drop", 0.5)], {})], vary=False, values=False),
    *[S(name, ("shape", (2, 3)), values=False, vary=False, extra=[
        ("int", [("shape", 3)], {}), ("np-int", [("shape", numpy.int64(3))], {}),
        ("list", [("shape", [2, 3])], {}), ("dtype", [("shape", (2,))], {"dtype": "float64"}),
        ("zeros", [("shape", (2, 3))], {"zeros": True})]) for name in ("alloc", "alloc_f", "alloc_i")],
    *[S(f"alloc{n}{k}", *[(f"d{j}", 2) for j in range(n)], values=False, vary=False, extra=[
        ("np-int", [(f"d{j}", numpy.int64(2)) for j in range(n)], {}),
        ("dtype", [(f"d{j}", 2) for j in range(n)], {"dtype": "float64" if k == "f" else "int64"}),
        ("zeros", [(f"d{j}", 2) for j in range(n)], {"zeros": True})]) for n in (1, 2, 3, 4) for k in "fi"],
    S("reshape", ("array", F(X)), ("shape", (3, 4)), extra=[
        ("int", [("array", F(X)), ("shape", 12)], {}), ("minus1", [("array", F(X)), ("shape", (-1, 2))], {})]),
    S("reshape_f", ("array", F(X)), ("shape", (3, 4))),
    S("reshape_i", ("array", I(_i(numpy.arange(12).reshape(4, 3)))), ("shape", (3, 4))),
    *[S(f"reshape{n}{k}", ("array", F(X) if k != "i" else I(_i(numpy.arange(12).reshape(4, 3)))),
        *[(f"d{j}", d) for j, d in enumerate({1: (12,), 2: (6, 2), 3: (2, 3, 2), 4: (1, 2, 3, 2)}[n])])
      for n in (1, 2, 3, 4) for k in ("", "f", "i")],
    *[S(name, ("data", F(X if "2" in name or name in ("asarray", "asarray_f", "asarray_i") else
                         {"1": X[0], "3": _f(2, 2, 3), "4": _f(1, 2, 2, 3)}[name[7]])))
      for name in ("asarray", "asarray_f", "asarray_i", "asarray1f", "asarray2f", "asarray3f", "asarray4f",
                   "asarray1i", "asarray2i", "asarray3i", "asarray4i")],
    S("asarray", ("data", [1, 2, 3]), vary=False, extra=[
        ("dtype", [("data", [1, 2, 3])], {"dtype": "float32"}),
        ("nested", [("data", [[1.0, 2.0], [3.0, 4.0]])], {}),
        ("scalar", [("data", 3.5)], {}),
        ("tuple", [("data", (1, 2))], {}),
        ("uint64", [("data", [2**63 + 1])], {"dtype": "uint64"})]),
    S("as_contig", ("data", F(X)), extra=[("dtype", [("data", F(X))], {"dtype": "float64"})]),
    S("to_numpy", ("data", F(X)), extra=[("byte-order", [("data", F(X))], {"byte_order": ">"})]),
    S("adam", ("weights", F(_f(5))), ("gradient", F(_f(5, seed=1))), ("mom1", F(_f(5, seed=2))),
      ("mom2", F(_f(5, lo=0.1, hi=1, seed=3))), ("beta1", P(0.9)), ("beta2", P(0.999)), ("eps", P(1e-8)),
      ("learn_rate", P(0.01)), ("mod_rate", P(1.0))),
    S("clip_gradient", ("gradient", F(X)), ("threshold", P(1.0))),
    S("update_averages", ("ema", F(X)), ("weights", F(dY)), ("t", 3), ("max_decay", P(0.9999))),
    S("logloss", ("y_true", F((X > 0).astype("f"))), ("y_pred", F(Y01))),
    S("gather_add", ("table", F(_f(5, 3))), ("indices", I(_i([[0, 4], [2, 2], [1, 3]])))),
    S("scatter_add", ("table", F(_f(5, 3))), ("indices", I(_i([0, 4, 2, 2]))), ("values", F(X))),
    S("hash", ("ids", I(_i([1, 2, 2**40], "uint64"))), ("seed", 7), extra=[
        ("seed0", [("ids", I(_i([1, 2], "uint64"))), ("seed", 0)], {})]),
    S("ngrams", ("n", 2), ("keys", I(_i([1, 2, 3, 4], "uint64"))), extra=[
        ("n1", [("n", 1), ("keys", I(_i([1, 2, 3], "uint64")))], {}),
        ("n0", [("n", 0), ("keys", I(_i([1, 2, 3], "uint64")))], {}),
        ("n-past", [("n", 5), ("keys", I(_i([1, 2, 3], "uint64")))], {})]),
    S("position_encode", ("N", 4), ("D", 6), extra=[
        ("odd", [("N", 3), ("D", 5)], {}),
        ("period", [("N", 3), ("D", 4)], {"period": 100}),
        ("out", [("N", 3), ("D", 4)], {"out": F(numpy.zeros((3, 4), "f"))})]),
    S("minibatch", ("size", 2), ("sequence", F(_f(5, 2))), extra=[
        ("list", [("size", 2), ("sequence", [1, 2, 3, 4, 5])], {}),
        ("sizes", [("size", Per(lambda ops: iter([1, 2, 3]))), ("sequence", [1, 2, 3, 4, 5])], {}),
        ("buffer", [("size", 2), ("sequence", [1, 2, 3, 4, 5])], {"buffer": 2})]),
    S("multibatch", ("size", 2), ("sequence", F(_f(5, 2))), ("other", [1, 2, 3, 4, 5]), extra=[
        ("lists", [("size", 2), ("sequence", [1, 2, 3]), ("other", [4, 5, 6])], {})]),
    S("lstm_forward_training", *[(n, Per(lambda ops, i=i: _lstm_args(ops)[i]))
                                 for i, n in enumerate(("params", "H0", "C0", "X", "size_at_t"))], vary=False),
    S("lstm_forward_inference", *[(n, Per(lambda ops, i=i: _lstm_args(ops)[i]))
                                  for i, n in enumerate(("params", "H0", "C0", "X", "size_at_t"))], vary=False),
    S("backprop_lstm", ("dY", Per(lambda ops: ops.asarray(_f(3, 2, seed=11)))), ("lengths", Per(lambda ops: ops.asarray(_i([2, 1])))),
      ("params", Per(lambda ops: _lstm_args(ops)[0])),
      ("fwd_state", Per(lambda ops: ops.lstm_forward_training(*_lstm_args(ops))[1])), vary=False),
]


# --- variants ---------------------------------------------------------------------------------


def _noncontig(a: numpy.ndarray) -> numpy.ndarray:
    """The same values as a strided view into a larger buffer."""
    if a.ndim == 0:
        return a
    big = numpy.zeros(a.shape[:-1] + (a.shape[-1] * 2,), dtype=a.dtype)
    big[..., ::2] = a
    view = big[..., ::2]
    assert not view.flags.c_contiguous or a.size <= 1
    return view


def _float_variants(a: numpy.ndarray, row: bool) -> Iterator[Tuple[str, Any]]:
    for dt in ("int32", "int64", "float64", "float16"):
        yield dt, a.astype(dt)
    if a.size > 1:
        yield "noncontig", _noncontig(a)
    if a.ndim >= 2:
        yield "fortran", numpy.asfortranarray(a)
        yield "3d", a[None]
    yield "list", a.tolist()
    yield "empty", a[:0]
    if a.ndim == 2:
        yield "1d", a.reshape(-1)
    elif a.ndim == 1:
        yield "2d", a[None, :]
    if row and a.ndim >= 2 and a.shape[0] > 1:
        yield "row", a[:1]
        yield "vec", a[0]
    yield "scalar", float(a.flat[0])


def _int_variants(a: numpy.ndarray) -> Iterator[Tuple[str, Any]]:
    for dt in ("int64", "uint64", "float32") if a.dtype != numpy.uint64 else ("int64", "int32", "float32"):
        yield dt, a.astype(dt)
    if a.size > 1:
        yield "noncontig", _noncontig(a)
    yield "list", a.tolist()
    yield "empty", a[:0]


def _param_variants(v: float) -> Iterator[Tuple[str, Any]]:
    if float(v).is_integer():
        yield "int", int(v)
    yield "np32", numpy.float32(v)
    yield "np64", numpy.float64(v)


Case = Tuple[str, List[Tuple[str, Any]], Dict[str, Any]]


def _unwrap(v: Any) -> Any:
    return v.value if isinstance(v, (F, I, P)) else v


def cases(spec: Spec) -> Iterator[Case]:
    """(case id, positional (name, value) pairs, keyword arguments); F/I/P wrappers removed."""
    base_args = [(n, _unwrap(v)) for n, v in spec.args]
    base_kwargs = {k: _unwrap(v) for k, v in spec.kwargs.items()}
    inplaces = [False, True] if spec.inplace else [False]
    variants: List[Case] = [("base", base_args, base_kwargs)]
    for cid, args, kwargs in spec.extra:
        variants.append((cid, [(n, _unwrap(v)) for n, v in args], {k: _unwrap(v) for k, v in kwargs.items()}))
    if spec.vary:
        slots = [("arg", i, n, v) for i, (n, v) in enumerate(spec.args)]
        slots += [("kw", k, k, v) for k, v in spec.kwargs.items()]
        float_slots = [s for s in slots if isinstance(s[3], F)]
        for kind, key, name, wrapped in slots:
            if isinstance(wrapped, F):
                gen = _float_variants(wrapped.value, wrapped.row)
            elif isinstance(wrapped, I):
                gen = _int_variants(wrapped.value)
            elif isinstance(wrapped, P):
                gen = _param_variants(wrapped.value)
            else:
                continue
            for vid, value in gen:
                args, kwargs = list(base_args), dict(base_kwargs)
                if kind == "arg":
                    args[key] = (name, value)
                else:
                    kwargs[key] = value
                variants.append((f"{name}-{vid}", args, kwargs))
        if len(float_slots) > 1:
            # The same change to every float array at once.
            for vid in ("int32", "float64", "float16", "noncontig", "fortran", "empty", "list"):
                args, kwargs = list(base_args), dict(base_kwargs)
                for kind, key, name, wrapped in float_slots:
                    value = dict(_float_variants(wrapped.value, wrapped.row)).get(vid)
                    if value is None:
                        continue
                    if kind == "arg":
                        args[key] = (name, value)
                    else:
                        kwargs[key] = value
                variants.append((f"all-{vid}", args, kwargs))
    for (cid, args, kwargs), inplace in itertools.product(variants, inplaces):
        if inplace:
            yield f"{cid}-inplace", args, {**kwargs, "inplace": True}
        else:
            yield cid, args, kwargs


# --- where plait differs from Thinc on purpose ---------------------------------------------------

ARRAY_LIKES = (
    "plait converts lists, tuples and scalars wherever it takes arrays of values; Thinc takes them "
    "or not depending on its formula (a list compared with 0, list.T, a Cython ndarray argument)"
)
WEAK_SCALARS = (
    "a Python scalar operand: Thinc's formula turns it into a numpy float64 scalar in some steps "
    "(which widens the result) and not in others; plait treats it as numpy treats Python scalars"
)
NONCONTIG = (
    "Thinc's compiled kernel walks a non-contiguous array's memory as if it were contiguous "
    "(wrong values, or writes outside the view); plait computes on the view"
)
FORTRAN = (
    "Thinc's compiled kernel walks a Fortran-ordered operand in memory order, pairing its values "
    "with the wrong ones of the other operand; plait pairs them by index"
)
TRUNCATES = "Thinc truncates the float results to integers silently; plait raises TypeError"
READS_PAST = "Thinc's compiled kernel reads past the gradient's rows; plait raises IndexError"

# (method pattern, case pattern, statuses allowed, reason): fnmatch patterns.
MARKS: List[Tuple[str, str, Tuple[str, ...], str]] = [
    ("*", "*-list", ("plait-returns",), ARRAY_LIKES),
    ("*", "*-list-inplace", ("plait-returns",), ARRAY_LIKES),
    ("*", "*-scalar", ("plait-returns",), ARRAY_LIKES),
    ("*", "*-scalar-inplace", ("plait-returns",), ARRAY_LIKES),
    ("*", "*-scalar", ("differs-dtype",), WEAK_SCALARS),
    ("*", "*-scalar-inplace", ("differs-dtype",), WEAK_SCALARS),
    ("backprop_sigmoid", "Y-scalar-inplace", ("differs",),
     "Thinc's in-place dsigmoid cannot update a Python float, so its result lacks the Y * (1 - Y) factor"),
    ("relu", "X-noncontig-inplace", ("differs",), NONCONTIG),
    ("mish", "X-noncontig-inplace", ("differs",), NONCONTIG),
    ("backprop_relu", "*noncontig*", ("differs",), NONCONTIG),
    ("backprop_mish", "*noncontig*", ("differs",), NONCONTIG),
    ("backprop_relu", "*-fortran*", ("differs",), FORTRAN),
    ("backprop_mish", "*-fortran*", ("differs",), FORTRAN),
    ("adam", "*-noncontig", ("differs",), NONCONTIG),
    ("erf", "X-int*", ("plait-raises",), TRUNCATES + " (erf(X).astype(X.dtype))"),
    ("gelu_approx", "X-int*", ("plait-raises",), TRUNCATES + " (the gate is cast to X's dtype)"),
    ("mish", "X-int*-inplace", ("plait-raises",), TRUNCATES + " (X[:] = Y)"),
    ("backprop_mish", "dY-int*", ("plait-raises",), TRUNCATES + " (the gradient goes into a copy of dY)"),
    ("backprop_mish", "all-int32*", ("plait-raises",), TRUNCATES + " (the gradient goes into a copy of dY)"),
    ("backprop_clipped_linear", "*-int*", ("plait-raises",), TRUNCATES + " (the slope 1.5 becomes 1 for integer X)"),
    ("backprop_hard_sigmoid", "*-int*", ("plait-raises",), TRUNCATES + " (the slope 0.2 becomes 0 for integer X)"),
    ("backprop_reduce_mean", "d_means-int*", ("plait-raises",), TRUNCATES + " (d_means / length into an integer array)"),
    ("scatter_add", "table-int*", ("plait-raises",), TRUNCATES + " (numpy's add.at casts unsafely)"),
    ("backprop_reduce_*", "*-row", ("plait-raises",), READS_PAST),
    ("backprop_mish", "*float16*", ("differs",),
     "Thinc's formula overflows in float16 (exp(3 X), NaN); plait computes in dY's precision"),
    ("clipped_linear", "*-np64", ("differs-dtype",),
     "a numpy float64 parameter widens Thinc's float32 result under numpy 2 only (numpy 1 keeps "
     "float32); plait keeps X's dtype for any scalar parameter"),
    ("relu_k", "n-np64", ("differs-dtype",), "as clipped_linear: a numpy float64 parameter keeps X's dtype"),
    ("backprop_hard_sigmoid", "*-inplace", ("mutates",),
     "Thinc's backprop_hard_sigmoid ignores inplace=True; plait writes into dY where the result "
     "is the same (dY of the result's shape and dtype)"),
    ("backprop_hard_tanh", "*-inplace", ("mutates",),
     "Thinc's backprop_hard_tanh ignores inplace=True; plait writes into dY where the result "
     "is the same (dY of the result's shape and dtype)"),
    ("backprop_clipped_linear", "slope-negative*", ("differs",),
     "Thinc compares X with (min_val - offset) / slope and (max_val - offset) / slope, bounds that "
     "swap for a negative slope, so its gradient is 0 everywhere; plait returns the derivative"),
    ("softmax", "T0*", ("plait-raises",), "a temperature of 0: Thinc returns NaN (x / 0); plait raises ValueError"),
    ("softmax", "*-inplace", ("mutates",),
     "Thinc's softmax ignores inplace=True; plait writes into x as asked (the results agree)"),
    ("softmax_sequences", "*-inplace", ("mutates",),
     "Thinc's softmax_sequences ignores inplace=True; plait writes into Xs as asked (the results agree)"),
    ("dish", "X-int*", ("plait-returns",),
     "Thinc fails on integers in an intermediate step (square(X) += 1.0); plait computes in float64"),
    ("backprop_softmax_sequences", "all-int32", ("plait-returns",),
     "Thinc's compiled reduce_sum refuses the integer product Y * dY; plait computes in float64"),
    ("maxout", "X-*", ("differs-dtype",),
     "'which' is int32, as Thinc's NumpyOps returns it; Thinc's reference (the only Thinc answer for "
     "float16, integer, non-contiguous or 2-d X) returns numpy's int64 argmax"),
    ("adam", "*-float*", ("differs",),
     "plait zeroes the gradient, as Thinc's compiled adam does; Thinc's reference, the only Thinc "
     "answer for other dtypes than float32, leaves it"),
    ("adam", "gradient-int*", ("differs",), "plait zeroes the gradient, as Thinc's compiled adam does"),
    ("hash", "ids-*", ("differs-dtype",),
     "Thinc's reference casts the keys through asarray2i (int32); plait gives uint32 as Thinc's NumpyOps"),
    ("ngrams", "keys-*", ("differs-dtype",),
     "Thinc's reference casts the n-grams through asarray1i (int32); plait gives uint64 as Thinc's NumpyOps"),
    ("hash", "ids-float32", ("plait-raises",), "float keys: Thinc's reference truncates them to uint64"),
    ("ngrams", "keys-float32", ("plait-raises",), "float keys: Thinc's reference truncates them to uint64"),
    ("hash", "ids-noncontig", ("plait-returns",), "Thinc refuses non-contiguous keys (a memoryview limit)"),
    ("ngrams", "keys-empty", ("plait-returns",), "Thinc's compiled ngrams reads keys[0] of no keys (IndexError)"),
    ("ngrams", "keys-noncontig", ("plait-returns",), "Thinc refuses non-contiguous keys (a memoryview limit)"),
    ("multibatch", "sequence-*", ("plait-raises",),
     "sequences of different lengths: Thinc silently pairs the first items and drops the rest"),
    ("update_averages", "ema-*", ("plait-raises",),
     "an ema that is not an array cannot be updated in place: Thinc silently does nothing"),
    ("reduce_first", "lengths-float32", ("plait-raises",),
     "float lengths: only Thinc's reduce_first takes them (truncating); its other ops refuse them"),
    ("lstm_forward_training", "base", ("differs", "differs-dtype"),
     "the forward state is plait's own (backprop_lstm takes it); the output Y agrees"),
    ("backprop_lstm", "base", ("differs",),
     "Thinc's backprop_lstm gets the rows of the first steps wrong; plait's gradient passes a "
     "finite-difference check (tests/backends/test_lstm.py)"),
]


def mark_for(method: str, case: str, status: str) -> Optional[str]:
    """The reason this outcome is expected, or None."""
    for m, c, statuses, reason in MARKS:
        if status in statuses and fnmatch.fnmatchcase(method, m) and fnmatch.fnmatchcase(case, c):
            return reason
    return None


# --- running and comparing --------------------------------------------------------------------


def _copy(v: Any) -> Any:
    if isinstance(v, numpy.ndarray):
        if v.flags.c_contiguous or v.ndim == 0:
            return v.copy()
        if v.flags.f_contiguous:
            return numpy.asfortranarray(v)
        return _noncontig(v.copy())
    if isinstance(v, list):
        return [_copy(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_copy(x) for x in v)
    return v


def _materialise(ops: Any, args: List[Tuple[str, Any]], kwargs: Dict[str, Any]) -> Tuple[list, dict]:
    def one(v: Any) -> Any:
        if isinstance(v, Per):
            return v.make(ops)
        return _copy(v)

    return [one(v) for _, v in args], {k: one(v) for k, v in kwargs.items()}


def _normal(out: Any) -> Any:
    """Results as nested tuples of numpy arrays (or None / a type name) for comparison."""
    if out is None:
        return None
    if isinstance(out, numpy.ndarray):
        return out
    if isinstance(out, (numpy.generic, int, float, bool)):
        return _Scalar(numpy.asarray(out))
    if hasattr(out, "data") and hasattr(out, "size_at_t"):  # Padded
        return tuple(_normal(x) for x in (out.data, out.size_at_t, out.lengths, out.indices))
    if isinstance(out, (tuple, list)):
        return tuple(_normal(x) for x in out)
    if hasattr(out, "__iter__") and hasattr(out, "__len__") and not isinstance(out, (str, bytes)):
        return tuple(_normal(x) for x in out)  # SizedGenerator
    return _Object(type(out).__name__)


@dataclass
class _Scalar:
    value: numpy.ndarray


@dataclass(frozen=True)
class _Object:
    name: str


@dataclass
class Outcome:
    result: Any = None
    error: Optional[BaseException] = None
    inputs: Any = None  # the array arguments after the call

    @property
    def ok(self) -> bool:
        return self.error is None


def run(ops: Any, spec: Spec, args: list, kwargs: dict) -> Outcome:
    a, k = _materialise(ops, args, kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with numpy.errstate(all="ignore"):
            try:
                out = getattr(ops, spec.method)(*a, **k)
                norm = _normal(out)
            except Exception as err:  # noqa: BLE001 - the outcome is what is compared
                return Outcome(error=err)
    return Outcome(result=norm, inputs=_normal(a + list(k.values())))


def _least_precise(values: Any) -> Optional[numpy.dtype]:
    """The float dtype of least precision among the (nested) arrays, if any."""
    found: List[numpy.dtype] = []

    def walk(v: Any) -> None:
        if isinstance(v, numpy.ndarray) and v.dtype.kind == "f":
            found.append(v.dtype)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(values)
    return min(found, key=lambda d: d.itemsize) if found else None


def _tol(dtype: numpy.dtype) -> Tuple[float, float]:
    if dtype == numpy.float16:
        return 2e-2, 2e-2
    if dtype == numpy.float32:
        return 1e-4, 1e-5
    return 1e-6, 1e-6


def differ(theirs: Any, ours: Any, values: bool = True, path: str = "", tol: Optional[numpy.dtype] = None) -> Optional[str]:
    """Why `ours` is not the same result as `theirs`, or None."""
    if isinstance(theirs, numpy.ndarray):
        if not isinstance(ours, numpy.ndarray):
            return f"{path}: thinc gives an array, plait {type(ours).__name__}"
        if theirs.shape != ours.shape:
            return f"{path}: shape {ours.shape} != thinc's {theirs.shape}"
        if theirs.dtype != ours.dtype:
            return f"{path}: dtype {ours.dtype} != thinc's {theirs.dtype}"
        if not values:
            return None
        if theirs.dtype.kind in "fc":
            rtol, atol = _tol(theirs.dtype if tol is None or tol.itemsize > theirs.dtype.itemsize else tol)
            if not numpy.allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True):
                return f"{path}: values differ, max abs diff {numpy.nanmax(numpy.abs(ours.astype('f8') - theirs.astype('f8')))}"
        elif not numpy.array_equal(ours, theirs):
            return f"{path}: values differ"
        return None
    if isinstance(theirs, _Scalar):
        # A 0-d array stands in for a scalar: float(), arithmetic and comparisons agree.
        if isinstance(ours, numpy.ndarray) and ours.ndim == 0:
            ours = _Scalar(ours)
        if not isinstance(ours, _Scalar):
            return f"{path}: thinc gives a scalar, plait {type(ours).__name__}"
        return differ(theirs.value, ours.value, values, path, tol)
    if isinstance(theirs, _Object):
        return None if ours == theirs else f"{path}: {ours} != thinc's {theirs}"
    if isinstance(theirs, tuple):
        if not isinstance(ours, tuple) or len(ours) != len(theirs):
            return f"{path}: {len(ours) if isinstance(ours, tuple) else type(ours).__name__} items != thinc's {len(theirs)}"
        for i, (t, o) in enumerate(zip(theirs, ours)):
            why = differ(t, o, values, f"{path}[{i}]", tol)
            if why:
                return why
        return None
    if theirs is None:
        return None  # plait may return what Thinc drops (scatter_add returns its table)
    return None if theirs == ours else f"{path}: {ours!r} != thinc's {theirs!r}"


@dataclass
class Verdict:
    case: str
    status: str  # "same", "both-raise", "plait-raises", "plait-returns", "differs(-dtype)", "mutates"
    detail: str = ""
    oracle: str = "NumpyOps"
    error: Optional[BaseException] = None  # plait's, where it raised


# Calls that crash Thinc or make it write outside its arrays: never run there; plait must refuse them.
THINC_UNSAFE: Dict[Tuple[str, str], str] = {
    ("scatter_add", "table-empty"): "Thinc's compiled scatter_add writes past an empty table (the process aborts)",
    ("scatter_add", "table-row"): "Thinc's compiled scatter_add writes rows 2 and 4 of a 1-row table (memory corruption)",
}


def compare(spec: Spec, case: Case, plait_ops: Any, thinc_numpy: Any, thinc_ops: Any) -> Verdict:
    cid, args, kwargs = case
    unsafe = THINC_UNSAFE.get((spec.method, cid))
    if unsafe:
        ours = run(plait_ops, spec, args, kwargs)
        status = "both-raise" if not ours.ok else "plait-returns"
        return Verdict(cid, status, f"{unsafe}; plait: {ours.error!r}"[:300], "none", ours.error)
    theirs = run(thinc_numpy, spec, args, kwargs)
    oracle = "NumpyOps"
    if not theirs.ok:
        ref = run(thinc_ops, spec, args, kwargs)
        if ref.ok:
            theirs, oracle = ref, "Ops"
    ours = run(plait_ops, spec, args, kwargs)
    if not theirs.ok and not ours.ok:
        return Verdict(cid, "both-raise", f"thinc {type(theirs.error).__name__}, plait {type(ours.error).__name__}: {ours.error}"[:300], oracle, ours.error)
    if not ours.ok:
        return Verdict(cid, "plait-raises", f"{type(ours.error).__name__}: {ours.error}"[:300], oracle, ours.error)
    if not theirs.ok:
        return Verdict(cid, "plait-returns", f"thinc {type(theirs.error).__name__}: {theirs.error}"[:300], oracle)
    tol = _least_precise([v for _, v in args] + list(kwargs.values()))
    why = differ(theirs.result, ours.result, spec.values, "result", tol)
    if why:
        return Verdict(cid, "differs-dtype" if ": dtype " in why else "differs", why, oracle)
    # The arguments afterwards: what each wrote into (in place) must agree too.
    why = differ(theirs.inputs, ours.inputs, spec.values, "args", tol)
    if why:
        return Verdict(cid, "mutates", why, oracle)
    return Verdict(cid, "same", "", oracle)


def probe(plait_ops: Any, method: str) -> List[Verdict]:
    import thinc.api

    thinc_numpy, thinc_ops = thinc.api.NumpyOps(), thinc.api.Ops()
    out = []
    for spec in SPECS:
        if spec.method != method:
            continue
        for case in cases(spec):
            out.append(compare(spec, case, plait_ops, thinc_numpy, thinc_ops))
    return out


def methods() -> List[str]:
    return sorted({s.method for s in SPECS})


if __name__ == "__main__":  # pragma: no cover - a report for people
    import sys

    from plait.backends import NumpyOps, Ops

    wanted = [a for a in sys.argv[1:] if not a.startswith("-")] or methods()
    for backend in (NumpyOps(), Ops()):
        for name in wanted:
            for v in probe(backend, name):
                marked = mark_for(name, v.case, v.status)
                if (v.status not in ("same", "both-raise") and not marked) or "-v" in sys.argv:
                    print(f"{type(backend).__name__:8s} {name:28s} {v.case:24s} {v.status:13s} [{v.oracle}] {v.detail}")
