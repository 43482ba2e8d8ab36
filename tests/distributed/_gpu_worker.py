"""Run by tests/distributed/test_gpu.py under mpiexec: the NCCL communicator on the GPU(s) here.

argv: MODE
  one   : 1 rank. NCCL reduces and broadcasts GPU buckets in place (a sum over one rank is the
          identity), numpy arrays in the same call go over MPI, dtypes float16/32/64.
  pair  : 2 ranks. With two or more GPUs, the mean of both ranks' GPU gradients (in place,
          None where no rank had one) and rank 1 receiving rank 0's arrays; with one GPU, every
          rank refuses to put two ranks on it, naming both.
Prints "ok <rank>" when every check passed.
"""
import sys

import cupy
import numpy

from plait.distributed import NcclCommunicator


def main():
    mode = sys.argv[1]
    n_gpus = cupy.cuda.runtime.getDeviceCount()
    if mode == "pair" and n_gpus < 2:
        try:
            NcclCommunicator()
        except ValueError as error:
            message = str(error)
            assert "ranks 0 and 1 are both on GPU 0" in message and "one GPU per rank" in message, message
            print("ok refused", flush=True)
            return
        raise AssertionError("two ranks on one GPU were not refused")
    comm = NcclCommunicator()
    rank, size = comm.rank, comm.size
    assert cupy.cuda.Device().id == comm.device == comm.local_rank % n_gpus
    if mode == "one":
        assert size == 1
        like = [cupy.arange(6, dtype="float32").reshape(2, 3), cupy.ones(5, dtype="float64"),
                cupy.full(3, 2.5, dtype="float16"), numpy.arange(4, dtype="float32")]
        before = [a.copy() for a in like]
        plan = comm._plan(like, with_flags=True)
        assert {(b.on_gpu, b.dtype.str) for b in plan} == {(True, "<f4"), (True, "<f8"), (True, "<f2"), (False, "<f4")}
        for bucket in plan:
            for index, offset, n in bucket.items:
                bucket.buffer[offset:offset + n] = like[index].reshape(-1)
        comm._reduce_buckets(plan, "sum")  # through NCCL (GPU buckets) and MPI (the host one)
        comm._reduce_buckets(plan, 0)      # NCCL broadcast from rank 0
        for bucket in plan:
            for index, offset, n in bucket.items:
                got = bucket.buffer[offset:offset + n].reshape(like[index].shape)
                assert type(got) is type(before[index])
                assert bool((got == before[index]).all()), (index, got, before[index])
        grads = [a * 2 for a in like]
        out = comm.allreduce_mean(grads, like)
        assert all(a is b for a, b in zip(out, grads))  # one rank: nothing to average
    else:
        assert size == 2
        like = [cupy.zeros((3, 4), "float32"), cupy.zeros(7, "float64"), cupy.zeros(2, "float32")]
        grads = [cupy.full((3, 4), rank + 1.0, "float32"), cupy.full(7, 4.0 * rank, "float64") if rank else None, None]
        out = comm.allreduce_mean(grads, like, labels=["W", "b", "unused"])
        assert out[0] is grads[0] and bool((grads[0] == 1.5).all()), grads[0]
        assert type(out[1]) is cupy.ndarray and out[1].dtype == numpy.float64 and bool((out[1] == 2.0).all())
        assert out[2] is None
        arrays = [cupy.full(5, float(rank), "float32"), cupy.full((2, 2), 10.0 + rank)]
        comm.bcast_arrays(arrays, root=0)
        assert bool((arrays[0] == 0).all()) and bool((arrays[1] == 10).all())
    comm.barrier()
    comm.close()
    print(f"ok {rank}", flush=True)


if __name__ == "__main__":
    main()
