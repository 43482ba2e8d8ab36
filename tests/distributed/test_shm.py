"""The shared-memory sum of plait/distributed/_shm.py, played by several "ranks" in one process.

Every rank's SharedBucket maps the same memory (here one anonymous mapping); the ranks take
turns calling Test() on their sums, as their polling loops would. The real thing across
processes runs in test_mpi.py (PLAIT_DIST_SHM=1 and 0).
"""
import mmap

import numpy
import pytest

from plait.distributed import _shm

pytest.importorskip("plait.distributed._shmsync")


def _ranks(size, n_values, dtype="float32"):
    mapping = mmap.mmap(-1, _shm.SharedBucket.nbytes(size, n_values, numpy.dtype(dtype)))
    return [_shm.SharedBucket(mapping, r, size, n_values, numpy.dtype(dtype)) for r in range(size)]


def _values(size, n_values, dtype, seed):
    rng = numpy.random.default_rng(seed)
    return [rng.standard_normal(n_values).astype(dtype) for _ in range(size)]


def _run(buckets, order=None):
    """Start every rank's sum, then poll round-robin (in `order`) until all are done."""
    sums = [b.start() for b in buckets]
    order = order or list(range(len(buckets)))
    done = [False] * len(buckets)
    for _ in range(20):
        for r in order:
            if not done[r]:
                done[r] = sums[r].Test()
        if all(done):
            return
    raise AssertionError(f"not all ranks finished: {done}")


@pytest.mark.parametrize("size", [2, 3, 4])
@pytest.mark.parametrize("n_values", [1, 15, 16, 1000, 4099])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_rank_gets_the_same_sum_in_rank_order(size, n_values, dtype):
    buckets = _ranks(size, n_values, dtype)
    values = _values(size, n_values, dtype, seed=size * 1000 + n_values)
    for b, v in zip(buckets, values):
        b.buffer[...] = v
    _run(buckets, order=list(reversed(range(size))))
    want = values[0] + values[1]
    for v in values[2:]:
        want = want + v
    for b in buckets:
        # Bit for bit: each slice is summed once, in rank order, and copied to the others.
        assert b.buffer.tobytes() == want.tobytes()


def test_slices_cover_the_bucket_once_and_are_aligned():
    for size in (2, 3, 5):
        for n in (1, 17, 160, 161, 10_000):
            bounds = _ranks(size, n)[0].bounds
            assert bounds[0][0] == 0 and bounds[-1][1] == n
            for (lo, hi), (lo2, _hi2) in zip(bounds, bounds[1:]):
                assert lo <= hi == lo2
            assert all(lo % 16 == 0 for lo, hi in bounds if lo < hi)


def test_a_rank_waits_for_the_others_in_each_phase():
    a, b = _ranks(2, 64)
    a.buffer[...] = 1.0
    b.buffer[...] = 2.0
    sum_a = a.start()
    # b has not said its gradients are written: a must not read them yet.
    assert not sum_a.Test() and not sum_a.Test()
    assert numpy.all(a.buffer == 1.0)
    sum_b = b.start()
    (lo, hi), (lo2, hi2) = a.bounds
    assert not sum_a.Test()  # a summed its half into both buffers; waits for b's half
    assert numpy.all(a.buffer[lo:hi] == 3.0) and numpy.all(b.buffer[lo:hi] == 3.0)
    assert numpy.all(a.buffer[lo2:hi2] == 1.0) and numpy.all(b.buffer[lo2:hi2] == 2.0)
    assert sum_b.Test()  # b sums its half into both: every slice is done
    assert numpy.all(b.buffer == 3.0)
    assert sum_a.Test()
    assert numpy.all(a.buffer == 3.0)


def test_repeated_sums_use_fresh_values_each_time():
    buckets = _ranks(3, 100)
    for step in range(1, 5):
        for r, bucket in enumerate(buckets):
            bucket.buffer[...] = step * (r + 1)
        _run(buckets)
        for bucket in buckets:
            assert numpy.all(bucket.buffer == step * 6)


def test_test_all_mixes_shared_sums_and_mpi_requests():
    a, b = _ranks(2, 32)
    a.buffer[...] = 1
    b.buffer[...] = 1
    calls = []

    def mpi_testall(requests):
        calls.append(list(requests))
        return True

    sums = [a.start(), b.start()]
    other = object()
    while not _shm.test_all(sums + [other], mpi_testall):
        pass
    assert calls and all(c == [other] for c in calls)
    assert numpy.all(a.buffer == 2) and numpy.all(b.buffer == 2)


@pytest.mark.parametrize("value,want", [("1", True), ("on", True), ("", True), ("0", False), ("off", False)])
def test_switch(monkeypatch, value, want):
    monkeypatch.setenv("PLAIT_DIST_SHM", value)
    assert _shm.enabled_by_env() is want


def test_a_bad_switch_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("PLAIT_DIST_SHM", "maybe")
    with pytest.raises(ValueError, match="PLAIT_DIST_SHM.*'maybe'"):
        _shm.enabled_by_env()


class _OneRank:
    """The two collectives create_mapping uses, for a world of one rank."""

    rank, size = 0, 1

    def bcast(self, obj, root=0):
        return obj

    def allreduce_scalar(self, value, op="sum"):
        return value


def test_the_mapping_is_unlinked_once_mapped(monkeypatch, tmp_path):
    monkeypatch.setattr(_shm, "SHM_DIR", str(tmp_path))
    mapping = _shm.create_mapping(_OneRank(), 8192)
    assert mapping is not None and len(mapping) == 8192
    assert list(tmp_path.iterdir()) == []  # nothing left behind, whatever happens next
    mapping[:4] = b"abcd"
    assert mapping[:4] == b"abcd"


def test_no_shared_memory_means_none_and_a_warning_naming_why(monkeypatch, tmp_path):
    missing = tmp_path / "no-such-dir"
    monkeypatch.setattr(_shm, "SHM_DIR", str(missing))
    with pytest.warns(RuntimeWarning, match="no-such-dir.*gradients go through MPI"):
        assert _shm.create_mapping(_OneRank(), 8192) is None


def test_a_full_shm_is_refused_up_front_not_by_sigbus(monkeypatch, tmp_path):
    import os

    def full(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_shm, "SHM_DIR", str(tmp_path))
    monkeypatch.setattr(os, "posix_fallocate", full, raising=False)
    with pytest.warns(RuntimeWarning, match="No space left"):
        assert _shm.create_mapping(_OneRank(), 1 << 20) is None
    assert list(tmp_path.iterdir()) == []
