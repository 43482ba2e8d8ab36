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
    for overlap in (True, False):
        m = mlp()
        dp = DataParallel(m, comm, overlap=overlap)
        for _ in range(3):
            Yh, backprop = dp.begin_update(Xb)
            backprop(Yh - 0.5)
            dp.finish_update(SGD(0.1))
        results.append([n.get_param(k).copy() for n in m.walk() for k in n.param_names])
        if overlap:
            assert dp.overlapped_buckets >= 2, dp.overlapped_buckets  # sent during backprop
    for a, b in zip(*results):
        assert numpy.array_equal(a, b), "overlapped and plain reductions differ"
    class Recorder:  # an optimizer that keeps the gradients it is given, and changes nothing
        def __init__(self):
            self.seen = {}

        def __call__(self, key, param, grad):
            self.seen[key] = grad.copy()
            return param, grad

    m = mlp()
    dp = DataParallel(m, comm)
    expected = {}
    if rank == 0:
        Yh, backprop = dp.begin_update(Xb)
        backprop(Yh - 0.5)
        expected = {(n.id, k): n.get_grad(k) / 2 for n in m.walk() for k in n.param_names if n.has_grad(k)}
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
    print(f"ok {rank}", flush=True)


if __name__ == "__main__":
    main()
