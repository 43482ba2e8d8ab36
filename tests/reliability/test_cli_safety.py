"""The command line and a stranger's run folder (issue 17, classes 5, 6, 8 and 9 on the CLI side).

* `plait train --resume THEIRS --output MINE` never copies a link (or a FIFO, a device) out of
  THEIRS into MINE: a needed file that is a link is refused with its name, anything else is left
  behind with a warning naming it.
* Labels, tokens and messages that come from a model directory are printed with every control
  character escaped: no terminal escape sequence, bidi override or extra line reaches the screen.
* `plait predict` / `plait evaluate` on a run folder whose model-best is damaged refuse, saying why
  and how to use model-last; they never fall back to model-last silently.
* Two `plait train` runs on one --output: the second says the folder is in use (by which pid)
  instead of dying with FileNotFoundError; a lock left by a killed run is taken over.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import numpy
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

from _cli_helpers import TINY_MNIST  # noqa: E402

from plait.cli import main  # noqa: E402
from plait.cli._common import printable  # noqa: E402
from plait.cli._train import LOCK_FILE, OutputLock  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links, FIFOs and flock")

BEST, LAST = "model-best", "model-last"
SHORT = ["--set", "training.max_steps=5", "--set", "training.max_epochs=0"]


@pytest.fixture
def cli(capsys):
    def run(*args):
        status = main([str(a) for a in args])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A finished 5-step run, its config, a few digits to predict and a private file outside."""
    base = tmp_path_factory.mktemp("safety")
    config = base / "tiny.cfg"
    config.write_text(TINY_MNIST, encoding="utf8")
    assert main(["train", str(config), "--output", str(base / "run"), *SHORT]) == 0
    numpy.save(base / "digits.npy", numpy.zeros((3, 28, 28), dtype="uint8"))
    secret = base / "private.key"
    secret.write_text("-----BEGIN PRIVATE KEY----- SECRET\n")
    return base


def _copy(made, name):
    target = made / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(made / "run", target, symlinks=True)
    return target


def _tree(folder):
    """relative path -> bytes of every file under `folder`; asserts that none is a link."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            assert not path.is_symlink(), f"{path} is a link"
            if path.is_file():
                out[str(path.relative_to(folder))] = path.read_bytes()
    return out


# ------------------------------------------------------------------------------------- class 5


def test_resume_leaves_a_linked_extra_file_behind_and_names_it(made, cli, tmp_path):
    theirs = _copy(made, "theirs-extra")
    (theirs / BEST / "id_rsa").symlink_to(made / "private.key")
    (theirs / BEST / "notes.txt").write_text("not part of a model\n")
    mine = tmp_path / "mine"
    status, out, err = cli("train", "--resume", theirs, "--output", mine, "--set", "training.max_steps=7")
    assert status == 0, err
    assert "Not copied from" in err and "id_rsa" in err and "notes.txt" in err
    files = _tree(mine)
    assert not any(b"SECRET" in data for data in files.values())
    assert not any(name.endswith(("id_rsa", "notes.txt")) for name in files)
    # The best model so far came along, as regular files equal to THEIRS'.
    best = {name: (theirs / BEST / name).read_bytes() for name in ("model.bin", "meta.json", "config.cfg")}
    if json.loads(files[f"{BEST}/meta.json"])["step"] == 5:
        assert all(files[f"{BEST}/{name}"] == data for name, data in best.items())


@pytest.mark.parametrize("where", [f"{BEST}/config.cfg", f"{BEST}/model.bin", f"{BEST}/sample.msgpack"])
def test_resume_refuses_a_needed_file_that_is_a_link(made, cli, tmp_path, where):
    theirs = _copy(made, "theirs-link")
    outside = made / ("outside-" + where.replace("/", "-"))
    shutil.copyfile(theirs / where, outside)  # the very same bytes: still refused, it is a link
    (theirs / where).unlink()
    (theirs / where).symlink_to(outside)
    mine = tmp_path / "mine"
    status, out, err = cli("train", "--resume", theirs, "--output", mine, "--set", "training.max_steps=7")
    assert status == 1
    assert "symbolic link" in err and where.split("/")[-1] in err and "Traceback" not in err
    # Nothing was copied into MINE (it was made, and locked, but holds no model).
    assert not (mine / BEST).exists() and not (mine / LAST).exists()


@pytest.mark.parametrize("where", [f"{LAST}/training/optimizer.npz", f"{LAST}/training/state.json", f"{LAST}/meta.json"])
def test_resume_refuses_to_read_through_a_link_out_of_the_run_folder(made, cli, tmp_path, where):
    theirs = _copy(made, "theirs-read")
    outside = made / ("read-" + where.replace("/", "-"))
    shutil.copyfile(theirs / where, outside)
    (theirs / where).unlink()
    (theirs / where).symlink_to(outside)
    status, out, err = cli("train", "--resume", theirs, "--output", tmp_path / "mine", "--set", "training.max_steps=7")
    assert status == 1
    assert where.split("/")[-1] in err and "Traceback" not in err


def test_resume_refuses_a_linked_model_last_folder(made, cli, tmp_path):
    theirs = _copy(made, "theirs-dirlink")
    shutil.move(str(theirs / LAST), str(made / "elsewhere-last"))
    (theirs / LAST).symlink_to(made / "elsewhere-last")
    status, out, err = cli("train", "--resume", theirs, "--output", tmp_path / "mine", "--set", "training.max_steps=7")
    assert status == 1
    assert "symbolic link" in err and "model-last" in err


def test_resume_refuses_a_fifo_in_their_model_best_without_blocking(made, tmp_path):
    theirs = _copy(made, "theirs-fifo")
    (theirs / BEST / "meta.json").unlink()
    os.mkfifo(theirs / BEST / "meta.json")
    proc = subprocess.run(
        [sys.executable, "-m", "plait", "train", "--resume", str(theirs), "--output", str(tmp_path / "mine"),
         "--set", "training.max_steps=7"],
        capture_output=True, text=True, timeout=120,
    )
    # The FIFO is never opened: a model-best without a readable meta.json is no run's, and since
    # THEIRS' last save was its best, the best model is rebuilt from model-last instead.
    assert proc.returncode == 0, proc.stderr
    assert "is not this run's best model" in proc.stdout
    files = _tree(tmp_path / "mine")
    assert json.loads(files[f"{BEST}/meta.json"])["labels"] == [str(i) for i in range(10)]
    # With model-last's best gone too (an earlier best), the FIFO is refused, not read.
    theirs = _copy(made, "theirs-fifo-2")
    state = json.loads((theirs / LAST / "training" / "state.json").read_text())
    state["state"]["best_step"] = 3
    (theirs / LAST / "training" / "state.json").write_text(json.dumps(state))
    (theirs / BEST / "meta.json").unlink()
    os.mkfifo(theirs / BEST / "meta.json")
    proc = subprocess.run(
        [sys.executable, "-m", "plait", "train", "--resume", str(theirs), "--output", str(tmp_path / "mine2"),
         "--set", "training.max_steps=7"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "meta.json" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------------- class 6

HOSTILE = [
    "\x1b]0;owned\x07", "\x1b[2J\x1b[H", "\u202eexe.txt", "\x9b31m", "tab\there",
    "new\nline", "nul\x00", "sep\u2028", "ok", "del\x7f",
]


def _clean(text):
    """Nothing a terminal acts on: only printable characters, spaces, newlines and tabs."""
    bad = [c for c in text if not (c in "\n\t" or c.isprintable() or unicodedata.category(c) == "Zs")]
    assert not bad, f"raw control characters printed: {bad!r}"


def test_labels_with_terminal_escapes_are_printed_escaped(made, cli):
    run = _copy(made, "hostile")
    for name in (BEST, LAST):
        meta = json.loads((run / name / "meta.json").read_text())
        meta["labels"] = HOSTILE
        (run / name / "meta.json").write_text(json.dumps(meta))
    digits = numpy.stack([numpy.full((28, 28), v, dtype="uint8") for v in range(0, 250, 10)])
    numpy.save(made / "many.npy", digits)
    status, out, err = cli("predict", run, made / "many.npy")
    assert status == 0, err
    _clean(out)
    _clean(err)
    lines = out.splitlines()
    assert len(lines) == len(digits)  # a label with a newline does not add a line
    assert all(len(line.split("\t")) == 3 for line in lines)  # nor a tab a column
    printed = {line.split("\t")[1] for line in lines}
    assert printed <= {printable(label) for label in HOSTILE}

    # The JSON lines file keeps the labels exactly (JSON escapes the controls itself).
    status, out, err = cli("predict", run, made / "many.npy", "--output", made / "hostile.jsonl")
    assert status == 0, err
    labels = {json.loads(line)["label"] for line in (made / "hostile.jsonl").read_text().splitlines()}
    assert labels <= set(HOSTILE)

    # evaluate: the labels differ from the dataset's, and the error message shows them escaped.
    status, out, err = cli("evaluate", run, "--limit", "20")
    assert status == 1
    _clean(out)
    _clean(err)
    assert "owned" in err


def test_printable_escapes_every_character_a_terminal_could_act_on():
    every = "".join(chr(c) for c in range(0x110000))
    escaped = printable(every)
    _clean(escaped.replace("\n", "").replace("\t", ""))
    assert "\n" not in escaped and "\t" not in escaped
    assert printable("naïve café 東京 ok") == "naïve café 東京 ok"
    assert printable("a\x1b[31mb") == "a\\x1b[31mb"
    assert printable("\u202e") == "\\u202e"
    assert printable("x\ty\nz", keep="\n\t") == "x\ty\nz"


# ------------------------------------------------------------------------------------- class 8


@pytest.mark.parametrize("damage", ["no meta.json", "a file", "a link", "bad weights"])
@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_a_damaged_model_best_is_refused_not_replaced_by_model_last(made, cli, damage, command):
    run = _copy(made, f"damaged-{command}")
    best = run / BEST
    if damage == "no meta.json":
        (best / "meta.json").unlink()
        why = "no meta.json"
    elif damage == "a file":
        shutil.rmtree(best)
        best.write_text("not a folder")
        why = "not a directory"
    elif damage == "a link":
        shutil.rmtree(best)
        best.symlink_to(made / "private.key")
        why = "symbolic link"
    else:
        (best / "model.bin").write_bytes((best / "model.bin").read_bytes()[:1000])
        why = "model.bin"
    args = [made / "digits.npy"] if command == "predict" else ["--limit", "20"]
    status, out, err = cli(command, run, *args)
    assert status == 1, out
    assert "model-best" in err and why in err and str(run / LAST) in err, err
    assert "Traceback" not in err
    # model-last, asked for by name, works.
    status, out, err = cli(command, run / LAST, *args)
    assert status == 0, err


def test_a_missing_model_best_is_said_before_model_last_is_used(made, cli):
    run = _copy(made, "no-best")
    shutil.rmtree(run / BEST)
    status, out, err = cli("predict", run, made / "digits.npy")
    assert status == 0, err
    assert "has no model-best: using model-last" in err


# ------------------------------------------------------------------------------------- class 9


def test_a_second_run_on_a_locked_folder_says_it_is_in_use(made, cli):
    run = _copy(made, "locked")
    before = _tree(run)
    lock = OutputLock(run)
    try:
        status, out, err = cli("train", made / "tiny.cfg", "--output", run, *SHORT)
        assert status == 1
        assert "is in use by another `plait train`" in err and f"pid {os.getpid()}" in err
        assert "FileNotFoundError" not in err and "another --output" in err
        status, out, err = cli("train", "--resume", run, "--set", "training.max_steps=9")
        assert status == 1 and "in use" in err
    finally:
        lock.release()
    assert _tree(run) == before  # neither run touched anything
    status, out, err = cli("train", made / "tiny.cfg", "--output", run, *SHORT)
    assert status == 0, err
    assert not (run / LOCK_FILE).exists()


def test_resuming_from_a_folder_that_a_run_is_writing_is_refused(made, cli, tmp_path):
    theirs = _copy(made, "theirs-busy")
    lock = OutputLock(theirs)
    try:
        status, out, err = cli("train", "--resume", theirs, "--output", tmp_path / "mine", "--set", "training.max_steps=7")
        assert status == 1
        assert "--resume" in err and "in use by a running `plait train`" in err and f"pid {os.getpid()}" in err
        assert not (tmp_path / "mine").exists()
    finally:
        lock.release()
    status, out, err = cli("train", "--resume", theirs, "--output", tmp_path / "mine", "--set", "training.max_steps=7")
    assert status == 0, err
    assert not (theirs / LOCK_FILE).exists()  # the probe made no lock file in THEIRS


def test_a_lock_left_by_a_killed_run_is_taken_over(made, cli):
    run = _copy(made, "stale")
    # A dead process's lock file (pid far above pid_max): no flock holds it.
    (run / LOCK_FILE).write_text(json.dumps({"pid": 2**22 + 17, "host": "elsewhere", "since": "yesterday"}))
    status, out, err = cli("train", made / "tiny.cfg", "--output", run, *SHORT)
    assert status == 0, err
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl", BEST, LAST]


def test_a_lock_file_that_is_a_link_is_not_followed(made, cli):
    run = _copy(made, "lock-link")
    (run / LOCK_FILE).symlink_to(made / "private.key")
    status, out, err = cli("train", made / "tiny.cfg", "--output", run, *SHORT)
    assert status == 1
    assert "symbolic link" in err and LOCK_FILE in err
    assert (made / "private.key").read_text().startswith("-----BEGIN")


def test_two_concurrent_runs_and_a_kill(made, cli):
    run = made / "concurrent"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "plait", "train", str(made / "tiny.cfg"), "--output", str(run),
         "--set", "training.max_epochs=100000"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (run / BEST).is_dir():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        status, out, err = cli("train", made / "tiny.cfg", "--output", run, *SHORT)
        assert status == 1
        assert f"pid {proc.pid}" in err and "in use" in err and "FileNotFoundError" not in err
        assert proc.poll() is None  # the first run goes on undisturbed
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert (run / LOCK_FILE).exists()  # left behind by the kill: the kernel released its flock
    status, out, err = cli("train", made / "tiny.cfg", "--output", run, *SHORT)
    assert status == 0, err
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl", BEST, LAST]


def test_a_resume_state_with_a_huge_step_is_refused_at_once(made, cli):
    run = _copy(made, "huge-step")
    path = run / LAST / "training" / "state.json"
    state = json.loads(path.read_text())
    state["state"]["step"] = 10**12
    path.write_text(json.dumps(state))
    t0 = time.monotonic()
    status, out, err = cli("train", "--resume", run, "--set", "training.max_steps=20")
    assert status == 1
    assert "state.json" in err and "'step'" in err and time.monotonic() - t0 < 30


def test_resume_with_an_edited_config_is_refused_before_it_allocates(made):
    run = _copy(made, "resume-big")
    config = run / LAST / "config.cfg"
    text = config.read_text()
    assert "nO = 32" in text
    config.write_text(text.replace("nO = 32", "nO = 200000"))
    code = (
        "import resource, sys\n"
        # 1.5 GB of address space: far less than a 200000-wide layer asks for.
        "resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))\n"
        "from plait.cli import main\n"
        f"sys.exit(main(['train', '--resume', {str(run)!r}, '--set', 'training.max_steps=8']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, (proc.stdout, proc.stderr[-2000:])
    assert "config.cfg" in proc.stderr and "nO" in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr


# ------------------------------------------------------------------- a stranger's model directory


def _predict_child(model_dir, digits):
    """`plait predict` in a child process: a hang or a crash fails the test, not the run."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "plait", "predict", str(model_dir), str(digits)],
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0


@pytest.mark.parametrize("name", ["model.bin", "config.cfg", "meta.json", "sample.msgpack"])
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "link out"])
def test_predict_refuses_a_file_that_is_not_a_regular_file_of_the_directory(made, name, kind):
    model = made / f"stranger-{kind.strip('/').replace('/', '-').replace(' ', '-')}-{name}"
    if model.exists():
        shutil.rmtree(model)
    shutil.copytree(made / "run" / BEST, model)
    target = model / name
    if kind == "fifo":
        target.unlink()
        os.mkfifo(target)
    elif kind == "/dev/zero":
        target.unlink()
        target.symlink_to("/dev/zero")
    else:  # a link to a good copy outside the directory: still refused
        outside = made / f"outside-{model.name}"
        shutil.copyfile(target, outside)
        target.unlink()
        target.symlink_to(outside)
    status, out, err, seconds = _predict_child(model, made / "digits.npy")
    assert status == 1, (out, err)
    assert name in err and "Traceback" not in err, err
    assert out == ""


def test_predict_refuses_an_edited_config_that_would_allocate_gigabytes(made):
    model = made / "stranger-big"
    if model.exists():
        shutil.rmtree(model)
    shutil.copytree(made / "run" / BEST, model)
    config = (model / "config.cfg").read_text()
    assert "nO = 32" in config
    (model / "config.cfg").write_text(config.replace("nO = 32", "nO = 200000"))
    status, out, err, seconds = _predict_child(model, made / "digits.npy")
    assert status == 1, (out, err)
    assert "config.cfg" in err and "Traceback" not in err, err


# ------------------------------------------------------------------- the inputs of plait predict


def test_predict_reads_its_input_through_the_safe_reader(made, cli, tmp_path):
    import io

    # A small .npy whose header declares 300 GB: refused before anything is allocated.
    buf = io.BytesIO()
    numpy.save(buf, numpy.zeros((1, 784), dtype="float32"))
    bomb = tmp_path / "bomb.npy"
    bomb.write_bytes(buf.getvalue().replace(b"(1, 784)", b"(99999999, 784)"))
    status, out, err = cli("predict", made / "run", bomb)
    assert status == 1 and "declares an array of shape (99999999, 784)" in err
    # The same inside an .npz.
    import zipfile

    with zipfile.ZipFile(tmp_path / "bomb.npz", "w") as archive:
        archive.writestr("x_test.npy", bomb.read_bytes())
    status, out, err = cli("predict", made / "run", tmp_path / "bomb.npz")
    assert status == 1 and "bomb.npz" in err and "Traceback" not in err
    # Pickled objects are refused without a hint to allow them.
    numpy.save(tmp_path / "objects.npy", numpy.array([{"a": 1}], dtype=object), allow_pickle=True)
    status, out, err = cli("predict", made / "run", tmp_path / "objects.npy")
    assert status == 1 and "allow_pickle" not in err and "objects.npy" in err
    # A good .npz still works.
    numpy.savez(tmp_path / "good.npz", x_test=numpy.zeros((2, 28, 28), dtype="uint8"))
    status, out, err = cli("predict", made / "run", tmp_path / "good.npz")
    assert status == 0 and len(out.splitlines()) == 2, err


def test_predict_refuses_a_fifo_as_input_without_blocking(made, tmp_path):
    fifo = tmp_path / "input.npy"
    os.mkfifo(fifo)
    status, out, err, seconds = _predict_child(made / "run", fifo)
    assert status == 1, (out, err)
    assert "FIFO" in err and "Traceback" not in err
    # Text models read lines the same way (read_lines, in a child: a block would fail the test).
    fifo = tmp_path / "input.txt"
    os.mkfifo(fifo)
    code = ("import sys; from plait.cli._predict import read_lines; from plait.cli._common import CLIError\n"
            "try:\n    read_lines(sys.argv[1])\nexcept CLIError as err:\n    print(err, file=sys.stderr); sys.exit(1)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "FIFO" in proc.stderr, proc.stderr



def test_verbose_tracebacks_are_escaped_too(capsys):
    from plait.cli import _print_traceback

    try:
        raise ValueError("label 'x\x1b]0;pwned\x07\x1b[2J' of a stranger's model")
    except ValueError:
        _print_traceback()
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError" in err, err
    assert "\x1b" not in err and "\x07" not in err, repr(err)
    assert "\\x1b" in err and err.count("\n") > 2  # escaped, and still one line per frame
