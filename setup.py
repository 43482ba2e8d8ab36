"""Build script: compiles the Cython kernels under plait/ (OpenMP where the compiler has it)."""
import os
import sys
import tempfile
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent


def _compiler_has_openmp(compiler) -> bool:
    """Try to compile and link a tiny OpenMP program with this compiler."""
    if os.environ.get("PLAIT_NO_OPENMP"):
        return False
    src = "#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "omp_check.c"
        path.write_text(src)
        try:
            objs = compiler.compile([str(path)], output_dir=tmp, extra_postargs=["-fopenmp"])
            compiler.link_executable(objs, str(Path(tmp) / "omp_check"), extra_postargs=["-fopenmp"])
        except Exception:
            return False
    return True


# Kernel modules with vector code. Each is built once per instruction-set level into its own
# folder (plait/backends/_kernels_cpu/_avx512, _avx2, _portable; see plait_isa.h), and
# plait/backends/_kernels_cpu/__init__.py imports the build that PLAIT_ISA names or the CPU runs
# best. The other modules (isa, gemm, openmp_info) are built once.
KERNELS = "plait.backends._kernels_cpu"
ISA_MODULES = ("act", "conv", "conv_gemm", "dense_gemm", "gather", "hashing", "lstm", "maxout", "norm", "optim",
               "random", "seq")
ISA_BUILDS = (("avx512", 4), ("avx2", 3), ("portable", 1))


def _isa_builds():
    """The (folder, level) builds of the ISA modules: three with GCC 12+ for x86-64, else one."""
    one = (("portable", 0),)
    if os.environ.get("PLAIT_ONE_ISA_BUILD") or os.name != "posix":
        return one
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)
    src = (
        "#if !(defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && defined(__x86_64__))\n"
        "#error one build only\n#endif\n"
        '__attribute__((target("arch=x86-64-v4"))) int f(void) { return __builtin_cpu_supports("x86-64-v4"); }\n'
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "isa_check.c"
        path.write_text(src)
        try:
            compiler.compile([str(path)], output_dir=tmp)
        except Exception:
            print("plait: one build of the kernels, for the compiler's target (per-ISA builds need "
                  "GCC 12+ on x86-64)", file=sys.stderr)
            return one
    return ISA_BUILDS


class BuildExt(build_ext):
    def build_extensions(self):
        use_omp = self.compiler.compiler_type == "unix" and _compiler_has_openmp(self.compiler)
        for ext in self.extensions:
            ext.extra_compile_args = ["-O3", "-fno-strict-aliasing"] + (["-fopenmp"] if use_omp else [])
            ext.extra_link_args = ["-fopenmp"] if use_omp else []
        if not use_omp:
            print("plait: building without OpenMP (compiler lacks it)", file=sys.stderr)
        # The builds of one module share a C file: each compiles into its own temporary folder,
        # one extension at a time.
        self.parallel = None
        super().build_extensions()

    def build_extension(self, ext):
        isa = getattr(ext, "_plait_isa", None)
        if isa is None:
            return super().build_extension(ext)
        shared_temp = self.build_temp
        self.build_temp = os.path.join(shared_temp, f"isa_{isa}")
        try:
            return super().build_extension(ext)
        finally:
            self.build_temp = shared_temp


# The interpreter-start hook of the opt-in aliases (plait/_alias.py). It runs at every start of
# Python in the environment, so it only reads two environment variables unless one is set.
# Editable installs do not take it from the build: `make install` copies it (see the Makefile).
PTH_NAME = "plait-aliases.pth"


class BuildPy(build_py):
    """Also writes plait-aliases.pth to the root of the build, so it lands in site-packages."""

    def run(self):
        super().run()
        target = Path(self.build_lib) / PTH_NAME
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((ROOT / PTH_NAME).read_text())

    def get_outputs(self, include_bytecode=True):
        return list(super().get_outputs(include_bytecode)) + [str(Path(self.build_lib) / PTH_NAME)]


def _extensions():
    exts = []
    for pyx in sorted((ROOT / "plait").rglob("*.pyx")):
        rel = pyx.relative_to(ROOT).with_suffix("")
        exts.append(
            Extension(
                ".".join(rel.parts),
                [str(pyx.relative_to(ROOT))],
                include_dirs=[numpy.get_include()],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                # A change to a header beside the module rebuilds it.
                depends=[str(h.relative_to(ROOT)) for h in sorted(pyx.parent.glob("*.h"))],
            )
        )
    exts = cythonize(
        exts,
        compiler_directives={
            "language_level": "3",
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )
    builds = _isa_builds()
    expanded = []
    for ext in exts:
        module = ext.name.rsplit(".", 1)[-1]
        if not (ext.name.startswith(KERNELS + ".") and module in ISA_MODULES):
            expanded.append(ext)
            continue
        # One C file, compiled once per level; the module keeps its name (only the folder
        # differs), so the package imports whichever build it picks as its own module.
        for isa, level in builds:
            variant = Extension(f"{KERNELS}._{isa}.{module}", list(ext.sources),
                                include_dirs=list(ext.include_dirs), depends=list(ext.depends),
                                define_macros=list(ext.define_macros) + [("PLAIT_ISA_BUILD", str(level))])
            variant._plait_isa = isa
            expanded.append(variant)
    return expanded


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt, "build_py": BuildPy})
