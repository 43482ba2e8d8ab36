"""Configs shared by the reliability tests: a model that trains in about a second."""

# A small MLP on 64 bundled MNIST digits, 4 steps.
TINY = """\
[model]
@layers = "chain.v1"

[model.*.hidden]
@layers = "Relu.v1"
nO = 8

[model.*.output]
@layers = "Softmax.v1"

[optimizer]
@optimizers = "Adam.v1"
learn_rate = 0.005

[training]
max_epochs = 1
max_steps = 4
batch_size = 32
eval_frequency = 2
patience = 0
seed = 0

[data]
@datasets = "mnist.v1"
path = null
limit = 64
"""
