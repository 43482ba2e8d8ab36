"""What every `plait` command shares: the error type, exit statuses and console output."""
from __future__ import annotations

import sys
from typing import Any, Iterable, List, Optional, Sequence

# Exit statuses of every command (README documents them).
EXIT_OK = 0
EXIT_ERROR = 1  # an invalid config, a bad argument or input file, a model dir that cannot be read
EXIT_USAGE = 2  # argparse's own status for unknown options and missing arguments
EXIT_SIGINT = 130  # training stopped by Ctrl-C after saving model-last (128 + SIGINT)
EXIT_SIGTERM = 143  # training stopped by SIGTERM after saving model-last (128 + SIGTERM)


class CLIError(Exception):
    """An error the user can fix: printed as a message (no traceback), then exit with `status`.

    `details` are extra lines, e.g. one per config key that failed.
    """

    def __init__(self, message: str, details: Sequence[str] = (), status: int = EXIT_ERROR):
        super().__init__(message)
        self.message = message
        self.details = list(details)
        self.status = status

    def __str__(self) -> str:
        return "\n".join([self.message] + ["  " + line for line in self.details])


class ConfigError(CLIError):
    """The config (or an override of it) is invalid; raised before any training starts."""


def echo(text: str = "", *, err: bool = False) -> None:
    """Print a line to stdout (or stderr) and flush, so that logs interleave in order."""
    stream = sys.stderr if err else sys.stdout
    print(text, file=stream, flush=True)


_ICONS = {"good": ("\u2714", "32"), "info": ("\u2139", "34"), "warn": ("\u26a0", "33"), "fail": ("\u2718", "31")}


def _styled(kind: str, text: str, err: bool) -> str:
    stream = sys.stderr if err else sys.stdout
    icon, colour = _ICONS[kind]
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        icon.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        icon = {"good": "[ok]", "info": "[i]", "warn": "[!]", "fail": "[x]"}[kind]
    line = f"{icon} {text}"
    isatty = getattr(stream, "isatty", None)
    # Colour codes only on a terminal: logs and pipes get plain text.
    if isatty is not None and isatty():
        line = f"\x1b[{colour}m{line}\x1b[0m"
    return line


def good(text: str) -> None:
    echo(_styled("good", text, err=False))


def info(text: str) -> None:
    echo(_styled("info", text, err=False))


def warn(text: str) -> None:
    echo(_styled("warn", text, err=True), err=True)


def fail(text: str, details: Iterable[str] = ()) -> None:
    lines = [_styled("fail", text, err=True)] + ["  " + line for line in details]
    echo("\n".join(lines), err=True)


def table(rows: List[Sequence[Any]], header: Sequence[str], aligns: Optional[Sequence[str]] = None) -> str:
    """A plain text table: columns padded to their widest cell, 'l' or 'r' aligned."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    aligns = aligns or ["l"] + ["r"] * (len(header) - 1)

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(row, widths, aligns))

    lines = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    lines.extend(fmt(row) for row in cells[1:])
    return "\n".join(lines)


def use_device(gpu: int) -> None:
    """Make the current ops the GPU `gpu` (>= 0) or leave the CPU (-1); fails clearly without a GPU."""
    if gpu is None or gpu < 0:
        return
    from ..util import require_gpu

    try:
        require_gpu(gpu)
    except (ValueError, ImportError, RuntimeError) as err:
        raise CLIError(f"--gpu {gpu} needs CuPy and a CUDA device; none found: {err}") from err
    except Exception as err:  # CUDA runtime errors (no driver, bad device id) come as CuPy types
        raise CLIError(f"--gpu {gpu}: cannot use CUDA device {gpu}: {type(err).__name__}: {err}") from err
