"""NPZ and HDF5 serializers: Chainer's key layout, round trips, atomic writes, clear errors."""
import os

import numpy
import pytest

import plait.chainer as chainer
import plait.chainer.functions as F
import plait.chainer.links as L
from plait.chainer import Variable, serializers


class MLP(chainer.Chain):
    def __init__(self, n_units=5):
        super().__init__(l1=L.Linear(4, n_units), l2=L.Linear(n_units, 3))

    def __call__(self, x):
        return self.l2(F.relu(self.l1(x)))


class WithPersistent(chainer.Link):
    def __init__(self):
        super().__init__(W=(2, 2))
        self.W.data[...] = 1
        self.add_persistent("count", 0)
        self.add_persistent("mean", numpy.zeros(2, "f"))
        self.add_persistent("flag", False)


def test_dictionary_serializer_layout():
    model = L.Classifier(MLP())
    s = serializers.DictionarySerializer()
    s.save(model)
    assert sorted(s.target) == ["predictor/l1/W", "predictor/l1/b", "predictor/l2/W", "predictor/l2/b"]
    assert s.target["predictor/l1/W"] is not None
    numpy.testing.assert_array_equal(s.target["predictor/l1/W"], model.predictor.l1.W.data)
    sub = s["a"]["/b/"]
    assert sub.path == "a/b/" and sub.target is s.target
    sub("/x", numpy.float32(1))
    assert "a/b/x" in s.target


def test_npz_roundtrip_and_identical_predictions(tmp_path):
    numpy.random.seed(0)
    a, b = L.Classifier(MLP()), L.Classifier(MLP())
    path = tmp_path / "my.model"
    serializers.save_npz(str(path), a)
    assert path.exists() and not (tmp_path / "my.model.npz").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["my.model"]  # no temporary file left behind
    serializers.load_npz(str(path), b)
    x = Variable(numpy.random.rand(7, 4).astype("f"))
    numpy.testing.assert_array_equal(a.predictor(x).data, b.predictor(x).data)
    for p, q in zip(a.params(), b.params()):
        assert p.data is not q.data


def test_npz_uncompressed_and_file_objects(tmp_path):
    a, b = MLP(), MLP()
    path = tmp_path / "plain.npz"
    serializers.save_npz(str(path), a, compression=False)
    with open(path, "rb") as f:
        serializers.load_npz(f, b)
    numpy.testing.assert_array_equal(a.l2.W.data, b.l2.W.data)
    import io

    buf = io.BytesIO()
    serializers.save_npz(buf, a)
    buf.seek(0)
    c = MLP()
    serializers.load_npz(buf, c)
    numpy.testing.assert_array_equal(a.l1.b.data, c.l1.b.data)


def test_persistent_values_roundtrip(tmp_path):
    a = WithPersistent()
    a.count = 7
    a.mean[...] = [1.5, 2.5]
    a.flag = True
    path = tmp_path / "p.npz"
    serializers.save_npz(str(path), a)
    b = WithPersistent()
    serializers.load_npz(str(path), b)
    assert b.count == 7 and isinstance(b.count, int)
    assert b.flag is True
    numpy.testing.assert_array_equal(b.mean, [1.5, 2.5])


def test_load_errors_name_the_key(tmp_path):
    path = tmp_path / "small.npz"
    serializers.save_npz(str(path), MLP(n_units=5))
    with pytest.raises(ValueError, match=r"'l1/W' has shape \(5, 4\) in the file but the target array has shape \(6, 4\)"):
        serializers.load_npz(str(path), MLP(n_units=6))
    with pytest.raises(KeyError, match="key 'predictor/l1/W' is not in the file"):
        serializers.load_npz(str(path), L.Classifier(MLP()))


def test_failed_save_leaves_old_file(tmp_path):
    path = tmp_path / "keep.npz"
    serializers.save_npz(str(path), MLP())
    before = path.read_bytes()

    class Broken(chainer.Link):
        def serialize(self, serializer):
            serializer("x", numpy.ones(2))
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        serializers.save_npz(str(path), Broken())
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["keep.npz"]


def test_npz_deserializer_non_strict():
    d = serializers.NpzDeserializer({"a": numpy.ones(2)}, strict=False)
    assert d("missing", 3) == 3
    out = numpy.zeros(2)
    d("a", out)
    numpy.testing.assert_array_equal(out, [1, 1])
    assert d("a", None).shape == (2,)


def test_hdf5_roundtrip_or_clear_error(tmp_path):
    path = tmp_path / "m.h5"
    try:
        import h5py  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="optional 'h5py' package"):
            serializers.save_hdf5(str(path), MLP())
        with pytest.raises(RuntimeError, match="pip install h5py"):
            serializers.load_hdf5(str(path), MLP())
        return
    a, b = L.Classifier(MLP()), L.Classifier(MLP())
    serializers.save_hdf5(str(path), a)
    serializers.load_hdf5(str(path), b)
    for p, q in zip(a.params(), b.params()):
        numpy.testing.assert_array_equal(p.data, q.data)
    opt = chainer.optimizers.Adam()
    opt.setup(a)
    serializers.save_hdf5(str(tmp_path / "o.h5"), opt)
    fresh = chainer.optimizers.Adam()
    fresh.setup(b)
    serializers.load_hdf5(str(tmp_path / "o.h5"), fresh)
    assert fresh.t == opt.t


def test_serializer_base_classes_are_exported():
    assert issubclass(serializers.DictionarySerializer, chainer.Serializer)
    assert issubclass(serializers.NpzDeserializer, chainer.Deserializer)
    assert issubclass(chainer.Serializer, chainer.AbstractSerializer)
    with pytest.raises(NotImplementedError):
        chainer.AbstractSerializer()("k", 1)
