"""LSTM: a stacked, optionally bidirectional LSTM over Padded batches; PyTorchLSTM."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple, cast

import numpy

from ..backends import Ops
from ..backends._checks import describe
from ..backends.ops import padded_order
from ..config import registry
from ..initializers import glorot_uniform_init, zero_init
from ..model import Model
from ..types import Floats1d, Floats4d, Padded, Ragged
from ..util import get_width, partial
from .noop import noop


@registry.layers("LSTM.v1")
def LSTM(
    nO: Optional[int] = None,
    nI: Optional[int] = None,
    *,
    bi: bool = False,
    depth: int = 1,
    dropout: float = 0.0,
    init_W: Optional[Callable] = None,
    init_b: Optional[Callable] = None,
) -> Model[Padded, Padded]:
    """`depth` LSTM layers; with bi=True each is a left-to-right plus a right-to-left LSTM.

    Padded (nL, nB, nI) -> Padded (nL, nB, nO); with bi=True each direction has nO // 2 units.
    Params: LSTM, all weights flat (per layer, per direction: four (nH, nI_layer) input
    blocks, four (nH,) biases, four (nH, nH) hidden blocks, four (nH,) biases), drawn with
    init_W (default glorot_uniform_init) and init_b (default zero_init); HC0 (2, depth,
    dirs, nH), the initial states, zeros and not trained. Dropout (rate `dropout`) is
    applied to the weights while training, not to the activations.
    """
    if depth == 0:
        raise ValueError(
            "Cannot create LSTM with depth=0: it needs at least one layer. Use noop() for an "
            "identity layer instead."
        )
    if init_W is None:
        init_W = glorot_uniform_init
    if init_b is None:
        init_b = zero_init
    return Model(
        "lstm",
        forward,
        dims={"nO": nO, "nI": nI, "depth": depth, "dirs": 1 + int(bi)},
        attrs={"registry_name": "LSTM.v1", "dropout_rate": dropout},
        params={"LSTM": None, "HC0": None},
        init=partial(init, init_W, init_b),
    )


@registry.layers("PyTorchLSTM.v1")
def PyTorchLSTM(
    nO: int, nI: int, *, bi: bool = False, depth: int = 1, dropout: float = 0.0
) -> Model[Padded, Padded]:
    """torch.nn.LSTM wrapped as a Padded -> Padded layer: Padded (nL, nB, nI) -> (nL, nB, nO).

    With bi=True each direction has nO // 2 units. Unlike LSTM, the torch module also runs
    over the padding (as in Thinc), which changes a right-to-left direction's output for
    sequences shorter than the batch's longest. depth=0 gives noop().
    """
    if depth == 0:
        return noop()  # type: ignore[return-value]
    from .. import compat

    if not compat.has_torch:
        raise ImportError(
            "PyTorchLSTM needs PyTorch, which is not installed (or is switched off with "
            "PLAIT_NO_TORCH). Install it with `pip install torch`, or use LSTM(nO, nI, bi=..., "
            "depth=...), which needs no PyTorch."
        )
    if bi and nO % 2:
        raise ValueError(
            f"Cannot create PyTorchLSTM: a bidirectional LSTM splits nO between its two directions, "
            f"so nO must be even, got nO={nO}."
        )
    from .pytorchwrapper import PyTorchRNNWrapper
    from .with_padded import with_padded

    nH = nO // 2 if bi else nO
    rnn = PyTorchRNNWrapper(compat.torch.nn.LSTM(nI, nH, depth, bidirectional=bi, dropout=dropout))
    rnn.set_dim("nO", nO)
    rnn.set_dim("nI", nI)
    return with_padded(rnn)


def init(
    init_W: Callable,
    init_b: Callable,
    model: Model,
    X: Optional[Padded] = None,
    Y: Optional[Padded] = None,
) -> None:
    if X is not None:
        model.set_dim("nI", get_width(X))
    if Y is not None:
        model.set_dim("nO", get_width(Y))
    nO = model.get_dim("nO")
    nI = model.get_dim("nI")
    depth = model.get_dim("depth")
    dirs = model.get_dim("dirs")
    if nO % dirs:
        raise ValueError(
            f"Cannot initialize model '{model.name}': a bidirectional LSTM splits nO between its "
            f"two directions, so nO must be even, got nO={nO}."
        )
    nH = nO // dirs
    ops = model.ops
    # Drawn block by block, in this order, so that each block's fan-in/out is its own
    # and the draws match Thinc's (and its layout, which is CuDNN's).
    blocks = []
    layer_nI = nI
    for _ in range(depth):
        for _ in range(dirs):
            for n_in in (layer_nI, nH):
                blocks.extend(init_W(ops, (nH, n_in)) for _ in range(4))
                blocks.extend(init_b(ops, (nH,)) for _ in range(4))
        layer_nI = nH * dirs
    model.set_param("LSTM", ops.xp.concatenate([block.ravel() for block in blocks]))
    model.set_param("HC0", zero_init(ops, (2, depth, dirs, nH)))


def forward(model: Model[Padded, Padded], Xp: Padded, is_train: bool) -> Tuple[Padded, Callable]:
    ops = model.ops
    _check_input(model, Xp)
    dtype = model.get_param("LSTM").dtype
    Xr = _padded_to_packed(ops, Xp, dtype=dtype)
    Y, backprop_packed = _forward_packed(model, Xr.data, Xr.lengths, is_train)
    Yp = _packed_to_padded(ops, Y, Xp)

    def backprop(dYp: Padded) -> Padded:
        _check_trained(model, is_train)
        dYr = _padded_to_packed(ops, dYp, dtype=dtype)
        return _packed_to_padded(ops, backprop_packed(dYr.data, dYr.lengths), dYp)

    return Yp, backprop


def _forward_packed(model: Model, X: Any, sizes: Any, is_train: bool) -> Tuple[Any, Callable]:
    """The LSTM on rows packed step by step (sizes[t] rows at step t, the longest sequences
    first): X (N, nI) -> Y (N, nO), and backprop(dY, sizes) -> dX, both packed alike."""
    ops = model.ops
    rate = model.attrs["dropout_rate"]
    LSTM = cast(Floats1d, model.get_param("LSTM"))
    HC0 = cast(Floats4d, model.get_param("HC0"))
    mask = None
    if is_train and rate:
        # Dropout on the weights (Gal & Ghahramani): RNN activations are too correlated
        # across steps for per-activation dropout to help much.
        mask = ops.get_dropout_mask(LSTM.shape, rate)
        LSTM = LSTM * mask
    if is_train:
        Y, fwd_state = ops.lstm_forward_training(LSTM, HC0[0], HC0[1], X, sizes)
    else:
        Y = ops.lstm_forward_inference(LSTM, HC0[0], HC0[1], X, sizes)
        fwd_state = None

    def backprop(dY: Any, dY_sizes: Any) -> Any:
        # The flag, not an attribute of this function: a closure that names itself is a
        # reference cycle, which kept the LSTM's forward state (tens of MB a step at width
        # 512) alive until the next cyclic garbage collection.
        _check_trained(model, is_train)
        dX, dLSTM = ops.backprop_lstm(dY, dY_sizes, LSTM, fwd_state)
        if mask is not None:
            dLSTM *= mask
        model.inc_grad("LSTM", dLSTM)
        return dX

    return Y, backprop


def _check_trained(model: Model, trained: bool) -> None:
    if not trained:
        raise ValueError(
            f"Cannot backprop through model '{model.name}': it was run with is_train=False. "
            f"Use model.begin_update(X) to get a usable backprop callback."
        )


def forward_unpadded(
    model: Model, data: Any, lengths: Any, is_train: bool
) -> Optional[Tuple[Any, Callable]]:
    """The LSTM on sequences given back to back, without a Padded batch in between.

    data (N, nI) holds the sequences' rows one sequence after another, lengths their row
    counts. Returns Y (N, nO) in the same order and backprop(dY) -> dX (N, nI), with the same
    values as list2padded -> the LSTM -> padded2list (the rows are packed in list2padded's
    order: longest first, ties by descending index). with_padded takes this path for lists and
    Ragged on NumpyOps: the padded batch is up to four times the real rows at the tagger's
    batch sizes, and was filled, zeroed and emptied twice a step. Returns None where the
    inputs need the general path (its checks and error messages): other than NumpyOps, data
    that is not a 2d numpy array of width nI, or no rows at all.
    """
    ops = model.ops
    nI = model.maybe_get_dim("nI")
    if (
        ops.xp is not numpy
        or not isinstance(data, numpy.ndarray)
        or data.ndim != 2
        or data.shape[1] != nI
        or data.shape[0] == 0
        or not model.has_param("LSTM")
    ):
        return None
    lengths = numpy.asarray(lengths, dtype=numpy.int64).reshape(-1)
    if lengths.size == 0 or lengths.min() < 0 or int(lengths.sum()) != data.shape[0]:
        return None
    n_seqs = lengths.size
    order, size_at_t = padded_order(lengths)
    step_start = numpy.cumsum(size_at_t) - size_at_t
    col = numpy.empty(n_seqs, dtype=numpy.int64)
    col[order] = numpy.arange(n_seqs)
    seq_of_row = numpy.repeat(numpy.arange(n_seqs), lengths)
    t_of_row = numpy.arange(data.shape[0]) - numpy.repeat(numpy.cumsum(lengths) - lengths, lengths)
    # Row r of the input is packed row dest[r]; packed row q is input row src[q].
    dest = step_start[t_of_row] + col[seq_of_row]
    src = numpy.empty_like(dest)
    src[dest] = numpy.arange(dest.size)
    sizes = ops.asarray1i(size_at_t)
    dtype = model.get_param("LSTM").dtype
    Y, backprop_packed = _forward_packed(model, ops.as_contig(data.take(src, axis=0), dtype=dtype), sizes, is_train)

    def backprop(dY: Any) -> Any:
        _check_trained(model, is_train)
        if not isinstance(dY, numpy.ndarray) or dY.shape != (data.shape[0], Y.shape[1]):
            raise ValueError(
                f"Model '{model.name}': backprop expects gradients of shape {(data.shape[0], Y.shape[1])} "
                f"(one row per output row, lengths {lengths[:10].tolist()}{'...' if n_seqs > 10 else ''}), "
                f"got {describe(dY)}."
            )
        dYp = ops.as_contig(dY.take(src, axis=0), dtype=dtype)
        return backprop_packed(dYp, sizes).take(dest, axis=0)

    return Y.take(dest, axis=0), backprop


# with_padded hands a layer whose forward has `unpadded` its lists and Ragged this way.
forward.unpadded = forward_unpadded  # type: ignore[attr-defined]


def _check_input(model: Model, Xp: Any) -> None:
    if not isinstance(Xp, Padded):
        raise TypeError(
            f"Model '{model.name}' expects a Padded batch, got {type(Xp).__name__}. Wrap it with "
            f"with_padded(...) or build one with ops.list2padded(sequences)."
        )
    nI = model.get_dim("nI")
    if Xp.data.ndim != 3 or Xp.data.shape[2] != nI:
        raise ValueError(
            f"Model '{model.name}' expects Padded data of shape (nL, nB, {nI}) (nI={nI}), got "
            f"{tuple(Xp.data.shape)}."
        )
    n_steps = int(Xp.lengths.sum()) if Xp.lengths.size else 0
    n_rows = int(Xp.size_at_t.sum()) if Xp.size_at_t.size else 0
    if n_steps != n_rows:
        raise ValueError(
            f"Model '{model.name}': inconsistent Padded batch: its lengths sum to {n_steps} but its "
            f"size_at_t sums to {n_rows}."
        )


def _step_mask(ops: Ops, Xp: Padded) -> Any:
    """(nL, nB) bool: which cells of the padded batch hold real rows."""
    xp = ops.xp
    size_at_t = xp.asarray(Xp.size_at_t)
    return xp.arange(Xp.data.shape[1])[None, :] < size_at_t[:, None]


def _step_sizes(Xp: Padded) -> List[int]:
    """size_at_t as Python ints, each clipped to [0, nB] as the step mask reads it."""
    nB = Xp.data.shape[1]
    return [min(max(int(b), 0), nB) for b in numpy.asarray(Xp.size_at_t).tolist()]


def _padded_to_packed(ops: Ops, Xp: Padded, dtype: Any) -> Ragged:
    """The real rows of a padded batch, time step after time step, with size_at_t as lengths.

    The rows are cast to the weights' dtype, as the LSTM kernels need one float type.
    """
    if ops.xp is numpy:
        # Step t's real rows are the first size_at_t[t] of data[t]: one contiguous block each,
        # copied side by side (measured 2-5x faster than a boolean mask on the tagger's batches).
        data = Xp.data
        blocks = [data[t, :b] for t, b in enumerate(_step_sizes(Xp)) if b > 0]
        packed = numpy.concatenate(blocks) if blocks else data.reshape((-1,) + data.shape[2:])[:0]
    else:
        # Boolean indexing walks (t, b) in row-major order: step 0's rows first.
        packed = Xp.data[_step_mask(ops, Xp)]
    return Ragged(ops.as_contig(packed, dtype=dtype), Xp.size_at_t)


def _packed_to_padded(ops: Ops, packed: Any, Xp: Padded) -> Padded:
    nL, nB = Xp.data.shape[:2]
    if ops.xp is numpy:
        # Each step's rows copied as one block and only the padding after them zeroed, rather
        # than zeroing the whole batch and scattering through a mask.
        Y = numpy.empty((nL, nB, packed.shape[1]), dtype=packed.dtype)
        start = 0
        for t, b in enumerate(_step_sizes(Xp)):
            Y[t, :b] = packed[start : start + b]
            Y[t, b:] = 0
            start += b
    else:
        Y = ops.alloc3f(nL, nB, packed.shape[1], dtype=packed.dtype)
        Y[_step_mask(ops, Xp)] = packed
    return Padded(Y, size_at_t=Xp.size_at_t, lengths=Xp.lengths, indices=Xp.indices)
