"""Every module path of Chainer 1.7.2 imports under plait.chainer and has 1.7.2's public names.

The table lists, per module, the public classes, functions, constants and submodules that
Chainer 1.7.2 defines there (names it merely imports from numpy, six and so on are left out;
`chainer.links.caffe.caffe_pb2`, a Python 2 protobuf module, is not provided).
"""
import importlib
import warnings

import pytest

API = {
    "chainer": (
        "AUTO AbstractSerializer Chain ChainList Deserializer Flag Function FunctionSet "
        "GradientMethod Link OFF ON Optimizer Serializer Variable basic_math cuda flag function "
        "function_hooks function_set functions get_function_hooks is_debug link links optimizer "
        "optimizers serializer serializers set_debug testing utils variable"
    ),
    "chainer.computational_graph": "ComputationalGraph DotNode build_computational_graph",
    "chainer.cuda": (
        "DummyDevice DummyDeviceType check_cuda_available copy elementwise empty empty_like full "
        "full_like get_array_module get_device init memoize ndarray ones ones_like reduce to_cpu "
        "to_gpu zeros zeros_like"
    ),
    "chainer.flag": "AUTO Flag OFF ON aggregate_flags",
    "chainer.function": "Function FunctionHook",
    "chainer.function_hooks": "TimerHook timer",
    "chainer.function_hooks.timer": "TimerHook",
    "chainer.function_set": "FunctionSet",
    "chainer.functions": (
        "Accuracy AveragePooling2D BatchDet BatchInv BatchL2NormSquared BatchMatMul "
        "BatchNormalization Bilinear BinaryAccuracy BinaryHierarchicalSoftmax Broadcast "
        "BroadcastTo ClippedReLU Concat ConnectionistTemporalClassification Contrastive "
        "Convolution2D Copy Cos CrossCovariance Dropout ELU EmbedID Exp ExpandDims Gaussian Hinge "
        "Identity Inception InceptionBN Inv LSTM LeakyReLU Linear LocalResponseNormalization Log "
        "LogSoftmax MatMul Max MaxPooling2D MeanSquaredError Min NegativeSampling PReLU Parameter "
        "ReLU Reshape SLSTM SelectItem Sigmoid SigmoidCrossEntropy Sin Softmax "
        "SoftmaxCrossEntropy Softplus SpatialPyramidPooling2D SplitAxis Sum Swapaxes Tanh "
        "Transpose Unpooling2D Where accuracy activation array average_pooling_2d basic_math "
        "batch_det batch_inv batch_l2_norm_squared batch_matmul batch_normalization bernoulli_nll "
        "bilinear binary_accuracy broadcast broadcast_to caffe clipped_relu concat connection "
        "connectionist_temporal_classification contrastive convolution_2d copy cos "
        "cross_covariance ctc deconvolution_2d det dropout elu embed_id evaluation exp "
        "expand_dims exponential fixed_batch_normalization gaussian gaussian_kl_divergence "
        "gaussian_nll hierarchical_softmax hinge identity inception inceptionbn inv leaky_relu "
        "linear links_batch_normalization links_bilinear links_convolution_2d links_embed_id "
        "links_linear links_negative_sampling links_prelu local_response_normalization log "
        "log_softmax loss lstm math matmul max max_pooling_2d maxout mean_squared_error min "
        "minmax negative_sampling noise normalization parameter pooling prelu relu reshape "
        "select_item sigmoid sigmoid_cross_entropy sin slstm softmax softmax_cross_entropy "
        "softplus spatial_pyramid_pooling_2d split_axis sum swapaxes tanh transpose trigonometric "
        "unpooling_2d vae where"
    ),
    "chainer.functions.activation": (
        "clipped_relu elu leaky_relu log_softmax lstm maxout prelu relu sigmoid slstm softmax "
        "softplus tanh"
    ),
    "chainer.functions.activation.clipped_relu": "ClippedReLU clipped_relu",
    "chainer.functions.activation.elu": "ELU elu",
    "chainer.functions.activation.leaky_relu": "LeakyReLU leaky_relu",
    "chainer.functions.activation.log_softmax": "LogSoftmax log_softmax logsumexp",
    "chainer.functions.activation.lstm": "LSTM lstm",
    "chainer.functions.activation.maxout": "maxout",
    "chainer.functions.activation.prelu": "PReLUFunction prelu",
    "chainer.functions.activation.relu": "ReLU relu",
    "chainer.functions.activation.sigmoid": "Sigmoid sigmoid",
    "chainer.functions.activation.slstm": "SLSTM slstm",
    "chainer.functions.activation.softmax": "Softmax softmax",
    "chainer.functions.activation.softplus": "Softplus softplus",
    "chainer.functions.activation.tanh": "Tanh tanh",
    "chainer.functions.array": (
        "broadcast concat copy expand_dims reshape select_item split_axis swapaxes transpose "
        "where"
    ),
    "chainer.functions.array.broadcast": "Broadcast BroadcastTo broadcast broadcast_to",
    "chainer.functions.array.concat": "Concat concat",
    "chainer.functions.array.copy": "Copy copy",
    "chainer.functions.array.expand_dims": "ExpandDims expand_dims",
    "chainer.functions.array.reshape": "Reshape reshape",
    "chainer.functions.array.select_item": "SelectItem select_item",
    "chainer.functions.array.split_axis": "SplitAxis split_axis",
    "chainer.functions.array.swapaxes": "Swapaxes swapaxes",
    "chainer.functions.array.transpose": "Transpose transpose",
    "chainer.functions.array.where": "Where where",
    "chainer.functions.caffe": "CaffeFunction",
    "chainer.functions.connection": "bilinear convolution_2d deconvolution_2d embed_id linear",
    "chainer.functions.connection.bilinear": "BilinearFunction bilinear",
    "chainer.functions.connection.convolution_2d": "Convolution2DFunction convolution_2d",
    "chainer.functions.connection.deconvolution_2d": "Deconvolution2DFunction deconvolution_2d",
    "chainer.functions.connection.embed_id": "EmbedIDFunction embed_id",
    "chainer.functions.connection.linear": "LinearFunction linear",
    "chainer.functions.evaluation": "accuracy binary_accuracy",
    "chainer.functions.evaluation.accuracy": "Accuracy accuracy",
    "chainer.functions.evaluation.binary_accuracy": "BinaryAccuracy binary_accuracy",
    "chainer.functions.loss": (
        "contrastive cross_covariance ctc hinge mean_squared_error negative_sampling "
        "sigmoid_cross_entropy softmax_cross_entropy vae"
    ),
    "chainer.functions.loss.contrastive": "Contrastive contrastive",
    "chainer.functions.loss.cross_covariance": "CrossCovariance cross_covariance",
    "chainer.functions.loss.ctc": "ConnectionistTemporalClassification connectionist_temporal_classification",
    "chainer.functions.loss.hinge": "Hinge hinge",
    "chainer.functions.loss.mean_squared_error": "MeanSquaredError mean_squared_error",
    "chainer.functions.loss.negative_sampling": "NegativeSamplingFunction negative_sampling",
    "chainer.functions.loss.sigmoid_cross_entropy": "SigmoidCrossEntropy sigmoid_cross_entropy",
    "chainer.functions.loss.softmax_cross_entropy": "SoftmaxCrossEntropy logsumexp softmax_cross_entropy softmax_log",
    "chainer.functions.loss.vae": "bernoulli_nll gaussian_kl_divergence gaussian_nll",
    "chainer.functions.math": (
        "basic_math batch_l2_norm_squared det exponential identity inv matmul minmax sum "
        "trigonometric"
    ),
    "chainer.functions.math.basic_math": (
        "Absolute Add AddConstant Div DivFromConstant Mul MulConstant Neg PowConstVar PowVarConst "
        "PowVarVar Sub SubFromConstant absolute add div install_variable_arithmetics mul neg pow "
        "rdiv rpow rsub sub"
    ),
    "chainer.functions.math.batch_l2_norm_squared": "BatchL2NormSquared batch_l2_norm_squared",
    "chainer.functions.math.det": "BatchDet batch_det det",
    "chainer.functions.math.exponential": "Exp Log exp log",
    "chainer.functions.math.identity": "Identity identity",
    "chainer.functions.math.inv": "BatchInv Inv batch_inv inv",
    "chainer.functions.math.matmul": "BatchMatMul MatMul batch_matmul matmul",
    "chainer.functions.math.minmax": "Max Min SelectorBase max min",
    "chainer.functions.math.sum": "Sum sum",
    "chainer.functions.math.trigonometric": "Cos Sin cos sin",
    "chainer.functions.noise": "dropout gaussian",
    "chainer.functions.noise.dropout": "Dropout dropout",
    "chainer.functions.noise.gaussian": "Gaussian gaussian",
    "chainer.functions.normalization": "batch_normalization local_response_normalization",
    "chainer.functions.normalization.batch_normalization": "BatchNormalizationFunction batch_normalization fixed_batch_normalization",
    "chainer.functions.normalization.local_response_normalization": "LocalResponseNormalization local_response_normalization",
    "chainer.functions.pooling": "average_pooling_2d max_pooling_2d pooling_2d spatial_pyramid_pooling_2d unpooling_2d",
    "chainer.functions.pooling.average_pooling_2d": "AveragePooling2D average_pooling_2d",
    "chainer.functions.pooling.max_pooling_2d": "MaxPooling2D max_pooling_2d",
    "chainer.functions.pooling.pooling_2d": "Pooling2D",
    "chainer.functions.pooling.spatial_pyramid_pooling_2d": "SpatialPyramidPooling2D spatial_pyramid_pooling_2d",
    "chainer.functions.pooling.unpooling_2d": "Unpooling2D unpooling_2d",
    "chainer.gradient_check": "assert_allclose check_backward numerical_grad",
    "chainer.link": "Chain ChainList Link",
    "chainer.links": (
        "BatchNormalization Bilinear BinaryHierarchicalSoftmax Classifier Convolution2D "
        "Deconvolution2D EmbedID GRU Inception InceptionBN LSTM Linear MLPConvolution2D Maxout "
        "NegativeSampling PReLU Parameter StatefulGRU activation batch_normalization bilinear "
        "caffe classifier connection convolution_2d deconvolution_2d embed_id gru "
        "hierarchical_softmax inception inceptionbn linear loss lstm maxout mlp_convolution_2d "
        "model negative_sampling normalization parameter prelu"
    ),
    "chainer.links.activation": "maxout prelu",
    "chainer.links.activation.maxout": "Maxout",
    "chainer.links.activation.prelu": "PReLU",
    "chainer.links.caffe": "CaffeFunction caffe_function",
    "chainer.links.caffe.caffe_function": "CaffeFunction",
    "chainer.links.connection": (
        "bilinear convolution_2d deconvolution_2d embed_id gru inception inceptionbn linear lstm "
        "mlp_convolution_2d parameter"
    ),
    "chainer.links.connection.bilinear": "Bilinear",
    "chainer.links.connection.convolution_2d": "Convolution2D",
    "chainer.links.connection.deconvolution_2d": "Deconvolution2D",
    "chainer.links.connection.embed_id": "EmbedID",
    "chainer.links.connection.gru": "GRU GRUBase StatefulGRU",
    "chainer.links.connection.inception": "Inception",
    "chainer.links.connection.inceptionbn": "InceptionBN",
    "chainer.links.connection.linear": "Linear",
    "chainer.links.connection.lstm": "LSTM",
    "chainer.links.connection.mlp_convolution_2d": "MLPConvolution2D",
    "chainer.links.connection.parameter": "Parameter",
    "chainer.links.loss": "hierarchical_softmax negative_sampling",
    "chainer.links.loss.hierarchical_softmax": "BinaryHierarchicalSoftmax BinaryHierarchicalSoftmaxFunction TreeParser",
    "chainer.links.loss.negative_sampling": "NegativeSampling",
    "chainer.links.model": "classifier",
    "chainer.links.model.classifier": "Classifier",
    "chainer.links.normalization": "batch_normalization",
    "chainer.links.normalization.batch_normalization": "BatchNormalization",
    "chainer.optimizer": "GradientClipping GradientMethod Optimizer WeightDecay",
    "chainer.optimizers": (
        "AdaDelta AdaGrad Adam MomentumSGD NesterovAG RMSprop RMSpropGraves SGD ada_delta "
        "ada_grad adam momentum_sgd nesterov_ag rmsprop rmsprop_graves sgd"
    ),
    "chainer.optimizers.ada_delta": "AdaDelta",
    "chainer.optimizers.ada_grad": "AdaGrad",
    "chainer.optimizers.adam": "Adam",
    "chainer.optimizers.momentum_sgd": "MomentumSGD",
    "chainer.optimizers.nesterov_ag": "NesterovAG",
    "chainer.optimizers.rmsprop": "RMSprop",
    "chainer.optimizers.rmsprop_graves": "RMSpropGraves",
    "chainer.optimizers.sgd": "SGD",
    "chainer.serializer": "AbstractSerializer Deserializer Serializer",
    "chainer.serializers": (
        "DictionarySerializer HDF5Deserializer HDF5Serializer NpzDeserializer hdf5 load_hdf5 "
        "load_npz npz save_hdf5 save_npz"
    ),
    "chainer.serializers.hdf5": "HDF5Deserializer HDF5Serializer load_hdf5 save_hdf5",
    "chainer.serializers.npz": "DictionarySerializer NpzDeserializer load_npz save_npz",
    "chainer.testing": "parameterize parameterized product run_module",
    "chainer.testing.attr": "multi_gpu",
    "chainer.testing.condition": "QuietTestRunner repeat repeat_with_success_at_least retry",
    "chainer.testing.parameterized": "parameterize product",
    "chainer.utils": "WalkerAlias array conv force_array force_type type_check walker_alias",
    "chainer.utils.array": "as_mat as_vec empty_like",
    "chainer.utils.conv": "col2im_cpu col2im_gpu get_conv_outsize get_deconv_outsize im2col_cpu im2col_gpu",
    "chainer.utils.type_check": (
        "Atom BinaryOperator BoolBinaryOperator Call Constant Expr GetAttr GetItem InvalidType "
        "Testable TypeInfo TypeInfoTuple UnaryOperator Variable expect get_types prod"
    ),
    "chainer.utils.walker_alias": "WalkerAlias",
    "chainer.variable": "Variable",
}


@pytest.fixture(scope="module")
def modules():
    # Importing every path first, as Chainer's own package walk does: a submodule becomes an
    # attribute of its package once imported (chainer.testing, chainer.functions.caffe).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return {path: importlib.import_module("plait." + path) for path in sorted(API)}


@pytest.mark.parametrize("path", sorted(API))
def test_module_has_chainers_public_names(modules, path):
    module = modules[path]
    missing = [name for name in API[path].split() if not hasattr(module, name)]
    assert not missing, f"plait.{path} lacks {missing}"
