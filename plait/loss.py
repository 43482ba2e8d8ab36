"""Loss functions: objects with `get_grad`, `get_loss` and `__call__ -> (grad, loss)`.

NOTE: as in Thinc, the categorical losses return the gradient with respect to the logits
before the softmax (`guesses - truths`), because the Softmax layer passes gradients
through unchanged. Their reported loss, like Thinc's, is the sum of squares of that
gradient rather than the cross-entropy itself; it is a progress number, not the value
whose derivative get_grad returns.
"""
from __future__ import annotations

import numbers
from abc import abstractmethod
from typing import Any, Dict, Generic, List, Optional, Sequence, Tuple, TypeVar, Union

import numpy

from .config import registry
from .types import Floats2d, Ints1d
from .util import get_array_module

LossT = TypeVar("LossT")
GradT = TypeVar("GradT")
GuessT = TypeVar("GuessT")
TruthT = TypeVar("TruthT")
IntsOrFloats = Union[Ints1d, Floats2d]
IntsOrFloatsOrStrs = Union[Ints1d, Floats2d, Sequence[int], Sequence[str]]


class Loss(Generic[GuessT, TruthT, GradT, LossT]):
    """Base class of the losses: subclasses implement get_grad and get_loss."""

    def __init__(self, **kwargs: Any) -> None:
        pass

    def __call__(self, guesses: GuessT, truths: TruthT) -> Tuple[GradT, LossT]:
        """Both the gradient and the loss: (get_grad(...), get_loss(...))."""
        return self.get_grad(guesses, truths), self.get_loss(guesses, truths)

    @abstractmethod
    def get_grad(self, guesses: GuessT, truths: TruthT) -> GradT:
        """The gradient of the loss with respect to the guesses (for categorical losses: the logits)."""

    @abstractmethod
    def get_loss(self, guesses: GuessT, truths: TruthT) -> LossT:
        """The scalar loss."""


def _check_guesses(where: str, guesses: Any) -> None:
    if not (hasattr(guesses, "ndim") and hasattr(guesses, "dtype") and hasattr(guesses, "shape")):
        raise TypeError(
            f"{where}: 'guesses' must be a 2d float array, got {type(guesses).__name__}. "
            "Convert it with ops.asarray2f(...)."
        )
    if guesses.ndim != 2:
        raise ValueError(f"{where}: 'guesses' must be 2d (nB, nO), got shape {tuple(guesses.shape)}.")
    if guesses.dtype.kind not in "fiub":
        raise TypeError(f"{where}: 'guesses' must hold numbers, got dtype {guesses.dtype}.")


def _check_same_shape(where: str, guesses: Any, truths: Any) -> None:
    _check_guesses(where, guesses)
    if not hasattr(truths, "shape"):
        raise TypeError(f"{where}: 'truths' must be an array, got {type(truths).__name__}.")
    if tuple(guesses.shape) != tuple(truths.shape):
        raise ValueError(
            f"{where}: mismatched shapes: guesses {tuple(guesses.shape)} vs truths {tuple(truths.shape)}."
        )


def _outside_unit(values: Any) -> bool:
    """Whether a numpy array holds a value below 0 or above 1 (NaNs are neither, as with
    `any(values > 1)`): two reductions without temporaries instead of four passes."""
    if values.size == 0:
        return False
    return bool(numpy.fmin.reduce(values, axis=None) < 0 or numpy.fmax.reduce(values, axis=None) > 1)


def _is_int_label(value: Any) -> bool:
    return isinstance(value, (numbers.Integral, numpy.integer))


class CategoricalCrossentropy(Loss):
    """Cross-entropy of softmax outputs against class labels: (nB, nO) guesses -> (nB, nO) gradient.

    Truths may be class indices (a list of ints or an Ints1d), class names (a list of
    strings, with `names`), or per-class target probabilities (nB, nO). Rows whose truth is
    `missing_value` get zero gradient. With `neg_prefix`, a label such as "!PER" says the
    class PER is wrong and nothing about the others: only PER gets a gradient (target 0).
    """

    names: Optional[Sequence[str]]
    missing_value: Optional[Union[str, int]]
    _name_to_i: Dict[str, int]

    def __init__(
        self,
        *,
        normalize: bool = True,
        names: Optional[Sequence[str]] = None,
        missing_value: Optional[Union[str, int]] = None,
        neg_prefix: Optional[str] = None,
        label_smoothing: float = 0.0,
    ):
        if not isinstance(label_smoothing, numbers.Real) or not 0.0 <= float(label_smoothing) < 1.0:
            raise ValueError(
                f"CategoricalCrossentropy: 'label_smoothing' must be in [0, 1), got {label_smoothing!r}."
            )
        if names is not None and isinstance(names, str):
            raise TypeError(
                f"CategoricalCrossentropy: 'names' must be a sequence of class names, got the string {names!r}."
            )
        self.normalize = normalize
        # An empty list means "no names", as in Thinc (configs write `names = []`).
        self.names = names if names else None
        self.missing_value = missing_value
        self.neg_prefix = neg_prefix
        self.label_smoothing = label_smoothing
        self._name_to_i = {name: i for i, name in enumerate(self.names)} if self.names is not None else {}

    # ------------------------------------------------------------------ truths

    def _is_missing(self, value: Any) -> bool:
        # NOTE: a None label counts as missing when missing_value is None, as in Thinc.
        if isinstance(value, str) != isinstance(self.missing_value, str):
            return value is None and self.missing_value is None
        return bool(value == self.missing_value)

    def _one_hot(self, xp: Any, labels: Any, nO: int, dtype: Any) -> Any:
        smoothing = float(self.label_smoothing)
        if smoothing:
            if nO < 2:
                raise ValueError(
                    f"CategoricalCrossentropy: label smoothing needs at least 2 classes, got nO={nO}."
                )
            if smoothing >= (nO - 1) / nO:
                raise ValueError(
                    f"CategoricalCrossentropy: with {nO} classes 'label_smoothing' must be less than "
                    f"{(nO - 1) / nO}, got {smoothing}: at that point the gold class carries no signal."
                )
        target = xp.full((labels.shape[0], nO), smoothing / max(nO - 1, 1), dtype=dtype)
        target[xp.arange(labels.shape[0]), labels] = 1.0 - smoothing
        return target

    def _check_label_range(self, labels: Any, nO: int) -> None:
        bad = (labels < 0) | (labels >= nO)
        if bool(bad.any()):
            i = int(numpy.flatnonzero(numpy.asarray(bad.get() if hasattr(bad, "get") else bad))[0])
            raise ValueError(
                f"CategoricalCrossentropy: class index {int(labels[i])} at position {i} is outside "
                f"[0, {nO}) for guesses with nO={nO}. Set missing_value=... to skip rows without a label."
            )

    def _label_indices(self, truths: Sequence[Any], nO: int) -> Tuple[List[int], List[int], List[int]]:
        """Class indices, missing rows and negated rows of a list of int or string labels."""
        missing: List[int] = []
        negated: List[int] = []
        indices: List[int] = []
        kinds = {type(v).__name__ for v in truths if not self._is_missing(v)}
        as_ints = all(_is_int_label(v) for v in truths if not self._is_missing(v))
        if not as_ints and not all(isinstance(v, str) for v in truths if not self._is_missing(v)):
            raise TypeError(
                f"CategoricalCrossentropy: a list of truths must hold only ints or only strings, "
                f"got {sorted(kinds)}."
            )
        if not as_ints and self.names is None:
            raise ValueError(
                "CategoricalCrossentropy: cannot read string labels without the class names. "
                "Create the loss with names=[...], e.g. CategoricalCrossentropy(names=['dog', 'cat'])."
            )
        for i, value in enumerate(truths):
            if self._is_missing(value):
                missing.append(i)
                indices.append(0)
            elif as_ints:
                indices.append(int(value))
            else:
                name = value
                if self.neg_prefix and value.startswith(self.neg_prefix):
                    name = value[len(self.neg_prefix):]
                    negated.append(i)
                if name not in self._name_to_i:
                    shown = ", ".join(repr(n) for n in list(self._name_to_i)[:20])
                    raise KeyError(
                        f"CategoricalCrossentropy: unknown label {value!r} at position {i}. "
                        f"Known names: {shown}{', ...' if len(self._name_to_i) > 20 else ''}."
                    )
                indices.append(self._name_to_i[name])
        return indices, missing, negated

    def convert_truths(self, truths: IntsOrFloatsOrStrs, guesses: Floats2d) -> Tuple[Floats2d, Floats2d]:
        """Targets and a 0/1 mask, both (nB, nO), from truths in any accepted form."""
        target, mask = self._targets(truths, guesses)
        if mask is None:
            mask = get_array_module(guesses).ones(guesses.shape, dtype=guesses.dtype)
        return target, mask

    def _targets(self, truths: IntsOrFloatsOrStrs, guesses: Floats2d) -> Tuple[Floats2d, Optional[Floats2d]]:
        """convert_truths' targets and mask, the mask None where it would be all ones."""
        where = "CategoricalCrossentropy"
        _check_guesses(where, guesses)
        xp = get_array_module(guesses)
        nB, nO = guesses.shape
        if self.names is not None and len(self.names) != nO:
            raise ValueError(
                f"{where}: {len(self.names)} names were given, but the guesses have nO={nO} columns."
            )
        dtype = guesses.dtype
        mask: Optional[Floats2d] = None  # made (all ones) where a row or class is first masked

        def ones() -> Floats2d:
            return xp.ones((nB, nO), dtype=dtype) if mask is None else mask

        negated: List[int] = []
        if isinstance(truths, (list, tuple)):
            if len(truths) != nB:
                raise ValueError(f"{where}: got {len(truths)} truths for {nB} rows of guesses.")
            indices, missing, negated = self._label_indices(truths, nO)
            labels = xp.asarray(numpy.asarray(indices, dtype="int64").reshape((nB,)))
            self._check_label_range(labels, nO)
            target = self._one_hot(xp, labels, nO, dtype)
            if missing:
                mask = ones()
                mask[xp.asarray(missing)] = 0
        elif hasattr(truths, "ndim") and hasattr(truths, "dtype"):
            if truths.ndim == 1:
                if truths.dtype.kind not in "iu":
                    raise TypeError(
                        f"{where}: 1d truths must be integer class indices, got dtype {truths.dtype}."
                    )
                if truths.shape[0] != nB:
                    raise ValueError(f"{where}: got {truths.shape[0]} truths for {nB} rows of guesses.")
                labels = truths
                if _is_int_label(self.missing_value):
                    is_missing = truths == self.missing_value
                    mask = ones()
                    mask[is_missing] = 0
                    labels = xp.where(is_missing, 0, truths)
                self._check_label_range(labels, nO)
                target = self._one_hot(xp, labels, nO, dtype)
            elif truths.ndim == 2:
                _check_same_shape(where, guesses, truths)
                if self.label_smoothing:
                    raise ValueError(
                        f"{where}: label smoothing applies to class labels (a list of ints or strings, "
                        "or Ints1d), not to (nB, nO) target probabilities. Smooth the targets yourself "
                        "or set label_smoothing=0."
                    )
                target = truths
                if _is_int_label(self.missing_value):
                    # One-hot rows whose hot class is missing_value mark missing labels.
                    mask = ones()
                    mask[xp.argmax(truths, axis=-1) == self.missing_value] = 0
            else:
                raise ValueError(
                    f"{where}: truths must be 1d class indices or 2d targets, got shape {tuple(truths.shape)}."
                )
        else:
            raise TypeError(
                f"{where}: truths must be a list of ints or strings, an Ints1d or a Floats2d, "
                f"got {type(truths).__name__}."
            )
        if negated:
            rows = xp.asarray(negated)
            cols = labels[rows]
            # Only the negated class is known (to be wrong): target 0 there, the rest masked.
            mask = ones()
            mask[rows] = 0
            mask[rows, cols] = 1
            target[rows, cols] = 0
        return target, mask

    # ------------------------------------------------------------------ loss

    def __call__(self, guesses: Floats2d, truths: IntsOrFloatsOrStrs) -> Tuple[Floats2d, float]:
        """(gradient, loss), computing the gradient once."""
        d_guesses = self.get_grad(guesses, truths)
        return d_guesses, self._get_loss_from_grad(d_guesses)

    def get_grad(self, guesses: Floats2d, truths: IntsOrFloatsOrStrs) -> Floats2d:
        """(guesses - target) * mask, divided by nB if normalize.  (nB, nO) -> (nB, nO)"""
        where = "CategoricalCrossentropy"
        if type(self).convert_truths is CategoricalCrossentropy.convert_truths:
            target, mask = self._targets(truths, guesses)
        else:  # a subclass's own conversion
            target, mask = self.convert_truths(truths, guesses)
        xp = get_array_module(guesses)
        if xp is numpy:
            bad_guesses, bad_target = _outside_unit(guesses), _outside_unit(target)
        else:
            # The four range checks come back to the host in one transfer (one GPU sync, not four).
            flags = xp.stack(
                [xp.any(guesses > 1), xp.any(guesses < 0), xp.any(target > 1), xp.any(target < 0)]
            ).tolist()
            bad_guesses, bad_target = bool(flags[0] or flags[1]), bool(flags[2] or flags[3])
        if bad_guesses:
            raise ValueError(
                f"Cannot calculate {where} loss with guesses outside the [0, 1] interval: they must be "
                f"probabilities (softmax outputs), got values in [{float(guesses.min())}, {float(guesses.max())}]."
            )
        if bad_target:
            raise ValueError(
                f"Cannot calculate {where} loss with truth values outside the [0, 1] interval: got values "
                f"in [{float(target.min())}, {float(target.max())}]."
            )
        d_guesses = guesses - target
        if mask is not None:
            d_guesses = d_guesses * mask
        if self.normalize:
            if d_guesses.dtype.kind == "f":
                d_guesses /= guesses.shape[0]  # a new array either way: the same values in place
            else:
                d_guesses = d_guesses / guesses.shape[0]
        return d_guesses

    def get_loss(self, guesses: Floats2d, truths: IntsOrFloatsOrStrs) -> float:
        """Sum of squares of the gradient (Thinc's progress measure), as an array scalar."""
        return self._get_loss_from_grad(self.get_grad(guesses, truths))

    def _get_loss_from_grad(self, d_guesses: Floats2d) -> float:
        # An array scalar, not float(): on the GPU this avoids a device sync per batch.
        return (d_guesses**2).sum()


@registry.losses("CategoricalCrossentropy.v1")
def configure_CategoricalCrossentropy_v1(
    *,
    normalize: bool = True,
    names: Optional[Sequence[str]] = None,
    missing_value: Optional[Union[str, int]] = None,
) -> CategoricalCrossentropy:
    return CategoricalCrossentropy(normalize=normalize, names=names, missing_value=missing_value)


@registry.losses("CategoricalCrossentropy.v2")
def configure_CategoricalCrossentropy_v2(
    *,
    normalize: bool = True,
    names: Optional[Sequence[str]] = None,
    missing_value: Optional[Union[str, int]] = None,
    neg_prefix: Optional[str] = None,
) -> CategoricalCrossentropy:
    return CategoricalCrossentropy(
        normalize=normalize, names=names, missing_value=missing_value, neg_prefix=neg_prefix
    )


@registry.losses("CategoricalCrossentropy.v3")
def configure_CategoricalCrossentropy_v3(
    *,
    normalize: bool = True,
    names: Optional[Sequence[str]] = None,
    missing_value: Optional[Union[str, int]] = None,
    neg_prefix: Optional[str] = None,
    label_smoothing: float = 0.0,
) -> CategoricalCrossentropy:
    return CategoricalCrossentropy(
        normalize=normalize,
        names=names,
        missing_value=missing_value,
        neg_prefix=neg_prefix,
        label_smoothing=label_smoothing,
    )


class SequenceCategoricalCrossentropy(Loss):
    """CategoricalCrossentropy over a batch of sequences: list of (nL, nO) -> list of (nL, nO).

    With normalize, each sequence's gradient is divided by the number of sequences.
    """

    def __init__(
        self,
        *,
        normalize: bool = True,
        names: Optional[Sequence[str]] = None,
        missing_value: Optional[Union[str, int]] = None,
        neg_prefix: Optional[str] = None,
        label_smoothing: float = 0.0,
    ):
        self.cc = CategoricalCrossentropy(
            normalize=False,
            names=names,
            missing_value=missing_value,
            neg_prefix=neg_prefix,
            label_smoothing=label_smoothing,
        )
        self.normalize = normalize

    def __call__(
        self, guesses: Sequence[Floats2d], truths: Sequence[IntsOrFloatsOrStrs]
    ) -> Tuple[List[Floats2d], float]:
        """(gradients, loss), computing the gradients once."""
        d_guesses = self.get_grad(guesses, truths)
        return d_guesses, self._get_loss_from_grad(d_guesses)

    def get_grad(self, guesses: Sequence[Floats2d], truths: Sequence[IntsOrFloatsOrStrs]) -> List[Floats2d]:
        """One gradient per sequence."""
        if len(guesses) != len(truths):
            raise ValueError(
                f"SequenceCategoricalCrossentropy: got {len(guesses)} sequences of guesses but "
                f"{len(truths)} of truths; pass one truth sequence per guess sequence."
            )
        n = len(guesses)
        batched = self._batched_grad(guesses, truths)
        if batched is not None:
            return batched
        d_guesses = []
        for i, (Y, Y_true) in enumerate(zip(guesses, truths)):
            try:
                dY = self.cc.get_grad(Y, Y_true)
            except (ValueError, TypeError, KeyError) as e:
                msg = e.args[0] if e.args else str(e)
                raise type(e)(f"SequenceCategoricalCrossentropy, sequence {i}: {msg}") from e
            if self.normalize:
                dY = dY / n
            d_guesses.append(dY)
        return d_guesses

    def _batched_grad(
        self, guesses: Sequence[Floats2d], truths: Sequence[IntsOrFloatsOrStrs]
    ) -> Optional[List[Floats2d]]:
        """Every sequence's gradient from one call on the stacked rows, or None.

        Rows are independent (the inner loss does not normalize), so stacking changes nothing
        but the number of calls. Only arrays that stack cleanly take this path; anything else,
        and any error, goes through the per-sequence loop, whose errors name the sequence.
        """
        n = len(guesses)
        if n < 2:
            return None
        g0, t0 = guesses[0], truths[0]
        if not (hasattr(g0, "ndim") and hasattr(t0, "ndim") and getattr(g0, "ndim", 0) == 2):
            return None
        for Y, Y_true in zip(guesses, truths):
            if (
                type(Y) is not type(g0) or Y.ndim != 2 or Y.shape[1] != g0.shape[1] or Y.dtype != g0.dtype
                or type(Y_true) is not type(t0) or getattr(Y_true, "ndim", -1) != t0.ndim
                or Y_true.dtype != t0.dtype or len(Y_true) != len(Y) or Y.shape[0] == 0
                or Y_true.shape[1:] != t0.shape[1:]
            ):
                return None
        xp = get_array_module(g0)
        try:
            dY = self.cc.get_grad(xp.concatenate(guesses), xp.concatenate(truths))
        except (ValueError, TypeError, KeyError):
            return None
        if self.normalize:
            dY /= n
        ends = numpy.cumsum([len(Y) for Y in guesses])
        return [dY[start:end] for start, end in zip([0, *ends[:-1].tolist()], ends.tolist())]

    def get_loss(self, guesses: Sequence[Floats2d], truths: Sequence[IntsOrFloatsOrStrs]) -> float:
        """Sum over sequences of the sum of squared gradients."""
        return self._get_loss_from_grad(self.get_grad(guesses, truths))

    def _get_loss_from_grad(self, d_guesses: Sequence[Floats2d]) -> float:
        loss = 0.0
        for dY in d_guesses:
            loss += self.cc._get_loss_from_grad(dY)
        return loss


@registry.losses("SequenceCategoricalCrossentropy.v1")
def configure_SequenceCategoricalCrossentropy_v1(
    *, normalize: bool = True, names: Optional[Sequence[str]] = None
) -> SequenceCategoricalCrossentropy:
    return SequenceCategoricalCrossentropy(normalize=normalize, names=names)


@registry.losses("SequenceCategoricalCrossentropy.v2")
def configure_SequenceCategoricalCrossentropy_v2(
    *,
    normalize: bool = True,
    names: Optional[Sequence[str]] = None,
    neg_prefix: Optional[str] = None,
) -> SequenceCategoricalCrossentropy:
    return SequenceCategoricalCrossentropy(normalize=normalize, names=names, neg_prefix=neg_prefix)


@registry.losses("SequenceCategoricalCrossentropy.v3")
def configure_SequenceCategoricalCrossentropy_v3(
    *,
    normalize: bool = True,
    names: Optional[Sequence[str]] = None,
    missing_value: Optional[Union[str, int]] = None,
    neg_prefix: Optional[str] = None,
    label_smoothing: float = 0.0,
) -> SequenceCategoricalCrossentropy:
    return SequenceCategoricalCrossentropy(
        normalize=normalize,
        names=names,
        missing_value=missing_value,
        neg_prefix=neg_prefix,
        label_smoothing=label_smoothing,
    )


class L2Distance(Loss):
    """Squared error: gradient guesses - truths (divided by nB if normalize).  (nB, nO) -> (nB, nO)

    The loss is the sum of squares of that gradient.
    """

    def __init__(self, *, normalize: bool = True):
        self.normalize = normalize

    def __call__(self, guesses: Floats2d, truths: Floats2d) -> Tuple[Floats2d, float]:
        """(gradient, loss), computing the gradient once."""
        d_guesses = self.get_grad(guesses, truths)
        return d_guesses, (d_guesses**2).sum()

    def get_grad(self, guesses: Floats2d, truths: Floats2d) -> Floats2d:
        """guesses - truths, over nB if normalize."""
        _check_same_shape("L2Distance", guesses, truths)
        d_guesses = guesses - truths
        if self.normalize:
            d_guesses = d_guesses / guesses.shape[0]
        return d_guesses

    def get_loss(self, guesses: Floats2d, truths: Floats2d) -> float:
        """Sum of squares of get_grad(...)."""
        return (self.get_grad(guesses, truths) ** 2).sum()


@registry.losses("L2Distance.v1")
def configure_L2Distance(*, normalize: bool = True) -> L2Distance:
    return L2Distance(normalize=normalize)


class CosineDistance(Loss):
    """1 - cosine similarity per row, summed (over nB if normalize).  (nB, nO) -> (nB, nO)

    With ignore_zeros, rows whose truth is the zero vector contribute neither loss nor gradient.
    """

    # Added to both vectors so that a zero vector still has a direction.
    _OFFSET = 1e-8

    def __init__(self, *, normalize: bool = True, ignore_zeros: bool = False):
        self.normalize = normalize
        self.ignore_zeros = ignore_zeros

    def __call__(self, guesses: Floats2d, truths: Floats2d) -> Tuple[Floats2d, float]:
        """(gradient, loss)."""
        return self.get_grad(guesses, truths), self.get_loss(guesses, truths)

    def _parts(self, guesses: Floats2d, truths: Floats2d) -> Tuple[Any, Any, Any, Any, Any]:
        _check_same_shape("CosineDistance", guesses, truths)
        xp = get_array_module(guesses)
        Yh = guesses + self._OFFSET
        Y = truths + self._OFFSET
        norm_Yh = xp.linalg.norm(Yh, axis=1, keepdims=True)
        norm_Y = xp.linalg.norm(Y, axis=1, keepdims=True)
        cosine = (Yh * Y).sum(axis=1, keepdims=True) / (norm_Yh * norm_Y)
        return Yh, Y, norm_Yh, norm_Y, cosine

    def _zero_rows(self, truths: Floats2d) -> Any:
        xp = get_array_module(truths)
        return xp.abs(truths).sum(axis=1) == 0

    def get_similarity(self, guesses: Floats2d, truths: Floats2d) -> Floats2d:
        """Cosine similarity of each row pair.  (nB, nO), (nB, nO) -> (nB, 1)"""
        return self._parts(guesses, truths)[-1]

    def get_grad(self, guesses: Floats2d, truths: Floats2d) -> Floats2d:
        """Gradient of the loss with respect to guesses.  -> (nB, nO)"""
        Yh, Y, norm_Yh, norm_Y, cosine = self._parts(guesses, truths)
        # d cos / d Yh = Y / (|Yh| |Y|) - cos * Yh / |Yh|^2
        d_cosine = Y / (norm_Yh * norm_Y) - cosine * (Yh / norm_Yh**2)
        if self.ignore_zeros:
            d_cosine[self._zero_rows(truths)] = 0
        if self.normalize:
            d_cosine = d_cosine / guesses.shape[0]
        return -d_cosine

    def get_loss(self, guesses: Floats2d, truths: Floats2d) -> float:
        """Sum over rows of |cos - 1| (over nB if normalize), as an array scalar."""
        xp = get_array_module(guesses)
        losses = xp.abs(self.get_similarity(guesses, truths) - 1)
        if self.ignore_zeros:
            losses[self._zero_rows(truths)] = 0
        if self.normalize:
            losses = losses / guesses.shape[0]
        return losses.sum()


@registry.losses("CosineDistance.v1")
def configure_CosineDistance(*, normalize: bool = True, ignore_zeros: bool = False) -> CosineDistance:
    return CosineDistance(normalize=normalize, ignore_zeros=ignore_zeros)


__all__ = [
    "SequenceCategoricalCrossentropy",
    "CategoricalCrossentropy",
    "L2Distance",
    "CosineDistance",
]
