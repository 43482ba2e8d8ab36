# cython: language_level=3
"""Counters in memory shared by the ranks of one machine, with the ordering the reduction needs.

The shared-memory reduction (_shm.py) tells the other ranks "my gradients are written" or "my
slice is summed" by raising a counter after writing the data. On x86 plain stores would keep
that order; on other CPUs (ARM) a store of the counter could become visible before the data.
So the counter goes up with a release store and is read with acquire loads: whoever sees the
new value also sees everything written before it.
"""
from libc.stdint cimport int64_t, uintptr_t


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    static inline void plait_store_release(int64_t* p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline int64_t plait_load_acquire(const int64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    #else
    /* MSVC: volatile accesses have acquire/release semantics (/volatile:ms, its x86 default). */
    static inline void plait_store_release(int64_t* p, int64_t v) { *(volatile int64_t*)p = v; }
    static inline int64_t plait_load_acquire(const int64_t* p) { return *(const volatile int64_t*)p; }
    #endif
    """
    void plait_store_release(int64_t* p, int64_t v) noexcept nogil
    int64_t plait_load_acquire(const int64_t* p) noexcept nogil


def publish(uintptr_t address, int64_t value):
    """Store `value` at the int64 at `address`, after every write this thread made before."""
    plait_store_release(<int64_t*>address, value)


def all_reached(uintptr_t address, int count, Py_ssize_t stride, int64_t value):
    """Whether the `count` int64 counters at address, address + stride, ... are all >= value."""
    cdef int i
    for i in range(count):
        if plait_load_acquire(<const int64_t*>(address + i * stride)) < value:
            return False
    return True


def read(uintptr_t address):
    """The int64 at `address` (acquire)."""
    return plait_load_acquire(<const int64_t*>address)
