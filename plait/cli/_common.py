"""What every `plait` command shares: the error type, exit statuses and console output."""
from __future__ import annotations

import sys
import unicodedata
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


def printable(text: Any, keep: str = "") -> str:
    """`text` with every character that a terminal could act on written as a visible escape.

    Labels, tokens, paths and messages can come from a model directory that someone else made:
    printed raw, an ESC or CSI sequence in them could move the cursor, rewrite earlier lines, set
    the window title or hide text, and a bidi override (U+202E) could reverse what follows. So
    C0/C1 controls, DEL, format characters (bidi overrides, zero-width), line/paragraph
    separators, surrogates and private-use characters become \\xNN / \\uNNNN / \\UNNNNNNNN,
    except those in `keep` (e.g. "\\n\\t" for a multi-line message). Everything else, letters of
    any script included, is kept as it is.
    """
    text = str(text)
    if text.isprintable():
        return text  # the common case: one pass in C
    out = []
    for char in text:
        # str.isprintable() is False for every category above (Cc Cf Cs Co Cn Zl Zp) and for the
        # spaces other than " " (Zs), which are harmless and kept.
        if char in keep or char.isprintable() or unicodedata.category(char) == "Zs":
            out.append(char)
        else:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def _write(line: str, err: bool) -> None:
    stream = sys.stderr if err else sys.stdout
    print(line, file=stream, flush=True)


def echo(text: Any = "", *, err: bool = False) -> None:
    """Print a line to stdout (or stderr) and flush, so that logs interleave in order.

    Control characters are escaped (see printable); newlines and tabs are kept.
    """
    _write(printable(text, keep="\n\t"), err)


_ICONS = {"good": ("\u2714", "32"), "info": ("\u2139", "34"), "warn": ("\u26a0", "33"), "fail": ("\u2718", "31")}


def _styled(kind: str, text: str, err: bool) -> str:
    """The icon (and colour, on a terminal) around `text`, whose control characters are escaped."""
    text = printable(text, keep="\n\t")
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
    _write(_styled("good", text, err=False), err=False)


def info(text: str) -> None:
    _write(_styled("info", text, err=False), err=False)


def warn(text: str) -> None:
    _write(_styled("warn", text, err=True), err=True)


def fail(text: str, details: Iterable[str] = ()) -> None:
    lines = [_styled("fail", text, err=True)] + ["  " + printable(line, keep="\t") for line in details]
    _write("\n".join(lines), err=True)


def table(rows: List[Sequence[Any]], header: Sequence[str], aligns: Optional[Sequence[str]] = None) -> str:
    """A plain text table: columns padded to their widest cell, 'l' or 'r' aligned."""
    # Escaped before measuring, so that the columns line up as printed.
    cells = [[printable(c) for c in header]] + [[printable(c) for c in row] for row in rows]
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


def write_output_file(path: Any, data: bytes, what: str) -> None:
    """Replace the file `path` (an --output FILE) with `data` atomically, or raise a CLIError.

    The bytes go to a temporary sibling, fsynced, then renamed over `path`: a kill, a full disk
    or a write error leaves the previous FILE as it was (and no fragment beside it).
    """
    from pathlib import Path

    from .._safeio import write_file_atomically

    path = Path(path)
    if path.is_dir():
        raise CLIError(f"--output {str(path)!r} is a directory: give a file name for the {what}.")
    if not path.parent.is_dir():
        raise CLIError(
            f"--output {str(path)!r}: the folder {str(path.parent)!r} does not exist; create it first "
            f"or write the {what} elsewhere."
        )
    try:
        write_file_atomically(path, data)
    except OSError as err:
        raise CLIError(
            f"Cannot write the {what} to {str(path)!r}: {err.strerror or err} ({type(err).__name__}, "
            f"errno {err.errno}). Nothing was changed there: free disk space or fix the permissions, "
            "then run the command again."
        ) from err


def open_model(model_dir: Any) -> Any:
    """The model that `plait predict` / `plait evaluate` MODEL_DIR use, loaded (a LoadedModel).

    MODEL_DIR is a model directory, or a `plait train` output folder, whose model-best is meant.
    There is no silent fallback: a damaged model-best (not a directory, a link, no meta.json, or
    files that do not load) is an error that names the reason and says how to use model-last
    instead; a missing one (a run that has not saved a best model) is said before model-last is
    used.
    """
    import os
    from pathlib import Path

    from . import _modeldir as md

    path = Path(model_dir)
    found = md.find_model_dir(path)
    best = path / md.BEST
    if found.parent == path and found.name != best.name and not found.name.startswith(f".{md.BEST}"):
        # find_model_dir passed over model-best: say why, or refuse when it is there but damaged.
        if os.path.lexists(best):
            raise CLIError(
                f"{str(best)!r} is damaged: {_why_not_a_model_dir(best)}. plait does not silently use "
                f"{md.LAST} instead. To use the last model, pass {str(path / md.LAST)!r} "
                f"itself; to get a best model back, continue the run: plait train --resume {path}"
            )
        warn(f"{path} has no {md.BEST}: using {found.name} ({found})")
    try:
        return md.load_model_dir(found)
    except CLIError as err:
        if found == best and (path / md.LAST / md.META_FILE).is_file():
            err.details.append(f"(to use the last model instead, pass {str(path / md.LAST)!r})")
        raise


def _why_not_a_model_dir(path: Any) -> str:
    import os
    import stat

    from ._modeldir import META_FILE

    info_ = os.lstat(path)
    if stat.S_ISLNK(info_.st_mode):
        return f"it is a symbolic link (to {os.readlink(path)!r})"
    if not stat.S_ISDIR(info_.st_mode):
        return "it is not a directory"
    meta = os.path.join(path, META_FILE)
    if not os.path.lexists(meta):
        return f"it has no {META_FILE}"
    return f"its {META_FILE} is not a regular file"
