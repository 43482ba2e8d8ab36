"""Run by tests/distributed/test_mpi.py under `mpiexec -n 2`: the communicator's collectives,
checked on every rank against what they must give. Prints 'ok <rank>' when every check passed."""
import numpy

from plait.api import Relu, Softmax, chain
from plait.distributed import Communicator, get_communicator


def mean_of(fn, size):
    return sum(fn(r) for r in range(size)) / size


def main():
    comm = get_communicator()
    assert isinstance(comm, Communicator), comm
    rank, size = comm.rank, comm.size
    assert size == 2

    # Several buckets (PLAIT_DIST_BUCKET_MB is tiny in this run) and two dtypes.
    X = numpy.zeros((2, 20), "f")
    model = chain(Relu(30), Relu(30), Softmax(3)).initialize(X=X, Y=numpy.zeros((2, 3), "f"))
    nodes = [n for n in model.walk() if n.param_names]
    wide = nodes[0]
    wide.set_param("b", wide.get_param("b").astype("float64"))
    entries = __import__("plait.distributed._comm", fromlist=["x"])._param_entries(model)
    plan = comm._plan([param for _node, _name, param in entries], True)
    assert len(plan) >= 3 and {b.dtype.str for b in plan} == {"<f4", "<f8"}, [(b.dtype, b.n_values) for b in plan]
    # Both ranks run on this machine: the buckets are shared memory unless PLAIT_DIST_SHM=0.
    want_shared = __import__("os").environ.get("PLAIT_DIST_SHM", "1") != "0"
    assert all((b.shared is not None) == want_shared for b in plan), [b.shared for b in plan]

    def grad_value(r, i, name, shape, dtype):
        return (numpy.arange(numpy.prod(shape)).reshape(shape) * (r + 1) + 7 * i + len(name)).astype(dtype)

    skip = (nodes[1], "W")  # rank 1 has no gradient for it: counts as zero there
    for i, node in enumerate(nodes):
        for name in node.param_names:
            p = node.get_param(name)
            if node is nodes[-1] and name == "b":
                continue  # no rank has a gradient for it: stays without one
            if (node, name) == skip and rank == 1:
                continue
            node.set_grad(name, grad_value(rank, i, name, p.shape, p.dtype))
    comm.allreduce_grads(model)
    for i, node in enumerate(nodes):
        for name in node.param_names:
            p = node.get_param(name)
            if node is nodes[-1] and name == "b":
                assert not node.has_grad(name), "a parameter no rank had a gradient for got one"
                continue
            if (node, name) == skip:
                expected = grad_value(0, i, name, p.shape, p.dtype) / 2
            else:
                expected = mean_of(lambda r: grad_value(r, i, name, p.shape, p.dtype), size)
            got = node.get_grad(name)
            assert got.dtype == p.dtype and got.shape == p.shape, (name, got.dtype, got.shape)
            numpy.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=f"{i} {name}")

    # bcast_params: rank 0's values everywhere, dtypes kept.
    for node in nodes:
        for name in node.param_names:
            p = node.get_param(name)
            p[...] = rank + 1
    comm.bcast_params(model)
    for node in nodes:
        for name in node.param_names:
            assert (node.get_param(name) == 1).all(), (rank, name)

    # A model that differs on one rank: ValueError on every rank, naming the rank.
    other = chain(Relu(30 + rank), Softmax(3)).initialize(X=X, Y=numpy.zeros((2, 3), "f"))
    try:
        comm.bcast_params(other)
    except ValueError as error:
        assert "rank(s) 1" in str(error), error
    else:
        raise AssertionError("bcast_params accepted different models")

    # Different bucket sizes on the ranks: refused before any gradient is reduced.
    saved = comm.bucket_bytes
    comm.bucket_bytes = saved * (rank + 1)
    try:
        comm.bcast_params(model)
    except ValueError as error:
        assert "PLAIT_DIST_BUCKET_MB" in str(error), error
    else:
        raise AssertionError("bcast_params accepted different bucket sizes")
    comm.bucket_bytes = saved

    # The array-level collectives the Chainer face builds on: None in, mean or None out; a
    # read-only gradient comes back as a new array, a writable one is overwritten in place.
    like = [numpy.zeros((3, 2), "f"), numpy.zeros(4, "float64"), numpy.zeros(2, "f")]
    mine = numpy.full((3, 2), rank + 1.0, "f")
    frozen = numpy.full(4, 2.0 * rank, "float64")
    frozen.flags.writeable = False
    out = comm.allreduce_mean([mine, frozen if rank == 0 else None, None], like, labels=["a", "b", "c"])
    assert out[0] is mine and (mine == 1.5).all(), mine
    assert out[1] is not frozen and out[1].dtype == numpy.float64 and (out[1] == 0.0).all(), out[1]
    assert out[2] is None
    arrays = [numpy.full(5, float(rank), "f"), numpy.full((2, 2), 10.0 + rank)]
    got = comm.bcast_arrays(arrays, root=1)
    assert got[0] is arrays[0] and (got[0] == 1).all() and (got[1] == 11).all(), got
    try:
        comm.allreduce_mean([None], like)
    except ValueError as error:
        assert "1 gradients for 3 parameters" in str(error), error
    else:
        raise AssertionError("allreduce_mean accepted mismatched lists")

    # Overlapped reduction (DataParallel's default): buckets sent during backprop give exactly
    # what the reduction after backprop gives; a rank with no forward (an empty share) joins in;
    # gradient accumulation over two begin_updates is refused on every rank.
    from plait.api import SGD
    from plait.distributed import DataParallel

    def mlp():
        numpy.random.seed(7)
        return chain(Relu(24), Relu(24), Softmax(3)).initialize(X=X, Y=numpy.zeros((2, 3), "f"))

    Xb = numpy.random.default_rng(rank).standard_normal((6, 20)).astype("f")
    results = []
    for mode in ("overlap", "plain", "raw"):
        m = mlp()
        dp = DataParallel(m, comm, overlap=mode == "overlap")
        for _ in range(3):
            # "raw": the model's own begin_update, the wrapper only for finish_update: the sums
            # are divided after the reduction instead of before it.
            Yh, backprop = (m if mode == "raw" else dp).begin_update(Xb)
            backprop(Yh - 0.5)
            dp.finish_update(SGD(0.1))
        results.append([n.get_param(k).copy() for n in m.walk() for k in n.param_names])
        if mode == "overlap":
            assert dp.overlapped_buckets >= 2, dp.overlapped_buckets  # sent during backprop
        # After the first update every gradient is a view of the wrapper's buckets.
        buffers = [b.buffer for b in dp._layout.plan]
        for n in m.walk():
            for k in n.param_names:
                assert any(numpy.shares_memory(n.get_grad(k), buf) for buf in buffers), (mode, k)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert numpy.array_equal(a, b), "overlapped, plain and raw reductions differ"
    class Recorder:  # an optimizer that keeps the gradients it is given, and changes nothing
        def __init__(self):
            self.seen = {}

        def __call__(self, key, param, grad):
            self.seen[key] = grad.copy()
            return param, grad

    m = mlp()
    dp = DataParallel(m, comm)
    Yh, backprop = dp.begin_update(Xb)  # one step on both ranks first: the gradients are views now
    backprop(Yh - 0.5)
    dp.finish_update(SGD(0.0))
    expected = {}
    if rank == 0:
        Yh, backprop = dp.begin_update(Xb)
        backprop(Yh - 0.5)
        # The wrapper's backprop divides by the number of ranks: the local gradients are
        # already rank 0's share of the mean (rank 1 adds none).
        expected = {(n.id, k): n.get_grad(k).copy() for n in m.walk() for k in n.param_names if n.has_grad(k)}
        raw = mlp()
        raw_Yh, raw_backprop = raw.begin_update(Xb)
        raw_backprop(raw_Yh - 0.5)
        for (n, k), (rn, rk) in zip([(n, k) for n in m.walk() for k in n.param_names],
                                    [(n, k) for n in raw.walk() for k in n.param_names]):
            numpy.testing.assert_allclose(expected[(n.id, k)], rn.get_grad(rk) / 2, rtol=1e-6)
    recorder = Recorder()
    dp.finish_update(recorder)
    if rank == 0:
        assert set(recorder.seen) == set(expected) and expected
        for key, value in expected.items():
            numpy.testing.assert_allclose(recorder.seen[key], value, rtol=1e-6)
    assert len(recorder.seen) == len(list(p for n in m.walk() for p in n.param_names))  # rank 1 too
    Yh, backprop = dp.begin_update(Xb)
    backprop(Yh)
    try:
        dp.begin_update(Xb)
    except RuntimeError as error:
        assert "overlap=False" in str(error), error
    else:
        raise AssertionError("gradient accumulation under overlap was not refused")
    dp.finish_update(SGD(0.0))  # the ranks are still in step afterwards

    # Point-to-point messages, scatter and all-to-all (public methods, bounded by the timeout).
    # 1 MB arrays are past MPI's eager limit: their sends complete only once received.
    big = numpy.arange(2 ** 18, dtype="float32") + rank
    strided = numpy.arange(40.0).reshape(8, 5)[:, ::2] + rank  # not contiguous: pickled in band
    frozen = numpy.full(70000, rank, "int8")
    frozen.flags.writeable = False
    if rank == 0:
        comm.send({"n": 1, "list": [1, 2]}, dest=1)  # tag 0, small
        comm.send(("tagged", big, strided, frozen), dest=1, tag=7)
        got = comm.recv(1, tag=5)
        assert got.dtype == numpy.float32 and numpy.array_equal(got, big + 1), got[:4]
        comm.send(b"x" * 3_000_000, 1, tag=comm._tag_ub)  # the largest tag; bytes in band
    else:
        # Tag 7 first although tag 0 was sent first: tags are matched, not the order.
        kind, a, s, f = comm.recv(0, tag=7)
        assert kind == "tagged" and numpy.array_equal(a, big - 1) and a.flags.writeable, a[:4]
        assert numpy.array_equal(s, strided - 1) and numpy.array_equal(f, frozen - 1) and f.dtype == numpy.int8
        assert comm.recv(0) == {"n": 1, "list": [1, 2]}  # any tag: the one left
        comm.send(big, 0, tag=5)
        assert comm.recv(0, None) == b"x" * 3_000_000
    comm.send(("me", rank), rank, tag=2)  # to oneself: kept for one's own recv
    assert comm.recv(rank, 2) == ("me", rank)
    try:
        comm.recv(rank, 2)
    except RuntimeError as error:
        assert "no message with tag 2" in str(error), error
    else:
        raise AssertionError("recv from oneself with nothing sent did not refuse")
    for call, words in [
        (lambda: comm.send(1, dest=2), ["send: dest", "0..1", "got 2"]),
        (lambda: comm.send(1, dest=-1), ["send: dest", "got -1"]),
        (lambda: comm.recv(source="0"), ["recv: source", "got '0'"]),
        (lambda: comm.send(1, 1 - rank, tag=-3), ["send: tag", "got -3"]),
        (lambda: comm.send(1, 1 - rank, tag=comm._tag_ub + 1), ["send: tag", "TAG_UB", str(comm._tag_ub)]),
        (lambda: comm.recv(1 - rank, tag=1.5), ["recv: tag", "or None for any tag", "got 1.5"]),
        (lambda: comm.scatter([1, 2], root=2), ["scatter: root", "0..1", "got 2"]),
    ]:
        try:
            call()
        except ValueError as error:
            assert all(w in str(error) for w in words), (words, error)
        else:
            raise AssertionError(f"accepted: {words}")
    # Nothing above counted as a collective: the ranks' collective numbers are still the same.
    assert len(set(comm.allgather(comm._seq))) == 1
    shares = [{"to": r, "data": bytes(1_000_000 * (r + 1))} for r in range(size)]
    got = comm.scatter(shares if rank == 1 else None, root=1)
    assert got["to"] == rank and len(got["data"]) == 1_000_000 * (rank + 1)
    if rank == 1:
        assert got is shares[1]  # the root's own share is not sent, nor copied
    assert comm.scatter((["a"], ["b"]) if rank == 0 else "ignored").pop() == "ab"[rank]
    sent = [(f"{rank}->{r}", numpy.full(2 ** 18, r + 10 * rank, "float32")) for r in range(size)]
    got = comm.alltoall(sent)
    assert [g[0] for g in got] == [f"{r}->{rank}" for r in range(size)] and got[rank] is sent[rank]
    assert all((g[1] == rank + 10 * r).all() for r, g in enumerate(got))
    # Refused arguments on one rank: it raises its own error, the other one pointing to it.
    try:
        comm.scatter([1, 2, 3] if rank == 0 else None)
    except ValueError as error:
        expected = "one item per rank (2)" if rank == 0 else "the root (rank 0) could not scatter"
        assert expected in str(error), error
    else:
        raise AssertionError("scatter of 3 items to 2 ranks was accepted")
    try:
        comm.alltoall([1, 2] if rank == 0 else [1, 2, 3])
    except ValueError as error:
        expected = "rank 1 could not send" if rank == 0 else "alltoall: objs must hold one item per rank (2)"
        assert expected in str(error), error
    else:
        raise AssertionError("alltoall of 3 items among 2 ranks was accepted")
    try:
        comm.alltoall([lambda: 0, 1] if rank == 1 else [0, 1])  # rank 1's item for rank 0 does not pickle
    except Exception as error:
        assert rank == 1 or "rank 1 could not send" in str(error), error
    else:
        raise AssertionError("alltoall of an unpicklable item was accepted")
    assert comm.allgather(rank) == [0, 1]  # still in step

    # Objects and scalars.
    assert comm.allreduce_scalar(rank + 1.5, op="sum") == 4.0
    assert comm.allreduce_scalar(rank + 1.5, op="mean") == 2.0
    assert comm.allreduce_scalar(rank, op="max") == 1.0 and comm.allreduce_scalar(rank, op="min") == 0.0
    gathered = comm.gather({"rank": rank, "data": "x" * (rank * 1000)}, root=1)
    if rank == 1:
        assert [g["rank"] for g in gathered] == [0, 1] and len(gathered[1]["data"]) == 1000
    else:
        assert gathered is None
    assert comm.allgather(rank * 10) == [0, 10]
    assert comm.bcast({"from": rank}, root=1) == {"from": 1}
    comm.barrier()

    # One parameter at a time (ChainerMN's naive communicator), more shapes than the old plan
    # cache held: the second step makes no new buckets (no shared mapping made again).
    from plait.distributed import _shm

    made = []
    create = _shm.create_mapping
    _shm.create_mapping = lambda *a, **k: made.append(1) or create(*a, **k)
    try:
        shapes = [(i + 1, 3) for i in range(40)]
        for step in range(2):
            before = len(made)
            for shape in shapes:
                g = numpy.full(shape, rank + 1.0, "f")
                assert numpy.all(comm.allreduce_mean([g], [g])[0] == 1.5)
            if step == 1:
                assert len(made) == before, (before, len(made))
        assert len(made) == (40 if want_shared else 0), len(made)
    finally:
        _shm.create_mapping = create
    print(f"ok {rank}", flush=True)


if __name__ == "__main__":
    main()
