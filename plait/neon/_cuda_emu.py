"""Run plait.neon's generated CUDA kernels on the host: the test harness for machines without a GPU.

The sources of `plait.neon._fuse_cuda` use only `threadIdx`/`blockIdx`/`blockDim`/`gridDim`
and plain C arithmetic, so with the header below (the CUDA qualifiers defined away, the thread
indices as globals) a host C++ compiler builds them into a shared library. `HostEmulator` is a
launcher for `_fuse_cuda.execute(..., launcher=...)`: it compiles each source once, then runs a
launch as a loop over a deliberately small grid (fewer threads than elements, so every
grid-stride loop wraps), one thread after another, on numpy arrays.

It checks the kernels' indexing, broadcasting, conversions and arithmetic (host libm standing in
for CUDA's math library); it says nothing about speed, and never runs a GPU.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Any, Dict, Optional

import numpy as np

EMULATION_HEADER = r"""
#include <math.h>
#define __global__
#define __device__
#define __forceinline__ inline
struct pl_emu_dim3 { unsigned int x, y, z; };
static pl_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
extern "C" void pl_emu_set_thread(unsigned int block, unsigned int thread,
                                  unsigned int n_blocks, unsigned int n_threads) {
    blockIdx.x = block; threadIdx.x = thread; gridDim.x = n_blocks; blockDim.x = n_threads;
    blockIdx.y = blockIdx.z = threadIdx.y = threadIdx.z = 0;
    gridDim.y = gridDim.z = blockDim.y = blockDim.z = 1;
}
"""


def host_compiler() -> Optional[str]:
    """The host C++ compiler ($PLAIT_NEON_CXX, $CXX, g++, c++, clang++), or None."""
    for cand in (os.environ.get("PLAIT_NEON_CXX"), os.environ.get("CXX"), "g++", "c++", "clang++"):
        if cand and shutil.which(cand):
            return cand
    return None


class HostEmulator:
    """A `_fuse_cuda` launcher that runs kernels on the host (numpy arrays, one thread at a time)."""

    xp = np

    def __init__(self, grid=(3, 5), cxx: Optional[str] = None, folder: Optional[str] = None):
        self.cxx = cxx or host_compiler()
        if self.cxx is None:
            raise RuntimeError("HostEmulator needs a host C++ compiler (g++, c++ or clang++)")
        self.grid = grid
        if folder is None:
            from ._fuse import cache_dir
            folder = os.path.join(cache_dir(), "cuda_emu")
        self.folder = folder
        self._libs: Dict[str, Any] = {}
        self._lock = threading.Lock()
        self.compiled = 0
        self.launches = 0

    def _library(self, source: str):
        key = hashlib.sha256((self.cxx + "\0" + EMULATION_HEADER + source).encode()).hexdigest()[:32]
        lib = self._libs.get(key)
        if lib is not None:
            return lib
        with self._lock:
            os.makedirs(self.folder, exist_ok=True)
            so = os.path.join(self.folder, key + ".so")
            if not os.path.exists(so):
                fd, tmp_src = tempfile.mkstemp(suffix=".cpp", dir=self.folder)
                with os.fdopen(fd, "w") as f:
                    f.write(EMULATION_HEADER + source)
                tmp_so = tmp_src[:-4] + ".so"
                try:
                    r = subprocess.run(
                        [self.cxx, "-O1", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC",
                         "-std=c++14", "-w", "-o", tmp_so, tmp_src],
                        capture_output=True, text=True, timeout=120)
                    if r.returncode != 0:
                        raise RuntimeError(f"host compile of a generated kernel failed:\n{r.stderr[-3000:]}")
                    os.replace(tmp_so, so)
                    self.compiled += 1
                finally:
                    for t in (tmp_src, tmp_so):
                        if os.path.exists(t):
                            os.unlink(t)
            lib = ctypes.CDLL(so)
            lib.pl_emu_set_thread.argtypes = [ctypes.c_uint] * 4
            self._libs[key] = lib
            return lib

    def function(self, source: str, name: str):
        lib = self._library(source)
        return lib, getattr(lib, name)

    @staticmethod
    def _arg(v):
        if isinstance(v, np.ndarray):
            return ctypes.c_void_p, ctypes.c_void_p(v.__array_interface__["data"][0])
        kinds = {np.int64: ctypes.c_longlong, np.uint64: ctypes.c_ulonglong,
                 np.float64: ctypes.c_double, np.float32: ctypes.c_float}
        ct = kinds[type(v)]
        return ct, ct(v.item())

    def launch(self, fn, n: int, args: tuple) -> None:
        lib, kernel = fn
        conv = [self._arg(a) for a in args]
        kernel.argtypes = [c for c, _ in conv]
        kernel.restype = None
        vals = [v for _, v in conv]
        nb, nt = self.grid
        for b in range(nb):
            for t in range(nt):
                lib.pl_emu_set_thread(b, t, nb, nt)
                kernel(*vals)
        self.launches += 1

    @staticmethod
    def ptr(a) -> int:
        return a.__array_interface__["data"][0]


_shared = None


def shared_emulator() -> "HostEmulator":
    """One process-wide emulator (libraries cached on disk under $PLAIT_CACHE_DIR/neon/cuda_emu,
    else ~/.cache/plait/neon/cuda_emu, like the CPU fused kernels)."""
    global _shared
    if _shared is None:
        _shared = HostEmulator()
    return _shared
