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


class BuildExt(build_ext):
    def build_extensions(self):
        use_omp = self.compiler.compiler_type == "unix" and _compiler_has_openmp(self.compiler)
        for ext in self.extensions:
            ext.extra_compile_args = ["-O3", "-fno-strict-aliasing"] + (["-fopenmp"] if use_omp else [])
            ext.extra_link_args = ["-fopenmp"] if use_omp else []
        if not use_omp:
            print("plait: building without OpenMP (compiler lacks it)", file=sys.stderr)
        super().build_extensions()


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
            )
        )
    return cythonize(
        exts,
        compiler_directives={
            "language_level": "3",
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt, "build_py": BuildPy})
