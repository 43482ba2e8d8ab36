"""The `plait` command line: train a model from a config, evaluate it, predict with it, plot its curves.

    plait train CONFIG [--set section.key=value ...] [--output DIR] [--resume DIR] [--gpu ID]
    plait evaluate MODEL_DIR [--data PATH] [--split dev|test]
    plait predict MODEL_DIR INPUT [--output FILE]
    plait plot MODEL_DIR [--output PNG]

Exit statuses: 0 success; 1 an error the message explains (invalid config or override, missing
file, unreadable model directory); 2 wrong command-line usage; 130 training stopped by Ctrl-C
(143 by SIGTERM) after saving model-last.
"""
from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from typing import List, Optional, Sequence

from ._common import EXIT_ERROR, EXIT_SIGINT, EXIT_USAGE, CLIError, fail

_PROG = "plait"

_TRAIN_EPILOG = """\
config sections:
  [model]      the network, a registered layer: @layers = "chain.v1" with its layers below it
  [optimizer]  @optimizers = "Adam.v1" (or RAdam.v1, SGD.v1) and its settings
  [training]   max_epochs, max_steps (0 = no limit; at least one > 0), batch_size (an int, or a
               [training.batch_size] block with @schedules = "compounding.v1"), eval_frequency
               (steps), patience (evaluations without a better dev score; 0 = off), seed, dropout
  [data]       @datasets = "mnist.v1" | "rotten_tomatoes.v1" | "turkish_upos.v1", with path
               (default: the subset bundled with plait) and limit (0 = all)
  [paths], [system] may hold values for ${...} interpolation.

output (--output DIR, default ./training):
  DIR/model-best/  DIR/model-last/   weights (model.bin), config.cfg, meta.json; model-last also
                                     holds training/, the state that --resume continues from
  DIR/metrics.jsonl                  one record per evaluation (step, epoch, loss, score, speed)

Each model directory is replaced atomically: a crash, Ctrl-C or kill never leaves a broken one.
Ctrl-C stops after the current step, saves model-last and exits with status 130.

examples:
  plait train examples/mnist_mlp.cfg --output training/mnist
  plait train examples/mnist_mlp.cfg --set training.batch_size=64 --set training.max_epochs=2
  plait train examples/mnist_mlp.cfg --set data.path=../shared/data/mnist.npz   (the full data)
  plait train --resume training/mnist --set training.max_epochs=20              (continue a run)
  plait train examples/mnist_mlp.cfg --workers 2 --output training/mnist2  (2 processes, one result)
"""


def _add_common(parser: argparse.ArgumentParser, gpu: bool = True) -> None:
    if gpu:
        parser.add_argument(
            "--gpu", type=int, default=-1, metavar="ID",
            help="GPU device to use (needs CuPy and CUDA); -1, the default, runs on the CPU",
        )
    parser.add_argument("--verbose", "-V", action="store_true", help="show the full traceback on errors")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="Train, evaluate and use plait models from a config file, without writing code.",
        epilog=(
            "Run `plait COMMAND --help` for a command's options. Exit statuses: 0 success, 1 error "
            "(invalid config, missing file), 2 usage, 130 training stopped by Ctrl-C (model-last saved).\n"
            "`plait demo-ops` runs the raw-Ops MNIST demo (the backend with no layers)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from ..about import __version__

    parser.add_argument("--version", action="version", version=f"plait {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "train",
        help="train a model from a config file",
        description=(
            "Train the [model] of CONFIG on the [data] with the [optimizer] and [training] settings.\n"
            "The config is checked first: any invalid section, key, name or type stops here with a\n"
            "message naming it (exit status 1), before data is loaded or DIR created. Shows a\n"
            "progress bar and a table row per evaluation; saves the best and the last model."
        ),
        epilog=_TRAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("config", nargs="?", type=Path, metavar="CONFIG",
                   help="the .cfg file (optional with --resume: the run's saved config is used)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value, e.g. --set training.batch_size=64 (repeatable; values are "
                        "read as JSON: 64, 0.5, true, null, \"text\"; anything else is a string)")
    p.add_argument("--output", "-o", type=Path, default=None, metavar="DIR",
                   help="where to save model-best/, model-last/ and metrics.jsonl (default: ./training, "
                        "or the --resume folder)")
    p.add_argument("--resume", type=Path, default=None, metavar="DIR",
                   help="continue the run saved in DIR/model-last: weights, optimizer moments, step and "
                        "epoch counters, best score and data order carry on")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="train data-parallel on N processes of this machine (started with mpiexec; needs "
                        "pip install 'plait[distributed]'): each step's batch is split among them, and the "
                        "result is that of one process; under your own mpiexec, leave it out")
    progress = p.add_mutually_exclusive_group()
    progress.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                          help="no progress bar (it is off anyway when stderr is not a terminal)")
    progress.add_argument("--progress", dest="progress", action="store_true",
                          help="show the progress bar even when stderr is not a terminal")
    _add_common(p)

    p = sub.add_parser(
        "evaluate",
        help="score a trained model on its dev or test split",
        description=(
            "Print the accuracy (token accuracy for taggers) of a saved model and a per-label "
            "precision / recall / F1 table. The data is the model's [data] section, read again."
        ),
    )
    p.add_argument("model_dir", type=Path, metavar="MODEL_DIR",
                   help="a model directory, or a `plait train` output folder (its model-best is used)")
    p.add_argument("--data", default=None, metavar="PATH",
                   help="read the data from this file or directory instead (e.g. ../shared/data/mnist.npz "
                        "for the full data); default: what the model was trained on")
    p.add_argument("--split", choices=("dev", "test"), default="test", help="which split to score (default: test)")
    p.add_argument("--limit", type=int, default=0, metavar="N", help="the dataset's limit argument (0 = all)")
    p.add_argument("--output", "-o", type=Path, default=None, metavar="FILE", help="also write the scores as JSON")
    _add_common(p)

    p = sub.add_parser(
        "predict",
        help="run a trained model on images or text",
        description=(
            "Predict a label per input (a tag per token for taggers) with a saved model and print\n"
            "it with its probability, or write JSON lines with --output.\n\n"
            "Image models read .npy or .npz files: uint8 pixels (n, 28, 28) or floats (n, 784) in\n"
            "[0, 1], one image or many; from an .npz the array `x_test` is taken, else its only array.\n"
            "Text models read one text per line from a UTF-8 file, or from stdin for `-`, tokenised\n"
            "as their dataset was."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model_dir", type=Path, metavar="MODEL_DIR",
                   help="a model directory, or a `plait train` output folder (its model-best is used)")
    p.add_argument("input", metavar="INPUT", help="a .npy/.npz file of images, a text file, or - for stdin")
    p.add_argument("--output", "-o", type=Path, default=None, metavar="FILE",
                   help="write JSON lines (index, label, probability; tokens and tags for taggers) here")
    p.add_argument("--limit", type=int, default=0, metavar="N", help="predict only the first N inputs (0 = all)")
    p.add_argument("--batch-size", type=int, default=256, metavar="N", help="inputs per forward pass (default: 256)")
    _add_common(p)

    p = sub.add_parser(
        "plot",
        help="draw the training curves as a PNG (needs matplotlib)",
        description=(
            "Plot the training loss and the dev score against the step from DIR/metrics.jsonl, "
            "two panels, the best evaluation marked. Needs matplotlib (pip install 'plait[plot]')."
        ),
    )
    p.add_argument("model_dir", type=Path, metavar="MODEL_DIR",
                   help="the --output folder of `plait train` (or its model-best / model-last)")
    p.add_argument("--output", "-o", type=Path, default=None, metavar="PNG",
                   help="where to write the image (default: MODEL_DIR/training.png)")
    _add_common(p, gpu=False)
    return parser


def _print_traceback() -> None:
    """The current exception's traceback on stderr, escaped: its messages can quote a stranger's
    labels, paths or config values, which must not reach the terminal raw."""
    from ._common import printable

    sys.stderr.write(printable(traceback.format_exc(), keep="\n") + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    args_list: List[str] = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["demo-ops"]:
        from ..demo import main as demo_main

        return demo_main(args_list[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exit:
        return int(exit.code) if isinstance(exit.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return _dispatch(args)
    except CLIError as err:
        if args.verbose:
            _print_traceback()
        fail(err.message, err.details)
        return err.status
    except BrokenPipeError:
        # The reader of stdout went away (`plait ... | head`): stop quietly, as Unix tools do.
        _silence_stdout()
        return EXIT_ERROR
    except KeyboardInterrupt:
        if args.verbose:
            _print_traceback()
        fail(f"plait {args.command}: interrupted")
        return EXIT_SIGINT
    except Exception as err:
        if args.verbose:
            _print_traceback()
        fail(
            f"plait {args.command} failed: {type(err).__name__}: {err}",
            [] if args.verbose else ["(run with --verbose for the traceback)"],
        )
        return EXIT_ERROR


def _silence_stdout() -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _run_train(args: argparse.Namespace) -> int:
    from ..distributed import launched_by_mpi

    workers = args.workers
    if workers is not None and (workers < 1 or workers > 4096):
        raise CLIError(f"--workers must be a number of processes from 1 to 4096, got {workers}")
    if workers is not None and workers > 1 and not launched_by_mpi():
        from . import _workers

        rank_args = _workers.rank_args(args.config, args.overrides, args.output, args.resume, args.gpu,
                                       args.progress, args.verbose)
        output = args.output or (args.resume if args.resume is not None else Path("training"))
        return _workers.launch(workers, rank_args, output)
    from ._train import train_command

    return train_command(args.config, args.overrides, args.output, args.resume, args.gpu, args.progress,
                         workers=workers)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "train":
        return _run_train(args)
    if args.command == "evaluate":
        from ._evaluate import evaluate_command

        return evaluate_command(args.model_dir, args.data, args.split, args.limit, args.output, args.gpu)
    if args.command == "predict":
        from ._predict import predict_command

        if args.batch_size < 1:
            raise CLIError(f"--batch-size must be >= 1, got {args.batch_size}")
        if args.limit < 0:
            raise CLIError(f"--limit must be >= 0, got {args.limit}")
        return predict_command(args.model_dir, args.input, args.output, args.batch_size, args.gpu, args.limit)
    if args.command == "plot":
        from ._plot import plot_command

        return plot_command(args.model_dir, args.output)
    raise CLIError(f"Unknown command {args.command!r}")


__all__ = ["main", "build_parser", "CLIError"]
