# cython: language_level=3
"""Float32 vector helpers for Cython code (thinc.backends.linalg's interface).

The helpers are static inline methods of Vec, VecVec and Mat, declared in linalg.pxd: Cython
code calls them as `Vec.arg_max(scores, n)`. Those classes have no Python-level behaviour.
"""
from cpython.mem cimport PyMem_Calloc, PyMem_Free


cdef class Matrix:
    """A zero-filled (nr_row, nr_col) float32 matrix for C code; `data` is its row-major buffer.

    The matrix owns its buffer (`mem` stays None: thinc keeps a cymem Pool there).
    """

    def __init__(self, int nr_row=0, int nr_col=0):
        if nr_row < 0 or nr_col < 0:
            raise ValueError(f"Matrix: nr_row and nr_col must be >= 0, got ({nr_row}, {nr_col}).")
        PyMem_Free(self.data)
        self.data = NULL
        self.nr_row = nr_row
        self.nr_col = nr_col
        if nr_row and nr_col:
            self.data = <weight_t*>PyMem_Calloc(<size_t>nr_row * nr_col, sizeof(weight_t))
            if self.data == NULL:
                raise MemoryError(f"Matrix: could not allocate ({nr_row}, {nr_col}) floats.")

    def __dealloc__(self):
        PyMem_Free(self.data)


cdef class Vec:
    """Static inline helpers on one float32 vector (C code only; see linalg.pxd)."""


cdef class VecVec:
    """Static inline helpers on two float32 vectors (C code only; see linalg.pxd)."""


cdef class Mat:
    """Static inline helpers on the rows of a float32 matrix (C code only; see linalg.pxd)."""
