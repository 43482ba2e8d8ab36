"""tools/upstream_gpu_suite.py: its Chainer plugin keeps exactly the GPU-tagged tests Chainer's runner drops."""
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("upstream_gpu_suite", ROOT / "tools" / "upstream_gpu_suite.py")
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


def _prepared_suite(tmp_path, files):
    """A folder as `prepare` leaves it, holding some_tests/<name> for each (name, source)."""
    suite = tmp_path / "suite"
    tests = suite / "some_tests"
    tests.mkdir(parents=True)
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "gpu_suite.json").write_text('{"kind": "thinc", "tests": "some_tests", "plugins": []}')
    for name, source in files.items():
        (tests / name).write_text(source)
    return suite


def _run(suite, **settings):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "upstream_gpu_suite.py"), "run", str(suite)],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, **settings))


def test_run_gives_each_file_its_own_pytest_and_names_a_file_that_hangs(tmp_path):
    suite = _prepared_suite(tmp_path, {
        "test_good.py": "def test_a():\n    pass\n\ndef test_b():\n    pass\n",
        "test_bad.py": "def test_c():\n    assert 1 == 2\n",
        "test_hang.py": "import time\n\ndef test_d():\n    time.sleep(60)\n",
    })
    proc = _run(suite, RUN_FILE_TIMEOUT="5")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert "some_tests/test_hang.py: no result within 5 s" in lines
    assert any(line.startswith("some_tests/test_bad.py: ") for line in lines)
    assert "  FAILED some_tests/test_bad.py::test_c - assert 1 == 2" in lines
    # A file that passes gets one line too, as it ends: its counts and how long it took.
    good = [line for line in lines if line.startswith("some_tests/test_good.py: ")]
    assert len(good) == 1 and "2 passed" in good[0] and good[0].endswith(" s)")
    assert lines[-1] == "total: 1 failed, 2 passed, 1 timed out"


def test_run_jobs_runs_files_side_by_side_with_the_same_totals(tmp_path):
    sleeper = "import time\n\ndef test_x():\n    time.sleep(3)\n"
    suite = _prepared_suite(tmp_path, {"test_a.py": sleeper, "test_b.py": sleeper, "test_c.py": sleeper,
                                       "test_bad.py": "def test_c():\n    assert 1 == 2\n"})
    proc = _run(suite, RUN_FILE_TIMEOUT="60", RUN_JOBS="4")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "total: 1 failed, 3 passed"
    assert sorted(line.split(":")[0] for line in lines[:-1] if not line.startswith(" ")) == [
        "some_tests/test_a.py", "some_tests/test_b.py", "some_tests/test_bad.py", "some_tests/test_c.py"]
    # A setting that is not a number is refused with a message, before anything runs.
    bad = _run(suite, RUN_FILE_TIMEOUT="60", RUN_JOBS="many")
    assert bad.returncode == 2 and "RUN_JOBS ('many')" in bad.stderr and not bad.stdout
