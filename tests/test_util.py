"""plait.util: behaviour of thinc.util's helpers, checked directly and against thinc where installed."""
import os
import random
import sys
import threading
from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy
import pytest

from plait import compat, util
from plait.types import ArgsKwargs, Floats2d, Ints1d, Padded, Ragged
from plait.util import (
    DATA_VALIDATION,
    ArrayInfo,
    DataValidationError,
    convert_recursive,
    copy_array,
    data_validation,
    fix_random_seed,
    get_array_module,
    get_width,
    iterate_recursive,
    make_tempfile,
    partial,
    to_categorical,
    to_numpy,
    validate_fwd_input_output,
    validate_type,
)


from _env import HAS_GPU
from _env import installed as _installed


@pytest.fixture
def restore_ops():
    import plait.backends as backends

    default = backends._default_ops
    current = backends.context_ops.get()
    yield
    backends._default_ops = default
    backends.context_ops.set(current)


# --- surface -------------------------------------------------------------------------------


def test_has_every_public_function_of_thinc_util():
    thinc_util = pytest.importorskip("thinc.util")
    import inspect

    wanted = [
        name
        for name, obj in vars(thinc_util).items()
        if not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
        and getattr(obj, "__module__", "") in ("thinc.util", "confection.validation")
    ]
    missing = [name for name in wanted if not hasattr(util, name)]
    # Schema/ValidationError are confection's pydantic classes, not part of thinc.util's own API.
    assert sorted(set(missing) - {"Schema", "ValidationError"}) == []
    for name in thinc_util.__all__:
        assert hasattr(util, name), name


def test_forwarded_flags_follow_compat():
    assert util.has_cupy is compat.has_cupy
    assert util.has_torch is compat.has_torch
    assert util.tf is compat.tensorflow
    assert util.mx is compat.mxnet
    with pytest.raises(AttributeError):
        util.no_such_name  # noqa: B018


# --- array kinds ---------------------------------------------------------------------------


def test_get_array_module():
    assert get_array_module(numpy.zeros(3)) is numpy
    assert get_array_module(numpy.zeros((0, 2), dtype="i")) is numpy
    for bad in ([1, 2], 3.0, None, "abc"):
        with pytest.raises(ValueError, match="Only numpy and cupy arrays are supported"):
            get_array_module(bad)


def test_get_array_module_error_names_the_type():
    with pytest.raises(ValueError, match="builtins.list"):
        get_array_module([1])


def test_array_predicates_on_cpu_values():
    X = numpy.zeros((2, 2), dtype="f")
    assert util.is_numpy_array(X) and util.is_xp_array(X)
    assert not util.is_numpy_array([1, 2]) and not util.is_xp_array([1, 2])
    assert not util.is_numpy_array(numpy.float32(1.0))
    for predicate in (
        util.is_cupy_array,
        util.is_torch_array,
        util.is_torch_cuda_array,
        util.is_torch_gpu_array,
        util.is_torch_mps_array,
        util.is_tensorflow_array,
        util.is_tensorflow_gpu_array,
        util.is_mxnet_array,
        util.is_mxnet_gpu_array,
    ):
        assert predicate(X) is False
        assert predicate([1, 2]) is False


def test_predicates_do_not_import_frameworks():
    import subprocess

    code = (
        "import sys, numpy\n"
        "import plait.util as u\n"
        "X = numpy.zeros(2)\n"
        "for f in (u.is_cupy_array, u.is_torch_array, u.is_tensorflow_array, u.is_mxnet_array, u.is_xp_array):\n"
        "    f(X)\n"
        "u.to_numpy(X); u.get_array_module(X); u.copy_array(X, X)\n"
        "print(','.join(m for m in ('cupy', 'torch', 'tensorflow', 'mxnet') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_to_numpy():
    X = numpy.arange(4)
    assert to_numpy(X) is X
    Y = to_numpy([[1, 2], [3, 4]])
    assert isinstance(Y, numpy.ndarray) and Y.shape == (2, 2)
    assert to_numpy(5).shape == ()


def test_copy_array():
    dst = numpy.zeros((2, 3), dtype="f")
    src = numpy.arange(6, dtype="f").reshape(2, 3)
    assert copy_array(dst, src) is None
    numpy.testing.assert_array_equal(dst, src)
    src[0, 0] = 99  # a copy, not a view
    assert dst[0, 0] == 0
    copy_array(dst, numpy.ones(3, dtype="f"))  # broadcasts
    numpy.testing.assert_array_equal(dst, numpy.ones((2, 3)))
    copy_array(dst, [[1, 2, 3], [4, 5, 6]])
    numpy.testing.assert_array_equal(dst, [[1, 2, 3], [4, 5, 6]])


def test_copy_array_shape_mismatch():
    with pytest.raises(ValueError):
        copy_array(numpy.zeros((2, 3)), numpy.zeros((3, 2)))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
def test_cupy_helpers():
    import cupy

    X = cupy.arange(6, dtype="f").reshape(2, 3)
    assert util.is_cupy_array(X) and util.is_xp_array(X) and not util.is_numpy_array(X)
    assert get_array_module(X) is cupy
    numpy.testing.assert_array_equal(to_numpy(X), numpy.arange(6, dtype="f").reshape(2, 3))
    dst = cupy.zeros((2, 3), dtype="f")
    copy_array(dst, numpy.ones((2, 3), dtype="f"))
    assert float(dst.sum()) == 6.0
    onehot = to_categorical(cupy.asarray([0, 2]), n_classes=3)
    assert util.is_cupy_array(onehot)
    numpy.testing.assert_array_equal(onehot.get(), numpy.eye(3, dtype="f")[[0, 2]])


# --- to_categorical ------------------------------------------------------------------------


def test_to_categorical_one_hot():
    Y = numpy.asarray([0, 2, 1, 2])
    out = to_categorical(Y)
    assert out.dtype == numpy.float32 and out.shape == (4, 3)
    numpy.testing.assert_array_equal(out, numpy.eye(3, dtype="f")[Y])


def test_to_categorical_explicit_classes_and_nd():
    Y = numpy.asarray([[0, 1], [1, 3]])
    out = to_categorical(Y, n_classes=5)
    assert out.shape == (2, 2, 5)
    numpy.testing.assert_array_equal(out.argmax(-1), Y)
    numpy.testing.assert_allclose(out.sum(-1), 1.0)


@pytest.mark.parametrize("smoothing,n_classes", [(0.1, 3), (0.2, 4), (0.4, 2), (0.01, 10)])
def test_to_categorical_label_smoothing(smoothing, n_classes):
    Y = numpy.arange(n_classes)
    out = to_categorical(Y, n_classes=n_classes, label_smoothing=smoothing)
    numpy.testing.assert_allclose(numpy.diag(out), 1 - smoothing, rtol=1e-6)
    off = out[~numpy.eye(n_classes, dtype=bool)]
    numpy.testing.assert_allclose(off, smoothing / (n_classes - 1), rtol=1e-6)
    numpy.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-6)
    numpy.testing.assert_array_equal(out.argmax(-1), Y)


@pytest.mark.parametrize(
    "kwargs,pattern",
    [
        ({"label_smoothing": -0.1}, "greater than or equal to 0"),
        ({"n_classes": 1, "label_smoothing": 0.1}, "greater than 1"),
        ({"n_classes": 2, "label_smoothing": 0.5}, "less than 0.5"),
        ({"n_classes": 3, "label_smoothing": 0.9}, "less than 0.66"),
        ({"n_classes": 0}, "at least 1"),
    ],
)
def test_to_categorical_errors(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        to_categorical(numpy.asarray([0, 0]), **kwargs)


def test_to_categorical_single_class_without_smoothing():
    numpy.testing.assert_array_equal(to_categorical(numpy.asarray([0, 0]), n_classes=1), [[1.0], [1.0]])


def test_to_categorical_empty():
    assert to_categorical(numpy.zeros((0,), dtype="i"), n_classes=3).shape == (0, 3)
    with pytest.raises(ValueError, match="n_classes"):
        to_categorical(numpy.zeros((0,), dtype="i"))


def test_to_categorical_needs_an_array():
    with pytest.raises(ValueError, match="list"):
        to_categorical([0, 1])


@pytest.mark.parametrize(
    "Y,n_classes,smoothing",
    [([0, 2, 1], None, 0.0), ([0, 2, 1], None, 0.2), ([[0, 1], [1, 2]], None, 0.0), ([0, 1], 4, 0.3), ([0, 0], 1, 0.0)],
)
def test_to_categorical_matches_thinc(Y, n_classes, smoothing):
    thinc_util = pytest.importorskip("thinc.util")
    Y = numpy.asarray(Y)
    ours = to_categorical(Y, n_classes, label_smoothing=smoothing)
    theirs = thinc_util.to_categorical(Y, n_classes, label_smoothing=smoothing)
    assert ours.dtype == theirs.dtype
    numpy.testing.assert_array_equal(ours, theirs)


# --- get_width -----------------------------------------------------------------------------


def _ragged():
    return Ragged(numpy.zeros((3, 5), dtype="f"), numpy.asarray([1, 2], dtype="i"))


def _padded():
    return Padded(
        numpy.zeros((3, 2, 7), dtype="f"),
        numpy.asarray([2, 2, 1], dtype="i"),
        numpy.asarray([3, 2], dtype="i"),
        numpy.asarray([0, 1], dtype="i"),
    )


def test_get_width():
    assert get_width(numpy.zeros((2, 3))) == 3
    assert get_width(numpy.zeros((2, 3)), dim=0) == 2
    assert get_width(numpy.zeros((2, 3, 4)), dim=1) == 3
    assert get_width(numpy.asarray([1, 5])) == 6  # 1d: integer labels
    assert get_width(numpy.asarray(3)) == 0
    assert get_width([numpy.zeros((2, 4)), numpy.zeros((1, 4))]) == 4
    assert get_width((numpy.zeros((2, 4)),), dim=0) == 2
    assert get_width([]) == 0
    assert get_width(_ragged()) == 5
    assert get_width(_padded()) == 7
    assert get_width([_ragged()]) == 5
    assert isinstance(get_width(numpy.zeros((2, 3))), int)


@pytest.mark.parametrize("bad", [5, "abc", None, {"a": 1}])
def test_get_width_bad_input(bad):
    with pytest.raises(ValueError, match="cannot get the width"):
        get_width(bad)


def test_get_width_empty_labels():
    with pytest.raises(ValueError, match="empty 1d array"):
        get_width(numpy.zeros((0,), dtype="i"))


def test_get_width_matches_thinc():
    thinc_util = pytest.importorskip("thinc.util")
    cases = [numpy.zeros((2, 3)), numpy.asarray([1, 5]), numpy.asarray(3), [numpy.zeros((2, 4))], []]
    for X in cases:
        assert get_width(X) == thinc_util.get_width(X)
    assert get_width(numpy.zeros((2, 3)), dim=0) == thinc_util.get_width(numpy.zeros((2, 3)), dim=0)


# --- devices and seeds ---------------------------------------------------------------------


def test_fix_random_seed_is_reproducible():
    fix_random_seed(123)
    first = (random.random(), numpy.random.rand(3).tolist())
    fix_random_seed(123)
    second = (random.random(), numpy.random.rand(3).tolist())
    fix_random_seed(124)
    third = (random.random(), numpy.random.rand(3).tolist())
    assert first == second
    assert first != third


def test_fix_random_seed_large_and_default():
    fix_random_seed(2**40 + 7)  # beyond numpy's 32-bit seed range: reduced, not rejected
    value = numpy.random.rand()
    fix_random_seed(7)
    assert numpy.random.rand() == value
    fix_random_seed()
    fix_random_seed(0)
    assert isinstance(random.random(), float)


def test_fix_random_seed_matches_thinc():
    thinc_util = pytest.importorskip("thinc.util")
    thinc_util.fix_random_seed(5)
    theirs = (random.random(), numpy.random.rand(2).tolist())
    fix_random_seed(5)
    assert (random.random(), numpy.random.rand(2).tolist()) == theirs


def test_gpu_is_available_follows_compat():
    assert util.gpu_is_available() is bool(compat.has_gpu)


def test_require_cpu(restore_ops):
    from plait.backends import NumpyOps, get_current_ops

    assert util.require_cpu() is True
    assert type(get_current_ops()) is NumpyOps


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present")
def test_prefer_gpu_without_gpu(restore_ops):
    from plait.backends import get_current_ops

    before = get_current_ops()
    assert util.prefer_gpu() is False
    assert get_current_ops() is before


@pytest.mark.skipif(_installed("cupy") or sys.platform == "darwin", reason="cupy is installed")
def test_require_gpu_without_cupy(restore_ops):
    from plait.backends import get_current_ops

    before = get_current_ops()
    with pytest.raises(ValueError, match="CuPy is not installed"):
        util.require_gpu()
    assert get_current_ops() is before


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present")
def test_set_active_gpu_without_gpu():
    with pytest.raises(ValueError, match="no CUDA GPU"):
        util.set_active_gpu(0)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
def test_require_and_prefer_gpu(restore_ops):
    from plait.backends import CupyOps, get_current_ops

    assert util.prefer_gpu() is True
    assert isinstance(get_current_ops(), CupyOps)
    util.require_cpu()
    assert util.require_gpu(0) is True
    assert isinstance(get_current_ops(), CupyOps)
    assert util.set_active_gpu(0).id == 0


def test_use_nvtx_range_without_cupy_is_a_plain_block():
    entered = []
    with util.use_nvtx_range("forward"):
        entered.append(True)
    assert entered == [True]
    with pytest.raises(KeyError):
        with util.use_nvtx_range("failing", id_color=3):
            raise KeyError("x")


# --- frameworks ----------------------------------------------------------------------------


@pytest.mark.skipif(_installed("torch"), reason="torch is installed")
def test_torch_helpers_without_torch():
    with pytest.raises(ImportError, match="pip install torch"):
        util.assert_pytorch_installed()
    with pytest.raises(ImportError, match="pip install torch"):
        util.xp2torch(numpy.zeros(2))
    with pytest.raises(ImportError, match="pip install torch"):
        util.torch2xp(object())
    # thinc raises ValueError here: both kinds are caught.
    with pytest.raises(ValueError, match="pip install torch"):
        util.get_torch_default_device()
    with pytest.raises(ImportError):
        util.get_torch_default_device()


@pytest.mark.skipif(_installed("tensorflow"), reason="tensorflow is installed")
def test_tensorflow_helpers_without_tensorflow():
    for call in (
        util.assert_tensorflow_installed,
        lambda: util.xp2tensorflow(numpy.zeros(2)),
        lambda: util.tensorflow2xp(object()),
    ):
        with pytest.raises(ImportError, match=r"pip install .plait\[tensorflow\]"):
            call()


@pytest.mark.skipif(_installed("mxnet"), reason="mxnet is installed")
def test_mxnet_helpers_without_mxnet():
    for call in (util.assert_mxnet_installed, lambda: util.xp2mxnet(numpy.zeros(2)), lambda: util.mxnet2xp(object())):
        with pytest.raises(ImportError, match="pip install mxnet"):
            call()


def test_tensorflow_installed_but_not_enabled(monkeypatch):
    import types

    if compat.has_tensorflow:
        pytest.skip("tensorflow already enabled")
    monkeypatch.setitem(sys.modules, "tensorflow", types.ModuleType("tensorflow"))
    with pytest.raises(ImportError, match="enable_tensorflow"):
        util.assert_tensorflow_installed()


def test_torch_round_trip(restore_ops):
    torch = pytest.importorskip("torch")
    from plait.backends import NumpyOps

    util.require_cpu()
    X = numpy.arange(6, dtype="f").reshape(2, 3)
    T = util.xp2torch(X, requires_grad=True)
    assert isinstance(T, torch.Tensor) and T.requires_grad and T.device.type == "cpu"
    assert util.is_torch_array(T) and not util.is_torch_gpu_array(T)
    back = util.torch2xp(T)
    assert isinstance(back, numpy.ndarray)
    numpy.testing.assert_array_equal(back, X)
    numpy.testing.assert_array_equal(util.torch2xp(T, ops=NumpyOps()), X)
    assert util.get_torch_default_device().type == "cpu"


# --- nested structures ---------------------------------------------------------------------


def _nested():
    return {"a": [1, (2, "x")], 3: ArgsKwargs(args=(4,), kwargs={"k": 5}), "b": {"c": [6]}}


def test_convert_recursive():
    out = convert_recursive(lambda x: isinstance(x, int), lambda x: x * 10, _nested())
    assert out == {"a": [10, (20, "x")], 30: ArgsKwargs(args=(40,), kwargs={"k": 50}), "b": {"c": [60]}}
    assert isinstance(out["a"][1], tuple) and isinstance(out["a"], list)
    assert convert_recursive(lambda x: False, str, "leaf") == "leaf"
    assert convert_recursive(lambda x: True, lambda x: "hit", [1, 2]) == "hit"


def test_iterate_recursive():
    found = list(iterate_recursive(lambda x: isinstance(x, int), _nested()))
    # dict keys are visited too, and ArgsKwargs positions count as keys
    assert found == [1, 2, 3, 0, 4, 5, 6]
    arrays = [numpy.zeros(1), numpy.ones(2)]
    assert list(iterate_recursive(util.is_xp_array, {"x": arrays[0], "y": (arrays[1], "s")})) == arrays


def test_recursive_helpers_match_thinc():
    thinc_util = pytest.importorskip("thinc.util")
    from thinc.types import ArgsKwargs as ThincArgsKwargs

    def thinc_nested():
        return {"a": [1, (2, "x")], 3: ThincArgsKwargs(args=(4,), kwargs={"k": 5}), "b": {"c": [6]}}

    is_int = lambda x: isinstance(x, int)  # noqa: E731
    assert list(iterate_recursive(is_int, _nested())) == list(thinc_util.iterate_recursive(is_int, thinc_nested()))
    ours = convert_recursive(is_int, lambda x: -x, _nested())
    theirs = thinc_util.convert_recursive(is_int, lambda x: -x, thinc_nested())
    assert ours[-3].args == theirs[-3].args and ours[-3].kwargs == theirs[-3].kwargs
    assert ours["a"] == theirs["a"] and ours["b"] == theirs["b"]


# --- small helpers -------------------------------------------------------------------------


def test_partial_keeps_docstring_and_binds():
    def scale(x, factor=1):
        """Multiply x by factor."""
        return x * factor

    triple = partial(scale, factor=3)
    assert triple(2) == 6
    assert triple.__doc__ == "Multiply x by factor."
    assert partial(scale, 5)() == 5


def test_make_tempfile():
    with make_tempfile("w") as handle:
        handle.write("hello")
        handle.flush()
        path = handle.name
        with open(path) as reader:
            assert reader.read() == "hello"
    assert not os.path.exists(path)


def test_make_tempfile_removed_on_error():
    with pytest.raises(RuntimeError):
        with make_tempfile("w") as handle:
            path = handle.name
            raise RuntimeError("boom")
    assert not os.path.exists(path)


def test_data_validation_context():
    assert DATA_VALIDATION.get() is False
    with data_validation(True):
        assert DATA_VALIDATION.get() is True
        with data_validation(False):
            assert DATA_VALIDATION.get() is False
        assert DATA_VALIDATION.get() is True
    assert DATA_VALIDATION.get() is False
    with pytest.raises(RuntimeError):
        with data_validation(True):
            raise RuntimeError("x")
    assert DATA_VALIDATION.get() is False


def test_data_validation_is_context_local():
    seen = []
    with data_validation(True):
        thread = threading.Thread(target=lambda: seen.append(DATA_VALIDATION.get()))
        thread.start()
        thread.join()
    assert seen == [False]


def test_array_info():
    info = ArrayInfo.from_array(numpy.zeros((2, 3), dtype="f"))
    assert info.shape == (2, 3) and info.dtype == numpy.float32
    info.check_consistency(numpy.ones((2, 3), dtype="f"))
    with pytest.raises(ValueError, match=r"Shape mismatch.*\(2, 3\).*\(2, 4\)"):
        info.check_consistency(numpy.zeros((2, 4), dtype="f"))
    with pytest.raises(ValueError, match="Type mismatch.*float32.*float64"):
        info.check_consistency(numpy.zeros((2, 3), dtype="d"))
    assert ArrayInfo((1,), "f") == ArrayInfo((1,), "f")


# --- data validation -----------------------------------------------------------------------


def fwd_2d(model, X: Floats2d, is_train: bool) -> Tuple[Floats2d, Callable]:
    raise AssertionError("never called")


def fwd_list(model, X: List[Floats2d], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    raise AssertionError("never called")


def fwd_union(model, X: Union[Floats2d, Ragged], is_train: bool) -> Tuple[Optional[Ints1d], Callable]:
    raise AssertionError("never called")


def fwd_untyped(model, X, is_train):
    raise AssertionError("never called")


def test_data_validation_error():
    err = DataValidationError("linear", 1, "y", [{"loc": ("X",), "msg": "bad thing"}])
    assert isinstance(err, ValueError)
    text = str(err)
    assert "Data validation error in 'linear'" in text
    assert "<class 'int'>" in text and "<class 'str'>" in text
    assert "X" in text and "bad thing" in text


def test_validate_fwd_accepts_matching_data():
    X = numpy.zeros((2, 3), dtype="f")
    validate_fwd_input_output("m", fwd_2d, X, X)
    validate_fwd_input_output("m", fwd_2d, X, None)
    validate_fwd_input_output("m", fwd_2d, None, None)
    validate_fwd_input_output("m", fwd_list, [X, X], [X])
    validate_fwd_input_output("m", fwd_union, _ragged(), numpy.zeros(3, dtype="i"))
    validate_fwd_input_output("m", fwd_untyped, "anything", 42)


def test_validate_fwd_rejects_wrong_dtype_and_rank():
    with pytest.raises(DataValidationError) as info:
        validate_fwd_input_output("linear", fwd_2d, numpy.zeros((2, 3), dtype="i"), numpy.zeros(2, dtype="f"))
    text = str(info.value)
    assert "'linear'" in text
    assert "X" in text and "int32" in text
    assert "Y" in text and "at 0" in text  # Y is checked as the first item of (Y, backprop)


def test_validate_fwd_reports_list_position():
    good, bad = numpy.zeros((2, 3), dtype="f"), numpy.zeros(3, dtype="f")
    with pytest.raises(DataValidationError, match="at 1"):
        validate_fwd_input_output("m", fwd_list, [good, bad], None)


def test_validate_fwd_checks_only_a_sample_of_long_lists():
    good, bad = numpy.zeros((2, 3), dtype="f"), numpy.zeros(3, dtype="f")
    validate_fwd_input_output("m", fwd_list, [good] * 5 + [bad], None)


def test_validate_fwd_union():
    with pytest.raises(DataValidationError):
        validate_fwd_input_output("m", fwd_union, [1, 2], None)
    with pytest.raises(DataValidationError):
        validate_fwd_input_output("m", fwd_union, numpy.zeros((2, 2), dtype="f"), numpy.zeros(2, dtype="f"))


def test_validate_fwd_wrong_arity():
    def two_args(model, X):
        raise AssertionError("never called")

    with pytest.raises(DataValidationError, match=r"Expected 3 arguments.*got 2 \(model, X\)"):
        validate_fwd_input_output("m", two_args, 1, 2)


def test_validate_fwd_string_annotations():
    namespace = {}
    exec(
        "from __future__ import annotations\n"
        "from typing import Callable, Tuple\n"
        "from plait.types import Floats2d\n"
        "def forward(model, X: Floats2d, is_train: bool) -> Tuple[Floats2d, Callable]:\n"
        "    raise AssertionError\n",
        namespace,
    )
    validate_fwd_input_output("m", namespace["forward"], numpy.zeros((1, 1), dtype="f"), None)
    with pytest.raises(DataValidationError):
        validate_fwd_input_output("m", namespace["forward"], numpy.zeros((1,), dtype="f"), None)


def test_validate_fwd_agrees_with_thinc():
    pytest.importorskip("thinc.util")
    import thinc.types as tt
    import thinc.util as thinc_util

    def thinc_fwd(model, X: tt.Floats2d, is_train: bool) -> Tuple[tt.Floats2d, Callable]:
        raise AssertionError("never called")

    cases = [
        (numpy.zeros((2, 3), dtype="f"), numpy.zeros((2, 3), dtype="f")),
        (numpy.zeros((2, 3), dtype="i"), None),
        (numpy.zeros(3, dtype="f"), None),
        ([1, 2], None),
        (numpy.zeros((2, 3), dtype="f"), numpy.zeros((2, 3, 1), dtype="f")),
    ]
    for X, Y in cases:
        try:
            thinc_util.validate_fwd_input_output("m", thinc_fwd, X, Y)
            thinc_ok = True
        except thinc_util.DataValidationError:
            thinc_ok = False
        try:
            validate_fwd_input_output("m", fwd_2d, X, Y)
            ours_ok = True
        except DataValidationError:
            ours_ok = False
        assert ours_ok == thinc_ok, (X, Y)


@pytest.mark.parametrize(
    "value,annotation,ok",
    [
        (1, int, True),
        ("x", int, False),
        (1, float, True),
        (None, Optional[int], True),
        ([1, 2], List[int], True),
        ([1, "a"], List[int], False),
        ((1, "a"), Tuple[int, str], True),
        ((1, 2, 3), Tuple[int, ...], True),
        ((1, 2), Tuple[int], False),
        ({"a": 1}, dict, True),
        ([numpy.zeros(2, dtype="i")], Sequence[Ints1d], True),
        (numpy.zeros((2, 2), dtype="f"), Ints1d, False),
        (print, Callable, True),
        (3, Callable, False),
    ],
)
def test_validate_type(value, annotation, ok):
    error = validate_type(value, annotation)
    assert (error is None) == ok, error
    if not ok:
        assert error.startswith("at ")
