/* The instruction set one build of a kernel module may use.

   On x86-64 with GCC 12 or newer, setup.py compiles every module that has vector code three
   times, with PLAIT_ISA_BUILD set to 4 (x86-64-v4: AVX-512), 3 (x86-64-v3: AVX2 and FMA) or 1
   (the x86-64 baseline: SSE2), into the folders _avx512, _avx2 and _portable beside this file.
   plait/backends/_kernels_cpu/__init__.py imports one of them: the best the CPU runs, or the
   one PLAIT_ISA names. So every path can be run and measured on a machine that has the widest
   one. No build runs code for a wider instruction set than its name says: the functions
   written for one set (with their own target attributes, picked at run time) are still
   compiled into every build, but each run-time check for them is capped by PLAIT_ISA_ALLOWS.

   Anywhere else (other compilers and processors) there is one build, in _portable, with
   PLAIT_ISA_LEVEL 0: compiled for the compiler's own target, with no attributes. */
#ifndef PLAIT_ISA_H
#define PLAIT_ISA_H

#if defined(PLAIT_ISA_BUILD) && PLAIT_ISA_BUILD > 0 && defined(__GNUC__) && !defined(__clang__) \
    && __GNUC__ >= 12 && defined(__x86_64__)
#define PLAIT_ISA_LEVEL PLAIT_ISA_BUILD
#pragma GCC diagnostic ignored "-Wpsabi"
#else
#define PLAIT_ISA_LEVEL 0
#endif

/* Whether code that needs `level` (4, 3) may run in this build, given that the CPU has it. */
#define PLAIT_ISA_ALLOWS(level) (PLAIT_ISA_LEVEL == 0 || PLAIT_ISA_LEVEL >= (level))

/* Function attributes: compile this function for the widest set the build allows, up to the
   one named. "AVX2" alone (no FMA) is for loops whose results must not change with the width:
   with FMA the compiler may fuse a multiply and an add, which rounds once instead of twice. */
#if PLAIT_ISA_LEVEL >= 4
#define PLAIT_UPTO_V4 __attribute__((target("arch=x86-64-v4")))
#define PLAIT_UPTO_V3 __attribute__((target("arch=x86-64-v3")))
#define PLAIT_UPTO_V4_AVX2 __attribute__((target("arch=x86-64-v4")))
#define PLAIT_UPTO_AVX2 __attribute__((target("avx2")))
#define PLAIT_ONLY_V4 __attribute__((target("arch=x86-64-v4")))
#elif PLAIT_ISA_LEVEL == 3
#define PLAIT_UPTO_V4 __attribute__((target("arch=x86-64-v3")))
#define PLAIT_UPTO_V3 __attribute__((target("arch=x86-64-v3")))
#define PLAIT_UPTO_V4_AVX2 __attribute__((target("avx2")))
#define PLAIT_UPTO_AVX2 __attribute__((target("avx2")))
#define PLAIT_ONLY_V4
#else
#define PLAIT_UPTO_V4
#define PLAIT_UPTO_V3
#define PLAIT_UPTO_V4_AVX2
#define PLAIT_UPTO_AVX2
#define PLAIT_ONLY_V4
#endif

#endif
