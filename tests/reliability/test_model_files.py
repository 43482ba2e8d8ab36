"""Issue 17, classes 2, 3, 4, 8 (model loading) and 9: files that plait reads from a model
directory or a user can neither hang it, exhaust its memory, read other files, load wrong
weights silently, leave a model half-loaded, nor fail with an unclear error.

Anything that could hang runs in a child process with a timeout: a hang fails the test
instead of stopping the run. Memory bombs are measured with tracemalloc (numpy reports its
allocations to it): a refused file must be refused before its declared array is allocated.
"""
import gc
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tracemalloc
import zipfile
from pathlib import Path

import numpy
import pytest
import srsly

from plait import _safeio
from plait.api import Relu, Softmax, chain
from plait.cli import _modeldir as md
from plait.cli._common import CLIError

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also when a child loads this file
from _configs import TINY  # noqa: E402


def run_child(code, timeout=60, cwd=None):
    """(returncode, stdout, stderr) of `python -c code`; a hang past `timeout` fails the test."""
    try:
        proc = subprocess.run(
            [PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout,
            cwd=cwd or ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung for more than {timeout} s:\n{code}")
    return proc.returncode, proc.stdout, proc.stderr


def plait_cli(*args, timeout=120):
    try:
        proc = subprocess.run(
            [PY, "-m", "plait", *map(str, args)], capture_output=True, text=True, timeout=timeout,
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"plait {' '.join(map(str, args))} hung for more than {timeout} s")
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A `plait train` output folder (model-best, model-last with training/), made once."""
    from plait.cli import main

    base = tmp_path_factory.mktemp("trained")
    cfg = base / "tiny.cfg"
    cfg.write_text(TINY, encoding="utf8")
    assert main(["train", str(cfg), "--output", str(base / "out"), "--no-progress"]) == 0
    return base / "out"


@pytest.fixture
def model_dir(trained, tmp_path):
    """A fresh copy of model-last (with training/) to damage."""
    target = tmp_path / "model-last"
    shutil.copytree(trained / "model-last", target)
    return target


def _weights(model):
    return [node.get_param(name).copy() for node in model.walk() for name in node.param_names if node.has_param(name)]


def _same(a, b):
    return len(a) == len(b) and all(x.shape == y.shape and numpy.array_equal(x, y) for x, y in zip(a, b))


# ---------------------------------------------------------------------------------------------
# Class 2: hangs and unbounded reads


HANG_FILES = [md.MODEL_FILE, md.CONFIG_FILE, md.SAMPLE_FILE, md.META_FILE]
SPECIALS = ["fifo", "/dev/zero", "/dev/urandom"]


def _make_special(path, kind):
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink(kind, path)


@pytest.mark.parametrize("kind", SPECIALS)
@pytest.mark.parametrize("name", HANG_FILES)
def test_model_dir_with_fifo_or_device_is_refused_not_read(model_dir, name, kind):
    _make_special(model_dir / name, kind)
    status, out, err = plait_cli("predict", model_dir, "-", timeout=60)
    assert status == 1, err
    assert "Traceback" not in err
    assert name in err and "Damaged model directory" in err, err
    assert ("FIFO" in err or "link" in err or "device" in err), err


@pytest.mark.parametrize("kind", SPECIALS)
def test_resume_optimizer_state_fifo_or_device_is_refused(trained, tmp_path, kind):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    _make_special(run / "model-last" / md.OPTIMIZER_FILE, kind)
    status, out, err = plait_cli("train", "--resume", run, "--output", tmp_path / "new", "--no-progress", timeout=90)
    assert status == 1, err
    assert "Traceback" not in err and "optimizer.npz" in err, err


@pytest.mark.parametrize("kind", SPECIALS)
def test_readers_refuse_fifos_and_devices(tmp_path, kind):
    """Model.from_disk, load_npz, load_hdf5 and _safeio.read_bytes, each on a FIFO and a device link."""
    target = tmp_path / "file"
    target.write_bytes(b"")
    _make_special(target, kind)
    status, out, err = run_child(f"""
        from plait import _safeio
        from plait.api import Linear
        from plait.chainer import links as L, serializers as S
        path = {str(target)!r}
        calls = [
            lambda: Linear(2, 3).from_disk(path),
            lambda: S.load_npz(path, L.Linear(3, 2)),
            lambda: S.load_hdf5(path, L.Linear(3, 2)),
            lambda: _safeio.read_bytes(path),
        ]
        for call in calls:
            try:
                call()
            except _safeio.UnsafeFileError as err:
                assert "not a regular file" in str(err), err
            else:
                raise SystemExit("accepted")
        from plait.config import Config, ConfigValidationError
        try:
            Config().from_disk(path)
        except ConfigValidationError as err:
            assert "not a regular file" in str(err), err
        else:
            raise SystemExit("config accepted")
        from plait.cli import _modeldir as md
        import os, shutil
        os.makedirs("/tmp/plait-metrics-test", exist_ok=True)
        link = "/tmp/plait-metrics-test/" + md.METRICS_FILE
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(path, link)
        try:
            md.read_metrics("/tmp/plait-metrics-test")
        except md.CLIError as err:
            assert "metrics.jsonl" in str(err), err
        else:
            raise SystemExit("metrics accepted")
        finally:
            shutil.rmtree("/tmp/plait-metrics-test")
        print("ok")
    """, timeout=60)
    assert status == 0 and "ok" in out, err


def test_symlink_out_of_model_dir_is_refused(model_dir, tmp_path):
    outside = tmp_path / "elsewhere.bin"
    shutil.move(str(model_dir / md.MODEL_FILE), outside)
    os.symlink(outside, model_dir / md.MODEL_FILE)
    with pytest.raises(CLIError, match=r"model\.bin.*link.*out of"):
        md.load_model_dir(model_dir)


def test_huge_resume_step_is_refused_quickly(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    state_path = run / "model-last" / md.STATE_FILE
    state = json.loads(state_path.read_text())
    state["optimizer"]["step"] = 10 ** 12
    state_path.write_text(json.dumps(state))
    status, out, err = plait_cli("train", "--resume", run, "--output", tmp_path / "new", "--no-progress", timeout=90)
    assert status == 1, err
    assert "state.json" in err and "'step'" in err and str(10 ** 12) in err, err


@pytest.mark.parametrize("bad", [-1, "10", 1.5, True, None, [1]])
def test_resume_counters_are_checked(bad):
    with pytest.raises(CLIError, match=r"state\.json.*'step'"):
        md.check_counters({"step": bad})
    with pytest.raises(CLIError, match="nr_update"):
        md.check_counters({"step": 3, "nr_update": {"0::W": bad if bad is not None else -5}})


def test_exponential_config_interpolation_is_refused_quickly(tmp_path):
    lines = ["[vars]", 'a0 = "abcdefgh"'] + [
        f'a{i} = "' + "${vars.a%d}" % (i - 1) * 8 + '"' for i in range(1, 10)
    ]
    cfg = tmp_path / "bomb.cfg"
    cfg.write_text(TINY + "\n" + "\n".join(lines) + "\n", encoding="utf8")
    status, out, err = run_child(f"""
        from plait.config import Config, ConfigValidationError, registry
        text = open({str(cfg)!r}).read()
        for load in (lambda: Config().from_str(text),
                     lambda: registry.fill(Config().from_str(text, interpolate=False)).interpolate(),
                     lambda: registry.resolve(Config().from_str(text, interpolate=False)),
                     lambda: Config().from_str(text, interpolate=False).interpolate()):
            try:
                load()
            except ConfigValidationError as err:
                assert "[vars] a" in str(err) and "expand" in str(err), err
            else:
                raise SystemExit("expanded")
        print("ok")
    """, timeout=30)
    assert status == 0 and "ok" in out, err
    status, out, err = plait_cli("train", cfg, "--output", tmp_path / "o", timeout=60)
    assert status == 1 and "expand" in err and "Traceback" not in err, err


def test_interpolation_cycles_and_normal_use():
    from plait.config import Config, ConfigValidationError

    with pytest.raises(ConfigValidationError, match="cycle"):
        Config().from_str('[a]\nx = "${a.y}"\ny = "${a.x}"\n')
    config = Config().from_str('[a]\nx = 3\ny = ${a.x}\nz = "p${a.x}q"\n[b]\nq = ${a}\n')
    assert config["a"]["y"] == 3 and config["a"]["z"] == "p3q" and config["b"]["q"]["x"] == 3


# ---------------------------------------------------------------------------------------------
# Class 3: memory bombs


def _npz_declaring(shape, name="W", dtype="<f4"):
    """A tiny .npz whose one member declares `shape` (its data absent)."""
    header = {"descr": dtype, "fortran_order": False, "shape": tuple(shape)}
    buf = io.BytesIO()
    numpy.lib.format.write_array_header_1_0(buf, header)  # the magic string and the header
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{name}.npy", buf.getvalue() + b"\x00" * 4096)
    return out.getvalue()


def _peak(call):
    tracemalloc.start()
    try:
        call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def test_small_npz_declaring_a_huge_array_is_refused_before_allocating(tmp_path):
    from plait.chainer import links as L, serializers as S

    path = tmp_path / "bomb.npz"
    data = _npz_declaring((1 << 27,))  # 512 MiB of float32 declared
    path.write_bytes(data)
    assert len(data) < 64 * 1024
    errors = []

    def load():
        try:
            S.load_npz(path, L.Linear(3, 2))
        except ValueError as err:
            errors.append(err)

    assert _peak(load) < 8 << 20
    assert errors and "shape" in str(errors[0]) and "bomb.npz" in str(errors[0])
    # And without a target to compare with: the declared size is checked against the limit.
    with pytest.raises(_safeio.UnsafeFileError, match="over the limit"):
        _safeio.load_npz(data, array_limit=1 << 20)
    # A member declaring more than the archive holds is damaged, not allocated.
    with pytest.raises(_safeio.DamagedFileError, match="declares"):
        _safeio.load_npz(data)


def test_resume_state_npz_bomb_is_refused_before_allocating(trained):
    loaded = md.load_model_dir(trained / "model-last", raw_weights=True)
    from plait.api import Adam

    optimizer = Adam(0.001)
    walk = list(loaded.model.walk())
    index = next(i for i, n in enumerate(walk) if n.has_param("W"))
    bomb = _npz_declaring((1 << 27,), name=f"mom1::{index}::W")
    errors = []

    def restore():
        try:
            md.restore_optimizer_state(optimizer, loaded.model, bomb, {"step": 1})
        except CLIError as err:
            errors.append(err)

    assert _peak(restore) < 8 << 20
    assert errors and "optimizer.npz" in str(errors[0]), errors
    assert not optimizer.mom1


def test_config_edited_to_a_huge_width_is_refused_before_allocating(model_dir):
    cfg = model_dir / md.CONFIG_FILE
    cfg.write_text(cfg.read_text().replace("nO = 8", "nO = 200000"), encoding="utf8")
    errors = []

    def load():
        try:
            md.load_model_dir(model_dir)
        except CLIError as err:
            errors.append(err)

    assert _peak(load) < 32 << 20
    assert errors and "config.cfg" in str(errors[0]) and "200000" in str(errors[0]) and "nO = 8" in str(errors[0])


def test_model_bin_declaring_huge_dims_is_refused_before_allocating(model_dir):
    msg = srsly.msgpack_loads((model_dir / md.MODEL_FILE).read_bytes())
    for info, params in zip(msg["nodes"], msg["params"]):
        if "nO" in info["dims"] and info["dims"].get("nO") == 8:
            info["dims"]["nO"] = 1 << 24
            for key in params:
                params[key] = None
    (model_dir / md.MODEL_FILE).write_bytes(srsly.msgpack_dumps(msg))
    (model_dir / md.CONFIG_FILE).write_text((model_dir / md.CONFIG_FILE).read_text().replace("nO = 8\n", ""))
    errors = []

    def load():
        try:
            md.load_model_dir(model_dir)
        except CLIError as err:
            errors.append(err)

    assert _peak(load) < 32 << 20
    assert errors and "model.bin" in str(errors[0]), errors


def test_hdf5_dataset_declaring_a_huge_shape_is_refused_before_reading(tmp_path):
    h5py = pytest.importorskip("h5py")
    from plait.chainer import links as L, serializers as S

    path = tmp_path / "bomb.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("W", shape=(1 << 14, 1 << 13), dtype="f4", chunks=(64, 64))  # 512 MiB, no data stored
        f["b"] = numpy.zeros(2, "f4")
    assert path.stat().st_size < 1 << 20
    errors = []

    def load():
        try:
            S.load_hdf5(path, L.Linear(3, 2))
        except ValueError as err:
            errors.append(err)

    assert _peak(load) < 8 << 20
    assert errors and "shape" in str(errors[0])


def test_file_size_limit_is_checked_before_reading(tmp_path):
    path = tmp_path / "big.bin"
    with open(path, "wb") as f:
        f.truncate(10 << 20)  # sparse
    with pytest.raises(_safeio.UnsafeFileError, match="over the limit"):
        _safeio.read_bytes(path, limit=1 << 20)
    assert _peak(lambda: pytest.raises(_safeio.UnsafeFileError, _safeio.read_bytes, path, limit=1 << 20)) < 1 << 20


# ---------------------------------------------------------------------------------------------
# Class 4: HDF5 files naming other files


@pytest.fixture
def secret(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "secret.h5"
    with h5py.File(path, "w") as f:
        f["W"] = numpy.full((2, 3), 42.0, "f4")
        f["b"] = numpy.full(2, 42.0, "f4")
    raw = tmp_path / "secret.raw"
    raw.write_bytes(numpy.full(6, 42.0, "f4").tobytes())
    return path, raw


def _h5_with(tmp_path, build):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "evil.h5"
    with h5py.File(path, "w") as f:
        build(h5py, f)
    return path


@pytest.mark.parametrize("kind", ["external_link", "external_raw", "virtual", "nested_external_link", "plugin_filter"])
def test_load_hdf5_refuses_data_from_other_files(tmp_path, secret, kind):
    from plait.chainer import links as L, serializers as S

    secret_h5, secret_raw = secret

    def build(h5py, f):
        f["b"] = numpy.zeros(2, "f4")
        if kind == "external_link":
            f["W"] = h5py.ExternalLink(str(secret_h5), "/W")
        elif kind == "nested_external_link":
            f["W"] = numpy.zeros((2, 3), "f4")
            f.create_group("deep").create_group("er")["x"] = h5py.ExternalLink(str(secret_h5), "/")
        elif kind == "plugin_filter":  # HDF5 would search its plugin path for a library to load
            f.create_dataset("W", data=numpy.full((2, 3), 42.0, "f4"), compression=307, allow_unknown_filter=True)
        elif kind == "external_raw":
            f.create_dataset("W", shape=(2, 3), dtype="f4", external=[(str(secret_raw), 0, 24)])
        else:
            layout = h5py.VirtualLayout(shape=(2, 3), dtype="f4")
            layout[:] = h5py.VirtualSource(str(secret_h5), "W", shape=(2, 3))
            f.create_virtual_dataset("W", layout)

    path = _h5_with(tmp_path, build)
    link = L.Linear(3, 2)
    before = link.W.data.copy()
    with pytest.raises(_safeio.UnsafeFileError, match="external|virtual|filter"):
        S.load_hdf5(path, link)
    assert numpy.array_equal(link.W.data, before) and not (link.W.data == 42).any()


# ---------------------------------------------------------------------------------------------
# Class 8: wrong weights load silently; half loads; the garbage collector


def _model():
    return chain(Relu(4, 3), Softmax(2, 4)).initialize()


def _bad_variants():
    """(name, edit of a to_dict message) for weights that must be refused."""
    return [
        ("transposed W", lambda p: p[1].update(W=p[1]["W"].T.copy())),
        ("wrong-length b", lambda p: p[1].update(b=numpy.zeros(5, "f4"))),
        ("int W", lambda p: p[1].update(W=p[1]["W"].astype("i4"))),
        ("complex W", lambda p: p[1].update(W=p[1]["W"].astype("c8"))),
        ("string b", lambda p: p[1].update(b=numpy.array(["x"] * 4))),
        ("bool b", lambda p: p[1].update(b=numpy.ones(4, bool))),
        ("scalar W", lambda p: p[1].update(W=numpy.float32(1.0))),
        ("list b", lambda p: p[1].update(b=[0.0] * 4)),
        # the first node is fine, the last wrong: nothing may be loaded
        ("last node wrong", lambda p: (p[1].update(W=p[1]["W"] + 1), p[2].update(W=p[2]["W"].T.copy()))),
    ]


@pytest.mark.parametrize("name,edit", _bad_variants(), ids=[n for n, _ in _bad_variants()])
def test_from_bytes_refuses_weights_that_do_not_fit_and_changes_nothing(name, edit):
    source = _model()
    msg = source.to_dict()
    edit(msg["params"])
    try:
        data = srsly.msgpack_dumps(msg)
    except Exception:
        pytest.skip("not representable in msgpack")
    target = _model()
    before, before_bytes = _weights(target), target.to_bytes()
    with pytest.raises(ValueError, match="parameter|dtype|shape|array"):
        target.from_bytes(data)
    assert _same(_weights(target), before) and target.to_bytes() == before_bytes
    with pytest.raises(ValueError):
        target.from_dict(msg)
    assert target.to_bytes() == before_bytes


def test_from_bytes_accepts_safe_casts_and_round_trips():
    source = _model()
    msg = source.to_dict()
    msg["params"][1]["W"] = msg["params"][1]["W"].astype("f8")
    target = _model()
    target.from_bytes(srsly.msgpack_dumps(msg))
    assert _same(_weights(target), _weights(source))
    assert all(w.dtype == numpy.float32 for w in _weights(target))


def test_a_failing_attr_midway_restores_every_node(monkeypatch):
    import plait.model as model_module

    source = _model()
    source.layers[1].attrs["extra"] = 1
    data = source.to_bytes()
    target = _model()
    target.layers[1].attrs["extra"] = 0
    before = target.to_bytes()

    def broken(default, value, name, node):
        raise RuntimeError("attr cannot be restored")

    monkeypatch.setattr(model_module, "deserialize_attr", broken)
    with pytest.raises(RuntimeError):
        target.from_bytes(data)
    monkeypatch.undo()
    assert target.to_bytes() == before


def test_attrs_that_are_not_msgpack_bytes_are_refused_cleanly():
    source = _model()
    source.layers[0].attrs["extra"] = 1
    msg = source.to_dict()
    target = _model()
    target.layers[0].attrs["extra"] = 0
    before = target.to_bytes()
    for bad in (5, b"\xc1", "text"):
        msg["attrs"][1]["extra"] = bad
        with pytest.raises(ValueError, match="attr 'extra'"):
            target.from_dict(msg)
        assert target.to_bytes() == before and gc.isenabled()


@pytest.mark.parametrize("data", [b"\x93\xc1", b"\xc1garbage", b"\xdd\xff\xff\xff\xff", b"", b"\x92\x01"])
def test_failed_from_bytes_leaves_the_garbage_collector_on(data):
    assert gc.isenabled()
    with pytest.raises(ValueError):
        _model().from_bytes(data)
    assert gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(ValueError):
            _model().from_bytes(data)
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()


def _chainer_files(tmp_path, arrays):
    h5py = pytest.importorskip("h5py")
    npz = tmp_path / "w.npz"
    numpy.savez(npz, **arrays)
    h5 = tmp_path / "w.h5"
    with h5py.File(h5, "w") as f:
        for key, value in arrays.items():
            f[key] = value
    return npz, h5


UNSAFE_CASTS = {
    "complex W": {"W": numpy.ones((2, 3), "c8"), "b": numpy.zeros(2, "f4")},
    "string b": {"W": numpy.ones((2, 3), "f4"), "b": numpy.array(["1", "2"])},
    "datetime b": {"W": numpy.ones((2, 3), "f4"), "b": numpy.array(["2020-01-01", "2021-01-01"], "M8[D]")},
    "timedelta W": {"W": numpy.ones((2, 3), "m8[s]"), "b": numpy.zeros(2, "f4")},
}


UNSAFE_CASTS_H5 = {  # what HDF5 can hold (no datetimes; strings as bytes)
    "complex W": UNSAFE_CASTS["complex W"],
    "bytes b": {"W": numpy.ones((2, 3), "f4"), "b": numpy.array([b"1", b"2"])},
    "compound W": {"W": numpy.zeros((2, 3), [("a", "f4"), ("b", "i4")]), "b": numpy.zeros(2, "f4")},
}
CAST_CASES = [(c, "npz") for c in UNSAFE_CASTS] + [(c, "h5") for c in UNSAFE_CASTS_H5]


@pytest.mark.parametrize("case,fmt", CAST_CASES)
def test_chainer_loads_refuse_unsafe_casts_and_change_nothing(tmp_path, case, fmt):
    from plait.chainer import links as L, serializers as S

    arrays = (UNSAFE_CASTS if fmt == "npz" else UNSAFE_CASTS_H5)[case]
    if fmt == "npz":
        npz, h5 = tmp_path / "w.npz", None
        numpy.savez(npz, **arrays)
    else:
        npz, h5 = _chainer_files(tmp_path, arrays)
    link = L.Linear(3, 2)
    link.b.data[:] = 7
    before = (link.W.data.copy(), link.b.data.copy())
    with pytest.raises(ValueError, match="dtype|type"):
        (S.load_npz(npz, link) if fmt == "npz" else S.load_hdf5(h5, link))
    assert numpy.array_equal(link.W.data, before[0]) and numpy.array_equal(link.b.data, before[1])


@pytest.mark.parametrize("fmt", ["npz", "h5"])
def test_chainer_load_failing_half_way_changes_nothing(tmp_path, fmt):
    from plait.chainer import links as L, serializers as S

    model = L.Classifier(chainer_chain())
    arrays = {}
    for name, param in model.namedparams():
        arrays[name.lstrip("/")] = numpy.full(param.data.shape, 5, param.data.dtype)
    last = sorted(arrays)[-1]
    arrays[last] = numpy.zeros(tuple(d + 1 for d in arrays[last].shape), "f4")
    npz, h5 = _chainer_files(tmp_path, arrays)
    before = [p.data.copy() for _, p in model.namedparams()]
    with pytest.raises(ValueError, match="shape"):
        (S.load_npz(npz, model) if fmt == "npz" else S.load_hdf5(h5, model))
    assert all(numpy.array_equal(p.data, b) for (_, p), b in zip(model.namedparams(), before))


@pytest.mark.parametrize("fmt", ["npz", "h5"])
def test_chainer_optimizer_load_failing_half_way_changes_nothing(tmp_path, fmt):
    from plait.chainer import links as L, optimizers as O, serializers as S

    link = L.Linear(3, 2)
    opt = O.Adam()
    opt.setup(link)
    link.W.grad = numpy.ones_like(link.W.data)
    link.b.grad = numpy.ones_like(link.b.data)
    opt.update()
    good = tmp_path / "opt.npz"
    S.save_npz(good, opt)
    arrays = dict(numpy.load(good))
    arrays["t"] = numpy.array(99)
    arrays["W/m"] = numpy.full((2, 3), 5.0, "f4")
    arrays["b/v"] = numpy.array(["x", "y"]) if fmt == "npz" else numpy.array([b"x", b"y"])
    npz, h5 = _chainer_files(tmp_path, arrays) if fmt == "h5" else (tmp_path / "bad.npz", None)
    if fmt == "npz":
        numpy.savez(npz, **arrays)
    t_before = opt.t
    states = {name: {k: v.copy() for k, v in state.items()} for name, state in opt._states.items()}
    with pytest.raises(ValueError, match="dtype"):
        (S.load_npz(npz, opt) if fmt == "npz" else S.load_hdf5(h5, opt))
    assert opt.t == t_before
    for name, state in opt._states.items():
        for key, value in state.items():
            assert numpy.array_equal(value, states[name][key]), (name, key)
    S.load_npz(good, opt)  # a good file still loads


def chainer_chain():
    from plait.chainer import Chain
    from plait.chainer import links as L

    return Chain(l1=L.Linear(3, 4), l2=L.Linear(4, 2))


@pytest.mark.parametrize("fmt", ["npz", "h5"])
def test_chainer_safe_casts_still_load(tmp_path, fmt):
    from plait.chainer import links as L, serializers as S

    npz, h5 = _chainer_files(tmp_path, {"W": numpy.ones((2, 3), "f8"), "b": numpy.arange(2, dtype="i8")})
    link = L.Linear(3, 2)
    (S.load_npz(npz, link) if fmt == "npz" else S.load_hdf5(h5, link))
    assert link.W.data.dtype == numpy.float32 and (link.W.data == 1).all() and list(link.b.data) == [0, 1]


def test_hdf5_builtin_filters_still_load(tmp_path):
    h5py = pytest.importorskip("h5py")
    from plait.chainer import links as L, serializers as S

    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("W", data=numpy.ones((2, 3), "f4"), compression="gzip", shuffle=True, fletcher32=True)
        f.create_dataset("b", data=numpy.arange(2, dtype="f4"), compression="lzf")
    link = L.Linear(3, 2)
    S.load_hdf5(path, link)
    assert (link.W.data == 1).all() and list(link.b.data) == [0, 1]


def test_chainer_round_trip(tmp_path):
    from plait.chainer import links as L, serializers as S

    a, b = L.Linear(3, 2), L.Linear(3, 2)
    S.save_npz(tmp_path / "m.npz", a)
    S.load_npz(tmp_path / "m.npz", b)
    assert numpy.array_equal(a.W.data, b.W.data)
    pytest.importorskip("h5py")
    c = L.Linear(3, 2)
    S.save_hdf5(tmp_path / "m.h5", a)
    S.load_hdf5(tmp_path / "m.h5", c)
    assert numpy.array_equal(a.W.data, c.W.data)


# ---------------------------------------------------------------------------------------------
# Class 9: one clear error for damaged model directories


def _pickled_npz():
    buf = io.BytesIO()
    numpy.savez(buf, W=numpy.array([{"x": 1}], dtype=object))
    return buf.getvalue()


def _edit_json(name, change):
    def edit(d):
        data = json.loads((d / name).read_text())
        change(data)
        (d / name).write_text(json.dumps(data))
    return edit


def _write(name, data):
    return lambda d: (d / name).write_bytes(data)


def _truncate(name, keep=0.5):
    return lambda d: (d / name).write_bytes((d / name).read_bytes()[: int(len((d / name).read_bytes()) * keep)])


def _sample(change):
    def edit(d):
        sample = srsly.msgpack_loads((d / md.SAMPLE_FILE).read_bytes())
        change(sample)
        (d / md.SAMPLE_FILE).write_bytes(srsly.msgpack_dumps(sample))
    return edit


DAMAGES = {
    # name: (edit, the file the error must name, the field it must name or None)
    "meta: no task": (_edit_json(md.META_FILE, lambda m: m.pop("task")), md.META_FILE, "'task'"),
    "meta: task wrong": (_edit_json(md.META_FILE, lambda m: m.update(task=3)), md.META_FILE, "'task'"),
    "meta: no labels": (_edit_json(md.META_FILE, lambda m: m.pop("labels")), md.META_FILE, "'labels'"),
    "meta: labels empty": (_edit_json(md.META_FILE, lambda m: m.update(labels=[])), md.META_FILE, "'labels'"),
    "meta: label not str": (_edit_json(md.META_FILE, lambda m: m["labels"].__setitem__(0, 5)), md.META_FILE, "'labels'[0]"),
    "meta: a label fewer": (_edit_json(md.META_FILE, lambda m: m["labels"].pop()), md.META_FILE, "'labels'"),
    "meta: a label more": (_edit_json(md.META_FILE, lambda m: m["labels"].append("extra")), md.META_FILE, "'labels'"),
    "meta: not json": (_write(md.META_FILE, b"{nope"), md.META_FILE, "line"),
    "meta: a list": (_write(md.META_FILE, b"[1, 2]"), md.META_FILE, None),
    "meta: not utf8": (_write(md.META_FILE, b"\xff\xfe{}"), md.META_FILE, "byte"),
    "meta: empty": (_write(md.META_FILE, b""), md.META_FILE, None),
    "config: garbage": (_write(md.CONFIG_FILE, b"[[[not a config"), md.CONFIG_FILE, None),
    "config: no model": (_write(md.CONFIG_FILE, b"[training]\nseed = 0\n"), md.CONFIG_FILE, "[model]"),
    "config: unknown layer": (lambda d: (d / md.CONFIG_FILE).write_text((d / md.CONFIG_FILE).read_text().replace("Relu.v1", "Nope.v1")), md.CONFIG_FILE, "[model]"),
    # The model section's reference mangled (one bit of '@'): refused as `plait train` refuses it.
    "config: no @layers": (lambda d: (d / md.CONFIG_FILE).write_text((d / md.CONFIG_FILE).read_text().replace("[model]\n@layers", "[model]\nAlayers", 1)), md.CONFIG_FILE, "[model] @layers"),
    "config: other width": (lambda d: (d / md.CONFIG_FILE).write_text((d / md.CONFIG_FILE).read_text().replace("nO = 8", "nO = 9")), md.CONFIG_FILE, "nO"),
    "config: missing": (lambda d: (d / md.CONFIG_FILE).unlink(), md.CONFIG_FILE, None),
    "model.bin: truncated": (_truncate(md.MODEL_FILE), md.MODEL_FILE, None),
    "model.bin: empty": (_write(md.MODEL_FILE, b""), md.MODEL_FILE, None),
    "model.bin: garbage": (_write(md.MODEL_FILE, b"\xc1" * 100), md.MODEL_FILE, None),
    "model.bin: a number": (_write(md.MODEL_FILE, srsly.msgpack_dumps(5)), md.MODEL_FILE, None),
    "model.bin: other model": (_write(md.MODEL_FILE, chain(Relu(4, 3), Softmax(2, 4)).initialize().to_bytes()), md.CONFIG_FILE, "model.bin"),
    "model.bin: missing": (lambda d: (d / md.MODEL_FILE).unlink(), md.MODEL_FILE, None),
    "sample: garbage": (_write(md.SAMPLE_FILE, b"\xc1\xc1"), md.SAMPLE_FILE, None),
    "sample: truncated": (_truncate(md.SAMPLE_FILE), md.SAMPLE_FILE, None),
    "sample: a list": (_write(md.SAMPLE_FILE, srsly.msgpack_dumps([1, 2])), md.SAMPLE_FILE, None),
    "sample: no Y": (_sample(lambda s: s.pop("Y")), md.SAMPLE_FILE, "'Y'"),
    "sample: no X": (_sample(lambda s: s.pop("X")), md.SAMPLE_FILE, "'X'"),
    "sample: Y out of range": (_sample(lambda s: s.update(Y=[999] * len(s["Y"]))), md.SAMPLE_FILE, "'Y'"),
    "sample: Y negative": (_sample(lambda s: s.update(Y=[-1] * len(s["Y"]))), md.SAMPLE_FILE, "'Y'"),
    "sample: X wrong width": (_sample(lambda s: s.update(X=numpy.zeros((len(s["Y"]), 5), "f4"))), md.SAMPLE_FILE, "'X'"),
    "sample: lengths differ": (_sample(lambda s: s.update(Y=s["Y"][:1])), md.SAMPLE_FILE, "'X'/'Y'"),
}


@pytest.mark.parametrize("case", list(DAMAGES))
def test_damaged_model_dir_errors_name_the_file_and_field(model_dir, case):
    edit, name, field = DAMAGES[case]
    edit(model_dir)
    with pytest.raises(CLIError) as info:
        md.load_model_dir(model_dir)
    message = str(info.value)
    assert message.startswith(f"Damaged model directory {str(model_dir)!r}: {name}"), message
    if field:
        assert field in message, message
    assert message.rstrip().endswith("."), message
    for unclear in ("KeyError", "BadZipFile", "EOFError", "IndexError", "allow_pickle"):
        assert unclear not in message, message


def test_model_dir_whose_config_builds_no_layer_is_refused(model_dir, monkeypatch):
    # A registered function that returns something else than a layer: named, not an
    # AttributeError. (The registry's resolution is stubbed rather than a function registered:
    # registrations outlive the test, and other tests check every registered layer.)
    from plait.config import registry

    monkeypatch.setattr(registry, "resolve", lambda config, validate=True: {"model": {"not": "a layer"}})
    with pytest.raises(CLIError) as info:
        md.load_model_dir(model_dir)
    message = str(info.value)
    assert message.startswith(f"Damaged model directory {str(model_dir)!r}: {md.CONFIG_FILE}, [model]"), message
    assert "not a layer" in message and "AttributeError" not in message, message


@pytest.mark.parametrize("case", ["meta: no task", "model.bin: truncated", "sample: Y out of range"])
def test_damaged_model_dir_through_the_cli(model_dir, case):
    DAMAGES[case][0](model_dir)
    status, out, err = plait_cli("predict", model_dir, "-", timeout=60)
    assert status == 1 and "Traceback" not in err and DAMAGES[case][1] in err, err


RESUME_DAMAGES = {
    "optimizer: not a zip": (_write(md.OPTIMIZER_FILE, b"PK\x03\x04 not really"), md.OPTIMIZER_FILE),
    "optimizer: truncated": (_truncate(md.OPTIMIZER_FILE), md.OPTIMIZER_FILE),
    "optimizer: pickled": (_write(md.OPTIMIZER_FILE, _pickled_npz()), md.OPTIMIZER_FILE),
    "optimizer: wrong shape": (_write(md.OPTIMIZER_FILE, _npz_declaring((3,), name="mom1::1::W")), md.OPTIMIZER_FILE),
    "state: step negative": (_edit_json(md.STATE_FILE, lambda s: s["optimizer"].update(step=-3)), md.STATE_FILE),
    "state: last_score wrong": (_edit_json(md.STATE_FILE, lambda s: s["optimizer"].update(last_score="x")), md.STATE_FILE),
    "state: rng damaged": (_edit_json(md.STATE_FILE, lambda s: s["rng"].update(numpy_global=["MT19937", [1, 2], 0, 0, 0.0])), md.STATE_FILE),
    "state: rng data damaged": (_edit_json(md.STATE_FILE, lambda s: s["rng"].update(data={"x": 1})), md.STATE_FILE),
}


@pytest.mark.parametrize("case", list(RESUME_DAMAGES))
def test_damaged_resume_state_errors_name_the_file(trained, tmp_path, case):
    from plait.api import Adam

    d = tmp_path / "model-last"
    shutil.copytree(trained / "model-last", d)
    edit, name = RESUME_DAMAGES[case]
    edit(d)
    loaded = md.load_model_dir(d, raw_weights=True)
    state = json.loads((d / md.STATE_FILE).read_text())
    optimizer = Adam(0.001)
    rng = numpy.random.default_rng(0)
    rng_before = rng.bit_generator.state
    np_before = numpy.random.get_state()[1].copy()
    with pytest.raises(CLIError) as info:
        md.restore_optimizer_state(optimizer, loaded.model, (d / md.OPTIMIZER_FILE).read_bytes(), state["optimizer"], model_dir=d)
        md.set_rng_states(state["rng"], rng, model_dir=d)
    message = str(info.value)
    assert name in message and "Damaged" in message, message
    for unclear in ("BadZipFile", "EOFError", "IndexError", "allow_pickle"):
        assert unclear not in message, message
    assert rng.bit_generator.state == rng_before and numpy.array_equal(numpy.random.get_state()[1], np_before)


def test_pickled_arrays_are_refused_without_mentioning_allow_pickle(tmp_path):
    from plait.chainer import links as L, serializers as S

    path = tmp_path / "p.npz"
    path.write_bytes(_pickled_npz())
    with pytest.raises(_safeio.UnsafeFileError) as info:
        S.load_npz(path, L.Linear(1, 1))
    assert "allow_pickle" not in str(info.value) and "Pickled objects are never loaded" in str(info.value)


def test_safeio_errors_name_file_field_and_fix(tmp_path):
    with pytest.raises(_safeio.DamagedFileError) as info:
        _safeio.load_npz(b"PK\x03\x04junk", what="x.npz")
    err = info.value
    assert err.path == "x.npz" and "restore" in err.fix and str(err).startswith("'x.npz'")
    with pytest.raises(FileNotFoundError):
        _safeio.read_bytes(tmp_path / "nope")


# ---------------------------------------------------------------------------------------------
# The atomic writers


def test_atomic_writers(tmp_path, monkeypatch):
    target = tmp_path / "f.bin"
    _safeio.write_file_atomically(target, b"one")
    _safeio.write_file_atomically(target, lambda f: f.write(b"two"))
    assert target.read_bytes() == b"two"

    def broken(f):
        f.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        _safeio.write_file_atomically(target, broken)
    assert target.read_bytes() == b"two" and sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]
    with pytest.raises(RuntimeError):
        with _safeio.atomic_path(target) as tmp:
            Path(tmp).write_bytes(b"three")
            raise RuntimeError
    assert target.read_bytes() == b"two" and sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]
    with _safeio.atomic_path(target) as tmp:
        Path(tmp).write_bytes(b"three")
    assert target.read_bytes() == b"three"
    folder = tmp_path / "d"
    _safeio.write_dir_atomically(folder, {"a": b"1", "s/b": b"2"})
    _safeio.write_dir_atomically(folder, {"c": b"3"})
    assert sorted(p.name for p in folder.iterdir()) == ["c"]
    with pytest.raises(ValueError):
        _safeio.write_dir_atomically(folder, {"../escape": b"x"})
    assert sorted(p.name for p in folder.iterdir()) == ["c"] and not (tmp_path / "escape").exists()
    _safeio.remove_dir_atomically(folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def test_one_atomic_writer_is_used_everywhere():
    import inspect

    import plait.chainer.serializers.hdf5 as hdf5
    import plait.chainer.serializers.npz as npz
    import plait.util as util

    assert md.write_dir_atomically is _safeio.write_dir_atomically
    assert md.write_file_atomically is _safeio.write_file_atomically
    for module in (util, npz, hdf5, md):
        source = inspect.getsource(module)
        assert "mkstemp(" not in source and "os.replace(" not in source and "mkdtemp(" not in source, module.__name__


def test_framework_shims_keep_the_garbage_collector_on_after_bad_msgpack():
    import gc

    torch = pytest.importorskip("torch")
    from plait.api import PyTorchWrapper_v2

    model = PyTorchWrapper_v2(torch.nn.Linear(2, 2))
    assert gc.isenabled()
    for bad in (b"\xc1", b"\x92\xc1", b"\xdd\xff\xff\xff\xff"):
        with pytest.raises(ValueError, match="msgpack"):
            model.shims[0].from_bytes(bad)
        assert gc.isenabled(), bad


def test_chainer_load_walks_a_custom_serialize_once_and_keeps_its_arrays_on_failure(tmp_path):
    from plait.chainer import serializers as S

    class Custom:
        def __init__(self):
            self.calls = 0
            self.a = numpy.zeros(3, "f4")
            self.b = numpy.zeros(2, "f4")

        def serialize(self, serializer):  # a user class: Chainer calls this exactly once
            self.calls += 1
            serializer("a", self.a)
            serializer("b", self.b)

    good = tmp_path / "good.npz"
    numpy.savez(good, a=numpy.arange(3, dtype="f4"), b=numpy.ones(2, "f4"))
    obj = Custom()
    S.load_npz(good, obj)
    assert obj.calls == 1 and obj.a.tolist() == [0, 1, 2] and obj.b.tolist() == [1, 1]
    bad = tmp_path / "bad.npz"
    numpy.savez(bad, a=numpy.full(3, 7, "f4"), b=numpy.array(["x", "y"]))
    with pytest.raises(ValueError, match="dtype"):
        S.load_npz(bad, obj)
    assert obj.calls == 2 and obj.a.tolist() == [0, 1, 2]  # 'a' was read but never written
