# cython: language_level=3
"""What the compiled kernels were built with: OpenMP or not, and how many threads it gives."""
from cython.parallel cimport prange, threadid

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int plait_omp_max_threads(void) { return omp_get_max_threads(); }
    static int plait_has_openmp(void) { return 1; }
    #else
    static int plait_omp_max_threads(void) { return 1; }
    static int plait_has_openmp(void) { return 0; }
    #endif
    """
    int plait_omp_max_threads() nogil
    int plait_has_openmp() nogil


def has_openmp() -> bool:
    """True when the kernels were compiled with OpenMP."""
    return bool(plait_has_openmp())


def openmp_max_threads() -> int:
    """Threads an OpenMP region would use now (1 when built without OpenMP)."""
    return plait_omp_max_threads()


def threads_used(int n_items=256) -> int:
    """Run a prange loop and count the distinct threads that took part in it."""
    cdef int[256] owner
    cdef int i, n = min(max(n_items, 1), 256)
    for i in prange(n, nogil=True, schedule="static"):
        owner[i] = threadid()
    return len({owner[i] for i in range(n)})
