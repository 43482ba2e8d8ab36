"""MXNetWrapper / MXNetShim: MXNet cannot run with numpy 2, so every entry point says so clearly."""
import pytest

from plait.api import ArgsKwargs, Model, MXNetShim, MXNetWrapper, registry
from plait.layers import mxnetwrapper


def _check(err: ImportError, what: str) -> None:
    text = str(err)
    assert text.startswith(f"{what}:")
    # why: MXNet needs numpy<2; what to do: thinc with numpy<2, or port to PyTorch.
    assert "numpy<2" in text and "numpy 2" in text
    assert "thinc" in text and "PyTorchWrapper" in text


def test_mxnet_wrapper_raises_a_clear_import_error():
    with pytest.raises(ImportError) as info:
        MXNetWrapper(object())
    _check(info.value, "MXNetWrapper")


def test_mxnet_wrapper_from_the_registry_raises_the_same_error():
    with pytest.raises(ImportError) as info:
        registry.layers.get("MXNetWrapper.v1")(object(), model_name="mx")
    _check(info.value, "MXNetWrapper")


def test_mxnet_shim_raises_a_clear_import_error():
    with pytest.raises(ImportError) as info:
        MXNetShim(object())
    _check(info.value, "MXNetShim")


@pytest.mark.parametrize(
    "name", ["forward", "convert_mxnet_default_inputs", "convert_mxnet_default_outputs"]
)
def test_mxnet_helpers_raise_a_clear_import_error(name):
    model = Model("mxnet", lambda model, X, is_train: (X, lambda dY: dY))
    with pytest.raises(ImportError) as info:
        getattr(mxnetwrapper, name)(model, ArgsKwargs(args=(), kwargs={}), False)
    assert "numpy<2" in str(info.value)
