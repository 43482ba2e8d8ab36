"""Run by tests/distributed/test_mpi.py under mpiexec (or alone): train a Thinc-face MLP.

argv: MODE OUT [BATCH] [STEPS] [MODEL]
  train  OUT BATCH STEPS [mlp|textcnn] : train data-parallel; rank 0 writes the final weights to
                           OUT (npz). textcnn: HashEmbed, expand_window, Maxout, reduce_mean,
                           Softmax over ragged documents (the bench's text CNN), with plait's
                           CategoricalCrossentropy (the mean over each rank's batch).
                           PLAIT_TEST_SHARD=1: DataParallel(shard_update=True);
                           PLAIT_TEST_ADAM: JSON keyword arguments of Adam besides its 0.01.
  hang   OUT             : write this rank's pid to OUT.rank<r>, then train forever (to be killed).
"""
import json
import os
import sys
import time

import numpy

from plait.api import (Adam, CategoricalCrossentropy, HashEmbed, Maxout, Relu, Softmax, chain, expand_window,
                       list2ragged, reduce_mean, with_array)
from plait.distributed import DataParallel, get_communicator, shard


def data(n=512, n_in=12, n_out=4):
    rng = numpy.random.default_rng(0)
    X = rng.standard_normal((n, n_in)).astype("f")
    Y = numpy.eye(n_out, dtype="f")[rng.integers(0, n_out, n)]
    return X, Y


def text_data(n=256, n_out=2):
    rng = numpy.random.default_rng(0)
    docs = [rng.integers(0, 500, int(rng.integers(1, 12))).astype("uint64") for _ in range(n)]
    Y = numpy.eye(n_out, dtype="f")[rng.integers(0, n_out, n)]
    return docs, Y


def text_cnn():
    return chain(
        list2ragged(),
        with_array(HashEmbed(nO=16, nV=200, seed=3)),
        expand_window(window_size=1),
        with_array(Maxout(nO=16, nP=3, normalize=True)),
        reduce_mean(),
        Softmax(nO=2),
    )


def on_device(*arrays):
    # PLAIT_TEST_OPS=cupy: the model's parameters and the data on the GPU (CupyOps); the
    # communicator then reduces cupy gradients (staged through host memory by MPI).
    if os.environ.get("PLAIT_TEST_OPS") != "cupy":
        return arrays
    from plait.api import CupyOps, set_current_ops

    ops = CupyOps()
    set_current_ops(ops)
    return tuple(ops.asarray(a) for a in arrays)


def main():
    mode, out = sys.argv[1], sys.argv[2]
    comm = get_communicator()
    X, Y = on_device(*data())
    # Different random init on every rank: bcast_params must make them equal.
    numpy.random.seed(1234 + comm.rank)
    model = chain(Relu(16), Relu(16), Softmax(4)).initialize(X=X[:4], Y=Y[:4])
    shard_update = os.environ.get("PLAIT_TEST_SHARD") == "1"
    dp = DataParallel(model, comm, shard_update=shard_update)
    optimizer = Adam(0.01, **json.loads(os.environ.get("PLAIT_TEST_ADAM", "{}")))
    Xs, Ys = shard(X, comm.rank, comm.size), shard(Y, comm.rank, comm.size)
    if mode == "hang":
        with open(f"{out}.rank{comm.rank}", "w") as f:
            f.write(str(os.getpid()))
        batch = 8
        while True:
            for i in range(0, len(Xs) - batch + 1, batch):
                Yh, backprop = dp.begin_update(Xs[i:i + batch])
                backprop((Yh - Ys[i:i + batch]) / batch)
                dp.finish_update(optimizer)
                time.sleep(0.01)
    batch, steps = int(sys.argv[3]), int(sys.argv[4])
    if len(sys.argv) > 5 and sys.argv[5] == "textcnn":
        X, Y = text_data()
        numpy.random.seed(99 + comm.rank)
        model = text_cnn().initialize(X=X[:8], Y=Y[:8])
        dp = DataParallel(model, comm, shard_update=shard_update)
        Xs, Ys = shard(X, comm.rank, comm.size), shard(Y, comm.rank, comm.size)
        loss_fn = CategoricalCrossentropy()
        starts = list(range(0, len(Xs) - batch + 1, batch))
        for step in range(steps):
            i = starts[step % len(starts)]
            Yh, backprop = dp.begin_update(Xs[i:i + batch])
            backprop(loss_fn.get_grad(Yh, Ys[i:i + batch]))
            dp.finish_update(optimizer)
        finish(comm, model, Xs, Ys, out, dp)
        return
    starts = list(range(0, len(Xs) - batch + 1, batch))
    for step in range(steps):
        i = starts[step % len(starts)]
        Yh, backprop = dp.begin_update(Xs[i:i + batch])
        backprop((Yh - Ys[i:i + batch]) / batch)
        dp.finish_update(optimizer)
    finish(comm, model, Xs, Ys, out, dp)


def finish(comm, model, Xs, Ys, out, dp):
    # With shard_update=True the updates were sharded wherever they could be (one machine).
    assert dp.sharded == (dp.shard_update and os.environ.get("PLAIT_DIST_SHM", "1") != "0"), (dp.sharded, dp.shard_update)
    loss = comm.allreduce_scalar(float(((model.predict(Xs) - Ys) ** 2).sum()), op="sum")
    metrics = comm.gather({"rank": comm.rank, "n": len(Xs)})
    params = {f"{node.id - model.id}_{name}": node.ops.to_numpy(node.get_param(name)) for node in model.walk() for name in node.param_names if node.has_param(name)}
    # Every rank ends with the same weights.
    others = comm.allgather(params)
    for other in others:
        for key, value in params.items():
            assert numpy.array_equal(other[key], value), (comm.rank, key)
    if comm.rank == 0:
        assert [m["rank"] for m in metrics] == list(range(comm.size)), metrics
        numpy.savez(out, loss=numpy.float64(loss), **params)
    comm.barrier()


if __name__ == "__main__":
    main()
