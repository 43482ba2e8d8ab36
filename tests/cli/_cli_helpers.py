"""Shared by the command-line tests: tiny configs that train in about a second, child-process helpers."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# A small MLP on 200 bundled MNIST digits per split: a few steps per epoch, saved every 5 steps.
TINY_MNIST = """\
[model]
@layers = "chain.v1"

[model.*.hidden]
@layers = "Relu.v1"
nO = 32
dropout = 0.1

[model.*.output]
@layers = "Softmax.v1"

[optimizer]
@optimizers = "Adam.v1"
learn_rate = 0.005

[training]
max_epochs = 2
max_steps = 0
batch_size = 32
eval_frequency = 5
patience = 0
seed = 0

[data]
@datasets = "mnist.v1"
path = null
limit = 200
"""

TINY_TEXTCAT = """\
[model]
@layers = "chain.v1"

[model.*.hashes]
@layers = "strings2arrays.v1"

[model.*.ragged]
@layers = "list2ragged.v1"

[model.*.embed]
@layers = "with_array.v1"

[model.*.embed.layer]
@layers = "HashEmbed.v1"
nO = 16
nV = 500
column = 0
seed = 1

[model.*.window]
@layers = "expand_window.v1"
window_size = 1

[model.*.hidden]
@layers = "with_array.v1"

[model.*.hidden.layer]
@layers = "Maxout.v1"
nO = 16
nP = 2
normalize = true

[model.*.pool]
@layers = "reduce_mean.v1"

[model.*.output]
@layers = "Softmax.v1"

[optimizer]
@optimizers = "Adam.v1"
learn_rate = 0.005

[training]
max_epochs = 1
eval_frequency = 4
seed = 0

[training.batch_size]
@schedules = "compounding.v1"
start = 8
stop = 32
compound = 1.5

[data]
@datasets = "rotten_tomatoes.v1"
limit = 96
"""

TINY_TAGGER = """\
[model]
@layers = "chain.v1"

[model.*.hashes]
@layers = "strings2arrays.v1"

[model.*.embed]
@layers = "with_array.v1"

[model.*.embed.layer]
@layers = "HashEmbed.v1"
nO = 16
nV = 1000
column = 0
seed = 1

[model.*.bilstm]
@layers = "with_padded.v1"

[model.*.bilstm.layer]
@layers = "LSTM.v1"
nO = 16
bi = true

[model.*.output]
@layers = "with_array.v1"

[model.*.output.layer]
@layers = "Softmax.v1"

[optimizer]
@optimizers = "Adam.v1"
learn_rate = 0.01

[training]
max_epochs = 1
batch_size = 16
eval_frequency = 3
seed = 0

[data]
@datasets = "turkish_upos.v1"
limit = 48
"""



def plait_process(args, cwd, **kwargs):
    """Start `python -m plait ARGS` as a child process (stdout and stderr piped)."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.Popen(
        [sys.executable, "-m", "plait", *map(str, args)],
        cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs,
    )


def wait_for_records(metrics: Path, n: int, proc, timeout: float = 60.0, after_step: int = 0) -> None:
    """Wait until metrics.jsonl holds `n` complete records of steps > `after_step`.

    A record is appended just before model-last is saved, so `n` records mean that the
    first n - 1 of them are saved for sure.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if metrics.is_file():
            count = 0
            for line in metrics.read_text(encoding="utf8").splitlines(keepends=True):
                if line.endswith("\n") and json.loads(line)["step"] > after_step:
                    count += 1
            if count >= n:
                return
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"training ended early (status {proc.returncode}):\n{out}\n{err}")
        time.sleep(0.02)
    proc.kill()
    raise AssertionError(f"no {n} evaluations in {metrics} within {timeout}s")
