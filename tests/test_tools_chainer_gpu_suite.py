"""tools/chainer_gpu_suite.py: its pytest plugin keeps exactly the GPU-tagged tests Chainer's runner drops."""
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("chainer_gpu_suite", ROOT / "tools" / "chainer_gpu_suite.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_plugin_keeps_gpu_tagged_tests_only(tmp_path):
    (tmp_path / "chainer_gpu_only.py").write_text(_tool().PLUGIN)
    (tmp_path / "test_sample.py").write_text(textwrap.dedent("""
        import unittest

        def gpu(obj):
            obj.gpu = True
            return obj

        def multi_gpu(n):
            def tag(obj):
                obj.gpu = n
                return obj
            return tag

        class TestPlain(unittest.TestCase):
            def test_cpu(self):
                pass

            @gpu
            def test_on_gpu(self):
                pass

            @multi_gpu(2)
            def test_on_two_gpus(self):
                pass

        @gpu
        class TestAllGpu(unittest.TestCase):
            def test_a(self):
                pass

        @gpu
        class _TestBase(unittest.TestCase):
            def test_base(self):
                pass
    """))
    env = dict(os.environ, PYTHONPATH=str(tmp_path), NGPU="1")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "chainer_gpu_only", "-p", "no:cacheprovider", "-q",
         "--collect-only", "-o", "python_classes=Test _Test", "test_sample.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    ).stdout
    collected = sorted(line for line in out.splitlines() if "::" in line)
    assert collected == ["test_sample.py::TestAllGpu::test_a", "test_sample.py::TestPlain::test_on_gpu"]
