"""plait.api and plait.layers offer every public name of thinc 8.3's thinc.api and thinc.layers."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import plait.api
import plait.layers

# thinc 8.3.14's thinc.api.__all__ and thinc.layers.__all__ (deduplicated), so this test
# runs without thinc installed; test_lists_match_installed_thinc keeps them honest.
THINC_API_ALL = (
    "Adam", "ArgsKwargs", "CategoricalCrossentropy", "CauchySimilarity", "ClippedLinear", "Config",
    "ConfigValidationError", "CosineDistance", "CupyOps", "DataValidationError", "Dish", "Dropout",
    "Embed", "Gelu", "HardSigmoid", "HardSwish", "HardSwishMobilenet", "HardTanh", "HashEmbed",
    "L2Distance", "LSTM", "LayerNorm", "Linear", "Logistic", "MPSOps", "MXNetShim", "MXNetWrapper",
    "Maxout", "Mish", "Model", "MultiSoftmax", "NumpyOps", "Ops", "Optimizer", "Padded",
    "ParametricAttention", "ParametricAttention_v2", "PyTorchGradScaler", "PyTorchLSTM",
    "PyTorchRNNWrapper", "PyTorchShim", "PyTorchWrapper", "PyTorchWrapper_v2", "PyTorchWrapper_v3",
    "RAdam", "Ragged", "Relu", "ReluK", "SGD", "SequenceCategoricalCrossentropy", "Shim", "Sigmoid",
    "Softmax", "Softmax_v2", "SparseLinear", "SparseLinear_v2", "Swish", "TensorFlowShim",
    "TensorFlowWrapper", "TorchScriptShim", "TorchScriptWrapper_v1", "Unserializable", "add",
    "array_getitem", "bidirectional", "chain", "change_attr_values", "clone", "compounding",
    "concatenate", "configure_normal_init", "constant", "constant_then", "cyclic_triangular",
    "data_validation", "decaying", "deserialize_attr", "enable_mxnet", "enable_tensorflow",
    "expand_window", "fix_random_seed", "get_array_module", "get_current_ops", "get_ops",
    "get_torch_default_device", "get_width", "glorot_uniform_init", "has_cupy", "is_cupy_array",
    "keras_model_fns", "keras_subclass", "list2array", "list2padded", "list2ragged", "map_list",
    "maybe_handshake_model", "mxnet2xp", "noop", "normal_init", "padded2list", "prefer_gpu",
    "premap_ids", "pytorch_to_torchscript_wrapper", "ragged2list", "reduce_first", "reduce_last",
    "reduce_max", "reduce_mean", "reduce_sum", "registry", "remap_ids", "remap_ids_v2",
    "require_cpu", "require_gpu", "residual", "resizable", "serialize_attr", "set_active_gpu",
    "set_current_ops", "set_dropout_rate", "set_gpu_allocator", "siamese", "sigmoid_activation",
    "slanted_triangular", "softmax_activation", "strings2arrays", "tensorflow2xp", "to_categorical",
    "to_numpy", "torch2xp", "tuplify", "uniform_init", "uniqued", "use_ops",
    "use_pytorch_for_gpu_memory", "use_tensorflow_for_gpu_memory", "warmup_linear", "with_array",
    "with_array2d", "with_cpu", "with_debug", "with_flatten", "with_flatten_v2", "with_getitem",
    "with_list", "with_nvtx_range", "with_padded", "with_ragged", "with_reshape",
    "with_signpost_interval", "wrap_model_recursive", "xp2mxnet", "xp2tensorflow", "xp2torch",
    "zero_init",
)

THINC_LAYERS_ALL = (
    "CauchySimilarity", "ClippedLinear", "Dish", "Dropout", "Embed", "Gelu", "HardSigmoid",
    "HardSwish", "HardSwishMobilenet", "HardTanh", "HashEmbed", "LSTM", "LayerNorm", "Linear",
    "Logistic", "MXNetWrapper", "Maxout", "Mish", "MultiSoftmax", "ParametricAttention",
    "ParametricAttention_v2", "PyTorchLSTM", "PyTorchRNNWrapper", "PyTorchWrapper",
    "PyTorchWrapper_v2", "PyTorchWrapper_v3", "Relu", "ReluK", "Sigmoid", "Softmax", "Softmax_v2",
    "SparseLinear", "SparseLinear_v2", "Swish", "TensorFlowWrapper", "TorchScriptWrapper_v1", "add",
    "array_getitem", "bidirectional", "chain", "clone", "concatenate", "expand_window",
    "keras_subclass", "list2array", "list2padded", "list2ragged", "map_list", "noop", "padded2list",
    "premap_ids", "pytorch_to_torchscript_wrapper", "ragged2list", "reduce_first", "reduce_last",
    "reduce_max", "reduce_mean", "reduce_sum", "remap_ids", "remap_ids_v2", "residual", "resizable",
    "siamese", "sigmoid_activation", "softmax_activation", "strings2arrays", "tuplify", "uniqued",
    "with_array", "with_array2d", "with_cpu", "with_debug", "with_flatten", "with_flatten_v2",
    "with_getitem", "with_list", "with_nvtx_range", "with_padded", "with_ragged", "with_reshape",
    "with_signpost_interval",
)


def test_api_all_has_every_thinc_api_name():
    missing = set(THINC_API_ALL) - set(plait.api.__all__)
    assert not missing, f"plait.api.__all__ lacks {sorted(missing)}"
    assert set(plait.api.__all__) == set(THINC_API_ALL), sorted(set(plait.api.__all__) - set(THINC_API_ALL))
    for name in plait.api.__all__:
        assert hasattr(plait.api, name), name


def test_api_file_imports_exactly_what_all_lists():
    tree = ast.parse(Path(plait.api.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            imported.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(alias.asname or alias.name for alias in node.names)
    assert imported == set(plait.api.__all__)


def test_layers_all_has_every_thinc_layers_name():
    missing = set(THINC_LAYERS_ALL) - set(plait.layers.__all__)
    assert not missing, f"plait.layers.__all__ lacks {sorted(missing)}"
    for name in plait.layers.__all__:
        assert hasattr(plait.layers, name), name


def test_thinc_module_paths_exist():
    # Code written for thinc imports from these modules directly, not only from thinc.api.
    for module, names in {
        "plait.model": ["Model", "serialize_attr", "deserialize_attr", "set_dropout_rate", "wrap_model_recursive"],
        "plait.config": ["Config", "registry", "ConfigValidationError"],
        "plait.optimizers": ["Optimizer", "Adam", "SGD", "RAdam"],
        "plait.schedules": ["Schedule", "constant", "plateau", "warmup_linear"],
        "plait.loss": ["Loss", "CategoricalCrossentropy", "SequenceCategoricalCrossentropy", "L2Distance", "CosineDistance"],
        "plait.initializers": ["glorot_uniform_init", "he_normal_init", "lecun_uniform_init", "zero_init"],
        "plait.shims": ["Shim", "PyTorchShim", "TensorFlowShim", "MXNetShim", "TorchScriptShim", "PyTorchGradScaler"],
        "plait.layers.chain": ["chain"],
        "plait.layers.with_array": ["with_array"],
    }.items():
        mod = importlib.import_module(module)
        for name in names:
            assert hasattr(mod, name), f"{module}.{name}"


def test_lists_match_installed_thinc():
    thinc_api = pytest.importorskip("thinc.api")
    import thinc

    if not thinc.__version__.startswith("8.3"):
        pytest.skip(f"thinc {thinc.__version__} is not 8.3")
    import thinc.layers

    assert set(THINC_API_ALL) == set(thinc_api.__all__)
    assert set(THINC_LAYERS_ALL) == set(thinc.layers.__all__)
