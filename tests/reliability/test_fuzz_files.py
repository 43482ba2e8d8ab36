"""Issue 17, "what it must show" 2 (the file readers): a hypothesis fuzz suite over
Model.from_bytes, the Chainer load_npz/load_hdf5 and the model-directory readers.

Valid files are mutated (truncated, bits flipped, bytes set, inserted and deleted, headers
rewritten to declare huge shapes, JSON fields replaced) and each must load correctly or raise
a clean plait error (ValueError, its FileFormatError subclasses, CLIError; KeyError only for
a name missing from a Chainer file, as in Chainer), never hang, crash or change the model.

Each fuzz loop runs in a child process with a time limit, so that a crash (a segfault in a
native reader) or a hang fails its test instead of stopping the run. The whole file takes
well under a minute; PLAIT_FUZZ_EXAMPLES scales the number of examples (e.g. for a longer
run by hand).
"""
import gc
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy
import pytest
sys.path.insert(0, str(Path(__file__).resolve().parent))  # also when a child loads this file
from _configs import TINY  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve()
SCALE = float(os.environ.get("PLAIT_FUZZ_EXAMPLES", "1"))


def _in_child(func_name, *args, timeout=50):
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('fuzz_files', {str(HERE)!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        f"mod.{func_name}(*{args!r})\n"
        "print('FUZZ-OK')\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout * max(1.0, SCALE),
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"{func_name} hung (over {err.timeout} s)")
    if proc.returncode < 0:
        pytest.fail(f"{func_name} crashed with signal {-proc.returncode}:\n{proc.stderr[-4000:]}")
    assert proc.returncode == 0 and "FUZZ-OK" in proc.stdout, proc.stdout[-4000:] + proc.stderr[-8000:]


def test_fuzz_model_from_bytes():
    _in_child("fuzz_from_bytes")


def test_fuzz_chainer_load_npz():
    _in_child("fuzz_load_npz")


def test_fuzz_chainer_load_hdf5():
    pytest.importorskip("h5py")
    _in_child("fuzz_load_hdf5")


def test_fuzz_model_directory_readers(tmp_path):
    from plait.cli import main

    cfg = tmp_path / "tiny.cfg"
    cfg.write_text(TINY, encoding="utf8")
    assert main(["train", str(cfg), "--output", str(tmp_path / "out"), "--no-progress"]) == 0
    _in_child("fuzz_model_dir", str(tmp_path / "out" / "model-last"), str(tmp_path / "work"))





# ---------------------------------------------------------------------------------------------
# What runs in the child processes (not collected: no test_ prefix)


def _settings(n):
    from hypothesis import HealthCheck, settings

    return settings(
        max_examples=max(1, int(n * SCALE)), deadline=None, database=None, derandomize=False,
        suppress_health_check=list(HealthCheck), print_blob=True,
    )


def _alarm(seconds):
    """A per-example hang guard inside the child: SIGALRM turns a hang into a failure."""

    def ring(signum, frame):
        raise AssertionError(f"an example took more than {seconds} s (a hang)")

    signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)


def _mutations():
    from hypothesis import strategies as st

    op = st.one_of(
        st.tuples(st.just("flip"), st.integers(0, 1 << 30), st.integers(0, 7)),
        st.tuples(st.just("truncate"), st.integers(0, 1 << 30)),
        st.tuples(st.just("set"), st.integers(0, 1 << 30), st.integers(0, 255)),
        st.tuples(st.just("insert"), st.integers(0, 1 << 30), st.binary(min_size=1, max_size=16)),
        st.tuples(st.just("delete"), st.integers(0, 1 << 30), st.integers(1, 64)),
        st.tuples(st.just("int32"), st.integers(0, 1 << 30), st.sampled_from([0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 24])),
    )
    return st.lists(op, min_size=1, max_size=4)


def _mutate(data, ops):
    data = bytearray(data)
    for op in ops:
        if not data and op[0] != "insert":
            continue
        kind, pos = op[0], op[1] % max(1, len(data))
        if kind == "flip":
            data[pos] ^= 1 << op[2]
        elif kind == "truncate":
            del data[pos:]
        elif kind == "set":
            data[pos] = op[2]
        elif kind == "insert":
            data[pos:pos] = op[2]
        elif kind == "delete":
            del data[pos : pos + op[2]]
        elif kind == "int32":
            data[pos : pos + 4] = op[2].to_bytes(4, "little")
    return bytes(data)


def _clean(err, allow_key=False):
    """Whether `err` is a clean plait error."""
    from plait.cli._common import CLIError

    if isinstance(err, (ValueError, CLIError)):
        return True
    if allow_key and isinstance(err, KeyError) and "Deserializer" in str(err):
        return True
    return False


def _thinc_model():
    from plait.api import Relu, Softmax, chain

    return chain(Relu(5, 4), Softmax(3, 5)).initialize()


def _huge_msgpack(data, which, shape):
    import srsly

    msg = srsly.msgpack_loads(data)
    arrays = [(i, k) for i, params in enumerate(msg["params"]) for k in params]
    i, k = arrays[which % len(arrays)]
    value = msg["params"][i][k]
    msg["params"][i][k] = {b"nd": True, b"type": value.dtype.str, b"kind": b"", b"shape": list(shape), b"data": value.tobytes()[:16]}
    return srsly.msgpack_dumps(msg)


def fuzz_from_bytes():
    from hypothesis import given, strategies as st

    base = _thinc_model().to_bytes()
    huge = st.lists(st.sampled_from([0, 1, 3, 4, 5, 1 << 20, 1 << 31, 1 << 40, -1]), min_size=0, max_size=3)

    @_settings(400)
    @given(ops=_mutations(), structural=st.none() | st.tuples(st.integers(0, 9), huge))
    def check(ops, structural):
        data = base
        if structural is not None:
            data = _huge_msgpack(data, *structural)
        data = _mutate(data, ops)
        model = _thinc_model()
        before = model.to_bytes()
        shapes = [(n.name, p, n.get_param(p).shape, n.get_param(p).dtype) for n in model.walk() for p in n.param_names if n.has_param(p)]
        _alarm(10)
        try:
            model.from_bytes(data)
        except Exception as err:  # noqa: BLE001 - the point is which errors come out
            assert _clean(err), f"{type(err).__name__}: {err}"
            assert model.to_bytes() == before, "a failed load changed the model"
        else:
            after = [(n.name, p, n.get_param(p).shape, n.get_param(p).dtype) for n in model.walk() for p in n.param_names if n.has_param(p)]
            assert [s[2:] for s in after] == [s[2:] for s in shapes], "loaded weights of the wrong shape or dtype"
        finally:
            signal.alarm(0)
        assert gc.isenabled()

    check()


def _link():
    from plait.chainer import Chain
    from plait.chainer import links as L

    return Chain(l1=L.Linear(4, 3), l2=L.Linear(3, 2))


def _params(link):
    return [(name, p.data.copy()) for name, p in sorted(link.namedparams())]


def _npz_with_huge_header(data, which, shape):
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        infos = src.infolist()
        for i, info in enumerate(infos):
            member = src.read(info)
            if i == which % len(infos):
                stream = io.BytesIO(member)
                version = numpy.lib.format.read_magic(stream)
                read = numpy.lib.format.read_array_header_1_0 if version == (1, 0) else numpy.lib.format.read_array_header_2_0
                header = read(stream)
                rest = stream.read()
                buf = io.BytesIO()
                numpy.lib.format.write_array_header_1_0(buf, {"descr": numpy.lib.format.dtype_to_descr(header[2]), "fortran_order": bool(header[1]), "shape": tuple(shape)})
                member = buf.getvalue() + rest
            dst.writestr(info.filename, member)
    return out.getvalue()


def _check_chainer_load(load, data, suffix, tmp):
    link = _link()
    before = _params(link)
    path = os.path.join(tmp, "f" + suffix)
    with open(path, "wb") as f:
        f.write(data)
    _alarm(10)
    try:
        load(path, link)
    except Exception as err:  # noqa: BLE001
        assert _clean(err, allow_key=True), f"{type(err).__name__}: {err}"
        after = _params(link)
        assert all(numpy.array_equal(a[1], b[1]) for a, b in zip(before, after)), "a failed load changed the model"
    else:
        after = _params(link)
        assert [(n, a.shape, a.dtype) for n, a in after] == [(n, a.shape, a.dtype) for n, a in before]
    finally:
        signal.alarm(0)


def fuzz_load_npz():
    import tempfile

    from hypothesis import given, strategies as st

    from plait.chainer import serializers as S

    tmp = tempfile.mkdtemp()
    buf = io.BytesIO()
    S.save_npz(buf, _link(), compression=False)
    plain = buf.getvalue()
    buf = io.BytesIO()
    S.save_npz(buf, _link(), compression=True)
    packed = buf.getvalue()
    shapes = st.lists(st.sampled_from([0, 1, 2, 3, 4, 1 << 20, 1 << 31, 1 << 40]), min_size=0, max_size=3)

    @_settings(400)
    @given(compressed=st.booleans(), ops=_mutations() | st.just([]), huge=st.none() | st.tuples(st.integers(0, 9), shapes))
    def check(compressed, ops, huge):
        data = packed if compressed else plain
        if huge is not None:
            data = _npz_with_huge_header(data, *huge)
        data = _mutate(data, ops)
        _check_chainer_load(S.load_npz, data, ".npz", tmp)

    check()
    shutil.rmtree(tmp, ignore_errors=True)


def fuzz_load_hdf5():
    import tempfile

    import h5py
    from hypothesis import given, strategies as st

    from plait.chainer import serializers as S

    tmp = tempfile.mkdtemp()
    S.save_hdf5(os.path.join(tmp, "base.h5"), _link())
    base = open(os.path.join(tmp, "base.h5"), "rb").read()

    def declared(shape, dtype):
        path = os.path.join(tmp, "declared.h5")
        with h5py.File(path, "w") as f:
            for name, p in sorted(_link().namedparams()):
                f.create_dataset(name.lstrip("/"), data=p.data)
            del f["l1/W"]
            f.create_dataset("l1/W", shape=tuple(shape), dtype=dtype, chunks=True if all(shape) else None)
        return open(path, "rb").read()

    dims = st.lists(st.sampled_from([1, 3, 4, 1 << 16, 1 << 24]), min_size=1, max_size=3)

    @_settings(200)
    @given(
        ops=_mutations() | st.just([]),
        huge=st.none() | st.tuples(dims, st.sampled_from(["f4", "f8", "i4", "c8", "S4", "u1"])),
    )
    def check(ops, huge):
        data = base if huge is None else declared(*huge)
        _check_chainer_load(S.load_hdf5, _mutate(data, ops), ".h5", tmp)

    check()
    shutil.rmtree(tmp, ignore_errors=True)


_JSON_VALUES = [None, -1, 0, 10 ** 12, 1.5, "x", [], {}, [1, 2], {"a": 1}, True, "\x1b[31m"]


def fuzz_model_dir(source, work):
    from hypothesis import given, strategies as st

    from plait.cli import _modeldir as md
    from plait.cli._common import CLIError

    files = [md.MODEL_FILE, md.CONFIG_FILE, md.META_FILE, md.SAMPLE_FILE, md.OPTIMIZER_FILE, md.STATE_FILE, md.RAW_WEIGHTS_FILE]
    originals = {name: (Path(source) / name).read_bytes() for name in files if (Path(source) / name).is_file()}
    names = sorted(originals)

    def json_edit(data, path, value):
        obj = json.loads(data)
        node = obj
        for key in path[:-1]:
            if isinstance(node, dict) and node:
                node = node[sorted(node)[key % len(node)]]
        if isinstance(node, dict) and node:
            node[sorted(node)[path[-1] % len(node)]] = value
        return json.dumps(obj).encode()

    @_settings(120)
    @given(
        name=st.sampled_from(names),
        ops=_mutations(),
        edit=st.none() | st.tuples(st.lists(st.integers(0, 20), min_size=1, max_size=3), st.sampled_from(_JSON_VALUES)),
    )
    def check(name, ops, edit):
        target = Path(work) / "model-last"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target)
        data = originals[name]
        if edit is not None and name.endswith(".json"):
            data = json_edit(data, *edit)
        else:
            data = _mutate(data, ops)
        (target / name).write_bytes(data)
        _alarm(20)
        try:
            loaded = md.load_model_dir(target, raw_weights=True)
            state = md.read_json(target / md.STATE_FILE)
            from plait.api import Adam

            md.restore_optimizer_state(Adam(0.001), loaded.model, md.read_file(target / md.OPTIMIZER_FILE), state.get("optimizer"), model_dir=target)
            md.set_rng_states(state.get("rng"), numpy.random.default_rng(0), model_dir=target)
        except CLIError as err:
            message = str(err)
            assert "Damaged" in message or name in message or "Cannot resume" in message, message
            for unclear in ("BadZipFile", "EOFError", "IndexError", "allow_pickle", "KeyError"):
                assert unclear not in message, message
        except Exception as err:  # noqa: BLE001
            raise AssertionError(f"{name}: {type(err).__name__}: {err}") from err
        finally:
            signal.alarm(0)
        assert gc.isenabled()

    state = numpy.random.get_state()
    check()
    numpy.random.set_state(state)
