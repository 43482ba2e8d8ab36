"""`plait train`: the training loop, its progress output, evaluation, saving and resuming."""
from __future__ import annotations

import errno
import json
import math
import os
import signal
import socket
import stat
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy

from ..about import __version__
from . import _modeldir as md
from ._common import EXIT_OK, EXIT_SIGINT, EXIT_SIGTERM, CLIError, ConfigError, echo, good, info, use_device, warn
from ._config import Resolved, load_config, parse_overrides, resolve
from ._evaluate import accuracy, eval_batch_size, predict_ids, take

# How many training examples a new model is initialized on (shape inference only).
_INIT_SAMPLE = 64
# How many of them are saved with the model, to rebuild it later.
_SAVED_SAMPLE = 4


@dataclass
class TrainState:
    """Counters of a run; saved in model-last/training/state.json and restored by --resume."""

    step: int = 0
    epoch: int = 0
    # Examples of the current epoch already trained on, and the data RNG state that drew its order.
    epoch_offset: int = 0
    epoch_rng: Optional[Dict[str, Any]] = None
    best_score: float = -math.inf
    best_step: int = -1
    evals_since_best: int = 0
    last_eval_step: int = -1
    words_seen: int = 0
    seconds: float = 0.0
    # Names the run (kept across resumes): in meta.json and each metrics record, so that a resume
    # can tell its own model-best and records from those of another run in the same folder.
    run: str = ""

    def to_json(self) -> Dict[str, Any]:
        data = dict(self.__dict__)
        data["best_score"] = None if self.best_score == -math.inf else self.best_score
        return data

    @classmethod
    def from_json(cls, data: Dict[str, Any], model_dir: Optional[Path] = None) -> "TrainState":
        """The counters of training/state.json's "state", each checked (type, range) before use."""
        data = dict(data)
        if data.get("best_score") is None:
            data["best_score"] = -math.inf
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key, low, high in _STATE_BOUNDS:
            if key not in known:
                continue
            value = known[key]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise md.damaged(
                    model_dir, md.STATE_FILE, f"'state'.{key!r}", f"it is {str(value)[:40]!r}, not a count from {low} to {high}",
                    "The resume state is damaged or was edited: restore it, or start a new run instead of --resume",
                )
        for key in ("best_score", "seconds"):
            value = known.get(key, 0.0)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise md.damaged(model_dir, md.STATE_FILE, f"'state'.{key!r}", f"it is {str(value)[:40]!r}, not a number",
                                 "Restore the run folder, or start a new run instead of --resume")
        if not isinstance(known.get("run", ""), str) or len(known.get("run", "")) > 64:
            raise md.damaged(model_dir, md.STATE_FILE, "'state'.'run'", f"it is {str(known['run'])[:40]!r}, not a run id",
                             "Restore the run folder, or start a new run instead of --resume")
        if known.get("epoch_rng") is not None:
            try:  # tried on a generator of its own: set later, it must not fail half-way
                numpy.random.default_rng().bit_generator.state = known["epoch_rng"]
            except (TypeError, ValueError, KeyError) as err:
                raise md.damaged(model_dir, md.STATE_FILE, "'state'.'epoch_rng'", f"it is not a PCG64 generator state ({err})",
                                 "Restore the run folder, or start a new run instead of --resume") from None
        return cls(**known)


# Bounds of the counters a resume state may hold: the loop runs (and schedules replay) up to them.
_STATE_BOUNDS = [
    ("step", 0, md.MAX_RESUME_STEP), ("epoch", 0, md.MAX_RESUME_STEP), ("epoch_offset", 0, 2**62),
    ("best_step", -1, md.MAX_RESUME_STEP), ("evals_since_best", 0, md.MAX_RESUME_STEP),
    ("last_eval_step", -1, md.MAX_RESUME_STEP), ("words_seen", 0, 2**62),
]


class _Stop:
    """SIGINT/SIGTERM handler: the first signal asks the loop to stop after the current step."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self._previous: Dict[int, Any] = {}

    def __enter__(self) -> "_Stop":
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: leave signals alone
                pass
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:
            # A second Ctrl-C means "now": every save is atomic, so nothing breaks.
            raise KeyboardInterrupt
        self.signum = signum


def train_command(
    config_path: Optional[Path],
    overrides: Sequence[str],
    output: Optional[Path],
    resume: Optional[Path],
    gpu: int,
    progress: Optional[bool],
    workers: Optional[int] = None,
) -> int:
    """Check the config, then train, evaluate and save; returns the exit status."""
    return prepare(config_path, overrides, output, resume, gpu, progress, workers=workers).run()


def _world(workers: Optional[int]) -> Any:
    """The communicator of a data-parallel run (under an MPI launcher, 2 ranks or more), else None."""
    from ..distributed import get_communicator, launched_by_mpi

    if not launched_by_mpi():
        return None
    comm = get_communicator()
    if workers is not None and workers != comm.size:
        raise CLIError(
            f"--workers {workers}, but the MPI launcher started {comm.size} rank(s): leave --workers out under "
            "your own mpiexec (its -n sets the number of ranks)."
        )
    return comm if comm.size > 1 else None


def prepare(
    config_path: Optional[Path],
    overrides: Sequence[str] = (),
    output: Optional[Path] = None,
    resume: Optional[Path] = None,
    gpu: int = -1,
    progress: Optional[bool] = None,
    *,
    workers: Optional[int] = None,
) -> "_Trainer":
    """Everything before the first step: check and resolve the config, build, restore, create DIR.

    Under an MPI launcher with 2 ranks or more (`--workers N`, or `mpiexec -n N plait train`),
    every rank prepares the same run; only rank 0 locks, creates and writes DIR.
    """
    parsed = parse_overrides(overrides)
    comm = _world(workers)
    lead = comm is None or comm.rank == 0
    if comm is not None and gpu is not None and gpu >= 0:
        gpu = gpu + comm.local_rank  # one GPU per rank of this machine: ID, ID+1, ...
    resume_dir: Optional[Path] = None
    if resume is not None:
        resume_dir = _resume_dir(Path(resume))
        if config_path is None:
            config_path = resume_dir / md.CONFIG_FILE
    if config_path is None:
        raise CLIError("plait train needs a CONFIG file (or --resume DIR to continue a run with its saved config).")
    if output is None:
        output = resume_dir.parent if resume_dir is not None else Path("training")
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise CLIError(f"--output {str(output)!r} exists and is not a directory.")
    if lead and resume_dir is not None and resume_dir.parent.resolve() != output.resolve():
        # Another run still writing THEIRS could swap model-last while it is read.
        OutputLock.probe(resume_dir.parent, "--resume")
    # A folder that exists is locked at once (a second run stops before loading anything); a new
    # one once it is created, after the checks.
    lock = OutputLock(output) if lead and output.is_dir() else None
    try:
        return _prepare(config_path, parsed, output, resume_dir, gpu, progress, lock, comm)
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def _prepare(
    config_path: Path, parsed: Any, output: Path, resume_dir: Optional[Path], gpu: int,
    progress: Optional[bool], lock: Optional["OutputLock"], comm: Any = None,
) -> "_Trainer":
    if resume_dir is not None and Path(config_path) == resume_dir / md.CONFIG_FILE:
        md.read_file(Path(config_path))  # a regular file inside the run folder, within limits
    config = load_config(Path(config_path), parsed)
    use_device(gpu)
    # Seeded before anything is built (load_config checked that the seed is an int).
    _seed(int(config["training"].get("seed", 0)), gpu)
    resolved = resolve(config, str(config_path))
    dataset = resolved.dataset
    settings = resolved.training
    model = resolved.model
    if len(dataset.dev) == 0:
        raise ConfigError(
            f"Invalid config {str(config_path)!r}",
            ["[data]: the dev split is empty, and training scores every evaluation on it"],
        )
    if resume_dir is not None:
        # The saved weights' dims against the config's before initialize() allocates anything: an
        # edited (or another run's) config could otherwise ask for gigabytes first.
        rel = md.RAW_WEIGHTS_FILE if os.path.lexists(resume_dir / md.RAW_WEIGHTS_FILE) else md.MODEL_FILE
        _, saved_weights = md.read_weights(resume_dir, rel)
        try:
            md.check_dims(resume_dir, model, saved_weights, rel)
        except CLIError as err:
            if Path(config_path) == resume_dir / md.CONFIG_FILE:
                raise  # the run folder's own config was edited: a damaged directory
            raise CLIError(
                f"Cannot resume from {str(resume_dir)!r} with the config {str(config_path)!r}: its model "
                f"does not fit the saved weights ({str(err).split(': ', 1)[-1].rstrip('.')}). Resume with "
                "the config the run was started with."
            ) from None
    sample_idx = numpy.arange(min(_INIT_SAMPLE, len(dataset.train)))
    X_init = take(dataset.train.X, sample_idx)
    Y_init = take(dataset.train.Y, sample_idx)
    try:
        md.initialize_model(model, _on_device(model, X_init), Y_init, dataset.task, len(dataset.labels))
        _check_output_shape(model, _on_device(model, X_init[:2]), dataset, str(config_path))
    except ConfigError:
        raise
    except Exception as err:
        raise ConfigError(
            f"Invalid config {str(config_path)!r}",
            [
                f"[model]: cannot be initialized on the data of [data] ({dataset.task!r} task, "
                f"{len(dataset.labels)} labels): {type(err).__name__}: {' '.join(str(err).split())}"
            ],
        ) from err
    if settings.dropout is not None:
        from ..model import set_dropout_rate

        set_dropout_rate(model, settings.dropout)

    state = TrainState(run=_new_run_id())
    data_rng = numpy.random.default_rng(settings.seed)
    known_run = False
    if resume_dir is not None:
        state = _restore(resume_dir, resolved, data_rng)
        known_run = bool(state.run)
        state.run = state.run or _new_run_id()  # a state saved before runs had ids
    if comm is not None:
        # Every rank checks that they all built the same model, and starts from rank 0's weights.
        comm.bcast_params(model)
    if comm is not None and comm.rank != 0:
        # Only rank 0 writes DIR, and prints; the other ranks train and evaluate their shares.
        return _Trainer(resolved, state, data_rng, output, False, resumed=resume_dir is not None, comm=comm)
    # Everything is checked: only now is anything written.
    output.mkdir(parents=True, exist_ok=True)
    own_lock = lock is None
    if lock is None:
        lock = OutputLock(output)
    try:
        md.clean_stale(output)  # safe under the lock: no other run is writing here
        records: List[Dict[str, Any]] = []
        same_dir = resume_dir is not None and resume_dir.parent.resolve() == output.resolve()
        if resume_dir is not None:
            # The records of this run up to the resumed state: a killed run may have written one
            # more, and a new run killed before its first model save may have left its own.
            records = [
                r for r in md.read_metrics(resume_dir.parent)
                if int(r.get("step", 0)) <= state.step and r.get("run", state.run) == state.run
            ]
        carry_best: Optional[Dict[str, bytes]] = None
        if resume_dir is not None and known_run:
            carry_best = _best_of_this_run(resume_dir, state)
        if not same_dir:
            if any(os.path.lexists(output / name) for name in (md.BEST, md.LAST)):
                info(
                    f"{output} holds an earlier run: its models stay until this run's first save replaces them "
                    f"(use --resume {output} to continue it instead)"
                )
            if carry_best is None and resume_dir is not None and os.path.lexists(resume_dir.parent / md.BEST):
                # The best model so far comes along, so that model-best always matches the best score;
                # read now (regular files only), written at the first save.
                carry_best = _read_model_files(resume_dir.parent / md.BEST)
        # Nothing of an earlier run in DIR (models, metrics.jsonl) is touched before the first save.
        return _Trainer(
            resolved, state, data_rng, output, progress, resumed=resume_dir is not None, records=records,
            lock=lock, carry_best=carry_best, comm=comm,
        )
    except BaseException:
        if own_lock:
            lock.release()
        raise


# ---------------------------------------------------------------------------------------------
# The lock on an output folder

LOCK_FILE = ".plait-train.lock"


class OutputLock:
    """An exclusive lock on a training output folder, held for the whole run.

    Two runs writing one folder would replace each other's models and delete each other's
    temporary folders. The lock is flock(2) on DIR/.plait-train.lock: the kernel releases it when
    the process ends in any way (kill -9 included), so a lock file left behind by a killed run is
    never "stale": the next run takes it. The file holds the owner's pid, host and start time, for
    the message that a second run prints. Where the filesystem has no flock (some network
    filesystems), the pid decides: a lock whose process is alive on this host is respected.
    """

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / LOCK_FILE
        self._fd: Optional[int] = None
        self._acquire()

    def _acquire(self) -> None:
        import fcntl

        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        for _ in range(20):
            try:
                fd = os.open(self.path, flags | getattr(os, "O_NONBLOCK", 0), 0o644)
            except OSError as err:
                what = "is a symbolic link" if err.errno == errno.ELOOP else f"cannot be opened: {err.strerror}"
                raise CLIError(
                    f"The lock file {str(self.path)!r} of --output {what} (errno {err.errno}). Remove it "
                    "(or fix the folder's permissions) and run again."
                ) from err
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise CLIError(f"The lock file {str(self.path)!r} is not a regular file: remove it and run again.")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = self._owner(fd)
                os.close(fd)
                raise self._in_use(owner) from None
            except OSError:
                # No flock here: fall back to the pid written in the file.
                owner = self._owner(fd)
                if owner.get("host") == socket.gethostname() and _alive(owner.get("pid")):
                    os.close(fd)
                    raise self._in_use(owner) from None
            # The previous holder may have removed the file between our open and our flock: the
            # lock is only ours if the name still leads to the file we locked.
            try:
                same = os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            self._fd = fd
            owner_text = json.dumps(
                {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                 "command": " ".join(["plait", *sys.argv[1:]])}
            ).encode("utf8")
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, owner_text, 0)
            except OSError:
                pass  # the owner's details are for messages only (e.g. a full disk): the flock is the lock
            return
        raise CLIError(f"Cannot take the lock {str(self.path)!r}: it keeps being replaced. Is another run starting?")

    @classmethod
    def probe(cls, folder: Path, option: str) -> None:
        """Raise the in-use error if a live run holds `folder`'s lock; create and change nothing."""
        import fcntl

        path = Path(folder) / LOCK_FILE
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags)
        except OSError:
            return  # no lock file (or not one we can open): no run holds the folder
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = cls._owner(fd)
                who = f"pid {owner.get('pid', '?')} on {owner.get('host', '?')}, since {owner.get('since', '?')}"
                raise CLIError(
                    f"{option} {str(folder)!r} is in use by a running `plait train` ({who}): its model-last "
                    "may change while it is read. Resume once that run has ended (or stopped with Ctrl-C)."
                ) from None
            except OSError:
                return
        finally:
            os.close(fd)  # closing drops the shared lock taken to test

    @staticmethod
    def _owner(fd: int) -> Dict[str, Any]:
        try:
            data = json.loads(os.pread(fd, 4096, 0).decode("utf8", "replace") or "{}")
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _in_use(self, owner: Dict[str, Any]) -> CLIError:
        who = f"pid {owner.get('pid', '?')} on {owner.get('host', '?')}, since {owner.get('since', '?')}"
        return CLIError(
            f"--output {str(self.path.parent)!r} is in use by another `plait train` ({who}): two runs writing "
            "one folder would replace each other's models. Wait for that run to end (or stop it), or pass "
            "another --output.",
            [f"lock file: {self.path}"] + ([f"its command: {owner['command']}"] if owner.get("command") else []),
        )

    def release(self) -> None:
        """Remove the lock file and unlock (idempotent); the kernel does it too when the process dies."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                os.unlink(self.path)
        except OSError:
            pass
        os.close(fd)

    def __del__(self) -> None:
        self.release()


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (TypeError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True  # someone else's live process
    return int(pid) != os.getpid()


# ---------------------------------------------------------------------------------------------
# Reading another run's folder: regular files only


def _read_model_files(folder: Path, warn_extra: bool = True) -> Dict[str, bytes]:
    """The files of a model directory (model-best), read to be copied: the four a model needs.

    The folder and each file must be regular (no links); anything else in it is left behind with
    a warning naming it.
    """
    if os.path.islink(folder) or not folder.is_dir():
        kind = "a symbolic link" if os.path.islink(folder) else "not a directory"
        raise CLIError(
            f"Cannot copy {str(folder)!r} as the best model so far: it is {kind}. plait copies only a real "
            "folder of regular files; resume from a folder without links, or remove that model-best."
        )
    needed = (md.MODEL_FILE, md.CONFIG_FILE, md.META_FILE, md.SAMPLE_FILE)
    for name in needed:
        # A copy is never made of a link, even one leading inside the folder (the reader below
        # would follow that one): what lands in MINE is what THEIRS holds as a file.
        if os.path.islink(folder / name):
            raise CLIError(
                f"Cannot copy {str(folder / name)!r} as part of the best model so far: it is a symbolic link "
                f"(to {os.readlink(folder / name)!r}). plait copies only regular files; replace the link with "
                "the file itself if it is meant, or remove that model-best."
            )
    files = {name: md.read_file(folder / name) for name in needed}
    extra = sorted(entry.name for entry in os.scandir(folder) if entry.name not in needed)
    for name in extra if warn_extra else ():
        warn(f"Not copied from {folder}: {name} (a model directory needs only {', '.join(needed)})")
    return files


def _resume_dir(resume: Path) -> Path:
    """DIR/model-last (or DIR itself when it is a model-last) holding a training state."""
    for candidate in (resume / md.LAST, resume):
        if (candidate / md.STATE_FILE).is_file():
            return _no_links(candidate)
    try:
        found = md.find_model_dir(resume, prefer=md.LAST)
    except CLIError:
        found = None
    if found is not None and (found / md.STATE_FILE).is_file():
        return _no_links(found)
    raise CLIError(
        f"Cannot resume from {str(resume)!r}: no {md.LAST}/{md.STATE_FILE} there. Pass the --output "
        "folder of an earlier `plait train` run (model-best holds no training state)."
    )


def _new_run_id() -> str:
    import uuid

    return uuid.uuid4().hex[:16]


def _best_of_this_run(resume_dir: Path, state: TrainState) -> Optional[Dict[str, bytes]]:
    """The files model-best must get back when the run folder's model-best is not this run's.

    A new run's first save writes model-last and then model-best; a kill or a full disk between
    the two leaves the earlier run's model-best beside this run's model-last. When the saved step
    is this run's best (always so after a first save), model-last's model is the best one: its
    four files are returned, to be written as model-best at the first save. Otherwise (or when
    model-best is this run's) None, with a warning in the first case.
    """
    best = resume_dir.parent / md.BEST
    try:
        best_run = md.read_meta(best).get("run") if (best / md.META_FILE).is_file() else None
    except CLIError:
        best_run = None  # a damaged model-best is no run's
    if best_run == state.run:
        return None
    if state.best_step == state.step and state.best_step >= 0:
        info(
            f"{best} is not this run's best model (a save was cut short, or it is damaged): it is rebuilt "
            f"from {resume_dir}, whose model is this run's best"
        )
        return _read_model_files(resume_dir, warn_extra=False)
    warn(
        f"{best} is not this run's best model (its best, step {state.best_step}, was never saved there): "
        "it stays until this run's next better dev score replaces it"
    )
    return None


def _no_links(model_dir: Path) -> Path:
    """`model_dir`, after checking that its training/ (and it, if it is a model-last/model-best) is no link.

    (The files in them are read by md.read_file, which refuses links out of the directory.) The folder given to
    --resume may itself be a link: that is the user's own choice; what lies inside it may not be.
    """
    inside = [model_dir / md.STATE_DIR] + ([model_dir] if model_dir.name in (md.LAST, md.BEST) else [])
    for path in inside:
        if os.path.islink(path):
            raise CLIError(
                f"Cannot resume from {str(model_dir)!r}: {str(path)!r} is a symbolic link (to "
                f"{os.readlink(path)!r}). plait reads only real folders of regular files inside a run folder."
            )
    return model_dir


def _seed(seed: int, gpu: int) -> None:
    import random

    # Not plait.util.fix_random_seed: it imports torch where installed (seconds), to seed a
    # library that the CPU path never uses.
    random.seed(seed)
    numpy.random.seed(seed % 2**32)
    if gpu is not None and gpu >= 0:
        from ..util import fix_random_seed

        fix_random_seed(seed)


def _check_output_shape(model: Any, X: Any, dataset: Any, where: str) -> None:
    n_labels = len(dataset.labels)
    Y = model.predict(X)
    if dataset.task == "tag":
        widths = {tuple(getattr(y, "shape", ())) [-1:] for y in Y} if isinstance(Y, list) else None
        ok = isinstance(Y, list) and widths == {(n_labels,)}
        shape = [tuple(getattr(y, "shape", ())) for y in Y] if isinstance(Y, list) else getattr(Y, "shape", type(Y).__name__)
        want = f"a list of (n_tokens, {n_labels}) arrays, one per sentence"
    else:
        ok = getattr(Y, "ndim", 0) == 2 and Y.shape[1] == n_labels
        shape = getattr(Y, "shape", type(Y).__name__)
        want = f"(n, {n_labels}) scores"
    if not ok:
        raise ConfigError(
            f"Invalid config {where!r}",
            [
                f"[model]: outputs {shape} for {len(X)} inputs, but the {dataset.task!r} task of [data] needs "
                f"{want} ({n_labels} labels). End the model with a Softmax whose nO is {n_labels} or unset."
            ],
        )


def _restore(resume_dir: Path, resolved: Resolved, data_rng: numpy.random.Generator) -> TrainState:
    """Load the saved weights, optimizer state, counters and generator states of `resume_dir`.

    Every file is read through the model directory reader (plait._safeio: regular files inside
    the directory, size limits) and every counter is checked before it is used.
    """
    model, optimizer = resolved.model, resolved.optimizer
    meta = md.read_meta(resume_dir)
    if list(meta["labels"]) != list(resolved.dataset.labels):
        raise CLIError(
            f"Cannot resume from {str(resume_dir)!r}: it was trained on labels {meta['labels'][:12]}, "
            f"the data now has {list(resolved.dataset.labels)[:12]}. Resume with the data the run was started with."
        )
    rel = md.RAW_WEIGHTS_FILE if os.path.lexists(resume_dir / md.RAW_WEIGHTS_FILE) else md.MODEL_FILE
    data, _ = md.read_weights(resume_dir, rel)
    saved = md.read_json(resume_dir / md.STATE_FILE)
    for key in ("state", "optimizer", "rng"):
        if not isinstance(saved.get(key), dict):
            raise md.damaged(resume_dir, md.STATE_FILE, repr(key), "the object is missing",
                             "Restore the run folder, or start a new run instead of --resume")
    state = TrainState.from_json(saved["state"], resume_dir)
    try:
        model.from_bytes(data)
    except ValueError as err:
        raise CLIError(
            f"Cannot resume from {str(resume_dir)!r}: its weights ({rel}) do not fit the model of the config "
            f"({err}). Resume with the config the run was started with."
        ) from err
    npz = md.read_file(resume_dir / md.OPTIMIZER_FILE)
    md.restore_optimizer_state(optimizer, model, npz, saved["optimizer"], resume_dir)
    md.set_rng_states(saved["rng"], data_rng, resume_dir)
    return state


class _Trainer:
    """One training run: the loop, evaluation, saving and the console output."""

    def __init__(
        self, resolved: Resolved, state: TrainState, data_rng: numpy.random.Generator, output: Path,
        progress: Optional[bool], *, resumed: bool = False, records: Optional[List[Dict[str, Any]]] = None,
        lock: Optional[OutputLock] = None, carry_best: Optional[Dict[str, bytes]] = None, comm: Any = None,
    ) -> None:
        from ..loss import CategoricalCrossentropy, SequenceCategoricalCrossentropy

        self.r = resolved
        self.model = resolved.model
        self.optimizer = resolved.optimizer
        self.dataset = resolved.dataset
        self.settings = resolved.training
        self.task = self.dataset.task
        self.state = state
        self.resumed = resumed
        self.records = list(records or [])
        self.data_rng = data_rng
        self.output = output
        self._lock = lock
        # Data-parallel run (None: one process): every rank takes its strided share of each
        # batch; gradients are averaged before each step; only rank 0 (the lead) prints and saves.
        self.comm = comm
        self.rank = comm.rank if comm is not None else 0
        self.size = comm.size if comm is not None else 1
        self.lead = self.rank == 0
        self.dp: Any = None
        if comm is not None:
            from ..distributed import DataParallel

            # prepare() broadcast already. shard_update: on one machine the ranks share the
            # weights and the optimizer's state, each stepping its slice (plait/distributed/_sharded.py);
            # nothing else in this loop writes them (evaluation swaps the averages in, saving reads).
            self.dp = DataParallel(self.model, comm, broadcast=False, shard_update=True)
        # THEIRS/model-best of `--resume THEIRS --output MINE`, written at the first save unless
        # that evaluation is itself a new best.
        self._carry_best = carry_best
        self._saved_last = False
        # tqdm's disable=None switches the bar off where stderr is not a terminal (logs, tests).
        self.progress_disable = None if progress is None else (not progress)
        self.loss = SequenceCategoricalCrossentropy() if self.task == "tag" else CategoricalCrossentropy()
        self.images = getattr(self.dataset, "unit", "") == "images"
        self.speed_unit = "ex/s" if self.images else "words/s"
        self.eval_batch = eval_batch_size(getattr(self.dataset, "unit", ""))
        self._interval_loss = 0.0
        self._interval_n = 0
        self._interval_words = 0
        self._interval_seconds = 0.0
        self._sample = self._make_sample()
        self._order: Optional[numpy.ndarray] = None

    # -------------------------------------------------------------------------------- loop

    def run(self) -> int:
        """Train until a limit, patience or a signal stops it; returns the exit status.

        The output folder's lock is released when the run ends, however it ends.
        """
        try:
            return self._run()
        finally:
            if self._lock is not None:
                self._lock.release()

    def _run(self) -> int:
        s, st = self.settings, self.state
        if self.lead:
            self._print_header(self.resumed)
        stop_reason = "done"
        stopped_by: Optional[int] = None  # the signal the run stops for (agreed by all ranks)
        with _Stop() as stop:
            bar = self._new_bar()
            try:
                while not self._limits_reached():
                    batch_idx = self._next_batch()
                    if batch_idx is None:
                        continue  # an epoch ended
                    t0 = time.perf_counter()
                    self._train_step(batch_idx)
                    self._interval_seconds += time.perf_counter() - t0
                    stopped_by = stop.signum
                    if self.comm is not None:
                        # A signal reaches the ranks at different moments: they stop after the
                        # step at which they agree, here, whatever arrives later in the step (a
                        # rank that stopped alone would leave the others waiting).
                        stopped_by = int(self.comm.allreduce_scalar(float(stop.signum or 0), op="max")) or None
                    if bar is not None:
                        bar.update(1)
                        if st.step % 10 == 0 and self._interval_n and self._interval_seconds:
                            speed = self._interval_words / self._interval_seconds
                            bar.set_description(f"Epoch {st.epoch}", refresh=False)
                            bar.set_postfix_str(
                                f"loss={self._interval_loss / self._interval_n:.4f}, {speed:,.0f} {self.speed_unit}",
                                refresh=False,
                            )
                    if st.step % s.eval_frequency == 0:
                        bar = self._close_bar(bar)
                        self._evaluate_and_save()
                        if s.patience and st.evals_since_best >= s.patience:
                            stop_reason = f"no better dev score in {s.patience} evaluations (patience)"
                            break
                        bar = self._new_bar()
                    if stopped_by is not None:
                        break
            finally:
                bar = self._close_bar(bar)
            # Inside the handler: a signal now only asks for the stop already under way.
            if st.last_eval_step != st.step:
                self._evaluate_and_save()
            if self._carry_best is not None:
                # Resumed at its limit (no save this time): the best model still goes in place.
                self._write_model(md.BEST, self._carry_best)
                self._carry_best = None
        if stopped_by is not None:
            if self.lead:
                name = "Ctrl-C" if stopped_by == signal.SIGINT else signal.Signals(stopped_by).name
                warn(f"Stopped by {name} at step {st.step}: model-last saved to {self.output / md.LAST}")
                echo(f"  continue with: plait train --resume {self.output}", err=True)
            return EXIT_SIGINT if stopped_by == signal.SIGINT else EXIT_SIGTERM
        if self.lead:
            self._print_footer(stop_reason)
        return EXIT_OK

    def _limits_reached(self) -> bool:
        s, st = self.settings, self.state
        return bool((s.max_steps and st.step >= s.max_steps) or (s.max_epochs and st.epoch >= s.max_epochs))

    def _next_batch(self) -> Optional[numpy.ndarray]:
        """The indices of the next batch, or None when the epoch ends (counters moved on)."""
        st = self.state
        n = len(self.dataset.train)
        if st.epoch_offset == 0 and st.epoch_rng is None:
            st.epoch_rng = self.data_rng.bit_generator.state
            self._order = self.data_rng.permutation(n)
        elif self._order is None:
            # Resumed mid-epoch: draw the epoch's order again from the state that drew it.
            self.data_rng.bit_generator.state = st.epoch_rng
            self._order = self.data_rng.permutation(n)
        if st.epoch_offset >= n:
            st.epoch += 1
            st.epoch_offset = 0
            st.epoch_rng = None
            self._order = None
            return None
        size = self._batch_size()
        idx = self._order[st.epoch_offset : st.epoch_offset + size]
        st.epoch_offset += len(idx)
        return idx

    def _batch_size(self) -> int:
        schedule = self.settings.batch_size
        if isinstance(schedule, int):
            return schedule
        if callable(schedule):
            value = schedule(self.state.step)
        else:
            # A plain iterator schedule: replay it to the current step once (after a resume).
            if not hasattr(self, "_schedule_pos"):
                self._schedule_pos = 0
            while self._schedule_pos < self.state.step:
                next(schedule)
                self._schedule_pos += 1
            value = next(schedule)
            self._schedule_pos += 1
        size = int(value)
        if size < 1:
            raise CLIError(f"[training] batch_size: the schedule gave {value!r} at step {self.state.step}; it must be >= 1")
        return size

    def _train_step(self, idx: numpy.ndarray) -> None:
        n_batch = len(idx)
        words = n_batch if self.images else sum(len(x) for x in take(self.dataset.train.X, idx))
        if self.comm is not None:
            idx = idx[self.rank :: self.size]  # this rank's share; the shares make up the batch
        if len(idx):
            X = take(self.dataset.train.X, idx)
            Y = take(self.dataset.train.Y, idx)
            guesses, backprop = (self.dp or self.model).begin_update(_on_device(self.model, X))
            truths = self._truths(Y)
            d_scores = self.loss.get_grad(guesses, truths)
            if self.comm is not None and len(idx) * self.size != n_batch:
                # The loss is a mean over this rank's share; the ranks' gradients are averaged.
                # Shares of unequal size (a batch not divisible by the ranks) are weighted so
                # that the average is the mean over the whole batch.
                d_scores = _scaled(d_scores, len(idx) * self.size / n_batch)
            backprop(d_scores)
            loss_sum, n = self._cross_entropy(guesses, truths)
            self._interval_loss += loss_sum
            self._interval_n += n
        # Averaged over the ranks (reduced during backprop); an empty share adds zeros.
        (self.dp or self.model).finish_update(self.optimizer)
        self.optimizer.step_schedules()
        self.state.step += 1
        self._interval_words += words
        self.state.words_seen += words

    def _truths(self, Y: Any) -> Any:
        if self.task == "tag":
            return [numpy.asarray(y, dtype="int64") for y in Y]
        return numpy.asarray(Y, dtype="int64")

    def _cross_entropy(self, guesses: Any, truths: Any) -> tuple:
        """(sum of -log p(gold), count) over the examples (tokens for tagging)."""
        from ..util import to_numpy

        if self.task == "tag":
            total, n = 0.0, 0
            for g, t in zip(guesses, truths):
                p = to_numpy(g)[numpy.arange(len(t)), t]
                total += float(-numpy.log(numpy.maximum(p, 1e-12)).sum())
                n += len(t)
            return total, n
        p = to_numpy(guesses)[numpy.arange(len(truths)), truths]
        return float(-numpy.log(numpy.maximum(p, 1e-12)).sum()), len(truths)

    # -------------------------------------------------------------------------------- evaluation

    def _predict_params(self) -> Any:
        averages = getattr(self.optimizer, "averages", None)
        if averages:
            return self.model.use_params(averages)
        return nullcontext()

    def _evaluate_and_save(self) -> None:
        st = self.state
        dev = self.dataset.dev
        t0 = time.perf_counter()
        weights = b""
        with self._predict_params():
            if self.comm is not None:
                score = self._sharded_accuracy(dev)
            elif len(dev):
                guesses = predict_ids(self.model, dev.X, self.task, self.eval_batch)
                score = accuracy(guesses, dev.Y, self.task)
            else:
                score = float("nan")
            if self.lead:
                weights = self.model.to_bytes()
        eval_seconds = time.perf_counter() - t0
        if self.comm is not None:
            self._interval_loss = self.comm.allreduce_scalar(self._interval_loss, op="sum")
            self._interval_n = int(self.comm.allreduce_scalar(self._interval_n, op="sum"))
        st.seconds += self._interval_seconds
        loss = self._interval_loss / self._interval_n if self._interval_n else float("nan")
        speed = self._interval_words / self._interval_seconds if self._interval_seconds else 0.0
        improved = not math.isnan(score) and score > st.best_score
        if improved:
            st.best_score, st.best_step, st.evals_since_best = score, st.step, 0
        else:
            st.evals_since_best += 1
        if not math.isnan(score):
            # Schedules such as plateau.v1 react to the evaluation score.
            self.optimizer.last_score = score
        st.last_eval_step = st.step
        if not self.lead:
            # The same counters and decisions as rank 0 (patience, schedules), nothing written.
            self._interval_loss, self._interval_n = 0.0, 0
            self._interval_words, self._interval_seconds = 0, 0.0
            return
        record = {
            "step": st.step,
            "epoch": st.epoch,
            "loss": loss,
            "score": None if math.isnan(score) else score,
            "wps": speed,
            "speed_unit": self.speed_unit,
            "seconds": round(st.seconds, 3),
            "eval_seconds": round(eval_seconds, 3),
            "best": improved,
            "run": st.run,
        }
        self._print_row(record)
        self.records.append(record)
        scores = {"dev_accuracy": record["score"], "loss": loss}
        # Each write replaces its file or folder atomically (the previous one stays whole until the
        # new one is complete on disk). The first one of a run is the first to touch DIR.
        self._save(lambda: md.write_metrics(self.output, self.records), self.output / md.METRICS_FILE)
        best_files = self._model_files(weights, scores, training=False) if improved else self._carry_best
        last_files = self._model_files(weights, scores, training=True)
        if not self._saved_last and not self.resumed:
            # A new run's first save: model-last first. Until it is written (the largest write,
            # so a full disk stops it first) an earlier run in DIR keeps both its models; a kill
            # between the two leaves this run's model-last, from which --resume rebuilds
            # model-best (_best_of_this_run). The first evaluation is always a best one.
            self._write_model(md.LAST, last_files)
            self._write_model(md.BEST, best_files)
        else:
            # Later: model-best first. A kill between the two leaves the model-last of the previous
            # save, and the resumed run reaches this better score again and saves it.
            self._write_model(md.BEST, best_files)
            self._write_model(md.LAST, last_files)
        self._carry_best = None
        self._saved_last = True
        self._interval_loss, self._interval_n = 0.0, 0
        self._interval_words, self._interval_seconds = 0, 0.0

    def _sharded_accuracy(self, dev: Any) -> float:
        """Dev accuracy with each rank scoring its strided share: the same number on every rank."""
        from ._evaluate import flat

        share = numpy.arange(self.rank, len(dev), self.size)
        correct = total = 0
        if len(share):
            guesses = predict_ids(self.model, take(dev.X, share), self.task, self.eval_batch)
            g, t = flat(guesses, self.task), flat(take(dev.Y, share), self.task)
            correct, total = int((g == t).sum()), int(t.size)
        correct = int(self.comm.allreduce_scalar(correct, op="sum"))
        total = int(self.comm.allreduce_scalar(total, op="sum"))
        if not len(dev):
            return float("nan")
        return correct / total if total else 0.0

    # -------------------------------------------------------------------------------- saving

    def _write_model(self, name: str, files: Optional[Dict[str, bytes]]) -> None:
        if files is not None:
            self._save(lambda: md.write_dir_atomically(self.output / name, files), self.output / name)
            if name == md.LAST:
                self._saved_last = True  # from here on, --resume continues this run

    def _save(self, write: Any, target: Path) -> None:
        """Run one atomic write; a failed one (a full disk, EFBIG, permissions) becomes a clear error."""
        try:
            write()
        except OSError as err:
            if self._saved_last:
                then = f"continue from the last save with: plait train --resume {self.output}"
            else:
                then = "run it again (this run saved no model yet)"
            raise CLIError(
                f"Cannot save {str(target)!r}: {err.strerror or err} ({type(err).__name__}, errno {err.errno}) "
                f"at step {self.state.step}. What was there before is kept whole (every save replaces "
                f"its file or folder atomically). Free disk space, then {then}."
            ) from err

    def _make_sample(self) -> bytes:
        import srsly

        idx = numpy.arange(min(_SAVED_SAMPLE, len(self.dataset.train)))
        X = take(self.dataset.train.X, idx)
        Y = take(self.dataset.train.Y, idx)
        from ..util import to_numpy

        if isinstance(X, list):
            X = [to_numpy(x) if hasattr(x, "shape") else list(x) for x in X]
        else:
            X = to_numpy(X)
        Y = [numpy.asarray(y).tolist() for y in Y] if self.task == "tag" else numpy.asarray(Y).tolist()
        return srsly.msgpack_dumps({"X": X, "Y": Y})

    def _meta(self, scores: Dict[str, Any]) -> Dict[str, Any]:
        st, ds = self.state, self.dataset
        return {
            "plait_version": __version__,
            "dataset": getattr(ds, "name", None),
            "source": getattr(ds, "source", None),
            "task": ds.task,
            "unit": getattr(ds, "unit", None),
            "labels": list(ds.labels),
            "step": st.step,
            "epoch": st.epoch,
            "scores": scores,
            "best_score": None if st.best_score == -math.inf else st.best_score,
            "best_step": st.best_step,
            "n_train": len(ds.train),
            "n_dev": len(ds.dev),
            "seconds": round(st.seconds, 3),
            "run": st.run,
        }

    def _model_files(self, weights: bytes, scores: Dict[str, Any], *, training: bool) -> Dict[str, bytes]:
        files = {
            md.MODEL_FILE: weights,
            md.CONFIG_FILE: self.r.config.to_str().encode("utf8"),
            md.META_FILE: (json.dumps(self._meta(scores), indent=2) + "\n").encode("utf8"),
            md.SAMPLE_FILE: self._sample,
        }
        if training:
            if getattr(self.optimizer, "averages", None):
                files[md.RAW_WEIGHTS_FILE] = self.model.to_bytes()
            npz, counters = md.optimizer_state(self.optimizer, self.model)
            files[md.OPTIMIZER_FILE] = npz
            state = {
                "state": self.state.to_json(),
                "optimizer": counters,
                "rng": md.rng_states(self.data_rng),
            }
            files[md.STATE_FILE] = json.dumps(state).encode("utf8")
        return files

    # -------------------------------------------------------------------------------- output

    def _columns(self) -> List[str]:
        score = "DEV TOK ACC" if self.task == "tag" else "DEV ACC"
        return ["E", "#", "LOSS", score, self.speed_unit.upper(), "TIME"]

    def _print_header(self, resumed: bool) -> None:
        ds, s, st = self.dataset, self.settings, self.state
        unit = getattr(ds, "unit", "examples")
        n_params = sum(
            int(node.get_param(name).size) for node in self.model.walk() for name in node.param_names
            if node.has_param(name)
        )
        info(
            f"Data: {getattr(ds, 'name', '?')} ({ds.task}, {len(ds.labels)} labels) from {getattr(ds, 'source', '?')}: "
            f"{len(ds.train)} train / {len(ds.dev)} dev / {len(ds.test)} test {unit}"
        )
        info(f"Model: {self.model.name}, {n_params:,} parameters; ops: {type(self.model.ops).__name__}")
        limits = []
        if s.max_epochs:
            limits.append(f"{s.max_epochs} epochs")
        if s.max_steps:
            limits.append(f"{s.max_steps} steps")
        batch = s.batch_size if isinstance(s.batch_size, int) else "scheduled"
        info(
            f"Training: up to {' or '.join(limits)}, batch size {batch}, evaluation every {s.eval_frequency} steps"
            + (f", patience {s.patience}" if s.patience else "")
            + (f", dropout {s.dropout}" if s.dropout is not None else "")
            + (f", {self.size} workers (each takes 1/{self.size} of every batch)" if self.size > 1 else "")
            + f"; output in {self.output}"
        )
        if resumed:
            info(f"Resuming at step {st.step} (epoch {st.epoch}), best dev score so far {self._fmt(st.best_score)}")
        self._widths = [3, 7, 8, 11, 9, 7]
        echo("")
        echo(self._fmt_row(self._columns()))
        echo(self._fmt_row(["-" * w for w in self._widths]))

    def _fmt_row(self, cells: Sequence[Any]) -> str:
        out = []
        for i, (cell, width) in enumerate(zip(cells, self._widths)):
            text = str(cell)
            out.append(text.ljust(width) if i == 0 else text.rjust(width))
        return "  ".join(out)

    @staticmethod
    def _fmt(score: float) -> str:
        return "-" if score is None or score == -math.inf or math.isnan(score) else f"{score:.4f}"

    def _print_row(self, record: Dict[str, Any]) -> None:
        score = self._fmt(record["score"] if record["score"] is not None else float("nan"))
        if record["best"]:
            score = "*" + score
        cells = [
            record["epoch"],
            record["step"],
            "-" if math.isnan(record["loss"]) else f"{record['loss']:.4f}",
            score,
            f"{record['wps']:,.0f}",
            _fmt_seconds(record["seconds"]),
        ]
        echo(self._fmt_row(cells))

    def _print_footer(self, reason: str) -> None:
        st = self.state
        echo("")
        if reason != "done":
            info(f"Stopped early: {reason}")
        what = "token accuracy" if self.task == "tag" else "accuracy"
        good(
            f"Best dev {what} {self._fmt(st.best_score)} at step {st.best_step}: saved to {self.output / md.BEST}"
        )
        good(f"Last model (step {st.step}, epoch {st.epoch}) saved to {self.output / md.LAST}")
        info(f"Metrics: {self.output / md.METRICS_FILE}; training took {_fmt_seconds(st.seconds)} (without evaluation)")

    def _new_bar(self) -> Any:
        from tqdm import tqdm

        st = self.state
        total = self.settings.eval_frequency - (st.step % self.settings.eval_frequency)
        if self.settings.max_steps:
            total = min(total, max(0, self.settings.max_steps - st.step))
        if total == 0:
            return None
        return tqdm(
            total=total, desc=f"Epoch {st.epoch}", leave=False, disable=self.progress_disable,
            unit="step", file=sys.stderr, dynamic_ncols=True,
        )

    @staticmethod
    def _close_bar(bar: Any) -> None:
        if bar is not None:
            bar.close()
        return None


def _scaled(d_scores: Any, factor: float) -> Any:
    """d_scores (an array, or a list of arrays for taggers) times factor."""
    if isinstance(d_scores, list):
        return [d * factor for d in d_scores]
    return d_scores * factor


def _on_device(model: Any, X: Any) -> Any:
    """An array batch moved to the model's device (a no-op on the CPU); lists stay as they are."""
    if isinstance(X, numpy.ndarray) and model.ops.xp is not numpy:
        return model.ops.asarray(X)
    return X


def _fmt_seconds(seconds: float) -> str:
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
