"""A define-by-run training step leaves no reference cycles: the graph a step builds (its
Variables, Functions and their saved arrays) goes when the loss does, not at the next cyclic
garbage collection."""
import numpy
from _cycles import assert_no_cycles

import plait.chainer as chainer
import plait.chainer.functions as F
import plait.chainer.links as L
from plait.chainer import optimizers


class _Net(chainer.Chain):
    def __init__(self):
        super().__init__(embed=L.EmbedID(20, 8), lstm=L.LSTM(8, 8), out=L.Linear(8, 20),
                         conv=L.Convolution2D(1, 2, 3), bn=L.BatchNormalization(2))

    def __call__(self, xs, image):
        self.lstm.reset_state()
        loss = 0
        for t in range(len(xs) - 1):
            h = self.lstm(F.dropout(self.embed(xs[t])))
            loss += F.softmax_cross_entropy(self.out(h), xs[t + 1])
        return loss + F.sum(F.max_pooling_2d(F.relu(self.bn(self.conv(image))), 2))


def test_a_training_step_leaves_no_garbage_cycles():
    model = _Net()
    optimizer = optimizers.Adam()
    optimizer.setup(model)
    rng = numpy.random.default_rng(0)

    def step():
        xs = [chainer.Variable(rng.integers(0, 20, 3).astype("int32")) for _ in range(5)]
        image = chainer.Variable(rng.standard_normal((2, 1, 5, 5)).astype("float32"))
        model.zerograds()
        loss = model(xs, image)
        loss.backward()
        optimizer.update()

    assert_no_cycles(step, "chainer LSTM + conv + batchnorm step")
