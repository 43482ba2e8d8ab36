"""plait.compat: lazily probed optional dependencies with thinc.compat's names."""
import json
import os
import subprocess
import sys
import types

import pytest

from plait import compat

THINC_COMPAT_NAMES = [
    "has_cupy", "has_cupy_gpu", "has_gpu", "has_torch", "has_torch_cuda_gpu", "has_torch_mps",
    "has_torch_mps_gpu", "has_torch_gpu", "has_torch_amp", "torch_version", "has_tensorflow",
    "has_tensorflow_gpu", "has_mxnet", "enable_mxnet", "enable_tensorflow", "has_os_signpost",
    "os_signpost", "h5py", "cupy", "cupyx", "cupy_version", "cupy_from_dlpack", "cublas", "torch",
    "tensorflow", "mxnet",
]  # fmt: skip
LAZY_NAMES = sorted(compat._LOADERS)


from _env import installed as _installed


def _run(code, **env):
    full_env = dict(os.environ, **env)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def fresh_compat(monkeypatch):
    """Forget every probed name before and after the test, so probes run again."""
    compat._reset()
    yield compat
    compat._reset()


@pytest.mark.parametrize("name", THINC_COMPAT_NAMES)
def test_every_thinc_compat_name_exists(name):
    assert hasattr(compat, name)
    assert name in dir(compat)


def test_names_match_thinc_compat():
    thinc_compat = pytest.importorskip("thinc.compat")
    public = {n for n in vars(thinc_compat) if not n.startswith("_")}
    # Names thinc.compat merely imported for its own use are not part of its surface.
    public -= {"warnings", "Version"}
    assert public <= set(dir(compat))


def test_import_probes_nothing():
    out = _run(
        "import json, sys\n"
        "import plait.compat as c\n"
        "heavy = [m for m in ('cupy', 'torch', 'tensorflow', 'mxnet', 'h5py', 'os_signpost') if m in sys.modules]\n"
        "probed = [n for n in c._LOADERS if n in vars(c)]\n"
        "print(json.dumps({'heavy': heavy, 'probed': probed}))\n"
    )
    assert out == {"heavy": [], "probed": []}


def test_lazy_value_is_cached_as_module_global(fresh_compat):
    assert "has_cupy" not in vars(fresh_compat)
    value = fresh_compat.has_cupy
    assert vars(fresh_compat)["has_cupy"] is value
    # The whole group is filled in at once.
    for name in ("cupy", "cupyx", "cublas", "cupy_version", "cupy_from_dlpack", "has_cupy_gpu"):
        assert name in vars(fresh_compat)


def test_flags_are_bools_and_consistent(fresh_compat):
    c = fresh_compat
    for name in LAZY_NAMES + ["has_tensorflow", "has_tensorflow_gpu", "has_mxnet"]:
        if name.startswith("has_"):
            assert isinstance(getattr(c, name), bool), name
    assert (c.cupy is None) == (not c.has_cupy)
    assert (c.cupyx is None) == (not c.has_cupy)
    assert (c.torch is None) == (not c.has_torch)
    assert (c.h5py is None) == (not _installed("h5py"))
    assert (c.os_signpost is None) == (not c.has_os_signpost)
    assert c.has_torch_gpu == c.has_torch_cuda_gpu
    assert not c.has_cupy_gpu or c.has_cupy
    assert not c.has_torch_mps_gpu or c.has_torch_mps
    assert c.has_gpu == (c.has_cupy_gpu or (sys.platform == "darwin" and c.has_torch_mps_gpu))
    if not c.has_cupy:
        assert c.cupy_from_dlpack is None and c.cublas is None
    if not c.has_torch:
        assert not (c.has_torch_cuda_gpu or c.has_torch_mps or c.has_torch_amp)


def test_versions_compare_like_thinc(fresh_compat):
    from packaging.version import Version

    for name, module in (("cupy_version", "cupy"), ("torch_version", "torch")):
        version = getattr(fresh_compat, name)
        assert isinstance(version, Version)
        if not _installed(module):
            assert version == Version("0.0.0")
        assert version < Version("99999")


def test_matches_thinc_probe_results(fresh_compat):
    thinc_compat = pytest.importorskip("thinc.compat")
    for name in ("has_cupy", "has_cupy_gpu", "has_torch", "has_torch_cuda_gpu", "has_tensorflow", "has_mxnet"):
        assert getattr(fresh_compat, name) == getattr(thinc_compat, name), name
    assert (fresh_compat.h5py is None) == (thinc_compat.h5py is None)


def test_unknown_attribute_raises_attribute_error():
    with pytest.raises(AttributeError, match="no_such_thing"):
        compat.no_such_thing  # noqa: B018


def test_off_switch_in_subprocess():
    out = _run(
        "import json, sys\n"
        "import plait.compat as c\n"
        "print(json.dumps({'has_cupy': c.has_cupy, 'cupy': c.cupy is None, 'has_torch': c.has_torch,\n"
        "                  'loaded': [m for m in ('cupy', 'torch') if m in sys.modules]}))\n",
        PLAIT_NO_CUPY="1",
        PLAIT_NO_TORCH="true",
    )
    assert out == {"has_cupy": False, "cupy": True, "has_torch": False, "loaded": []}


def test_off_switch_hides_an_importable_module(fresh_compat, monkeypatch):
    fake = _fake_torch(cuda_devices=1)
    _install_fake_torch(monkeypatch, fake)
    monkeypatch.setenv("PLAIT_NO_TORCH", "1")
    assert fresh_compat.has_torch is False
    assert fresh_compat.torch is None


def _fake_torch(cuda_devices=0, mps_built=False, mps_available=False, version="2.3.1"):
    torch = types.ModuleType("torch")
    torch.__version__ = version
    torch.cuda = types.SimpleNamespace(device_count=lambda: cuda_devices)
    torch.backends = types.SimpleNamespace(
        mps=types.SimpleNamespace(is_built=lambda: mps_built, is_available=lambda: mps_available)
    )
    torch.utils = types.ModuleType("torch.utils")
    torch.utils.dlpack = types.ModuleType("torch.utils.dlpack")
    return torch


def _install_fake_torch(monkeypatch, fake):
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setitem(sys.modules, "torch.utils", fake.utils)
    monkeypatch.setitem(sys.modules, "torch.utils.dlpack", fake.utils.dlpack)
    # A real torch.amp would be looked up for has_torch_amp; a fake one says "available".
    amp = types.ModuleType("torch.amp")
    amp_common = types.ModuleType("torch.amp.common")
    amp_common.amp_definitely_not_available = lambda: fake.cuda.device_count() == 0
    monkeypatch.setitem(sys.modules, "torch.amp", amp)
    monkeypatch.setitem(sys.modules, "torch.amp.common", amp_common)


@pytest.mark.skipif(_installed("torch"), reason="a real torch is installed")
def test_torch_group_probed_from_module(fresh_compat, monkeypatch):
    monkeypatch.delenv("PLAIT_NO_TORCH", raising=False)
    fake = _fake_torch(cuda_devices=2, mps_built=True, mps_available=False, version="2.3.1+cu121")
    _install_fake_torch(monkeypatch, fake)
    from packaging.version import Version

    c = fresh_compat
    assert c.torch is fake
    assert c.has_torch is True
    assert c.has_torch_cuda_gpu is True and c.has_torch_gpu is True
    assert c.has_torch_mps is True and c.has_torch_mps_gpu is False
    assert c.has_torch_amp is True
    assert c.torch_version == Version("2.3.1+cu121")


@pytest.mark.skipif(_installed("torch"), reason="a real torch is installed")
def test_torch_without_gpu(fresh_compat, monkeypatch):
    monkeypatch.delenv("PLAIT_NO_TORCH", raising=False)
    _install_fake_torch(monkeypatch, _fake_torch(cuda_devices=0, version="1.8.0"))
    c = fresh_compat
    assert c.has_torch is True
    assert c.has_torch_cuda_gpu is False and c.has_torch_gpu is False
    # torch < 1.9 has no usable autocast
    assert c.has_torch_amp is False


def test_os_signpost_and_h5py_probed_on_first_access(fresh_compat, monkeypatch):
    signpost = types.ModuleType("os_signpost")
    h5 = types.ModuleType("h5py")
    monkeypatch.setitem(sys.modules, "os_signpost", signpost)
    monkeypatch.setitem(sys.modules, "h5py", h5)
    assert fresh_compat.has_os_signpost is True
    assert fresh_compat.os_signpost is signpost
    assert fresh_compat.h5py is h5


def test_missing_module_reads_as_none(fresh_compat, monkeypatch):
    # A None entry in sys.modules makes the import fail, as for an uninstalled package.
    monkeypatch.setitem(sys.modules, "h5py", None)
    monkeypatch.setitem(sys.modules, "os_signpost", None)
    assert fresh_compat.h5py is None
    assert fresh_compat.os_signpost is None and fresh_compat.has_os_signpost is False


def test_cupy_missing_reads_as_no_gpu(fresh_compat, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    c = fresh_compat
    assert c.has_cupy is False and c.has_cupy_gpu is False
    assert c.cupy is None and c.cupyx is None and c.cublas is None and c.cupy_from_dlpack is None
    if sys.platform != "darwin":
        assert c.has_gpu is False


def test_tensorflow_and_mxnet_off_until_enabled():
    # As in thinc, these are opt-in: importing or probing never turns them on.
    if not compat.has_tensorflow:
        assert compat.tensorflow is None and compat.has_tensorflow_gpu is False
    if not compat.has_mxnet:
        assert compat.mxnet is None


@pytest.mark.skipif(_installed("tensorflow"), reason="tensorflow is installed")
def test_enable_tensorflow_without_tensorflow_names_the_package():
    with pytest.raises(ImportError, match=r"pip install .plait\[tensorflow\]"):
        compat.enable_tensorflow()
    assert compat.has_tensorflow is False and compat.tensorflow is None


@pytest.mark.skipif(_installed("mxnet"), reason="mxnet is installed")
def test_enable_mxnet_without_mxnet_names_the_package():
    with pytest.raises(ImportError, match="pip install mxnet"):
        compat.enable_mxnet()
    assert compat.has_mxnet is False and compat.mxnet is None


def test_enable_mxnet_with_a_module(monkeypatch):
    fake = types.ModuleType("mxnet")
    monkeypatch.setitem(sys.modules, "mxnet", fake)
    monkeypatch.setattr(compat, "mxnet", None)
    monkeypatch.setattr(compat, "has_mxnet", False)
    compat.enable_mxnet()
    assert compat.mxnet is fake and compat.has_mxnet is True


def test_from_import_works_for_lazy_names():
    from plait.compat import has_cupy, has_torch  # noqa: F401

    assert isinstance(has_cupy, bool) and isinstance(has_torch, bool)


@pytest.mark.gpu
def test_cupy_probe_on_gpu(fresh_compat):
    pytest.importorskip("cupy")
    if not fresh_compat.has_cupy_gpu:
        pytest.skip("needs a CUDA device")
    assert fresh_compat.has_gpu is True
    assert fresh_compat.cupy_from_dlpack is not None
    assert fresh_compat.cublas is fresh_compat.cupy.cublas
