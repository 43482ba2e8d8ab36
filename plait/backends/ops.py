"""The reference backend: every op written once with `self.xp` (numpy or cupy) and other Ops calls.

Subclasses (`NumpyOps`, `CupyOps`) override a method only to make it faster, with the identical
signature, and fall back to `super()` outside their fast path.
"""
import itertools
import math
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union, cast

import numpy

from ..types import (
    Array1d,
    Array2d,
    Array3d,
    Array4d,
    ArrayT,
    ArrayXd,
    Batchable,
    DeviceTypes,
    DTypes,
    DTypesFloat,
    DTypesInt,
    Floats1d,
    Floats2d,
    Floats3d,
    Floats4d,
    FloatsT,
    FloatsXd,
    FloatsXdT,
    Generator,
    Ints1d,
    Ints2d,
    Ints3d,
    Ints4d,
    IntsXd,
    List2d,
    ListXd,
    Padded,
    Shape,
    SizedGenerator,
)
from . import _lstm, _murmur
from ._conv_ops import ConvOps, _n_spatial, _settings
from ._checks import (
    broadcast_shape,
    check_array,
    check_conv_arrays,
    check_conv_stride,
    check_pool_which,
    check_writeable,
    check_lengths,
    check_same_shape,
    cumsum_dtype,
    describe,
    elementwise,
    float_dtype,
    inplace_target,
    is_array,
    operand,
    refuse_int_truncation,
)


_SUM_DTYPES = (numpy.dtype("float32"), numpy.dtype("float64"))


def _check_stackable(fn: str, seqs: Sequence[Any], **dims: int) -> None:
    """Raise unless `seqs` are arrays (of the ndim asked) of one dtype that agree on every axis
    but the first, as stacking them along a new batch axis needs."""
    for i, seq in enumerate(seqs):
        check_array(fn, f"seqs[{i}]", seq, **dims)
    if len({seq.ndim for seq in seqs}) != 1:
        raise ValueError(
            f"Ops.{fn}: all sequences must have the same ndim, got {[seq.ndim for seq in seqs]}."
        )
    # dtype objects, not their names: numpy's dtype.__str__ is slow Python, and this runs per batch.
    if len({seq.dtype for seq in seqs}) != 1:
        raise ValueError(
            f"Ops.{fn}: all sequences must have the same dtype, got {sorted({str(s.dtype) for s in seqs})}."
        )
    if len({seq.shape[1:] for seq in seqs}) != 1:
        raise ValueError(
            f"Ops.{fn}: all sequences must agree on every axis but the first, got shapes "
            f"{[tuple(s.shape) for s in seqs]}."
        )


def padded_order(lengths: Any) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """The order of sequences in a Padded batch and its size_at_t, from the sequences' lengths.

    order: the sequences longest first, ties by descending index (as Thinc, so that
    Padded.indices agree exactly); size_at_t[t]: how many are longer than t. Both int64 numpy
    arrays; list2padded lays out its batch by them, and the LSTM packs rows in the same order.
    """
    lengths = numpy.asarray(lengths, dtype=numpy.int64).reshape(-1)
    order = numpy.lexsort((numpy.arange(lengths.size), lengths))[::-1]
    n_steps = int(lengths.max()) if lengths.size else 0
    size_at_t = (lengths[order][:, None] > numpy.arange(n_steps)).sum(axis=0)
    return order, size_at_t


def _window_dtype(dtype: Any) -> Any:
    """seq2col's output dtype: float64 stays, everything else gives float32, as in Thinc
    (whose compiled seq2col takes float32/float64 and whose reference allocates float32)."""
    return dtype if dtype == numpy.float64 else numpy.dtype("float32")


def _canonical_dtype(fn: str, dtype: Any) -> Any:
    return None if dtype is None else numpy.dtype(dtype)


class Ops(ConvOps):
    """Memory allocation and maths for one device; the reference every backend must equal."""

    name: str = "base"
    xp: Any = numpy

    def __init__(self, device_type: DeviceTypes = "cpu", device_id: int = -1, **kwargs) -> None:
        self.device_type = device_type
        self.device_id = device_id

    def __repr__(self) -> str:
        return f"{type(self).__name__}(device_type={self.device_type!r}, device_id={self.device_id})"

    # ------------------------------------------------------------------ C-level access

    def cblas(self) -> Any:
        """A table of C BLAS functions for Cython code; only NumpyOps has one."""
        raise NotImplementedError(
            f"{type(self).__name__}.cblas(): a C BLAS table is only available on NumpyOps "
            f"(use plait.backends.NumpyOps().cblas())."
        )

    # ------------------------------------------------------------------ batching

    def minibatch(
        self,
        size: Union[int, Generator],
        sequence: Batchable,
        *,
        shuffle: bool = False,
        buffer: int = 1,
    ) -> SizedGenerator:
        """Iterate slices of `sequence` of the given size(s), optionally shuffled, re-batched per iteration."""
        if not hasattr(sequence, "__len__"):
            raise ValueError(
                f"Ops.minibatch: 'sequence' must have a length, got {type(sequence).__name__}. "
                f"Pass a list, tuple, array, Ragged, Padded or Pairs."
            )
        if not isinstance(buffer, int) or buffer < 1:
            raise ValueError(f"Ops.minibatch: 'buffer' must be an int >= 1, got {buffer!r}.")
        sizes = self._get_batch_sizes(len(sequence), size)
        n_items = len(sequence)

        def _iter_items() -> Iterator:
            indices = numpy.arange(n_items)
            if shuffle:
                numpy.random.shuffle(indices)
            queue: list = []
            start = 0
            for batch_size in sizes:
                queue.append(self._get_batch(sequence, indices[start : start + batch_size]))
                start += batch_size
                if len(queue) >= buffer:
                    yield from queue
                    queue = []
            yield from queue

        return SizedGenerator(_iter_items, len(sizes))

    def multibatch(
        self,
        size: Union[int, Generator],
        sequence: Batchable,
        *others: Batchable,
        shuffle: bool = False,
        buffer: int = 1,
    ) -> SizedGenerator:
        """Minibatch several sequences together; each batch is a list with one slice per sequence."""
        sequences = (sequence,) + tuple(others)
        for i, seq in enumerate(sequences):
            if not hasattr(seq, "__len__"):
                raise ValueError(
                    f"Ops.multibatch: sequence {i} must have a length, got {type(seq).__name__}."
                )
        n_items = len(sequence)
        for i, seq in enumerate(others, start=1):
            if len(seq) != n_items:
                raise ValueError(
                    f"Ops.multibatch: all sequences must have the same length, but sequence 0 has "
                    f"{n_items} items and sequence {i} has {len(seq)}."
                )
        if not isinstance(buffer, int) or buffer < 1:
            raise ValueError(f"Ops.multibatch: 'buffer' must be an int >= 1, got {buffer!r}.")
        sizes = self._get_batch_sizes(n_items, size)

        def _iter_items() -> Iterator:
            indices = numpy.arange(n_items)
            if shuffle:
                numpy.random.shuffle(indices)
            queue: list = []
            start = 0
            for batch_size in sizes:
                idx = indices[start : start + batch_size]
                queue.append([self._get_batch(seq, idx) for seq in sequences])
                start += batch_size
                if len(queue) >= buffer:
                    yield from queue
                    queue = []
            yield from queue

        return SizedGenerator(_iter_items, len(sizes))

    def _get_batch_sizes(self, length: int, size: Union[int, Generator]) -> List[int]:
        sizes_iter = itertools.repeat(size) if isinstance(size, (int, numpy.integer)) else iter(size)
        sizes: List[int] = []
        total = 0
        while total < length:
            try:
                batch_size = int(next(sizes_iter))
            except StopIteration:
                raise ValueError(
                    f"Ops.minibatch: the 'size' generator ran out after {len(sizes)} batches "
                    f"covering {total} of {length} items. Pass an endless generator or an int."
                ) from None
            if batch_size < 1:
                raise ValueError(f"Ops.minibatch: batch sizes must be >= 1, got {batch_size}.")
            sizes.append(batch_size)
            total += batch_size
        return sizes

    def _get_batch(self, sequence: Any, indices: Any) -> Any:
        if isinstance(sequence, list):
            return [sequence[i] for i in indices]
        if isinstance(sequence, tuple):
            return tuple(sequence[i] for i in indices)
        batch = sequence[indices]
        if hasattr(batch, "ndim") and hasattr(batch, "dtype") and hasattr(batch, "shape"):
            batch = self.as_contig(self.asarray(batch))
        return batch

    # ------------------------------------------------------------------ windows and matrices

    def seq2col(self, seq: Floats2d, nW: int, *, lengths: Optional[Ints1d] = None) -> Floats2d:
        """Concatenate each row with its nW neighbours on each side, zero-padded at sequence edges.

        (M, N) -> (M, N * (2 * nW + 1))
        """
        check_array("seq2col", "seq", seq, ndim=2)
        starts, ends = self._window_bounds("seq2col", seq.shape[0], nW, lengths)
        xp = self.xp
        nM, nF = seq.shape
        out = xp.zeros((nM, (2 * nW + 1), nF), dtype=_window_dtype(seq.dtype))
        rows = xp.arange(nM)
        for k, offset in enumerate(range(-nW, nW + 1)):
            src = rows + offset
            valid = xp.nonzero((src >= starts) & (src < ends))[0]
            out[valid, k] = seq[src[valid]]
        return out.reshape((nM, (2 * nW + 1) * nF))

    def backprop_seq2col(
        self, dY: Floats2d, nW: int, *, lengths: Optional[Ints1d] = None
    ) -> Floats2d:
        """Gradient of seq2col: sum each window slot back onto the row it was copied from.

        (M, N * (2 * nW + 1)) -> (M, N)
        """
        check_array("backprop_seq2col", "dY", dY, ndim=2, kind="r")
        nM = dY.shape[0]
        width = 2 * int(nW) + 1 if isinstance(nW, (int, numpy.integer)) and nW >= 0 else 1
        if dY.shape[1] % width:
            raise ValueError(
                f"Ops.backprop_seq2col: the width of 'dY' ({dY.shape[1]}) must be a multiple of "
                f"2 * nW + 1 = {width} (nW={nW})."
            )
        starts, ends = self._window_bounds("backprop_seq2col", nM, nW, lengths)
        xp = self.xp
        nF = dY.shape[1] // width
        dY3 = dY.reshape((nM, width, nF))
        dX = xp.zeros((nM, nF), dtype=_window_dtype(dY.dtype))
        rows = xp.arange(nM)
        for k, offset in enumerate(range(-nW, nW + 1)):
            src = rows + offset
            valid = xp.nonzero((src >= starts) & (src < ends))[0]
            # Within one offset each source row appears at most once, so plain += is exact.
            dX[src[valid]] += dY3[valid, k]
        return dX

    def _window_bounds(self, fn: str, nM: int, nW: Any, lengths: Optional[Ints1d]) -> Tuple[Any, Any]:
        """For each row, the first row and one past the last row of its sequence."""
        if not isinstance(nW, (int, numpy.integer)) or isinstance(nW, bool) or nW < 0:
            raise ValueError(f"Ops.{fn}: 'nW' must be an int >= 0, got {nW!r}.")
        xp = self.xp
        if lengths is None:
            return xp.zeros((nM,), dtype="int64"), xp.full((nM,), nM, dtype="int64")
        values = check_lengths(fn, lengths, nM, allow_zero=True, X_name="seq" if fn == "seq2col" else "dY")
        lens = xp.asarray(numpy.asarray(values, dtype="int64"))
        seq_ends = xp.cumsum(lens)
        seq_starts = seq_ends - lens
        return xp.repeat(seq_starts, lens), xp.repeat(seq_ends, lens)

    def _gemm_accumulate(self, x: Any, y: Any, out: Any, trans1: bool = False,
                         trans2: bool = False) -> bool:
        """out += op(x) @ op(y) in place, if this backend can do it in one BLAS call; False
        (nothing done) otherwise, and the caller adds a gemm's result itself."""
        return False

    def gemm(
        self,
        x: Floats2d,
        y: Floats2d,
        out: Optional[Floats2d] = None,
        trans1: bool = False,
        trans2: bool = False,
    ) -> Floats2d:
        """Matrix product x @ y (each optionally transposed), written into `out` if given.

        (M, K), (K, N) -> (M, N). As in Thinc's reference, other operands get numpy.dot's
        meaning (a 1-d x or y is a vector, a scalar scales), and any real dtype is taken.
        """
        xp = self.xp
        x = operand("gemm", "x", x, xp)
        y = operand("gemm", "y", y, xp)
        A = x.T if trans1 else x
        B = y.T if trans2 else y
        if A.ndim == 2 and B.ndim == 2:
            if A.shape[1] != B.shape[0]:
                raise ValueError(
                    f"Ops.gemm: inner dimensions differ: x{'.T' if trans1 else ''} has shape {A.shape} "
                    f"and y{'.T' if trans2 else ''} has shape {B.shape}."
                )
            if out is None:
                return xp.matmul(A, B)
            check_array("gemm", "out", out, ndim=2, kind="r")
            if tuple(out.shape) != (A.shape[0], B.shape[1]):
                raise ValueError(
                    f"Ops.gemm: 'out' must have shape {(A.shape[0], B.shape[1])}, got {tuple(out.shape)}."
                )
            check_writeable("gemm", "out", out, "the product is written into it")
            result = numpy.result_type(A.dtype, B.dtype)
            if not numpy.can_cast(result, out.dtype, "same_kind"):
                raise TypeError(
                    f"Ops.gemm: cannot write the {result} product into 'out' ({describe(out)}) "
                    f"without truncating it. Pass an 'out' of dtype {result}, or none."
                )
            xp.matmul(A, B, out=out)
            return out
        try:
            if out is None:
                return xp.dot(A, B)
            check_array("gemm", "out", out)
            xp.dot(A, B, out=out)
            return out
        except ValueError as err:
            raise ValueError(
                f"Ops.gemm: cannot multiply x{'.T' if trans1 else ''} ({describe(A)}) by "
                f"y{'.T' if trans2 else ''} ({describe(B)}){'' if out is None else f' into out ({describe(out)})'}: {err}."
            ) from None

    def tile(self, X: Floats2d, reps: int) -> Floats2d:
        """X repeated `reps` times (numpy.tile semantics)."""
        X = operand("tile", "X", X, self.xp)
        reps_tuple = reps if isinstance(reps, (tuple, list)) else (reps,)
        if any(int(r) < 0 for r in reps_tuple):
            raise ValueError(f"Ops.tile: 'reps' must be >= 0, got {reps!r}.")
        return self.xp.tile(X, reps)

    def affine(self, X: Floats2d, W: Floats2d, b: Floats1d) -> Floats2d:
        """Y = X @ W.T + b.  (nB, nI), (nO, nI), (nO,) -> (nB, nO)

        As in Thinc, b is added as numpy broadcasts it (a (1, nO) row works) and the
        product follows gemm (a 1-d X is one row, without the batch axis).
        """
        xp = self.xp
        if (
            isinstance(X, xp.ndarray)
            and isinstance(W, xp.ndarray)
            and isinstance(b, xp.ndarray)
            and X.ndim == 2
            and W.ndim == 2
            and b.ndim == 1
            and X.shape[1] == W.shape[1]
            and b.shape[0] == W.shape[0]
            and X.dtype.kind == "f"
            and b.dtype.kind == "f"
        ):
            # The common call: nothing to convert, and the float product holds b.
            Y = self.gemm(X, W, trans2=True)
            Y += b
            return Y
        X = operand("affine", "X", X, xp)
        W = operand("affine", "W", W, xp)
        b = operand("affine", "b", b, xp)
        if X.ndim == 2 and W.ndim == 2 and X.shape[1] != W.shape[1]:
            raise ValueError(
                f"Ops.affine: 'X' has {X.shape[1]} columns (shape {tuple(X.shape)}) but 'W' expects "
                f"nI={W.shape[1]} (shape {tuple(W.shape)}, which is (nO, nI))."
            )
        Y = self.gemm(X, W, trans2=True)
        try:
            shape = broadcast_shape("affine", [("X @ W.T", Y), ("b", b)])
        except ValueError:
            shape = None
        if shape != tuple(Y.shape):
            raise ValueError(
                f"Ops.affine: 'b' must have shape ({Y.shape[-1] if Y.ndim else ''},) to match W "
                f"{tuple(W.shape)}, or broadcast to X @ W.T {tuple(Y.shape)}; got {tuple(b.shape)}."
            )
        if not numpy.can_cast(numpy.result_type(Y.dtype, b.dtype), Y.dtype, "same_kind"):
            raise TypeError(
                f"Ops.affine: cannot add 'b' ({describe(b)}) to the integer product X @ W.T "
                f"({describe(Y)}) without truncating it. Pass float arrays: b.astype('float32')."
            )
        Y += b
        return Y

    # ------------------------------------------------------------------ lists, padding, flattening

    def flatten(
        self,
        X: Sequence[ArrayXd],
        dtype: Optional[DTypes] = None,
        pad: int = 0,
        ndim_if_empty: int = 2,
    ) -> ArrayXd:
        """Concatenate a list of arrays along the first axis, with `pad` zero rows around each non-empty one."""
        if X is None or len(X) == 0:
            return self.alloc((0,) * ndim_if_empty, dtype=dtype or "f")
        for i, x in enumerate(X):
            check_array("flatten", f"X[{i}]", x, min_ndim=1)
        if pad < 0:
            raise ValueError(f"Ops.flatten: 'pad' must be >= 0, got {pad}.")
        shape_if_empty = X[0].shape
        nonempty = [x for x in X if x.size != 0]
        if not nonempty:
            return self.alloc(shape_if_empty, dtype=dtype or "f")
        # Joined where the arrays are, as Thinc does (CupyOps given numpy arrays returns numpy);
        # a mix goes to this Ops' device.
        modules = {_xp_of(x) for x in nonempty}
        xp = modules.pop() if len(modules) == 1 else self.xp
        pieces: List[Any] = []
        for x in nonempty:
            if pad:
                pieces.append(xp.zeros((pad,) + tuple(x.shape[1:]), dtype=x.dtype))
            pieces.append(x)
        if pad:
            pieces.append(xp.zeros((pad,) + tuple(nonempty[-1].shape[1:]), dtype=nonempty[-1].dtype))
        result = xp.concatenate([xp.asarray(p) for p in pieces])
        if dtype is not None:
            result = result.astype(_canonical_dtype("flatten", dtype), copy=False)
        return result

    def unflatten(self, X: ArrayXd, lengths: Ints1d, pad: int = 0) -> List[ArrayXd]:
        """Split a flattened array back into pieces of the given lengths (skipping `pad` rows before each).

        NOTE: as in Thinc, the pieces are cut at the running sums of the lengths: rows after
        the last piece are dropped, and lengths that run past X give shorter (or empty) pieces.
        """
        X = self.asarray(X) if not is_array(X) else X
        check_array("unflatten", "X", X, min_ndim=1)
        lens = self.to_numpy(self.asarray(lengths))
        check_array("unflatten", "lengths", lens, ndim=1, kind="i")
        pad = int(pad)
        lens = lens.astype("int64")
        if pad > 0:
            lens = numpy.where(lens > 0, lens + pad, 0)
        if lens.size and max(abs(int(lens.max())), abs(int(lens.min()))) > 2**62 // lens.size:
            # int64 running sums could wrap around (and then cut X at wrong places): summed exactly.
            total = 0
            for i, v in enumerate(lens.tolist()):
                total += v
                if not -(2**63) <= total < 2**63:
                    raise ValueError(
                        f"Ops.unflatten: lengths[:{i + 1}] sum to {total}, past what an int64 "
                        f"holds; they must describe the {X.shape[0]} rows of 'X' (one length per "
                        f"piece)."
                    )
        ends = numpy.cumsum(lens).tolist()
        out: List[ArrayXd] = []
        start = 0
        for end in ends:
            # Slices as numpy.split cuts them (Thinc's implementation), negative bounds included.
            piece = X[start:end]
            out.append(piece[pad:] if pad > 0 else piece)
            start = end
        return out

    def pad(self, seqs: Union[List[Ints2d], List[Floats2d]], round_to: int = 1) -> Array3d:
        """Stack sequences into one (nB, nL, ...) array, zero-padded to the longest (rounded up to `round_to`)."""
        if round_to < 1:
            # The wording is Thinc's, which its tests match.
            raise ValueError(
                f"Ops.pad: Rounding for padding must at least be 1, got round_to={round_to}. "
                f"Pass round_to=1 to pad to the longest sequence."
            )
        if not seqs:
            raise ValueError("Ops.pad: cannot pad an empty list of sequences; pass at least one array.")
        _check_stackable("pad", seqs, min_ndim=1)
        nL = max(seq.shape[0] for seq in seqs)
        nL = -(-nL // round_to) * round_to
        out = self.alloc((len(seqs), nL) + tuple(seqs[0].shape[1:]), dtype=seqs[0].dtype)
        for i, seq in enumerate(seqs):
            out[i, : seq.shape[0]] = seq
        return out

    def unpad(self, padded: Union[Floats3d, Ints3d], lengths: List[int]) -> Union[List2d, ListXd]:
        """Cut each row of a padded batch back to its length.  (nB, nL, ...) -> [(length, ...), ...]

        NOTE: as in Thinc, row i is cut as padded[i, :lengths[i]]: fewer lengths than rows leave
        the last rows out, and lengths past nL (or negative ones) slice as Python does.
        """
        check_array("unpad", "padded", padded, min_ndim=2)
        if len(lengths) > padded.shape[0]:
            raise IndexError(
                f"Ops.unpad: got {len(lengths)} lengths for a batch of {padded.shape[0]} sequences "
                f"('padded' has shape {tuple(padded.shape)}); pass one length per row of 'padded'."
            )
        return [padded[i, : int(length)] for i, length in enumerate(lengths)]

    def list2padded(self, seqs: Union[List[Floats2d], List[Ints2d]]) -> Padded:
        """Pack 2d sequences into a time-major Padded batch, longest first."""
        if not seqs:
            return Padded(self.alloc3f(0, 0, 0), self.alloc1i(0), self.alloc1i(0), self.alloc1i(0))
        _check_stackable("list2padded", seqs, ndim=2)
        order_arr, size_at_t = padded_order([seq.shape[0] for seq in seqs])
        order = order_arr.tolist()
        lengths = [int(seqs[i].shape[0]) for i in order]
        nL = lengths[0]
        # Written time-major directly: one strided copy per sequence into zeros, rather than
        # padding batch-major and transposing (measured 5-6x faster on the tagger's batches).
        data = self.alloc((nL, len(seqs)) + tuple(seqs[0].shape[1:]), dtype=seqs[0].dtype)
        for col, i in enumerate(order):
            data[: lengths[col], col] = seqs[i]
        return Padded(
            data, self.asarray1i(size_at_t), self.asarray1i(lengths), self.asarray1i(order)
        )

    def padded2list(self, padded: Padded) -> List2d:
        """Unpack a Padded batch into its 2d sequences, in their original order."""
        if not all(hasattr(padded, f) for f in ("data", "size_at_t", "lengths", "indices")):
            raise TypeError(
                f"Ops.padded2list: argument 'padded' must be a Padded (data, size_at_t, lengths, "
                f"indices), got {describe(padded)}. Build it with ops.list2padded(...)."
            )
        indices = [int(i) for i in self.to_numpy(padded.indices)]
        lengths = [int(n) for n in self.to_numpy(padded.lengths)]
        check_array("padded2list", "padded.data", padded.data, ndim=3)
        nL, nB = int(padded.data.shape[0]), int(padded.data.shape[1])
        # Thinc fills a list of None by index: a repeated or missing index would leave None
        # entries, a negative one wrap around, a long length silently stop at the padding.
        if len(indices) != nB or len(lengths) != nB or sorted(indices) != list(range(nB)):
            raise ValueError(
                f"Ops.padded2list: padded.indices must be a permutation of 0..{nB - 1} (one per "
                f"column of padded.data, shape {tuple(padded.data.shape)}), with as many lengths; "
                f"got indices {indices[:20]} and {len(lengths)} lengths. Build the Padded with "
                f"ops.list2padded."
            )
        for i, length in enumerate(lengths):
            if not 0 <= length <= nL:
                raise ValueError(
                    f"Ops.padded2list: padded.lengths[{i}] = {length} is outside 0..{nL} (the "
                    f"padded length of padded.data, shape {tuple(padded.data.shape)})."
                )
        data = padded.data.transpose((1, 0, 2))  # (nB, nL, nO)
        out: List[Any] = [None] * len(lengths)
        for row, (index, length) in enumerate(zip(indices, lengths)):
            out[index] = self.as_contig(data[row, :length])
        return cast(List2d, out)

    def insert_into(self, shape, Xs):
        """Copy each array of Xs into the start of row i of a new zero array of `shape`."""
        if not Xs:
            raise ValueError("Ops.insert_into: 'Xs' is empty; pass at least one array.")
        for i, x in enumerate(Xs):
            check_array("insert_into", f"Xs[{i}]", x, min_ndim=1)
        out = self.alloc(shape, dtype=Xs[0].dtype)
        for i, x in enumerate(Xs):
            out[i, : x.shape[0]] = x
        return out

    # ------------------------------------------------------------------ convolution and pooling
    # The arithmetic is _conv_ops.ConvOps's; these check the arguments first, so that every
    # backend refuses non-arrays with a TypeError naming them (not an AttributeError from deep
    # inside), a convolution's stride=None, and max pooling gradients routed outside the window.

    def conv_nd(
        self, X: Any, W: Any, b: Optional[Any] = None, stride: Any = 1, pad: Any = 0,
        dilation: Any = 1, groups: int = 1, cover_all: bool = False,
    ) -> Any:
        check_conv_arrays("conv_nd", (("X", X), ("W", W), ("b", b)), optional=("b",))
        check_conv_stride("conv_nd", stride)
        return super().conv_nd(X, W, b, stride, pad, dilation, groups, cover_all)

    def backprop_conv_nd(
        self, dY: Any, X: Any, W: Any, stride: Any = 1, pad: Any = 0, dilation: Any = 1,
        groups: int = 1, cover_all: bool = False, *, need_dX: bool = True,
    ) -> Tuple[Any, Any, Any]:
        check_conv_arrays("backprop_conv_nd", (("dY", dY), ("X", X), ("W", W)))
        check_conv_stride("backprop_conv_nd", stride)
        return super().backprop_conv_nd(dY, X, W, stride, pad, dilation, groups, cover_all, need_dX=need_dX)

    def deconv_nd(
        self, X: Any, W: Any, b: Optional[Any] = None, stride: Any = 1, pad: Any = 0,
        dilation: Any = 1, groups: int = 1, outsize: Any = None,
    ) -> Any:
        check_conv_arrays("deconv_nd", (("X", X), ("W", W), ("b", b)), optional=("b",))
        check_conv_stride("deconv_nd", stride)
        return super().deconv_nd(X, W, b, stride, pad, dilation, groups, outsize)

    def backprop_deconv_nd(
        self, dY: Any, X: Any, W: Any, stride: Any = 1, pad: Any = 0, dilation: Any = 1, groups: int = 1,
    ) -> Tuple[Any, Any, Any]:
        check_conv_arrays("backprop_deconv_nd", (("dY", dY), ("X", X), ("W", W)))
        check_conv_stride("backprop_deconv_nd", stride)
        return super().backprop_deconv_nd(dY, X, W, stride, pad, dilation, groups)

    def max_pool_nd(
        self, X: Any, ksize: Any, stride: Any = None, pad: Any = 0, cover_all: bool = True
    ) -> Tuple[Any, Any]:
        check_conv_arrays("max_pool_nd", (("X", X),))
        if X.dtype.kind == "b":
            raise TypeError(
                f"Ops.max_pool_nd: argument 'X' must hold numbers, got {describe(X)}. "
                f"Cast it first: X.astype('float32')."
            )
        return super().max_pool_nd(X, ksize, stride, pad, cover_all)

    def backprop_max_pool_nd(
        self, dY: Any, which: Any, in_shape: Sequence[int], ksize: Any, stride: Any = None,
        pad: Any = 0, cover_all: bool = True,
    ) -> Any:
        self._check_pool_which(dY, which, ksize, stride, pad)
        return super().backprop_max_pool_nd(dY, which, in_shape, ksize, stride, pad, cover_all)

    @staticmethod
    def _check_pool_which(dY: Any, which: Any, ksize: Any, stride: Any, pad: Any) -> None:
        """dY an array, `which` integers inside the window (NumpyOps checks before its kernel too)."""
        check_conv_arrays("backprop_max_pool_nd", (("dY", dY),))
        n = _n_spatial(dY, "dY", "Ops.backprop_max_pool_nd")
        k, _, _, _ = _settings(n, "Ops.backprop_max_pool_nd", ksize, stride, pad)
        check_pool_which("backprop_max_pool_nd", which, int(numpy.prod(k)))

    def avg_pool_nd(
        self, X: Any, ksize: Any, stride: Any = None, pad: Any = 0, cover_all: bool = False
    ) -> Any:
        check_conv_arrays("avg_pool_nd", (("X", X),))
        return super().avg_pool_nd(X, ksize, stride, pad, cover_all)

    def backprop_avg_pool_nd(
        self, dY: Any, in_shape: Sequence[int], ksize: Any, stride: Any = None, pad: Any = 0,
        cover_all: bool = False,
    ) -> Any:
        check_conv_arrays("backprop_avg_pool_nd", (("dY", dY),))
        return super().backprop_avg_pool_nd(dY, in_shape, ksize, stride, pad, cover_all)

    def unpool_nd(
        self, X: Any, ksize: Any, stride: Any = None, pad: Any = 0, outsize: Any = None,
        cover_all: bool = True,
    ) -> Any:
        check_conv_arrays("unpool_nd", (("X", X),))
        return super().unpool_nd(X, ksize, stride, pad, outsize, cover_all)

    def backprop_unpool_nd(
        self, dY: Any, in_shape: Sequence[int], ksize: Any, stride: Any = None, pad: Any = 0,
        cover_all: bool = True,
    ) -> Any:
        check_conv_arrays("backprop_unpool_nd", (("dY", dY),))
        return super().backprop_unpool_nd(dY, in_shape, ksize, stride, pad, cover_all)

    # ------------------------------------------------------------------ allocation and conversion

    def get_dropout_mask(self, shape: Shape, drop: Optional[float]) -> FloatsXd:
        """A float32 mask: 0 with probability `drop`, else 1 / (1 - drop) (inverted dropout)."""
        shape = (shape,) if isinstance(shape, (int, numpy.integer)) else tuple(shape)
        if any(int(d) < 0 for d in shape):
            raise ValueError(f"Ops.get_dropout_mask: dimensions of 'shape' must be >= 0, got {shape}.")
        if drop is None or drop <= 0:
            return self.xp.ones(shape, dtype="f")
        if drop >= 1.0:
            return self.alloc_f(shape)
        coinflips = self.xp.random.uniform(0.0, 1.0, shape)
        mask = (coinflips >= drop) / (1.0 - drop)
        return self.asarray(mask, dtype="float32")

    def alloc(self, shape: Shape, *, dtype: Optional[DTypes] = "float32", zeros: bool = True) -> Any:
        """Allocate an array of `shape`, zero-filled unless zeros=False."""
        if isinstance(shape, (int, numpy.integer)):
            shape = (int(shape),)
        shape = tuple(shape)
        for i, d in enumerate(shape):
            if not isinstance(d, (int, numpy.integer)) or isinstance(d, bool):
                raise TypeError(f"Ops.alloc: dimension {i} of 'shape' must be an int, got {d!r} in {shape}.")
            if d < 0:
                raise ValueError(
                    f"Ops.alloc: dimensions must be >= 0, got {d} at position {i} of shape {shape}."
                )
        # NOTE: dtype=None is numpy's default (float64), as in Thinc, which passes it to xp.zeros.
        dt = numpy.dtype(dtype)
        if zeros:
            return self.xp.zeros(shape, dtype=dt)
        return self.xp.empty(shape, dtype=dt)

    def alloc_f(self, shape: Shape, *, dtype: Optional[DTypesFloat] = "float32", zeros: bool = True) -> FloatsXd:
        # Any dtype is taken, as in Thinc (whose tests allocate uint64 keys with alloc1f).
        return self.alloc(shape, dtype=dtype, zeros=zeros)

    def alloc_i(self, shape: Shape, *, dtype: Optional[DTypesInt] = "int32", zeros: bool = True) -> IntsXd:
        return self.alloc(shape, dtype=dtype, zeros=zeros)

    def alloc1f(self, d0: int, *, dtype: Optional[DTypesFloat] = "float32", zeros: bool = True) -> Floats1d:
        return self.alloc_f((d0,), dtype=dtype, zeros=zeros)

    def alloc2f(self, d0: int, d1: int, *, dtype: Optional[DTypesFloat] = "float32", zeros: bool = True) -> Floats2d:
        return self.alloc_f((d0, d1), dtype=dtype, zeros=zeros)

    def alloc3f(
        self, d0: int, d1: int, d2: int, *, dtype: Optional[DTypesFloat] = "float32", zeros: bool = True
    ) -> Floats3d:
        return self.alloc_f((d0, d1, d2), dtype=dtype, zeros=zeros)

    def alloc4f(
        self, d0: int, d1: int, d2: int, d3: int, *, dtype: Optional[DTypesFloat] = "float32", zeros: bool = True
    ) -> Floats4d:
        return self.alloc_f((d0, d1, d2, d3), dtype=dtype, zeros=zeros)

    def alloc1i(self, d0: int, *, dtype: Optional[DTypesInt] = "int32", zeros: bool = True) -> Ints1d:
        return self.alloc_i((d0,), dtype=dtype, zeros=zeros)

    def alloc2i(self, d0: int, d1: int, *, dtype: Optional[DTypesInt] = "int32", zeros: bool = True) -> Ints2d:
        return self.alloc_i((d0, d1), dtype=dtype, zeros=zeros)

    def alloc3i(
        self, d0: int, d1: int, d2: int, *, dtype: Optional[DTypesInt] = "int32", zeros: bool = True
    ) -> Ints3d:
        return self.alloc_i((d0, d1, d2), dtype=dtype, zeros=zeros)

    def alloc4i(
        self, d0: int, d1: int, d2: int, d3: int, *, dtype: Optional[DTypesInt] = "int32", zeros: bool = True
    ) -> Ints4d:
        return self.alloc_i((d0, d1, d2, d3), dtype=dtype, zeros=zeros)

    def reshape(self, array: ArrayT, shape: Shape) -> ArrayT:
        """The same data viewed with a new shape (a copy only where a view is impossible)."""
        check_array("reshape", "array", array)
        if isinstance(shape, (int, numpy.integer)):
            shape = (int(shape),)
        size = math.prod(int(d) for d in shape if int(d) != -1)
        if -1 not in tuple(shape) and size != array.size:
            raise ValueError(
                f"Ops.reshape: cannot reshape {describe(array)} ({array.size} items) to shape "
                f"{tuple(shape)} ({size} items)."
            )
        return array.reshape(tuple(shape))

    def reshape_f(self, array: FloatsXd, shape: Shape) -> FloatsXd:
        return self.reshape(array, shape)

    def reshape_i(self, array: IntsXd, shape: Shape) -> IntsXd:
        return self.reshape(array, shape)

    def reshape1(self, array: ArrayXd, d0: int) -> Array1d:
        return self.reshape(array, (d0,))

    def reshape2(self, array: ArrayXd, d0: int, d1: int) -> Array2d:
        return self.reshape(array, (d0, d1))

    def reshape3(self, array: ArrayXd, d0: int, d1: int, d2: int) -> Array3d:
        return self.reshape(array, (d0, d1, d2))

    def reshape4(self, array: ArrayXd, d0: int, d1: int, d2: int, d3: int) -> Array4d:
        return self.reshape(array, (d0, d1, d2, d3))

    def reshape1f(self, array: FloatsXd, d0: int) -> Floats1d:
        return self.reshape(array, (d0,))

    def reshape2f(self, array: FloatsXd, d0: int, d1: int) -> Floats2d:
        return self.reshape(array, (d0, d1))

    def reshape3f(self, array: FloatsXd, d0: int, d1: int, d2: int) -> Floats3d:
        return self.reshape(array, (d0, d1, d2))

    def reshape4f(self, array: FloatsXd, d0: int, d1: int, d2: int, d3: int) -> Floats4d:
        return self.reshape(array, (d0, d1, d2, d3))

    def reshape1i(self, array: IntsXd, d0: int) -> Ints1d:
        return self.reshape(array, (d0,))

    def reshape2i(self, array: IntsXd, d0: int, d1: int) -> Ints2d:
        return self.reshape(array, (d0, d1))

    def reshape3i(self, array: IntsXd, d0: int, d1: int, d2: int) -> Ints3d:
        return self.reshape(array, (d0, d1, d2))

    def reshape4i(self, array: IntsXd, d0: int, d1: int, d2: int, d3: int) -> Ints4d:
        return self.reshape(array, (d0, d1, d2, d3))

    def asarray(
        self,
        data: Union[ArrayXd, Sequence[ArrayXd], Sequence[Any]],
        *,
        dtype: Optional[DTypes] = None,
    ) -> ArrayXd:
        """`data` as an array of this backend's array module (no copy when it already is one)."""
        xp = self.xp
        if isinstance(data, xp.ndarray):
            array = data
        elif hasattr(data, "numpy") and hasattr(data, "detach"):  # a torch tensor
            array = xp.asarray(data.detach().cpu().numpy())
        elif hasattr(data, "get") and hasattr(data, "__cuda_array_interface__"):  # cupy on a CPU backend
            array = xp.asarray(data.get())
        else:
            # Python lists convert straight to the requested dtype: going through a
            # default dtype first would turn large uint64 values into lossy floats.
            array = xp.asarray(data, dtype=None if dtype is None else numpy.dtype(dtype))
        if dtype is not None:
            array = array.astype(numpy.dtype(dtype), copy=False)
        return array

    def asarray_f(self, data: Union[FloatsXd, Sequence[Any]], *, dtype: Optional[DTypes] = "float32") -> FloatsXd:
        return self.asarray(data, dtype=dtype)

    def asarray_i(self, data: Union[IntsXd, Sequence[Any]], *, dtype: Optional[DTypes] = "int32") -> IntsXd:
        return self.asarray(data, dtype=dtype)

    def asarray1f(self, data: Union[Floats1d, Sequence[float]], *, dtype: Optional[DTypes] = "float32") -> Floats1d:
        return self._asarray_nd("asarray1f", data, 1, dtype)

    def asarray2f(
        self, data: Union[Floats2d, Sequence[Sequence[float]]], *, dtype: Optional[DTypes] = "float32"
    ) -> Floats2d:
        return self._asarray_nd("asarray2f", data, 2, dtype)

    def asarray3f(
        self, data: Union[Floats3d, Sequence[Sequence[Sequence[float]]]], *, dtype: Optional[DTypes] = "float32"
    ) -> Floats3d:
        return self._asarray_nd("asarray3f", data, 3, dtype)

    def asarray4f(
        self,
        data: Union[Floats4d, Sequence[Sequence[Sequence[Sequence[float]]]]],
        *,
        dtype: Optional[DTypes] = "float32",
    ) -> Floats4d:
        return self._asarray_nd("asarray4f", data, 4, dtype)

    def asarray1i(self, data: Union[Ints1d, Sequence[int]], *, dtype: Optional[DTypes] = "int32") -> Ints1d:
        return self._asarray_nd("asarray1i", data, 1, dtype)

    def asarray2i(
        self, data: Union[Ints2d, Sequence[Sequence[int]]], *, dtype: Optional[DTypes] = "int32"
    ) -> Ints2d:
        return self._asarray_nd("asarray2i", data, 2, dtype)

    def asarray3i(
        self, data: Union[Ints3d, Sequence[Sequence[Sequence[int]]]], *, dtype: Optional[DTypes] = "int32"
    ) -> Ints3d:
        return self._asarray_nd("asarray3i", data, 3, dtype)

    def asarray4i(
        self,
        data: Union[Ints4d, Sequence[Sequence[Sequence[Sequence[int]]]]],
        *,
        dtype: Optional[DTypes] = "int32",
    ) -> Ints4d:
        return self._asarray_nd("asarray4i", data, 4, dtype)

    def _asarray_nd(self, fn: str, data: Any, ndim: int, dtype: Optional[DTypes]) -> Any:
        # NOTE: the number of dimensions in the name is a type hint, as in Thinc: data of
        # another rank is returned as it is (Thinc's own code passes 1-d data to asarray2f).
        return self.asarray(data, dtype=dtype)

    def as_contig(self, data: ArrayT, dtype: Optional[DTypes] = None) -> ArrayT:
        """A C-contiguous version of `data` (the same object when it already is one of that dtype)."""
        try:
            contiguous = data.flags["C_CONTIGUOUS"]
        except AttributeError:
            raise TypeError(
                f"Ops.as_contig: argument 'data' must be an array, got {describe(data)}. "
                f"Convert it first with ops.asarray(...)."
            ) from None
        if contiguous and (dtype is None or numpy.dtype(dtype) == data.dtype):
            return data
        return self.xp.ascontiguousarray(data, dtype=dtype)

    def unzip(self, data: Tuple[Any, ...]) -> Tuple[ArrayXd, ArrayXd]:
        """Split a sequence of pairs into two arrays."""
        X, y = zip(*data)
        return self.asarray(X), self.asarray(y)

    def to_numpy(self, data, *, byte_order=None):
        """`data` as a numpy array, optionally converted to byte order "<", ">", "=" or "|"."""
        if isinstance(data, numpy.ndarray):
            array = data
        elif hasattr(data, "get"):
            array = data.get()
        elif hasattr(data, "numpy") and hasattr(data, "detach"):
            array = data.detach().cpu().numpy()
        else:
            array = numpy.asarray(data)
        if byte_order is not None:
            array = array.astype(array.dtype.newbyteorder(byte_order), copy=False)
        return array

    # ------------------------------------------------------------------ sigmoid, tanh, softmax

    # NOTE: the elementwise ops take what Thinc's numpy formulas take (see _checks.py): any real
    # dtype, operands that broadcast, array-likes. Integers compute in float64 (the dtype numpy
    # gives them against a Python float); with inplace=True the result is written into the
    # input Thinc writes into, which must hold it (TypeError where floats would be truncated
    # into integers, which Thinc does silently in some ops and refuses in the others).

    def _ew(
        self, fn: str, named: Sequence[Tuple[str, Any]], *, floats: bool = True, broadcast: bool = True
    ) -> Tuple[List[Any], Tuple[int, ...], Any]:
        return elementwise(fn, self.xp, named, floats=floats, broadcast=broadcast)

    def _into(
        self, fn: str, name: str, target: Any, shape: Tuple[int, ...], dtype: Any, *, required: bool = True
    ) -> Any:
        return inplace_target(fn, name, target, self.xp, shape, dtype, required=required)

    @staticmethod
    def _scaled(out: Any, dY: Any, grad: Any) -> Any:
        """dY * grad, written into `out` when there is one."""
        if out is None:
            return dY * grad
        out *= grad
        return out

    def sigmoid(self, X: FloatsXdT, *, inplace: bool = False) -> FloatsXdT:
        """1 / (1 + exp(-X)), with X clipped to [-20, 20] to avoid overflow."""
        (X_,), shape, dtype = self._ew("sigmoid", [("X", X)])
        out = self._into("sigmoid", "X", X, shape, dtype) if inplace else None
        xp = self.xp
        Y = xp.clip(X_, -20.0, 20.0, out=xp.empty_like(X_) if out is None else out)
        xp.negative(Y, out=Y)
        xp.exp(Y, out=Y)
        Y += 1.0
        xp.reciprocal(Y, out=Y)
        return Y

    def dsigmoid(self, Y: FloatsXdT, *, inplace: bool = False) -> FloatsXdT:
        """Derivative of the sigmoid from its output: Y * (1 - Y)."""
        # In place the product stays in Y's dtype, integers included, as in Thinc.
        (Y_,), shape, dtype = self._ew("dsigmoid", [("Y", Y)], floats=not inplace)
        out = self._into("dsigmoid", "Y", Y, shape, dtype) if inplace else None
        if out is not None:
            out *= 1 - out
            return out
        return Y_ * (1 - Y_)

    def backprop_sigmoid(self, dY: FloatsXdT, Y: FloatsXdT, *, inplace: bool = False) -> FloatsXdT:
        """dX = dY * Y * (1 - Y); in place, written into Y (as Thinc does), which dY broadcasts to."""
        (dY_, Y_), shape, dtype = self._ew("backprop_sigmoid", [("dY", dY), ("Y", Y)], floats=not inplace)
        out = self._into("backprop_sigmoid", "Y", Y, shape, dtype) if inplace else None
        if out is not None:
            out *= 1 - out
            out *= dY_
            return out
        return dY_ * (Y_ * (1 - Y_))

    def dtanh(self, Y: FloatsT, *, inplace: bool = False) -> FloatsT:
        """Derivative of tanh from its output: 1 - Y**2 (exact on integers, except in place)."""
        (Y_,), shape, dtype = self._ew("dtanh", [("Y", Y)], floats=inplace)
        out = self._into("dtanh", "Y", Y, shape, dtype) if inplace else None
        if out is not None:
            out *= out
            out *= -1
            out += 1
            return out
        return 1 - Y_ * Y_

    def softmax(
        self, x: FloatsT, *, inplace: bool = False, axis: int = -1, temperature: float = 1.0
    ) -> FloatsT:
        """exp(x / T) normalised to sum to 1 along `axis` (max-shifted for stability).

        With inplace=True the result goes into x where that changes nothing but the write (x is
        a float array of the result's dtype); otherwise it is a new array, as always in Thinc,
        whose softmax ignores inplace.
        """
        (x_,), shape, dtype = self._ew("softmax", [("x", x)])
        if temperature == 0:
            raise ValueError(
                f"Ops.softmax: 'temperature' must not be 0 (x / 0 has no softmax), got {temperature!r}."
            )
        xp = self.xp
        out = self._into("softmax", "x", x, shape, dtype, required=False) if inplace else None
        if out is None:
            out = x_ / temperature if temperature != 1.0 else x_.copy()
        elif temperature != 1.0:
            out /= temperature
        out -= out.max(axis=axis, keepdims=True)
        xp.exp(out, out=out)
        out /= out.sum(axis=axis, keepdims=True)
        return out

    def backprop_softmax(
        self, Y: FloatsT, dY: FloatsT, *, axis: int = -1, temperature: float = 1.0
    ) -> FloatsT:
        """dX = Y * (dY - sum(Y * dY, axis)) / T."""
        # Integers stay integers where Thinc's formula is exact on them (no temperature).
        (Y_, dY_), _, _ = self._ew("backprop_softmax", [("Y", Y), ("dY", dY)], floats=temperature != 1.0)
        dX = Y_ * dY_
        dX -= Y_ * dX.sum(axis=axis, keepdims=True)
        if temperature != 1.0:
            dX /= temperature
        return dX

    def log_softmax(self, X: FloatsT, *, axis: int = -1) -> FloatsT:
        """log(softmax(X)) along `axis`, as X - max - log(sum(exp(X - max))) (a plait addition).

        Never forms softmax itself, so very negative scores give finite logs instead of log(0).
        """
        (X_,), _, _ = self._ew("log_softmax", [("X", X)])
        xp = self.xp
        Y = X_ - X_.max(axis=axis, keepdims=True)
        Y -= xp.log(xp.exp(Y).sum(axis=axis, keepdims=True))
        return Y

    def backprop_log_softmax(self, Y: FloatsT, dY: FloatsT, *, axis: int = -1) -> FloatsT:
        """dX = dY - exp(Y) * sum(dY, axis), for Y = log_softmax(X) (a plait addition)."""
        (Y_, dY_), _, _ = self._ew("backprop_log_softmax", [("Y", Y), ("dY", dY)])
        dX = self.xp.exp(Y_) * -dY_.sum(axis=axis, keepdims=True)
        dX += dY_
        return dX

    def softmax_sequences(
        self, Xs: Floats2d, lengths: Ints1d, *, inplace: bool = False, axis: int = -1
    ) -> Floats2d:
        """Softmax over the rows of each sequence, separately per column.  (nN, nO) -> (nN, nO)

        `axis` is accepted and ignored, as in Thinc: the normalisation is always over each
        sequence's rows. With inplace=True the result goes into Xs where Xs can hold it exactly
        (Thinc ignores inplace here).
        """
        (Xs_,), shape, dtype = self._ew("softmax_sequences", [("Xs", Xs)])
        if Xs_.ndim >= 3:
            raise NotImplementedError(
                f"Ops.softmax_sequences supports 2d input only, got {describe(Xs_)}."
            )
        check_lengths("softmax_sequences", lengths, Xs_.shape[0] if Xs_.ndim else None, allow_zero=True, X_name="Xs")
        xp = self.xp
        out = self._into("softmax_sequences", "Xs", Xs, shape, dtype, required=False) if inplace else None
        # Clipping (rather than max-shifting per sequence) keeps results identical to Thinc's.
        out = xp.clip(Xs_, -20.0, 20.0, out=xp.empty_like(Xs_) if out is None else out)
        xp.exp(out, out=out)
        out /= self.backprop_reduce_sum(self.reduce_sum(out, lengths), lengths)
        return out

    def backprop_softmax_sequences(self, dY: Floats2d, Y: Floats2d, lengths: Ints1d) -> Floats2d:
        """Gradient of softmax_sequences: Y * (dY - per-sequence sum(Y * dY))."""
        (dY_, Y_), shape, _ = self._ew("backprop_softmax_sequences", [("dY", dY), ("Y", Y)])
        check_lengths("backprop_softmax_sequences", lengths, shape[0] if shape else None, allow_zero=True, X_name="Y")
        dX = Y_ * dY_
        dX -= Y_ * self.backprop_reduce_sum(self.reduce_sum(dX, lengths), lengths)
        return dX

    # ------------------------------------------------------------------ LSTM

    def recurrent_lstm(
        self,
        W: Floats2d,
        b: Floats1d,
        h_init: Floats1d,
        c_init: Floats1d,
        inputs: Floats3d,
        is_train: bool = True,
    ) -> Tuple[Floats3d, Tuple[Floats3d, Floats3d, Floats3d]]:
        """One LSTM layer over a time-major batch.  (nL, nB, nI) -> (nL, nB, nO)"""
        return _lstm.recurrent_lstm(self, W, b, h_init, c_init, inputs, is_train)

    def backprop_recurrent_lstm(
        self,
        dY: Floats3d,
        fwd_state: Tuple[Floats3d, Floats3d, Floats3d],
        params: Tuple[Floats2d, Floats1d],
    ) -> Tuple[Floats3d, Tuple[Floats2d, Floats1d, Floats1d, Floats1d]]:
        """Gradients of recurrent_lstm for the inputs, W, b, h_init and c_init."""
        return _lstm.backprop_recurrent_lstm(self, dY, fwd_state, params)

    # The LSTM runs where its weights are, as Thinc's Ops does (it computes with the array module
    # of `params`): CupyOps given numpy weights computes on the host and returns numpy arrays.
    def _lstm_ops(self, params: Any) -> "Ops":
        return self if _xp_of(params) is self.xp else _ops_of(params)

    def lstm_forward_training(
        self, params: Floats1d, H0: Floats3d, C0: Floats3d, X: Floats2d, size_at_t: Ints1d
    ) -> Tuple[Floats2d, Tuple]:
        """Stacked (bi)LSTM over packed time-major rows, keeping what backprop_lstm needs."""
        ops = self._lstm_ops(params)
        if ops is not self:
            return ops.lstm_forward_training(params, H0, C0, X, size_at_t)
        return _lstm.lstm_forward_training(self, params, H0, C0, X, size_at_t)

    def lstm_forward_inference(
        self, params: Floats1d, H0: Floats3d, C0: Floats3d, X: Floats2d, size_at_t: Ints1d
    ) -> Floats2d:
        ops = self._lstm_ops(params)
        if ops is not self:
            return ops.lstm_forward_inference(params, H0, C0, X, size_at_t)
        return _lstm.lstm_forward_inference(self, params, H0, C0, X, size_at_t)

    def backprop_lstm(
        self, dY: Floats2d, lengths: Ints1d, params: Floats1d, fwd_state: Tuple
    ) -> Tuple[Floats2d, Floats1d]:
        ops = self._lstm_ops(params)
        if ops is not self:
            return ops.backprop_lstm(dY, lengths, params, fwd_state)
        return _lstm.backprop_lstm(self, dY, lengths, params, fwd_state)

    # ------------------------------------------------------------------ layer normalization

    def _check_layer_norm(self, fn: str, X: Floats2d, G: Floats1d, X_name: str = "X") -> None:
        check_array(fn, X_name, X, ndim=2, kind="f")
        check_array(fn, "G", G, ndim=1, kind="f")
        if G.shape[0] != X.shape[1]:
            raise ValueError(
                f"Ops.{fn}: 'G' must have shape ({X.shape[1]},) to match {X_name} {tuple(X.shape)}, "
                f"got {tuple(G.shape)}."
            )

    def layer_norm(
        self, X: Floats2d, G: Floats1d, b: Floats1d, eps: float = 1e-08
    ) -> Tuple[Floats2d, Floats1d, Floats1d]:
        """Normalise each row to zero mean and unit variance, then scale by G and shift by b.

        (nB, nI), (nI,), (nI,) -> Y (nB, nI), mean (nB,), var (nB,); var includes `eps`, and
        mean and var are what backprop_layer_norm needs besides X.
        """
        self._check_layer_norm("layer_norm", X, G)
        check_array("layer_norm", "b", b, ndim=1, kind="f")
        if b.shape != G.shape:
            raise ValueError(
                f"Ops.layer_norm: 'b' must have shape {tuple(G.shape)} like 'G', got {tuple(b.shape)}."
            )
        mu = X.mean(axis=1, keepdims=True)
        var = X.var(axis=1, keepdims=True) + eps
        Y = (X - mu) * var ** -0.5
        Y = Y * G
        Y += b
        return Y, mu[:, 0], var[:, 0]

    def backprop_layer_norm(
        self, dY: Floats2d, X: Floats2d, G: Floats1d, mean: Floats1d, var: Floats1d
    ) -> Tuple[Floats2d, Floats1d, Floats1d]:
        """Gradients of layer_norm from its input X and the mean and var it returned.

        (nB, nI) dY, (nB, nI) X, (nI,) G, (nB,) mean, (nB,) var -> dX (nB, nI), dG (nI,), db (nI,)
        """
        self._check_layer_norm("backprop_layer_norm", dY, G, X_name="dY")
        check_array("backprop_layer_norm", "X", X, ndim=2, kind="f")
        check_same_shape("backprop_layer_norm", "dY", dY, "X", X)
        for name, arr in (("mean", mean), ("var", var)):
            check_array("backprop_layer_norm", name, arr, ndim=1, kind="f")
            if arr.shape[0] != X.shape[0]:
                raise ValueError(
                    f"Ops.backprop_layer_norm: '{name}' must have shape ({X.shape[0]},) (one per row "
                    f"of X {tuple(X.shape)}), got {tuple(arr.shape)}."
                )
        nI = X.shape[1]
        var = var[:, None]
        inv_std = var ** -0.5
        dist = X - mean[:, None]
        Xhat = dist * inv_std
        db = dY.sum(axis=0)
        dG = (dY * Xhat).sum(axis=0)
        dXhat = dY * G
        # The mean and the variance both depend on every cell of the row, which gives the
        # two row-sum corrections.
        sum_dXhat = dXhat.sum(axis=1, keepdims=True)
        sum_dXhat_dist = (dXhat * dist).sum(axis=1, keepdims=True)
        dX = nI * dXhat - sum_dXhat - dist * (sum_dXhat_dist / var)
        dX *= inv_std / nI
        return dX, dG, db

    # ------------------------------------------------------------------ maxout and activations

    def maxout(self, X: Floats3d) -> Tuple[Floats2d, Ints2d]:
        """Max over the last axis and which piece won.  (nB, nO, nP) -> (nB, nO), (nB, nO) int32

        As in Thinc's reference, any rank >= 1 and any real dtype are taken (the maximum keeps it).
        """
        check_array("maxout", "X", X, min_ndim=1)
        if X.shape[-1] == 0:
            raise ValueError(f"Ops.maxout: 'X' needs at least one piece on its last axis, got {describe(X)}.")
        which = X.argmax(axis=-1).astype("int32")
        best = self.xp.take_along_axis(X, which[..., None].astype("int64"), axis=-1)[..., 0]
        return best, which

    def backprop_maxout(self, dY: Floats2d, which: Ints2d, P: int) -> Floats3d:
        """Route each gradient to the piece that won.  (nB, nO) -> (nB, nO, P)

        As in Thinc, `which` may have more rows than dY (they are not read), and dY may hold
        any real dtype, which dX keeps.
        """
        check_array("backprop_maxout", "dY", dY, ndim=2)
        check_array("backprop_maxout", "which", which, ndim=2, kind="i")
        if which.shape[1] != dY.shape[1] or which.shape[0] < dY.shape[0]:
            # NOTE: Thinc's compiled kernel reads `which` as dY's rows and columns, out of
            # bounds (or misaligned) for any other shape.
            raise ValueError(
                f"Ops.backprop_maxout: 'which' must have the shape of 'dY' {tuple(dY.shape)} (or "
                f"more rows), got {describe(which)}."
            )
        if not isinstance(P, (int, numpy.integer)) or isinstance(P, bool):
            raise TypeError(f"Ops.backprop_maxout: 'P' must be an int, got {type(P).__name__} {P!r}.")
        if P < 0:
            raise ValueError(f"Ops.backprop_maxout: 'P' must be >= 0, got {P}.")
        xp = self.xp
        which = which[: dY.shape[0]]
        if which.size:
            bad = (which < 0) | (which >= P)
            if bool(bad.any()):
                # NOTE: negative winners are refused too: numpy would wrap them, Thinc's
                # compiled kernel writes outside the output.
                b, o = (int(v) for v in numpy.argwhere(self.to_numpy(bad))[0])
                raise IndexError(
                    f"Ops.backprop_maxout: index {int(which[b, o])} in 'which' (at [{b}, {o}]) is "
                    f"out of bounds for maxout with P={P} pieces; each winner must lie in "
                    f"0..{P - 1}, as maxout returns them."
                )
        dX = xp.zeros(tuple(dY.shape) + (P,), dtype=dY.dtype)
        flat = dX.reshape((dY.size, P))
        flat[xp.arange(flat.shape[0]), which.reshape(-1)] = dY.reshape(-1)
        return dX

    def backprop_maxout_affine(
        self, dY: Floats2d, which: Ints2d, X: Floats2d, W: Floats3d
    ) -> Tuple[Floats2d, Floats3d, Floats2d]:
        """Gradients of Maxout's affine map, given the winning pieces: (dX, dW, db).

        (nB, nO), (nB, nO) ints, (nB, nI), (nO, nP, nI) -> (nB, nI), (nO, nP, nI), (nO, nP).
        The forward was Z = X @ W.reshape(nO * nP, nI).T + b, Y, which = maxout(Z); only the
        winning piece of each output receives dY.
        """
        check_array("backprop_maxout_affine", "dY", dY, ndim=2, kind="f")
        check_array("backprop_maxout_affine", "X", X, ndim=2, kind="f")
        check_array("backprop_maxout_affine", "W", W, ndim=3, kind="f")
        check_array("backprop_maxout_affine", "which", which, ndim=2, kind="i")
        check_same_shape("backprop_maxout_affine", "dY", dY, "which", which)
        nO, nP, nI = (int(d) for d in W.shape)
        if dY.shape[1] != nO:
            raise ValueError(
                f"Ops.backprop_maxout_affine: 'dY' has {dY.shape[1]} columns (shape {tuple(dY.shape)}) "
                f"but 'W' {tuple(W.shape)} has nO={nO}."
            )
        if tuple(X.shape) != (dY.shape[0], nI):
            raise ValueError(
                f"Ops.backprop_maxout_affine: 'X' must have shape {(dY.shape[0], nI)} (rows of dY, "
                f"nI of W {tuple(W.shape)}), got {tuple(X.shape)}."
            )
        dZ = self.backprop_maxout(dY, which, nP)  # checks `which`
        db = dZ.sum(axis=0)
        dZ = dZ.reshape((dZ.shape[0], nO * nP))
        dW = self.gemm(dZ, X, trans1=True).reshape((nO, nP, nI))
        dX = self.gemm(dZ, W.reshape((nO * nP, nI)))
        return dX, dW, db

    def relu(self, X: Floats2d, inplace: bool = False) -> Floats2d:
        """max(X, 0); integers stay integers."""
        (X_,), shape, dtype = self._ew("relu", [("X", X)], floats=False)
        out = self._into("relu", "X", X, shape, dtype) if inplace else None
        return self.xp.maximum(X_, 0, out=out)

    def backprop_relu(self, dY: Floats2d, Y: Floats2d, inplace: bool = False) -> Floats2d:
        """dY where Y > 0, else 0: dX has dY's dtype and the shape dY and Y broadcast to."""
        fn, xp = "backprop_relu", self.xp
        dY_ = operand(fn, "dY", dY, xp)
        Y_ = operand(fn, "Y", Y, xp)
        shape = broadcast_shape(fn, [("dY", dY_), ("Y", Y_)])
        out = self._into(fn, "dY", dY, shape, dY_.dtype) if inplace else None
        return self._scaled(out, dY_, Y_ > 0)

    def clipped_linear(
        self,
        X: FloatsXdT,
        slope: float = 1.0,
        offset: float = 0.0,
        min_val: float = 0.0,
        max_val: float = 1.0,
        inplace: bool = False,
    ) -> FloatsXdT:
        """clip(X * slope + offset, min_val, max_val); with min_val > max_val every value is
        max_val (numpy's clip, which Thinc calls)."""
        (X_,), shape, dtype = self._ew("clipped_linear", [("X", X)])
        out = self._into("clipped_linear", "X", X, shape, dtype) if inplace else None
        if out is None:
            out = X_.copy() if X_ is X else X_
        if slope != 1.0:
            out *= slope
        if offset != 0.0:
            out += offset
        self.xp.clip(out, min_val, max_val, out=out)
        return out

    def backprop_clipped_linear(
        self,
        dY: FloatsXdT,
        X: FloatsXdT,
        slope: float = 1.0,
        offset: float = 0.0,
        min_val: float = 0.0,
        max_val: float = 1.0,
        inplace: bool = False,
    ) -> FloatsXdT:
        """dX = dY * slope where min_val < X * slope + offset < max_val, else 0.

        The slope is taken in X's dtype, as in Thinc: integer X gives exact gradients for
        integral slopes, and a TypeError for the others (Thinc truncates them to integers).
        """
        fn, xp = "backprop_clipped_linear", self.xp
        dY_ = operand(fn, "dY", dY, xp)
        X_ = operand(fn, "X", X, xp)
        shape = broadcast_shape(fn, [("dY", dY_), ("X", X_)])
        if X_.dtype.kind != "f" and not float(slope).is_integer():
            raise TypeError(
                f"Ops.{fn}: argument 'X' holds integers ({describe(X_)}) and slope={slope!r} is "
                f"not: Thinc would truncate the slope to an integer. Cast X to floats first: "
                f"X.astype('float32')."
            )
        dtype = numpy.result_type(*(X if type(X) in (int, float) else a.dtype for X, a in ((dY, dY_), (X, X_))))
        out = self._into(fn, "dY", dY, shape, dtype) if inplace else None
        if type(dY) in (int, float):
            dY_ = dY_.astype(dtype)  # a weak scalar: the result keeps X's dtype, as numpy's product
        linear = X_ * slope + offset
        grad = ((linear > min_val) & (linear < max_val)).astype(X_.dtype)
        grad *= X_.dtype.type(slope)
        return self._scaled(out, dY_, grad)

    def relu_k(
        self, X: FloatsXdT, n: float = 6.0, inplace: bool = False, *, k: Optional[float] = None
    ) -> FloatsXdT:
        """min(max(X, 0), n); `k=` is accepted as the documented name of `n`."""
        return self.clipped_linear(X, max_val=n if k is None else k, inplace=inplace)

    def backprop_relu_k(
        self, dY: FloatsXdT, X: FloatsXdT, n: float = 6.0, inplace: bool = False, *, k: Optional[float] = None
    ) -> FloatsXdT:
        return self.backprop_clipped_linear(dY, X, max_val=n if k is None else k, inplace=inplace)

    def hard_sigmoid(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        """max(0, min(1, 0.2 * X + 0.5))."""
        return self.clipped_linear(X, slope=0.2, offset=0.5, inplace=inplace)

    def _writes_back(self, dY: Any, X: Any) -> bool:
        """Whether dY * f(X) can go into dY without changing the result's shape or dtype."""
        return (
            isinstance(dY, self.xp.ndarray)
            and is_array(X)
            and bool(getattr(dY.flags, "writeable", True))
            and numpy.result_type(dY.dtype, X.dtype) == dY.dtype
            and all(d == 1 or d == t for d, t in zip(tuple(X.shape)[::-1], tuple(dY.shape)[::-1]))
            and X.ndim <= dY.ndim
        )

    def backprop_hard_sigmoid(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        # NOTE: Thinc ignores inplace=True here; plait writes into dY where that leaves the
        # result as Thinc returns it (dY of the result's shape and dtype).
        inplace = inplace and self._writes_back(dY, X)
        return self.backprop_clipped_linear(dY, X, slope=0.2, offset=0.5, inplace=inplace)

    def hard_tanh(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        """max(-1, min(1, X))."""
        return self.clipped_linear(X, min_val=-1.0, max_val=1.0, inplace=inplace)

    def backprop_hard_tanh(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        # NOTE: as backprop_hard_sigmoid, whose inplace Thinc ignores too.
        inplace = inplace and self._writes_back(dY, X)
        return self.backprop_clipped_linear(dY, X, min_val=-1.0, max_val=1.0, inplace=inplace)

    def hard_swish(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        """X * hard_sigmoid(X)."""
        (X_,), shape, dtype = self._ew("hard_swish", [("X", X)])
        out = self._into("hard_swish", "X", X, shape, dtype) if inplace else None
        return self._scaled(out, X_, self.hard_sigmoid(X_))

    def backprop_hard_swish(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        """d/dX X * clip(0.2 X + 0.5, 0, 1) = 0.4 X + 0.5 inside (-2.5, 2.5), 1 above, 0 below."""
        (dY_, X_), shape, dtype = self._ew("backprop_hard_swish", [("dY", dY), ("X", X)])
        out = self._into("backprop_hard_swish", "dY", dY, shape, dtype) if inplace else None
        xp = self.xp
        grad = xp.where(X_ > 2.5, 1.0, xp.where(X_ < -2.5, 0.0, X_ * 0.4 + 0.5)).astype(dtype, copy=False)
        return self._scaled(out, dY_, grad)

    def hard_swish_mobilenet(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        """X * relu6(X + 3) / 6."""
        (X_,), shape, dtype = self._ew("hard_swish_mobilenet", [("X", X)])
        out = self._into("hard_swish_mobilenet", "X", X, shape, dtype) if inplace else None
        return self._scaled(out, X_, self.clipped_linear(X_, slope=1.0 / 6.0, offset=0.5))

    def backprop_hard_swish_mobilenet(
        self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False
    ) -> FloatsXdT:
        """d/dX X * (X + 3) / 6 = X / 3 + 0.5 inside (-3, 3), 1 above, 0 below."""
        fn = "backprop_hard_swish_mobilenet"
        (dY_, X_), shape, dtype = self._ew(fn, [("dY", dY), ("X", X)])
        out = self._into(fn, "dY", dY, shape, dtype) if inplace else None
        xp = self.xp
        grad = xp.where(X_ > 3.0, 1.0, xp.where(X_ < -3.0, 0.0, X_ / 3.0 + 0.5)).astype(dtype, copy=False)
        return self._scaled(out, dY_, grad)

    def mish(self, X: FloatsXdT, threshold: float = 20.0, inplace: bool = False) -> FloatsXdT:
        """X * tanh(softplus(X)); the identity at or above `threshold` (where it equals X in float)."""
        (X_,), shape, dtype = self._ew("mish", [("X", X)])
        out = self._into("mish", "X", X, shape, dtype) if inplace else None
        xp = self.xp
        softplus = xp.logaddexp(xp.zeros((), dtype=dtype), X_)
        Y = xp.where(X_ >= threshold, X_, X_ * xp.tanh(softplus)).astype(dtype, copy=False)
        if out is not None:
            out[...] = Y
            return out
        return Y

    def backprop_mish(
        self, dY: FloatsXdT, X: Floats2d, threshold: float = 20.0, inplace: bool = False
    ) -> FloatsXdT:
        """d mish / dX = tanh(sp) + X * sigmoid(X) * (1 - tanh(sp)**2), with sp = softplus(X); 1 above threshold.

        As in Thinc, dY and X must have one shape and dX has dY's dtype.
        """
        fn = "backprop_mish"
        refuse_int_truncation(fn, "dY", dY, "write the gradient into a copy of dY")
        out_dtype = operand(fn, "dY", dY, self.xp).dtype
        (dY_, X_), shape, dtype = self._ew(fn, [("dY", dY), ("X", X)], broadcast=False)
        out = self._into(fn, "dY", dY, shape, out_dtype) if inplace else None
        xp = self.xp
        tanh_sp = xp.tanh(xp.logaddexp(xp.zeros((), dtype=dtype), X_))
        sig = self.sigmoid(X_)
        grad = tanh_sp + X_ * sig * (1.0 - tanh_sp * tanh_sp)
        grad = xp.where(X_ >= threshold, 1.0, grad).astype(dtype, copy=False)
        if out is not None:
            out *= grad
            return out
        return (dY_ * grad).astype(out_dtype, copy=False)

    def swish(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        """X * sigmoid(X) (a.k.a. SiLU)."""
        (X_,), shape, dtype = self._ew("swish", [("X", X)])
        out = self._into("swish", "X", X, shape, dtype) if inplace else None
        return self._scaled(out, X_, self.sigmoid(X_))

    def backprop_swish(
        self, dY: FloatsXdT, X: FloatsXdT, Y: FloatsXdT, inplace: bool = False
    ) -> FloatsXdT:
        """d swish / dX = Y + sigmoid(X) * (1 - Y)."""
        (dY_, X_, Y_), shape, dtype = self._ew("backprop_swish", [("dY", dY), ("X", X), ("Y", Y)])
        out = self._into("backprop_swish", "dY", dY, shape, dtype) if inplace else None
        return self._scaled(out, dY_, Y_ + self.sigmoid(X_) * (1.0 - Y_))

    def dish(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        """X * 0.5 * (1 + X / sqrt(1 + X**2)): a Swish-like curve without exp or erf."""
        (X_,), shape, dtype = self._ew("dish", [("X", X)])
        out = self._into("dish", "X", X, shape, dtype) if inplace else None
        gate = 0.5 * (1.0 + X_ / self.xp.sqrt(1.0 + X_ * X_))
        return self._scaled(out, X_, gate)

    def backprop_dish(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        """d dish / dX = 0.5 * (1 + X / s) + 0.5 * X / s**3, with s = sqrt(1 + X**2)."""
        (dY_, X_), shape, dtype = self._ew("backprop_dish", [("dY", dY), ("X", X)])
        out = self._into("backprop_dish", "dY", dY, shape, dtype) if inplace else None
        s = self.xp.sqrt(1.0 + X_ * X_)
        grad = 0.5 * (1.0 + X_ / s) + 0.5 * X_ / (s * s * s)
        return self._scaled(out, dY_, grad)

    def erf(self, X: FloatsXdT) -> FloatsXdT:
        """The Gauss error function, elementwise (accurate to float64 rounding)."""
        refuse_int_truncation("erf", "X", X, "cast erf(X) back to X's integer dtype")
        (X_,), _, dtype = self._ew("erf", [("X", X)])
        return self._special().erf(X_).astype(dtype, copy=False)

    def _special(self) -> Any:
        """scipy.special for numpy arrays, cupyx.scipy.special for cupy ones (imported on first use)."""
        if self.xp is numpy:
            import scipy.special

            return scipy.special
        import cupyx.scipy.special

        return cupyx.scipy.special

    def sechsq(self, X: FloatsXdT) -> FloatsXdT:
        """sech(X)**2 = 1 - tanh(X)**2, with X clipped to [-20, 20]."""
        (X_,), _, _ = self._ew("sechsq", [("X", X)])
        X_ = self.xp.clip(X_, -20.0, 20.0)
        return (1.0 / self.xp.cosh(X_)) ** 2

    def gelu(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        """Exact GELU: X * Phi(X), Phi the standard normal CDF."""
        (X_,), shape, dtype = self._ew("gelu", [("X", X)])
        out = self._into("gelu", "X", X, shape, dtype) if inplace else None
        cdf = 0.5 * (1.0 + self.erf(X_ * (1.0 / math.sqrt(2.0))))
        return self._scaled(out, X_, cdf)

    def backprop_gelu(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        """d gelu / dX = Phi(X) + X * phi(X)."""
        (dY_, X_), shape, dtype = self._ew("backprop_gelu", [("dY", dY), ("X", X)])
        out = self._into("backprop_gelu", "dY", dY, shape, dtype) if inplace else None
        cdf = 0.5 * (1.0 + self.erf(X_ * (1.0 / math.sqrt(2.0))))
        pdf = self.xp.exp(-0.5 * X_ * X_) * (1.0 / math.sqrt(2.0 * math.pi))
        return self._scaled(out, dY_, cdf + X_ * pdf)

    _GELU_C = math.sqrt(2.0 / math.pi)

    def gelu_approx(self, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        """tanh-approximated GELU: 0.5 X (1 + tanh(sqrt(2/pi) (X + 0.044715 X**3)))."""
        refuse_int_truncation("gelu_approx", "X", X, "cast the result back to X's integer dtype")
        (X_,), shape, dtype = self._ew("gelu_approx", [("X", X)])
        out = self._into("gelu_approx", "X", X, shape, dtype) if inplace else None
        gate = 0.5 * (1.0 + self.xp.tanh(self._GELU_C * (X_ + 0.044715 * X_ * X_ * X_)))
        return self._scaled(out, X_, gate)

    def backprop_gelu_approx(self, dY: FloatsXdT, X: FloatsXdT, inplace: bool = False) -> FloatsXdT:
        """The derivative of gelu_approx times dY.

        NOTE: Thinc builds this gradient in a float32 array whatever X's dtype, so dX has the
        dtype of dY times float32 (float64 only for float64 or integer dY).
        """
        fn = "backprop_gelu_approx"
        out_dtype = numpy.result_type(operand(fn, "dY", dY, self.xp).dtype, numpy.float32)
        (dY_, X_), shape, dtype = self._ew(fn, [("dY", dY), ("X", X)])
        out = self._into(fn, "dY", dY, shape, out_dtype) if inplace else None
        xp = self.xp
        t = xp.tanh(self._GELU_C * (X_ + 0.044715 * X_ * X_ * X_))
        grad = 0.5 * (1.0 + t) + 0.5 * X_ * (1.0 - t * t) * self._GELU_C * (1.0 + 3 * 0.044715 * X_ * X_)
        if out is not None:
            out *= grad
            return out
        return (dY_ * grad).astype(out_dtype, copy=False)

    # ------------------------------------------------------------------ ragged reductions

    def _segments(self, lengths_values: Sequence[int]) -> Tuple[Any, Any]:
        """Row -> sequence id, and sequence start offsets, as backend int64 arrays."""
        xp = self.xp
        lens = numpy.asarray(lengths_values, dtype="int64")
        starts = numpy.concatenate([[0], numpy.cumsum(lens)[:-1]]) if lens.size else lens
        seg = numpy.repeat(numpy.arange(lens.size, dtype="int64"), lens)
        return xp.asarray(seg), xp.asarray(starts.astype("int64"))

    # NOTE: as in Thinc, the sum/mean/max reductions read the first sum(lengths) rows of X and
    # ignore any rows after them, while reduce_first/reduce_last need lengths that cover X
    # exactly; lengths that run past X raise IndexError, and the backprops take one length per
    # leading row of their gradient. Each reads index arrays only inside their bounds.

    def _covered_rows(self, fn: str, X: Floats2d, lengths: Ints1d, allow_zero: bool) -> Tuple[Any, Tuple[int, ...]]:
        """The rows of X that `lengths` covers (a leading slice), and the lengths as ints."""
        check_array(fn, "X", X, ndim=2, kind="r")
        values = check_lengths(
            fn, lengths, X.shape[0], allow_zero=allow_zero, exact=False, mismatch=IndexError
        )
        total = sum(values)
        return (X if total == X.shape[0] else X[:total]), values

    def _lead_rows(self, fn: str, name: str, dY: Any, values: Sequence[int]) -> Any:
        """The first len(values) rows of dY, one per sequence; IndexError when dY has fewer."""
        if dY.shape[0] < len(values):
            raise IndexError(
                f"Ops.{fn}: 'lengths' describes {len(values)} sequences but '{name}' has only "
                f"{dY.shape[0]} rows ({describe(dY)}); pass one row of '{name}' per sequence."
            )
        return dY if dY.shape[0] == len(values) else dY[: len(values)]

    def _first_or_last_lengths(self, fn: str, X: Floats2d, lengths: Ints1d) -> Tuple[int, ...]:
        check_array(fn, "X", X, ndim=2, kind="r")
        check_array(fn, "lengths", lengths, ndim=1, kind="i")
        if lengths.shape[0] == 0:
            # Thinc answers no sequences with no rows, whatever X holds.
            return ()
        return check_lengths(fn, lengths, X.shape[0], allow_zero=False, mismatch=IndexError)

    def reduce_first(self, X: Floats2d, lengths: Ints1d) -> Tuple[Floats2d, Ints1d]:
        """The first row of each sequence, and the sequences' start/end offsets (len(lengths) + 1; none for no sequences)."""
        values = self._first_or_last_lengths("reduce_first", X, lengths)
        if not values:
            # As in Thinc, no sequences give no offsets, in the dtype of the lengths.
            return self.alloc2f(0, X.shape[1], dtype=X.dtype), self.alloc1i(0, dtype=lengths.dtype)
        starts_ends = self.asarray1i(numpy.concatenate([[0], numpy.cumsum(values, dtype="int64")]))
        return X[starts_ends[:-1]], starts_ends

    def backprop_reduce_first(self, d_firsts: Floats2d, starts_ends: Ints1d) -> Floats2d:
        """(nS, nO) and nS + 1 offsets -> (starts_ends[-1], nO); a single row of d_firsts is broadcast, as numpy (and Thinc) do."""
        check_array("backprop_reduce_first", "d_firsts", d_firsts, ndim=2, kind="r")
        check_array("backprop_reduce_first", "starts_ends", starts_ends, ndim=1, kind="i")
        if starts_ends.shape[0] == 0:
            # No sequences (what reduce_first returns for no lengths): no rows, as in Thinc.
            return self.alloc2f(0, d_firsts.shape[1], dtype=d_firsts.dtype)
        n_starts = max(starts_ends.shape[0] - 1, 0)
        if d_firsts.shape[0] != n_starts and not (d_firsts.shape[0] == 1 and n_starts):
            raise ValueError(
                f"Ops.backprop_reduce_first: 'starts_ends' must have len(d_firsts) + 1 = "
                f"{d_firsts.shape[0] + 1} entries, got {starts_ends.shape[0]}."
            )
        n_rows = int(starts_ends[-1]) if starts_ends.shape[0] else 0
        dX = self.alloc2f(n_rows, d_firsts.shape[1], dtype=d_firsts.dtype)
        dX[starts_ends[:-1]] = d_firsts
        return dX

    def reduce_last(self, X: Floats2d, lengths: Ints1d) -> Tuple[Floats2d, Ints1d]:
        """The last row of each sequence, and those rows' indices.

        The indices have the dtype of the cumulative sum of the lengths (int64 for int32
        lengths), as Thinc computes them.
        """
        values = self._first_or_last_lengths("reduce_last", X, lengths)
        if not values:
            return self.alloc2f(0, X.shape[1], dtype=X.dtype), self.alloc1i(0, dtype=lengths.dtype)
        lasts = self.xp.asarray(numpy.cumsum(values, dtype="int64") - 1, dtype=cumsum_dtype(lengths.dtype))
        return X[lasts], lasts

    def backprop_reduce_last(self, d_lasts: Floats2d, lasts: Ints1d) -> Floats2d:
        """(nS, nO) and nS row indices -> (lasts[-1] + 1, nO); a single row of d_lasts is broadcast, as numpy (and Thinc) do."""
        check_array("backprop_reduce_last", "d_lasts", d_lasts, ndim=2, kind="r")
        check_array("backprop_reduce_last", "lasts", lasts, ndim=1, kind="i")
        if lasts.shape[0] == 0:
            # No sequences: no rows, as in Thinc, whatever d_lasts holds.
            return self.alloc2f(0, d_lasts.shape[1], dtype=d_lasts.dtype)
        if lasts.shape[0] != d_lasts.shape[0] and not (d_lasts.shape[0] == 1 and lasts.shape[0]):
            raise ValueError(
                f"Ops.backprop_reduce_last: 'lasts' must have one entry per row of 'd_lasts' "
                f"({d_lasts.shape[0]}), got {lasts.shape[0]}."
            )
        n_rows = int(lasts[-1]) + 1 if lasts.shape[0] else 0
        dX = self.alloc2f(n_rows, d_lasts.shape[1], dtype=d_lasts.dtype)
        dX[lasts] = d_lasts
        return dX

    def reduce_sum(self, X: Floats2d, lengths: Ints1d) -> Floats2d:
        """Sum of each sequence's rows; empty sequences give zeros.  (nN, nO) -> (len(lengths), nO)"""
        X, values = self._covered_rows("reduce_sum", X, lengths, allow_zero=True)
        seg, _ = self._segments(values)
        # NOTE: float32 for dtypes other than float32/float64, as Thinc (its reference sums
        # into float32; its compiled sums take only those two).
        dtype = X.dtype if X.dtype in _SUM_DTYPES else numpy.float32
        Y = self.xp.zeros((len(values), X.shape[1]), dtype=dtype)
        self.xp.add.at(Y, seg, X)
        return Y

    def reduce_mean(self, X: Floats2d, lengths: Ints1d) -> Floats2d:
        """Mean of each sequence's rows; empty sequences give zeros."""
        X, values = self._covered_rows("reduce_mean", X, lengths, allow_zero=True)
        Y = self.reduce_sum(X, lengths)
        Y /= self.xp.asarray(numpy.maximum(numpy.asarray(values, dtype=Y.dtype), 1))[:, None]
        return Y

    def reduce_max(self, X: Floats2d, lengths: Ints1d) -> Tuple[Floats2d, Ints2d]:
        """Max of each sequence's rows per column, and the winning row's offset within its sequence."""
        X, values = self._covered_rows("reduce_max", X, lengths, allow_zero=False)
        xp = self.xp
        nB, nO = len(values), X.shape[1]
        if nB == 0:
            return self.alloc2f(0, nO, dtype=X.dtype), self.alloc2i(0, nO)
        seg, starts = self._segments(values)
        pos = xp.arange(X.shape[0], dtype="int64") - starts[seg]
        # Padding loses every comparison (and every tie: argmax keeps the first).
        lowest = -numpy.inf if X.dtype.kind == "f" else (False if X.dtype.kind == "b" else numpy.iinfo(X.dtype).min)
        padded = xp.full((nB, max(values), nO), lowest, dtype=X.dtype)
        padded[seg, pos] = X
        which = padded.argmax(axis=1)
        maxes = xp.take_along_axis(padded, which[:, None, :], axis=1)[:, 0, :]
        return maxes, which.astype("int32")

    def backprop_reduce_sum(self, d_sums: Floats2d, lengths: Ints1d) -> Floats2d:
        """Copy each sequence's gradient to all its rows."""
        check_array("backprop_reduce_sum", "d_sums", d_sums, ndim=2, kind="r")
        values = check_lengths("backprop_reduce_sum", lengths, None, allow_zero=True)
        d_sums = self._lead_rows("backprop_reduce_sum", "d_sums", d_sums, values)
        return self.xp.repeat(d_sums, self.xp.asarray(numpy.asarray(values, dtype="int64")), axis=0)

    def backprop_reduce_mean(self, d_means: Floats2d, lengths: Ints1d) -> Floats2d:
        """Copy each sequence's gradient, divided by its length, to all its rows."""
        refuse_int_truncation("backprop_reduce_mean", "d_means", d_means, "divide it into an integer array")
        check_array("backprop_reduce_mean", "d_means", d_means, ndim=2, kind="f")
        values = check_lengths("backprop_reduce_mean", lengths, None, allow_zero=True)
        d_means = self._lead_rows("backprop_reduce_mean", "d_means", d_means, values)
        lens = numpy.asarray(values, dtype="int64")
        scale = self.xp.asarray(1.0 / numpy.maximum(lens, 1)).astype(d_means.dtype)
        return self.xp.repeat(d_means * scale[:, None], self.xp.asarray(lens), axis=0)

    def backprop_reduce_max(self, d_maxes: Floats2d, which: Ints2d, lengths: Ints1d) -> Floats2d:
        """Route each gradient to the row that held the maximum."""
        fn = "backprop_reduce_max"
        check_array(fn, "d_maxes", d_maxes, ndim=2, kind="r")
        check_array(fn, "which", which, ndim=2, kind="i")
        if which.shape[1] != d_maxes.shape[1]:
            raise ValueError(
                f"Ops.{fn}: 'which' must have one column per column of 'd_maxes' "
                f"({d_maxes.shape[1]}), got {describe(which)}."
            )
        values = check_lengths(fn, lengths, None, allow_zero=False)
        d_maxes = self._lead_rows(fn, "d_maxes", d_maxes, values)
        which = self._lead_rows(fn, "which", which, values)
        xp = self.xp
        lens = xp.asarray(numpy.asarray(values, dtype="int64"))
        if which.size:
            bad = (which < 0) | (which >= lens[:, None])
            if bool(bad.any()):
                # NOTE: negative offsets are refused too: numpy would wrap them, Thinc's
                # compiled kernel writes outside the output.
                i, o = (int(v) for v in numpy.argwhere(self.to_numpy(bad))[0])
                raise IndexError(
                    f"Ops.{fn}: index {int(which[i, o])} in 'which' (row {i}, column {o}) is out "
                    f"of bounds for sequence {i} of length {values[i]}; each offset must lie in "
                    f"0..length-1, as reduce_max returns them."
                )
        _, starts = self._segments(values)
        dX = xp.zeros((sum(values), d_maxes.shape[1]), dtype=d_maxes.dtype)
        rows = starts[:, None] + which.astype("int64")
        cols = xp.broadcast_to(xp.arange(d_maxes.shape[1]), which.shape)
        dX[rows, cols] = d_maxes
        return dX

    # ------------------------------------------------------------------ hashing and tables

    def hash(self, ids: Ints1d, seed: int) -> Ints2d:
        """MurmurHash3 x64 128-bit of each uint64 key, as Thinc computes it: four uint32 words per key.  (N,) -> (N, 4)"""
        return _murmur.ops_hash(self, ids, seed)

    def ngrams(self, n: int, keys: Ints1d) -> Ints1d:
        """Hashed n-gram features of a uint64 key sequence."""
        return _murmur.ops_ngrams(self, n, keys)

    def gather_add(self, table: Floats2d, indices: Ints2d) -> Floats2d:
        """Sum the rows of `table` picked by each row of `indices`.  (T, O), (B, K) -> (B, O)

        As in Thinc, any real table (integers sum as numpy sums them) and array-like indices.
        """
        table = operand("gather_add", "table", table, self.xp)
        indices = operand("gather_add", "indices", indices, self.xp)
        check_array("gather_add", "table", table, min_ndim=1)
        check_array("gather_add", "indices", indices, min_ndim=1, kind="i")
        if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= table.shape[0]):
            raise IndexError(
                f"Ops.gather_add: 'indices' must lie in 0..{table.shape[0] - 1} (rows of 'table' "
                f"{tuple(table.shape)}), got min {int(indices.min())}, max {int(indices.max())}."
            )
        return table[indices].sum(axis=1)

    def scatter_add(self, table: FloatsXd, indices: IntsXd, values: FloatsXd) -> FloatsXd:
        """Add `values` into `table` at `indices` (repeated indices accumulate); returns `table`.

        As in Thinc (numpy's add.at): any real dtypes, array-like indices and values.
        """
        check_array("scatter_add", "table", table, min_ndim=1, kind="r")
        check_writeable("scatter_add", "table", table, "the values are added into it in place")
        indices = operand("scatter_add", "indices", indices, self.xp)
        values = operand("scatter_add", "values", values, self.xp)
        check_array("scatter_add", "indices", indices, kind="i")
        rows = tuple(indices.shape) + tuple(table.shape[1:])
        try:
            fits = tuple(numpy.broadcast_shapes(tuple(values.shape), rows)) == rows
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"Ops.scatter_add: 'values' ({describe(values)}) must have the shape of the rows it "
                f"adds to, indices.shape + table.shape[1:] = {rows}, or broadcast to it."
            )
        if not numpy.can_cast(numpy.result_type(table.dtype, values.dtype), table.dtype, "same_kind"):
            raise TypeError(
                f"Ops.scatter_add: cannot add 'values' ({describe(values)}) into 'table' "
                f"({describe(table)}) without truncating them. Pass a float table."
            )
        if indices.size and (int(indices.min()) < -table.shape[0] or int(indices.max()) >= table.shape[0]):
            raise IndexError(
                f"Ops.scatter_add: 'indices' must lie in 0..{table.shape[0] - 1} (rows of 'table' "
                f"{tuple(table.shape)}), got min {int(indices.min())}, max {int(indices.max())}."
            )
        self.xp.add.at(table, indices, values)
        return table

    # ------------------------------------------------------------------ optimizer updates and losses

    def adam(
        self,
        weights: Floats1d,
        gradient: Floats1d,
        mom1: Floats1d,
        mom2: Floats1d,
        beta1: float,
        beta2: float,
        eps: float,
        learn_rate: float,
        mod_rate: float = 1.0,
        *,
        keep_gradient: bool = False,
    ) -> Tuple[Floats1d, Floats1d, Floats1d, Floats1d]:
        """One Adam step in place on weights, mom1 and mom2 (learn_rate already bias-corrected by the caller).

        The gradient is consumed: it is zeroed in place, as Thinc's compiled backends do, so that every
        plait backend leaves the same state behind. `keep_gradient=True` (a plait addition) leaves it
        as it was, for callers such as Chainer's optimizers whose gradients outlive the update.
        """
        # The gradient may hold any real numbers (Thinc's reference takes them); weights and
        # moments are updated in place, so they must hold floats.
        check_array("adam", "weights", weights, kind="f")
        for name, arr in (("gradient", gradient), ("mom1", mom1), ("mom2", mom2)):
            check_array("adam", name, arr, kind="r" if name == "gradient" else "f")
            check_same_shape("adam", "weights", weights, name, arr)
        for name, arr in (("weights", weights), ("mom1", mom1), ("mom2", mom2)):
            check_writeable("adam", name, arr)
        if not keep_gradient:
            check_writeable("adam", "gradient", gradient, "it is zeroed in place (or pass keep_gradient=True)")
        mom1 *= beta1
        mom1 += (1.0 - beta1) * gradient
        mom2 *= beta2
        mom2 += (1.0 - beta2) * gradient * gradient
        weights -= learn_rate * (mom1 / (mod_rate * self.xp.sqrt(mom2) + eps))
        if not keep_gradient:
            gradient.fill(0)
        return weights, gradient, mom1, mom2

    def adam_step(
        self,
        weights: FloatsXd,
        gradient: FloatsXd,
        mom1: FloatsXd,
        mom2: FloatsXd,
        averages: Optional[FloatsXd] = None,
        *,
        beta1: float,
        beta2: float,
        eps: float,
        learn_rate: float,
        mod_rate: float = 1.0,
        L2: float = 0.0,
        weight_decay: float = 0.0,
        grad_clip: float = 0.0,
        nr_update: int = 1,
        max_decay: float = 0.9999,
    ) -> Tuple[FloatsXd, FloatsXd, FloatsXd, FloatsXd]:
        """A whole optimizer update of one parameter, in place: what Optimizer does for Adam and RAdam.

        In order: `gradient += L2 * weights` (a coupled L2 penalty), clip `gradient` to the
        global norm `grad_clip` (when > 0), `adam(...)` with `learn_rate` already bias-corrected
        (this zeroes `gradient`), decoupled decay `weights -= weight_decay * weights`, then
        `update_averages(averages, weights, nr_update, max_decay)` unless `averages` is None.
        All arrays have one shape. Backends may fuse the steps into one pass over the arrays;
        the result equals this sequence up to the rounding of the clipping norm.
        """
        check_array("adam_step", "weights", weights, kind="f")
        for name, arr in (("gradient", gradient), ("mom1", mom1), ("mom2", mom2)):
            check_array("adam_step", name, arr, kind="f")
            check_same_shape("adam_step", "weights", weights, name, arr)
        if averages is not None:
            check_array("adam_step", "averages", averages, kind="f")
            check_same_shape("adam_step", "weights", weights, "averages", averages)
        for name, arr in (("weights", weights), ("gradient", gradient), ("mom1", mom1), ("mom2", mom2), ("averages", averages)):
            if arr is not None:
                check_writeable("adam_step", name, arr)
        if grad_clip < 0:
            raise ValueError(
                f"Ops.adam_step: 'grad_clip' must be >= 0 (0 switches clipping off), got {grad_clip}."
            )
        if L2 != 0:
            gradient += L2 * weights
        if grad_clip > 0:
            self.clip_gradient(gradient, grad_clip)
        self.adam(weights, gradient, mom1, mom2, beta1, beta2, eps, learn_rate, mod_rate=mod_rate)
        if weight_decay != 0:
            weights -= weight_decay * weights
        if averages is not None:
            self.update_averages(averages, weights, nr_update, max_decay=max_decay)
        return weights, gradient, mom1, mom2

    def clip_gradient(self, gradient: FloatsT, threshold: float) -> FloatsT:
        """Rescale `gradient` in place so its L2 norm is at most `threshold`."""
        check_array("clip_gradient", "gradient", gradient, kind="f")
        norm = float(self.xp.linalg.norm(gradient.ravel()))
        if norm >= threshold and norm > 0:
            gradient *= threshold / norm
        return gradient

    def update_averages(self, ema: FloatsT, weights: FloatsT, t: int, max_decay: float = 0.9999) -> None:
        """Move the exponential moving average `ema` towards `weights` (in place), warming up with t.

        `weights` may be anything that broadcasts to `ema` (an array-like too). NOTE: `ema` must
        be a float array, since it is updated in place; Thinc silently does nothing for a list.
        """
        fn = "update_averages"
        check_array(fn, "ema", ema, kind="r")
        weights = operand(fn, "weights", weights, self.xp)
        shape = broadcast_shape(fn, [("ema", ema), ("weights", weights)])
        self._into(fn, "ema", ema, shape, float_dtype(ema.dtype, weights.dtype))
        decay = min((1.0 + t) / (10.0 + t), max_decay)
        ema -= (1.0 - decay) * (ema - weights)

    def logloss(self, y_true: FloatsT, y_pred: FloatsT) -> float:
        """Elementwise binary cross-entropy -(y log p + (1 - y) log(1 - p)), with 1e-8 guards."""
        xp = self.xp
        (y_true, y_pred), _, _ = self._ew("logloss", [("y_true", y_true), ("y_pred", y_pred)])
        log_p = xp.log(y_pred + 1e-8)
        log_not_p = xp.log((1.0 - y_pred) + 1e-8)
        return -(y_true * log_p + (1.0 - y_true) * log_not_p)

    def position_encode(
        self, N: int, D: int, period: int = 10000, out: Optional[Floats2d] = None
    ) -> Floats2d:
        """Sinusoidal position encodings: column pairs (sin, cos) of pos / period**(2 * col / D).  -> (N, D)"""
        if N < 0 or D < 0:
            raise ValueError(f"Ops.position_encode: 'N' and 'D' must be >= 0, got N={N}, D={D}.")
        pos = numpy.arange(N, dtype="float64")[:, None]
        cols = numpy.arange(D)
        even_cols = cols - (cols % 2)
        if D % 2:
            # NOTE: with odd D, Thinc's last column repeats the sine two columns before it
            # (column 0 when D == 1); kept so that encodings stay identical.
            even_cols[-1] = max(D - 3, 0)
        angle = pos / numpy.power(float(period), 2.0 * even_cols / max(D, 1))
        table = numpy.where(cols % 2 == 0, numpy.sin(angle), numpy.cos(angle)).astype("float32")
        if out is None:
            return self.asarray(table)
        check_array("position_encode", "out", out, ndim=2, kind="f")
        if tuple(out.shape) != (N, D):
            raise ValueError(f"Ops.position_encode: 'out' must have shape {(N, D)}, got {tuple(out.shape)}.")
        out[...] = self.asarray(table)
        return out


# --- module-level functions of thinc.backends.ops ---------------------------------------------
# Thinc's ops module also exposes these as plain functions; code written for it imports a few
# (custom LSTM kernels, GELU variants). They run on the backend that owns the array.

INV_SQRT2 = 0.7071067811865475
INV_SQRT_2PI = 0.3989422804014327


def _xp_of(arr: Any) -> Any:
    from ..util import get_array_module

    return get_array_module(arr)


def _ops_of(arr: Any) -> "Ops":
    from . import get_array_ops

    return get_array_ops(arr)


def sigmoid(X: FloatsXdT, out: Optional[FloatsXdT] = None) -> FloatsXdT:
    """1 / (1 + exp(-X)), with X clipped to [-20, 20] first; written into `out` when given."""
    xp = _xp_of(X)
    Y = 1.0 / (1.0 + xp.exp(-xp.clip(X, -20.0, 20.0)))
    if out is None:
        return Y
    out[...] = Y
    return out


def dsigmoid(Y: FloatsXdT) -> FloatsXdT:
    """The sigmoid's derivative from its output Y: Y * (1 - Y)."""
    return Y * (1.0 - Y)


def dtanh(Y: FloatsXdT) -> FloatsXdT:
    """tanh's derivative from its output Y: 1 - Y**2."""
    return 1 - Y**2


def gaussian_cdf(ops: "Ops", X: FloatsXdT) -> FloatsXdT:
    """The standard normal CDF at X."""
    return 0.5 * (1.0 + ops.erf(INV_SQRT2 * X))


def gaussian_pdf(ops: "Ops", X: FloatsXdT) -> FloatsXdT:
    """The standard normal density at X."""
    return INV_SQRT_2PI * ops.xp.exp(-0.5 * X * X)


def lstm_forward_training(
    params: Floats1d, c_init: Floats3d, h_init: Floats3d, X: Floats2d, lengths: Ints1d
) -> Tuple[Floats2d, Tuple]:
    """Ops.lstm_forward_training as a function of the arrays, c_init being the initial cell
    state and h_init the initial hidden state.

    NOTE: Thinc's own module-level function is its reference (Ops) path, which computes
    something else than Thinc's NumpyOps for the same weights (its Ops method also passes H0
    where c_init goes). plait computes what Thinc's NumpyOps computes, everywhere.
    """
    return _ops_of(params).lstm_forward_training(params, h_init, c_init, X, lengths)


def backprop_lstm(dY: Floats2d, lengths: Ints1d, params: Floats1d, fwd_state: Tuple) -> Tuple[Floats2d, Floats1d]:
    """Ops.backprop_lstm as a function of the arrays."""
    return _ops_of(params).backprop_lstm(dY, lengths, params, fwd_state)


def backprop_lstm_gates(
    dYt3: Floats2d, dCt3: Floats2d, Gt3: Floats2d, Ct3: Floats2d, Ct2: Floats2d
) -> Tuple[Floats2d, Floats2d]:
    """One LSTM step backwards. Gt3 holds the activated gates as four column blocks (forget,
    input, output, candidate), Ct3 this step's cell and Ct2 the previous one. Returns the
    gradient of the gates' pre-activations (same layout) and of Ct2. dCt3 is not modified."""
    xp = _xp_of(dYt3)
    hf, hi, ho, hc = xp.split(Gt3, 4, axis=-1)
    tanh_c = xp.tanh(Ct3)
    d_cell = dCt3 + dYt3 * ho * (1.0 - tanh_c * tanh_c)
    d_f = d_cell * Ct2 * hf * (1.0 - hf)
    d_i = d_cell * hc * hi * (1.0 - hi)
    d_o = dYt3 * tanh_c * ho * (1.0 - ho)
    d_c = d_cell * hi * (1.0 - hc * hc)
    return xp.concatenate((d_f, d_i, d_o, d_c), axis=-1), d_cell * hf
