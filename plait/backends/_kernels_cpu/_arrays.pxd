# Shared array checks for the kernel modules: which arrays a kernel may read in place, and
# which it may write. Inline, so each module compiles its own copy without a call across
# extension modules.
#
# The rule every compiled entry point follows (tests/reliability/test_kernel_args.py tries
# each with None, lists, scalars, wrong dtypes, strided, read-only and overlapping arrays):
# it touches memory only after it has checked, with these tests, that every array it reads is
# an exact numpy array of the dtype, rank and layout it assumes (None only where the kernel
# takes None), that every array it writes is writeable, and that no array it writes shares
# memory with another argument (_shares) unless the kernel is written for that very aliasing;
# otherwise it declines (returns None/False) and the Ops reference computes or raises.
cimport numpy as cnp
from libc.stdint cimport uint32_t, uint64_t


cdef inline int _float_kind_any(object X, int min_ndim) noexcept:
    """4 or 8 for a float32/float64 array of rank >= min_ndim we can read in place, else 0.

    In place: an exact ndarray, C-contiguous, aligned and in native byte order (ISCARRAY_RO
    checks all three).
    """
    if not cnp.PyArray_CheckExact(X):
        return 0
    cdef cnp.ndarray A = <cnp.ndarray>X
    if cnp.PyArray_NDIM(A) < min_ndim or not cnp.PyArray_ISCARRAY_RO(A):
        return 0
    cdef int t = cnp.PyArray_TYPE(A)
    if t == cnp.NPY_FLOAT32:
        return 4
    if t == cnp.NPY_FLOAT64:
        return 8
    return 0


cdef inline int _float_kind(object X, int ndim) noexcept:
    """4 or 8 for a float32/float64 array of rank ndim we can read in place, else 0."""
    if not cnp.PyArray_CheckExact(X) or cnp.PyArray_NDIM(<cnp.ndarray>X) != ndim:
        return 0
    return _float_kind_any(X, ndim)


cdef inline int _index_kind(object X, int ndim) noexcept:
    """4 or 8 for an int32/int64 array of rank ndim we can read in place, else 0."""
    if not cnp.PyArray_CheckExact(X):
        return 0
    cdef cnp.ndarray A = <cnp.ndarray>X
    if cnp.PyArray_NDIM(A) != ndim or not cnp.PyArray_ISCARRAY_RO(A):
        return 0
    cdef int t = cnp.PyArray_TYPE(A)
    if t == cnp.NPY_INT32:
        return 4
    if t == cnp.NPY_INT64:
        return 8
    return 0


cdef inline Py_ssize_t _dim(object A, int axis) noexcept:
    return cnp.PyArray_DIM(<cnp.ndarray>A, axis)


cdef inline void* _data(object A) noexcept:
    return cnp.PyArray_DATA(<cnp.ndarray>A)


cdef inline bint _shares(object A, object B) noexcept:
    """Whether two numpy arrays' memory extents overlap (numpy.may_share_memory's bounds test).

    Exact for C-contiguous arrays; for strided ones it may say True where the elements
    interleave without touching, which only makes a kernel decline.
    """
    if not cnp.PyArray_Check(A) or not cnp.PyArray_Check(B):
        return False
    cdef cnp.ndarray a = <cnp.ndarray>A, b = <cnp.ndarray>B
    if cnp.PyArray_SIZE(a) == 0 or cnp.PyArray_SIZE(b) == 0:
        return False
    cdef char* a_lo = <char*>cnp.PyArray_DATA(a)
    cdef char* a_hi = a_lo
    cdef char* b_lo = <char*>cnp.PyArray_DATA(b)
    cdef char* b_hi = b_lo
    cdef int i
    cdef Py_ssize_t step
    for i in range(cnp.PyArray_NDIM(a)):
        step = (cnp.PyArray_DIM(a, i) - 1) * cnp.PyArray_STRIDE(a, i)
        if step < 0:
            a_lo += step
        else:
            a_hi += step
    for i in range(cnp.PyArray_NDIM(b)):
        step = (cnp.PyArray_DIM(b, i) - 1) * cnp.PyArray_STRIDE(b, i)
        if step < 0:
            b_lo += step
        else:
            b_hi += step
    a_hi += cnp.PyArray_ITEMSIZE(a)
    b_hi += cnp.PyArray_ITEMSIZE(b)
    return a_lo < b_hi and b_lo < a_hi


# --- matrix products (gemm.pyx through a BLAS, dense_gemm.pyx on plait's own kernels) ------------

cdef inline bint _product_operand(cnp.ndarray A) noexcept:
    """A 2-d operand a product may read in place: aligned, in native byte order (a BLAS and
    plait's kernels read raw machine floats; a byte-swapped array would be read as garbage)."""
    return cnp.PyArray_NDIM(A) == 2 and cnp.PyArray_ISALIGNED(A) and cnp.PyArray_ISNOTSWAPPED(A)


cdef inline bint _product_dims(cnp.ndarray x, cnp.ndarray y, bint trans1, bint trans2,
                               Py_ssize_t* M, Py_ssize_t* K, Py_ssize_t* N) noexcept:
    """(M, K, N) of op(x) @ op(y); False where the inner sizes differ or any size is 0."""
    M[0] = x.shape[1] if trans1 else x.shape[0]
    K[0] = x.shape[0] if trans1 else x.shape[1]
    N[0] = y.shape[0] if trans2 else y.shape[1]
    cdef Py_ssize_t K2 = y.shape[1] if trans2 else y.shape[0]
    return K2 == K[0] and M[0] > 0 and N[0] > 0 and K[0] > 0


cdef inline bint _row_major(cnp.ndarray A, bint trans, bint* stored_trans, Py_ssize_t* ld) noexcept:
    """A 2-d operand as a row-major matrix: `ld` items between rows, and whether op(A) is the
    stored matrix transposed. Rows with unit stride keep `trans`; columns with unit stride make A
    the transpose of a row-major matrix, so the flag flips. False for any other layout."""
    cdef Py_ssize_t item = cnp.PyArray_ITEMSIZE(A)
    cdef Py_ssize_t s0 = A.strides[0], s1 = A.strides[1]
    cdef Py_ssize_t n0 = A.shape[0], n1 = A.shape[1]
    if (s1 == item or n1 == 1) and s0 >= max(n1, 1) * item and s0 % item == 0:
        stored_trans[0] = trans
        ld[0] = s0 // item
        return 1
    if (s0 == item or n0 == 1) and s1 >= max(n0, 1) * item and s1 % item == 0:
        stored_trans[0] = not trans
        ld[0] = s1 // item
        return 1
    return 0


cdef inline bint _any_index_outside(const void* idx, bint i32, Py_ssize_t n, Py_ssize_t lo,
                                    Py_ssize_t hi) noexcept nogil:
    """Whether any of the n int32 (i32) or int64 indices at idx lies outside lo..hi-1 (lo < hi).

    Each index is compared as an unsigned offset from lo (a value below lo wraps above the span)
    and the results are or-ed, so that the compiler makes a vector loop of it: the scalar count
    it replaces took ~1% of a text CNN step at width 64 (bench/README.md).
    """
    cdef Py_ssize_t i
    cdef uint32_t bad32 = 0, lo32, span32
    cdef uint64_t bad64 = 0
    cdef uint64_t lo64 = <uint64_t>lo, span64 = <uint64_t>hi - <uint64_t>lo
    cdef const uint32_t* w32 = <const uint32_t*>idx
    cdef const uint64_t* w64 = <const uint64_t*>idx
    cdef Py_ssize_t half = (<Py_ssize_t>1) << 31
    if i32:
        # int32 values lie in -2**31..2**31-1: clip the range to that, then it spans <= 2**32.
        if lo < -half:
            lo = -half
        if hi > half:
            hi = half
        if hi - lo >= 2 * half:
            return False
        lo32 = <uint32_t>lo
        span32 = <uint32_t>(hi - lo)
        for i in range(n):
            bad32 |= <uint32_t>(w32[i] - lo32) >= span32
        return bad32 != 0
    for i in range(n):
        bad64 |= (w64[i] - lo64) >= span64
    return bad64 != 0
