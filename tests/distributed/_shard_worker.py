"""Run by tests/distributed/test_mpi.py under mpiexec: DataParallel(shard_update=True) against
the plain DataParallel, two copies of one model trained side by side on the same batches.

After each stage the two copies must hold the same weights, moments, averages and update
counts (up to the rounding of the clipping norm). The stages go through what can change under
the sharded update: a second optimizer (the first keeps its own state), the plain path in
between (allreduce_grads, then model.finish_update; distributed_finish_update on the bare
model: private arrays again), weights loaded from bytes, an optimizer the sharded update
cannot do (SGD), and gradients that came without the wrapper. Prints 'ok <rank>' when every
check passed.
"""
import os

import numpy

from plait.api import SGD, Adam, Relu, Softmax, chain
from plait.distributed import DataParallel, distributed_finish_update, get_communicator, shard


def flat_state(model, optimizer):
    out = {}
    for index, node in enumerate(model.walk()):
        for name in node.param_names:
            if not node.has_param(name):
                continue
            label = f"{index}:{node.name}.{name}"
            out[label] = node.get_param(name)
            key = (node.id, name)
            for table in ("mom1", "mom2", "averages"):
                values = getattr(optimizer, table)
                if values is not None and key in values:
                    out[f"{label}.{table}"] = values[key]
            out[f"{label}.nr_update"] = numpy.array(optimizer.nr_update.get(key, 0))
    return out


def same(a_model, a_opt, b_model, b_opt, stage):
    a, b = flat_state(a_model, a_opt), flat_state(b_model, b_opt)
    assert sorted(a) == sorted(b), (stage, sorted(set(a) ^ set(b)))
    for key in a:
        x, y = numpy.asarray(a[key]), numpy.asarray(b[key])
        scale = float(numpy.abs(x).max()) if x.size else 0.0
        numpy.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-6 * scale, err_msg=f"{stage}: {key}")


def private(model, optimizer):
    """Whether no weight or optimizer array is a view of shared memory (an mmap)."""
    import mmap

    def shared(array):
        base = array
        while isinstance(base, numpy.ndarray) and base.base is not None:
            base = base.base
        if isinstance(base, memoryview):
            base = base.obj
        return isinstance(base, mmap.mmap)

    arrays = [node.get_param(n) for node in model.walk() for n in node.param_names if node.has_param(n)]
    for table in (optimizer.mom1, optimizer.mom2, optimizer.averages or {}):
        arrays += list(table.values())
    return not any(shared(a) for a in arrays)


def main():
    comm = get_communicator()
    rank, size = comm.rank, comm.size
    rng = numpy.random.default_rng(0)
    X = rng.standard_normal((64 * size * 4, 20)).astype("f")
    Y = numpy.eye(5, dtype="f")[rng.integers(0, 5, len(X))]
    Xs, Ys = shard(X, rank, size), shard(Y, rank, size)
    batches = [(Xs[i:i + 16], Ys[i:i + 16]) for i in range(0, len(Xs) - 15, 16)]

    def build():
        numpy.random.seed(5)  # the same init for both copies (and bcast_params makes the ranks agree)
        return chain(Relu(24), Relu(24), Softmax(5)).initialize(X=X[:4], Y=Y[:4])

    plain_model, shard_model = build(), build()
    plain = DataParallel(plain_model, comm)
    sharded = DataParallel(shard_model, comm, shard_update=True)
    want_shared = os.environ.get("PLAIT_DIST_SHM", "1") != "0"
    if os.environ.get("PLAIT_TEST_NO_SHARED_STATE") == "1":
        # The shared mapping of the weights cannot be made (on every rank): the plain update.
        from plait.distributed import _sharded

        def refuse(self, *args, **kwargs):
            raise _sharded.NoSharedMemory("refused by the test")

        _sharded.ShardedState.__init__ = refuse
        want_shared = False

    def train(steps, plain_opt, shard_opt, how="finish_update", offset=0):
        for step in range(steps):
            Xb, Yb = batches[(step + offset) % len(batches)]
            for dp, opt in ((plain, plain_opt), (sharded, shard_opt)):
                if how in ("raw", "distributed_finish_update"):
                    # Gradients not through the wrapper: raw sums, divided after the reduction.
                    Yh, backprop = dp.model.begin_update(Xb)
                else:
                    Yh, backprop = dp.begin_update(Xb)
                backprop((Yh - Yb) / len(Xb))
                if how == "allreduce_grads":
                    dp.allreduce_grads()
                    dp.model.finish_update(opt)
                elif how == "distributed_finish_update":
                    distributed_finish_update(dp.model, opt, comm)
                else:
                    dp.finish_update(opt)

    # 1. Adam with clipping that bites, decoupled decay and averages.
    opt_a, opt_a2 = Adam(0.01, grad_clip=0.1, L2=1e-4), Adam(0.01, grad_clip=0.1, L2=1e-4)
    train(12, opt_a, opt_a2)
    assert sharded.sharded == want_shared and not plain.sharded
    assert private(shard_model, opt_a2) != want_shared
    same(plain_model, opt_a, shard_model, opt_a2, "adam")

    # 2. A second optimizer (RAdam, coupled L2): the first one keeps its state, privately.
    opt_b = Adam(0.005, beta1=0.8, L2=1e-3, L2_is_weight_decay=False, use_averages=False)
    opt_b2 = Adam(0.005, beta1=0.8, L2=1e-3, L2_is_weight_decay=False, use_averages=False)
    opt_b.use_radam = opt_b2.use_radam = True
    train(6, opt_b, opt_b2, offset=3)
    same(plain_model, opt_b, shard_model, opt_b2, "radam")
    # The first optimizer's state was copied out when the second came: private, and unchanged.
    assert private(plain_model, opt_a2)
    same(plain_model, opt_a, shard_model, opt_a2, "the first optimizer kept")

    # 3. The plain path in between: allreduce_grads, then the model's own finish_update.
    train(4, opt_a, opt_a2, how="allreduce_grads", offset=5)
    assert not sharded.sharded and private(shard_model, opt_a2)
    same(plain_model, opt_a, shard_model, opt_a2, "allreduce_grads")

    # 4. Sharded again, back on the first optimizer (its state copied in).
    train(5, opt_a, opt_a2, offset=7)
    same(plain_model, opt_a, shard_model, opt_a2, "adam again")
    # ... then the module's function on the bare model: it detaches the shared arrays first.
    train(3, opt_a, opt_a2, how="distributed_finish_update", offset=6)
    assert private(shard_model, opt_a2)
    same(plain_model, opt_a, shard_model, opt_a2, "distributed_finish_update")
    train(3, opt_a, opt_a2, offset=1)
    same(plain_model, opt_a, shard_model, opt_a2, "sharded after distributed_finish_update")

    # 5. Weights replaced (loaded from bytes on every rank): the next update takes them in.
    shard_model.from_bytes(plain_model.to_bytes())
    train(4, opt_a, opt_a2, offset=2)
    same(plain_model, opt_a, shard_model, opt_a2, "after from_bytes")

    # 6. Gradients that did not come through the wrapper (raw sums).
    train(3, opt_a, opt_a2, how="raw", offset=4)
    same(plain_model, opt_a, shard_model, opt_a2, "raw gradients")

    # 7. SGD: not shardable, the plain update, private arrays.
    sgd, sgd2 = SGD(0.05), SGD(0.05)
    train(3, sgd, sgd2, offset=1)
    assert not sharded.sharded and private(shard_model, opt_a2)
    same(plain_model, sgd, shard_model, sgd2, "sgd")

    # Every rank ends with the same weights.
    mine = {k: v for k, v in flat_state(shard_model, opt_a2).items()}
    for other in comm.allgather(mine):
        for key, value in mine.items():
            assert numpy.array_equal(other[key], value), (rank, key)
    print(f"ok {rank}", flush=True)
    comm.barrier()


if __name__ == "__main__":
    main()
