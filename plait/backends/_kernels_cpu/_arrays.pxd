# Shared array checks for the kernel modules: which arrays a kernel may read in place.
# Inline, so each module compiles its own copy without a call across extension modules.
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
