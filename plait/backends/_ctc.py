"""Connectionist temporal classification: per-sample loss and its gradient, batched, numpy/cupy generic.

The forward-backward recursion runs in log space over the extended label sequence (a blank
before, between and after the labels), one Python step per time step and every sample of the
batch at once. Log-zero is a large finite negative number rather than -inf, so that no step
ever computes inf - inf and no floating-point warnings are raised.
"""
from typing import Any, Tuple

import numpy

__all__ = ["ctc_loss_and_grad", "ctc_check_inputs"]


def _xp(a: Any) -> Any:
    if type(a) is numpy.ndarray:
        return numpy
    from ..util import get_array_module

    return get_array_module(a)


# Log-zero: far below any reachable log-probability, yet a sum of two stays finite in float32.
_LOG_ZERO = -1e30


def _lse3(xp: Any, a: Any, b: Any, c: Any) -> Any:
    m = xp.maximum(xp.maximum(a, b), c)
    return m + xp.log(xp.exp(a - m) + xp.exp(b - m) + xp.exp(c - m))


def _shift(xp: Any, a: Any, k: int, fill: float) -> Any:
    """a (nB, S) shifted right (k > 0) or left (k < 0) along S by |k|, filling with `fill`."""
    out = xp.full_like(a, fill)
    if k > 0:
        out[:, k:] = a[:, :-k]
    else:
        out[:, :k] = a[:, -k:]
    return out


def ctc_check_inputs(
    nT: int, nV: int, labels: Any, input_lengths: Any, label_lengths: Any, blank: int, where: str = "ctc"
) -> None:
    """Raise ValueError unless every sample's lengths, labels and alignment are valid.

    labels (nB, nL) int; input_lengths, label_lengths (nB,) int. A sample is infeasible when
    its input is shorter than its labels plus one blank per pair of equal adjacent labels.
    One host synchronisation on a GPU (the flag), more only when something is wrong.
    """
    xp = _xp(labels)
    nB, nL = labels.shape
    pos = xp.arange(nL)[None, :]
    in_label = pos < label_lengths[:, None]
    bad_label = in_label & ((labels < 0) | (labels >= nV) | (labels == blank))
    repeats = (in_label[:, 1:] & (labels[:, 1:] == labels[:, :-1])).sum(axis=1) if nL > 1 else 0
    needed = label_lengths + repeats
    bad = (
        (input_lengths < 0) | (input_lengths > nT) | (label_lengths < 0) | (label_lengths > nL)
        | bad_label.any(axis=1) | (input_lengths < needed)
    )
    if not bool(bad.any()):
        return
    # Slow path: move to the host and name the first offending sample.
    to_host = (lambda a: a.get()) if xp is not numpy else (lambda a: a)
    bad = to_host(bad)
    inl, lab = to_host(input_lengths), to_host(label_lengths)
    b = int(numpy.flatnonzero(bad)[0])
    if not 0 <= inl[b] <= nT:
        raise ValueError(f"{where}: input_length[{b}] = {int(inl[b])} is outside [0, {nT}] (the number of time steps).")
    if not 0 <= lab[b] <= nL:
        raise ValueError(f"{where}: label_length[{b}] = {int(lab[b])} is outside [0, {nL}] (the width of t).")
    row = to_host(labels)[b, : int(lab[b])]
    wrong = row[(row < 0) | (row >= nV) | (row == blank)]
    if wrong.size:
        raise ValueError(
            f"{where}: sample {b} has label {int(wrong[0])}; labels must be in [0, {nV}) and differ from "
            f"the blank symbol {blank}. Labels: {row.tolist()}."
        )
    need = int(to_host(needed)[b])
    raise ValueError(
        f"{where}: sample {b} cannot be aligned: its {int(lab[b])} labels {row.tolist()} need at least "
        f"{need} time steps (one more per pair of equal adjacent labels), but its input has "
        f"{int(inl[b])}. Shorten the labels or lengthen the input."
    )


def ctc_loss_and_grad(
    log_probs: Any, labels: Any, input_lengths: Any, label_lengths: Any, blank: int
) -> Tuple[Any, Any]:
    """Per-sample CTC negative log-likelihood, and its gradient with respect to the scores.

    log_probs (nT, nB, nV) log-softmax over V; labels (nB, nL) int (entries past label_length are
    ignored); input_lengths, label_lengths (nB,) int; blank: the blank class index.
    Returns loss (nB,) and d_scores (nT, nB, nV): the gradient of loss[b] with respect to the
    unnormalised scores whose log-softmax is log_probs, i.e. softmax minus the per-class state
    occupancy; zero for time steps t >= input_lengths[b]. Inputs are assumed valid (see
    ctc_check_inputs). float16 is computed in float32.
    """
    xp = _xp(log_probs)
    out_dtype = log_probs.dtype
    if out_dtype == numpy.float16:
        log_probs = log_probs.astype(numpy.float32)
    dtype = log_probs.dtype
    nT, nB, nV = log_probs.shape
    nL = labels.shape[1]
    nS = 2 * nL + 1
    NEG = _LOG_ZERO
    input_lengths = input_lengths.astype(numpy.int64)
    label_lengths = label_lengths.astype(numpy.int64)

    # Extended labels: blank at even states, label k at state 2k + 1; padding becomes blank.
    pos = xp.arange(nL)[None, :]
    clean = xp.where(pos < label_lengths[:, None], labels, blank).astype(numpy.int64)
    ext = xp.full((nB, nS), blank, dtype=numpy.int64)
    ext[:, 1::2] = clean
    # A path may jump two states (over a blank) into state s only between different labels.
    skip = xp.zeros((nB, nS), dtype=bool)
    if nL > 1:
        skip[:, 3::2] = clean[:, 1:] != clean[:, :-1]
    nS_b = 2 * label_lengths + 1
    s_idx = xp.arange(nS)[None, :]

    # Emission log-probabilities of each state: (nT, nB, nS).
    emit = xp.take_along_axis(log_probs, xp.broadcast_to(ext[None], (nT, nB, nS)), axis=2)
    neg = xp.asarray(NEG, dtype=dtype)

    alpha = xp.empty((nT, nB, nS), dtype=dtype)
    first = xp.full((nB, nS), NEG, dtype=dtype)
    first[:, 0] = emit[0, :, 0] if nT else NEG
    if nS > 1:
        first[:, 1] = xp.where(label_lengths > 0, emit[0, :, 1], neg) if nT else NEG
    if nT:
        alpha[0] = first
    for t in range(1, nT):
        prev = alpha[t - 1]
        two = xp.where(skip, _shift(xp, prev, 2, NEG), neg)
        alpha[t] = _lse3(xp, prev, _shift(xp, prev, 1, NEG), two) + emit[t]

    # beta[t, b, s]: log-probability of emitting the rest of sample b after t, from state s at t.
    beta = xp.empty((nT, nB, nS), dtype=dtype)
    last = input_lengths - 1
    end_state = (s_idx == nS_b[:, None] - 1) | (s_idx == nS_b[:, None] - 2)
    init = xp.where(end_state, xp.asarray(0, dtype=dtype), neg)
    nxt = xp.full((nB, nS), NEG, dtype=dtype)
    for t in range(nT - 1, -1, -1):
        if t < nT - 1:
            nxt_e = beta[t + 1] + emit[t + 1]
            two = xp.where(_shift(xp, skip, -2, False), _shift(xp, nxt_e, -2, NEG), neg)
            rec = _lse3(xp, nxt_e, _shift(xp, nxt_e, -1, NEG), two)
        else:
            rec = nxt
        started = (t < last)[:, None]
        at_end = (t == last)[:, None]
        beta[t] = xp.where(at_end, init, xp.where(started, rec, neg))

    # Total log-likelihood from t = 0: the state occupancies at any step sum to one.
    if nT:
        joint0 = alpha[0] + beta[0]
        m = joint0.max(axis=1)
        log_z = m + xp.log(xp.exp(joint0 - m[:, None]).sum(axis=1))
    else:
        log_z = xp.zeros((nB,), dtype=dtype)
    # An empty input holds only the empty label sequence, with probability one.
    log_z = xp.where(input_lengths == 0, xp.asarray(0, dtype=dtype), log_z)
    loss = -log_z

    # Occupancy of each state, summed into its class: a weighted bincount serves numpy and cupy.
    live = (xp.arange(nT)[:, None] < input_lengths[None, :])  # (nT, nB)
    gamma = xp.exp(alpha + beta - log_z[None, :, None]) * live[:, :, None]
    flat = (xp.arange(nT)[:, None, None] * nB + xp.arange(nB)[None, :, None]) * nV + ext[None]
    occ = xp.bincount(flat.ravel(), weights=gamma.ravel().astype(numpy.float64), minlength=nT * nB * nV)
    occ = occ.reshape(nT, nB, nV).astype(dtype, copy=False)
    d_scores = (xp.exp(log_probs) * live[:, :, None] - occ).astype(out_dtype, copy=False)
    return loss.astype(out_dtype, copy=False), d_scores
