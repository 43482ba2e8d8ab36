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
