#!/usr/bin/env python
"""A data-parallel MNIST-style MLP written for ChainerMN 1.3 on Chainer's 1.x API: it imports
`chainer` and `chainermn` and nothing of plait. test_chainermn_mpi.py runs it, unchanged, with
PLAIT_AS_CHAINER=1 (or `python -m plait.chainermn_alias`), alone and under `mpiexec -n 2`.
Synthetic data (each label lights a stripe of pixels) stands in for MNIST."""
from __future__ import print_function

import argparse
import json

import numpy as np

import chainer
import chainer.functions as F
import chainer.links as L
from chainer import optimizers, serializers
import chainermn


class MLP(chainer.Chain):

    def __init__(self, n_units, n_out):
        super(MLP, self).__init__(
            l1=L.Linear(784, n_units),
            l2=L.Linear(n_units, n_units),
            l3=L.Linear(n_units, n_out),
        )

    def __call__(self, x):
        h1 = F.relu(self.l1(x))
        h2 = F.relu(self.l2(h1))
        return self.l3(h2)


class TestEvaluator(object):

    def __init__(self, model, dataset):
        self.model = model
        self.dataset = dataset

    def evaluate(self):
        x = chainer.Variable(np.asarray([d[0] for d in self.dataset]), volatile='on')
        t = chainer.Variable(np.asarray([d[1] for d in self.dataset]), volatile='on')
        loss = self.model(x, t)
        return {'validation/main/loss': float(loss.data),
                'validation/main/accuracy': float(self.model.accuracy.data)}


def main():
    parser = argparse.ArgumentParser(description='ChainerMN example: MNIST')
    parser.add_argument('--batchsize', '-b', type=int, default=20)
    parser.add_argument('--communicator', type=str, default='hierarchical')
    parser.add_argument('--epoch', '-e', type=int, default=3)
    parser.add_argument('--unit', '-u', type=int, default=100)
    parser.add_argument('--out', '-o', default=None)
    args = parser.parse_args()

    comm = chainermn.create_communicator(args.communicator)
    if comm.rank == 0:
        print('==========================================')
        print('Num process (COMM_WORLD): {}'.format(comm.size))
        print('Using {} communicator'.format(args.communicator))
        print('chainer {}, chainermn {}'.format(chainer.__version__, chainermn.__version__))
        print('==========================================')

    model = L.Classifier(MLP(args.unit, 10))
    optimizer = chainermn.create_multi_node_optimizer(optimizers.Adam(), comm)
    optimizer.setup(model)

    # Split and distribute the dataset: only rank 0 has it.
    if comm.rank == 0:
        rng = np.random.RandomState(0)
        y = rng.randint(0, 10, 1200).astype(np.int32)
        x = rng.rand(1200, 784).astype(np.float32)
        for label in range(10):  # each digit lights its own stripe of pixels
            x[y == label, label * 20:(label + 1) * 20] += 1.0
        train, test = list(zip(x[:1000], y[:1000])), list(zip(x[1000:], y[1000:]))
    else:
        train, test = None, None
    train = chainermn.scatter_dataset(train, comm, shuffle=True)
    test = chainermn.scatter_dataset(test, comm, shuffle=True)

    for epoch in range(args.epoch):
        perm = np.random.permutation(len(train))
        for i in range(0, len(train) - args.batchsize + 1, args.batchsize):
            batch = [train[j] for j in perm[i:i + args.batchsize]]
            x = chainer.Variable(np.asarray([b[0] for b in batch]))
            t = chainer.Variable(np.asarray([b[1] for b in batch]))
            optimizer.update(model, x, t)

    evaluator = chainermn.create_multi_node_evaluator(TestEvaluator(model, test), comm)
    result = evaluator.evaluate()
    if comm.rank == 0:
        print(json.dumps(result, sort_keys=True))
        if args.out:
            serializers.save_npz(args.out, model)


if __name__ == '__main__':
    main()
