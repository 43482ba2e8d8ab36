"""plait.distributed in one process: shard, the one-process communicator, bucket planning."""
import numpy
import pytest

from plait.api import Relu, Softmax, chain
from plait.distributed import DataParallel, LocalCommunicator, shard
from plait.distributed._comm import _make_plan, _param_entries, _timeout_from_env


def test_shard_is_strided_and_even():
    data = list(range(11))
    parts = [shard(data, r, 3) for r in range(3)]
    assert parts == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    assert shard(numpy.arange(4), 1, 2).tolist() == [1, 3]
    with pytest.raises(ValueError, match="rank must be in 0..1"):
        shard(data, 2, 2)
    with pytest.raises(ValueError, match="size must be at least 1"):
        shard(data, 0, 0)
    with pytest.raises(TypeError, match="sized, sliceable"):
        shard(iter(data), 0, 1)


def test_buckets_pack_params_contiguously_under_the_cap():
    X = numpy.zeros((2, 30), "f")
    model = chain(Relu(40), Relu(40), Softmax(5)).initialize(X=X, Y=numpy.zeros((2, 5), "f"))
    entries = _param_entries(model)
    cap = 40 * 41 * 4  # about one layer per bucket
    plan = _make_plan(entries, cap, with_flags=True)
    assert len(plan) > 1
    seen = sorted(index for bucket in plan for index, _, _ in bucket.items)
    assert seen == list(range(len(entries)))
    for bucket in plan:
        offsets = [offset for _, offset, _ in bucket.items]
        assert offsets == sorted(offsets) and bucket.buffer.dtype == numpy.float32
        if len(bucket.items) > 1:
            assert bucket.n_values * 4 <= cap
    assert plan[-1].flags_at == plan[-1].n_values and plan[-1].buffer.size == plan[-1].n_values + len(entries)
    assert len(_make_plan(entries, 25 * 2**20, with_flags=False)) == 1


def test_timeout_env_is_checked(monkeypatch):
    monkeypatch.setenv("PLAIT_DIST_TIMEOUT", "2.5")
    assert _timeout_from_env() == 2.5
    for bad in ("soon", "0", "-1", "nan", "inf"):
        monkeypatch.setenv("PLAIT_DIST_TIMEOUT", bad)
        with pytest.raises(ValueError, match="PLAIT_DIST_TIMEOUT"):
            _timeout_from_env()


def test_local_communicator_collectives_are_identities():
    comm = LocalCommunicator()
    assert comm.allreduce_scalar(3.0, op="max") == 3.0 and comm.bcast("x") == "x" and comm.allgather(1) == [1]
    with pytest.raises(ValueError, match="op must be one of"):
        comm.allreduce_scalar(1.0, op="prod")


def test_bucket_env_is_checked(monkeypatch):
    from plait.distributed._comm import _bucket_mb_from_env

    monkeypatch.setenv("PLAIT_DIST_BUCKET_MB", "0.5")
    assert _bucket_mb_from_env() == 0.5
    for bad in ("big", "0", "-2", "nan", "inf"):
        monkeypatch.setenv("PLAIT_DIST_BUCKET_MB", bad)
        with pytest.raises(ValueError, match="PLAIT_DIST_BUCKET_MB"):
            _bucket_mb_from_env()


def test_local_communicator_refuses_what_mpi_would():
    class FakeShim:
        pass

    model = chain(Relu(3), Relu(2)).initialize(X=numpy.zeros((2, 2), "f"))
    model.layers[0]._shims.append(FakeShim())
    with pytest.raises(NotImplementedError, match="shims"):
        LocalCommunicator().bcast_params(model)
    with pytest.raises(NotImplementedError, match="shims"):
        DataParallel(model, LocalCommunicator())


def test_local_communicator_messages_scatter_and_alltoall():
    comm = LocalCommunicator()
    assert comm.local_size == 1
    # send to oneself: a copy kept per tag, received in the order sent; None takes any tag.
    array = numpy.arange(5.0)
    comm.send({"a": array}, 0, tag=3)
    comm.send("first", 0)
    comm.send("second", dest=0)
    array[0] = 99.0
    got = comm.recv(0, tag=3)
    assert got["a"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] and got["a"] is not array
    assert comm.recv(0) == "first" and comm.recv(source=0, tag=0) == "second"
    with pytest.raises(RuntimeError, match="no message with any tag"):
        comm.recv(0)
    comm.send(1, 0, tag=4)
    with pytest.raises(RuntimeError, match="no message with tag 5"):
        comm.recv(0, tag=5)
    assert comm.recv(0, 4) == 1
    with pytest.raises(Exception):
        comm.send(lambda: 0, 0)  # not picklable, as it would not be under MPI
    items = [{"x": 1}]
    assert comm.scatter(items) is items[0] and comm.scatter(items, root=0) is items[0]
    assert comm.alltoall(("only",)) == ["only"] and comm.alltoall(numpy.array([7])) == [7]


@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda c: c.send(1, dest=1), ValueError, "send: dest must be a rank in 0..0, got 1"),
        (lambda c: c.send(1, dest=True), ValueError, "send: dest must be a rank in 0..0, got True"),
        (lambda c: c.recv(source=-1), ValueError, "recv: source must be a rank in 0..0, got -1"),
        (lambda c: c.send(1, 0, tag=-1), ValueError, "send: tag must be an int in 0..32767"),
        (lambda c: c.send(1, 0, tag=32768), ValueError, "TAG_UB"),
        (lambda c: c.send(1, 0, tag=None), ValueError, "send: tag must be an int in 0..32767"),
        (lambda c: c.recv(0, tag="any"), ValueError, "or None for any tag; got 'any'"),
        (lambda c: c.scatter([1], root=1), ValueError, "scatter: root must be a rank in 0..0, got 1"),
        (lambda c: c.scatter([1, 2]), ValueError, r"scatter: objs must hold one item per rank \(1\) on the root \(rank 0\); got 2"),
        (lambda c: c.scatter(None), TypeError, "scatter: objs must be a sequence"),
        (lambda c: c.alltoall([]), ValueError, r"alltoall: objs must hold one item per rank \(1\) on every rank; got 0"),
        (lambda c: c.alltoall("a"), TypeError, "alltoall: objs must be a sequence"),
        (lambda c: c.alltoall({0: "a"}), TypeError, "got dict"),
    ],
)
def test_local_communicator_checks_message_arguments(call, error, words):
    with pytest.raises(error, match=words):
        call(LocalCommunicator())
