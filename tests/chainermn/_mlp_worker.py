"""Run by test_chainermn_mpi.py under mpiexec (or alone): Chainer's tutorial MLP, data-parallel.

argv: MODE OUT [BATCH STEPS [COMMUNICATOR [OPTIMIZER [DEVICE]]]]
  train OUT BATCH STEPS NAME OPT DEVICE : train the MNIST example's MLP (three Linear layers with relu,
        in L.Classifier) for STEPS steps of BATCH examples per rank, with
        create_multi_node_optimizer over create_communicator(NAME) and the data given by
        scatter_dataset, on the CPU or (DEVICE "gpu") with the model and batches on the GPU
        (the communicator's current device); rank 0 writes the final parameters and the evaluated loss to OUT (npz).
  hang  OUT : write this rank's pid to OUT.rank<r>, then train forever (to be killed).

The data lives on rank 0 only. It is ordered so that the ranks' i-th batches of BATCH examples
are together exactly the i-th batch of BATCH * size examples of the unsplit data, which one
process with BATCH * size per step sees: the runs must then end with the same weights.
"""
import os
import sys
import time

import numpy

import plait.chainer as chainer
import plait.chainer.functions as F
import plait.chainer.links as L
import plait.chainermn as chainermn

N_IN, N_UNITS, N_OUT = 784, 64, 10


class MLP(chainer.Chain):
    def __init__(self, n_in, n_units, n_out):
        super().__init__(l1=L.Linear(n_in, n_units), l2=L.Linear(n_units, n_units), l3=L.Linear(n_units, n_out))

    def __call__(self, x):
        h1 = F.relu(self.l1(x))
        h2 = F.relu(self.l2(h1))
        return self.l3(h2)


def data(n):
    rng = numpy.random.default_rng(0)
    X = rng.random((n, N_IN), dtype=numpy.float32)
    T = rng.integers(0, N_OUT, n).astype(numpy.int32)
    return X, T


def main():
    mode, out = sys.argv[1], sys.argv[2]
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
    name = sys.argv[5] if len(sys.argv) > 5 else "flat"
    opt_name = sys.argv[6] if len(sys.argv) > 6 else "adam"
    on_gpu = len(sys.argv) > 7 and sys.argv[7] == "gpu"
    comm = chainermn.create_communicator(name)
    # A different initialisation on every rank: the optimizer's setup must make them equal.
    numpy.random.seed(1234 + comm.rank)
    model = L.Classifier(MLP(N_IN, N_UNITS, N_OUT))
    if on_gpu:
        model.to_gpu()
    actual = chainer.optimizers.Adam(alpha=0.002) if opt_name == "adam" else chainer.optimizers.MomentumSGD(lr=0.05)
    optimizer = chainermn.create_multi_node_optimizer(actual, comm)
    optimizer.setup(model)

    size = comm.size
    if comm.rank == 0:
        n = batch * size * min(steps, 100)
        X, T = data(n)
        # Rank r's block holds, for each step s, the rows s*size*batch + r*batch .. + batch.
        order = numpy.arange(n).reshape(-1, size, batch).transpose(1, 0, 2).reshape(-1)
        X, T = X[order], T[order]
    else:
        X = T = None
    Xs = chainermn.scatter_dataset(X, comm)
    Ts = chainermn.scatter_dataset(T, comm)
    assert len(Xs) == len(Ts) and len(Xs) % batch == 0, (len(Xs), len(Ts))
    if on_gpu:
        Xs, Ts = chainer.cuda.to_gpu(Xs), chainer.cuda.to_gpu(Ts)
    per_epoch = len(Xs) // batch

    if mode == "hang":
        with open(f"{out}.rank{comm.rank}", "w") as f:
            f.write(str(os.getpid()))
        step = 0
        while True:
            i = step % per_epoch * batch
            optimizer.update(model, chainer.Variable(Xs[i:i + batch]), chainer.Variable(Ts[i:i + batch]))
            step += 1
            time.sleep(0.01)

    for step in range(steps):
        i = step % per_epoch * batch
        optimizer.update(model, chainer.Variable(Xs[i:i + batch]), chainer.Variable(Ts[i:i + batch]))
    assert optimizer.t == steps, optimizer.t

    def evaluate():
        loss = model(chainer.Variable(Xs, volatile="on"), chainer.Variable(Ts, volatile="on"))
        return {"loss": loss, "accuracy": model.accuracy}

    # Each rank's loss on its (equal) share, averaged: the loss on all the data.
    result = chainermn.create_multi_node_evaluator(evaluate, comm)()
    params = {path.replace("/", "_"): chainer.cuda.to_cpu(p.data) for path, p in sorted(model.namedparams())}
    gathered = comm.gather_obj(params)
    if comm.rank == 0:
        for other in gathered:  # every rank ends with the same weights
            for key, value in params.items():
                assert numpy.array_equal(other[key], value), key
        numpy.savez(out, loss=numpy.float64(result["loss"]), accuracy=numpy.float64(result["accuracy"]), **params)
    comm.mpi_comm.Barrier() if size > 1 else None


if __name__ == "__main__":
    main()
