"""Maxout: a dense layer with nP linear pieces per output, keeping the largest (Goodfellow et al., 2013)."""
from typing import Any, Callable, Optional, Tuple

from ..config import registry
from ..initializers import glorot_uniform_init, zero_init
from ..model import Model, _predicting
from ..types import Floats2d
from ..util import get_width, partial
from .chain import chain
from .dropout import Dropout
from .layernorm import LayerNorm
from .linear import _check_input

InT = Floats2d
OutT = Floats2d


@registry.layers("Maxout.v1")
def Maxout(
    nO: Optional[int] = None,
    nI: Optional[int] = None,
    nP: Optional[int] = 3,
    *,
    init_W: Optional[Callable] = None,
    init_b: Optional[Callable] = None,
    dropout: Optional[float] = None,
    normalize: bool = False,
) -> Model[InT, OutT]:
    """Y[:, o] = max over p of (X @ W[o, p].T + b[o, p]).  (nB, nI) -> (nB, nO)

    Params: W (nO, nP, nI) (default glorot_uniform_init), b (nO, nP) (default zero_init).
    normalize=True chains a LayerNorm after the layer, dropout=rate a Dropout after that.
    """
    if init_W is None:
        init_W = glorot_uniform_init
    if init_b is None:
        init_b = zero_init
    model: Model[InT, OutT] = Model(
        "maxout",
        forward,
        init=partial(init, init_W, init_b),
        dims={"nO": nO, "nI": nI, "nP": nP},
        params={"W": None, "b": None},
    )
    if normalize:
        model = chain(model, LayerNorm(nI=nO))
    if dropout is not None:
        model = chain(model, Dropout(dropout))
    return model


def forward(model: Model[InT, OutT], X: InT, is_train: bool) -> Tuple[OutT, Callable]:
    ops = model.ops
    nO = model.get_dim("nO")
    nP = model.get_dim("nP")
    nI = model.get_dim("nI")
    W = ops.reshape2f(model.get_param("W"), nO * nP, nI)
    b = ops.reshape1f(model.get_param("b"), nO * nP)
    _check_input(model, X, nI)
    # Model.predict never asks for the backprop, so the winners need not be kept.
    keep_which = is_train or not _predicting.get()
    best, which = _affine_maxout(ops, X, W, b, nO, nP, keep_which)

    def backprop(d_best: OutT) -> InT:
        # Only the winning piece of each output gets a gradient: the backend's fused op skips
        # the (nP - 1) / nP zeros that a dense dZ @ W and dZ.T @ X would multiply.
        dX, dW, db = ops.backprop_maxout_affine(d_best, which, X, ops.reshape3f(W, nO, nP, nI))
        model.inc_grad("b", db)
        model.inc_grad("W", dW)
        return dX

    return best, backprop


# The pieces (nB, nO * nP) of a batch of more than twice this many bytes are made and
# reduced a block of rows at a time: a large inference batch then never holds all of them at
# once (the peak memory of prediction), and each block is reduced while it is still in cache.
# The text CNN bench predicts 256 documents (5,600 rows x 192 pieces, 4.3 MB) at a time:
# peak 83.0 -> 79.3 MB and 1.4x the predictions per second.
_PIECES_BLOCK_BYTES = 1 << 20
# ... but blocks of at least this many rows, and all of one size (give or take a row): the BLAS
# packs W again for every block, and at width 512 (W 1,536 x 1,536, 9 MiB) the 1 MiB blocks
# were 170 rows, its packing 7% of a text CNN training step (perf). Training steps, in-process
# A/B on Zen 4 (5-7 alternating rounds, a loaded machine) against 1 MiB blocks of one size:
# width 512, batch 64 / 256: 1.05 / 1.05 (512 rows at least: 1.02 / 1.03); widths 128 and 256,
# where the blocks grow less (or the batch is now whole): 0.96-1.04, run to run.
_PIECES_MIN_ROWS = 1024


def _affine_maxout(
    ops: Any, X: Any, W: Any, b: Any, nO: int, nP: int, keep_which: bool = True
) -> Tuple[Any, Any]:
    """max over pieces of X @ W.T + b, and the winning piece (None unless keep_which): (nB, nO) each."""
    nB = X.shape[0]
    rows = max(1, _PIECES_MIN_ROWS, _PIECES_BLOCK_BYTES // max(1, nO * nP * X.dtype.itemsize))
    if nB <= 2 * rows:
        Z = ops.affine(X, W, b)  # (nB, nO * nP): the pieces of each output are adjacent
        best, which = ops.maxout(ops.reshape3f(Z, nB, nO, nP))
        return best, (which if keep_which else None)
    n_blocks = -(-nB // rows)
    best = which = None
    # Blocks of one size, within a row: no thin last block.
    for k in range(n_blocks):
        start, stop = nB * k // n_blocks, nB * (k + 1) // n_blocks
        Z = ops.affine(X[start:stop], W, b)
        block_best, block_which = ops.maxout(ops.reshape3f(Z, Z.shape[0], nO, nP))
        del Z
        if best is None:
            best = ops.xp.empty((nB, nO), dtype=block_best.dtype)
            if keep_which:
                which = ops.xp.empty((nB, nO), dtype=block_which.dtype)
        best[start:stop] = block_best
        if keep_which:
            which[start:stop] = block_which
    return best, which


def init(
    init_W: Callable,
    init_b: Callable,
    model: Model[InT, OutT],
    X: Optional[InT] = None,
    Y: Optional[OutT] = None,
) -> None:
    if X is not None:
        model.set_dim("nI", get_width(X))
    if Y is not None:
        model.set_dim("nO", get_width(Y))
    nO = model.get_dim("nO")
    nP = model.get_dim("nP")
    nI = model.get_dim("nI")
    model.set_param("W", init_W(model.ops, (nO, nP, nI)))
    model.set_param("b", init_b(model.ops, (nO, nP)))
