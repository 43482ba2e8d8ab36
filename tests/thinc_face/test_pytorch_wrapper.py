"""PyTorchWrapper (v1-v3), PyTorchShim, PyTorchGradScaler, TorchScriptWrapper and PyTorchLSTM:
training parity with torch, serialization (in a fresh process, and refusing pickled code),
mixed precision on the CPU, averages, and numerical gradient checks of every backward."""
from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import textwrap

import numpy
import pytest

torch = pytest.importorskip("torch")

import srsly  # noqa: E402

from plait.api import (  # noqa: E402
    LSTM,
    SGD,
    Adam,
    ArgsKwargs,
    Linear,
    PyTorchGradScaler,
    PyTorchLSTM,
    PyTorchRNNWrapper,
    PyTorchShim,
    PyTorchWrapper,
    PyTorchWrapper_v2,
    PyTorchWrapper_v3,
    TorchScriptShim,
    TorchScriptWrapper_v1,
    chain,
    pytorch_to_torchscript_wrapper,
    torch2xp,
    with_padded,
    xp2torch,
)
from plait.backends import NumpyOps  # noqa: E402
from plait.shims.pytorch import default_deserialize_torch_model, default_serialize_torch_model  # noqa: E402

HAS_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs PyTorch with a CUDA device")


def _mlp(seed=0, nI=4, nH=8, nO=3, dtype=torch.float32):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(nI, nH), torch.nn.ReLU(), torch.nn.Linear(nH, nO)).to(dtype)


def _data(nB=10, nI=4, nO=3, dtype="f", seed=0):
    rng = numpy.random.default_rng(seed)
    return rng.normal(size=(nB, nI)).astype(dtype), rng.normal(size=(nB, nO)).astype(dtype)


def _numeric_grad(f, X, eps=1e-6, n=6, seed=0):
    """(index, central difference) of f at n entries of the float64 array X."""
    rng = numpy.random.default_rng(seed)
    flat = X.reshape(-1)
    out = []
    for i in rng.choice(flat.size, size=min(n, flat.size), replace=False):
        orig = flat[i]
        flat[i] = orig + eps
        up = f()
        flat[i] = orig - eps
        down = f()
        flat[i] = orig
        out.append((i, (up - down) / (2 * eps)))
    return out


# --- training parity -----------------------------------------------------------------------


def test_training_in_a_chain_matches_torch_sgd():
    """50 SGD steps of chain(PyTorchWrapper_v2(mlp), plait Linear) with plait's optimizer give the
    weights of the same network trained in torch with torch.optim.SGD on the same loss."""
    X, T = _data()
    ours_torch = _mlp(seed=0)
    head = Linear(2, 3)
    model = chain(PyTorchWrapper_v2(ours_torch), head)
    model.initialize(X=X, Y=T[:, :2])
    # The reference: the same MLP and a torch Linear holding the plait head's weights.
    ref = torch.nn.Sequential(_mlp(seed=0), torch.nn.Linear(3, 2))
    with torch.no_grad():
        ref[1].weight.copy_(torch.from_numpy(head.get_param("W")))
        ref[1].bias.copy_(torch.from_numpy(head.get_param("b")))
    T = T[:, :2]
    # L2 and clipping off: plain W -= lr * dW, the rule of torch.optim.SGD without momentum.
    optimizer = SGD(0.05, L2=0.0, grad_clip=0.0)
    torch_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for _ in range(50):
        Y, backprop = model.begin_update(X)
        backprop((Y - T) / len(X))
        model.finish_update(optimizer)
        torch_opt.zero_grad()
        out = ref(torch.from_numpy(X))
        ((out - torch.from_numpy(T)) ** 2 / (2 * len(X))).sum().backward()
        torch_opt.step()
    for (name, ours), theirs in zip(ours_torch.state_dict().items(), ref[0].state_dict().values()):
        numpy.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-7, err_msg=name)
    numpy.testing.assert_allclose(head.get_param("W"), ref[1].weight.detach().numpy(), rtol=1e-5, atol=1e-7)
    numpy.testing.assert_allclose(head.get_param("b"), ref[1].bias.detach().numpy(), rtol=1e-5, atol=1e-7)
    # The weights moved, and the optimizer keys torch's params by (shim id, param name).
    assert not torch.equal(ours_torch[0].weight, _mlp(seed=0)[0].weight)
    shim_id = model.layers[0].shims[0].id
    assert (shim_id, "0.weight") in optimizer.nr_update and optimizer.nr_update[(shim_id, "0.weight")] == 50


def test_finish_update_keeps_torch_parameter_objects():
    """The update is written into the parameters' own storage, so torch-side references stay valid."""
    module = _mlp()
    params_before = [(p, p.data_ptr()) for p in module.parameters()]
    model = PyTorchWrapper(module)
    X, T = _data()
    for optimizer in (SGD(0.1), Adam(0.01)):
        Y, backprop = model.begin_update(X)
        backprop(Y - T)
        model.finish_update(optimizer)
    assert [(p, p.data_ptr()) for p in module.parameters()] == params_before
    assert all(p.grad is None or not p.grad.any() for p in module.parameters())


def test_predict_restores_the_train_mode_flag():
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    model = PyTorchWrapper(module)
    X, _ = _data(nO=4)
    module.eval()
    numpy.testing.assert_array_equal(model.predict(X), model.predict(X))  # dropout off
    assert not module.training
    module.train()
    model.predict(X)
    assert module.training


# --- backward: numerical gradients ---------------------------------------------------------


def test_wrapper_input_gradient_numerically():
    X, _ = _data(nB=3, dtype="float64")
    model = PyTorchWrapper(_mlp(dtype=torch.float64))
    R = numpy.random.default_rng(1).normal(size=(3, 3))
    Y, backprop = model.begin_update(X)
    dX = backprop(R)
    assert dX.dtype == numpy.float64 and dX.shape == X.shape
    for i, numeric in _numeric_grad(lambda: float((model.predict(X) * R).sum()), X):
        assert abs(dX.reshape(-1)[i] - numeric) <= 1e-6 * max(1.0, abs(numeric))


def test_wrapper_param_gradient_numerically():
    X, _ = _data(nB=3, dtype="float64")
    module = _mlp(dtype=torch.float64)
    model = PyTorchWrapper(module)
    R = numpy.random.default_rng(1).normal(size=(3, 3))
    Y, backprop = model.begin_update(X)
    backprop(R)
    weight = torch2xp(module[0].weight)  # a view: perturbing it perturbs the module
    analytic = torch2xp(module[0].weight.grad).copy()
    for i, numeric in _numeric_grad(lambda: float((model.predict(X) * R).sum()), weight):
        assert abs(analytic.reshape(-1)[i] - numeric) <= 1e-6 * max(1.0, abs(numeric))


class _TwoInTwoOut(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2).double()

    def forward(self, a, *, b):
        return self.lin(a) * b.sum(), torch.tanh(a)


def test_kwargs_inputs_and_tuple_outputs_backprop_numerically():
    rng = numpy.random.default_rng(2)
    a = rng.normal(size=(4, 3))
    b = rng.normal(size=(2,))
    model = PyTorchWrapper(_TwoInTwoOut())
    X = ArgsKwargs(args=(a,), kwargs={"b": b})
    (Y1, Y2), backprop = model.begin_update(X)
    R1, R2 = rng.normal(size=Y1.shape), rng.normal(size=Y2.shape)
    dX = backprop((R1, R2))
    assert isinstance(dX, ArgsKwargs) and list(dX.kwargs) == ["b"]

    def loss():
        y1, y2 = model.predict(X)
        return float((y1 * R1).sum() + (y2 * R2).sum())

    for arr, grad in ((a, dX.args[0]), (b, dX.kwargs["b"])):
        for i, numeric in _numeric_grad(loss, arr):
            assert abs(grad.reshape(-1)[i] - numeric) <= 1e-6 * max(1.0, abs(numeric))


def test_integer_inputs_pass_without_gradients():
    class Lookup(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(10, 3)

        def forward(self, ids):
            return self.emb(ids)

    model = PyTorchWrapper(Lookup())
    ids = numpy.array([1, 2, 9], dtype="int64")
    Y, backprop = model.begin_update(ids)
    assert Y.shape == (3, 3)
    assert backprop(numpy.ones_like(Y)) is None
    model.finish_update(SGD(0.1))


# --- serialization -------------------------------------------------------------------------


_FRESH_PROCESS = textwrap.dedent(
    """
    import sys, numpy, torch
    from plait.api import PyTorchWrapper_v2, Linear, chain
    torch.manual_seed(12345)  # different random weights, to be overwritten
    module = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    model = chain(PyTorchWrapper_v2(module), Linear(2, 3))
    model.from_bytes(open(sys.argv[1], "rb").read())
    numpy.save(sys.argv[3], model.predict(numpy.load(sys.argv[2])))
    """
)


def test_bytes_round_trip_in_a_fresh_process(tmp_path):
    X, T = _data()
    model = chain(PyTorchWrapper_v2(_mlp()), Linear(2, 3))
    model.initialize(X=X, Y=T[:, :2])
    optimizer = Adam(0.01)
    for _ in range(5):
        Y, backprop = model.begin_update(X)
        backprop(Y - T[:, :2])
        model.finish_update(optimizer)
    expected = model.predict(X)
    (tmp_path / "model.bin").write_bytes(model.to_bytes())
    numpy.save(tmp_path / "X.npy", X)
    out = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS, str(tmp_path / "model.bin"), str(tmp_path / "X.npy"),
         str(tmp_path / "Y.npy")],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    numpy.testing.assert_array_equal(numpy.load(tmp_path / "Y.npy"), expected)


def test_to_disk_from_disk_and_v3_custom_serializers(tmp_path):
    calls = []

    def serialize(module):
        calls.append("save")
        return default_serialize_torch_model(module)

    def deserialize(module, data, device):
        calls.append(("load", device.type))
        return default_deserialize_torch_model(module, data, device)

    X, _ = _data()
    model = PyTorchWrapper_v3(_mlp(seed=1), serialize_model=serialize, deserialize_model=deserialize)
    model.to_disk(tmp_path / "m")
    other = PyTorchWrapper_v3(_mlp(seed=2), serialize_model=serialize, deserialize_model=deserialize)
    assert not numpy.array_equal(other.predict(X), model.predict(X))
    other.from_disk(tmp_path / "m")
    numpy.testing.assert_array_equal(other.predict(X), model.predict(X))
    assert calls == ["save", ("load", "cpu")]


def test_from_bytes_with_another_architecture_fails_clearly():
    data = PyTorchWrapper(torch.nn.Linear(4, 3)).to_bytes()
    with pytest.raises(ValueError, match="does not fit the wrapped Linear"):
        PyTorchWrapper(torch.nn.Linear(5, 3)).from_bytes(data)
    with pytest.raises(ValueError, match="not valid msgpack|expected a message"):
        PyTorchShim(torch.nn.Linear(4, 3)).from_bytes(b"\xc1 not msgpack")


class _RunsCode:
    """Unpickling this calls open(path, "w"): proof of code execution if the file appears."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("fmt", ["torch.save", "raw pickle"])
def test_loading_refuses_pickled_code(tmp_path, fmt):
    marker = str(tmp_path / "pwned")
    payload = {"weight": _RunsCode(marker), "bias": torch.zeros(3)}
    if fmt == "torch.save":
        buf = io.BytesIO()
        torch.save(payload, buf)
        evil = buf.getvalue()
    else:
        evil = pickle.dumps(payload, protocol=2)
    # Sanity: a plain unpickler would run it.
    pickle.loads(pickle.dumps(_RunsCode(str(tmp_path / "control"))))
    assert os.path.exists(tmp_path / "control")
    model = PyTorchWrapper(torch.nn.Linear(4, 3))
    with pytest.raises(ValueError, match="weights_only=True"):
        model.shims[0].from_bytes(srsly.msgpack_dumps({"config": None, "state": evil}))
    with pytest.raises(ValueError, match="weights_only=True"):
        default_deserialize_torch_model(torch.nn.Linear(4, 3), evil, torch.device("cpu"))
    assert not os.path.exists(marker)


# --- averages, copies, devices ---------------------------------------------------------------


def test_use_params_with_optimizer_averages():
    X, T = _data()
    module = _mlp()
    model = PyTorchWrapper(module)
    optimizer = SGD(0.05, L2=0.0, grad_clip=0.0, use_averages=True)
    for _ in range(10):
        Y, backprop = model.begin_update(X)
        backprop(Y - T)
        model.finish_update(optimizer)
    trained = {k: v.clone() for k, v in module.state_dict().items()}
    shim_id = model.shims[0].id
    averaged = _mlp()
    averaged.load_state_dict({name: torch.from_numpy(optimizer.averages[(shim_id, name)]) for name in trained})
    with model.use_params(optimizer.averages):
        Y_avg = model.predict(X)
    numpy.testing.assert_allclose(Y_avg, averaged(torch.from_numpy(X)).detach().numpy(), rtol=1e-6)
    assert not numpy.allclose(Y_avg, model.predict(X))
    for name, value in module.state_dict().items():
        assert torch.equal(value, trained[name]), name
    # Thinc's key form, "pytorch_<shim id>_<name>", works too; unrelated keys are ignored.
    thinc_keys = {f"pytorch_{shim_id}_{name}": optimizer.averages[(shim_id, name)] for name in trained}
    thinc_keys[(shim_id + 1000, "0.weight")] = numpy.zeros((8, 4), dtype="f")
    with model.use_params(thinc_keys):
        numpy.testing.assert_array_equal(model.predict(X), Y_avg)


def test_copy_is_independent_and_has_its_own_id():
    X, T = _data()
    model = PyTorchWrapper(_mlp())
    clone = model.copy()
    assert clone.shims[0].id != model.shims[0].id
    numpy.testing.assert_array_equal(clone.predict(X), model.predict(X))
    Y, backprop = clone.begin_update(X)
    backprop(Y - T)
    clone.finish_update(SGD(0.1))
    assert not numpy.allclose(clone.predict(X), model.predict(X))


def test_to_device():
    model = PyTorchWrapper(_mlp())
    model.to_cpu()
    assert model.shims[0].device.type == "cpu"
    with pytest.raises(ValueError, match="'cpu' or 'gpu'"):
        model.shims[0].to_device("tpu", 0)


# --- mixed precision and the grad scaler ------------------------------------------------------


def test_mixed_precision_on_cpu_runs_bfloat16():
    X, T = _data()
    module = _mlp()
    reference = _mlp()
    inner_dtypes = []
    module[0].register_forward_hook(lambda mod, inp, out: inner_dtypes.append(out.dtype))
    model = PyTorchWrapper_v2(module, mixed_precision=True)
    assert not model.shims[0]._grad_scaler._enabled  # bfloat16 needs no loss scaling
    Y, backprop = model.begin_update(X)
    assert inner_dtypes == [torch.bfloat16]
    assert Y.dtype == numpy.float32  # bfloat16 outputs come back as float32
    Xt = torch.from_numpy(X).requires_grad_()
    Y_ref = reference(Xt)
    numpy.testing.assert_allclose(Y, Y_ref.detach().numpy(), rtol=5e-2, atol=5e-2)
    dY = (Y - T) / len(X)
    dX = backprop(dY)
    Y_ref.backward(torch.from_numpy(dY))
    assert dX.dtype == numpy.float32 and numpy.isfinite(dX).all()
    # bfloat16 keeps ~3 significant digits; the float32 gradient is checked numerically above.
    numpy.testing.assert_allclose(dX, Xt.grad.numpy(), rtol=5e-2, atol=2e-2)
    assert module[0].weight.grad.dtype == torch.float32
    before = module[0].weight.detach().clone()
    model.finish_update(SGD(0.1))
    assert not torch.equal(before, module[0].weight)
    assert inner_dtypes[-1] == torch.bfloat16
    assert model.predict(X).dtype == numpy.float32


def test_grad_scaler_unscale_detects_infinities_and_updates_scale():
    scaler = PyTorchGradScaler(enabled=True, init_scale=16.0, growth_interval=2)
    grads = [torch.tensor([16.0, 32.0]), torch.tensor([8.0], dtype=torch.float64)]
    assert scaler.unscale(grads) is False
    assert grads[0].tolist() == [1.0, 2.0] and grads[1].tolist() == [0.5]
    assert scaler.unscale([torch.tensor([1.0, float("inf")])]) is True
    assert scaler.found_inf
    scaler.update()  # overflow: back off to 8
    assert not scaler.found_inf
    probe = [torch.tensor([8.0])]
    scaler.unscale(probe)
    assert probe[0].item() == 1.0
    scaler.update()
    scaler.update()  # two clean steps: grow to 16
    probe = [torch.tensor([16.0])]
    assert scaler.unscale(probe) is False and probe[0].item() == 1.0
    assert scaler.unscale([torch.tensor([float("nan")])]) is True


def test_grad_scaler_disabled_passes_through_and_cpu_scaling_is_refused():
    off = PyTorchGradScaler(enabled=False)
    t = torch.tensor([1.0])
    assert off.scale(t) is t and off.unscale([torch.tensor([float("inf")])]) is False
    on = PyTorchGradScaler(enabled=True)
    with pytest.raises(ValueError, match="CUDA"):
        on.scale([torch.tensor([1.0])])
    with pytest.raises(ValueError, match="init_scale"):
        PyTorchGradScaler(init_scale=0.0)
    with pytest.raises(ValueError, match="growth_interval"):
        PyTorchGradScaler(growth_interval=0)


@needs_cuda
def test_grad_scaler_scales_cuda_tensors():
    scaler = PyTorchGradScaler(enabled=True, init_scale=2.0**4)
    scaler.to_("cuda")
    t = torch.tensor([1.0, 2.0], device="cuda")
    assert scaler.scale(t).tolist() == [16.0, 32.0]
    assert [x.tolist() for x in scaler.scale((t, t))] == [[16.0, 32.0]] * 2
    for bad in ("bogus", 42, [t, 1.0]):
        with pytest.raises(ValueError):
            scaler.scale(bad)


class _AnyDeviceScaler(PyTorchGradScaler):
    """A scaler that also scales CPU tensors, to exercise the shim's loss-scaling path here."""

    def scale(self, tensors, inplace=False):
        if not self._enabled:
            return tensors
        if isinstance(tensors, torch.Tensor):
            return tensors.mul_(self._scale) if inplace else tensors * self._scale
        return [t.mul_(self._scale) if inplace else t * self._scale for t in tensors]


def test_shim_scaling_gives_unscaled_gradients_and_skips_overflowing_steps():
    X, T = _data()
    plain, scaled = _mlp(), _mlp()
    model = PyTorchWrapper_v2(plain)
    scaled_model = PyTorchWrapper_v2(scaled, grad_scaler=_AnyDeviceScaler(enabled=True, init_scale=2.0**10))
    # Two backprops before one update: the gradients add up, each unscaled once.
    for _ in range(2):
        for m in (model, scaled_model):
            Y, backprop = m.begin_update(X)
            dY = (Y - T) / len(X)
            dX = backprop(dY)
            assert numpy.isfinite(dX).all()
    for p, q in zip(plain.parameters(), scaled.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-6, atol=1e-7)
    model.finish_update(SGD(0.1))
    scaled_model.finish_update(SGD(0.1))
    numpy.testing.assert_allclose(scaled_model.predict(X), model.predict(X), rtol=1e-6, atol=1e-7)
    # An overflow: the input gradient comes back zeroed, the step is skipped, the scale halves.
    shim = scaled_model.shims[0]
    shim._grad_scaler = _AnyDeviceScaler(enabled=True, init_scale=2.0**127)
    before = {k: v.clone() for k, v in scaled.state_dict().items()}
    Y, backprop = scaled_model.begin_update(X)
    caller_dY = numpy.full_like(Y, 1e3)
    dX = backprop(caller_dY)
    assert (caller_dY == 1e3).all()  # scaling never writes into the caller's gradient
    assert shim._grad_scaler.found_inf and not dX.any()
    scaled_model.finish_update(SGD(0.1))
    for k, v in scaled.state_dict().items():
        assert torch.equal(v, before[k]), k
    probe = [torch.tensor([2.0**126])]
    shim._grad_scaler.unscale(probe)
    assert probe[0].item() == 1.0


# --- TorchScript ------------------------------------------------------------------------------


def test_torchscript_round_trip_and_training():
    X, T = _data()
    model = PyTorchWrapper_v2(_mlp())
    scripted = pytorch_to_torchscript_wrapper(model)
    assert scripted.name == "pytorch_script" and isinstance(scripted.shims[0], TorchScriptShim)
    before = model.predict(X)
    numpy.testing.assert_allclose(scripted.predict(X), before, rtol=1e-6)
    Y, backprop = scripted.begin_update(X)
    backprop(Y - T)
    scripted.finish_update(SGD(0.1))
    expected = scripted.predict(X)
    assert not numpy.allclose(expected, before)
    # torch.jit.script shares the module's parameters, so the PyTorchWrapper sees the update too.
    numpy.testing.assert_allclose(model.predict(X), expected, rtol=1e-6)
    loaded = TorchScriptWrapper_v1().from_bytes(scripted.to_bytes())
    numpy.testing.assert_array_equal(loaded.predict(X), expected)


def test_torchscript_and_wrapper_reject_wrong_kinds():
    with pytest.raises(TypeError, match="ScriptModule"):
        TorchScriptShim(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="torch.nn.Module"):
        PyTorchWrapper(object())
    with pytest.raises(TypeError, match="PyTorchGradScaler"):
        PyTorchWrapper_v2(torch.nn.Linear(2, 2), grad_scaler="yes")
    with pytest.raises(ValueError, match="PyTorchShim"):
        pytorch_to_torchscript_wrapper(Linear(2, 2))
    with pytest.raises(ValueError, match="no PyTorch module is wrapped"):
        TorchScriptWrapper_v1().predict(numpy.zeros((1, 2), dtype="f"))
    with pytest.raises(TypeError, match="Padded"):
        PyTorchRNNWrapper(torch.nn.LSTM(2, 2)).predict(numpy.zeros((3, 2), dtype="f"))


# --- PyTorchLSTM -------------------------------------------------------------------------------


def _load_torch_lstm_into_plait(module, model, depth, bi):
    """Copy torch.nn.LSTM weights into plait's LSTM: gate blocks (i, f, g, o) -> (f, i, o, g)."""
    state = module.state_dict()
    blocks = []
    for layer in range(depth):
        for suffix in ("", "_reverse")[: 1 + int(bi)]:
            for kind in ("ih", "hh"):
                for part in ("weight", "bias"):
                    value = state[f"{part}_{kind}_l{layer}{suffix}"].numpy()
                    nH = value.shape[0] // 4
                    blocks += [value[g * nH : (g + 1) * nH] for g in (1, 0, 3, 2)]
    model.set_param("LSTM", numpy.concatenate([b.ravel() for b in blocks]).astype("f"))


@pytest.mark.parametrize(
    "bi,depth,lengths",
    [(False, 1, [5, 3, 2]), (False, 2, [4, 1]), (True, 1, [4, 4]), (True, 2, [3, 3, 3])],
)
def test_pytorch_lstm_matches_plait_lstm(bi, depth, lengths):
    """Same weights, same outputs and input gradients as plait's LSTM (where the padding cannot
    matter: left-to-right only, or sequences of one length)."""
    nO, nI = 6, 4
    rng = numpy.random.default_rng(3)
    Xs = [rng.normal(size=(n, nI)).astype("f") for n in lengths]
    theirs = PyTorchLSTM(nO, nI, bi=bi, depth=depth).initialize(X=Xs)
    lstm = LSTM(nO, nI, bi=bi, depth=depth)
    lstm.initialize(X=NumpyOps().list2padded(Xs))
    _load_torch_lstm_into_plait(theirs.layers[0].shims[0]._model, lstm, depth, bi)
    ours = with_padded(lstm)
    Y1, backprop1 = theirs.begin_update(Xs)
    Y2, backprop2 = ours.begin_update(Xs)
    assert [y.shape for y in Y1] == [(n, nO) for n in lengths]
    for a, b in zip(Y1, Y2):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    dYs = [rng.normal(size=y.shape).astype("f") for y in Y1]
    dX1, dX2 = backprop1(dYs), backprop2(dYs)
    assert [d.shape for d in dX1] == [x.shape for x in Xs]
    for a, b in zip(dX1, dX2):
        numpy.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_pytorch_lstm_gradients_numerically():
    rng = numpy.random.default_rng(4)
    Xs = [rng.normal(size=(n, 3)) for n in (4, 2)]
    model = PyTorchLSTM(4, 3, bi=True)
    model.layers[0].shims[0]._model.double()
    Rs = [rng.normal(size=(n, 4)) for n in (4, 2)]
    Ys, backprop = model.begin_update(Xs)
    dXs = backprop(Rs)
    module = model.layers[0].shims[0]._model
    weight = torch2xp(module.weight_hh_l0_reverse)
    dW = torch2xp(module.weight_hh_l0_reverse.grad).copy()

    def loss():
        return float(sum((y * r).sum() for y, r in zip(model.predict(Xs), Rs)))

    for arr, grad in ((Xs[0], dXs[0]), (Xs[1], dXs[1]), (weight, dW)):
        for i, numeric in _numeric_grad(loss, arr):
            assert abs(grad.reshape(-1)[i] - numeric) <= 1e-6 * max(1.0, abs(numeric))


def test_pytorch_lstm_bad_args():
    assert PyTorchLSTM(4, 3, depth=0).name == "noop"
    with pytest.raises(ValueError, match="nO must be even"):
        PyTorchLSTM(5, 3, bi=True)


# --- conversions ---------------------------------------------------------------------------------


def test_xp2torch_and_torch2xp_share_memory():
    X = numpy.zeros((2, 3), dtype="f")
    t = xp2torch(X)
    X[0, 0] = 5.0
    assert t[0, 0].item() == 5.0
    back = torch2xp(t)
    t[1, 1] = 7.0
    assert back[1, 1] == 7.0 and numpy.shares_memory(back, X)
    # Layouts torch cannot view are copied, not refused.
    assert xp2torch(X[::-1]).tolist() == X[::-1].tolist()
    with pytest.raises(TypeError, match="bfloat16"):
        torch2xp(torch.zeros(2, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="requires_grad=True needs a float array"):
        xp2torch(numpy.zeros(2, dtype="i"), requires_grad=True)


# --- differential: thinc 8.3 ---------------------------------------------------------------------


def test_thinc_and_plait_train_and_load_each_other():
    """The same module trained by thinc's PyTorchWrapper and by plait's ends with the same weights,
    and each loads the other's bytes."""
    thinc_api = pytest.importorskip("thinc.api")
    X, T = _data()
    ours_module, theirs_module = _mlp(), _mlp()
    ours = PyTorchWrapper(ours_module)
    theirs = thinc_api.PyTorchWrapper(theirs_module)
    ours_opt = SGD(0.05, L2=0.0, grad_clip=0.0)
    theirs_opt = thinc_api.SGD(0.05, L2=0.0, grad_clip=0.0)
    for _ in range(20):
        for model, opt in ((ours, ours_opt), (theirs, theirs_opt)):
            Y, backprop = model.begin_update(X)
            backprop((Y - T) / len(X))
            model.finish_update(opt)
    numpy.testing.assert_allclose(ours.predict(X), theirs.predict(X), rtol=1e-5, atol=1e-7)
    fresh = PyTorchWrapper(_mlp(seed=9)).from_bytes(theirs.to_bytes())
    numpy.testing.assert_array_equal(fresh.predict(X), theirs.predict(X))
    fresh_theirs = thinc_api.PyTorchWrapper(_mlp(seed=9)).from_bytes(ours.to_bytes())
    numpy.testing.assert_array_equal(fresh_theirs.predict(X), ours.predict(X))


def test_pytorch_lstm_matches_thinc_with_padding():
    """Thinc's PyTorchLSTM runs the RNN over the padding; plait's does the same, so a
    bidirectional LSTM over sequences of different lengths agrees with thinc's."""
    thinc_api = pytest.importorskip("thinc.api")
    rng = numpy.random.default_rng(5)
    Xs = [rng.normal(size=(n, 3)).astype("f") for n in (5, 2, 3)]
    ours = PyTorchLSTM(4, 3, bi=True, depth=2)
    theirs = thinc_api.PyTorchLSTM(4, 3, bi=True, depth=2)
    theirs.layers[0].shims[0]._model.load_state_dict(ours.layers[0].shims[0]._model.state_dict())
    for a, b in zip(ours.predict(Xs), theirs.predict(Xs)):
        numpy.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
