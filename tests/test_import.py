"""Importing plait's core modules stays light: no deep-learning framework or GPU library gets imported."""
import json
import subprocess
import sys

HEAVY = ("torch", "tensorflow", "cupy", "cupyx", "mpi4py", "mxnet", "jax", "h5py", "pydantic")
CORE = ("plait", "plait.types", "plait.util", "plait.compat", "plait.backends")


def _run_python(code, *flags):
    result = subprocess.run(
        [sys.executable, *flags, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result


def test_core_imports_leave_heavy_modules_out():
    code = (
        "import json, sys\n"
        f"import {', '.join(CORE)}\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    loaded = json.loads(_run_python(code).stdout.strip().splitlines()[-1])
    assert loaded == []


def test_everyday_calls_leave_heavy_modules_out():
    code = (
        "import json, sys, numpy\n"
        "from plait.backends import get_current_ops, get_ops, use_ops, set_current_ops, get_array_ops\n"
        "from plait.util import is_torch_array, is_cupy_array, get_width, to_categorical\n"
        "ops = get_current_ops()\n"
        "with use_ops('numpy'):\n"
        "    X = get_ops('cpu').alloc2f(2, 3)\n"
        "set_current_ops(get_array_ops(X))\n"
        "is_torch_array(X); is_cupy_array(X); get_width(X); to_categorical(numpy.asarray([0, 1]))\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    loaded = json.loads(_run_python(code).stdout.strip().splitlines()[-1])
    assert loaded == []


def test_import_time_of_backends_is_reported(capsys):
    code = (
        "import time\n"
        "start = time.perf_counter()\n"
        "import plait.backends\n"
        "print(f'{time.perf_counter() - start:.6f}')\n"
    )
    seconds = float(_run_python(code).stdout.strip().splitlines()[-1])
    assert seconds >= 0.0
    # -X importtime writes one line per module to stderr: the cumulative time of plait.backends.
    profile = _run_python("import plait.backends", "-X", "importtime").stderr
    rows = [line for line in profile.splitlines() if line.rstrip().endswith("| plait.backends")]
    assert rows, profile[-2000:]
    cumulative_us = int(rows[-1].split("|")[1])
    with capsys.disabled():
        print(
            f"\n[import time] import plait.backends: {seconds * 1000:.1f} ms wall "
            f"(-X importtime cumulative: {cumulative_us / 1000:.1f} ms)"
        )


def test_thinc_face_imports_leave_frameworks_out():
    # plait.api pulls in confection (and so pydantic) for the config system, but no
    # deep-learning framework: the wrappers import theirs only when used.
    frameworks = tuple(m for m in HEAVY if m != "pydantic")
    code = (
        "import json, sys, numpy\n"
        "import plait.api, plait.layers, plait.shims, plait.optimizers, plait.loss\n"
        "from plait.api import chain, Relu, Softmax, Adam, registry\n"
        "m = chain(Relu(4), Softmax(2)).initialize(X=numpy.zeros((2, 3), 'f'))\n"
        "registry.layers.get_all()\n"
        f"print(json.dumps(sorted(m for m in {frameworks!r} if m in sys.modules)))\n"
    )
    loaded = json.loads(_run_python(code).stdout.strip().splitlines()[-1])
    assert loaded == []


def test_distributed_imports_leave_mpi_out():
    # plait.distributed imports mpi4py only under an MPI launcher: importing it, and a whole
    # one-process data-parallel step, leave MPI unloaded.
    code = (
        "import json, os, sys, numpy\n"
        "for name in ('PMI_RANK', 'PMI_SIZE', 'OMPI_COMM_WORLD_SIZE', 'PMIX_RANK', 'MPI_LOCALNRANKS', 'PLAIT_DIST_MPI'):\n"
        "    os.environ.pop(name, None)\n"
        "import plait, plait.api, plait.distributed\n"
        "from plait.api import chain, Relu, Softmax, SGD\n"
        "from plait.distributed import get_communicator, DataParallel, shard\n"
        "X = numpy.zeros((4, 3), 'f'); Y = numpy.eye(2, dtype='f')[[0, 1, 0, 1]]\n"
        "dp = DataParallel(chain(Relu(4), Softmax(2)).initialize(X=X, Y=Y), get_communicator())\n"
        "Yh, backprop = dp.begin_update(shard(X, 0, 1)); backprop(Yh - Y); dp.finish_update(SGD(0.1))\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'mpi4py' or m.startswith('mpi4py.'))))\n"
    )
    loaded = json.loads(_run_python(code).stdout.strip().splitlines()[-1])
    assert loaded == []


def test_plait_never_imports_its_distributed_package():
    code = "import json, sys\nimport plait, plait.api\nprint(json.dumps('plait.distributed' in sys.modules))\n"
    assert json.loads(_run_python(code).stdout.strip().splitlines()[-1]) is False
