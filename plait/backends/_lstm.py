"""LSTM kernels shared by every backend, written only with `ops.xp` array operations.

Two families live here:

* `lstm_forward_training` / `lstm_forward_inference` / `backprop_lstm`: Thinc 8.3's
  packed, multi-layer, optionally bidirectional LSTM. All weights sit in one flat
  `params` vector; X holds the time steps one after another, `size_at_t[t]` rows each
  (the longest sequences first, as `with_padded` produces them).
* `recurrent_lstm` / `backprop_recurrent_lstm`: a single-layer, left-to-right LSTM over
  a padded `(nL, nB, nI)` batch with one weight matrix, as documented for Thinc 8.0.

Layout of `params`, for each layer and then each direction (left-to-right first):

    Wx (4*nO, nI_layer) | bx (4*nO,) | Wh (4*nO, nO) | bh (4*nO,)

with the rows of Wx, Wh, bx and bh in gate blocks: forget, input, output, candidate.
nI_layer is nI for the first layer and dirs*nO after it. Every output row holds the
left-to-right hidden state followed by the right-to-left one.

NOTE: Thinc 8.3 uses its second positional argument (named `H0`) as the initial *cell*
state and its third (`C0`) as the initial *hidden* state. An LSTM trained with Thinc
only reproduces its outputs if we do the same, so we do.
"""
from typing import Any, List, Sequence, Tuple

from ._checks import check_array

_FLOATS = ("float32", "float64")


# --- validation -------------------------------------------------------------------


def _where(fn: str) -> str:
    return f"Ops.{fn}"


def _check_float_array(fn: str, name: str, X: Any, ndim: int) -> None:
    check_array(fn, name, X, ndim=ndim, kind="f")
    if X.dtype.name not in _FLOATS:
        raise NotImplementedError(
            f"{_where(fn)}: argument '{name}' has dtype {X.dtype}; only float32 and float64 "
            f"are supported. Cast it with {name}.astype('float32')."
        )


def as_params_dtype(fn: str, params: Any, named: Sequence[Tuple[str, Any, int]]) -> List[Any]:
    """The named float arrays (name, array, ndim), cast to the dtype of `params` where they differ.

    Thinc runs its LSTM in one precision whatever the dtypes of X, H0 and C0 (its tests pass
    float64 inputs with float32 weights); here that precision is the weights'.
    """
    _check_float_array(fn, "params", params, 1)
    out = []
    for name, X, ndim in named:
        check_array(fn, name, X, ndim=ndim, kind="f")
        out.append(X if X.dtype == params.dtype else X.astype(params.dtype))
    return out


def _check_same_dtype(fn: str, named: Sequence[Tuple[str, Any]]) -> None:
    first_name, first = named[0]
    for name, X in named[1:]:
        if X.dtype != first.dtype:
            raise TypeError(
                f"{_where(fn)}: argument '{name}' has dtype {X.dtype} but '{first_name}' has "
                f"dtype {first.dtype}; all float arguments must share one dtype. Cast one of them."
            )


def _check_shape(fn: str, name: str, X: Any, expected: Tuple[int, ...], hint: str = "") -> None:
    if tuple(X.shape) != tuple(expected):
        raise ValueError(
            f"{_where(fn)}: argument '{name}' has shape {tuple(X.shape)}, expected {tuple(expected)}"
            f"{hint}."
        )


def _sizes_to_list(fn: str, name: str, sizes: Any, n_rows: int) -> List[int]:
    """Validate per-step batch sizes and return them as Python ints."""
    dtype = getattr(sizes, "dtype", None)
    if dtype is not None:
        if dtype.kind not in "iu":
            raise TypeError(
                f"{_where(fn)}: argument '{name}' must hold integers, got dtype {dtype}. "
                f"Cast it with {name}.astype('int32')."
            )
        if sizes.ndim != 1:
            raise ValueError(
                f"{_where(fn)}: argument '{name}' must be 1-dimensional, got shape {tuple(sizes.shape)}."
            )
        values = sizes.tolist()
    else:
        try:
            values = list(sizes)
        except TypeError:
            raise TypeError(
                f"{_where(fn)}: argument '{name}' must be a 1d integer array, got {type(sizes).__name__}."
            ) from None
        if not all(isinstance(v, int) for v in values):
            raise TypeError(f"{_where(fn)}: argument '{name}' must hold integers, got {values!r}.")
    out = [int(v) for v in values]
    if any(v < 0 for v in out):
        raise ValueError(f"{_where(fn)}: argument '{name}' has negative batch sizes: {out}.")
    if any(later > earlier for earlier, later in zip(out, out[1:])):
        raise ValueError(
            f"{_where(fn)}: argument '{name}' must not increase from one step to the next "
            f"(sequences sorted longest first, as with_padded produces), got {out}."
        )
    if sum(out) != n_rows:
        raise ValueError(
            f"{_where(fn)}: argument '{name}' sums to {sum(out)} but X has {n_rows} rows; "
            f"the batch sizes of all time steps must add up to the number of rows."
        )
    return out


def _n_params(depth: int, dirs: int, nO: int, nI: int) -> int:
    total = 0
    for i in range(depth):
        nI_layer = nI if i == 0 else dirs * nO
        total += dirs * 4 * nO * (nI_layer + nO + 2)
    return total


def _check_stack_args(fn: str, params: Any, H0: Any, C0: Any, nI: int) -> Tuple[int, int, int]:
    _check_float_array(fn, "params", params, 1)
    _check_float_array(fn, "H0", H0, 3)
    _check_float_array(fn, "C0", C0, 3)
    _check_shape(fn, "C0", C0, tuple(H0.shape), " (the same shape as H0: (depth, dirs, nO))")
    depth, dirs, nO = (int(v) for v in H0.shape)
    if depth < 1 or nO < 1:
        raise ValueError(
            f"{_where(fn)}: argument 'H0' has shape {tuple(H0.shape)}; depth and nO must be at least 1."
        )
    if dirs not in (1, 2):
        raise ValueError(
            f"{_where(fn)}: argument 'H0' has shape {tuple(H0.shape)}; its second dimension is the "
            f"number of directions and must be 1 or 2, got {dirs}."
        )
    expected = _n_params(depth, dirs, nO, nI)
    if params.shape[0] != expected:
        raise ValueError(
            f"{_where(fn)}: argument 'params' has size {params.shape[0]}, expected {expected} for "
            f"depth={depth}, dirs={dirs}, nO={nO}, nI={nI} (4*nO*(nI_layer+nO+2) per layer and "
            f"direction, nI_layer=nI for the first layer and dirs*nO after it). Check that X's width "
            f"and the shape of H0 match the weights."
        )
    return depth, dirs, nO


# --- shared pieces ----------------------------------------------------------------


def _starts(sizes: List[int]) -> List[int]:
    starts = []
    offset = 0
    for size in sizes:
        starts.append(offset)
        offset += size
    return starts


def _processing_order(sizes: List[int], reverse: bool) -> List[int]:
    # Empty steps can only trail (sizes never increase), so dropping them changes nothing.
    steps = [t for t, size in enumerate(sizes) if size > 0]
    return steps[::-1] if reverse else steps


def _interleave(xp, nO: int):
    """Row permutation taking gate blocks (gate, unit) to Thinc's (unit, gate) order."""
    return xp.arange(4 * nO).reshape((4, nO)).T.ravel()


def _layer_weights(xp, params, offset: int, nO: int, nI: int, perm):
    """Slice one layer/direction out of `params`, rows interleaved, biases summed."""
    sizes = (4 * nO * nI, 4 * nO, 4 * nO * nO, 4 * nO)
    Wx = params[offset : offset + sizes[0]].reshape((4 * nO, nI))
    offset += sizes[0]
    bx = params[offset : offset + sizes[1]]
    offset += sizes[1]
    Wh = params[offset : offset + sizes[2]].reshape((4 * nO, nO))
    offset += sizes[2]
    bh = params[offset : offset + sizes[3]]
    offset += sizes[3]
    return Wx[perm], Wh[perm], (bx + bh)[perm], offset


def _sigmoid_inplace(xp, Z) -> None:
    # 0.5*tanh(0.5*z)+0.5 is the logistic function without exp's overflow warnings.
    Z *= 0.5
    xp.tanh(Z, out=Z)
    Z *= 0.5
    Z += 0.5


def _activate_gates(xp, A) -> None:
    """Turn pre-activations (b, nO, 4) into gates in place: sigmoid f, i, o; tanh candidate."""
    _sigmoid_inplace(xp, A[..., :3])
    xp.tanh(A[..., 3], out=A[..., 3])


# --- Thinc 8.3 packed LSTM ------------------------------------------------------


def _run_direction(xp, Xin, Wx, Wh, bias, c_init, h_init, sizes, starts, reverse, G, C, Y) -> None:
    """One layer in one direction over packed rows, writing gates G, cells C, hiddens Y."""
    nO = Wh.shape[1]
    xp.matmul(Xin, Wx.T, out=G)
    G += bias
    nB = sizes[0] if sizes else 0
    # The carried state keeps the full first-step width: right to left, the batch grows,
    # and rows that have not started yet must still hold the initial state.
    h = xp.empty((nB, nO), dtype=G.dtype)
    c = xp.empty((nB, nO), dtype=G.dtype)
    h[...] = h_init
    c[...] = c_init
    recur = xp.empty((nB, 4 * nO), dtype=G.dtype)
    WhT = Wh.T
    for t in _processing_order(sizes, reverse):
        b, s = sizes[t], starts[t]
        Gt = G[s : s + b]
        xp.matmul(h[:b], WhT, out=recur[:b])
        Gt += recur[:b]
        A = Gt.reshape((b, nO, 4))
        _activate_gates(xp, A)
        Ct = C[s : s + b]
        Yt = Y[s : s + b]
        xp.multiply(A[..., 0], c[:b], out=Ct)
        Ct += A[..., 1] * A[..., 3]
        xp.tanh(Ct, out=Yt)
        Yt *= A[..., 2]
        h[:b] = Yt
        c[:b] = Ct


def _run_stack(fn: str, ops, params, H0, C0, X, size_at_t, keep_state: bool):
    xp = ops.xp
    X, H0, C0 = as_params_dtype(fn, params, [("X", X, 2), ("H0", H0, 3), ("C0", C0, 3)])
    N, nI = (int(v) for v in X.shape)
    depth, dirs, nO = _check_stack_args(fn, params, H0, C0, nI)
    sizes = _sizes_to_list(fn, "size_at_t", size_at_t, N)
    starts = _starts(sizes)
    # NOTE: Thinc's argument-order quirk, see the module docstring.
    cell_init, hidden_init = H0, C0
    dtype = X.dtype
    perm = _interleave(xp, nO)
    n_layers = depth if keep_state else 1
    Y = xp.zeros((depth if keep_state else 2, dirs, N, nO), dtype=dtype)
    G = xp.zeros((n_layers, dirs, N, 4 * nO), dtype=dtype)
    C = xp.zeros((n_layers, dirs, N, nO), dtype=dtype)
    layer_in = X
    offset = 0
    for i in range(depth):
        # Inference only needs the previous layer's output, so it alternates two buffers.
        y_i = i if keep_state else i % 2
        g_i = i if keep_state else 0
        for d in range(dirs):
            Wx, Wh, bias, offset = _layer_weights(xp, params, offset, nO, layer_in.shape[1], perm)
            _run_direction(
                xp, layer_in, Wx, Wh, bias, cell_init[i, d], hidden_init[i, d],
                sizes, starts, d == 1, G[g_i, d], C[g_i, d], Y[y_i, d],
            )
        layer_in = xp.ascontiguousarray(Y[y_i].transpose((1, 0, 2)).reshape((N, dirs * nO)))
    if dirs == 1:
        # A view would let callers corrupt the saved state by writing to their output.
        layer_in = layer_in.copy()
    if keep_state:
        return layer_in, (Y, G, C, X, H0, C0)
    return layer_in, None


def lstm_forward_training(ops, params, H0, C0, X, size_at_t):
    """Run a stacked, optionally bidirectional LSTM over packed sequences, keeping its state.

    (N, nI) -> (N, dirs*nO); params (P,), H0 and C0 (depth, dirs, nO), size_at_t (nT,).
    Returns Y and the state for `backprop_lstm`: (Y4, G4, C4, X, H0, C0), where Y4 and
    C4 are (depth, dirs, N, nO) hiddens and cells and G4 (depth, dirs, N, 4*nO) the
    activated gates, laid out as Thinc 8.3 stores them.
    """
    return _run_stack("lstm_forward_training", ops, params, H0, C0, X, size_at_t, True)


def lstm_forward_inference(ops, params, H0, C0, X, size_at_t):
    """Run a stacked, optionally bidirectional LSTM over packed sequences.

    (N, nI) -> (N, dirs*nO); the same arguments as `lstm_forward_training`.
    """
    Y, _ = _run_stack("lstm_forward_inference", ops, params, H0, C0, X, size_at_t, False)
    return Y


def _previous_states(xp, Y, C, h_init, c_init, sizes, starts, reverse):
    """For every packed row, the hidden and cell state its step read: (N, nO) each."""
    Hprev = xp.empty_like(Y)
    Cprev = xp.empty_like(C)
    prev = None
    for t in _processing_order(sizes, reverse):
        b, s = sizes[t], starts[t]
        Hprev[s : s + b] = h_init
        Cprev[s : s + b] = c_init
        if prev is not None:
            k = min(b, sizes[prev])
            ps = starts[prev]
            Hprev[s : s + k] = Y[ps : ps + k]
            Cprev[s : s + k] = C[ps : ps + k]
        prev = t
    return Hprev, Cprev


def _backprop_direction(xp, dH, Xin, Wx, Wh, c_init, h_init, sizes, starts, reverse, G, C, Y, dXin):
    """Backprop one layer/direction; dH (N, nO) is consumed. Returns dWx, dWh, dbias (interleaved)."""
    N, nO = Y.shape
    Hprev, Cprev = _previous_states(xp, Y, C, h_init, c_init, sizes, starts, reverse)
    dG = xp.empty((N, 4 * nO), dtype=G.dtype)
    nB = sizes[0] if sizes else 0
    # Gradients flowing back into the state the later-processed step read. Rows past a
    # step's width stay zero, which is right: those sequences had already ended.
    dh_carry = xp.zeros((nB, nO), dtype=G.dtype)
    dc_carry = xp.zeros((nB, nO), dtype=G.dtype)
    for t in reversed(_processing_order(sizes, reverse)):
        b, s = sizes[t], starts[t]
        A = G[s : s + b].reshape((b, nO, 4))
        hf, hi, ho, hc = A[..., 0], A[..., 1], A[..., 2], A[..., 3]
        dh = dH[s : s + b]
        dh += dh_carry[:b]
        tanh_c = xp.tanh(C[s : s + b])
        dc = dc_carry[:b] + dh * ho * (1 - tanh_c * tanh_c)
        D = dG[s : s + b].reshape((b, nO, 4))
        D[..., 0] = dc * Cprev[s : s + b] * hf * (1 - hf)
        D[..., 1] = dc * hc * hi * (1 - hi)
        D[..., 2] = dh * tanh_c * ho * (1 - ho)
        D[..., 3] = dc * hi * (1 - hc * hc)
        xp.multiply(dc, hf, out=dc_carry[:b])
        xp.matmul(dG[s : s + b], Wh, out=dh_carry[:b])
    dXin += dG @ Wx
    return dG.T @ Xin, dG.T @ Hprev, dG.sum(axis=0)


def backprop_lstm(ops, dY, lengths, params, fwd_state):
    """Gradients of `lstm_forward_training` w.r.t. X and params.

    dY (N, dirs*nO) -> dX (N, nI), d_params (P,); lengths is the size_at_t of the forward
    pass. The gradient of the two bias vectors of a layer/direction is the same, since
    only their sum enters the computation.
    """
    fn = "backprop_lstm"
    xp = ops.xp
    if not isinstance(fwd_state, tuple) or len(fwd_state) != 6:
        got = f"a {len(fwd_state)}-tuple" if isinstance(fwd_state, tuple) else type(fwd_state).__name__
        raise ValueError(
            f"{_where(fn)}: argument 'fwd_state' must be the 6-tuple (Y, G, C, X, H0, C0) returned "
            f"by plait's lstm_forward_training, got {got}. Thinc's 4-tuple lacks the initial states "
            f"that exact gradients need; run the forward pass with plait."
        )
    Y, G, C, X, H0, C0 = fwd_state
    for name, arr, ndim in (("fwd_state[0] (Y)", Y, 4), ("fwd_state[1] (G)", G, 4),
                            ("fwd_state[2] (C)", C, 4), ("fwd_state[3] (X)", X, 2)):
        _check_float_array(fn, name, arr, ndim)
    N, nI = (int(v) for v in X.shape)
    depth, dirs, nO = _check_stack_args(fn, params, H0, C0, nI)
    _check_shape(fn, "fwd_state[0] (Y)", Y, (depth, dirs, N, nO))
    _check_shape(fn, "fwd_state[1] (G)", G, (depth, dirs, N, 4 * nO))
    _check_shape(fn, "fwd_state[2] (C)", C, (depth, dirs, N, nO))
    (dY,) = as_params_dtype(fn, params, [("dY", dY, 2)])
    _check_shape(fn, "dY", dY, (N, dirs * nO), " (the shape of the forward output)")
    _check_same_dtype(fn, [("dY", dY), ("params", params), ("fwd_state[0] (Y)", Y),
                           ("fwd_state[3] (X)", X)])
    sizes = _sizes_to_list(fn, "lengths", lengths, N)
    starts = _starts(sizes)
    cell_init, hidden_init = H0, C0  # NOTE: Thinc's argument-order quirk, as in the forward pass.
    perm = _interleave(xp, nO)
    d_params = xp.zeros(params.shape, dtype=params.dtype)
    # Slice offsets of every layer/direction, so layers can be visited top-down.
    layout = []
    offset = 0
    for i in range(depth):
        nI_layer = nI if i == 0 else dirs * nO
        for d in range(dirs):
            layout.append((i, d, offset, nI_layer))
            offset += 4 * nO * (nI_layer + nO + 2)
    d_out = dY
    for i in reversed(range(depth)):
        layer_in = X if i == 0 else Y[i - 1].transpose((1, 0, 2)).reshape((N, dirs * nO))
        dXin = xp.zeros(layer_in.shape, dtype=X.dtype)
        d_out3 = d_out.reshape((N, dirs, nO))
        for d in range(dirs):
            _, _, offset, nI_layer = layout[i * dirs + d]
            Wx, Wh, _, _ = _layer_weights(xp, params, offset, nO, nI_layer, perm)
            dH = xp.ascontiguousarray(d_out3[:, d, :]).copy()
            dWx, dWh, dbias = _backprop_direction(
                xp, dH, layer_in, Wx, Wh, cell_init[i, d], hidden_init[i, d],
                sizes, starts, d == 1, G[i, d], C[i, d], Y[i, d], dXin,
            )
            n_wx, n_b, n_wh = 4 * nO * nI_layer, 4 * nO, 4 * nO * nO
            slot = d_params[offset : offset + n_wx + 2 * n_b + n_wh]
            slot[:n_wx].reshape((4 * nO, nI_layer))[perm] = dWx
            slot[n_wx : n_wx + n_b][perm] = dbias
            slot[n_wx + n_b : n_wx + n_b + n_wh].reshape((4 * nO, nO))[perm] = dWh
            slot[n_wx + n_b + n_wh :][perm] = dbias
        d_out = dXin
    return d_out, d_params


# --- Thinc 8.0 single-layer LSTM over a padded batch ----------------------------------


def recurrent_lstm(ops, W, b, h_init, c_init, inputs, is_train=True):
    """Run a one-layer, left-to-right LSTM over a padded batch.

    (nL, nB, nI) -> (nL, nB, nO); W (4*nO, nI+nO) with input columns first, b (4*nO,),
    h_init and c_init (nO,), gate blocks forget, input, output, candidate. Returns Y and
    (gates (nL, nB, 4*nO), cells (nL+1, nB, nO) starting with c_init, inputs
    (nL, nB, nI+nO): each step's input row and the hidden state it read). is_train is
    accepted for Thinc's signature; the state is returned either way.
    """
    fn = "recurrent_lstm"
    xp = ops.xp
    _check_float_array(fn, "h_init", h_init, 1)
    _check_float_array(fn, "W", W, 2)
    _check_float_array(fn, "b", b, 1)
    _check_float_array(fn, "c_init", c_init, 1)
    _check_float_array(fn, "inputs", inputs, 3)
    nO = int(h_init.shape[0])
    nL, nB, nI = (int(v) for v in inputs.shape)
    _check_shape(fn, "W", W, (4 * nO, nI + nO), f" for nO={nO} (from h_init) and nI={nI} (from inputs)")
    _check_shape(fn, "b", b, (4 * nO,), f" for nO={nO} (from h_init)")
    _check_shape(fn, "c_init", c_init, (nO,), " (the shape of h_init)")
    _check_same_dtype(fn, [("inputs", inputs), ("W", W), ("b", b), ("h_init", h_init), ("c_init", c_init)])
    dtype = inputs.dtype
    G = xp.empty((nL, nB, 4 * nO), dtype=dtype)
    C = xp.empty((nL + 1, nB, nO), dtype=dtype)
    S = xp.empty((nL, nB, nI + nO), dtype=dtype)
    Y = xp.empty((nL, nB, nO), dtype=dtype)
    S[:, :, :nI] = inputs
    C[0] = c_init
    G2 = G.reshape((nL * nB, 4 * nO))
    xp.matmul(inputs.reshape((nL * nB, nI)), W[:, :nI].T, out=G2)
    G2 += b
    WhT = W[:, nI:].T
    h = xp.empty((nB, nO), dtype=dtype)
    h[...] = h_init
    for t in range(nL):
        S[t, :, nI:] = h
        Gt = G[t]
        Gt += h @ WhT
        _sigmoid_inplace(xp, Gt[:, : 3 * nO])
        xp.tanh(Gt[:, 3 * nO :], out=Gt[:, 3 * nO :])
        hf, hi, ho, hc = Gt[:, :nO], Gt[:, nO : 2 * nO], Gt[:, 2 * nO : 3 * nO], Gt[:, 3 * nO :]
        xp.multiply(hf, C[t], out=C[t + 1])
        C[t + 1] += hi * hc
        xp.tanh(C[t + 1], out=Y[t])
        Y[t] *= ho
        h = Y[t]
    return Y, (G, C, S)


def backprop_recurrent_lstm(ops, dY, fwd_state, params):
    """Gradients of `recurrent_lstm`.

    dY (nL, nB, nO) -> dX (nL, nB, nI), (dW (4*nO, nI+nO), db (4*nO,), d_h_init (nO,),
    d_c_init (nO,)); fwd_state is (gates, cells, inputs) and params is (W, b).
    """
    fn = "backprop_recurrent_lstm"
    xp = ops.xp
    if not (isinstance(fwd_state, tuple) and len(fwd_state) == 3):
        raise ValueError(
            f"{_where(fn)}: argument 'fwd_state' must be the (gates, cells, inputs) tuple returned "
            f"by recurrent_lstm, got {type(fwd_state).__name__}."
        )
    if not (isinstance(params, tuple) and len(params) == 2):
        raise ValueError(
            f"{_where(fn)}: argument 'params' must be the tuple (W, b), got {type(params).__name__}."
        )
    G, C, S = fwd_state
    W, b = params
    _check_float_array(fn, "W", W, 2)
    _check_float_array(fn, "b", b, 1)
    _check_float_array(fn, "dY", dY, 3)
    _check_float_array(fn, "fwd_state[0] (gates)", G, 3)
    _check_float_array(fn, "fwd_state[1] (cells)", C, 3)
    _check_float_array(fn, "fwd_state[2] (inputs)", S, 3)
    nL, nB, nO = (int(v) for v in dY.shape)
    nI = int(W.shape[1]) - nO
    if nI < 0:
        raise ValueError(
            f"{_where(fn)}: argument 'W' has shape {tuple(W.shape)}, too narrow for nO={nO} (from dY); "
            f"expected (4*nO, nI+nO)."
        )
    _check_shape(fn, "W", W, (4 * nO, nI + nO), f" for nO={nO} (from dY)")
    _check_shape(fn, "b", b, (4 * nO,), f" for nO={nO} (from dY)")
    _check_shape(fn, "fwd_state[0] (gates)", G, (nL, nB, 4 * nO), " for dY's (nL, nB, nO)")
    _check_shape(fn, "fwd_state[1] (cells)", C, (nL + 1, nB, nO), " for dY's (nL, nB, nO)")
    _check_shape(fn, "fwd_state[2] (inputs)", S, (nL, nB, nI + nO), " for dY's (nL, nB, nO) and W")
    _check_same_dtype(fn, [("dY", dY), ("W", W), ("b", b), ("fwd_state[0] (gates)", G)])
    dtype = dY.dtype
    Wh = W[:, nI:]
    dA = xp.empty((nL, nB, 4 * nO), dtype=dtype)
    dh_carry = xp.zeros((nB, nO), dtype=dtype)
    dc_carry = xp.zeros((nB, nO), dtype=dtype)
    for t in range(nL - 1, -1, -1):
        Gt = G[t]
        hf, hi, ho, hc = Gt[:, :nO], Gt[:, nO : 2 * nO], Gt[:, 2 * nO : 3 * nO], Gt[:, 3 * nO :]
        dh = dY[t] + dh_carry
        tanh_c = xp.tanh(C[t + 1])
        dc = dc_carry + dh * ho * (1 - tanh_c * tanh_c)
        dAt = dA[t]
        dAt[:, :nO] = dc * C[t] * hf * (1 - hf)
        dAt[:, nO : 2 * nO] = dc * hc * hi * (1 - hi)
        dAt[:, 2 * nO : 3 * nO] = dh * tanh_c * ho * (1 - ho)
        dAt[:, 3 * nO :] = dc * hi * (1 - hc * hc)
        xp.multiply(dc, hf, out=dc_carry)
        xp.matmul(dAt, Wh, out=dh_carry)
    dA2 = dA.reshape((nL * nB, 4 * nO))
    dX = (dA2 @ W[:, :nI]).reshape((nL, nB, nI))
    dW = dA2.T @ S.reshape((nL * nB, nI + nO))
    db = dA2.sum(axis=0)
    return dX, (dW, db, dh_carry.sum(axis=0), dc_carry.sum(axis=0))
