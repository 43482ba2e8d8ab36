# cython: language_level=3
"""Which instruction-set levels this processor runs, for picking a build of the kernels.

Built once (at the baseline), whatever the other kernel modules are built for; see
plait_isa.h and plait/backends/_kernels_cpu/__init__.py.
"""

cdef extern from *:
    """
    #if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && defined(__x86_64__)
    static int plait_cpu_runs(int level) {
        __builtin_cpu_init();  /* also checks that the OS saves the wide registers */
        if (level >= 4) return __builtin_cpu_supports("x86-64-v4");
        if (level == 3) return __builtin_cpu_supports("x86-64-v3");
        return 1;
    }
    #else
    static int plait_cpu_runs(int level) { return level <= 1; }
    #endif
    """
    int plait_cpu_runs(int level) noexcept nogil


def cpu_runs(int level) -> bool:
    """Whether this CPU (and OS) runs code built for x86-64-v`level` (4: AVX-512, 3: AVX2+FMA).

    Level 1 (the build's baseline) always runs. Where plait cannot tell (other compilers or
    processors), only level 1 does.
    """
    return bool(plait_cpu_runs(level))
