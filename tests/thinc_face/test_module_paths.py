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
    with pytest.raises(NotImplementedError, match="beam"):
        Beam(3, 2)
