"""plait's compiled CPU kernels, in the build for this processor or the one PLAIT_ISA names.

The modules with vector code (act, conv, conv_gemm, dense_gemm, gather, hashing, lstm, maxout, norm,
optim, random, seq) are built once per instruction-set level, each into its own folder beside this file:

* ``_avx512``: x86-64-v4 (AVX-512);
* ``_avx2``: x86-64-v3 (AVX2 and FMA);
* ``_portable``: the x86-64 baseline (SSE2), or, where plait cannot build per level (other
  compilers and processors), the compiler's own target.

By default the widest build this CPU runs is used. ``PLAIT_ISA=avx512|avx2|portable`` forces
one (read once, when the kernels are first imported), so that every path can be run and
measured on one machine; ``auto`` (or unset) is the default. Each build is a module of this
package under its usual name (``plait.backends._kernels_cpu.act``), so nothing else changes.
The builds agree within the tolerances in docs/isa.md.
"""
import os as _os

VARIABLE = "PLAIT_ISA"
#: Widest first: the default is the first one this CPU runs.
LEVELS = {"avx512": 4, "avx2": 3, "portable": 1}
_HERE = _os.path.dirname(_os.path.abspath(__file__))


def built() -> list:
    """The builds present beside this file (compiled, not only their folders), widest first."""
    from importlib.machinery import EXTENSION_SUFFIXES

    return [name for name in LEVELS
            if any(_os.path.isfile(_os.path.join(_HERE, "_" + name, "act" + suffix))
                   for suffix in EXTENSION_SUFFIXES)]


def runnable() -> list:
    """The builds present that this CPU (and OS) runs, widest first."""
    from . import isa

    return [name for name in built() if isa.cpu_runs(LEVELS[name])]


def _choose() -> str:
    raw = _os.environ.get(VARIABLE, "")
    wanted = raw.strip().lower() or "auto"
    present = built()
    if not present:
        raise ImportError(
            f"plait's compiled kernels are not built (none of the _avx512, _avx2 and _portable "
            f"folders in {_HERE} holds them). Build them with `make install` or `pip install -e .`."
        )
    runs = runnable()
    if not runs:
        raise ImportError(
            f"this CPU runs none of the builds of plait's kernels in {_HERE} ({', '.join(present)}); "
            f"rebuild plait on this machine (`pip install -e .`)."
        )
    if wanted == "auto":
        return runs[0]
    if wanted not in LEVELS:
        raise ValueError(
            f"{VARIABLE}={raw!r} is not an instruction set plait knows. Use one of "
            f"{', '.join(LEVELS)} or auto (or unset it); this machine runs {', '.join(runs) or 'none'}."
        )
    if wanted not in present:
        raise ValueError(
            f"{VARIABLE}={raw!r}: this installation of plait has no {wanted} build of its kernels "
            f"(built: {', '.join(present)}; per-level builds need GCC 12+ on x86-64). Unset "
            f"{VARIABLE} or choose one of those."
        )
    if wanted not in runs:
        raise ValueError(
            f"{VARIABLE}={raw!r}: this CPU cannot run the {wanted} build of plait's kernels (it runs "
            f"{', '.join(runs)}). Unset {VARIABLE} or choose one of those."
        )
    return wanted


#: The build in use: "avx512", "avx2" or "portable".
ISA = _choose()
# The chosen build's folder comes first, so `from plait.backends._kernels_cpu import act` (and
# every other import of these modules) loads that build under the usual module name.
__path__.insert(0, _os.path.join(_HERE, "_" + ISA))
