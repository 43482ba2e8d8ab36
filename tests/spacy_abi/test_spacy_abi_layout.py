"""The binary interface of plait.backends.cblas / .linalg / plait.extra.search, against the spec page.

spaCy 3.8's compiled modules check it when `import spacy` runs (../shared/spec/spacy-c-abi.md):
type sizes, vtable capsules with NULL names in each type's own dict, and capsule names of the
C functions in `__pyx_capi__`, byte for byte. Field offsets that spaCy's inline code reads are
checked here by reading the objects' memory.
"""
from __future__ import annotations

import ctypes
import importlib

import pytest

_api = ctypes.pythonapi
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]

CAPSULE = type(importlib.import_module("plait.backends.cblas").__pyx_capi__["sgemm"])

# (module, type) -> (tp_basicsize, needs a vtable capsule)
TYPES = {
    ("plait.backends.cblas", "CBlas"): (32, False),
    ("plait.backends.linalg", "Matrix"): (40, None),
    ("plait.backends.linalg", "Vec"): (24, True),
    ("plait.backends.linalg", "VecVec"): (24, True),
    ("plait.backends.linalg", "Mat"): (24, True),
    ("plait.extra.search", "Beam"): (136, True),
    ("plait.extra.search", "MaxViolation"): (104, True),
}

_CBLAS = "struct __pyx_obj_5thinc_8backends_5cblas_CBlas *"
CBLAS_CAPI = {
    "saxpy": f"__pyx_t_5thinc_8backends_5cblas_saxpy_ptr ({_CBLAS})",
    "sgemm": f"__pyx_t_5thinc_8backends_5cblas_sgemm_ptr ({_CBLAS})",
    "daxpy": f"__pyx_t_5thinc_8backends_5cblas_daxpy_ptr ({_CBLAS})",
    "set_saxpy": f"void ({_CBLAS}, __pyx_t_5thinc_8backends_5cblas_saxpy_ptr)",
    "set_sgemm": f"void ({_CBLAS}, __pyx_t_5thinc_8backends_5cblas_sgemm_ptr)",
    "set_daxpy": f"void ({_CBLAS}, __pyx_t_5thinc_8backends_5cblas_daxpy_ptr)",
}


def _type(module, name):
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("module,name", sorted(TYPES))
def test_type_sizes(module, name):
    cls = _type(module, name)
    assert isinstance(cls, type)
    size, _ = TYPES[module, name]
    assert (cls.__basicsize__, cls.__itemsize__) == (size, 0)


@pytest.mark.parametrize("module,name", sorted(TYPES))
def test_vtable_capsules(module, name):
    cls = _type(module, name)
    _, needs = TYPES[module, name]
    if needs is None:
        return
    if not needs:
        assert "__pyx_vtable__" not in cls.__dict__
        return
    # The type's own dict (Cython reads tp_dict, not the MRO), a capsule with a NULL name.
    capsule = cls.__dict__["__pyx_vtable__"]
    assert type(capsule) is CAPSULE
    assert _api.PyCapsule_GetName(capsule) is None
    assert _api.PyCapsule_IsValid(capsule, None) == 1
    assert _api.PyCapsule_GetPointer(capsule, None)


def test_cblas_capi_names_byte_for_byte():
    capi = importlib.import_module("plait.backends.cblas").__pyx_capi__
    assert isinstance(capi, dict)
    assert set(capi) == set(CBLAS_CAPI)
    for key, signature in CBLAS_CAPI.items():
        capsule = capi[key]
        assert type(capsule) is CAPSULE
        assert _api.PyCapsule_GetName(capsule) == signature.encode("ascii"), key
        # What Cython's importer does: strcmp of the names, then a non-NULL pointer.
        assert _api.PyCapsule_IsValid(capsule, signature.encode("ascii")) == 1, key
        assert _api.PyCapsule_GetPointer(capsule, signature.encode("ascii")), key


def test_capi_matches_the_installed_thinc():
    # Differential: the same keys and names as thinc 8.3.14's own binary.
    thinc_cblas = pytest.importorskip("thinc.backends.cblas")
    if thinc_cblas.__name__.startswith("plait"):
        pytest.skip("thinc is served by plait in this process")
    ours = importlib.import_module("plait.backends.cblas").__pyx_capi__
    theirs = thinc_cblas.__pyx_capi__
    assert {k: _api.PyCapsule_GetName(v) for k, v in ours.items()} == {
        k: _api.PyCapsule_GetName(v) for k, v in theirs.items()
    }
    for module, name in TYPES:
        thinc_type = getattr(importlib.import_module(module.replace("plait", "thinc")), name)
        assert _type(module, name).__basicsize__ == thinc_type.__basicsize__, name
        assert ("__pyx_vtable__" in thinc_type.__dict__) == ("__pyx_vtable__" in _type(module, name).__dict__), name


def test_cblas_table_is_ready_without_init():
    # "The function table must be valid as soon as the object exists": even without __init__.
    from plait.backends.cblas import CBlas

    import numpy

    table = CBlas.__new__(CBlas)
    out = table.gemm(numpy.eye(2, dtype="f"), numpy.full((2, 2), 3.0, dtype="f"))
    assert out.tolist() == [[3.0, 3.0], [3.0, 3.0]]


def _u64(obj, offset):
    return ctypes.c_uint64.from_address(id(obj) + offset).value


def _i32(obj, offset):
    return ctypes.c_int32.from_address(id(obj) + offset).value


def _f32(obj, offset):
    return ctypes.c_float.from_address(id(obj) + offset).value


def _f64(obj, offset):
    return ctypes.c_double.from_address(id(obj) + offset).value


def test_beam_field_offsets():
    from plait.extra.search import Beam

    beam = Beam(7, 3, min_density=0.25)
    vtable = _api.PyCapsule_GetPointer(Beam.__dict__["__pyx_vtable__"], None)
    assert _u64(beam, 16) == vtable
    pool = ctypes.cast(_u64(beam, 24), ctypes.py_object).value
    assert type(pool).__module__ == "cymem.cymem" and type(pool).__name__ == "Pool"
    assert (_u64(beam, 32), _u64(beam, 40), _u64(beam, 48)) == (7, 3, 1)  # nr_class, width, size
    assert _f32(beam, 56) == 0.25 and _i32(beam, 60) == 0 and _i32(beam, 64) == 0  # min_density, t, is_done
    beam.min_density = 0.5
    assert _f32(beam, 56) == 0.5
    assert _u64(beam, 72) == id(beam.histories)
    assert ctypes.cast(_u64(beam, 80), ctypes.py_object).value == [[], [], []]
    for offset in (88, 96, 104, 112, 120):  # scores, is_valid, costs, _parents, _states
        assert _u64(beam, offset) != 0
    assert _u64(beam, 128) == 0  # del_func: none before initialize
    # Each table row holds nr_class zeroed cells
    scores = _u64(beam, 88)
    row = ctypes.c_uint64.from_address(scores + 8 * 2).value
    assert [ctypes.c_float.from_address(row + 4 * j).value for j in range(7)] == [0.0] * 7
    # _State stride 40: content at 0, score at 16 of each; all zero before initialize
    states = _u64(beam, 120)
    assert all(ctypes.c_uint64.from_address(states + 40 * i).value == 0 for i in range(3))


def test_max_violation_field_offsets():
    from plait.extra.search import MaxViolation

    mv = MaxViolation()
    vtable = _api.PyCapsule_GetPointer(MaxViolation.__dict__["__pyx_vtable__"], None)
    assert _u64(mv, 16) == vtable
    assert (_f32(mv, 32), _f32(mv, 36), _f32(mv, 40), _f32(mv, 44)) == (0.0, -1.0, 0.0, 0.0)
    assert (_f64(mv, 48), _f64(mv, 56), _u64(mv, 64)) == (0.0, 0.0, 0)
    assert [_u64(mv, off) for off in (72, 80, 88, 96)] == [id(mv.p_hist), id(mv.g_hist), id(mv.p_probs), id(mv.g_probs)]


def test_matrix_field_offsets():
    from plait.backends.linalg import Matrix

    m = Matrix(3, 5)
    assert (_i32(m, 32), _i32(m, 36)) == (3, 5) == (m.nr_row, m.nr_col)
    data = _u64(m, 24)
    assert data and [ctypes.c_float.from_address(data + 4 * k).value for k in range(15)] == [0.0] * 15
    assert ctypes.cast(_u64(m, 16), ctypes.py_object).value is m.mem is None
