"""Run with PLAIT_ISA set: compute one output of every compiled CPU kernel family on fixed
inputs and save them to the .npz named on the command line (tests/backends/test_isa.py compares
the builds). Kept to the public Ops calls, so each output is what a user gets."""
import sys

import numpy

from plait.backends import NumpyOps
from plait.backends import _kernels_cpu


def outputs():
    ops = NumpyOps()
    rng = numpy.random.default_rng(1234)
    out = {}
    for dtype in ("float32", "float64"):
        f = lambda *shape: rng.standard_normal(shape).astype(dtype)  # noqa: E731
        X = f(97, 64)
        dY = f(97, 64)
        for name in ("sigmoid", "gelu", "swish", "mish", "dish", "relu", "hard_swish", "gelu_approx"):
            Y = out[f"{name}/{dtype}"] = getattr(ops, name)(X.copy())
            backprop = getattr(ops, f"backprop_{name}")
            if name == "swish":
                out[f"backprop_{name}/{dtype}"] = backprop(dY.copy(), X.copy(), Y.copy())
            elif name in ("sigmoid", "relu"):  # these take the output
                out[f"backprop_{name}/{dtype}"] = backprop(dY.copy(), Y.copy())
            else:
                out[f"backprop_{name}/{dtype}"] = backprop(dY.copy(), X.copy())
        out[f"softmax/{dtype}"] = ops.softmax(f(33, 1777))
        Y, which = ops.maxout(f(97, 48, 3))
        out[f"maxout/{dtype}"], out[f"maxout.which/{dtype}"] = Y, which
        out[f"backprop_maxout/{dtype}"] = ops.backprop_maxout(f(97, 48), which, 3)
        # Maxout's sparse dX and dW: rows past two chunks of the dW kernel, outputs past two
        # blocks of the dX kernel, columns past its blocks and the dW kernel's 12-vector block.
        Xa, Wa = f(130, 200), f(70, 3, 200)
        wa = rng.integers(0, 3, size=(130, 70)).astype("int32")
        dXa, dWa, dba = ops.backprop_maxout_affine(f(130, 70), wa, Xa, Wa)
        out[f"maxout_affine.dX/{dtype}"], out[f"maxout_affine.dW/{dtype}"] = dXa, dWa
        out[f"maxout_affine.db/{dtype}"] = dba
        lengths = numpy.asarray([40, 0, 31, 26], dtype="int32")
        out[f"seq2col/{dtype}"] = ops.seq2col(X, 2, lengths=lengths)
        out[f"backprop_seq2col/{dtype}"] = ops.backprop_seq2col(f(97, 64 * 5), 2, lengths=lengths)
        Ym, wm = ops.reduce_max(X, numpy.asarray([40, 31, 26], dtype="int32"))
        out[f"reduce_max/{dtype}"], out[f"reduce_max.which/{dtype}"] = Ym, wm
        out[f"reduce_sum/{dtype}"] = ops.reduce_sum(X, lengths)
        table = f(500, 64)
        idx = rng.integers(0, 500, size=(211, 4)).astype("int32")
        out[f"gather_add/{dtype}"] = ops.gather_add(table, idx)
        out[f"scatter_add/{dtype}"] = ops.scatter_add(numpy.zeros((500, 64), dtype), idx[:, 0], f(211, 64))
        Yn, mean, var = ops.layer_norm(X, f(64), f(64))
        out[f"layer_norm/{dtype}"] = Yn
        w, g, m1, m2 = f(5000), f(5000), numpy.zeros(5000, dtype), numpy.zeros(5000, dtype)
        for _ in range(3):
            w, g, m1, m2 = ops.adam(w, g.copy(), m1, m2, 0.9, 0.999, 1e-8, 0.01)
        out[f"adam/{dtype}"] = w
        # Two layers, two directions: each direction's weights, biases and recurrent weights.
        nO, nI, sizes = 16, 24, numpy.asarray([5, 5, 4, 2, 1], dtype="int32")
        n_params = sum(2 * (4 * nO * n_in + 4 * nO + 4 * nO * nO + 4 * nO) for n_in in (nI, 2 * nO))
        params = f(n_params) * 0.5
        Yl, state = ops.lstm_forward_training(params, f(2, 2, nO), f(2, 2, nO), f(int(sizes.sum()), nI), sizes)
        out[f"lstm/{dtype}"] = Yl
        dX, dparams = ops.backprop_lstm(f(*Yl.shape), sizes, params, state)
        out[f"backprop_lstm.dX/{dtype}"], out[f"backprop_lstm.dparams/{dtype}"] = dX, dparams
        # Matrix products: plait's own kernels where `auto` takes them (float32), else the BLAS.
        A, B = f(97, 64), f(48, 64)
        out[f"gemm.nt/{dtype}"] = ops.gemm(A, B, trans2=True)
        out[f"gemm.nn/{dtype}"] = ops.gemm(A, numpy.ascontiguousarray(B.T))
        out[f"gemm.tn/{dtype}"] = ops.gemm(A, f(97, 40), trans1=True)
        Xc, Wc = f(4, 6, 17, 15), f(8, 6, 3, 3)
        out[f"conv_nd/{dtype}"] = ops.conv_nd(Xc, Wc, f(8), pad=1)
        Yp, wp = ops.max_pool_nd(Xc, 3, 2)
        out[f"max_pool_nd/{dtype}"], out[f"max_pool_nd.which/{dtype}"] = Yp, wp
    # plait's own float32 products called directly (`auto` takes only their AVX-512 build), on
    # shapes past the AVX2 tile's blocks; the BLAS's product where a build has no such kernels.
    from plait.backends._kernels_cpu import dense_gemm

    dense_gemm.set_mode(2)
    for name, x, y, t1, t2 in (("nt", (130, 300), (72, 300), False, True), ("tn", (300, 130), (300, 72), True, False),
                               ("nn", (7, 600), (600, 17), False, False)):
        X32, Y32 = rng.standard_normal(x).astype("float32"), rng.standard_normal(y).astype("float32")
        got = dense_gemm.gemm(X32, Y32, None, t1, t2, False)
        out[f"dense_gemm.{name}"] = got if got is not None else (X32.T if t1 else X32) @ (Y32.T if t2 else Y32)
    dense_gemm.set_mode(0)
    out["hash"] = ops.hash(numpy.arange(0, 10_000, 7, dtype="uint64"), 17)
    # Dropout masks: even and odd sizes (the vector loops' tails), rates near both ends. The
    # key comes from numpy's global generator.
    for i, (shape, drop) in enumerate([((128, 512), 0.2), ((7, 13), 0.5), ((3, 1001), 0.999), ((65,), 1e-6)]):
        numpy.random.seed(100 + i)
        out[f"dropout.{i}"] = ops.get_dropout_mask(shape, drop)
    return out


if __name__ == "__main__":
    results = outputs()
    numpy.savez(sys.argv[1], __isa__=numpy.asarray(_kernels_cpu.ISA), **{k.replace("/", "__"): v for k, v in results.items()})
