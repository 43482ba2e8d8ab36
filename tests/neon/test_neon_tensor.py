"""plait.neon: gen_backend, the registry, allocation and CPUTensor (views, slices, set/get, laziness).

Values are checked against numpy (float64 where arithmetic is involved).
"""
import numpy as np
import pytest

import plait.neon as neon
from plait.neon import (Backend, Block, CPUTensor, NervanaCPU, NervanaObject, OpTreeNode, Tensor,
                        gen_backend)
from plait.neon import backend as neon_backend_mod
from plait.neon import nervanacpu as neon_cpu_mod


@pytest.fixture
def be():
    return NervanaCPU(rng_seed=0)


def test_module_paths_mirror_neon():
    assert neon_backend_mod.Tensor is Tensor
    assert neon_backend_mod.OpTreeNode is OpTreeNode
    assert neon_backend_mod.Backend is Backend
    assert neon_backend_mod.Block is Block
    assert neon_cpu_mod.CPUTensor is CPUTensor
    assert neon_cpu_mod.NervanaCPU is NervanaCPU
    assert issubclass(CPUTensor, Tensor) and issubclass(NervanaCPU, Backend)
    assert issubclass(OpTreeNode, tuple)
    assert (Block.epoch, Block.minibatch, Block.fprop, Block.bprop, Block.update) == (0, 1, 2, 3, 4)
    assert neon_backend_mod.OpCollection.reduction_ops == {"sum", "max", "min", "argmax", "argmin"}


def test_gen_backend_sets_nervana_object_be_and_batch_size():
    be = gen_backend(backend="cpu", rng_seed=3, datatype=np.float32, batch_size=16)
    assert isinstance(be, NervanaCPU)
    assert NervanaObject.be is be
    assert be.bsz == 16
    assert be.default_dtype == np.float32
    from plait.neon.nervanagpu import NervanaGPU, gpu_unavailable_reason
    assert Backend.backends == {"cpu": NervanaCPU, "gpu": NervanaGPU}
    assert Backend.backend_choices() == ["cpu", "gpu"]
    assert isinstance(Backend.allocate_backend("cpu", rng_seed=1), NervanaCPU)
    with pytest.raises(ValueError, match="backend must be one of"):
        Backend.allocate_backend("tpu")
    if gpu_unavailable_reason() is not None:   # tests/neon/test_gpu_backend.py covers both cases
        with pytest.raises(RuntimeError, match="gpu"):
            gen_backend(backend="gpu")
    with pytest.raises(ValueError, match="backend must be one of"):
        gen_backend(backend="nope")
    be.cleanup_backend()


def test_gen_backend_accepts_neons_keywords():
    be = gen_backend("cpu", rng_seed=None, datatype=np.float16, batch_size=8, stochastic_round=False,
                     device_id=0, max_devices=1, compat_mode="caffe", deterministic_update=None,
                     deterministic=None, cache_dir=None)
    assert be.check_caffe_compat()
    assert be.default_dtype == np.float16
    with pytest.raises(ValueError, match="default dtype"):
        gen_backend(datatype=np.int32)
    with pytest.raises(ValueError, match="compat_mode"):
        gen_backend(compat_mode="torch")


def test_several_backends_stay_usable():
    be1 = gen_backend(rng_seed=1, batch_size=2)
    a = be1.array([[1.0, 2.0]])
    be2 = gen_backend(rng_seed=2, datatype=np.float64, batch_size=4)
    b = be2.array([[3.0, 4.0]])
    assert NervanaObject.be is be2
    out1 = be1.empty((1, 2))
    out1[:] = a * 2
    out2 = be2.empty((1, 2))
    out2[:] = b + 1
    np.testing.assert_array_equal(out1.get(), [[2, 4]])
    np.testing.assert_array_equal(out2.get(), [[4, 5]])
    assert out1.dtype == np.float32 and out2.dtype == np.float64
    assert be1.iobuf(3).shape == (3, 2) and be2.iobuf(3).shape == (3, 4)


def test_nervana_object_names():
    class Layer(NervanaObject):
        pass

    layer = Layer()
    assert layer.name.startswith("Layer_")
    assert Layer(name="x").name == "x"
    assert layer.classnm == "Layer"
    assert neon.NervanaObject is NervanaObject


def test_allocation(be):
    for make, fill in ((be.zeros, 0), (be.ones, 1)):
        t = make((3, 4))
        assert t.shape == (3, 4) and t.dtype == np.float32 and t.size == 12
        np.testing.assert_array_equal(t.get(), np.full((3, 4), fill))
    assert be.empty((2, 5), dtype=np.float16).dtype == np.float16
    np.testing.assert_array_equal(be.empty((3, 3)).get(), 0)  # zeroed, as neon's CPU backend's
    a = be.array(np.arange(6).reshape(2, 3), dtype=np.int32, name="a")
    assert a.dtype == np.int32 and a.name == "a"
    np.testing.assert_array_equal(a.get(), np.arange(6).reshape(2, 3))
    for make, fill in ((be.zeros_like, 0), (be.ones_like, 1)):
        t = make(a)
        assert t.shape == (2, 3) and t.dtype == np.float32
        np.testing.assert_array_equal(t.get(), np.full((2, 3), fill))
    assert be.empty_like(a).shape == (2, 3)
    assert be.empty_like(a, dtype=np.float64).dtype == np.float64
    assert be.zeros_like(a, np.float16).dtype == np.float16  # neon 2.6's CPU order
    named = be.zeros_like(a, "grad_a")  # the page's order: (other_ary, name)
    assert named.name == "grad_a" and named.dtype == np.float32


def test_one_d_shapes_become_columns(be):
    """neon tensors are at least 2-D: a length-n vector is an (n, 1) column."""
    assert be.zeros(5).shape == (5, 1)
    assert be.zeros((5,)).shape == (5, 1)
    assert be.array([1.0, 2.0, 3.0]).shape == (3, 1)
    assert be.array(7.0).shape == (1, 1)


def test_iobuf_and_shared_sizes(be):
    with pytest.raises(ValueError, match="batch size"):
        be.iobuf(4)
    with pytest.raises(ValueError, match=r"be.bsz is 0.*batch_size=N"):
        gen_backend().iobuf(4)  # gen_backend's default batch_size is 0
    be.bsz = 8
    assert be.iobuf(4).shape == (4, 8)
    assert be.iobuf((3, 2)).shape == (3, 16)
    assert be.iobuf((2, 3, 4)).shape == (24, 8)
    x = be.ones((4, 8))
    assert be.iobuf(4, x=x) is x
    shared = be.ones((100, 8))
    buf = be.iobuf((3,), shared=shared)
    assert buf.shape == (3, 8)
    np.testing.assert_array_equal(buf.get(), 0)  # zeroed, in shared's memory
    assert np.shares_memory(buf._tensor, shared._tensor)
    assert be.shared_iobuf_size((3, 8), "Data") == 24


def test_getitem_views_and_neon_indexing(be):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = be.array(base)
    assert t[:] is t
    row = t[1]
    assert row.shape == (1, 6)  # integer index keeps the axis
    np.testing.assert_array_equal(row.get(), base[1:2])
    col = t[:, 2]
    assert col.shape == (4, 1)
    block = t[1:3, 2:5]
    assert block.shape == (2, 3)
    block[:] = 0  # a view: writes land in t
    assert (t.get()[1:3, 2:5] == 0).all()
    assert t[-1].shape == (1, 6)
    with pytest.raises(IndexError, match="out of range"):
        t[9]
    t3 = be.array(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    assert t3[0].shape == (3, 4)  # size-1 axes are dropped beyond two dimensions


def test_setitem_writes_only_the_slice(be):
    a = be.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    b = be.ones((3, 4))
    before = a.get()
    a[1:2] = b[1:2] * 10 + a[1:2]
    expected = before.copy()
    expected[1] += 10
    np.testing.assert_array_equal(a.get(), expected)
    a[:, 3] = 5.0  # scalar into a column
    expected[:, 3] = 5
    np.testing.assert_array_equal(a.get(), expected)
    a[0] = np.array([9, 8, 7, 6])  # host array into a row
    expected[0] = [9, 8, 7, 6]
    np.testing.assert_array_equal(a.get(), expected)
    a[2:3, 0:2] = b[0:1, 0:2]  # tensor into a block
    expected[2, 0:2] = 1
    np.testing.assert_array_equal(a.get(), expected)


def test_setitem_with_index_array(be):
    a = be.zeros((5, 2))
    a[np.array([0, 3])] = 4.0
    np.testing.assert_array_equal(a.get()[:, 0], [4, 0, 0, 4, 0])


def test_set_get_fill_copy(be):
    t = be.empty((2, 3))
    t.set(np.arange(6))  # same size, other shape: reshaped
    np.testing.assert_array_equal(t.get(), np.arange(6).reshape(2, 3))
    g = t.get()
    g[0, 0] = 100  # get() is a copy
    assert t.get()[0, 0] == 0
    t.fill(2.5)
    np.testing.assert_array_equal(t.get(), 2.5)
    u = be.zeros((2, 3))
    u.copy(t)
    np.testing.assert_array_equal(u.get(), 2.5)
    u.copy_from(np.ones((2, 3)))
    np.testing.assert_array_equal(u.get(), 1)
    deep = u.copy()
    deep[:] = 0
    np.testing.assert_array_equal(u.get(), 1)
    with pytest.raises(ValueError, match="shape"):
        t.set(np.ones(5))
    with pytest.raises(TypeError, match="cannot assign a str"):
        t[:] = "x"
    assert t.raw() == t._tensor.ctypes.data
    assert t.asnumpyarray() is t._tensor


def test_reshape_transpose_share_take(be):
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = be.array(base)
    r = t.reshape(4, 3)
    assert r.shape == (4, 3) and t.reshape((3, 4)) is t
    r[0] = 0
    assert t.get()[0, 0] == 0 and t.get()[0, 2] == 0  # a view
    with pytest.raises(ValueError, match="sizes must match"):
        t.reshape(5, 3)
    t.set(base)
    np.testing.assert_array_equal(t.T.get(), base.T)
    assert t.transpose().shape == (4, 3)
    out = be.empty((4, 3))
    t.transpose(out=out)
    np.testing.assert_array_equal(out.get(), base.T)
    t3 = be.zeros((2, 3, 4))
    assert t3.T.shape == (2, 4, 3)  # 3-D: axes 1 and 2 swapped
    s = t.share((2, 5))
    assert s.shape == (2, 5) and np.shares_memory(s._tensor, t._tensor)
    with pytest.raises(ValueError, match="needs 20 elements"):
        t.share((4, 5))
    taken = t.take(np.array([2, 0]), axis=1)
    np.testing.assert_array_equal(taken.get(), base[:, [2, 0]])
    taken = be.take(t, be.array([1], dtype=np.int32), 0)
    np.testing.assert_array_equal(taken.get(), base[[1]])
    out = be.empty((3, 2))
    assert be.take(t, np.array([3, 1]), 1, out=out) is out
    np.testing.assert_array_equal(out.get(), base[:, [3, 1]])


def test_float16_is_stored_as_float16(be):
    h = be.array(np.array([[0.1, 1000.0, -2.5]]), dtype=np.float16)
    assert h.dtype == np.float16 and h._tensor.dtype == np.float16
    out = be.empty((1, 3), dtype=np.float16)
    out[:] = h * h / 1000.0  # h * h overflows float16 at 1000 but not the float32 computation
    assert out._tensor.dtype == np.float16
    hv = h.get().astype(np.float64)
    np.testing.assert_allclose(out.get().astype(np.float64), hv * hv / 1000.0, rtol=2e-3, atol=1e-4)


def test_integer_outputs_are_clipped(be):
    out = be.empty((1, 3), dtype=np.uint8)
    out[:] = be.array([[-5.0, 100.4, 1000.0]]) * 1
    np.testing.assert_array_equal(out.get(), [[0, 100, 255]])


def test_arithmetic_is_lazy(be):
    a = be.array([[1.0, 2.0]])
    b = be.array([[10.0, 20.0]])
    tree = a * b + 1
    assert isinstance(tree, OpTreeNode)
    assert tree[0]["op"] == "add" and tree[0]["shape"] == (1, 2)
    assert tree[1][0]["op"] == "mul" and tree[2] == 1
    # change the inputs after building: the values at assignment time are used
    a[:] = 3.0
    out = be.empty((1, 2))
    out[:] = tree
    np.testing.assert_array_equal(out.get(), [[31, 61]])
    for expr in (a + 1, 1 - a, a / 2, 2 / a, a ** 2, 2 ** a, -a, abs(a), a == b, a != b, a < b,
                 a <= b, a > b, a >= b, (a + 1).T, be.exp(a), be.sum(a, axis=1)):
        assert isinstance(expr, OpTreeNode)


def test_nothing_is_computed_before_assignment(be, monkeypatch):
    from plait.neon._arrays import ArrayBackend, ArrayEvaluator

    assigns, evaluations = [], []
    real_assign, real_eval = ArrayBackend._execute_assign, ArrayEvaluator.__call__

    def assign_spy(self, out, value):
        assigns.append(value)
        return real_assign(self, out, value)

    def eval_spy(self, tree):
        evaluations.append(tree)
        return real_eval(self, tree)

    monkeypatch.setattr(ArrayBackend, "_execute_assign", assign_spy)
    monkeypatch.setattr(ArrayEvaluator, "__call__", eval_spy)
    monkeypatch.setenv("PLAIT_NEON_FUSE", "0")
    a = be.ones((2, 2))
    tree = be.sig(be.dot(a, a) * 3 + be.sum(a, axis=0)) - be.max(a)
    be.mean(a)
    be.var(a, axis=1)
    assert assigns == [] and evaluations == []
    out = be.empty((2, 2))
    out[:] = tree
    assert len(assigns) == 1 and len(evaluations) >= 1


def test_optree_helpers(be):
    a = be.array([[1.0, 2.0]], name="a")
    tree = (a + 1) * a
    stack = tree.traverse([])
    assert stack[0] is a and stack[1] == 1 and stack[-1]["op"] == "mul"
    assert tree.pp() == "((a + 1) * a)"
    key, t2i, i2t = tree.intrinsic_key_maps()
    assert t2i == {a: 0} and i2t == {0: a}
    as_list = OpTreeNode.optree_to_list(tree)
    assert isinstance(as_list, list) and as_list[1][1] is a
    back = OpTreeNode.list_to_optree(as_list)
    assert isinstance(back, OpTreeNode) and back.key() == tree.key()
    np.testing.assert_array_equal(tree.asnumpyarray(), [[2, 6]])
    assert isinstance(tree.astensor(), CPUTensor)
    out = be.empty((2, 1))
    tree.transpose(out=out)
    np.testing.assert_array_equal(out.get(), [[2], [6]])
    assert "mul" in str(tree)


def test_execute_needs_an_assign_node(be):
    a = be.ones((2, 2))
    out = be.empty((2, 2))
    node = OpTreeNode({"op": "assign", "shape": (2, 2)}, out, a + 1)
    assert be.execute(node) is out
    np.testing.assert_array_equal(out.get(), 2)
    with pytest.raises(ValueError, match="'assign'"):
        be.execute(a + 1)
    with pytest.raises(ValueError, match="only an 'assign' node"):
        (a + 1).execute()


def test_numpy_arrays_are_refused_in_op_trees(be):
    a = be.ones((2, 2))
    with pytest.raises(TypeError, match="be.array"):
        a + np.ones((2, 2))
    with pytest.raises(TypeError, match="be.array"):
        np.ones((2, 2)) * a


def test_hist_buffers(be):
    t = be.array([[0.5, 1.0, 2.0, 4.0]])
    h = t.hist("w")
    assert h.shape == (1, 64)
    data, tags = be.dump_hist_data()
    assert tags == {"w": 0}
    counts = data.get()[0]
    assert counts.sum() == 4
    bins = np.arange(65) - 48.0
    # log2 values -1, 0, 1, 2 fall in bins offset by 48
    for v in (-1, 0, 1, 2):
        assert counts[int(v - bins[0])] == 1
    be.set_hist_buffers(16, -8)
    assert be.hist_buf.shape == (4096, 16)


def test_timing_marks_and_blocks(be):
    start, end = be.init_mark(), be.init_mark()
    be.record_mark(start)
    be.record_mark(end)
    be.synchronize_mark(end)
    assert be.get_time(start, end) >= 0
    be.begin(Block.epoch, 0)
    be.end(Block.epoch, 0)
    assert be.distribute_data(be.ones((1, 1)), "Data") is None
    assert be.revert_tensor(be.ones((1, 1))) is None
    be.cleanup_backend()


def test_output_dim_and_caffe_mode(be):
    assert be.output_dim(32, 3, 1, 1) == 32
    assert be.output_dim(32, 3, 0, 2) == 15
    assert be.output_dim(32, 3, 0, 1, dilation=2) == 28
    assert be.output_dim(6, 3, 0, 2, pooling=True) == 2  # floor
    assert not be.check_caffe_compat()
    be.set_caffe_compat()
    assert be.check_caffe_compat()
    assert be.output_dim(6, 3, 0, 2, pooling=True) == 3  # caffe rounds pooling up
    assert be.output_dim(5, 2, 1, 2, pooling=True) == 3  # last window inside the padding dropped
    with pytest.raises(ValueError, match="padding"):
        be.output_dim(5, 2, 2, 1, pooling=True)


def test_importing_the_face_leaves_other_faces_and_frameworks_out():
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "import plait.neon, plait.neon.autodiff\n"
        "be = plait.neon.gen_backend(batch_size=2)\n"
        "t = be.ones((2, 2)); t[:] = t * 2 + 1\n"
        "bad = ('torch', 'tensorflow', 'cupy', 'jax', 'plait.chainer', 'plait.api', 'plait.layers')\n"
        "print(json.dumps(sorted(m for m in bad if m in sys.modules)))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == []


def test_a_non_float_default_dtype_is_refused_naming_the_backend():
    from plait.neon import gen_backend

    with pytest.raises(ValueError, match="CPU backend's default dtype.*int32"):
        gen_backend(backend="cpu", datatype=np.int32)
    with pytest.raises(ValueError, match="CPU backend's default dtype"):
        gen_backend(backend="cpu", datatype="not a dtype")



def test_execute_takes_the_tree_as_node_or_optree(be):
    from plait.neon import OpTreeNode

    a = be.ones((2, 2))
    for how in ("positional", "node", "optree"):
        out = be.zeros((2, 2))
        tree = OpTreeNode({"op": "assign", "shape": (2, 2)}, out, a + 1)
        if how == "positional":
            be.execute(tree)
        else:
            be.execute(**{how: tree})
        assert (out.get() == 2).all(), how
    with pytest.raises(TypeError, match="one op-tree"):
        be.execute()
