"""Invalid configs and overrides fail before training: status 1, the section and key named, no output."""
import pytest

from _cli_helpers import TINY_TEXTCAT

# (replacements in TINY_MNIST, extra --set overrides, texts the message must contain)
BAD_CONFIGS = {
    "unknown section": (
        {"[data]\n": "[dataa]\nx = 1\n\n[data]\n"}, [], ["[dataa]", "unknown section"],
    ),
    "missing section": ({"[training]": "[trainin]"}, [], ["[training]", "missing section", "[trainin]"]),
    "unknown layer": ({'"Relu.v1"': '"Relux.v1"'}, [], ["[model.*.hidden]", "@layers", "Relux.v1"]),
    "unknown optimizer": ({'"Adam.v1"': '"Adamm.v1"'}, [], ["[optimizer]", "@optimizers", "Adamm.v1"]),
    "unknown dataset": ({'"mnist.v1"': '"mnist.v9"'}, [], ["[data]", "@datasets", "mnist.v9"]),
    "unknown schedule": (
        {"batch_size = 32\n": ""},
        [],
        None,  # built below: a [training.batch_size] block naming a schedule that does not exist
    ),
    "wrong type in a layer": ({"nO = 32": 'nO = "wide"'}, [], ["[model.*.hidden]", "nO", "wide"]),
    "unknown layer argument": ({"nO = 32": "nO = 32\nwidth = 3"}, [], ["[model.*.hidden]", "width", "unexpected"]),
    "wrong type in optimizer": ({"learn_rate = 0.005": 'learn_rate = "fast"'}, [], ["[optimizer]", "learn_rate"]),
    "optimizer refuses a value": ({"learn_rate = 0.005": "learn_rate = -1"}, [], ["[optimizer]", "learn_rate"]),
    "wrong type in training": ({"batch_size = 32": 'batch_size = "big"'}, [], ["[training]", "batch_size", "big"]),
    "unknown training key": ({"seed = 0": "seed = 0\nepochs = 3"}, [], ["[training]", "epochs", "unknown setting"]),
    "no training limit": ({"max_epochs = 2": "max_epochs = 0"}, [], ["[training]", "max_epochs", "max_steps"]),
    "bad dropout": ({"seed = 0": "seed = 0\ndropout = 1.5"}, [], ["[training]", "dropout", "1.5"]),
    "zero eval_frequency": ({"eval_frequency = 5": "eval_frequency = 0"}, [], ["[training]", "eval_frequency"]),
    "wrong type in data": ({"limit = 200": 'limit = "all"'}, [], ["[data]", "limit", "all"]),
    "missing data file": ({"path = null": 'path = "no/such/mnist.npz"'}, [], ["[data]", "path", "no/such/mnist.npz"]),
    "output width does not fit the labels": (
        {'@layers = "Softmax.v1"': '@layers = "Softmax.v1"\nnO = 3'}, [], ["[model]", "10 labels"],
    ),
    "model does not fit the data": (
        {'[model]\n@layers = "chain.v1"\n': '[model]\n@layers = "chain.v1"\n\n[model.*.hashes]\n@layers = "strings2arrays.v1"\n'},
        [],
        ["[model]", "cannot be initialized", "strings2arrays"],
    ),
    "override: wrong type": ({}, ["training.batch_size=abc"], ["[training]", "batch_size", "abc"]),
    "override: unknown key": ({}, ["training.batch_sz=64"], ["[training]", "batch_sz", "unknown setting"]),
    "override: unknown section": ({}, ["trainig.batch_size=64"], ["--set trainig.batch_size", "[trainig]"]),
    "override: missing data file": ({}, ["data.path=/no/such/dir"], ["[data]", "path", "/no/such/dir"]),
    "override: layer argument": ({}, ["model.*.hidden.nO=wide"], ["[model.*.hidden]", "nO", "wide"]),
    "override: no equals sign": ({}, ["training.batch_size"], ["--set", "section.key=value"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_invalid_config_fails_before_training(case, write_config, cli, tmp_path):
    replace, overrides, expected = BAD_CONFIGS[case]
    if case == "unknown schedule":
        replace = {"batch_size = 32\n": "", "[data]": '[training.batch_size]\n@schedules = "compoundin.v1"\nstart = 1\n\n[data]'}
        expected = ["[training.batch_size]", "@schedules", "compoundin.v1"]
    config = write_config(replace=replace)
    output = tmp_path / "out"
    args = ["train", config, "--output", output]
    for item in overrides:
        args += ["--set", item]
    status, out, err = cli(*args)
    assert status == 1, (out, err)
    for text in expected:
        assert text in err, f"{text!r} missing from:\n{err}"
    assert "Traceback" not in err
    # Nothing was trained or written: no output folder, no progress table.
    assert not output.exists()
    assert "DEV ACC" not in out


def test_verbose_shows_the_traceback(write_config, cli, tmp_path):
    config = write_config(replace={'"Relu.v1"': '"Relux.v1"'})
    status, out, err = cli("train", config, "--output", tmp_path / "out", "--verbose")
    assert status == 1
    assert "Traceback" in err and "Relux.v1" in err


def test_missing_config_file(cli, tmp_path):
    status, out, err = cli("train", tmp_path / "nope.cfg", "--output", tmp_path / "out")
    assert status == 1
    assert "Config file not found" in err and "nope.cfg" in err
    assert not (tmp_path / "out").exists()


def test_syntax_error_is_reported(write_config, cli, tmp_path):
    config = write_config(text="[model\n@layers = 1\n")
    status, out, err = cli("train", config, "--output", tmp_path / "out")
    assert status == 1
    assert "tiny.cfg" in err and "Traceback" not in err


def test_schedule_argument_type(write_config, cli, tmp_path):
    config = write_config(TINY_TEXTCAT, replace={"start = 8": 'start = "eight"'})
    status, out, err = cli("train", config, "--output", tmp_path / "out")
    assert status == 1
    assert "[training.batch_size] start" in err and "eight" in err


def test_overrides_are_parsed_as_json_values():
    from plait.cli._config import parse_overrides

    parsed = parse_overrides(
        ["training.batch_size=64", "training.dropout=0.25", "data.path=../shared/data/mnist.npz",
         "training.dropout=null", "optimizer.use_averages=false", 'data.name="quoted"']
    )
    assert parsed == {
        "training.batch_size": 64,
        "training.dropout": None,
        "data.path": "../shared/data/mnist.npz",
        "optimizer.use_averages": False,
        "data.name": "quoted",
    }


def test_override_reaches_the_saved_config(write_config, cli, tmp_path):
    config = write_config()
    status, out, err = cli(
        "train", config, "--output", tmp_path / "out", "--set", "training.batch_size=50",
        "--set", "training.max_epochs=1", "--set", "model.*.hidden.nO=24",
    )
    assert status == 0, err
    saved = (tmp_path / "out" / "model-last" / "config.cfg").read_text()
    assert "batch_size = 50" in saved and "max_epochs = 1" in saved and "nO = 24" in saved
    # Defaults are filled in, so the saved config says everything the run used.
    assert "dropout = null" in saved and "beta1 = 0.9" in saved
