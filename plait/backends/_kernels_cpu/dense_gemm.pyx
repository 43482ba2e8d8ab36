# cython: language_level=3
"""float32 matrix products at the shapes of dense layers, without a BLAS (plait_dense_gemm.h).

`gemm(x, y, out, trans1, trans2, accumulate)` writes op(x) @ op(y) into `out` (a new array when
None), or adds it to `out` with `accumulate`. It takes 2-d float32 arrays whose rows or columns
are contiguous (a transposed view counts as a transpose flag); it declines (returns None) where
it does not apply: another dtype or layout, an `out` that is not C-contiguous and writable or
that overlaps an input, a zero dimension, a build or processor without AVX2 and FMA (the kernels
exist for AVX-512 and for AVX2; `available()`, `level()`), or no memory for the scratch copy;
and, in the default mode,
a product outside the shapes where the kernels were measured to beat the BLAS (`wanted`).
plait/backends/_blas.py sets the mode.
"""
cimport numpy as cnp
from libc.stdint cimport int64_t

from ._arrays cimport _product_dims, _product_operand, _row_major, _shares

cnp.import_array()

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    static inline void pdg_count(Py_ssize_t* n) { __atomic_fetch_add(n, 1, __ATOMIC_RELAXED); }
    #else
    static inline void pdg_count(Py_ssize_t* n) { *n += 1; }  /* no kernels without GCC/Clang */
    #endif
    """
    void pdg_count(Py_ssize_t* n) nogil

cdef extern from "plait_dense_gemm.h" nogil:
    int pdg_available()
    int pdg_level()
    int pdg_gemm(int64_t M, int64_t N, int64_t K, const float* x, Py_ssize_t ldx, int tx,
                 const float* y, Py_ssize_t ldy, int ty, float* out, int beta)


#: Products of at least this many multiply-adds go to the BLAS in the default mode: there its
#: packed blocks (and its threads) win (bench/README.md, "plait's own products").
MAX_WORK = 1 << 28
#: Nor do x @ y.T products (x, y row-major) whose output is at most TINY_SIDE x SMALL_SIDE:
#: either way one operand is copied transposed first, and the tile is mostly empty lanes.
TINY_SIDE = 16
SMALL_SIDE = 64
#: With the AVX2 build the rule also asks for a thin product: M at most AVX2_THIN_SIDE, or K at
#: most AVX2_THIN_K, or N at most AVX2_THIN_SIDE (AVX2_THIN_N_TX where x is transposed: a weight
#: gradient dY.T @ X with 64 columns and hundreds of rows ran at 0.63-0.97x the BLAS, with 10
#: at 1.1-1.7x). There the BLAS's packing of both operands weighs most; at the MLP's larger
#: shapes (M 128-256, K and N 512-784) OpenBLAS's AVX2 kernels ran up to 1.1x as fast as these
#: (Emerald Rapids with AVX2 forced; bench/README.md, "Panels for the copied operand").
#: Mode 3 applies the same bounds to the AVX-512 build, for processors where only the thin
#: products won a whole training loop (Zen 4: bench/README.md, "On Zen 4").
AVX2_THIN_SIDE = 64
AVX2_THIN_K = 128
AVX2_THIN_N_TX = 16
# The same bounds as C values, for the rule's checks without the GIL.
cdef double _MAX_WORK = MAX_WORK
cdef Py_ssize_t _TINY_SIDE = TINY_SIDE
cdef Py_ssize_t _SMALL_SIDE = SMALL_SIDE
cdef Py_ssize_t _AVX2_THIN_SIDE = AVX2_THIN_SIDE
cdef Py_ssize_t _AVX2_THIN_K = AVX2_THIN_K
cdef Py_ssize_t _AVX2_THIN_N_TX = AVX2_THIN_N_TX

# 0: decline everything, 1: the shapes `wanted` names, 2: every product, 3: as 1 with the thin
# bounds whatever the build
cdef int _mode = 0
cdef Py_ssize_t _table_products = 0  # products the cblas() table's sgemm handed to these kernels


def available() -> bool:
    """Whether this build and processor run the kernels (AVX-512F, AVX-512VL and FMA, or AVX2
    and FMA)."""
    return bool(pdg_available())


def level() -> int:
    """Which kernels run here: 4 (AVX-512), 3 (AVX2; also under PLAIT_ISA=avx2) or 0 (none)."""
    return pdg_level()


def set_mode(int mode) -> None:
    """0: take no product; 1: those `wanted` names (the default rule); 2: every one it can;
    3: those `wanted(..., thin=True)` names (the rule with the thin bounds, for either build)."""
    global _mode
    if mode not in (0, 1, 2, 3):
        raise ValueError(f"dense_gemm.set_mode: mode must be 0, 1, 2 or 3, got {mode!r}.")
    _mode = mode


def get_mode() -> int:
    return _mode


cdef inline bint _wanted(Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, bint tx, bint ty,
                         bint thin) noexcept nogil:
    if <double>M * <double>N * <double>K >= _MAX_WORK:
        return 0
    if ty and not tx and min(M, N) <= _TINY_SIDE and max(M, N) <= _SMALL_SIDE:
        return 0
    if thin and not (M <= _AVX2_THIN_SIDE or K <= _AVX2_THIN_K
                     or N <= (_AVX2_THIN_N_TX if tx else _AVX2_THIN_SIDE)):
        return 0
    return 1


def wanted(Py_ssize_t M, Py_ssize_t K, Py_ssize_t N, bint trans1=False, bint trans2=False,
           thin=None) -> bool:
    """Whether the default rule sends op(x) (M, K) @ op(y) (K, N) to these kernels, for
    row-major x and y (a column-major operand counts as the transpose of a row-major one);
    `thin` asks for the thin bounds too (None: as mode 1 does with the build that runs here,
    i.e. only with the AVX2 build)."""
    cdef bint thin_bounds = pdg_level() == 3 if thin is None else bool(thin)
    return bool(_wanted(M, N, K, trans1, trans2, thin_bounds))


def gemm(x_obj, y_obj, out=None, bint trans1=False, bint trans2=False, bint accumulate=False):
    """op(x) @ op(y) into `out` (or added to it), or None to decline (see the module docstring)."""
    if _mode == 0 or not pdg_available():
        return None
    if type(x_obj) is not cnp.ndarray or type(y_obj) is not cnp.ndarray:
        return None
    cdef cnp.ndarray x = <cnp.ndarray>x_obj
    cdef cnp.ndarray y = <cnp.ndarray>y_obj
    if not _product_operand(x) or not _product_operand(y):
        return None
    if cnp.PyArray_TYPE(x) != cnp.NPY_FLOAT32 or cnp.PyArray_TYPE(y) != cnp.NPY_FLOAT32:
        return None
    cdef Py_ssize_t M, K, N
    if not _product_dims(x, y, trans1, trans2, &M, &K, &N):
        return None
    cdef bint tx, ty
    cdef Py_ssize_t ldx, ldy
    if not _row_major(x, trans1, &tx, &ldx) or not _row_major(y, trans2, &ty, &ldy):
        return None
    if _mode & 1 and not _wanted(M, N, K, tx, ty, _mode == 3 or pdg_level() == 3):
        return None
    cdef cnp.ndarray c
    if out is None:
        if accumulate:
            return None
        c = cnp.PyArray_EMPTY(2, [M, N], cnp.NPY_FLOAT32, 0)
    else:
        if type(out) is not cnp.ndarray:
            return None
        c = <cnp.ndarray>out
        if (cnp.PyArray_TYPE(c) != cnp.NPY_FLOAT32 or not _product_operand(c) or c.shape[0] != M
                or c.shape[1] != N or not cnp.PyArray_IS_C_CONTIGUOUS(c)
                or not cnp.PyArray_ISWRITEABLE(c)):
            return None
        if _shares(c, x) or _shares(c, y):
            return None
    cdef const float* px = <const float*>cnp.PyArray_DATA(x)
    cdef const float* py = <const float*>cnp.PyArray_DATA(y)
    cdef float* pc = <float*>cnp.PyArray_DATA(c)
    cdef int done
    with nogil:
        done = pdg_gemm(M, N, K, px, ldx, tx, py, ldy, ty, pc, accumulate)
    return c if done else None


cdef int _table_sgemm(bint transA, bint transB, int M, int N, int K, float alpha, const float* A,
                      int lda, const float* B, int ldb, float beta, float* C,
                      int ldc) noexcept nogil:
    """The cblas() table's float32 product (row-major, in the BLAS's argument order), taken where
    these kernels compute it exactly as asked: alpha 1, beta 0 or 1, a C of N contiguous columns,
    valid leading dimensions, and in the default mode a shape the rule names. 1 if done; 0 leaves
    it to the BLAS, which also reports invalid arguments its own way."""
    if _mode == 0 or alpha != 1.0 or not (beta == 0.0 or beta == 1.0):
        return 0
    if M <= 0 or N <= 0 or K <= 0 or ldc != N:
        return 0
    if lda < (M if transA else K) or ldb < (K if transB else N):
        return 0
    if _mode & 1 and not _wanted(M, N, K, transA, transB, _mode == 3 or pdg_level() == 3):
        return 0
    if not pdg_gemm(M, N, K, A, lda, transA, B, ldb, transB, C, beta == 1.0):
        return 0
    pdg_count(&_table_products)  # callers may run without the GIL, on several threads
    return 1


def table_sgemm_address() -> int:
    """The address of the table product above, for plait.backends.cblas (0 where the kernels
    cannot run here)."""
    return <size_t>&_table_sgemm if pdg_available() else 0


def table_products() -> int:
    """How many products the cblas() table has handed to these kernels in this process."""
    return _table_products
