#!/usr/bin/env python
"""Training steps with numpy's own allocator against plait's cache of freed large blocks.

plait/backends/block_cache.py makes numpy allocate through a cache of freed blocks of at least
64 KiB (block_cache.MIN_BYTES), so a step's arrays reuse memory already written instead of pages
the kernel zeroes on first touch. This script trains the matrix's tagger (bench/lstm_tagger.py's
model) or text CNN (bench/textcat_cnn.py's) in one process, one thread, and runs every batch
once under each allocator, in alternating order: numpy's default allocator (with numpy's
huge-page advice, as numpy ships), numpy's allocator without huge pages, and the cache. It
prints the median CPU time of a step under each and the median over batches of each one's step
time divided by the default's for the same batch (below 1: faster), then the cache's counters.

    .venv/bin/python bench/block_cache.py --model tagger --width 512 --hidden 512 --batch 256
    .venv/bin/python bench/block_cache.py --model textcat --width 512 --rows 2000 --batch 64
    .venv/bin/python bench/block_cache.py --quick     # a small tagger, seconds
    .venv/bin/python bench/block_cache.py --min-mib 16,0.0625   # the cache from 16 MiB and from 64 KiB
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import numpy  # noqa: E402

import _harness as H  # noqa: E402

VARIANTS = ("numpy default", "numpy, no huge pages", "block cache")


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("tagger", "textcat"), default="tagger")
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--hidden", type=int, default=512, help="the tagger's BiLSTM width")
    p.add_argument("--rows", type=int, default=2000, help="the text CNN's HashEmbed rows")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--batches", type=int, default=12, help="batches, each run once per variant")
    p.add_argument("--limit-mib", type=float, default=None,
                   help="the cache's limit (default: PLAIT_BLOCK_CACHE's, 'auto' if unset)")
    p.add_argument("--min-mib", default=None, metavar="A,B,...",
                   help="compare the cache keeping blocks from each of these sizes (MiB) instead "
                        "of numpy's allocators against the cache")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", default=None, metavar="PATH")
    args = p.parse_args(argv)
    if args.quick:
        args.model, args.width, args.hidden, args.batch, args.batches = "tagger", 64, 64, 16, 4
    if args.batches < 2:
        p.error(f"--batches must be at least 2 (the first is a warm-up), got {args.batches}")
    args.mins = None
    if args.min_mib:
        try:
            args.mins = [float(v) for v in args.min_mib.split(",") if v.strip()]
        except ValueError:
            p.error(f"--min-mib takes sizes in MiB separated by commas (16,4), got {args.min_mib!r}")
        if len(args.mins) < 2 or min(args.mins) * (1 << 20) < 4096:
            p.error(f"--min-mib needs at least two sizes of 4 KiB (0.004 MiB) or more to compare, "
                    f"got {args.min_mib!r}")
    return args


def _model(api, args):
    """(model, loss, batches as (X, Y) makers): the matrix scripts' own model definitions."""
    rng = numpy.random.default_rng(0)
    if args.model == "tagger":
        import lstm_tagger

        p = dict(lstm_tagger.DEFAULTS, width=args.width, hidden=args.hidden, seed=0)
        trX, trY, _, _, n_words, n_tags = H.load_turkish_tagging(None, None)
        model = lstm_tagger.build_model(api, p, n_words, n_tags)
        Y = [H.one_hot(y, n_tags) for y in trY]
        model.initialize(X=trX[:4], Y=Y[:4])
        loss = api.SequenceCategoricalCrossentropy()
        pick = lambda idx: ([trX[i] for i in idx], [Y[i] for i in idx])  # noqa: E731
        n = len(trX)
    else:
        import textcat_cnn

        p = dict(textcat_cnn.DEFAULTS, width=args.width, n_rows=args.rows, seed=0)
        docs, y, _, _ = H.load_rotten_tomatoes(None, None)
        model = textcat_cnn.build_model(api, p)
        Y = H.one_hot(numpy.asarray(y), 2)
        model.initialize(X=docs[:4], Y=Y[:4])
        loss = api.CategoricalCrossentropy()
        pick = lambda idx: ([docs[i] for i in idx], Y[idx])  # noqa: E731
        n = len(docs)
    full = [idx for idx in H.batches(n, args.batch, rng) if len(idx) == args.batch]
    return model, loss, [full[j % len(full)] for j in range(args.batches)], pick


def main(argv=None):
    args = _parse(argv)
    from numpy._core import multiarray

    from plait.backends import block_cache, set_num_threads
    from plait.backends._kernels_cpu import memcache
    import plait.api as api

    set_num_threads(1)
    block_cache.uninstall()  # numpy's allocator, whatever the import installed
    default = memcache.get_handler()
    huge = multiarray._get_madvise_hugepage()
    limit = None if args.limit_mib is None else int(args.limit_mib * (1 << 20))
    if not block_cache.install(limit):
        sys.exit("bench/block_cache.py: the cache's limit is 0 (PLAIT_BLOCK_CACHE=off?): nothing to compare")
    memcache.set_handler(default)
    api.set_current_ops(api.NumpyOps())
    model, loss, batches, pick = _model(api, args)
    optimizer = api.Adam(0.001, use_averages=False)
    variants = VARIANTS if not args.mins else tuple(f"block cache from {m:g} MiB" for m in args.mins)
    times = {v: [] for v in variants}
    try:
        for j, idx in enumerate(batches):
            X, Y = pick(idx)
            for r in range(len(variants)):
                k = (j + r) % len(variants)
                variant = variants[k]
                if args.mins:
                    # The same cache, keeping blocks from another size: a block records whether
                    # it is the cache's, so frees are right whichever size was set when it came.
                    memcache.set_handler(memcache.handler)
                    block_cache.install(limit, int(args.mins[k] * (1 << 20)))
                    multiarray._set_madvise_hugepage(False)
                else:
                    # Only the allocator of new arrays changes: the cache keeps its blocks throughout.
                    memcache.set_handler(memcache.handler if variant == "block cache" else default)
                    multiarray._set_madvise_hugepage(variant == "numpy default" and huge)
                start = time.process_time()
                Yh, backprop = model.begin_update(X)
                backprop(loss.get_grad(Yh, Y))
                model.finish_update(optimizer)
                times[variant].append(time.process_time() - start)
        stats = block_cache.stats()
    finally:
        memcache.set_handler(default)
        multiarray._set_madvise_hugepage(huge)
        block_cache.uninstall()
    base = times[variants[0]]
    rows = []
    from plait.backends import _kernels_cpu

    summary = H.machine_summary()
    print(f"# {args.model}, width {args.width}, "
          + (f"hidden {args.hidden}" if args.model == "tagger" else f"{args.rows} rows")
          + f", batch {args.batch}: {args.batches} batches (the first a warm-up), each under every "
          f"allocator; CPU ms per step\ncpu={summary['cpu']}  build={_kernels_cpu.ISA}  1 thread  "
          f"environment pins: {summary['blas_env'] or 'none'}  plait@{summary['plait_commit']}")
    print(f"| allocator | median ms | per batch vs {variants[0]} (median) |")
    print("|---|---:|---:|")
    for v in variants:
        ratio = statistics.median(t / b for t, b in zip(times[v][1:], base[1:]))
        ms = statistics.median(times[v][1:]) * 1e3
        rows.append(dict(allocator=v, median_ms=ms, ratio=ratio))
        print(f"| {v} | {ms:.1f} | {ratio:.3f} |")
    print("block cache:", ", ".join(f"{k} {v}" for k, v in stats.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(dict(args=vars(args), rows=rows, cache=stats,
                                                   build=_kernels_cpu.ISA, machine=summary), indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
