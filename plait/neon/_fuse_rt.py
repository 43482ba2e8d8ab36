"""The per-call half of the fused op-trees in C: walking a tree, packing arguments, the call.

`_fuse.execute` spends on a small array more time in Python (walking the tree into its
signature, reading data pointers and strides, building ctypes arrays, the ctypes call) than the
kernel computes. This CPython extension, built once per machine with the same compiler as the
kernels and cached beside them, does two things:

* `walk(tree, out)` -> (key, leaves, consts): the same signature key, array leaves and scalar
  constants as `_fuse._walk` for the common inputs (dict-tuple nodes of the known ops, native
  float16/32/64 2-D arrays, Python and numpy scalars); None for anything else, and the Python
  walk then decides (so both walks must give identical keys: the tests compare them).
* `run(spec, out, leaves, consts, threads, seed)`: the same for a plan of several passes
  (reductions into temporaries it allocates, then the pass into `out`).
* `run1(kernel, out, leaves, consts, transposed, threads, seed)` -> 0: for a plan that is one
  elementwise pass over exactly the tree's leaves, checks the shapes, checks that no leaf
  overlaps `out` other than as `out` itself, fills the kernel's arguments on the stack and
  calls it with the GIL released. 1 (shapes), 2 (overlap) or 3 (too many operands) send the
  call back to the Python path, which raises the error or copies the overlapping operand.

The token strings come from `_fuse` at `init`, so the key format lives in one place.
"""

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>
#include <stdint.h>

typedef void (*kern_t)(const int64_t *, const double *);

enum { K_UNARY = 1, K_BINARY, K_POW, K_SHIFT, K_RED, K_RAND, K_BINARIZE, K_TRANSPOSE };
#define MAXIN 64
#define MAXC 256
#define SERIAL 32768

static PyObject *S_op, *S_axis, *S_value, *S_stochastic;
static PyObject *opmap;            /* op name -> (kind, token or tuple of tokens) */
static PyObject *leaf_tok;         /* 48 leaf tokens: dtype (e, f, d) * 16 + flags */
static PyObject *out_tok;          /* 48 out tokens */
static PyObject *pow_tok;          /* ((value, token), ...) */
static PyObject *T_k, *T_kd, *T_rand, *T_pow;
static int ready = 0;

#define DEFER 1

static int dtidx(int type_num) {
    switch (type_num) {
        case NPY_HALF: return 0;
        case NPY_FLOAT: return 1;
        case NPY_DOUBLE: return 2;
        default: return -1;
    }
}

static int push_const(PyObject *consts, PyObject *toks, double v, PyObject *tok) {
    PyObject *f = PyFloat_FromDouble(v);
    if (!f) return -1;
    int r = PyList_Append(consts, f);
    Py_DECREF(f);
    if (r < 0) return -1;
    return PyList_Append(toks, tok);
}

/* A Python or numpy scalar the Python walk takes as a constant: 1 and its value, else 0. */
static int scalar_value(PyObject *o, double *v) {
    if (PyFloat_Check(o)) { *v = PyFloat_AS_DOUBLE(o); return 1; }
    if (PyLong_Check(o)) {
        double d = PyLong_AsDouble(o);
        if (d == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
        *v = d; return 1;
    }
    if (PyArray_IsScalar(o, LongDouble) || PyArray_IsScalar(o, ComplexFloating)) return 0;
    if (PyArray_IsScalar(o, Floating) || PyArray_IsScalar(o, Integer) || PyArray_IsScalar(o, Bool)) {
        double d = PyFloat_AsDouble(o);
        if (d == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
        *v = d; return 1;
    }
    return 0;
}

static int walk(PyObject *node, PyObject *toks, PyObject *leaves, PyObject *consts, int depth) {
    if (depth > 200) return DEFER;
    if (PyArray_Check(node)) {
        PyArrayObject *a = (PyArrayObject *)node;
        if (PyArray_NDIM(a) != 2) return DEFER;
        int di = dtidx(PyArray_TYPE(a));
        if (di < 0 || !PyArray_ISNOTSWAPPED(a)) return DEFER;
        npy_intp m = PyArray_DIM(a, 0), n = PyArray_DIM(a, 1);
        if (m == 0 || n == 0) return DEFER;
        if (m == 1 && n == 1) {
            if (di == 1) return push_const(consts, toks, (double)*(float *)PyArray_DATA(a), T_k);
            if (di == 2) return push_const(consts, toks, *(double *)PyArray_DATA(a), T_kd);
            return DEFER;
        }
        npy_intp isz = PyArray_ITEMSIZE(a), s0 = PyArray_STRIDE(a, 0), s1 = PyArray_STRIDE(a, 1);
        if (s0 % isz || s1 % isz) return DEFER;
        int flags = (m == 1) * 8 + (n == 1) * 4 + (s0 == isz) * 2 + (s1 == isz);
        if (PyList_Append(toks, PyTuple_GET_ITEM(leaf_tok, di * 16 + flags)) < 0) return -1;
        return PyList_Append(leaves, node);
    }
    if (PyTuple_Check(node)) {
        if (PyTuple_GET_SIZE(node) != 3) return DEFER;
        PyObject *opd = PyTuple_GET_ITEM(node, 0), *left = PyTuple_GET_ITEM(node, 1),
                 *right = PyTuple_GET_ITEM(node, 2);
        if (!PyDict_Check(opd)) return DEFER;
        PyObject *op = PyDict_GetItemWithError(opd, S_op);
        if (!op) { if (PyErr_Occurred()) PyErr_Clear(); return DEFER; }
        if (!PyUnicode_Check(op)) return DEFER;
        PyObject *info = PyDict_GetItemWithError(opmap, op);
        if (!info) { if (PyErr_Occurred()) PyErr_Clear(); return DEFER; }
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(info, 0));
        PyObject *tok = PyTuple_GET_ITEM(info, 1);
        int r;
        double v;
        switch (kind) {
        case K_UNARY:
            if ((r = walk(left, toks, leaves, consts, depth + 1))) return r;
            return PyList_Append(toks, tok);
        case K_BINARY:
            if ((r = walk(left, toks, leaves, consts, depth + 1))) return r;
            if ((r = walk(right, toks, leaves, consts, depth + 1))) return r;
            return PyList_Append(toks, tok);
        case K_POW:
            if (scalar_value(right, &v)) {
                Py_ssize_t k, np_ = PyTuple_GET_SIZE(pow_tok);
                for (k = 0; k < np_; k++) {
                    PyObject *pair = PyTuple_GET_ITEM(pow_tok, k);
                    if (PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(pair, 0)) == v) {
                        if ((r = walk(left, toks, leaves, consts, depth + 1))) return r;
                        return PyList_Append(toks, PyTuple_GET_ITEM(pair, 1));
                    }
                }
            }
            if ((r = walk(left, toks, leaves, consts, depth + 1))) return r;
            if ((r = walk(right, toks, leaves, consts, depth + 1))) return r;
            return PyList_Append(toks, tok);
        case K_SHIFT: {
            PyObject *val = PyDict_GetItemWithError(opd, S_value);
            if (!val && PyErr_Occurred()) { PyErr_Clear(); return DEFER; }
            int t = val ? PyObject_IsTrue(val) : 1;
            if (t < 0) { PyErr_Clear(); return DEFER; }
            if ((r = walk(left, toks, leaves, consts, depth + 1))) return r;
            if ((r = walk(right, toks, leaves, consts, depth + 1))) return r;
            return PyList_Append(toks, PyTuple_GET_ITEM(tok, t ? 0 : 1));
        }
        case K_BINARIZE: {
            PyObject *val = PyDict_GetItemWithError(opd, S_stochastic);
            if (!val && PyErr_Occurred()) { PyErr_Clear(); return DEFER; }
            int t = val ? PyObject_IsTrue(val) : 1;
            if (t < 0) { PyErr_Clear(); return DEFER; }
            if ((r = walk(left, toks, leaves, consts, depth + 1))) return r;
            return PyList_Append(toks, PyTuple_GET_ITEM(tok, t ? 0 : 1));
        }
        case K_RED: {
            PyObject *ax = PyDict_GetItemWithError(opd, S_axis);
            if (!ax && PyErr_Occurred()) { PyErr_Clear(); return DEFER; }
            int ai;
            if (!ax || ax == Py_None) ai = 2;
            else if (PyLong_CheckExact(ax)) {
                long a = PyLong_AsLong(ax);
                if (a != 0 && a != 1) return DEFER;
                ai = (int)a;
            } else return DEFER;
            if ((r = walk(left, toks, leaves, consts, depth + 1))) return r;
            return PyList_Append(toks, PyTuple_GET_ITEM(tok, ai));
        }
        case K_RAND:
            return PyList_Append(toks, tok);
        case K_TRANSPOSE: {
            if (!PyArray_CheckExact(left)) return DEFER;
            PyObject *t = PyArray_Transpose((PyArrayObject *)left, NULL);
            if (!t) return -1;
            r = walk(t, toks, leaves, consts, depth + 1);
            Py_DECREF(t);
            return r;
        }
        default:
            return DEFER;
        }
    }
    double v2;
    if (scalar_value(node, &v2)) return push_const(consts, toks, v2, T_k);
    return DEFER;
}

static PyObject *py_walk(PyObject *self, PyObject *args) {
    PyObject *tree, *out;
    if (!PyArg_ParseTuple(args, "OO", &tree, &out)) return NULL;
    if (!ready || !PyArray_Check(out)) Py_RETURN_NONE;
    PyArrayObject *o = (PyArrayObject *)out;
    if (PyArray_NDIM(o) != 2 || !PyArray_ISWRITEABLE(o) || !PyArray_ISNOTSWAPPED(o)) Py_RETURN_NONE;
    int di = dtidx(PyArray_TYPE(o));
    npy_intp m = PyArray_DIM(o, 0), n = PyArray_DIM(o, 1);
    npy_intp isz = PyArray_ITEMSIZE(o), s0 = PyArray_STRIDE(o, 0), s1 = PyArray_STRIDE(o, 1);
    if (di < 0 || m == 0 || n == 0 || s0 % isz || s1 % isz) Py_RETURN_NONE;
    PyObject *toks = PyList_New(0), *leaves = PyList_New(0), *consts = PyList_New(0);
    if (!toks || !leaves || !consts) goto fail;
    int r = walk(tree, toks, leaves, consts, 0);
    if (r < 0) goto fail;
    if (r == DEFER) {
        Py_DECREF(toks); Py_DECREF(leaves); Py_DECREF(consts);
        Py_RETURN_NONE;
    }
    int flags = (m == 1) * 8 + (n == 1) * 4 + (s0 == isz) * 2 + (s1 == isz);
    if (PyList_Append(toks, PyTuple_GET_ITEM(out_tok, di * 16 + flags)) < 0) goto fail;
    PyObject *key = PyList_AsTuple(toks);
    Py_DECREF(toks);
    if (!key) { Py_DECREF(leaves); Py_DECREF(consts); return NULL; }
    return Py_BuildValue("(NNN)", key, leaves, consts);
fail:
    Py_XDECREF(toks); Py_XDECREF(leaves); Py_XDECREF(consts);
    return NULL;
}

static void extent(PyArrayObject *a, char **lo, char **hi) {
    char *l = PyArray_BYTES(a), *h = l;
    for (int d = 0; d < 2; d++) {
        npy_intp n = PyArray_DIM(a, d), s = PyArray_STRIDE(a, d);
        if (n > 1) { if (s >= 0) h += (n - 1) * s; else l += (n - 1) * s; }
    }
    *lo = l; *hi = h + PyArray_ITEMSIZE(a);
}

static PyObject *py_run1(PyObject *self, PyObject *args) {
    unsigned long long fnaddr;
    PyObject *out, *leaves, *consts;
    int tr, nt;
    long long seed;
    if (!PyArg_ParseTuple(args, "KO!O!O!iiL", &fnaddr, &PyArray_Type, &out, &PyList_Type, &leaves,
                          &PyList_Type, &consts, &tr, &nt, &seed))
        return NULL;
    Py_ssize_t nin = PyList_GET_SIZE(leaves), nc = PyList_GET_SIZE(consts);
    if (nin > MAXIN || nc > MAXC) return PyLong_FromLong(3);
    PyArrayObject *o = (PyArrayObject *)out;
    npy_intp m = PyArray_DIM(o, 0), n = PyArray_DIM(o, 1);
    int64_t ia[9 + 3 * MAXIN];
    double fa[MAXC + 1];
    char *olo, *ohi;
    extent(o, &olo, &ohi);
    npy_intp oisz = PyArray_ITEMSIZE(o);
    int64_t d0 = m != 1 ? PyArray_STRIDE(o, 0) / oisz : 0, d1 = n != 1 ? PyArray_STRIDE(o, 1) / oisz : 0;
    for (Py_ssize_t k = 0; k < nin; k++) {
        PyArrayObject *a = (PyArrayObject *)PyList_GET_ITEM(leaves, k);
        npy_intp am = PyArray_DIM(a, 0), an = PyArray_DIM(a, 1);
        if ((am != 1 && am != m) || (an != 1 && an != n)) return PyLong_FromLong(1);
        if ((PyObject *)a != out) {
            char *lo, *hi;
            extent(a, &lo, &hi);
            if (lo < ohi && olo < hi) {
                if (!(PyArray_BYTES(a) == PyArray_BYTES(o) && am == m && an == n &&
                      PyArray_STRIDE(a, 0) == PyArray_STRIDE(o, 0) && PyArray_STRIDE(a, 1) == PyArray_STRIDE(o, 1)))
                    return PyLong_FromLong(2);
            }
        }
        npy_intp isz = PyArray_ITEMSIZE(a);
        int64_t s0 = am != 1 ? PyArray_STRIDE(a, 0) / isz : 0, s1 = an != 1 ? PyArray_STRIDE(a, 1) / isz : 0;
        ia[9 + 3 * k] = (int64_t)(intptr_t)PyArray_DATA(a);
        ia[10 + 3 * k] = tr ? s1 : s0;
        ia[11 + 3 * k] = tr ? s0 : s1;
    }
    for (Py_ssize_t k = 0; k < nc; k++) {
        PyObject *c = PyList_GET_ITEM(consts, k);
        fa[k] = PyFloat_Check(c) ? PyFloat_AS_DOUBLE(c) : PyFloat_AsDouble(c);
        if (fa[k] == -1.0 && PyErr_Occurred()) return NULL;
    }
    ia[0] = tr ? n : m;
    ia[1] = tr ? m : n;
    ia[2] = (int64_t)m * n < SERIAL ? 1 : nt;
    ia[3] = seed;
    ia[4] = tr ? 1 : n;
    ia[5] = tr ? n : 1;
    ia[6] = (int64_t)(intptr_t)PyArray_DATA(o);
    ia[7] = tr ? d1 : d0;
    ia[8] = tr ? d0 : d1;
    kern_t fn = (kern_t)(uintptr_t)fnaddr;
    if ((int64_t)m * n >= 4096) {
        Py_BEGIN_ALLOW_THREADS
        fn(ia, fa);
        Py_END_ALLOW_THREADS
    } else {
        fn(ia, fa);
    }
    return PyLong_FromLong(0);
}

#define MAXT 32

/* run(spec, out, leaves, consts, threads, seed) -> code: every pass of a plan.
   spec: ((kernel, red, axis (0, 1, 2 = all), transposed, dest (-1 = out, else temp index),
   inputs (leaf index, or -1 - temp index), temp type_num), ...). Temps are made here. */
static PyObject *py_run(PyObject *self, PyObject *args) {
    PyObject *spec, *out, *leaves, *consts;
    int nt;
    long long seed;
    if (!PyArg_ParseTuple(args, "O!O!O!O!iL", &PyTuple_Type, &spec, &PyArray_Type, &out, &PyList_Type,
                          &leaves, &PyList_Type, &consts, &nt, &seed))
        return NULL;
    Py_ssize_t nc = PyList_GET_SIZE(consts), np_ = PyTuple_GET_SIZE(spec);
    if (nc > MAXC) return PyLong_FromLong(3);
    double fa[MAXC + 1];
    for (Py_ssize_t k = 0; k < nc; k++) {
        PyObject *c = PyList_GET_ITEM(consts, k);
        fa[k] = PyFloat_Check(c) ? PyFloat_AS_DOUBLE(c) : PyFloat_AsDouble(c);
        if (fa[k] == -1.0 && PyErr_Occurred()) return NULL;
    }
    PyArrayObject *o = (PyArrayObject *)out;
    PyArrayObject *temps[MAXT];
    int ntemps = 0;
    long code = 0;
    char *olo, *ohi;
    extent(o, &olo, &ohi);
    int64_t ia[9 + 3 * MAXIN];
    for (Py_ssize_t pi = 0; pi < np_ && code == 0; pi++) {
        PyObject *ps = PyTuple_GET_ITEM(spec, pi);
        kern_t fn = (kern_t)(uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(ps, 0));
        int red = (int)PyLong_AsLong(PyTuple_GET_ITEM(ps, 1));
        int axis = (int)PyLong_AsLong(PyTuple_GET_ITEM(ps, 2));
        int tr = (int)PyLong_AsLong(PyTuple_GET_ITEM(ps, 3));
        int dest = (int)PyLong_AsLong(PyTuple_GET_ITEM(ps, 4));
        PyObject *ins = PyTuple_GET_ITEM(ps, 5);
        int ttype = (int)PyLong_AsLong(PyTuple_GET_ITEM(ps, 6));
        if (PyErr_Occurred()) { code = -1; break; }
        Py_ssize_t nin = PyTuple_GET_SIZE(ins);
        if (nin > MAXIN || (dest >= 0 && dest >= MAXT)) { code = 3; break; }
        PyArrayObject *arr[MAXIN];
        for (Py_ssize_t k = 0; k < nin; k++) {
            long v = PyLong_AsLong(PyTuple_GET_ITEM(ins, k));
            if (v >= 0) {
                if (v >= PyList_GET_SIZE(leaves)) { code = 3; break; }
                arr[k] = (PyArrayObject *)PyList_GET_ITEM(leaves, v);
            } else {
                if (-v - 1 >= ntemps) { code = 3; break; }
                arr[k] = temps[-v - 1];
            }
        }
        if (code) break;
        npy_intp m, n;
        if (red) {
            m = n = 1;
            for (Py_ssize_t k = 0; k < nin; k++) {
                npy_intp am = PyArray_DIM(arr[k], 0), an = PyArray_DIM(arr[k], 1);
                if (am != 1) { if (m == 1) m = am; else if (am != m) code = 1; }
                if (an != 1) { if (n == 1) n = an; else if (an != n) code = 1; }
            }
        } else {
            m = PyArray_DIM(o, 0);
            n = PyArray_DIM(o, 1);
            for (Py_ssize_t k = 0; k < nin; k++) {
                npy_intp am = PyArray_DIM(arr[k], 0), an = PyArray_DIM(arr[k], 1);
                if ((am != 1 && am != m) || (an != 1 && an != n)) code = 1;
            }
        }
        if (code) break;
        PyArrayObject *dst;
        if (dest < 0) {
            dst = o;
            if (red && (PyArray_DIM(o, 0) != (axis != 1 ? 1 : m) || PyArray_DIM(o, 1) != (axis != 0 ? 1 : n))) {
                code = 1;
                break;
            }
            for (Py_ssize_t k = 0; k < nin; k++) {
                PyArrayObject *a = arr[k];
                if (a == o && !red) continue;
                char *lo, *hi;
                extent(a, &lo, &hi);
                if (lo < ohi && olo < hi) {
                    if (red || !(PyArray_BYTES(a) == PyArray_BYTES(o) && PyArray_DIM(a, 0) == m &&
                                 PyArray_DIM(a, 1) == n && PyArray_STRIDE(a, 0) == PyArray_STRIDE(o, 0) &&
                                 PyArray_STRIDE(a, 1) == PyArray_STRIDE(o, 1)))
                        code = 2;
                }
            }
            if (code) break;
        } else {
            npy_intp dims[2] = {axis != 1 ? 1 : m, axis != 0 ? 1 : n};
            if (dest != ntemps) { code = 3; break; }
            dst = (PyArrayObject *)PyArray_SimpleNew(2, dims, ttype);
            if (!dst) { code = -1; break; }
            temps[ntemps++] = dst;
        }
        npy_intp disz = PyArray_ITEMSIZE(dst);
        int64_t d0 = PyArray_DIM(dst, 0) != 1 ? PyArray_STRIDE(dst, 0) / disz : 0;
        int64_t d1 = PyArray_DIM(dst, 1) != 1 ? PyArray_STRIDE(dst, 1) / disz : 0;
        for (Py_ssize_t k = 0; k < nin; k++) {
            PyArrayObject *a = arr[k];
            npy_intp am = PyArray_DIM(a, 0), an = PyArray_DIM(a, 1), isz = PyArray_ITEMSIZE(a);
            int64_t s0 = am != 1 ? PyArray_STRIDE(a, 0) / isz : 0, s1 = an != 1 ? PyArray_STRIDE(a, 1) / isz : 0;
            ia[9 + 3 * k] = (int64_t)(intptr_t)PyArray_DATA(a);
            ia[10 + 3 * k] = tr ? s1 : s0;
            ia[11 + 3 * k] = tr ? s0 : s1;
        }
        ia[0] = tr ? n : m;
        ia[1] = tr ? m : n;
        ia[2] = (int64_t)m * n < SERIAL ? 1 : nt;
        ia[3] = seed;
        ia[4] = tr ? 1 : n;
        ia[5] = tr ? n : 1;
        ia[6] = (int64_t)(intptr_t)PyArray_DATA(dst);
        ia[7] = tr ? d1 : d0;
        ia[8] = tr ? d0 : d1;
        if ((int64_t)m * n >= 4096) {
            Py_BEGIN_ALLOW_THREADS
            fn(ia, fa);
            Py_END_ALLOW_THREADS
        } else {
            fn(ia, fa);
        }
    }
    for (int t = 0; t < ntemps; t++) Py_DECREF(temps[t]);
    if (code < 0) return NULL;
    return PyLong_FromLong(code);
}

static PyObject *py_init(PyObject *self, PyObject *args) {
    PyObject *om, *lt, *ot, *pt, *k, *kd, *rnd;
    if (!PyArg_ParseTuple(args, "O!O!O!O!UUU", &PyDict_Type, &om, &PyTuple_Type, &lt, &PyTuple_Type, &ot,
                          &PyTuple_Type, &pt, &k, &kd, &rnd))
        return NULL;
    if (PyTuple_GET_SIZE(lt) != 48 || PyTuple_GET_SIZE(ot) != 48) {
        PyErr_SetString(PyExc_ValueError, "48 leaf and out tokens expected");
        return NULL;
    }
    Py_INCREF(om); Py_INCREF(lt); Py_INCREF(ot); Py_INCREF(pt); Py_INCREF(k); Py_INCREF(kd); Py_INCREF(rnd);
    opmap = om; leaf_tok = lt; out_tok = ot; pow_tok = pt; T_k = k; T_kd = kd; T_rand = rnd;
    ready = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", py_init, METH_VARARGS, "init(opmap, leaf_tokens, out_tokens, pow_tokens, k, kd, rand)"},
    {"walk", py_walk, METH_VARARGS, "walk(tree, out) -> (key, leaves, consts) or None"},
    {"run1", py_run1, METH_VARARGS, "run1(kernel, out, leaves, consts, transposed, threads, seed) -> code"},
    {"run", py_run, METH_VARARGS, "run(spec, out, leaves, consts, threads, seed) -> code"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_plait_neon_rt", NULL, -1, methods};

PyMODINIT_FUNC PyInit__plait_neon_rt(void) {
    import_array();
    S_op = PyUnicode_InternFromString("op");
    S_axis = PyUnicode_InternFromString("axis");
    S_value = PyUnicode_InternFromString("value");
    S_stochastic = PyUnicode_InternFromString("stochastic");
    return PyModule_Create(&moddef);
}
"""
