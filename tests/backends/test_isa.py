"""The per-instruction-set builds of the CPU kernels (plait/backends/_kernels_cpu, docs/isa.md).

Every build this machine runs is exercised: the kernels' own tests pass on each, and the builds
agree with each other bit for bit where the work is selects, adds and integers, and within
16 float epsilons of the result's scale elsewhere."""
import os
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

from plait.backends import _kernels_cpu as K

REPO = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("_isa_probe.py")
RUNNABLE = K.runnable()
# Work whose result cannot depend on the vector width: selects (maxout, max pooling, relu),
# adds in a fixed order (seq2col, reductions, gather/scatter), integer hashing (hash, the
# dropout masks' generator), and Adam, whose vector copies are built without fused
# multiply-adds on purpose.
EXACT = ("maxout", "backprop_maxout", "seq2col", "backprop_seq2col", "reduce_max", "reduce_sum",
         "gather_add", "scatter_add", "max_pool_nd", "hash", "dropout", "adam", "relu",
         "backprop_relu")
# Elsewhere: |a - b| <= TOLERANCE * eps(dtype) * max |a| (docs/isa.md; measured up to 8.1).
TOLERANCE = 16


def _env(isa):
    env = dict(os.environ, PLAIT_ISA=isa)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def test_the_default_build_is_the_widest_this_cpu_runs():
    if os.environ.get("PLAIT_ISA", "auto").strip().lower() not in ("", "auto"):
        pytest.skip("PLAIT_ISA is set for this run")
    assert RUNNABLE and K.ISA == RUNNABLE[0]
    assert RUNNABLE[-1] == "portable"  # the baseline build runs anywhere it was built


def test_the_kernel_modules_are_the_chosen_build_under_their_usual_names():
    from plait.backends._kernels_cpu import act, conv_gemm, gather, lstm, seq

    for module in (act, conv_gemm, gather, lstm, seq):
        assert module.__name__ == f"plait.backends._kernels_cpu.{module.__name__.rsplit('.', 1)[1]}"
        assert Path(module.__file__).parent.name == f"_{K.ISA}"
    # The run-time picks inside a build never go past it (lstm's and conv_gemm's products).
    cap = K.LEVELS[K.ISA]
    assert lstm._gemm_isa(0) <= cap and conv_gemm._set_isa(0) <= cap


@pytest.mark.parametrize("value, missing, fragment", [
    ("sse9", None, "is not an instruction set plait knows"),
    ("avx512", "cpu", "this CPU cannot run the avx512 build"),
    ("avx2", "build", "has no avx2 build of its kernels"),
])
def test_a_bad_plait_isa_is_refused_with_the_choices(monkeypatch, value, missing, fragment):
    monkeypatch.setenv("PLAIT_ISA", value)
    if missing == "cpu":
        monkeypatch.setattr(K, "runnable", lambda: ["avx2", "portable"])
    if missing == "build":
        monkeypatch.setattr(K, "built", lambda: ["portable"])
        monkeypatch.setattr(K, "runnable", lambda: ["portable"])
    with pytest.raises(ValueError) as err:
        K._choose()
    message = str(err.value)
    assert fragment in message and "PLAIT_ISA" in message and repr(value) in message
    assert "Unset PLAIT_ISA" in message or "auto" in message


def test_plait_isa_is_read_case_blind_and_auto_is_the_default(monkeypatch):
    monkeypatch.setenv("PLAIT_ISA", " Portable ")
    assert K._choose() == "portable"
    monkeypatch.setenv("PLAIT_ISA", "AUTO")
    assert K._choose() == RUNNABLE[0]


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    results = {}
    for isa in RUNNABLE:
        path = tmp_path_factory.mktemp("isa") / f"{isa}.npz"
        proc = subprocess.run([sys.executable, str(PROBE), str(path)], env=_env(isa), cwd=str(REPO),
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        with numpy.load(path) as data:
            results[isa] = {k: data[k] for k in data.files}
        assert str(results[isa]["__isa__"]) == isa
    return results


@pytest.mark.skipif(len(RUNNABLE) < 2, reason="this machine runs one build of the kernels only")
def test_the_builds_agree(probes):
    widest = RUNNABLE[0]
    for isa in RUNNABLE[1:]:
        for key, want in probes[widest].items():
            if key == "__isa__":
                continue
            got = probes[isa][key]
            op = key.split("__")[0].split(".")[0]
            assert got.shape == want.shape and got.dtype == want.dtype, (isa, key)
            if op in EXACT or want.dtype.kind != "f":
                assert numpy.array_equal(got, want, equal_nan=True), f"{key}: {isa} differs from {widest}"
            else:
                scale = float(numpy.abs(want).max()) or 1.0
                worst = float(numpy.abs(got.astype("float64") - want).max())
                bound = TOLERANCE * float(numpy.finfo(want.dtype).eps) * scale
                assert worst <= bound, f"{key}: {isa} is {worst:.3g} from {widest} (bound {bound:.3g})"


OTHER_BUILDS = [isa for isa in RUNNABLE if isa != K.ISA]


@pytest.mark.skipif(not OTHER_BUILDS, reason="this machine runs one build of the kernels only")
@pytest.mark.parametrize("isa", OTHER_BUILDS)
def test_the_kernel_tests_pass_on_every_build(isa):
    # This process runs one build; the others run the kernels' tests in a child each.
    tests = sorted(str(p.relative_to(REPO)) for p in Path(__file__).parent.glob("test_*.py")
                   if p.name not in ("test_isa.py", "test_gpu_kernels.py", "test_thinc_probe.py"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
                          env=_env(isa), cwd=str(REPO), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"PLAIT_ISA={isa}:\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
