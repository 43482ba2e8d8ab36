"""SparseLinear: a linear layer over hashed sparse features (the "hashing trick")."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from ..backends._murmur import murmur3_x86_32_uint64
from ..config import registry
from ..model import Model
from ..types import ArrayXd
from ..util import get_width

InT = Tuple[ArrayXd, ArrayXd, ArrayXd]
OutT = ArrayXd


@registry.layers("SparseLinear.v1")
def SparseLinear(nO: Optional[int] = None, length: int = 2**18) -> Model[InT, OutT]:
    """Scores for batches of weighted sparse keys.  (keys, values, lengths) -> (len(lengths), nO)

    NOTE: v1 indexes W as Thinc's SparseLinear.v1 did, touching only about `length + nO`
    of its `nO * length` weights. It is kept so that saved v1 models give the same scores;
    new models should use SparseLinear.v2.
    """
    return _sparse_linear(nO, length, v1_indexing=True)


@registry.layers("SparseLinear.v2")
def SparseLinear_v2(nO: Optional[int] = None, length: int = 2**18) -> Model[InT, OutT]:
    """Scores for batches of weighted sparse keys.  (keys, values, lengths) -> (len(lengths), nO)

    Each key is hashed twice (MurmurHash3_x86_32, seeds 0 and 1) into a slot of a
    `length`-wide row per output class; its value times both slots' weights adds to the
    score of the sequence it belongs to. Params: W (nO * length,), b (nO,), both zeros.
    """
    return _sparse_linear(nO, length, v1_indexing=False)


def _sparse_linear(nO: Optional[int], length: int, *, v1_indexing: bool) -> Model[InT, OutT]:
    return Model(
        "sparse_linear",
        forward,
        init=init,
        params={"W": None, "b": None},
        dims={"nO": nO, "length": length},
        attrs={"v1_indexing": v1_indexing},
    )


def forward(model: Model[InT, OutT], keys_values_lengths: InT, is_train: bool) -> Tuple[OutT, Callable]:
    keys, values, lengths = _check_input(model, keys_values_lengths)
    ops = model.ops
    xp = ops.xp
    W = model.get_param("W")
    b = model.get_param("b")
    nO = model.get_dim("nO")
    length = model.get_dim("length")
    nB = lengths.shape[0]
    slots = _weight_slots(xp, keys, nO, length, model.attrs["v1_indexing"])  # (2, nK, nO)
    # Row of each key's sequence, so that per-key contributions can be summed per sequence.
    seq = xp.repeat(xp.arange(nB), lengths)
    V = values.astype(W.dtype, copy=False)[:, None]
    scores = xp.zeros((nB, nO), dtype=W.dtype)
    scores += b
    ops.scatter_add(scores, seq, (W[slots[0]] + W[slots[1]]) * V)

    def backprop(d_scores: OutT) -> InT:
        if tuple(d_scores.shape) != (nB, nO):
            raise ValueError(
                f"Model '{model.name}': backprop got d_scores of shape {tuple(d_scores.shape)}, "
                f"expected the output's shape {(nB, nO)}."
            )
        d_per_key = d_scores[seq] * V  # (nK, nO)
        dW = xp.zeros(W.shape, dtype=W.dtype)
        xp.add.at(dW, slots[0].ravel(), d_per_key.ravel())
        xp.add.at(dW, slots[1].ravel(), d_per_key.ravel())
        model.inc_grad("W", dW)
        model.inc_grad("b", d_scores.sum(axis=0).astype(b.dtype, copy=False))
        # The inputs are discrete features: there is no gradient to pass on.
        return keys_values_lengths

    return scores, backprop


def init(model: Model[InT, OutT], X: Optional[InT] = None, Y: Optional[OutT] = None) -> None:
    if Y is not None:
        model.set_dim("nO", get_width(Y))
    nO = model.get_dim("nO")
    length = model.get_dim("length")
    model.set_param("W", model.ops.alloc((nO * length,), dtype="f"))
    model.set_param("b", model.ops.alloc((nO,), dtype="f"))


def _check_input(model: Model, X: Any) -> Tuple[Any, Any, Any]:
    """Validate (keys, values, lengths) and bring them to the backend: uint64, float, int64."""
    if not isinstance(X, (tuple, list)) or len(X) != 3:
        raise TypeError(
            f"Model '{model.name}' expects a tuple (keys, values, lengths) of arrays, got "
            f"{type(X).__name__}{'' if not hasattr(X, '__len__') else f' of length {len(X)}'}."
        )
    ops = model.ops
    names = ("keys", "values", "lengths")
    arrays = []
    for name, arr in zip(names, X):
        if not hasattr(arr, "shape") or getattr(arr, "ndim", None) != 1:
            raise ValueError(
                f"Model '{model.name}': '{name}' must be a 1d array, got "
                f"{type(arr).__name__} of shape {getattr(arr, 'shape', None)}."
            )
        arrays.append(ops.asarray(arr))
    keys, values, lengths = arrays
    if keys.dtype.kind not in "iu" or lengths.dtype.kind not in "iu":
        raise TypeError(
            f"Model '{model.name}': 'keys' and 'lengths' must hold integers, got dtypes "
            f"{keys.dtype} and {lengths.dtype}."
        )
    if values.dtype.kind != "f":
        raise TypeError(f"Model '{model.name}': 'values' must hold floats, got dtype {values.dtype}.")
    if keys.shape[0] != values.shape[0]:
        raise ValueError(
            f"Model '{model.name}': 'keys' ({keys.shape[0]}) and 'values' ({values.shape[0]}) "
            f"must have the same length."
        )
    lengths = lengths.astype("int64", copy=False)
    if lengths.size and int(lengths.min()) < 0:
        raise ValueError(f"Model '{model.name}': 'lengths' must be >= 0, got {int(lengths.min())}.")
    total = int(lengths.sum()) if lengths.size else 0
    if total > keys.shape[0]:
        # Thinc would read past the end of the keys here.
        raise ValueError(
            f"Model '{model.name}': 'lengths' sum to {total}, but there are only {keys.shape[0]} keys. "
            f"Give one length per sequence, summing to the number of keys."
        )
    # Keys past sum(lengths) belong to no sequence and are ignored, as in Thinc.
    keys, values = keys[:total], values[:total]
    # NOTE: signed keys are reinterpreted as uint64 (two's complement), as Thinc reads them.
    return keys.astype("uint64", copy=False), values, lengths


def _weight_slots(xp: Any, keys: Any, nO: int, length: int, v1_indexing: bool) -> Any:
    """Indices into the flat W of each key's two slots for every class: (2, nK, nO)."""
    classes = xp.arange(nO, dtype="int64")[None, :]
    slots = []
    for seed in (0, 1):
        h = murmur3_x86_32_uint64(xp, keys, seed)
        if v1_indexing:
            # NOTE: v1 masks with length - 1 and offsets by the class, as Thinc's v1 did.
            idx = (h & xp.uint32((length - 1) & 0xFFFFFFFF)).astype("int64")
            slots.append(idx[:, None] + classes)
        else:
            idx = (h % xp.uint32(length)).astype("int64")
            slots.append(classes * length + idx[:, None])
    return xp.stack(slots) if keys.shape[0] else xp.zeros((2, 0, nO), dtype="int64")

