"""Every module path and public name of thinc 8.3.14 resolves under plait (`thinc.X` -> `plait.X`)."""
import importlib
import math

import pytest

# The modules of the thinc 8.3.14 package (tests excluded), as `thinc.<name>`.
THINC_MODULES = """
about api compat config initializers loss model mypy optimizers schedules types util
backends backends._cupy_allocators backends._custom_kernels backends._param_server backends.cblas
backends.cupy_ops backends.linalg backends.mps_ops backends.numpy_ops backends.ops
extra extra.search
layers layers.add layers.array_getitem layers.bidirectional layers.cauchysimilarity layers.chain
layers.clipped_linear layers.clone layers.concatenate layers.dish layers.dropout layers.embed
layers.expand_window layers.gelu layers.hard_swish layers.hard_swish_mobilenet layers.hashembed
layers.layernorm layers.linear layers.list2array layers.list2padded layers.list2ragged layers.logistic
layers.lstm layers.map_list layers.maxout layers.mish layers.multisoftmax layers.mxnetwrapper
layers.noop layers.padded2list layers.parametricattention layers.parametricattention_v2
layers.premap_ids layers.pytorchwrapper layers.ragged2list layers.reduce_first layers.reduce_last
layers.reduce_max layers.reduce_mean layers.reduce_sum layers.relu layers.remap_ids layers.residual
layers.resizable layers.siamese layers.sigmoid layers.sigmoid_activation layers.softmax
layers.softmax_activation layers.sparselinear layers.strings2arrays layers.swish
layers.tensorflowwrapper layers.torchscriptwrapper layers.tuplify layers.uniqued layers.with_array
layers.with_array2d layers.with_cpu layers.with_debug layers.with_flatten layers.with_flatten_v2
layers.with_getitem layers.with_list layers.with_nvtx_range layers.with_padded layers.with_ragged
layers.with_reshape layers.with_signpost_interval
shims shims.mxnet shims.pytorch shims.pytorch_grad_scaler shims.shim shims.tensorflow shims.torchscript
""".split()

# thinc.mypy is a mypy plugin: it needs mypy, which is not a dependency of either library.
_NEEDS_MYPY = {"mypy"}


@pytest.mark.parametrize("name", THINC_MODULES)
def test_thinc_module_path_exists(name):
    if name in _NEEDS_MYPY:
        pytest.importorskip("mypy")
    importlib.import_module(f"plait.{name}")


def test_top_level_names():
    import plait

    assert plait.registry is importlib.import_module("plait.config").registry
    assert set(plait.__all__) >= {"registry", "__version__"}


def _public_names(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    return set(names)


@pytest.mark.parametrize("name", [n for n in THINC_MODULES if n not in _NEEDS_MYPY])
def test_public_names_match_thinc(name):
    # Differential: every name that thinc's module exports by __all__ exists in plait's.
    try:
        thinc_module = importlib.import_module(f"thinc.{name}")
    except Exception as err:  # thinc absent, or an optional framework missing for it
        pytest.skip(f"thinc.{name} not importable here: {err}")
    exported = getattr(thinc_module, "__all__", None)
    if exported is None:
        pytest.skip(f"thinc.{name} has no __all__")
    plait_module = importlib.import_module(f"plait.{name}")
    missing = sorted(n for n in exported if not hasattr(plait_module, n))
    assert not missing, f"plait.{name} lacks {missing}"


def test_context_pools_is_a_context_variable_of_dicts():
    from plait.backends import context_pools

    assert isinstance(context_pools.get(), dict)


def test_mps_ops_computes_like_numpy_ops():
    import numpy

    from plait.backends import MPSOps, NumpyOps, get_ops

    ops = get_ops("mps")
    assert isinstance(ops, MPSOps) and ops.name == "mps" and ops.xp is numpy
    X = numpy.linspace(-3, 3, 12, dtype="f").reshape(3, 4)
    numpy.testing.assert_array_equal(ops.relu(X.copy()), NumpyOps().relu(X.copy()))


def test_custom_kernels_module_lists_its_kernels():
    from plait.backends import _custom_kernels

    assert "plait_hash_fwd" in _custom_kernels.KERNELS_LIST
    assert "plait_hash_fwd" in _custom_kernels.KERNELS
    with pytest.raises(ValueError, match="threads_per_block"):
        _custom_kernels.seq2col(None, 1, threads_per_block=0)


def test_extra_search_softmax_and_max_violation():
    from plait.extra.search import Beam, MaxViolation, _softmax

    assert _softmax([]) == []
    probs = _softmax([1.0, None, 3.0])
    assert probs[1] is None
    assert math.isclose(probs[0] + probs[2], 1.0)
    assert math.isclose(probs[2] / probs[0], math.exp(2.0))
    violation = MaxViolation()
    assert violation.cost == 0.0 and violation.p_hist == [] and violation.g_probs == []
    beam = Beam(3, 2)
    assert len(beam) == 1 and beam.probs == [1.0] and beam.histories == [[], []]


def _own_names(module):
    """The functions and classes a module defines itself, plus its __all__."""
    import inspect

    names = set(getattr(module, "__all__", []))
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ == module.__name__:
            names.add(name)
    return names


@pytest.mark.parametrize("name", [n for n in THINC_MODULES if n not in _NEEDS_MYPY])
def test_module_level_functions_and_classes_of_thinc_exist(name):
    # Differential: what each thinc module defines itself (not what it imports) exists in plait's.
    try:
        thinc_module = importlib.import_module(f"thinc.{name}")
    except Exception as err:
        pytest.skip(f"thinc.{name} not importable here: {err}")
    if getattr(thinc_module, "__name__", "").startswith("plait"):
        pytest.skip("thinc is served by plait in this process")
    plait_module = importlib.import_module(f"plait.{name}")
    missing = sorted(n for n in _own_names(thinc_module) if not hasattr(plait_module, n))
    assert not missing, f"plait.{name} lacks {missing}"


def test_module_level_lstm_gates_backprop_numerically():
    import numpy

    from plait.backends.ops import backprop_lstm_gates, dsigmoid, dtanh, sigmoid

    rng = numpy.random.default_rng(0)
    n, nO = 3, 4
    A = rng.normal(size=(n, 4 * nO))  # gate pre-activations: forget, input, output, candidate
    C2 = rng.normal(size=(n, nO))
    dY = rng.normal(size=(n, nO))
    dC = rng.normal(size=(n, nO))

    def step(A):
        f, i, o = (sigmoid(A[:, k * nO:(k + 1) * nO]) for k in range(3))
        c = numpy.tanh(A[:, 3 * nO:])
        C3 = f * C2 + i * c
        return numpy.concatenate((sigmoid(A[:, :3 * nO]), c), axis=1), C3, numpy.tanh(C3) * o

    G, C3, _ = step(A)
    dC_before = dC.copy()
    dA, dC2 = backprop_lstm_gates(dY, dC, G, C3, C2)
    assert numpy.array_equal(dC, dC_before)

    def loss(A, C2_=C2):
        _, C3_, Y_ = step(A)
        return float((Y_ * dY).sum() + (C3_ * dC).sum())

    eps = 1e-6
    numeric = numpy.zeros_like(A)
    for idx in numpy.ndindex(A.shape):
        Ap, Am = A.copy(), A.copy()
        Ap[idx] += eps
        Am[idx] -= eps
        numeric[idx] = (loss(Ap) - loss(Am)) / (2 * eps)
    numpy.testing.assert_allclose(dA, numeric, rtol=1e-5, atol=1e-7)
    G_f = G[:, :nO]
    numpy.testing.assert_allclose(dC2, (dC + dY * G[:, 2 * nO:3 * nO] * dtanh(numpy.tanh(C3))) * G_f, rtol=1e-10)
    assert numpy.allclose(dsigmoid(sigmoid(A)), sigmoid(A) * (1 - sigmoid(A)))


def test_module_level_lstm_functions_compute_what_the_ops_compute():
    import numpy

    from plait.backends import NumpyOps
    from plait.backends._lstm import _n_params
    from plait.backends.ops import backprop_lstm, lstm_forward_training

    rng = numpy.random.default_rng(1)
    depth, dirs, nO, nI = 2, 2, 3, 2
    params = (rng.normal(size=_n_params(depth, dirs, nO, nI)) * 0.3).astype("f")
    H0, C0 = (rng.normal(size=(depth, dirs, nO)).astype("f") for _ in range(2))
    X = rng.normal(size=(5, nI)).astype("f")
    lengths = numpy.array([2, 2, 1], dtype="int32")
    Y, state = lstm_forward_training(params, C0, H0, X, lengths)
    Y_ops, state_ops = NumpyOps().lstm_forward_training(params, H0, C0, X, lengths)
    numpy.testing.assert_array_equal(Y, Y_ops)
    dY = rng.normal(size=Y.shape).astype("f")
    for got, want in zip(backprop_lstm(dY, lengths, params, state), NumpyOps().backprop_lstm(dY, lengths, params, state_ops)):
        numpy.testing.assert_array_equal(got, want)
