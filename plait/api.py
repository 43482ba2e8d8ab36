"""The flat Thinc-compatible surface: exactly the names of Thinc 8.3's thinc.api.

The framework wrappers and shims load on first use of their names (plait.layers says why).
"""
from .backends import (
    CupyOps,
    get_current_ops,
    get_ops,
    MPSOps,
    NumpyOps,
    Ops,
    set_current_ops,
    set_gpu_allocator,
    use_ops,
    use_pytorch_for_gpu_memory,
    use_tensorflow_for_gpu_memory,
)
from .compat import (
    enable_mxnet,
    enable_tensorflow,
    has_cupy,
)
from .config import (
    Config,
    ConfigValidationError,
    registry,
)
from .initializers import (
    configure_normal_init,
    glorot_uniform_init,
    normal_init,
    uniform_init,
    zero_init,
)
from .layers import (
    add,
    array_getitem,
    bidirectional,
    CauchySimilarity,
    chain,
    ClippedLinear,
    clone,
    concatenate,
    Dish,
    Dropout,
    Embed,
    expand_window,
    Gelu,
    HardSigmoid,
    HardSwish,
    HardSwishMobilenet,
    HardTanh,
    HashEmbed,
    LayerNorm,
    Linear,
    list2array,
    list2padded,
    list2ragged,
    Logistic,
    LSTM,
    map_list,
    Maxout,
    Mish,
    MultiSoftmax,
    noop,
    padded2list,
    ParametricAttention,
    ParametricAttention_v2,
    premap_ids,
    PyTorchLSTM,
    ragged2list,
    reduce_first,
    reduce_last,
    reduce_max,
    reduce_mean,
    reduce_sum,
    Relu,
    ReluK,
    remap_ids,
    remap_ids_v2,
    residual,
    resizable,
    siamese,
    Sigmoid,
    sigmoid_activation,
    Softmax,
    softmax_activation,
    Softmax_v2,
    SparseLinear,
    SparseLinear_v2,
    strings2arrays,
    Swish,
    tuplify,
    uniqued,
    with_array,
    with_array2d,
    with_cpu,
    with_debug,
    with_flatten,
    with_flatten_v2,
    with_getitem,
    with_list,
    with_nvtx_range,
    with_padded,
    with_ragged,
    with_reshape,
    with_signpost_interval,
)
from .loss import (
    CategoricalCrossentropy,
    CosineDistance,
    L2Distance,
    SequenceCategoricalCrossentropy,
)
from .model import (
    change_attr_values,
    deserialize_attr,
    Model,
    serialize_attr,
    set_dropout_rate,
    wrap_model_recursive,
)
from .optimizers import (
    Adam,
    Optimizer,
    RAdam,
    SGD,
)
from .schedules import (
    compounding,
    constant,
    constant_then,
    cyclic_triangular,
    decaying,
    slanted_triangular,
    warmup_linear,
)
from .shims import Shim
from .types import (
    ArgsKwargs,
    Padded,
    Ragged,
    Unserializable,
)
from .util import (
    data_validation,
    DataValidationError,
    fix_random_seed,
    get_array_module,
    get_torch_default_device,
    get_width,
    is_cupy_array,
    mxnet2xp,
    prefer_gpu,
    require_cpu,
    require_gpu,
    set_active_gpu,
    tensorflow2xp,
    to_categorical,
    to_numpy,
    torch2xp,
    xp2mxnet,
    xp2tensorflow,
    xp2torch,
)

__all__ = [
    # backends
    "CupyOps", "get_current_ops", "get_ops", "MPSOps", "NumpyOps", "Ops", "set_current_ops",
    "set_gpu_allocator", "use_ops", "use_pytorch_for_gpu_memory", "use_tensorflow_for_gpu_memory",
    # compat
    "enable_mxnet", "enable_tensorflow", "has_cupy",
    # config
    "Config", "ConfigValidationError", "registry",
    # initializers
    "configure_normal_init", "glorot_uniform_init", "normal_init", "uniform_init", "zero_init",
    # layers
    "add", "array_getitem", "bidirectional", "CauchySimilarity", "chain", "ClippedLinear", "clone",
    "concatenate", "Dish", "Dropout", "Embed", "expand_window", "Gelu", "HardSigmoid", "HardSwish",
    "HardSwishMobilenet", "HardTanh", "HashEmbed", "keras_subclass", "LayerNorm", "Linear",
    "list2array", "list2padded", "list2ragged", "Logistic", "LSTM", "map_list", "Maxout", "Mish",
    "MultiSoftmax", "MXNetWrapper", "noop", "padded2list", "ParametricAttention",
    "ParametricAttention_v2", "premap_ids", "pytorch_to_torchscript_wrapper", "PyTorchLSTM",
    "PyTorchRNNWrapper", "PyTorchWrapper", "PyTorchWrapper_v2", "PyTorchWrapper_v3", "ragged2list",
    "reduce_first", "reduce_last", "reduce_max", "reduce_mean", "reduce_sum", "Relu", "ReluK",
    "remap_ids", "remap_ids_v2", "residual", "resizable", "siamese", "Sigmoid",
    "sigmoid_activation", "Softmax", "softmax_activation", "Softmax_v2", "SparseLinear",
    "SparseLinear_v2", "strings2arrays", "Swish", "TensorFlowWrapper", "TorchScriptWrapper_v1",
    "tuplify", "uniqued", "with_array", "with_array2d", "with_cpu", "with_debug", "with_flatten",
    "with_flatten_v2", "with_getitem", "with_list", "with_nvtx_range", "with_padded", "with_ragged",
    "with_reshape", "with_signpost_interval",
    # loss
    "CategoricalCrossentropy", "CosineDistance", "L2Distance", "SequenceCategoricalCrossentropy",
    # model
    "change_attr_values", "deserialize_attr", "Model", "serialize_attr", "set_dropout_rate",
    "wrap_model_recursive",
    # optimizers
    "Adam", "Optimizer", "RAdam", "SGD",
    # schedules
    "compounding", "constant", "constant_then", "cyclic_triangular", "decaying",
    "slanted_triangular", "warmup_linear",
    # shims
    "keras_model_fns", "maybe_handshake_model", "MXNetShim", "PyTorchGradScaler", "PyTorchShim",
    "Shim", "TensorFlowShim", "TorchScriptShim",
    # types
    "ArgsKwargs", "Padded", "Ragged", "Unserializable",
    # util
    "data_validation", "DataValidationError", "fix_random_seed", "get_array_module",
    "get_torch_default_device", "get_width", "is_cupy_array", "mxnet2xp", "prefer_gpu",
    "require_cpu", "require_gpu", "set_active_gpu", "tensorflow2xp", "to_categorical", "to_numpy",
    "torch2xp", "xp2mxnet", "xp2tensorflow", "xp2torch",
]


def __getattr__(name):
    # NOTE: the imports stay written out (not computed) so that the file lists what it
    # re-exports, as Thinc's own test of its package checks.
    if name in ('MXNetWrapper', 'pytorch_to_torchscript_wrapper', 'PyTorchRNNWrapper', 'PyTorchWrapper', 'PyTorchWrapper_v2', 'PyTorchWrapper_v3', 'TensorFlowWrapper', 'keras_subclass', 'TorchScriptWrapper_v1'):
        from .layers import (
            keras_subclass, MXNetWrapper, pytorch_to_torchscript_wrapper, PyTorchRNNWrapper, PyTorchWrapper,
            PyTorchWrapper_v2, PyTorchWrapper_v3, TensorFlowWrapper, TorchScriptWrapper_v1,
        )
    elif name in ('keras_model_fns', 'maybe_handshake_model', 'MXNetShim', 'PyTorchGradScaler', 'PyTorchShim', 'TensorFlowShim', 'TorchScriptShim'):
        from .shims import (
            keras_model_fns, maybe_handshake_model, MXNetShim, PyTorchGradScaler, PyTorchShim, TensorFlowShim,
            TorchScriptShim,
        )
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = locals()[name]
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
