"""The opt-in aliases: `thinc` served by plait (plait.thinc_alias), `chainer` by plait.chainer, `neon` by plait.neon."""
import os
import subprocess
import sys
import textwrap

import pytest


def _run(code, env_extra=None, args=None, cwd=None):
    env = {k: v for k, v in os.environ.items() if k not in ("PLAIT_AS_THINC", "PLAIT_AS_CHAINER", "PLAIT_AS_NEON")}
    env.update(env_extra or {})
    cmd = [sys.executable] + (args if args is not None else ["-c", textwrap.dedent(code)])
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=cwd)


def _ok(result):
    assert result.returncode == 0, result.stderr
    return result.stdout


SERVED_FROM_PLAIT = """
import sys, thinc, thinc.api, thinc.layers.linear, thinc.backends.numpy_ops, plait, plait.api
assert thinc is plait and thinc.api is plait.api
assert thinc.layers.linear.Linear is plait.api.Linear
from thinc.api import registry, Relu
assert registry.layers.get("Relu.v1") is Relu
# Nothing was loaded from a real thinc's directory.
for name, module in list(sys.modules.items()):
    path = getattr(module, "__file__", None) or ""
    assert os.sep + "thinc" + os.sep not in path, (name, path)
try:
    import thinc.chainer
except ModuleNotFoundError as err:
    assert "thinc.chainer" in str(err)
else:
    raise AssertionError("plait's Chainer face must not be served as thinc.chainer")
print("ok")
"""


def test_install_serves_thinc_from_plait():
    code = "import os, plait.thinc_alias as alias\nalias.install()\nalias.install()\n" + SERVED_FROM_PLAIT
    assert _ok(_run(code)).strip() == "ok"


def test_environment_variable_switches_it_on_at_start():
    assert _ok(_run("import os\n" + SERVED_FROM_PLAIT, {"PLAIT_AS_THINC": "1"})).strip() == "ok"


def test_environment_variable_unset_or_off_changes_nothing():
    code = """
    import sys
    import plait.thinc_alias as alias
    assert not alias.is_installed()
    assert "thinc" not in sys.modules
    print("ok")
    """
    assert _ok(_run(code)).strip() == "ok"
    assert _ok(_run(code, {"PLAIT_AS_THINC": "0"})).strip() == "ok"
    result = _run(code, {"PLAIT_AS_THINC": "perhaps"})
    assert _ok(result).strip() == "ok"
    assert result.stderr.count("ignoring PLAIT_AS_THINC='perhaps'") == 1


def test_install_refuses_after_the_real_thinc_was_imported():
    pytest.importorskip("thinc")
    code = """
    import thinc, plait.thinc_alias as alias
    if thinc.__name__ == "plait":
        raise SystemExit(3)
    try:
        alias.install()
    except alias.AliasError as err:
        assert "already imported" in str(err) and "PLAIT_AS_THINC=1" in str(err), err
        print("refused")
    """
    result = _run(code)
    assert _ok(result).strip() == "refused"


def test_uninstall_gives_back_the_import():
    code = """
    import sys, plait.thinc_alias as alias
    alias.install()
    import thinc.api
    alias.uninstall()
    assert not alias.is_installed()
    assert "thinc" not in sys.modules and "thinc.api" not in sys.modules
    print("ok")
    """
    assert _ok(_run(code)).strip() == "ok"


def test_module_runner_runs_a_module_and_a_script(tmp_path):
    script = tmp_path / "uses_thinc.py"
    script.write_text("import sys, thinc.api\nprint(thinc.api.__name__, sys.argv[1:])\n")
    out = _ok(_run(None, args=["-m", "plait.thinc_alias", str(script), "--flag", "x"]))
    assert out.strip() == "plait.api ['--flag', 'x']"
    (tmp_path / "thinc_user_mod.py").write_text("import os, thinc\nprint(thinc.__name__, os.environ['PLAIT_AS_THINC'])\n")
    out = _ok(_run(None, args=["-m", "plait.thinc_alias", "-m", "thinc_user_mod"], cwd=str(tmp_path)))
    assert out.strip() == "plait 1"
    result = _run(None, args=["-m", "plait.thinc_alias", "no-such-command-here"])
    assert result.returncode == 2 and "no console script named 'no-such-command-here'" in result.stderr


def test_module_runner_puts_the_scripts_folder_first_on_the_path(tmp_path):
    # `python examples/mnist/train_mnist.py` imports the data.py and net.py beside it; so must the alias.
    folder = tmp_path / "example"
    folder.mkdir()
    (folder / "net_beside.py").write_text("import chainer\nNAME = chainer.__name__\n")
    (folder / "train.py").write_text("import net_beside\nprint(net_beside.NAME)\n")
    out = _ok(_run(None, args=["-m", "plait.chainer_alias", os.path.join("example", "train.py")],
                   cwd=str(tmp_path)))
    assert out.strip() == "plait.chainer"


def _thinc_plugin(tmp_path):
    """A package that registers a layer for Thinc through an entry point, as spacy-legacy does;
    returns the folder to put on PYTHONPATH."""
    dist = tmp_path / "thinc_plugin_demo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thinc-plugin-demo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[thinc_layers]\ndemo.Double.v1 = thinc_plugin_demo:double\n")
    (tmp_path / "thinc_plugin_demo.py").write_text("def double():\n    return 'double'\n")
    return str(tmp_path)


def test_thinc_entry_points_resolve_under_the_alias_only(tmp_path):
    path = _thinc_plugin(tmp_path)
    code = """
    import plait.config as config
    assert "demo.Double.v1" not in config.registry.layers
    import plait.thinc_alias as alias
    alias.install()
    import thinc.api
    assert thinc.api.registry.layers.get("demo.Double.v1")() == "double"
    print("ok")
    """
    assert _ok(_run(code, {"PYTHONPATH": path})).strip() == "ok"


def test_the_start_hook_imports_nothing_heavy_and_entry_points_still_resolve(tmp_path):
    # PLAIT_AS_THINC=1 runs the hook in every interpreter of the environment: installing the
    # finder must not import numpy or plait's registries (0.2 s); they load with `import thinc`,
    # and then still read Thinc's entry-point groups.
    path = _thinc_plugin(tmp_path)
    code = """
    import sys
    import plait.thinc_alias as alias
    assert alias.is_installed()
    heavy = [m for m in ("numpy", "confection", "plait.config", "plait.backends") if m in sys.modules]
    assert not heavy, heavy
    import thinc.api
    assert thinc.api.registry.layers.get("demo.Double.v1")() == "double"
    print("ok")
    """
    assert _ok(_run(code, {"PLAIT_AS_THINC": "1", "PYTHONPATH": path})).strip() == "ok"


def test_chainer_alias_serves_plait_chainer():
    code = """
    import chainer, chainer.functions as F, chainer.links as L
    import plait.chainer
    assert chainer is plait.chainer and F is plait.chainer.functions
    import numpy
    y = F.relu(chainer.Variable(numpy.array([-1.0, 2.0], dtype=numpy.float32)))
    print(y.data.tolist())
    """
    assert _ok(_run(code, {"PLAIT_AS_CHAINER": "1"})).strip() == "[0.0, 2.0]"


def test_aliased_modules_keep_their_own_spec_so_relative_imports_stay_silent():
    # A module first imported as thinc.X must keep plait's __spec__: its later relative imports
    # (lazy ones run at call time) would otherwise raise ImportWarning, an error under -W error.
    code = """
    import plait.thinc_alias as alias
    alias.install()
    import thinc, thinc.api, thinc.backends.numpy_ops
    assert thinc.api.__spec__.name == "plait.api" and thinc.__spec__.name == "plait"
    from thinc import registry
    from thinc.api import PyTorchWrapper, TensorFlowShim
    assert registry.layers.get("Relu.v1") is thinc.api.Relu
    print("ok")
    """
    assert _ok(_run(None, args=["-W", "error", "-c", textwrap.dedent(code)])).strip() == "ok"


NEON_USER_CODE = """
import sys
import numpy as np
from neon import NervanaObject
from neon.backends import gen_backend
from neon.backends.backend import OpTreeNode, Tensor
from neon.backends.nervanacpu import NervanaCPU, CPUTensor
from neon.backends.autodiff import Autodiff
import plait.neon
be = gen_backend(backend="cpu", rng_seed=0, batch_size=4)
assert NervanaObject.be is be and isinstance(be, NervanaCPU) and type(be) is plait.neon.NervanaCPU
assert gen_backend is plait.neon.gen_backend and Tensor is plait.neon.Tensor
x = be.array(np.arange(8, dtype="float32").reshape(2, 4))
y = be.empty((2, 4))
tree = x * 2 + 1
assert isinstance(tree, OpTreeNode) and isinstance(x, CPUTensor)
y[:] = tree
print(y.get().ravel().tolist())
for name, module in list(sys.modules.items()):
    path = getattr(module, "__file__", None) or ""
    assert name.split(".")[0] != "neon" or "plait" in path, (name, path)
"""


@pytest.mark.parametrize("how", ["env", "module"])
def test_neon_alias_serves_neon_backends_from_plait(tmp_path, how):
    script = tmp_path / "neon_user.py"
    script.write_text(NEON_USER_CODE)
    if how == "env":
        result = _run(None, {"PLAIT_AS_NEON": "1"}, args=[str(script)])
    else:
        result = _run(None, args=["-m", "plait.neon_alias", str(script)])
    expected = [float(2 * i + 1) for i in range(8)]
    assert _ok(result).strip() == str(expected)


def test_without_the_neon_alias_neon_is_not_plait():
    result = _run("import neon, os; print(os.path.dirname(neon.__file__))")
    if result.returncode == 0:  # a real neon is installed: it must be that one, not plait's
        assert "plait" not in result.stdout, result.stdout
    else:
        assert "No module named 'neon'" in result.stderr, result.stderr
