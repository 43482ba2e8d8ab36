"""The Neon face's convolutions (plait.neon._layers on plait's backend kernels) against torch's CPU
convolutions (oneDNN), on layer shapes of the convnet-benchmarks networks neon published
(AlexNet, VGG-A, GoogLeNet v1's inception 3a), one thread each.

Per layer and pass (fprop: the output; bprop: the input gradient; update: the filter gradient)
both sides get the same float32 data, each in its own layout: plait in neon's batch-last one
(I (C, H, W, N) flattened to (C*H*W, N), F (C*R*S, K), O (K*P*Q, N)), torch in its own NCHW
(the layout its kernels are built for). Rounds alternate plait and torch; each figure is the
median over rounds of one call's CPU time (time.process_time: this process's CPU seconds, so
another program on the machine costs neither side) and wall time. The ratio is torch's time
over plait's (above 1: plait faster); the last row of each pass is the geometric mean over layers.

    .venv/bin/python bench/neon_conv.py                   # batch 16, 3 rounds
    .venv/bin/python bench/neon_conv.py --batch 32 --rounds 5 --only vgg
    .venv/bin/python bench/neon_conv.py --quick           # smoke: batch 4, 1 round, 3 layers
"""
import argparse
import math
import os
import statistics
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from plait.neon import _layers as L  # noqa: E402

# name, C, K, H (= W), R (= S), pad, stride  (convnet-benchmarks' neon script, batch reduced)
LAYERS = [
    ("alexnet conv1", 3, 64, 224, 11, 2, 4),
    ("alexnet conv2", 64, 192, 27, 5, 2, 1),
    ("alexnet conv3", 192, 384, 13, 3, 1, 1),
    ("alexnet conv4", 384, 256, 13, 3, 1, 1),
    ("vgg-a conv2", 64, 128, 112, 3, 1, 1),
    ("vgg-a conv3", 128, 256, 56, 3, 1, 1),
    ("vgg-a conv5", 256, 512, 28, 3, 1, 1),
    ("vgg-a conv7", 512, 512, 14, 3, 1, 1),
    ("googlenet 3a 1x1", 192, 64, 28, 1, 0, 1),
    ("googlenet 3a 3x3", 96, 128, 28, 3, 1, 1),
    ("googlenet 3a 5x5", 16, 32, 28, 5, 2, 1),
]
PASSES = ("fprop", "bprop", "update")


class _Lib:
    def output_dim(self, X, S, padding, strides, pooling=False, dilation=1):
        return L.output_dim(X, S, padding, strides, pooling, dilation)


def _timed(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def _setup(spec, N, rng):
    import torch

    name, C, K, H, R, pad, st = spec
    layer = L.conv_layer(_Lib(), np.float32, N, C, K, H=H, W=H, R=R, S=R, pad_h=pad, pad_w=pad,
                         str_h=st, str_w=st)
    I = rng.standard_normal(layer.dimI2, dtype=np.float32)
    F = rng.standard_normal(layer.dimF2, dtype=np.float32) * 0.05
    E = rng.standard_normal(layer.dimO2, dtype=np.float32)
    O = np.empty(layer.dimO2, np.float32)
    G = np.empty(layer.dimI2, np.float32)
    U = np.empty(layer.dimF2, np.float32)
    P = layer.P
    x = torch.from_numpy(np.ascontiguousarray(I.reshape(C, H, H, N).transpose(3, 0, 1, 2)))
    w = torch.from_numpy(np.ascontiguousarray(F.reshape(C, R, R, K).transpose(3, 0, 1, 2)))
    gy = torch.from_numpy(np.ascontiguousarray(E.reshape(K, P, P, N).transpose(3, 0, 1, 2)))
    conv = torch.nn.functional.conv2d
    bwd = torch.ops.aten.convolution_backward
    args = ((st, st), (pad, pad), (1, 1), False, (0, 0), 1)
    plait = {
        "fprop": lambda: L.fprop_conv(layer, I, F, O),
        "bprop": lambda: L.bprop_conv(layer, F, E, G),
        "update": lambda: L.update_conv(layer, I, E, U),
    }
    torch_fns = {
        "fprop": lambda: conv(x, w, None, st, pad),
        "bprop": lambda: bwd(gy, x, w, None, *args, (True, False, False)),
        "update": lambda: bwd(gy, x, w, None, *args, (False, True, False)),
    }
    # The two sides must agree (float32 rounding) before their times mean anything.
    with torch.no_grad():
        for p in PASSES:
            plait[p]()
        want = {
            "fprop": torch_fns["fprop"]().numpy().transpose(1, 2, 3, 0).reshape(O.shape),
            "bprop": torch_fns["bprop"]()[0].numpy().transpose(1, 2, 3, 0).reshape(G.shape),
            "update": torch_fns["update"]()[1].numpy().transpose(1, 2, 3, 0).reshape(U.shape),
        }
    for p, got in (("fprop", O), ("bprop", G), ("update", U)):
        err = float(np.abs(got - want[p]).max() / max(1e-6, float(np.abs(want[p]).max())))
        if err > 1e-4:
            raise SystemExit(f"{name} {p}: plait and torch disagree (max relative error {err:.2e})")
    return plait, torch_fns


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated substrings of layer names")
    ap.add_argument("--quick", action="store_true", help="smoke run: batch 4, 1 round, 3 layers")
    a = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("torch is not importable in this interpreter; install the CPU wheel (make install).")
        return 1
    torch.set_num_threads(1)
    layers = LAYERS
    if a.only:
        keys = [k.strip() for k in a.only.split(",") if k.strip()]
        layers = [s for s in LAYERS if any(k in s[0] for k in keys)]
    if a.quick:
        a.batch, a.rounds = 4, 1
        layers = [LAYERS[1], LAYERS[7], LAYERS[8]]
    rng = np.random.default_rng(0)
    setups = []
    for spec in layers:
        setups.append((spec, _setup(spec, a.batch, rng)))
    # times[(layer, pass, side)] = [(cpu, wall), ...] over rounds; warm-up call first
    times = {}
    with torch.no_grad():
        for spec, (pf, tf) in setups:
            for p in PASSES:
                pf[p]()
                tf[p]()
        for r in range(a.rounds):
            for spec, (pf, tf) in setups:
                for p in PASSES:
                    order = (("plait", pf[p]), ("torch", tf[p])) if r % 2 == 0 else (("torch", tf[p]), ("plait", pf[p]))
                    for side, fn in order:
                        times.setdefault((spec[0], p, side), []).append(_timed(fn))
    print(f"Neon face conv vs torch {torch.__version__} (oneDNN) on 1 thread, batch {a.batch}, float32, "
          f"median of {a.rounds} alternating round(s); ms per call; ratio = torch / plait (>1: plait faster)\n")
    print("| layer | pass | plait CPU ms | torch CPU ms | ratio (CPU) | plait wall ms | torch wall ms | ratio (wall) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    summary = {}
    for p in PASSES:
        logs_c, logs_w = [], []
        for spec, _ in setups:
            n = spec[0]
            pc = statistics.median(t[0] for t in times[(n, p, "plait")])
            tc = statistics.median(t[0] for t in times[(n, p, "torch")])
            pw = statistics.median(t[1] for t in times[(n, p, "plait")])
            tw = statistics.median(t[1] for t in times[(n, p, "torch")])
            rc, rw = tc / max(pc, 1e-9), tw / max(pw, 1e-9)
            logs_c.append(math.log(rc))
            logs_w.append(math.log(rw))
            print(f"| {n} | {p} | {pc * 1e3:.1f} | {tc * 1e3:.1f} | {rc:.2f} | {pw * 1e3:.1f} | {tw * 1e3:.1f} | {rw:.2f} |")
        gc, gw = math.exp(statistics.fmean(logs_c)), math.exp(statistics.fmean(logs_w))
        summary[p] = (gc, gw)
        print(f"| **geometric mean** | **{p}** | | | **{gc:.2f}** | | | **{gw:.2f}** |")
    print()
    for p in PASSES:
        print(f"{p}: {summary[p][0]:.2f}x torch per CPU-second, {summary[p][1]:.2f}x wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
