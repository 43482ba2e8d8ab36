"""Shared helpers for the backend tests: finite differences, kink-free inputs, strategies.

Everything here works on numpy arrays; tests move data onto the backend with
`ops.asarray` and back with `ops.to_numpy`, so the same checks run on any `Ops`.
"""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Fixtures such as `ops` are function scoped; they are stateless, so re-using one
# across hypothesis examples is safe.
GRAD_SETTINGS = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def numeric_grad(f: Callable[[np.ndarray], float], X: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central-difference gradient of the scalar function `f` at `X`.

    X: float64 array of any shape -> array of the same shape.
    """
    X = np.array(X, dtype="float64", copy=True)
    grad = np.zeros_like(X)
    flat_X = X.reshape(-1)
    flat_grad = grad.reshape(-1)
    for i in range(flat_X.size):
        orig = flat_X[i]
        flat_X[i] = orig + eps
        f_plus = float(f(X))
        flat_X[i] = orig - eps
        f_minus = float(f(X))
        flat_X[i] = orig
        flat_grad[i] = (f_plus - f_minus) / (2 * eps)
    return grad


def numeric_vjp(
    forward: Callable[[np.ndarray], np.ndarray], X: np.ndarray, dY: np.ndarray, eps: float = 1e-6
) -> np.ndarray:
    """Numerical gradient of `sum(forward(X) * dY)` with respect to X."""
    dY = np.asarray(dY, dtype="float64")

    def objective(Z: np.ndarray) -> float:
        Y = np.asarray(forward(Z), dtype="float64")
        assert Y.shape == dY.shape, f"forward returned {Y.shape}, dY is {dY.shape}"
        return float(np.sum(Y * dY))

    return numeric_grad(objective, X, eps)


def away_from_kinks(
    X: np.ndarray, kinks: Iterable[float], margin: float = 1e-3
) -> np.ndarray:
    """Move entries of X that lie within `margin` of a kink to `2 * margin` away from it.

    Central differences straddling a breakpoint measure an average of two slopes,
    which no correct backprop reproduces.
    """
    X = np.array(X, dtype="float64", copy=True)
    for k in kinks:
        near = np.abs(X - k) < margin
        side = np.where(X >= k, 1.0, -1.0)
        X = np.where(near, k + side * 2 * margin, X)
    return X


def distinct_along(rng: np.random.Generator, n: int, shape: Sequence[int], gap: float = 0.1) -> np.ndarray:
    """Values that differ by at least `gap / 2` along a new leading axis of size n.

    -> (n, *shape). Used for max-style ops so that argmax is stable under eps.
    """
    ranks = np.argsort(rng.random((n, *shape)), axis=0).astype("float64")
    noise = rng.uniform(0.0, gap / 2, size=(n, *shape))
    offset = rng.uniform(-1.0, 1.0, size=shape)
    return ranks * gap + noise + offset


def split_rows(X: np.ndarray, lengths: Sequence[int]) -> list:
    """Split X row-wise into consecutive pieces of the given lengths."""
    bounds = np.cumsum([0, *lengths])
    return [X[bounds[i] : bounds[i + 1]] for i in range(len(lengths))]


def concat_rows(Xs: Sequence[np.ndarray], ncols: int) -> np.ndarray:
    """Concatenate pieces row-wise; (0, ncols) when there are none."""
    Xs = [np.asarray(x, dtype="float64") for x in Xs]
    if not Xs:
        return np.zeros((0, ncols), dtype="float64")
    return np.concatenate(Xs, axis=0)


def other_module_ops():
    """An Ops whose array module is not numpy (as CupyOps's is cupy), for checking without a GPU
    that a method given numpy arrays computes with numpy, as Thinc's Ops does."""
    import types

    from plait.backends import Ops

    class OtherModuleOps(Ops):
        xp = types.SimpleNamespace(name="not numpy")

    return OtherModuleOps()


def to_np(ops, value):
    """Backend array (or anything array-like) -> numpy array."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "shape"):
        return ops.to_numpy(value)
    return np.asarray(value)


# --- hypothesis strategies -------------------------------------------------------------

seeds = st.integers(min_value=0, max_value=2**31 - 1)


def small_shapes(min_dims: int = 1, max_dims: int = 3, min_side: int = 0, max_side: int = 5):
    """Array shapes with few elements, so that finite differences stay cheap."""
    return st.lists(
        st.integers(min_value=min_side, max_value=max_side), min_size=min_dims, max_size=max_dims
    ).map(tuple)


def ragged_lengths(min_len: int = 0, max_len: int = 4, min_seqs: int = 0, max_seqs: int = 5):
    """Sequence lengths for ragged batches (zero lengths included when min_len == 0)."""
    return st.lists(
        st.integers(min_value=min_len, max_value=max_len), min_size=min_seqs, max_size=max_seqs
    )
