"""Run by test_chainermn_mpi.py under `mpiexec -n 2`: plait.chainermn's communicator, dataset,
optimizer and evaluator on two ranks, each checked against what it must give. Prints
'ok <rank>' when every check passed."""
import numpy

import plait.chainer as chainer
import plait.chainer.links as L
import plait.chainermn as chainermn


class Net(chainer.Chain):
    def __init__(self):
        super().__init__(a=L.Linear(3, 4), b=L.Linear(4, 2), bn=L.BatchNormalization(4))


def check_communicator(comm):
    rank, size = comm.rank, comm.size
    assert size == 2 and rank in (0, 1)
    # One machine: both ranks on it.
    assert (comm.intra_rank, comm.intra_size, comm.inter_rank, comm.inter_size) == (rank, 2, 0, 1)
    assert comm.mpi_comm.Get_size() == 2

    # bcast_data: rank 0's values everywhere.
    model = Net()
    for _, p in model.namedparams():
        p.data[...] = rank + 1
    comm.bcast_data(model)
    assert all((p.data == 1).all() for p in model.params()), rank

    # allreduce_grad: every gradient replaced by the mean; one parameter has a gradient on rank 0
    # only (counts as zero on rank 1), another on no rank (stays without one).
    named = sorted(model.namedparams())
    for i, (path, p) in enumerate(named):
        if path == "/b/b":
            p.grad = None
            continue
        if path == "/a/b" and rank == 1:
            p.grad = None
            continue
        p.grad = numpy.full(p.data.shape, (rank + 1) * (i + 1), dtype=p.data.dtype)
    comm.allreduce_grad(model)
    for i, (path, p) in enumerate(named):
        if path == "/b/b":
            assert p.grad is None, (comm.name, path)
        elif path == "/a/b":
            numpy.testing.assert_array_equal(p.grad, numpy.full(p.data.shape, (i + 1) / 2.0))
        else:
            numpy.testing.assert_allclose(p.grad, numpy.full(p.data.shape, 1.5 * (i + 1)), rtol=1e-6)
            assert p.grad.dtype == p.data.dtype

    # A model that differs on rank 1: ValueError on both ranks, naming rank 1.
    other = chainer.Chain(a=L.Linear(3, 4 + rank))
    try:
        comm.bcast_data(other)
    except ValueError as error:
        assert "rank(s) 1" in str(error), error
    else:
        raise AssertionError("bcast_data accepted different models")


def main():
    comm = chainermn.create_communicator("naive")
    flat = chainermn.create_communicator("flat")
    rank = comm.rank
    for c in (comm, flat):
        check_communicator(c)

    # Objects.
    assert comm.bcast_obj({"from": rank} if rank == 0 else None) == {"from": 0}
    assert comm.bcast_obj("one" if rank == 1 else None, root=1) == "one"
    gathered = comm.gather_obj(("r", rank))
    assert gathered == ([("r", 0), ("r", 1)] if rank == 0 else None), gathered
    assert comm.allreduce_obj(rank + 1) == 3
    assert comm.allreduce_obj([rank]) == [0, 1]
    assert comm.allgather_obj(rank * 10) == [0, 10]

    # Arrays.
    x = numpy.arange(6, dtype=numpy.float32).reshape(2, 3) + 10 * rank
    numpy.testing.assert_array_equal(comm.bcast(x if rank == 0 else None), numpy.arange(6).reshape(2, 3))
    g = comm.gather(x, root=1)
    assert (g is None) == (rank == 0)
    if rank == 1:
        assert len(g) == 2 and (g[0] == x - 10).all() and (g[1] == x).all()
    ag = comm.allgather(numpy.array([rank], dtype=numpy.int64))
    assert [int(a[0]) for a in ag] == [0, 1]
    total = comm.allreduce(x)
    numpy.testing.assert_array_equal(total, 2 * numpy.arange(6).reshape(2, 3) + 10)
    assert total.dtype == numpy.float32
    piece = comm.scatter(numpy.array([[1, 2], [3, 4]]) if rank == 0 else None)
    assert piece.tolist() == [[1, 2], [3, 4]][rank]
    piece = comm.scatter((numpy.zeros(3), numpy.ones(5)) if rank == 1 else None, root=1)
    assert piece.shape == ((3,), (5,))[rank] and (piece == rank).all()
    got = comm.alltoall([numpy.full(2 + r, 10 * rank + r) for r in range(2)])
    assert [a.tolist() for a in got] == [[rank] * (2 + rank), [10 + rank] * (2 + rank)], got

    # Point to point: arrays, tuples of arrays, objects, tags.
    if rank == 0:
        comm.send(numpy.arange(4.0), dest=1, tag=3)
        comm.send((numpy.ones(2), numpy.zeros((2, 2))), 1, 4)
        comm.send_obj({"k": [1, 2]}, dest=1)
        big = comm.recv(1, 5)
        assert big.shape == (300000,) and float(big.sum()) == 300000.0
        try:
            comm.send(numpy.ones(1), dest=0, tag=0)
        except ValueError as error:
            assert "this process" in str(error)
        else:
            raise AssertionError("send to oneself accepted")
    else:
        assert comm.recv(0, 3).tolist() == [0.0, 1.0, 2.0, 3.0]
        pair = comm.recv(0, 4)
        assert isinstance(pair, tuple) and pair[1].shape == (2, 2)
        assert comm.recv_obj(0) == {"k": [1, 2]}
        comm.send(numpy.ones(300000), 0, 5)  # larger than an eager message

    # Refused arguments on one rank: it raises why, the other one at once, pointing to it.
    for call, own, other in [
        (lambda: comm.scatter((numpy.ones(1),) * 3 if rank == 0 else None), "3 arrays for 2 ranks", "root (rank 0)"),
        (lambda: comm.alltoall([numpy.ones(1)] * (2 + rank)), "3 arrays for 2 ranks", "rank 1 could not send"),
        (lambda: chainermn.scatter_dataset(None, comm), "was given no dataset", "root (rank 0)"),
    ]:
        try:
            call()
        except ValueError as error:
            refused_here = (rank == 0) if "rank 0" in other else (rank == 1)
            assert (own if refused_here else other) in str(error), error
        else:
            raise AssertionError(f"accepted: {own}")
    assert comm.allgather_obj(rank) == [0, 1]  # still in step

    # split: two one-rank communicators of the same kind.
    alone = flat.split(rank, 0)
    assert (alone.size, alone.rank, alone.name) == (1, 0, "flat")
    assert alone.allreduce_obj(rank + 5) == rank + 5

    check_datasets(comm)
    check_optimizer(comm)
    check_evaluator_and_persistents(comm)
    comm.mpi_comm.Barrier()
    print(f"ok {rank}", flush=True)


def check_datasets(comm):
    rank = comm.rank
    # An odd count: both ranks get ceil(7 / 2) = 4; the blocks share one example.
    data = list(range(100, 107)) if rank == 0 else None
    mine = chainermn.scatter_dataset(data, comm)
    assert mine == [[100, 101, 102, 103], [103, 104, 105, 106]][rank], mine
    # An array stays an array (of the rank's rows); from root 1, with root 0's argument ignored.
    arr = numpy.arange(20).reshape(10, 2) if rank == 1 else None
    mine = chainermn.scatter_dataset(arr, comm, root=1)
    assert isinstance(mine, numpy.ndarray) and mine.tolist() == numpy.arange(20).reshape(10, 2)[5 * rank:5 * rank + 5].tolist()
    # Shuffled with a seed: the same permutation for aligned datasets, and together all examples.
    xs = numpy.arange(9) if rank == 0 else None
    ys = [("y", i) for i in range(9)] if rank == 0 else None
    mx = chainermn.scatter_dataset(xs, comm, shuffle=True, seed=7)
    my = chainermn.scatter_dataset(ys, comm, shuffle=True, seed=7)
    assert [y[1] for y in my] == mx.tolist()
    everything = comm.allgather_obj(mx.tolist())
    order = numpy.random.RandomState(7).permutation(9).tolist()
    assert everything == [order[0:5], order[4:9]], everything
    # Pairs (a Chainer dataset of (x, t) examples) come back as a list of pairs.
    pairs = [(numpy.full(2, i, "f"), i) for i in range(4)] if rank == 0 else None
    mine = chainermn.scatter_dataset(pairs, comm)
    assert [t for _, t in mine] == [[0, 1], [2, 3]][rank] and mine[0][0].dtype == numpy.float32


def check_optimizer(comm):
    rank = comm.rank
    numpy.random.seed(rank)  # different weights per rank
    model = Net()
    opt = chainer.optimizers.SGD(lr=1.0)
    opt.setup(model)  # set up before wrapping: wrapping broadcasts
    mn = chainermn.create_multi_node_optimizer(opt, comm)
    weights = comm.allgather_obj([p.data.copy() for _, p in sorted(model.namedparams())])
    assert all((a == b).all() for a, b in zip(*weights))
    # Attributes pass through to the real optimizer, both ways.
    assert mn.lr == 1.0 and mn.target is model
    mn.lr = 0.5
    assert opt.lr == 0.5
    before = [p.data.copy() for _, p in sorted(model.namedparams())]
    for _, p in sorted(model.namedparams()):
        p.grad = numpy.full(p.data.shape, rank * 2.0, "f")  # mean 1.0
    mn.update()
    for (path, p), b in zip(sorted(model.namedparams()), before):
        numpy.testing.assert_allclose(p.data, b - 0.5, rtol=1e-6, err_msg=path)
    assert opt.t == 1

    # update(lossfun, *args): zerograds, loss, backward, mean gradient, step.
    import plait.chainer.functions as F

    lin = L.Linear(3, 1)
    mn = chainermn.create_multi_node_optimizer(chainer.optimizers.SGD(lr=0.1), comm)
    mn.setup(lin)
    w0, b0 = lin.W.data.copy(), lin.b.data.copy()
    x = numpy.full((1, 3), rank + 1.0, "f")
    mn.update(lambda v: F.sum(lin(v)), chainer.Variable(x))
    # d/dW of sum(W x + b) is x: mean over ranks (1 + 2) / 2 = 1.5.
    numpy.testing.assert_allclose(lin.W.data, w0 - 0.1 * 1.5, rtol=1e-6)
    numpy.testing.assert_allclose(lin.b.data, b0 - 0.1, rtol=1e-6)


def check_evaluator_and_persistents(comm):
    rank = comm.rank

    class Evaluator:  # what a Chainer Evaluator offers: evaluate() and __call__ reporting it
        def evaluate(self):
            return {"main/loss": chainer.Variable(numpy.array(rank + 1.0, "f")), "main/acc": 0.5 * rank,
                    "vec": numpy.array([rank, 2.0 * rank])}

        def __call__(self, trainer=None):
            return self.evaluate()

    ev = chainermn.create_multi_node_evaluator(Evaluator(), comm)
    result = ev()
    assert float(result["main/loss"]) == 1.5 and result["main/acc"] == 0.25, result
    assert result["vec"].tolist() == [0.5, 1.0]
    assert ev.evaluate()["main/acc"] == 0.25

    bad = chainermn.create_multi_node_evaluator(lambda: {f"k{rank}": 1.0}, comm)
    try:
        bad()
    except ValueError as error:
        assert "rank(s) 1" in str(error), error
    else:
        raise AssertionError("different keys accepted")

    model = Net()
    model.bn.avg_mean[...] = rank * 2.0
    model.bn.N = rank
    chainermn.extensions.AllreducePersistent(model, comm)()
    assert (model.bn.avg_mean == 1.0).all() and model.bn.N == rank


if __name__ == "__main__":
    main()
