"""Differential tests against the real Chainer (7.8.1, in its own interpreter).

Chainer does not install next to numpy 2, so it runs in a separate Python given by
$PLAIT_CHAINER_PYTHON (default: bench/.venvs/chainer/bin/python, which
`bash bench/setup_peers.sh chainer` creates); everything here skips when that interpreter is
missing or cannot import chainer. The peer writes arrays to .npz files that
this side compares with plait's.
"""
import json
import subprocess
import textwrap

import numpy
import pytest

import plait.chainer as chainer
import plait.chainer.functions as F
import plait.chainer.links as L
from plait.chainer import Variable, optimizers, serializers

from _env import CHAINER_PEER as PEER, chainer_peer_available as _peer_available  # noqa: E402


pytestmark = pytest.mark.skipif(not _peer_available(), reason=f"no Python with chainer at {PEER}")


def _run_peer(script: str, tmp_path) -> None:
    proc = subprocess.run([PEER, "-c", textwrap.dedent(script), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"the chainer peer failed:\n{proc.stdout}\n{proc.stderr}")


_PEER_MODELS = """
import sys, numpy as np, chainer, chainer.links as L, chainer.functions as F
from chainer import serializers
d = sys.argv[1]
class MLP(chainer.Chain):
    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.l1 = L.Linear(6, 8)
            self.l2 = L.Linear(8, 8)
            self.l3 = L.Linear(8, 4)
    def __call__(self, x):
        return self.l3(F.relu(self.l2(F.relu(self.l1(x)))))
np.random.seed(1)
model = L.Classifier(MLP())
x = np.random.rand(5, 6).astype('f')
t = np.array([0, 1, 2, 3, 1], 'i')
opt = chainer.optimizers.Adam()
opt.setup(model)
for _ in range(3):
    opt.update(model, x, t)
serializers.save_npz(d + '/chainer_model.npz', model)
serializers.save_npz(d + '/chainer_opt.npz', opt)
np.savez(d + '/chainer_pred.npz', x=x, y=model.predictor(x).array)
# Load what plait saved and predict with it.
other = L.Classifier(MLP())
serializers.load_npz(d + '/plait_model.npz', other)
y_other = other.predictor(np.load(d + '/plait_x.npz')['x']).array
opt2 = chainer.optimizers.Adam()
opt2.setup(other)
other.cleargrads()
opt2.update(other, x, t)  # creates the states that the file then overwrites
# plait writes Chainer 1.7.2's layout, which has no per-parameter '<path>/t' (Chainer >= 2 added
# it), so Chainer 7 reads it as it reads a 1.7.2 file: not strictly.
serializers.load_npz(d + '/plait_opt.npz', opt2, strict=False)
m = other.predictor.l1.W.update_rule.state['m']
np.savez(d + '/chainer_reads_plait.npz', y=y_other, t=opt2.t, m=m)
"""


class MLP(chainer.Chain):
    def __init__(self):
        super().__init__(l1=L.Linear(6, 8), l2=L.Linear(8, 8), l3=L.Linear(8, 4))

    def __call__(self, x):
        return self.l3(F.relu(self.l2(F.relu(self.l1(x)))))


def test_npz_files_move_both_ways(tmp_path):
    numpy.random.seed(2)
    mine = L.Classifier(MLP())
    x = numpy.random.rand(5, 6).astype("f")
    t = numpy.array([0, 1, 2, 3, 1], "i")
    opt = optimizers.Adam()
    opt.setup(mine)
    for _ in range(2):
        opt.update(mine, Variable(x), Variable(t))
    serializers.save_npz(str(tmp_path / "plait_model.npz"), mine)
    serializers.save_npz(str(tmp_path / "plait_opt.npz"), opt)
    numpy.savez(tmp_path / "plait_x.npz", x=x)
    _run_peer(_PEER_MODELS, tmp_path)

    # A model saved by Chainer loads into the same plait model and predicts the same.
    theirs = L.Classifier(MLP())
    serializers.load_npz(str(tmp_path / "chainer_model.npz"), theirs)
    with numpy.load(tmp_path / "chainer_pred.npz") as f:
        y = theirs.predictor(Variable(f["x"])).data
        numpy.testing.assert_allclose(y, f["y"], rtol=1e-6, atol=1e-7)
        assert (y.argmax(1) == f["y"].argmax(1)).all()
    # Chainer's optimizer state (with its per-parameter counts) loads too.
    opt_theirs = optimizers.Adam()
    opt_theirs.setup(theirs)
    serializers.load_npz(str(tmp_path / "chainer_opt.npz"), opt_theirs)
    assert opt_theirs.t == 3
    assert opt_theirs._states["/predictor/l1/W"]["m"].any()

    # And Chainer read plait's files.
    with numpy.load(tmp_path / "chainer_reads_plait.npz") as f:
        numpy.testing.assert_allclose(f["y"], mine.predictor(Variable(x)).data, rtol=1e-6, atol=1e-7)
        assert int(f["t"]) == 2
        numpy.testing.assert_array_equal(f["m"], opt._states["/predictor/l1/W"]["m"])


_PEER_FUNCTIONS = """
import sys, json, numpy as np, chainer, chainer.functions as F
d = sys.argv[1]
inp = np.load(d + '/inputs.npz')
cases = json.load(open(d + '/cases.json'))
out = {}
for name, spec in cases.items():
    xs = [chainer.Variable(inp[k].copy()) for k in spec['inputs']]
    y = eval(spec['expr'], {'F': F, 'np': np}, {'xs': xs})
    out[name + ':y'] = y.array
    if spec['grad']:
        if y.array.size == 1:
            y.grad = np.ones_like(y.array)
        else:
            y.grad = inp[spec['grad']]
        y.backward()
        for i, x in enumerate(xs):
            if x.array.dtype.kind == 'f':
                out['%s:gx%d' % (name, i)] = x.grad
np.savez(d + '/outputs.npz', **out)
"""


def test_functions_agree_with_chainer(tmp_path):
    rs = numpy.random.RandomState(0)
    inputs = {
        "a": rs.randn(4, 5).astype("f"), "b": rs.randn(4, 5).astype("f"),
        "pos": rs.uniform(0.5, 2, (4, 5)).astype("f"), "W": rs.randn(3, 5).astype("f"),
        "bias": rs.randn(3).astype("f"), "t": numpy.array([0, 4, -1, 2], "i"),
        "t_ok": numpy.array([0, 4, 1, 2], "i"), "m": rs.randn(5, 2).astype("f"),
        "x3": rs.randn(4, 5, 3).astype("f"), "t3": rs.randint(0, 5, (4, 3)).astype("i"),
        "g45": rs.randn(4, 5).astype("f"), "g43": rs.randn(4, 3).astype("f"),
        "g42": rs.randn(4, 2).astype("f"), "g453": rs.randn(4, 5, 3).astype("f"),
        "g4": rs.randn(4).astype("f"), "g5": rs.randn(5).astype("f"),
    }
    cases = {
        "relu": ("F.relu(xs[0])", ["a"], "g45"),
        "sigmoid": ("F.sigmoid(xs[0])", ["a"], "g45"),
        "tanh": ("F.tanh(xs[0])", ["a"], "g45"),
        "softmax": ("F.softmax(xs[0])", ["a"], "g45"),
        "softmax3": ("F.softmax(xs[0])", ["x3"], "g453"),
        "log_softmax": ("F.log_softmax(xs[0])", ["a"], "g45"),
        "leaky_relu": ("F.leaky_relu(xs[0], 0.1)", ["a"], "g45"),
        "linear": ("F.linear(xs[0], xs[1], xs[2])", ["a", "W", "bias"], "g43"),
        "linear_nobias": ("F.linear(xs[0], xs[1])", ["a", "W"], "g43"),
        "sce_ignore": ("F.softmax_cross_entropy(xs[0], xs[1])", ["a", "t"], "scalar"),
        "sce": ("F.softmax_cross_entropy(xs[0], xs[1])", ["a", "t_ok"], "scalar"),
        "sce3": ("F.softmax_cross_entropy(xs[0], xs[1])", ["x3", "t3"], "scalar"),
        "mse": ("F.mean_squared_error(xs[0], xs[1])", ["a", "b"], "scalar"),
        "accuracy": ("F.accuracy(xs[0], xs[1])", ["a", "t_ok"], None),
        "accuracy3": ("F.accuracy(xs[0], xs[1])", ["x3", "t3"], None),
        "sum": ("F.sum(xs[0])", ["a"], "scalar"),
        "sum_axis": ("F.sum(xs[0], axis=1)", ["a"], "g4"),
        "exp": ("F.exp(xs[0])", ["a"], "g45"),
        "log": ("F.log(xs[0])", ["pos"], "g45"),
        "sin": ("F.sin(xs[0])", ["a"], "g45"),
        "cos": ("F.cos(xs[0])", ["a"], "g45"),
        "matmul": ("F.matmul(xs[0], xs[1])", ["a", "m"], "g42"),
        "arith": ("(xs[0] * xs[1] + 2.0 * xs[0] - xs[1] / xs[2]) ** 2 - 1.5 / xs[2] + abs(xs[1]) + 2.0 ** xs[0]", ["a", "b", "pos"], "g45"),
        "pow_vv": ("xs[0] ** xs[1]", ["pos", "b"], "g45"),
        "neg": ("-xs[0]", ["a"], "g45"),
    }
    numpy.savez(tmp_path / "inputs.npz", **inputs)
    spec = {name: {"expr": expr, "inputs": ins, "grad": grad} for name, (expr, ins, grad) in cases.items()}
    (tmp_path / "cases.json").write_text(json.dumps(spec))
    _run_peer(_PEER_FUNCTIONS, tmp_path)
    with numpy.load(tmp_path / "outputs.npz") as theirs:
        for name, (expr, ins, grad) in cases.items():
            xs = [Variable(inputs[k].copy()) for k in ins]
            y = eval(expr, {"F": F, "np": numpy}, {"xs": xs})
            numpy.testing.assert_allclose(y.data, theirs[name + ":y"], rtol=2e-5, atol=2e-6, err_msg=name)
            assert y.data.dtype == theirs[name + ":y"].dtype, name
            if grad:
                if grad != "scalar":
                    y.grad = inputs[grad]
                y.backward()
                for i, x in enumerate(xs):
                    if x.data.dtype.kind == "f":
                        numpy.testing.assert_allclose(x.grad, theirs[f"{name}:gx{i}"], rtol=2e-5, atol=2e-6,
                                                      err_msg=f"{name} gx{i}")


_PEER_OPTIMIZERS = """
import sys, json, numpy as np, chainer
d = sys.argv[1]
inp = np.load(d + '/opt_inputs.npz')
cases = json.load(open(d + '/opt_cases.json'))
out = {}
for name, kwargs in cases.items():
    link = chainer.Link()
    with link.init_scope():
        link.w = chainer.Parameter(inp['w0'].copy())
    opt = getattr(chainer.optimizers, name)(**kwargs)
    opt.setup(link)
    for step in range(3):
        link.w.grad = inp['g%d' % step].copy()
        opt.update()
    out[name] = link.w.array
np.savez(d + '/opt_outputs.npz', **out)
"""


def test_optimizers_agree_with_chainer(tmp_path):
    rs = numpy.random.RandomState(3)
    inputs = {"w0": rs.randn(4, 3).astype("f")}
    for step in range(3):
        inputs[f"g{step}"] = rs.randn(4, 3).astype("f")
    cases = {
        "SGD": {"lr": 0.1}, "MomentumSGD": {"lr": 0.1, "momentum": 0.8},
        "NesterovAG": {"lr": 0.1}, "AdaGrad": {"lr": 0.1}, "AdaDelta": {"rho": 0.9},
        "Adam": {"alpha": 0.01}, "RMSprop": {"lr": 0.01}, "RMSpropGraves": {"lr": 0.01},
    }
    numpy.savez(tmp_path / "opt_inputs.npz", **inputs)
    (tmp_path / "opt_cases.json").write_text(json.dumps(cases))
    _run_peer(_PEER_OPTIMIZERS, tmp_path)
    with numpy.load(tmp_path / "opt_outputs.npz") as theirs:
        for name, kwargs in cases.items():
            link = chainer.Link(w=(4, 3))
            link.w.data[...] = inputs["w0"]
            opt = getattr(optimizers, name)(**kwargs)
            opt.setup(link)
            for step in range(3):
                link.w.grad = inputs[f"g{step}"].copy()
                opt.update()
            numpy.testing.assert_allclose(link.w.data, theirs[name], rtol=1e-5, atol=1e-6, err_msg=name)
