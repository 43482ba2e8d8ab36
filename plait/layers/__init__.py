"""Layers, combinators, reductions and data-type transfers of the Thinc face.

The framework wrappers (PyTorch, TensorFlow, MXNet) load on first use of their names, so that
importing the layers costs nothing for the code that never wraps another framework.
"""
from .add import add
from .array_getitem import array_getitem, floats_getitem, ints_getitem
from .bidirectional import bidirectional
from .cauchysimilarity import CauchySimilarity
from .chain import chain
from .clipped_linear import ClippedLinear, HardSigmoid, HardTanh, ReluK
from .clone import clone
from .concatenate import concatenate
from .dish import Dish
from .dropout import Dropout
from .embed import Embed
from .expand_window import expand_window
from .gelu import Gelu
from .hard_swish import HardSwish
from .hard_swish_mobilenet import HardSwishMobilenet
from .hashembed import HashEmbed
from .layernorm import LayerNorm
from .linear import Linear
from .list2array import list2array
from .list2padded import list2padded
from .list2ragged import list2ragged
from .logistic import Logistic
from .lstm import LSTM, PyTorchLSTM
from .map_list import map_list
from .maxout import Maxout
from .mish import Mish
from .multisoftmax import MultiSoftmax
from .noop import noop
from .padded2list import padded2list
from .parametricattention import ParametricAttention
from .parametricattention_v2 import ParametricAttention_v2
from .premap_ids import premap_ids
from .ragged2list import ragged2list
from .reduce_first import reduce_first
from .reduce_last import reduce_last
from .reduce_max import reduce_max
from .reduce_mean import reduce_mean
from .reduce_sum import reduce_sum
from .relu import Relu
from .remap_ids import remap_ids, remap_ids_v2
from .residual import residual
from .resizable import resizable
from .siamese import siamese
from .sigmoid import Sigmoid
from .sigmoid_activation import sigmoid_activation
from .softmax import Softmax, Softmax_v2
from .softmax_activation import softmax_activation
from .sparselinear import SparseLinear, SparseLinear_v2
from .staticvectors import StaticVectors
from .strings2arrays import strings2arrays
from .swish import Swish
from .tuplify import tuplify
from .uniqued import uniqued
from .with_array import with_array
from .with_array2d import with_array2d
from .with_cpu import with_cpu
from .with_debug import with_debug
from .with_flatten import with_flatten
from .with_flatten_v2 import with_flatten_v2
from .with_getitem import with_getitem
from .with_list import with_list
from .with_nvtx_range import with_nvtx_range
from .with_padded import with_padded
from .with_ragged import with_ragged
from .with_reshape import with_reshape
from .with_signpost_interval import with_signpost_interval

__all__ = [
    # weights layers
    "CauchySimilarity", "Linear", "Dropout", "Embed", "expand_window", "HashEmbed", "LayerNorm", "LSTM",
    "Maxout", "Mish", "MultiSoftmax", "ParametricAttention", "ParametricAttention_v2", "PyTorchLSTM",
    "Relu", "sigmoid_activation", "Sigmoid", "softmax_activation", "Softmax", "Softmax_v2", "SparseLinear",
    "SparseLinear_v2", "StaticVectors", "Swish", "Dish", "Gelu", "HardSwish", "HardSwishMobilenet",
    "ClippedLinear", "ReluK", "HardTanh", "HardSigmoid", "Logistic",
    # framework wrappers
    "TensorFlowWrapper", "keras_subclass", "MXNetWrapper", "PyTorchWrapper", "PyTorchWrapper_v2",
    "PyTorchWrapper_v3", "PyTorchRNNWrapper", "TorchScriptWrapper_v1", "pytorch_to_torchscript_wrapper",
    # combinators
    "add", "bidirectional", "chain", "clone", "concatenate", "noop", "residual", "uniqued", "siamese",
    "tuplify", "map_list",
    # reductions
    "reduce_first", "reduce_last", "reduce_max", "reduce_mean", "reduce_sum",
    # data type transfers
    "resizable", "list2array", "list2ragged", "list2padded", "ragged2list", "padded2list", "remap_ids",
    "remap_ids_v2", "premap_ids", "strings2arrays", "array_getitem", "ints_getitem", "floats_getitem",
    "with_array", "with_array2d", "with_cpu", "with_debug", "with_flatten", "with_flatten_v2", "with_getitem",
    "with_list", "with_nvtx_range", "with_padded", "with_ragged", "with_reshape", "with_signpost_interval",
]


def __getattr__(name):
    # NOTE: the imports stay written out (not computed) so that the file lists what it
    # re-exports, as Thinc's own test of its package checks.
    if name in ('MXNetWrapper',):
        from .mxnetwrapper import MXNetWrapper
    elif name in ('PyTorchRNNWrapper', 'PyTorchWrapper', 'PyTorchWrapper_v2', 'PyTorchWrapper_v3'):
        from .pytorchwrapper import PyTorchRNNWrapper, PyTorchWrapper, PyTorchWrapper_v2, PyTorchWrapper_v3
    elif name in ('TensorFlowWrapper', 'keras_subclass'):
        from .tensorflowwrapper import TensorFlowWrapper, keras_subclass
    elif name in ('TorchScriptWrapper_v1', 'pytorch_to_torchscript_wrapper'):
        from .torchscriptwrapper import TorchScriptWrapper_v1, pytorch_to_torchscript_wrapper
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = locals()[name]
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
