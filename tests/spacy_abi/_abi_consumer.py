"""A small compiled client of thinc's C interface, built the way spaCy's extensions are.

`build(folder, headers)` compiles `abi_consumer.pyx`, which cimports `thinc.backends.cblas`,
`thinc.backends.linalg` and `thinc.extra.search` exactly as spaCy 3.8 does, against thinc-NAMED
headers: either the ones written here ("own": the layout of ../shared/spec/spacy-c-abi.md, in C)
or thinc 8.3.14's own installed .pxd files ("thinc": C++, as spaCy builds). The module checks the
binary interface when it is imported (type sizes, vtable capsules, C-function signatures), so the
same .so runs against real thinc or, with the alias installed, against plait; `run_driver` does
both in subprocesses (a process that imported the real thinc cannot take the alias).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Optional

# --- thinc-named headers with the layout of the spec page (no C++, no cymem headers) ----------

OWN_PXDS = {
    "thinc/__init__.pxd": "",
    "thinc/backends/__init__.pxd": "",
    "thinc/extra/__init__.pxd": "",
    "thinc/backends/cblas.pxd": '''
        ctypedef void (*sgemm_ptr)(bint transA, bint transB, int M, int N, int K,
                                   float alpha, const float* A, int lda, const float* B,
                                   int ldb, float beta, float* C, int ldc) noexcept nogil
        ctypedef void (*saxpy_ptr)(int N, float alpha, const float* X, int incX,
                                   float* Y, int incY) noexcept nogil
        ctypedef void (*daxpy_ptr)(int N, double alpha, const double* X, int incX,
                                   double* Y, int incY) noexcept nogil

        cdef class CBlas:
            # 16 bytes whose contents are the provider's business
            cdef void* _opaque0
            cdef void* _opaque1

        cdef daxpy_ptr daxpy(CBlas cblas) noexcept nogil
        cdef saxpy_ptr saxpy(CBlas cblas) noexcept nogil
        cdef sgemm_ptr sgemm(CBlas cblas) noexcept nogil
        cdef void set_daxpy(CBlas cblas, daxpy_ptr daxpy) noexcept nogil
        cdef void set_saxpy(CBlas cblas, saxpy_ptr saxpy) noexcept nogil
        cdef void set_sgemm(CBlas cblas, sgemm_ptr sgemm) noexcept nogil
    ''',
    "thinc/backends/linalg.pxd": '''
        from libc.stdint cimport int32_t
        ctypedef float weight_t

        cdef class Matrix:
            cdef readonly object mem
            cdef weight_t* data
            cdef readonly int32_t nr_row
            cdef readonly int32_t nr_col

        cdef class Vec:
            @staticmethod
            cdef inline int arg_max(const weight_t* scores, const int n_classes) noexcept nogil:
                cdef int i, best = 0
                for i in range(1, n_classes):
                    if scores[i] > scores[best]:
                        best = i
                return best

        cdef class VecVec:
            @staticmethod
            cdef inline void add_i(weight_t* x, const weight_t* y, weight_t scale,
                                   int32_t nr) noexcept nogil:
                cdef int i
                for i in range(nr):
                    x[i] += scale * y[i]

        cdef class Mat:
            @staticmethod
            cdef inline void mean_row(weight_t* Ex, const weight_t* mat, int32_t nr_row,
                                      int32_t nr_col) noexcept nogil:
                pass
    ''',
    "thinc/extra/search.pxd": '''
        from libc.stdint cimport uint64_t

        ctypedef uint64_t hash_t
        ctypedef uint64_t class_t
        ctypedef float weight_t

        ctypedef int (*trans_func_t)(void* dest, void* src, class_t clas, void* x) except -1
        ctypedef void* (*init_func_t)(object mem, int n, void* extra_args) except NULL
        ctypedef int (*del_func_t)(object mem, void* state, void* extra_args) except -1
        ctypedef int (*finish_func_t)(void* state, void* extra_args) except -1
        ctypedef hash_t (*hash_func_t)(void* state, void* x) except 0

        cdef struct _State:
            void* content
            class_t* hist
            weight_t score
            weight_t loss
            int i
            int t
            bint is_done

        cdef class Beam:
            cdef object mem
            cdef class_t nr_class
            cdef class_t width
            cdef class_t size
            cdef public weight_t min_density
            cdef int t
            cdef readonly bint is_done
            cdef list histories
            cdef list _parent_histories
            cdef weight_t** scores
            cdef int** is_valid
            cdef weight_t** costs
            cdef _State* _parents
            cdef _State* _states
            cdef del_func_t del_func

            cdef int _fill(self, void* q, weight_t** scores, int** is_valid) except -1

            cdef inline void* at(self, int i) noexcept nogil:
                return self._states[i].content

            cdef int initialize(self, init_func_t init_func, del_func_t del_func, int n,
                                void* extra_args) except -1
            cdef int advance(self, trans_func_t transition_func, hash_func_t hash_func,
                             void* extra_args) except -1
            cdef int check_done(self, finish_func_t finish_func, void* extra_args) except -1

            cdef inline void set_cell(self, int i, int j, weight_t score, int is_valid,
                                      weight_t cost) noexcept nogil:
                self.scores[i][j] = score
                self.is_valid[i][j] = is_valid
                self.costs[i][j] = cost

            cdef int set_row(self, int i, const weight_t* scores, const int* is_valid,
                             const weight_t* costs) except -1
            cdef int set_table(self, weight_t** scores, int** is_valid, weight_t** costs) except -1

        cdef class MaxViolation:
            cdef object mem
            cdef weight_t cost
            cdef weight_t delta
            cdef readonly weight_t p_score
            cdef readonly weight_t g_score
            cdef readonly double Z
            cdef readonly double gZ
            cdef class_t n
            cdef readonly list p_hist
            cdef readonly list g_hist
            cdef readonly list p_probs
            cdef readonly list g_probs

            cpdef int check(self, Beam pred, Beam gold) except -1
            cpdef int check_crf(self, Beam pred, Beam gold) except -1
    ''',
}

# --- the client ---------------------------------------------------------------------------------

CONSUMER_PYX = '''
# cython: language_level=3, boundscheck=False, wraparound=False
"""Calls the thinc C interface the way spaCy's parser does, on toy transition-system states."""
import gc

from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free, malloc

# spaCy's own cimports (parser_model, _beam_utils, arc_eager)
from thinc.backends.cblas cimport CBlas, daxpy, saxpy, set_saxpy, sgemm
from thinc.backends.linalg cimport Vec, VecVec
from thinc.extra.search cimport (Beam, MaxViolation, _State, class_t, del_func_t, finish_func_t,
                                 hash_func_t, hash_t, init_func_t, trans_func_t, weight_t)


def gemm(CBlas cblas, float[:, ::1] A, float[:, ::1] B, float[:, ::1] C, bint transA,
         bint transB, float alpha, float beta):
    """C = alpha op(A) op(B) + beta C through sgemm(cblas), row-major, without the GIL."""
    cdef int M = C.shape[0], N = C.shape[1]
    cdef int K = A.shape[0] if transA else A.shape[1]
    with nogil:
        sgemm(cblas)(transA, transB, M, N, K, alpha, &A[0, 0], <int>A.shape[1],
                     &B[0, 0], <int>B.shape[1], beta, &C[0, 0], <int>C.shape[1])


def axpy(CBlas cblas, int n, float alpha, float[::1] X, int incX, float[::1] Y, int incY):
    with nogil:
        saxpy(cblas)(n, alpha, &X[0], incX, &Y[0], incY)


def axpy64(CBlas cblas, double alpha, double[::1] X, double[::1] Y):
    with nogil:
        daxpy(cblas)(<int>X.shape[0], alpha, &X[0], 1, &Y[0], 1)


cdef void _halving_saxpy(int N, float alpha, const float* X, int incX, float* Y,
                         int incY) noexcept nogil:
    cdef int i
    for i in range(N):
        Y[i * incY] += 0.5 * alpha * X[i * incX]


def replace_saxpy_and_axpy(CBlas cblas, float[::1] X, float[::1] Y):
    """set_saxpy, then saxpy(cblas) gives the replacement."""
    set_saxpy(cblas, _halving_saxpy)
    with nogil:
        saxpy(cblas)(<int>X.shape[0], 1.0, &X[0], 1, &Y[0], 1)


def as_cblas(obj):
    """The type check of spaCy's `cdef CBlas cblas = ops.cblas()`."""
    cdef CBlas cblas = obj
    return cblas


def as_beam(obj):
    cdef Beam beam = obj
    return beam


def vec_helpers(float[::1] x, float[::1] y):
    """spaCy's compiled copies of the inline helpers (they must run whatever the provider)."""
    VecVec.add_i(&x[0], &y[0], 2.0, <int>x.shape[0])
    return Vec.arg_max(&x[0], <int>x.shape[0])


# --- toy states ----------------------------------------------------------------------------------

cdef struct Toy:
    int id
    int length
    int n_moves
    int last
    uint64_t sig

cdef struct Config:
    int stop_class
    int raise_class
    int fail_init_at
    uint64_t hash_mod

cdef dict _live = {}
cdef list _events = []
cdef int _next_id = 0


cdef void* toy_init(object mem, int n, void* extra) except NULL:
    global _next_id
    cdef Config* cfg = <Config*>extra
    if type(mem).__module__ != "cymem.cymem" or type(mem).__name__ != "Pool":
        _events.append(f"init got mem of type {type(mem)!r}")
    if cfg.fail_init_at >= 0 and _next_id == cfg.fail_init_at:
        raise MemoryError(f"toy init refused state {_next_id}")
    cdef Toy* toy = <Toy*>calloc(1, sizeof(Toy))
    toy.id = _next_id
    toy.length = n
    toy.last = -1
    _next_id += 1
    _live[<size_t>toy] = toy.id
    return toy


cdef int toy_del(object mem, void* state, void* extra) except -1:
    key = <size_t>state
    if extra != NULL:
        _events.append("del got extra_args")
    if key not in _live:
        _events.append("del of an unknown state, or a second del")
        return 0
    del _live[key]
    free(state)
    return 0


cdef int toy_trans(void* dest, void* src, class_t clas, void* extra) except -1:
    cdef Config* cfg = <Config*>extra
    cdef Toy* d = <Toy*>dest
    cdef Toy* s = <Toy*>src
    if <int>clas == cfg.raise_class:
        raise ValueError(f"toy transition refused class {clas}")
    d.length = s.length
    d.n_moves = s.n_moves + 1
    d.last = <int>clas
    d.sig = s.sig * 1000003 + clas + 1
    return 0


cdef int toy_finish(void* state, void* extra) except -1:
    cdef Config* cfg = <Config*>extra
    cdef Toy* toy = <Toy*>state
    return toy.n_moves >= toy.length or (toy.n_moves > 0 and toy.last == cfg.stop_class)


cdef hash_t toy_hash(void* state, void* extra) except? 0:
    cdef Config* cfg = <Config*>extra
    return (<Toy*>state).sig % cfg.hash_mod + 1


cdef dict _slot(_State* s):
    cdef Toy* toy = <Toy*>s.content
    return {
        "id": toy.id if toy != NULL else None,
        "n_moves": toy.n_moves if toy != NULL else None,
        "sig": toy.sig if toy != NULL else None,
        "last": toy.last if toy != NULL else None,
        "score": s.score, "loss": s.loss, "i": s.i, "t": s.t, "is_done": s.is_done,
    }


def snapshot(Beam beam):
    """What spaCy's compiled code can see of a beam (its C fields), plus the Python view."""
    cdef size_t n = beam.size, i, j
    cdef void** at = <void**>malloc((n + 1) * sizeof(void*))
    with nogil:
        for i in range(n):
            at[i] = beam.at(<int>i)
    ats = [(<Toy*>at[i]).id if at[i] != NULL else None for i in range(n)]
    free(at)
    cdef bint zero = True
    for i in range(beam.width):
        for j in range(beam.nr_class):
            if beam.scores[i][j] != 0 or beam.is_valid[i][j] != 0 or beam.costs[i][j] != 0:
                zero = False
    py = <object>beam
    return {
        "size": beam.size, "is_done": beam.is_done, "t": beam.t, "nr_class": beam.nr_class,
        "width": beam.width, "min_density": beam.min_density, "tables_zero": zero,
        "states": [_slot(&beam._states[i]) for i in range(beam.width)],
        "parents": [_slot(&beam._parents[i]) for i in range(beam.width)],
        "histories": [list(h) for h in beam.histories],
        "at": ats,
        "py": {"len": len(py), "score": py.score, "loss": py.loss, "probs": py.probs,
               "scores": py.scores, "min_score": py.min_score, "is_done": py.is_done,
               "histories": [list(h) for h in py.histories], "min_density": py.min_density},
    }


cdef int _fill(Beam beam, S, V, C, int mode) except -1:
    cdef float[:, ::1] s = S
    cdef int[:, ::1] v = V
    cdef float[:, ::1] c = C
    cdef int i, j, size = <int>beam.size, nr = <int>beam.nr_class, width = <int>beam.width
    cdef weight_t** sp
    cdef int** vp
    cdef weight_t** cp
    if mode == 0:
        sp = <weight_t**>malloc(width * sizeof(weight_t*))
        vp = <int**>malloc(width * sizeof(int*))
        cp = <weight_t**>malloc(width * sizeof(weight_t*))
        for i in range(width):
            sp[i] = &s[i, 0]
            vp[i] = &v[i, 0]
            cp[i] = &c[i, 0]
        try:
            beam.set_table(sp, vp, cp)
        finally:
            free(sp)
            free(vp)
            free(cp)
    elif mode == 1:
        # spaCy's beam code writes the live rows of the tables in place
        with nogil:
            for i in range(size):
                for j in range(nr):
                    beam.scores[i][j] = s[i, j]
                    beam.is_valid[i][j] = v[i, j]
                    beam.costs[i][j] = c[i, j]
    elif mode == 2:
        with nogil:
            for i in range(size):
                for j in range(nr):
                    beam.set_cell(i, j, s[i, j], v[i, j], c[i, j])
    else:
        for i in range(size):
            beam.set_row(i, &s[i, 0], &v[i, 0], &c[i, 0])
    return 0


def run_search(int nr_class, int width, float min_density, int length, list steps, *,
               int fill_mode=1, bint use_hash=False, uint64_t hash_mod=1, int stop_class=-1,
               int raise_class=-1, int fail_init_at=-1, bint keep=False, int reinitialize=0):
    """initialize, then (check_done, fill, advance) per step of `steps`, then check_done.

    Returns {"trace": snapshots, "error": ..., "n_init", "live_after", "events"}, and the beam too
    with keep=True (then the states are released when the beam goes).
    """
    global _next_id
    cdef Config cfg
    cfg.stop_class = stop_class
    cfg.raise_class = raise_class
    cfg.fail_init_at = fail_init_at
    cfg.hash_mod = hash_mod
    if not keep:
        _next_id = 0
        _live.clear()
        del _events[:]
    beam = Beam(nr_class, width, min_density=min_density)
    cdef Beam b = beam
    trace = []
    error = None
    try:
        for _ in range(1 + reinitialize):
            b.initialize(<init_func_t>toy_init, <del_func_t>toy_del, length, &cfg)
        trace.append(snapshot(b))
        for S, V, C in steps:
            b.check_done(<finish_func_t>toy_finish, &cfg)
            if b.is_done:
                break
            _fill(b, S, V, C, fill_mode)
            b.advance(<trans_func_t>toy_trans, <hash_func_t>toy_hash if use_hash else NULL, &cfg)
            trace.append(snapshot(b))
        b.check_done(<finish_func_t>toy_finish, &cfg)
        trace.append(snapshot(b))
    except Exception as err:
        error = f"{type(err).__name__}: {err}"
    result = {"trace": trace, "error": error}
    if keep:
        return beam, result
    n_init = _next_id
    del b
    del beam
    gc.collect()
    result.update(n_init=n_init, live_after=len(_live), events=list(_events))
    return result


def drop_unused_beam(int nr_class, int width):
    """A beam that is never initialized must go away without calling any del_func."""
    beam = Beam(nr_class, width)
    del beam
    gc.collect()
    return list(_events)


def violation(MaxViolation mv, Beam pred, Beam gold, bint crf):
    """check / check_crf through the vtable (skip_dispatch 0, as spaCy calls it), then the fields."""
    if crf:
        mv.check_crf(pred, gold)
    else:
        mv.check(pred, gold)
    return {"cost": mv.cost, "delta": mv.delta, "p_score": mv.p_score, "g_score": mv.g_score,
            "Z": mv.Z, "gZ": mv.gZ, "p_hist": mv.p_hist, "g_hist": mv.g_hist,
            "p_probs": mv.p_probs, "g_probs": mv.g_probs}
'''

_SETUP = '''
import sys
from setuptools import Extension, setup
from Cython.Build import cythonize
language = sys.argv.pop(1)
include = sys.argv.pop(1).split("{sep}")
ext = Extension("abi_consumer", ["abi_consumer.pyx"], language=language)
setup(ext_modules=cythonize([ext], quiet=True, include_path=include,
                            compiler_directives={{"language_level": "3"}}))
'''


def thinc_headers() -> Optional[Path]:
    """The site-packages folder holding thinc 8.3's own .pxd files (and cymem's), if installed."""
    import importlib.util

    spec = importlib.util.find_spec("thinc")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0]).parent
    needed = ["thinc/backends/cblas.pxd", "thinc/backends/linalg.pxd", "thinc/extra/search.pxd",
              "cymem/cymem.pxd"]
    return root if all((root / n).exists() for n in needed) else None


def why_cannot_build(headers: str = "own") -> Optional[str]:
    """None when Cython, setuptools and a C (C++ for thinc's headers) compiler are there, else why not."""
    try:
        import Cython  # noqa: F401
    except ImportError:
        return "Cython is not installed (pip install Cython: it is in plait's test extra)"
    try:
        import setuptools  # noqa: F401
    except ImportError:
        return "setuptools is not installed (pip install setuptools)"
    cc = sysconfig.get_config_var("CC") or "cc"
    if shutil.which(cc.split()[0]) is None and shutil.which("cc") is None:
        return f"no C compiler ({cc}) on this machine"
    if headers == "thinc":
        cxx = (sysconfig.get_config_var("CXX") or "c++").split()[0]
        if shutil.which(cxx) is None and shutil.which("c++") is None and shutil.which("g++") is None:
            return f"no C++ compiler ({cxx}) for thinc's own (C++) headers"
    include = sysconfig.get_paths()["include"]
    if not Path(include, "Python.h").exists():
        return f"no Python headers (Python.h) under {include}"
    return None


def build(folder: Path, headers: str) -> Path:
    """Compile abi_consumer against `headers` ("own" or "thinc") in `folder`; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    build_dir = folder / "build"
    build_dir.mkdir(exist_ok=True)
    if headers == "own":
        pxd_root = folder / "headers"
        for name, text in OWN_PXDS.items():
            path = pxd_root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
        include, language = [str(pxd_root)], "c"
    else:
        root = thinc_headers()
        assert root is not None
        include, language = [str(root)], "c++"
    (build_dir / "abi_consumer.pyx").write_text(CONSUMER_PYX)
    (build_dir / "setup.py").write_text(_SETUP.format(sep=os.pathsep))
    env = {k: v for k, v in os.environ.items() if k not in ("PLAIT_AS_THINC", "PYTHONPATH")}
    done = subprocess.run(
        [sys.executable, "setup.py", language, os.pathsep.join(include), "build_ext", "--inplace", "-q"],
        cwd=build_dir, capture_output=True, text=True, env=env, timeout=900,
    )
    if done.returncode != 0:
        raise RuntimeError(f"building the ABI consumer against {headers} headers failed:\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    return build_dir


DRIVER = r'''
import json, sys, warnings
warnings.simplefilter("error")          # a size mismatch is a RuntimeWarning at import
provider, folder = sys.argv[1], sys.argv[2]
if provider == "plait":
    import plait.thinc_alias
    plait.thinc_alias.install()
sys.path.insert(0, folder)
import numpy
import abi_consumer as C
import thinc.extra.search as search_module
import thinc.backends.cblas as cblas_module
job = json.load(sys.stdin)
namespace = {"C": C, "numpy": numpy, "search": search_module, "cblas": cblas_module, "json": json}
exec(job["code"], namespace)
out = namespace["run"](job.get("args"))
print("@@RESULT@@" + json.dumps({"origin": {"search": search_module.__name__,
                                            "cblas": cblas_module.__name__}, "out": out}))
'''


def run_driver(provider: str, folder: Path, code: str, args: Any = None, timeout: int = 300) -> Dict[str, Any]:
    """Run `code` (which defines `run(args)` using C = abi_consumer) in a fresh interpreter.

    provider "thinc": the real thinc serves `thinc.*`; "plait": plait does, through the alias.
    Returns {"origin": module names seen as thinc.extra.search / thinc.backends.cblas, "out": ...}.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("PLAIT_AS_THINC",)}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, provider, str(folder)],
        input=json.dumps({"code": code, "args": args}), capture_output=True, text=True,
        env=env, timeout=timeout,
    )
    marker = "@@RESULT@@"
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(marker)]
    if done.returncode != 0 or not lines:
        raise AssertionError(f"the {provider} driver failed (exit {done.returncode}):\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    return json.loads(lines[-1][len(marker):])


def available_providers() -> List[str]:
    """'plait' always; 'thinc' where the real thinc 8.3 is installed (the differential peer)."""
    import importlib.util

    return ["plait"] + (["thinc"] if importlib.util.find_spec("thinc") is not None else [])
